"""Sentence-transformers models (MiniLM by default): one text per forward pass, through the embedding cache.

Every text is encoded on its own (a batch of one, so never padded): its vector
is a function of the model and the text only, bit for bit, whatever else is
encoded in the same call and whatever is already cached. (Batched encoding pads
each text to the longest one in its batch, and the batch shape changes the last
bits of the result, so the vectors used to depend on what happened to be
cached.) On the bundled model and corpus this is no slower than batches of 64.

sentence-transformers (and torch) are imported when the model is first used.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from .cache import CACHE_COMMIT_EVERY, EmbeddingCache, default_cache_dir
from .models import DEFAULT_MODEL, resolve_model

__all__ = ["ENCODING_SCHEME", "Embedder"]

# How vectors are computed, appended to the fingerprint to make the cache key. "b1": every text alone (batch of one).
# Entries written before it existed are keyed by the bare fingerprint and came from length-sorted batches of 64, whose
# vectors depend on the batch; they are therefore never read. Change this tag whenever the scheme changes.
ENCODING_SCHEME = "b1"


class Embedder:
    """Encode texts with a sentence-transformers model, through the cache.

    Parameters
    ----------
    model : str, default=DEFAULT_MODEL
        Model name, hub id or local folder (see :func:`resolve_model`).
    cache_dir : str or Path or None, default=None
        Folder of the embedding cache; :func:`default_cache_dir` when None.
    use_cache : bool, default=True
        False encodes everything and touches no file.
    batch_size : int, default=64
        No longer a model batch: every text is encoded alone (see below). It
        only sets when the progress bar appears by default (more than
        ``2 * batch_size`` texts to encode), as before.
    device : str, default="cpu"

    Notes
    -----
    The model is loaded on first use, not at construction.

    Each text is encoded alone, without padding, so its vector depends on the
    model and the text only: the same bits whether it is encoded cold, read
    from a cache filled by another run, or encoded next to other texts (on the
    same software and hardware; other BLAS kernels may differ in the last bits).

    :attr:`fingerprint` identifies the model (weights and max sequence
    length) and is what score tables and gate files record; it did not change
    with the encoding scheme, so existing gate files stay valid. The cache is
    keyed by :attr:`cache_key` instead, which adds :data:`ENCODING_SCHEME`, so
    vectors cached with an earlier scheme are never reused.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        cache_dir=None,
        use_cache: bool = True,
        batch_size: int = 64,
        device: str = "cpu",
    ):
        self.spec = resolve_model(model)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.use_cache = use_cache
        self.batch_size = batch_size
        self.device = device
        self._model = None
        self._cache = None
        self.last_stats = {"cached": 0, "encoded": 0}
        self.stats = {"cached": 0, "encoded": 0}  # over every call, e.g. for a command's summary line

    @property
    def model(self):
        """The loaded ``SentenceTransformer``."""
        if self._model is None:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging

            # Loading takes well under a second: no "Loading weights" progress bar (in a notebook it becomes a widget
            # that reads "model not found" once the notebook is saved and reopened).
            was_enabled = transformers_logging.is_progress_bar_enabled()
            transformers_logging.disable_progress_bar()
            try:
                self._model = SentenceTransformer(self.spec.location, device=self.device)
            finally:
                if was_enabled:
                    transformers_logging.enable_progress_bar()
        return self._model

    @property
    def name(self) -> str:
        """The model name that was asked for (:attr:`ModelSpec.name`), as recorded in an index's ``config``."""
        return self.spec.name

    @property
    def fingerprint(self) -> str:
        """``name@<12 hex of weights sha256>`` plus the max sequence length.

        For a hub model the hash is taken over the loaded parameters.
        """
        digest = self.spec.weights_sha256
        if digest is None:
            import torch  # noqa: F401  (present whenever the model is)

            hasher = hashlib.sha256()
            for name, tensor in sorted(self.model.state_dict().items()):
                hasher.update(name.encode())
                hasher.update(tensor.detach().cpu().contiguous().numpy().tobytes())
            digest = hasher.hexdigest()
        max_length = self.model.max_seq_length if self._model is not None else self._max_seq_length_from_config()
        return f"{self.spec.name}@{digest[:12]}/max{max_length}"

    @property
    def cache_key(self) -> str:
        """The cache's ``model`` key: :attr:`fingerprint` plus ``/`` and :data:`ENCODING_SCHEME`."""
        return f"{self.fingerprint}/{ENCODING_SCHEME}"

    def _max_seq_length_from_config(self):
        config = Path(self.spec.location) / "sentence_bert_config.json"
        if config.is_file():
            import json

            return json.loads(config.read_text()).get("max_seq_length")
        return self.model.max_seq_length

    @property
    def dimension(self) -> int:
        model = self.model
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def _encode_uncached(self, texts: list[str], show_progress_bar, *, store=None) -> np.ndarray:
        """Encode each text alone (a batch of one: no padding, no dependence on the other texts).

        ``store(texts, vectors)``, when given, is called after every
        :data:`CACHE_COMMIT_EVERY` texts and at the end, so that a run killed
        half-way has committed what it encoded (each call is one transaction).
        """
        from tqdm.autonotebook import tqdm

        if show_progress_bar is None:
            show_progress_bar = len(texts) > 2 * self.batch_size
        model, dimension = self.model, self.dimension
        output = np.empty((len(texts), dimension), dtype=np.float32)
        for position, text in enumerate(tqdm(texts, desc="Embedding", unit="text", disable=not show_progress_bar)):
            vector = model.encode(
                [text], batch_size=1, show_progress_bar=False, convert_to_numpy=True, normalize_embeddings=True
            )
            output[position] = np.asarray(vector, dtype=np.float32).reshape(dimension)
            done = position + 1
            if store is not None and (done % CACHE_COMMIT_EVERY == 0 or done == len(texts)):
                start = (done - 1) // CACHE_COMMIT_EVERY * CACHE_COMMIT_EVERY
                store(texts[start:done], output[start:done])
        return output

    def encode(self, texts, *, show_progress_bar=None) -> np.ndarray:
        """Embed ``texts`` as float32, L2-normalised rows.

        Cached texts are read from disk; only the others go through the model,
        one text at a time (with a progress bar when there are many), and are
        then stored. A text's vector does not depend on the other texts or on
        what was cached.

        Returns
        -------
        ndarray of shape (len(texts), dimension), dtype float32
        """
        texts = [str(text) for text in texts]
        if not self.use_cache:
            self.last_stats = {"cached": 0, "encoded": len(texts)}
            self.stats["encoded"] += len(texts)
            return (
                self._encode_uncached(texts, show_progress_bar) if texts else np.zeros((0, self.dimension), np.float32)
            )
        if self._cache is None:
            self._cache = EmbeddingCache(self.cache_dir / "embeddings.sqlite")
        cache_key, dimension = self.cache_key, self.dimension
        found = self._cache.get(cache_key, texts, dimension)
        missing = [position for position in range(len(texts)) if position not in found]
        output = np.empty((len(texts), dimension), dtype=np.float32)
        for position, vector in found.items():
            output[position] = vector
        if missing:
            unique_missing = list(dict.fromkeys(texts[position] for position in missing))
            fresh = self._encode_uncached(
                unique_missing, show_progress_bar, store=lambda done, vectors: self._cache.put(cache_key, done, vectors)
            )
            by_text = dict(zip(unique_missing, fresh))
            for position in missing:
                output[position] = by_text[texts[position]]
        self.last_stats = {"cached": len(found), "encoded": len(missing)}
        self.stats = {key: self.stats[key] + self.last_stats[key] for key in self.stats}
        return output
