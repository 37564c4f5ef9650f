"""Whether what a gate passes on supports the answer.

An answer is **supported** when the question is answerable and at least one
passage passed on to the generator comes from one of its gold pages. It is
**unsupported** otherwise: an unanswerable question that was answered, or an
answerable one answered from the wrong text. *Selective risk* is unsupported
answers over answers.

Two ways to get there, which agree (the tests check it on the bundled corpus):

- :func:`supported_answers`: from the decisions themselves (exact for any
  gate, one :meth:`Gate.decide` per question);
- :func:`table_support`: from :meth:`Gate.decide_table` (what is answered,
  and by which stage) and :meth:`Gate.passages_for` (what would be passed
  on), so only retrieval runs are needed, not the diagnostics of every signal;
- :func:`cut_support`: for a :class:`ThresholdGate` whose passages are cut
  at its own threshold, whether a gold passage is passed on at each of many
  thresholds at once (the stages of a chain, for Learn-then-Test);
- :func:`support_levels` / :func:`signal_support`: one number per question,
  the **support level**, such that a gate that cuts a retriever's list at a
  bar ``b`` (a :class:`ThresholdGate` on a passage-scale signal, a
  :class:`FloorGapGate` at its floor, a learned gate at its cosine bar)
  passes a gold passage on exactly when ``level >= b``. Sweeps over every
  threshold and every 2-D grid point are then vectorised.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..chunking import page_of
from ..signals import get_signal
from .base import decided_arrays, decisions_as_arrays

__all__ = [
    "supported_answers",
    "support_levels",
    "signal_support",
    "gold_pages",
    "support_inputs",
    "results_from_runs",
    "table_support",
    "SupportMemo",
    "cut_support",
    "PassageCuts",
    "passage_cuts",
    "bar_support",
]


def gold_pages(queries) -> list[frozenset]:
    """Gold pages of each labeled query (empty for unanswerable ones), in the frame's order."""
    return [
        frozenset(gold) if answerable else frozenset()
        for gold, answerable in zip(queries["gold"], queries["answerable"])
    ]


def support_inputs(queries, retrieved: dict):
    """Per-row ``{retriever: RetrievalResult}`` (from ``RetrievalIndex.retrieve``) and :func:`gold_pages`, aligned."""
    results = [{name: listed[row] for name, listed in retrieved.items()} for row in range(len(queries))]
    return results, gold_pages(queries)


def supported_answers(decisions, gold) -> np.ndarray:
    """True where a decision answered (or hedged) and passed on a passage from a gold page.

    Parameters
    ----------
    decisions : sequence of Decision
    gold : sequence of set of str
        Gold pages per question, aligned with ``decisions`` (empty: unanswerable).
    """
    decisions, gold = list(decisions), list(gold)
    if len(decisions) != len(gold):
        raise ValueError(f"supported_answers: {len(decisions)} decisions but {len(gold)} gold sets")
    return np.array(
        [
            decision.answered and any(page_of(chunk_id) in pages for chunk_id, _ in decision.passages)
            for decision, pages in zip(decisions, gold)
        ],
        dtype=bool,
    )


def support_levels(results, gold, retriever: str, *, max_passages: int | None = 10) -> np.ndarray:
    """Highest ``retriever`` score of a gold-page passage among its first ``max_passages``; -inf when none.

    A gate that passes on ``retriever``'s passages scoring at least ``b``
    (capped at ``max_passages``, in rank order) passes a gold passage on
    exactly when the level is at least ``b``.

    Parameters
    ----------
    results : sequence of mapping
        ``{retriever name: RetrievalResult}`` per question.
    gold : sequence of set of str
        Gold pages per question (empty: unanswerable, level -inf).
    """
    results, gold = list(results), list(gold)
    if len(results) != len(gold):
        raise ValueError(f"support_levels: {len(results)} result sets but {len(gold)} gold sets")
    levels = np.full(len(results), -math.inf)
    for position, (per_retriever, pages) in enumerate(zip(results, gold)):
        if not pages:
            continue
        listed = per_retriever[retriever]
        limit = len(listed.chunk_ids) if max_passages is None else max_passages
        scores = [
            float(score)
            for chunk_id, score in zip(listed.chunk_ids[:limit], listed.scores[:limit])
            if page_of(chunk_id) in pages
        ]
        if scores:
            levels[position] = max(scores)
    return levels


