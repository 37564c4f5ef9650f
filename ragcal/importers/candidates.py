"""Candidate lists: questions each with their own retrieved passages, best first.

The shape that relevance-assessment sets for RAG ship, and what a production
system can export of its own retrieval: per question, the passages it
retrieved (with their texts) and, optionally, its own scores. Two readers give
one :class:`CandidateSet`:

- :func:`read_candidates_jsonl`: one JSON object per line::

      {"id": "q1", "query": "...", "answerable": true, "slice": "near-domain",
       "passages": [{"id": "p7", "title": "...", "text": "...", "answers": true, "score": 12.5}, ...]}

  ``slice``, a passage's ``title``, ``answers`` and ``score`` are optional;
  the passages are listed best first. A passage that appears under several
  questions is one passage (its title and text must agree).
- :func:`ragcal.importers.trec.read_trec_candidates`: a TREC run plus the
  passages in BEIR's ``corpus.jsonl`` schema.

Every passage becomes one page of a Markdown folder (:func:`passage_pages`),
so candidate lists meet ragcal's page-level conventions: a chunk id is
``<page path>#0`` and a gold page is a page path.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..formatting import listing

__all__ = [
    "Passage",
    "CandidateQuestion",
    "CandidateSet",
    "CandidateFileError",
    "read_candidates_jsonl",
    "passage_pages",
    "iter_jsonl",
    "candidate_queries",
]


class CandidateFileError(ValueError):
    """A candidates, run or passages file that cannot be read; the message names the file, line and field."""


@dataclass(frozen=True)
class Passage:
    """One retrievable passage: its id, its title (may be empty) and its text."""

    id: str
    title: str
    text: str


@dataclass(frozen=True)
class CandidateQuestion:
    """One question with the passages retrieved for it.

    Attributes
    ----------
    id, query : str
    passage_ids : tuple of str
        Best first; may be empty (nothing was retrieved).
    scores : tuple of float or None
        The exporting system's own score of each passage, aligned with
        ``passage_ids`` (higher is better); None when the file gives none.
    answerable : bool or None
        None when the file carries no label.
    slice : str
        ``"answerable"`` for answerable questions unless the file names one.
    answers : tuple of (bool or None)
        Per passage: does it answer the question (None: not assessed).
    unlisted_gold : tuple of str, default=()
        Ids of passages known to answer the question that are not among its
        candidates (a run that missed its gold,
        :func:`~ragcal.importers.trec.read_trec_candidates`).
    """

    id: str
    query: str
    passage_ids: tuple[str, ...]
    scores: tuple[float, ...] | None = None
    answerable: bool | None = None
    slice: str = ""
    answers: tuple = field(default=())
    unlisted_gold: tuple[str, ...] = ()

    @property
    def gold(self) -> tuple[str, ...]:
        """Ids of the passages marked as answering the question, then those not among its candidates."""
        listed = tuple(passage for passage, answers in zip(self.passage_ids, self.answers) if answers)
        return listed + tuple(self.unlisted_gold)


@dataclass(frozen=True)
class CandidateSet:
    """Questions with their candidate passages, and the passages by id."""

    questions: tuple[CandidateQuestion, ...]
    passages: Mapping[str, Passage]
    source: str = ""

    def __len__(self) -> int:
        return len(self.questions)

    @property
    def has_scores(self) -> bool:
        """True when every question that retrieved something carries the system's own scores."""
        listed = [question for question in self.questions if question.passage_ids]
        return bool(listed) and all(question.scores is not None for question in listed)


