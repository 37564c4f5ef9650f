"""The LLM verdict cache: one SQLite file of replies, keyed by everything a reply depends on.

A key is the sha256 of the request as JSON (sorted keys): the endpoint's model
name, model file sha256 and server settings (:meth:`ChatEndpoint.fingerprint`,
never its address, which changes with the port), the messages, the schema and
the sampling parameters. So ``make reproduce`` does not ask the model again
when nothing changed, and any change (another model file, prompt, passage,
``k``, seed, ``max_tokens``, thread count) asks it afresh.

The file is ``llm_verdicts.sqlite`` in ragcal's cache folder
(:func:`ragcal.embedding.cache.default_cache_dir`: ``$RAGCAL_CACHE_DIR`` or
the user cache folder), opened like the embedding cache (WAL, shared between
processes, an unreadable file moved aside with a ``CacheWarning``). Each entry
is committed as soon as it is computed, so an interrupted run keeps what it
asked.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..embedding.cache import default_cache_dir, open_cache_db

__all__ = ["VERDICT_CACHE_FILE", "VerdictCache", "request_key"]

VERDICT_CACHE_FILE = "llm_verdicts.sqlite"


def request_key(fingerprint: dict, request: dict) -> str:
    """sha256 of the model fingerprint and the request (messages, schema, sampling), as canonical JSON."""
    text = json.dumps({"model": fingerprint, "request": request}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class VerdictCache:
    """Replies on disk, keyed by :func:`request_key`.

    Parameters
    ----------
    path : str or Path, default=None
        The SQLite file; None means ``default_cache_dir() / "llm_verdicts.sqlite"``.
    """

    def __init__(self, path=None):
        self.path = Path(path) if path is not None else default_cache_dir() / VERDICT_CACHE_FILE
        self._connection = open_cache_db(
            self.path,
            "CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, record TEXT NOT NULL)",
            what="LLM verdict cache",
        )

    def get(self, key: str) -> dict | None:
        """The stored record for ``key``, or None (also for an entry that is not a JSON object)."""
        row = self._connection.execute("SELECT record FROM verdicts WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            record = json.loads(row[0])
        except ValueError:
            return None
        return record if isinstance(record, dict) else None

    def put(self, key: str, record: dict) -> None:
        """Store ``record`` (JSON-serialisable) under ``key``, committed at once."""
        with self._connection:
            self._connection.execute(
                "INSERT OR REPLACE INTO verdicts VALUES (?, ?)", (key, json.dumps(record, sort_keys=True))
            )

    def close(self) -> None:
        self._connection.close()

    def __len__(self) -> int:
        return self._connection.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]

    def __enter__(self) -> VerdictCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