def signal_support(results, gold, signal: str, *, max_passages: int | None = 10) -> np.ndarray:
    """Support level of a default :class:`ThresholdGate` on ``signal``, in the signal's units.

    For a signal on a passage's scale (``dense_top1``, ``bm25_top1_*``,
    ``rrf_top1``) the gate cuts its retriever's list at the threshold, so the
    level is :func:`support_levels` of that retriever. For other signals the
    gate passes on only the top passage: the level is +inf when that passage
    is from a gold page (supported whenever answered) and -inf otherwise.
    Either way a question answered at threshold ``t`` is supported exactly
    when ``level >= t``.
    """
    entry = get_signal(signal)
    retriever = entry.retrievers[0]
    if entry.passage_scale:
        return support_levels(results, gold, retriever, max_passages=max_passages)
    top_gold = support_levels(results, gold, retriever, max_passages=1) > -math.inf
    return np.where(top_gold, math.inf, -math.inf)


def results_from_runs(runs_dir, query_ids) -> list[dict]:
    """``{retriever: RetrievalResult}`` per query id, rebuilt from the TREC runs ``ragcal score --runs`` wrote.

    Runs hold chunk ids and scores only (no diagnostics), which is all that
    :func:`support_levels` and :func:`signal_support` read. A query with no
    line in a run gets an empty list there.
    """
    from pathlib import Path

    from ..retrieval.base import RetrievalResult
    from ..runs import read_trec_run

    runs_dir = Path(runs_dir)
    paths = sorted(runs_dir.glob("*.run"))
    if not paths:
        raise FileNotFoundError(f"{runs_dir}: no *.run files (write them with ragcal score --runs)")
    per_retriever = {}
    for path in paths:
        run = read_trec_run(path)
        groups = {str(qid): group for qid, group in run.groupby("qid", sort=False)}
        per_retriever[path.stem] = groups
    results = []
    for query_id in map(str, query_ids):
        row = {}
        for name, groups in per_retriever.items():
            group = groups.get(query_id)
            chunk_ids = () if group is None else tuple(group["docid"])
            scores = np.empty(0) if group is None else group["score"].to_numpy(dtype=float)
            row[name] = RetrievalResult(name, chunk_ids, scores)
        results.append(row)
    return results


def table_support(gate, table, results, gold, *, decisions=None) -> np.ndarray:
    """True where ``gate`` answers a row of ``table`` (by :meth:`Gate.decide_table`) with a gold passage.

    The passages are :meth:`Gate.passages_for` of the row's results (of the
    answering stage, for a chain), so this works for every gate from TREC
    runs alone (:func:`results_from_runs`), which carry no diagnostics.

    Parameters
    ----------
    gate : Gate
    table : DataFrame
        Score table with the gate's columns.
    results : sequence of mapping
        ``{retriever: RetrievalResult}`` per row of ``table``.
    gold : sequence of set of str
        Gold pages per row (empty: unanswerable).
    decisions : DataFrame or Decided, default=None
        ``gate.decide_table(table)`` when already computed.
    """
    results, gold = list(results), list(gold)
    if not len(results) == len(gold) == len(table):
        raise ValueError(f"table_support: {len(table)} rows, {len(results)} result sets and {len(gold)} gold sets")
    arrays = decided_arrays(gate, table) if decisions is None else decisions_as_arrays(decisions)
    actions, stages = arrays.action, arrays.stage
    supported = np.zeros(len(table), dtype=bool)
    for row in np.flatnonzero(actions != "refuse"):
        if gold[row]:
            stage = _answering_stage(stages[row])
            passages = gate.passages_for(results[row], stage=stage)
            supported[row] = any(page_of(chunk_id) in gold[row] for chunk_id, _ in passages)
    return supported


def _answering_stage(stage):
    """A decision's stage as :meth:`Gate.passages_for` takes it: None for None or NaN."""
    return None if stage is None or stage != stage else stage