def iter_jsonl(path, *, what: str):
    """``(line number, object)`` for every non-blank line of a JSON-lines file, with errors that name file and line."""
    path = Path(path)
    if not path.is_file():
        raise CandidateFileError(f"{path}: {what} not found")
    try:
        stream = open(path, encoding="utf-8-sig")
    except OSError as error:
        raise CandidateFileError(f"{path}: cannot be read ({error})") from error
    with stream:
        line_number = 0
        try:
            for line_number, line in enumerate(stream, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    raise CandidateFileError(f"{path}, line {line_number}: not valid JSON ({error.msg})") from error
                if not isinstance(record, dict):
                    raise CandidateFileError(
                        f"{path}, line {line_number}: expected a JSON object, found {type(record).__name__}"
                    )
                yield line_number, record
        except UnicodeDecodeError as error:
            raise CandidateFileError(f"{path}, line {line_number + 1}: not UTF-8 text ({error.reason})") from error


def _text(record, name, where, *, required=True, allow_empty=False) -> str:
    if name not in record or record[name] is None:
        if required:
            raise CandidateFileError(f"{where}: missing field {name!r}")
        return ""
    value = record[name]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise CandidateFileError(f"{where}, field {name!r}: expected a string, got {json.dumps(value)[:60]}")
    value = str(value).strip()
    if required and not value and not allow_empty:
        raise CandidateFileError(f"{where}, field {name!r}: empty")
    return value


def _flag(record, name, where, *, required) -> bool | None:
    if name not in record or record[name] is None:
        if required:
            raise CandidateFileError(f"{where}: missing field {name!r} (true or false)")
        return None
    value = record[name]
    if not isinstance(value, bool):
        raise CandidateFileError(f"{where}, field {name!r}: expected true or false, got {json.dumps(value)[:60]}")
    return value


def _score(record, where) -> float | None:
    if "score" not in record or record["score"] is None:
        return None
    value = record["score"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise CandidateFileError(f"{where}, field 'score': expected a finite number, got {json.dumps(value)[:60]}")
    return float(value)


def default_slice(answerable: bool | None) -> str:
    """The slice of a question whose file names none: ``answerable`` or ``unanswerable``."""
    return "" if answerable is None else ("answerable" if answerable else "unanswerable")


def add_passage(passages: dict, passage: Passage, where: str, first_seen: dict) -> None:
    """Record ``passage``; the same id seen again must carry the same title and text."""
    known = passages.get(passage.id)
    if known is None:
        passages[passage.id] = passage
        first_seen[passage.id] = where
    elif known != passage:
        differs = "text" if known.text != passage.text else "title"
        raise CandidateFileError(
            f"{where}: passage {passage.id!r} has another {differs} than at {first_seen[passage.id]}; "
            "a passage id must name one passage"
        )


def read_candidates_jsonl(path, *, require_labels: bool = True) -> CandidateSet:
    """Read a candidates JSONL (see the module docstring).

    Parameters
    ----------
    path : str or Path
    require_labels : bool, default=True
        Whether every question must carry ``answerable``.

    Returns
    -------
    CandidateSet

    Raises
    ------
    CandidateFileError
        Naming the file, the line and the field: invalid JSON, a missing or
        mistyped field, a duplicate question id, a passage listed twice under
        one question, a passage id reused for another text, or scores given
        for some passages of a question and not others.
    """
    path = Path(path)
    questions, passages, first_seen, lines_of = [], {}, {}, {}
    for line_number, record in iter_jsonl(path, what="candidates file"):
        where = f"{path}, line {line_number}"
        question_id = _text(record, "id", where)
        if question_id in lines_of:
            raise CandidateFileError(
                f"{where}, field 'id': duplicate question id {question_id!r} (first on line {lines_of[question_id]})"
            )
        lines_of[question_id] = line_number
        query = _text(record, "query", where)
        answerable = _flag(record, "answerable", where, required=require_labels)
        slice_name = _text(record, "slice", where, required=False) or default_slice(answerable)
        listed = record.get("passages")
        if not isinstance(listed, list):
            found = "missing" if listed is None else f"got {json.dumps(listed)[:60]}"
            raise CandidateFileError(f"{where}, field 'passages': expected a list of passages, {found}")
        ids, scores, answers = [], [], []
        for position, item in enumerate(listed):
            item_where = f"{where}, passages[{position}]"
            if not isinstance(item, dict):
                raise CandidateFileError(f"{item_where}: expected a JSON object, got {json.dumps(item)[:60]}")
            passage = Passage(
                id=_text(item, "id", item_where),
                title=_text(item, "title", item_where, required=False),
                text=_text(item, "text", item_where),
            )
            if passage.id in ids:
                raise CandidateFileError(
                    f"{item_where}, field 'id': passage {passage.id!r} listed twice for this question"
                )
            add_passage(passages, passage, item_where, first_seen)
            ids.append(passage.id)
            scores.append(_score(item, item_where))
            answers.append(_flag(item, "answers", item_where, required=False))
        given = [score is not None for score in scores]
        if any(given) and not all(given):
            missing = given.index(False)
            raise CandidateFileError(
                f"{where}, passages[{missing}]: no 'score', while other passages of this question have one; "
                "give every passage a score or none"
            )
        if answerable is False and any(answers):
            raise CandidateFileError(f'{where}: an unanswerable question cannot have a passage with "answers": true')
        questions.append(
            CandidateQuestion(
                id=question_id,
                query=query,
                passage_ids=tuple(ids),
                scores=tuple(scores) if ids and all(given) else None,
                answerable=answerable,
                slice=slice_name,
                answers=tuple(answers),
            )
        )
    if not questions:
        raise CandidateFileError(f"{path}: no questions")
    return CandidateSet(tuple(questions), passages, source=str(path))


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def passage_pages(passage_ids) -> dict[str, str]:
    """``{passage id: page path}``: one Markdown page per passage, with a name safe on every file system.

    The page is the id with every run of characters other than letters,
    digits, ``.``, ``_`` and ``-`` replaced by ``_``, plus ``.md``. When two
    ids would share a name (``a/b`` and ``a_b``), or a name would be empty or
    start with a dot, the first 10 hex digits of the id's sha1 are appended,
    so the mapping is the same on every run.
    """
    ids = list(dict.fromkeys(str(passage_id) for passage_id in passage_ids))
    stems = {passage_id: _UNSAFE.sub("_", passage_id).strip("_")[:120] for passage_id in ids}
    counts: dict[str, int] = {}
    for stem in stems.values():
        counts[stem.lower()] = counts.get(stem.lower(), 0) + 1
    pages = {}
    for passage_id, stem in stems.items():
        if not stem or stem.startswith(".") or counts[stem.lower()] > 1:
            stem = f"{stem}-{hashlib.sha1(passage_id.encode('utf-8')).hexdigest()[:10]}".lstrip("-.")
        pages[passage_id] = f"{stem}.md"
    return pages


def candidate_queries(candidates: CandidateSet):
    """The labeled questions of a set, as a DataFrame ``id, query, answerable, slice``, in the set's order.

    Raises
    ------
    ValueError
        Naming the set's file and up to ten questions without an
        ``answerable`` label: a score table needs it.
    """
    import pandas as pd  # here: `ragcal --help` reads this module for the import formats and loads no pandas

    unlabeled = [question.id for question in candidates.questions if question.answerable is None]
    if unlabeled:
        shown = listing(unlabeled, show=repr)
        raise ValueError(f"{candidates.source}: {len(unlabeled)} question(s) carry no 'answerable' label: {shown}")
    return pd.DataFrame(
        {
            "id": [question.id for question in candidates.questions],
            "query": [question.query for question in candidates.questions],
            "answerable": [bool(question.answerable) for question in candidates.questions],
            "slice": [question.slice for question in candidates.questions],
        }
    )
