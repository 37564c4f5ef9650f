"""Judge signals: whether a retrieved passage *answers* the question, not only whether it is about it.

They read the ``"judge"`` view (:func:`ragcal.judges.judge_results`): the
first k passages of the dense list (k = the judge's depth, 10 by default,
what a threshold gate passes on), each with a judge's probability that it
answers the question, best judged first. They exist only where a judge ran
(:func:`ragcal.signals.signals_for`), and a gate fitted on them records the
judge's fingerprint and refuses another judge.

- ``judge_top1``: the best probability among the k. A passage-scale signal,
  so a :class:`~ragcal.gates.ThresholdGate` on it passes on only the
  passages the judge accepts (its bar cuts the list).
- ``judge_mass``: the share of the k judged answering (probability >= 0.5).
- ``judge_at_dense_top1``: the judge on the top dense passage alone.
- ``judge_gap``: best minus second-best probability in the judge's order.
"""

from __future__ import annotations

from .batch import ResultBatch, by_length
from .registry import register_batch_signal

__all__ = ["JUDGE", "JUDGE_SIGNALS", "ANSWERS_AT"]

#: The retriever name of the judge's view (ragcal.judges.results.JUDGE).
JUDGE = "judge"
#: A passage counts as answering in ``judge_mass`` from this probability on.
ANSWERS_AT = 0.5


def _top(batch: ResultBatch, rank: int = 1):
    return batch.top_scores(JUDGE, rank)[:, rank - 1]


@register_batch_signal("judge_top1", retrievers=(JUDGE,), passage_scale=True)
def judge_top1(batch):
    """A judge's highest probability that one of the top-k passages answers; NaN when nothing was retrieved."""
    return _top(batch)


@register_batch_signal("judge_mass", retrievers=(JUDGE,))
def judge_mass(batch):
    """Share of the top-k passages the judge says answer (probability >= 0.5); NaN when nothing was retrieved."""
    lengths = batch.lengths(JUDGE)
    return by_length(batch.scores(JUDGE), lengths, lambda scores: (scores >= ANSWERS_AT).mean(axis=1))


@register_batch_signal("judge_at_dense_top1", retrievers=(JUDGE,))
def judge_at_dense_top1(batch):
    """A judge's probability that the top dense passage answers; NaN when nothing was retrieved."""
    return batch.info(JUDGE, "judge_at_first")


@register_batch_signal("judge_gap", retrievers=(JUDGE,))
def judge_gap(batch):
    """The judge's best minus second-best probability over the top-k; NaN with fewer than two passages."""
    return _top(batch) - _top(batch, 2)


#: The signals this module registers, in registration order.
JUDGE_SIGNALS = ("judge_top1", "judge_mass", "judge_at_dense_top1", "judge_gap")