class SupportMemo:
    """:func:`table_support` for many gates on rows of one table, remembering what each row's passages hold.

    Whether a row's passages include a gold page depends only on the row and
    on what :meth:`Gate.passages_for` reads (:meth:`Gate.passage_key`): over
    a thousand held-out splits the same gates (a threshold placed at one of a
    few dozen calibration scores) come back again and again, so each (row,
    key) is looked up once. Gates whose key is None are looked up every time.

    Parameters
    ----------
    results : sequence of mapping
        ``{retriever: RetrievalResult}`` per row of the whole table.
    gold : sequence of set of str
        Gold pages per row of the whole table (empty: unanswerable).
    """

    def __init__(self, results, gold):
        self.results, self.gold = list(results), list(gold)
        if len(self.results) != len(self.gold):
            raise ValueError(f"SupportMemo: {len(self.results)} result sets but {len(self.gold)} gold sets")
        self.passes_gold = {}

    def __call__(self, gate, decisions, rows) -> np.ndarray:
        """``table_support(gate, table.iloc[rows], ..., decisions=decisions)``: rows are positions in the table."""
        arrays = decisions_as_arrays(decisions)
        actions, stages = arrays.action, arrays.stage
        supported = np.zeros(len(actions), dtype=bool)
        for position in np.flatnonzero(actions != "refuse"):
            row = int(rows[position])
            pages = self.gold[row]
            if not pages:
                continue
            stage = _answering_stage(stages[position])
            key = gate.passage_key(stage=stage)
            known = None if key is None else self.passes_gold.setdefault(key, {})
            if known is not None and row in known:
                supported[position] = known[row]
                continue
            passages = gate.passages_for(self.results[row], stage=stage)
            passes = any(page_of(chunk_id) in pages for chunk_id, _ in passages)
            if known is not None:
                known[row] = passes
            supported[position] = passes
        return supported


def cut_support(gate, results, gold, thresholds) -> np.ndarray:
    """Whether ``gate`` with each threshold would pass a gold passage on, for every question.

    For a :class:`ThresholdGate` whose passage bar is its own threshold (a
    signal on a passage's scale, no ``passage_floor``), the passages change
    with the threshold: those of its view (``passages_from``, e.g. fused
    order) whose bar-retriever score clears it, capped at ``max_passages``
    after the cut, else the bar retriever's top passage. Otherwise the
    passages do not depend on the threshold.

    Returns
    -------
    ndarray of bool, shape (len(thresholds), len(results))
        Row i: answering at ``thresholds[i]`` passes a gold passage on
        (whether the gate answers at all is :meth:`Gate.decide_table`'s to say).

    See Also
    --------
    passage_cuts : what this reads from the results, computed once for many calls.
    """
    return passage_cuts(gate, results, gold).support(thresholds)


@dataclass(frozen=True)
class PassageCuts:
    """What a :class:`ThresholdGate`'s cut reads per question, as arrays: :func:`cut_support` for any thresholds.

    From :func:`passage_cuts`. A question's passages are the gate's view in
    its order, padded at the end to one width.

    Attributes
    ----------
    scores : ndarray of float, shape (questions, width)
        Bar-retriever score of each passage of the view (-inf when the bar
        retriever did not list it, and for padding).
    listed : ndarray of bool, shape (questions, width)
        True for a passage of the view, False for padding.
    gold : ndarray of bool, shape (questions, width)
        The passage is from a gold page of its question.
    fallback : ndarray of bool, shape (questions,)
        The bar retriever's top passage is from a gold page (passed on when nothing clears).
    fixed : ndarray of bool, shape (questions,), or None
        When the passages do not depend on the threshold: whether they include
        a gold one (``scores``, ``listed`` and ``gold`` are then not read).
    max_passages : int or None
        The gate's cap on the passages, applied after the cut.
    """

    scores: np.ndarray
    listed: np.ndarray
    gold: np.ndarray
    fallback: np.ndarray
    fixed: np.ndarray | None
    max_passages: int | None

    def take(self, rows) -> "PassageCuts":
        """The cuts of the questions at positions ``rows`` (repeats allowed), in that order."""
        rows = np.asarray(rows, dtype=int)
        fixed = None if self.fixed is None else self.fixed[rows]
        return PassageCuts(
            self.scores[rows], self.listed[rows], self.gold[rows], self.fallback[rows], fixed, self.max_passages
        )

    def support(self, thresholds) -> np.ndarray:
        """:func:`cut_support` at ``thresholds``: shape (len(thresholds), questions)."""
        thresholds = np.asarray(thresholds, dtype=float).reshape(-1)
        if self.fixed is not None:
            return np.repeat(self.fixed[None, :], thresholds.size, axis=0)
        clears = self.listed[None, :, :] & (self.scores[None, :, :] >= thresholds[:, None, None])
        if self.max_passages is not None:
            clears &= np.cumsum(clears, axis=2) <= self.max_passages
        passed_gold = (clears & self.gold[None, :, :]).any(axis=2)
        # nothing in the view clears: the bar retriever's top passage is passed on
        return passed_gold | (~clears.any(axis=2) & self.fallback[None, :])


