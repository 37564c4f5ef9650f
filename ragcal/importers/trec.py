"""An exported top-k as a :class:`~ragcal.importers.candidates.CandidateSet`: a TREC run plus its passages.

What a production RAG system can export of its own retrieval, in the two
formats IR tools already share:

- the **run**: ``qid Q0 docid rank score tag`` per line, whitespace separated
  (trec_eval's format, which Anserini, Pyserini, ranx and ``ragcal score
  --runs`` write); the scores are the system's own and must be
  similarities (higher is better);
- the **passages**: BEIR's ``corpus.jsonl`` schema, one JSON object per line
  with ``_id``, ``title`` (optional) and ``text``. The file is streamed and
  only the passages that the run names (and the gold passages, below) are
  kept, so it may be a whole corpus.

A run carries no labels: they come from ragcal's labeled query CSV
(:func:`ragcal.queries.load_queries`), joined by id. See
:func:`read_trec_candidates`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from ..formatting import listing
from ..runs import trec_run_lines
from .candidates import (
    CandidateFileError,
    CandidateQuestion,
    CandidateSet,
    Passage,
    add_passage,
    iter_jsonl,
    passage_pages,
)

__all__ = ["read_trec_candidates", "read_trec_lines", "read_beir_passages"]



def read_trec_lines(path, *, tag: str | None = None) -> dict[str, list[tuple[int, int, str, float]]]:
    """The lines of a TREC run, per question: ``{qid: [(rank, line number, docid, score), ...]}`` in rank order.

    Parameters
    ----------
    path : str or Path
    tag : str, default=None
        Keep only the lines of this run tag (the sixth field). Without it the
        file must hold one tag: a file with several runs in it is refused
        rather than mixed.

    Returns
    -------
    dict of str to list of tuple
        Questions in the order they first appear; each list sorted by rank
        (ranks need not be contiguous; equal ranks keep file order).

    Raises
    ------
    CandidateFileError
        Naming the file and line: not six fields, a rank that is not an
        integer, a score that is not a finite number, a docid listed twice
        for one question; naming the file: several tags and no ``tag``, a
        ``tag`` that is not in the file, no line at all, and scores that
        increase down a ranking (distances, not similarities).
    """
    path = Path(path)
    lines: dict[str, list[tuple[int, int, str, float]]] = {}
    seen: dict[tuple[str, str], int] = {}
    tags: dict[str, int] = {}
    for line_number, qid, docid, rank, score, run_tag in trec_run_lines(path, error=CandidateFileError):
        tags.setdefault(run_tag, line_number)
        if tag is not None and run_tag != tag:
            continue
        where = f"{path}, line {line_number}"
        if not math.isfinite(score):
            raise CandidateFileError(f"{where}, field 'score': expected a finite number, got {str(score)!r}")
        if (qid, docid) in seen:
            raise CandidateFileError(
                f"{where}, field 'docid': {docid!r} listed twice for question {qid!r} (first on line {seen[qid, docid]})"
            )
        seen[qid, docid] = line_number
        lines.setdefault(qid, []).append((rank, line_number, docid, score))
    if tag is None and len(tags) > 1:
        raise CandidateFileError(
            f"{path}: holds {len(tags)} runs (tags {listing(tags, show=repr)}); name the one to score "
            "(tag= in Python, --run-tag on the command line)"
        )
    if tag is not None and tag not in tags:
        raise CandidateFileError(f"{path}: no line has the tag {tag!r}; its tags are {listing(tags, show=repr) or 'none'}")
    if not lines:
        raise CandidateFileError(f"{path}: no run lines")
    for qid, ranked in lines.items():
        ranked.sort()  # by rank, then line number
        for (_, _, _, above), (_, line_number, _, below) in zip(ranked, ranked[1:]):
            if below > above + 1e-9:
                raise CandidateFileError(
                    f"{path}, line {line_number}: the scores of question {qid!r} increase down the ranking "
                    f"({[round(entry[3], 4) for entry in ranked[:3]]} ...). ragcal needs similarities, best first; "
                    "a system that returns distances must convert them, e.g. similarity = 1 - cosine distance"
                )
    return lines


def read_beir_passages(path, wanted) -> dict[str, Passage]:
    """The passages of a BEIR ``corpus.jsonl`` whose ``_id`` is in ``wanted``, streamed: ``{id: Passage}``.

    Raises
    ------
    CandidateFileError
        Naming the file, line and field: invalid JSON, a wanted passage with
        no ``_id`` or ``text``, or a wanted ``_id`` given twice with another
        title or text.
    """
    path = Path(path)
    wanted = set(wanted)
    passages: dict[str, Passage] = {}
    first_seen: dict[str, str] = {}
    for line_number, record in iter_jsonl(path, what="passages file"):
        where = f"{path}, line {line_number}"
        passage_id = record.get("_id")
        if passage_id is None or isinstance(passage_id, bool) or not isinstance(passage_id, (str, int)):
            raise CandidateFileError(f"{where}, field '_id': expected a string, got {passage_id!r}"[:200])
        passage_id = str(passage_id).strip()
        if passage_id not in wanted:
            continue
        text, title = record.get("text"), record.get("title", "")
        if not isinstance(text, str) or not text.strip():
            raise CandidateFileError(f"{where}, field 'text': expected a non-empty string, got {text!r}"[:200])
        if title is None:
            title = ""
        if not isinstance(title, str):
            raise CandidateFileError(f"{where}, field 'title': expected a string, got {title!r}"[:200])
        add_passage(passages, Passage(passage_id, title.strip(), text.strip()), where, first_seen)
    return passages


def read_trec_candidates(run_path, passages_path, *, queries=None, tag: str | None = None) -> CandidateSet:
    """Read an exported top-k (TREC run + BEIR passages) with labels from a query CSV.

    Parameters
    ----------
    run_path : str or Path
        ``qid Q0 docid rank score tag`` per line (see :func:`read_trec_lines`):
        per question, the system's candidates ordered by rank, its scores
        non-increasing down the ranking.
    passages_path : str or Path
        BEIR ``corpus.jsonl`` (``_id``, ``title``, ``text``).
    queries : str or Path
        ragcal's labeled query CSV (``id,query,answerable,slice,gold``), which
        gives each question its text and labels, joined with the run by id.
        Required: a run holds no question text.
    tag : str, default=None
        The run to read from a file that holds several.

    Returns
    -------
    CandidateSet
        One question per row of the query file, in its order, with the run's
        passages best first and the run's scores. A question of the query file
        with no line in the run has an empty candidate list: the system
        retrieved nothing for it (its ``scores`` are None).

    Notes
    -----
    ``gold`` cells may name passage ids (what an exported run naturally
    knows) or pages, each a passage's page as :func:`passage_pages` names it
    (``doc1.md`` for ``doc1``), ``;``-separated. An entry is read as a passage
    id when the passages file has a passage of that id, else as the page of a
    passage the run lists. The candidates it names get ``answers=True``, the
    other candidates of an answerable question with gold get ``False``;
    a gold passage the run did not retrieve for its question is kept in
    :attr:`CandidateQuestion.unlisted_gold` and in the set's passages (not
    in any candidate list).

    Raises
    ------
    CandidateFileError
        A malformed run or passages file (file, line, field); a run qid that
        is not in the query file, a docid that is not in the passages file,
        or a gold entry that names neither a passage nor a listed passage's
        page (each listing up to ten of them, with the file).
    QueryFileError
        A malformed query file.
    """
    from ..queries import load_queries

    if queries is None:
        raise CandidateFileError(
            f"{run_path}: a TREC run carries no question text or labels; give the labeled query CSV (queries=)"
        )
    labels = load_queries(queries)
    run = read_trec_lines(run_path, tag=tag)
    known = set(labels["id"])
    unknown = [qid for qid in run if qid not in known]
    if unknown:
        raise CandidateFileError(
            f"{run_path}: {len(unknown)} question id(s) not in the query file {queries}: {listing(unknown, show=repr)}"
        )
    listed = dict.fromkeys(docid for ranked in run.values() for _, _, docid, _ in ranked)
    gold_entries = {entry for gold in labels["gold"] for entry in gold}
    passages = read_beir_passages(passages_path, set(listed) | gold_entries)
    missing = [docid for docid in listed if docid not in passages]
    if missing:
        raise CandidateFileError(
            f"{run_path}: {len(missing)} docid(s) not in the passages file {passages_path}: {listing(missing, show=repr)}"
        )
    page_owner = {page: passage_id for passage_id, page in passage_pages(listed).items()}
    unresolved = [entry for entry in sorted(gold_entries) if entry not in passages and entry not in page_owner]
    if unresolved:
        raise CandidateFileError(
            f"{queries}, column 'gold': {len(unresolved)} entr(y/ies) name no passage of {passages_path} and no page "
            f"of a passage the run lists: {listing(unresolved, show=repr)}"
        )
    questions = []
    for row in labels.itertuples(index=False):
        ranked = run.get(row.id, [])
        ids = tuple(docid for _, _, docid, _ in ranked)
        gold = {entry if entry in passages else page_owner[entry] for entry in row.gold}
        answers = (
            tuple(passage_id in gold for passage_id in ids) if (gold or not row.answerable) else (None,) * len(ids)
        )
        questions.append(
            CandidateQuestion(
                id=row.id,
                query=row.query,
                passage_ids=ids,
                scores=tuple(score for _, _, _, score in ranked) if ranked else None,
                answerable=bool(row.answerable),
                slice=row.slice,
                answers=answers,
            )
        )
        unlisted = tuple(sorted(gold - set(ids)))
        if unlisted:
            questions[-1] = replace(questions[-1], unlisted_gold=unlisted)
    kept = {passage_id: passages[passage_id] for passage_id in listed}
    kept.update({passage_id: passages[passage_id] for q in questions for passage_id in q.unlisted_gold})
    return CandidateSet(tuple(questions), kept, source=str(run_path))
