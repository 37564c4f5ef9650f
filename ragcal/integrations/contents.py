"""What a store holds, seen through its answers: the record a gate file keeps, and what a refusal may name.

A store offers no public way to list what it holds, so ragcal looks at what it
returns. :func:`~ragcal.integrations.common.score_store` records the store's
top documents for a few of the labeled questions, hashed
(``store_contents``), with the store's document count where its framework
says it; :class:`~ragcal.integrations.common.StoreGate` asks the store in
front of it the same questions and compares (:func:`contents_overlap`). When
no description of the whole corpus is given, a refusal names the pages and
heading paths of the documents the store returned (:func:`passage_of`).
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = [
    "PROBE_QUESTIONS",
    "PROBE_DEPTH",
    "SAME_CONTENTS",
    "CONTENTS_CHECKS",
    "PAGE_KEYS",
    "HEADING_KEY",
    "document_hash",
    "probe_questions",
    "contents_overlap",
    "check_contents_record",
    "metadata_of",
    "passage_of",
]

#: Questions of the labeled set a gate's provenance keeps to recognise its store, and documents per question.
PROBE_QUESTIONS = 8
PROBE_DEPTH = 5
#: Below this share of the same documents (mean Jaccard over the probe questions), the store holds other contents.
SAME_CONTENTS = 0.5
#: What :class:`~ragcal.integrations.common.StoreGate` does in front of a store with other contents: refuse (the default), or warn and go on.
CONTENTS_CHECKS = ("refuse", "warn")


def document_hash(chunk_id, text) -> str:
    """One document of the record: the first 16 hex digits of ``sha256(chunk id, NUL, text)``."""
    return hashlib.sha256(f"{chunk_id}\0{text}".encode()).hexdigest()[:16]


def probe_questions(questions, n: int = PROBE_QUESTIONS) -> list[str]:
    """``n`` questions spread evenly over ``questions`` (all of them when fewer), in order: the store's probes."""
    questions = [str(question) for question in questions]
    if len(questions) <= n:
        return questions
    return [questions[int(position)] for position in np.linspace(0, len(questions) - 1, n).round()]


def contents_overlap(recorded: dict, seen: dict) -> float:
    """Mean Jaccard overlap of the documents each probe question found then (``recorded``) and now (``seen``)."""
    shares = []
    for before, now in zip(recorded["documents"], seen["documents"]):
        before, now = set(before), set(now)
        shares.append(len(before & now) / len(before | now) if before | now else 1.0)
    return float(np.mean(shares)) if shares else 1.0


def check_contents_record(recorded, path) -> None:
    """Check a gate file's ``store_contents`` (``path`` names the file in the error); GateFileError if malformed.

    It must be what :meth:`~ragcal.integrations.common.StoreRetriever.contents_probe` writes.
    """
    from ..gates.files import GateFileError

    def strings(value) -> bool:
        return isinstance(value, list) and all(isinstance(item, str) for item in value)

    questions = recorded.get("questions") if isinstance(recorded, dict) else None
    if not (
        strings(questions)
        and isinstance(recorded.get("depth"), int)
        and recorded["depth"] >= 1
        and isinstance(recorded.get("documents"), list)
        and len(recorded["documents"]) == len(questions)
        and all(strings(documents) for documents in recorded["documents"])
        and isinstance(recorded.get("top"), list)
        and len(recorded["top"]) == len(questions)
        and (recorded.get("count") is None or (isinstance(recorded["count"], int) and recorded["count"] >= 0))
    ):
        raise GateFileError(
            f"{path}: field 'provenance.store_contents' must hold questions, depth, documents and top as "
            "score_store writes them; score the labeled set through the store and fit the gate again"
        )


#: Metadata keys a document's page is read from, first found first (``documents_from_chunks`` writes ``page``).
PAGE_KEYS = ("page", "source", "file_path")
#: Metadata key of a document's heading path: a list, or one string split at " > " (as ``documents_from_chunks``).
HEADING_KEY = "heading"


def metadata_of(item) -> dict:
    """A framework document's metadata: LangChain's and LlamaIndex's ``metadata``, Haystack's ``meta``."""
    for attribute in ("metadata", "meta"):
        value = getattr(item, attribute, None)
        if isinstance(value, dict):
            return value
    return {}


def passage_of(hit, text: str = ""):
    """What a refusal may name of one document a store returned: a :class:`~ragcal.retrieval.views.Passage`.

    Its page is the first of :data:`PAGE_KEYS` in the document's metadata,
    else the chunk id's part before ``#``; its heading path is
    ``metadata["heading"]``. None when the document records neither a page
    nor a heading and its id names no page: a refusal can then only name the id.
    """
    from ..chunking import page_of
    from ..retrieval.views import Passage

    metadata = metadata_of(hit.item)
    page = next((str(metadata[key]) for key in PAGE_KEYS if metadata.get(key)), None)
    heading = metadata.get(HEADING_KEY) or ()
    if isinstance(heading, str):
        heading = tuple(part.strip() for part in heading.split(" > ") if part.strip())
    heading = tuple(str(part) for part in heading)
    if page is None and not heading and "#" not in hit.chunk_id:
        return None
    owner = metadata.get("owner")
    return Passage(hit.chunk_id, page or page_of(hit.chunk_id), heading, text, str(owner) if owner else None)
