"""Turn a ``--model`` string into an embedder: WordLlama for ``wordllama:NAME[:DIM]``, else sentence-transformers."""

from __future__ import annotations

import os
from pathlib import Path

from .minilm import Embedder
from .models import DEFAULT_MODEL
from .word_llama import WORDLLAMA_MODELS, WORDLLAMA_PREFIX, WordLlamaEmbedder, known_wordllama

__all__ = ["load_embedder"]


def load_embedder(model: str = DEFAULT_MODEL, *, cache_dir=None, use_cache: bool = True):
    """The embedder a ``--model`` string names.

    Parameters
    ----------
    model : str, default=DEFAULT_MODEL
        ``wordllama:NAME`` or ``wordllama:NAME:DIM`` (see
        :class:`WordLlamaEmbedder` and :data:`WORDLLAMA_MODELS`); anything else
        is a sentence-transformers model: the default MiniLM (the packaged,
        hash-checked copy), a local folder or a Hub name (:func:`resolve_model`).
    cache_dir : str or Path or None, default=None
        The embedding cache folder (:func:`default_cache_dir` when None); also
        where ``build_index`` saves the index.
    use_cache : bool, default=True

    Returns
    -------
    Embedder or WordLlamaEmbedder
        Both satisfy :class:`EmbedderProtocol`; ``load_embedder(e.name)``
        gives back an embedder with the same fingerprint.

    Examples
    --------
    >>> load_embedder("wordllama:l2_supercat_256:64", use_cache=False).fingerprint
    'wordllama:l2_supercat_256@64b47a2dc493/dim64'
    """
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"The 'model' parameter of load_embedder must be a str. Got {type(model).__name__} instead.")
    model = os.fspath(model)
    if model.startswith(WORDLLAMA_PREFIX):
        return WordLlamaEmbedder(model, cache_dir=cache_dir, use_cache=use_cache)
    if model.lower() in ("wordllama", *WORDLLAMA_MODELS) and not Path(model).is_dir():
        raise ValueError(f"Unknown model {model!r}: a WordLlama model is named with its prefix: {known_wordllama()}.")
    return Embedder(model, cache_dir=cache_dir, use_cache=use_cache)