def passage_cuts(gate, results, gold) -> PassageCuts:
    """:class:`PassageCuts` of a :class:`ThresholdGate` over questions: what :func:`cut_support` reads.

    Parameters
    ----------
    gate : ThresholdGate
        Its threshold does not enter: only its view, bar retriever,
        ``passage_floor`` and ``max_passages`` do.
    results : sequence of mapping
        ``{retriever: RetrievalResult}`` per question.
    gold : sequence of set of str
        Gold pages per question (empty: unanswerable, never supported).
    """
    from .threshold import ThresholdGate

    results, gold = list(results), list(gold)
    if len(results) != len(gold):
        raise ValueError(f"cut_support: {len(results)} result sets but {len(gold)} gold sets")
    if not isinstance(gate, ThresholdGate):
        raise TypeError(f"cut_support takes a ThresholdGate, got {type(gate).__name__}")
    bar_retriever, bar = gate._passage_bar()
    n = len(results)
    fallback = np.zeros(n, dtype=bool)
    if bar_retriever is None or gate.passage_floor is not None:  # the passages do not move with the threshold
        fixed = np.zeros(n, dtype=bool)
        for position, (per_retriever, pages) in enumerate(zip(results, gold)):
            if pages:
                fixed[position] = any(page_of(chunk_id) in pages for chunk_id, _ in gate.passages_for(per_retriever))
        empty = np.zeros((n, 0))
        return PassageCuts(empty, empty.astype(bool), empty.astype(bool), fallback, fixed, gate.max_passages)
    width = max((len(per_retriever[gate._view].chunk_ids) for per_retriever in results), default=0)
    scores = np.full((n, width), -math.inf)
    listed = np.zeros((n, width), dtype=bool)
    is_gold = np.zeros((n, width), dtype=bool)
    for position, (per_retriever, pages) in enumerate(zip(results, gold)):
        if not pages:
            continue  # no gold page: never supported (gold and fallback stay False)
        view_ids = per_retriever[gate._view].chunk_ids
        bar_listed = per_retriever[bar_retriever]
        by_id = dict(zip(bar_listed.chunk_ids, bar_listed.scores))
        size = len(view_ids)
        scores[position, :size] = [by_id.get(chunk_id, -math.inf) for chunk_id in view_ids]
        listed[position, :size] = True
        is_gold[position, :size] = [page_of(chunk_id) in pages for chunk_id in view_ids]
        fallback[position] = len(bar_listed.chunk_ids) > 0 and page_of(bar_listed.chunk_ids[0]) in pages
    return PassageCuts(scores, listed, is_gold, fallback, None, gate.max_passages)


def bar_support(levels, top, bar) -> np.ndarray:
    """Gold passed on by a cut at ``bar`` that falls back to the top passage when nothing clears it.

    ``levels`` are :func:`support_levels` of the retriever cut and ``top`` its
    top scores: a gold passage clears the bar, or nothing clears it and the
    top passage is gold (its level is the top score). This is how a
    :class:`LearnedGate` cuts the dense list at its cosine bar.
    """
    levels, top = np.asarray(levels, dtype=float), np.asarray(top, dtype=float)
    with np.errstate(invalid="ignore"):
        return (levels >= bar) | ((top < bar) & (levels >= top))
