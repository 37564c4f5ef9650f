"""The embedding cache: vectors in an SQLite file, keyed by model key and text, checked on every read.

Every embedding is cached under a key made of the model's cache key (for
:class:`~ragcal.embedding.Embedder`, its fingerprint and encoding scheme) and
the sha256 of the exact text. The cache is an SQLite file: each write is one
transaction, so an interrupted run leaves either the old or the new entries,
never half of one. Every entry also stores a checksum of its vector, and an
entry whose checksum, length or norm is wrong is recomputed and replaced.
"""

from __future__ import annotations

import hashlib
import os
import random
import sqlite3
import time
import warnings
from pathlib import Path

import numpy as np

__all__ = [
    "CACHE_BUSY_TIMEOUT",
    "CACHE_COMMIT_EVERY",
    "CacheWarning",
    "EmbeddingCache",
    "default_cache_dir",
    "open_cache_db",
]


class CacheWarning(UserWarning):
    """An embedding cache entry or file was unusable and has been recomputed."""


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
