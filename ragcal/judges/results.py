"""A judge's verdicts on retrieved passages, as the ``"judge"`` retrieval view the judge signals read.

:func:`judge_results` lets a judge read the first ``depth`` passages of each
query's list (the dense list by default: the passages a gate would pass on)
and returns, per query, a :class:`~ragcal.retrieval.base.RetrievalResult`
named ``"judge"``: those passages re-ordered by the judge's probability (ties
keep the retrieved order), the probabilities as scores, and in ``info`` the
probability of the list's first passage (``judge_at_first``). The signals of
:mod:`ragcal.signals.judge` read it, and a threshold gate on ``judge_top1``
passes on only the passages whose probability clears its bar.

:class:`JudgeReader` is the same step as a reader after retrieval
(:mod:`ragcal.retrieval.readers`): an index or a candidate scorer given one
runs it after its retrievers, so retrieval never imports the judges.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._params import check_int
from ..retrieval.base import RetrievalResult
from .loading import judge_config, load_judge
from .protocol import check_not_trained_on

__all__ = ["JUDGE", "AT_FIRST", "JudgeReader", "judge_reader", "judge_results"]

#: The name of the judge's retrieval view.
JUDGE = "judge"
#: ``info`` key: the judge's probability for the first passage of the list it read.
AT_FIRST = "judge_at_first"


def judge_results(
    judge, queries, candidates, texts, *, depth: int = 10, name: str = JUDGE, check_leakage: bool = True
) -> list[RetrievalResult]:
    """The judge's view of each query's first ``depth`` retrieved passages.

    Parameters
    ----------
    judge : Judge
    queries : sequence of str
    candidates : sequence of RetrievalResult
        One list per query (e.g. ``retrieved["dense"]``).
    texts : mapping of str to str
        Chunk id -> passage text.
    depth : int, default=10
        Passages read per query (a threshold gate passes on at most 10).
    name : str, default="judge"
    check_leakage : bool, default=True
        Refuse questions the judge was trained on: what is measured on them
        flatters it. A deployed gate deciding on a question that happens to
        be among them (``ragcal ask``, ``serve``) passes False.

    Returns
    -------
    list of RetrievalResult
        One per query, named ``name``, best judged first; empty for a query
        whose list is empty (its ``judge_at_first`` is NaN).

    Raises
    ------
    JudgeLeakageError
        When the judge was trained on any of ``queries`` (and ``check_leakage``).
    """
    depth = check_int(depth, "depth", "judge_results", low=1)
    queries = [str(query) for query in queries]
    candidates = list(candidates)
    if len(queries) != len(candidates):
        raise ValueError(f"judge_results: {len(queries)} queries but {len(candidates)} retrieved lists")
    if check_leakage:
        check_not_trained_on(judge, queries)
    lists = [tuple(result.chunk_ids[:depth]) for result in candidates]
    missing = sorted({chunk_id for ids in lists for chunk_id in ids if chunk_id not in texts})
    if missing:
        raise KeyError(f"judge_results: no text for {len(missing)} retrieved chunk(s), e.g. {missing[0]!r}")
    scores = judge.score(
        [query for query, ids in zip(queries, lists) for _ in ids], [texts[chunk_id] for ids in lists for chunk_id in ids]
    )
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    # NaN is a judge's "no verdict" (an LLM reply that could not be read): sorted last, never counted as answering.
    if scores.size != sum(map(len, lists)) or not np.all(np.isnan(scores) | ((scores >= 0) & (scores <= 1))):
        raise ValueError(f"judge {getattr(judge, 'name', judge)!r} must return one probability in [0, 1] per pair")
    results, start = [], 0
    for ids, candidate in zip(lists, candidates):
        row = scores[start : start + len(ids)]
        start += len(ids)
        order = np.argsort(-row, kind="stable")
        info = {AT_FIRST: float(row[0]) if len(ids) else float("nan")}
        results.append(
            RetrievalResult(name, tuple(ids[i] for i in order), row[order], info=info, view=candidate.view, corpus=candidate.corpus)
        )
    return results


@dataclass(frozen=True)
class JudgeReader:
    """A judge as a reader after retrieval: reads the first ``depth`` passages of ``source`` into the ``"judge"`` view.

    Meets :class:`ragcal.retrieval.readers.PassageReader`; build one from a
    folder or a name with :func:`ragcal.judges.judge_reader`.

    Parameters
    ----------
    judge : Judge
    depth : int, default=10
        Passages read per query (a threshold gate passes on at most 10).
    source : str, default="dense"
        The view whose lists the judge reads: the passages a gate passes on.
    """

    judge: object
    depth: int = 10
    source: str = "dense"
    name = JUDGE

    def __post_init__(self):
        object.__setattr__(self, "depth", check_int(self.depth, "depth", "JudgeReader", low=1))

    def config(self) -> dict:
        return judge_config(self.judge, depth=self.depth)

    def __call__(self, queries, retrieved, texts, *, check_leakage: bool = True) -> list[RetrievalResult]:
        if self.source not in retrieved:
            raise KeyError(f"JudgeReader reads the {self.source!r} view, but only {', '.join(retrieved)} were retrieved")
        return judge_results(
            self.judge, queries, retrieved[self.source], texts, depth=self.depth, name=self.name,
            check_leakage=check_leakage,
        )


def judge_reader(judge, *, depth: int = 10, cache_dir=None, use_cache: bool = True):
    """The judge ``judge`` names (:func:`load_judge`) as a reader after retrieval that reads ``depth`` dense passages.

    Returns
    -------
    JudgeReader
        For ``build_index(..., readers=[...])`` and ``score_candidates(..., readers=[...])``.
    """
    depth = check_int(depth, "depth", "judge_reader", low=1)
    return JudgeReader(load_judge(judge, cache_dir=cache_dir, use_cache=use_cache), depth=depth)
