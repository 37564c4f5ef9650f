"""Sentence embeddings with a model fingerprint and an on-disk cache.

Anything that satisfies :class:`EmbedderProtocol` (a name, a fingerprint and
``encode(texts)`` returning float32, L2-normalised rows) can feed the dense
index. Two models ship: :class:`Embedder` (sentence-transformers, MiniLM by
default) and :class:`WordLlamaEmbedder` (WordLlama's static token embeddings,
from the ``wordllama`` wheel's own files). :func:`load_embedder` turns a
``--model`` string into one of them: ``wordllama:NAME[:DIM]`` is WordLlama,
anything else sentence-transformers.

One module per concept:

- :mod:`~ragcal.embedding.protocol`: :class:`EmbedderProtocol`, what the index
  reads of a model, and the checks that look for it without loading anything;
- :mod:`~ragcal.embedding.models`: :data:`DEFAULT_MODEL` and
  :func:`resolve_model` (the packaged MiniLM, its sha256, a folder or a hub id);
- :mod:`~ragcal.embedding.cache`: :class:`EmbeddingCache`, the SQLite file of
  vectors (:class:`CacheWarning` when an entry or the file is unusable);
- :mod:`~ragcal.embedding.minilm`: :class:`Embedder`, sentence-transformers
  models, one text per forward pass, through the cache;
- :mod:`~ragcal.embedding.word_llama`: :class:`WordLlamaEmbedder` and
  :data:`WORDLLAMA_MODELS`;
- :mod:`~ragcal.embedding.loading`: :func:`load_embedder`.

Importing this package loads no model code: torch, sentence-transformers and
wordllama are imported when a model is first used.
"""

from .cache import CacheWarning, EmbeddingCache
from .loading import load_embedder
from .minilm import Embedder
from .models import DEFAULT_MODEL, ModelSpec, resolve_model
from .protocol import EmbedderProtocol
from .word_llama import WORDLLAMA_MODELS, WordLlamaEmbedder

__all__ = [
    "DEFAULT_MODEL",
    "WORDLLAMA_MODELS",
    "CacheWarning",
    "Embedder",
    "EmbedderProtocol",
    "EmbeddingCache",
    "ModelSpec",
    "WordLlamaEmbedder",
    "load_embedder",
    "resolve_model",
]
