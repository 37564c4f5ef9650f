"""Review estimates: what a labeled review sample says about the live log, with exact stratified intervals.

::

    labels = read_review_labels("review.csv")
    estimates = review_estimates(labels)             # shares with exact stratified intervals
    print(estimates.to_markdown())

The estimator and its interval
------------------------------
Each estimated share is of one decision's rows in the live log, e.g. the share
of refusals that were answerable. With stratum sizes ``N_h`` (rows of the log),
``m_h`` labeled rows and ``x_h`` of them in the event, the stratified estimate
is ``sum_h N_h * x_h / m_h / N`` (NaN while some non-empty stratum has no
label). The interval is exact for the design: in each stratum, an exact
hypergeometric confidence set for the number ``X_h`` of rows in the event
(finite population, without replacement, :data:`scipy.stats.hypergeom`), at
level ``1 - alpha / H`` (two-sided), where ``H`` counts the strata that are
partly labeled; Bonferroni's inequality then makes the sums of the bounds,
divided by ``N``, a ``1 - alpha`` interval for the share. Fully labeled strata
are known exactly and unlabeled ones contribute ``[0, N_h]``; neither spends
any ``alpha``. The interval is conservative (its coverage is at least the
nominal level, usually more); it assumes which sampled rows got labeled does
not depend on their labels (label them in any order, but do not skip the hard
ones).

Supported answers: an answered row counts as supported when one of its
``gold`` pages is among the pages the gate passed on (``passed_pages``, from
:meth:`Gate.passages_for`, written by :func:`attach_passages`; the top-K
``page_i`` columns when a file has no ``passed_pages``). An answerable row with
empty ``gold`` (the page that answers it was not retrieved) is unsupported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._params import check_float
from .review_files import page_columns

__all__ = ["WRONG_REFUSAL_LIMIT", "ReviewEstimates", "review_estimates", "stratified_share"]

#: Seed 003: "if more than 20% of rejections were wrong, your threshold is too high".
WRONG_REFUSAL_LIMIT = 0.2


def _count_bounds(positives: int, labeled: int, size: int, tail: float) -> tuple[int, int]:
    """Exact hypergeometric bounds on the number of rows in the event among a stratum's ``size`` rows.

    ``positives`` of ``labeled`` rows drawn without replacement were in the
    event. Each side is the confidence set of a one-sided exact test at level
    ``tail``: every count ``K`` for which ``P(X >= positives | K) > tail``
    and ``P(X <= positives | K) > tail``.
    """
    from scipy.stats import hypergeom

    if labeled == 0:
        return 0, size
    if labeled == size:
        return positives, positives
    counts = np.arange(size + 1)
    at_least = hypergeom.sf(positives - 1, size, counts, labeled)
    at_most = hypergeom.cdf(positives, size, counts, labeled)
    return int(counts[at_least > tail].min()), int(counts[at_most > tail].max())


def stratified_share(sizes, labeled, positives, *, confidence: float = 0.95) -> tuple[float, float, float]:
    """Stratified estimate of a population share, with an exact Bonferroni-combined hypergeometric interval.

    Parameters
    ----------
    sizes : array-like of int
        Rows of the population in each stratum (``N_h``).
    labeled : array-like of int
        Rows drawn and labeled in each stratum (``m_h``), by simple random
        sampling without replacement.
    positives : array-like of int
        Labeled rows in the event (``x_h``).
    confidence : float, default=0.95

    Returns
    -------
    estimate : float
        ``sum(N_h * x_h / m_h) / sum(N_h)``; NaN when a non-empty stratum has
        no label (or the population is empty).
    low, high : float
        ``sum(L_h) / N`` and ``sum(U_h) / N`` with ``[L_h, U_h]`` the exact
        hypergeometric bounds of each stratum at ``1 - (1 - confidence) / H``,
        ``H`` the number of partly labeled strata. Coverage is at least
        ``confidence``. NaN for an empty population.

    Examples
    --------
    >>> stratified_share([10, 30], [10, 0], [4, 0])  # one stratum fully labeled, the other not at all
    (nan, 0.1, 0.85)
    """
    sizes, labeled, positives = (np.asarray(values, dtype=int) for values in (sizes, labeled, positives))
    confidence = check_float(confidence, "confidence", "stratified_share", low=0, high=1)
    if np.any(labeled > sizes) or np.any(positives > labeled) or np.any(positives < 0):
        raise ValueError(f"stratified_share: need 0 <= positives <= labeled <= sizes; got {positives}, {labeled}, {sizes}")
    total = int(sizes.sum())
    if total == 0:
        return math.nan, math.nan, math.nan
    uncertain = int(((labeled > 0) & (labeled < sizes)).sum())
    tail = (1 - confidence) / (2 * max(uncertain, 1))
    bounds = np.array([_count_bounds(x, m, n, tail) for x, m, n in zip(positives, labeled, sizes)]).reshape(-1, 2)
    present = sizes > 0
    if np.any(present & (labeled == 0)):
        estimate = math.nan
    else:
        estimate = float(np.sum(sizes[present] * positives[present] / labeled[present]) / total)
    return estimate, float(bounds[:, 0].sum() / total), float(bounds[:, 1].sum() / total)


def _supported(labels: pd.DataFrame) -> np.ndarray:
    """True where one of the row's gold pages is among the pages the gate passed on (see the module docstring)."""
    if "passed_pages" in labels.columns:
        passed = [set(filter(None, (page.strip() for page in str(text).split(";")))) for text in labels["passed_pages"]]
    else:
        pages = labels[page_columns(labels.columns)].astype(str)
        passed = [set(filter(None, values)) for values in pages.itertuples(index=False)]
    return np.array([bool(set(gold) & pages) for gold, pages in zip(labels["gold"], passed)], dtype=bool)


#: estimand -> (decision whose rows it is a share of, what it counts, how to say it).
_ESTIMANDS = {
    "refusals_answerable": ("refuse", "answerable", "refusals that were answerable"),
    "hedges_answerable": ("hedge", "answerable", "hedges that were answerable"),
    "answers_unanswerable": ("answer", "unanswerable", "answers to unanswerable questions"),
    "answers_unsupported": ("answer", "unsupported", "answers to answerable questions without a gold passage"),
    "answers_wrong": ("answer", "wrong", "answers unanswerable or unsupported"),
}


@dataclass(frozen=True)
class ReviewEstimates:
    """What a labeled review sample says about the live log.

    Attributes
    ----------
    table : DataFrame
        One row per estimand (``refusals_answerable``, ``hedges_answerable``,
        ``answers_unanswerable``, ``answers_unsupported``, ``answers_wrong``):
        ``decision``, ``population`` (its rows in the log), ``sampled``,
        ``labeled``, ``positives`` (labeled rows in the event), ``estimate``,
        ``low``, ``high``.
    strata : DataFrame
        One row per stratum: ``stratum``, ``decision``, ``stratum_size``,
        ``sampled``, ``labeled``.
    confidence : float
    refusal_verdict : str
        Seed 003's 20% rule stated against the interval of ``refusals_answerable``.
    """

    table: pd.DataFrame
    strata: pd.DataFrame
    confidence: float
    refusal_verdict: str

    def to_markdown(self) -> str:
        """The estimates, the strata and the verdict as Markdown."""
        shown = self.table.copy()
        for column in ("estimate", "low", "high"):
            shown[column] = shown[column].map(lambda value: "n/a" if value != value else f"{value:.1%}")
        return "\n".join(
            [
                f"Shares of the live log's decisions ({self.confidence:.0%} exact stratified intervals):",
                "",
                shown.to_markdown(index=False),
                "",
                "Labeled per stratum:",
                "",
                self.strata.to_markdown(index=False),
                "",
                self.refusal_verdict,
            ]
        )


def _refusal_verdict(row, confidence: float, limit: float) -> str:
    if row.population == 0:
        return "Seed 003's rule: the live log has no refusals to check."
    level = f"{confidence:.0%} confidence"
    if row.low > limit:
        return (f"Seed 003's rule: more than {limit:.0%} of refusals were answerable (at least {row.low:.1%} at "
                f"{level}): the threshold is too high.")
    if row.high < limit:
        return (f"Seed 003's rule: fewer than {limit:.0%} of refusals were answerable (at most {row.high:.1%} at "
                f"{level}): the threshold passes.")
    return (f"Seed 003's rule: undecided, the interval [{row.low:.1%}, {row.high:.1%}] of answerable refusals "
            f"contains {limit:.0%}; label more refusals ({row.labeled} of {row.population} labeled).")


def review_estimates(labels: pd.DataFrame, *, confidence: float = 0.95,
                     wrong_refusal_limit: float = WRONG_REFUSAL_LIMIT) -> ReviewEstimates:
    """Stratified estimates with exact intervals from a labeled review sample (:func:`read_review_labels`).

    Only labeled rows count; each share is of one decision's rows in the
    live log, weighted by ``stratum_size`` (see the module docstring for the
    estimator, the interval and which passages count as support).

    Parameters
    ----------
    labels : DataFrame
        From :func:`read_review_labels`.
    confidence : float, default=0.95
    wrong_refusal_limit : float, default=0.2
        Seed 003's limit on the share of refusals that were answerable.

    Returns
    -------
    ReviewEstimates
    """
    from ..gates.base import ACTIONS

    confidence = check_float(confidence, "confidence", "review_estimates", low=0, high=1)
    labeled = labels["labeled"].to_numpy(dtype=bool)
    answerable = labels["answerable"].fillna(False).to_numpy(dtype=bool)
    supported = _supported(labels)
    events = {
        "answerable": labeled & answerable,
        "unanswerable": labeled & ~answerable,
        "unsupported": labeled & answerable & ~supported,
        "wrong": labeled & ~(answerable & supported),
    }
    strata = (
        labels.assign(_labeled=labeled)
        .groupby("stratum", sort=False)
        .agg(decision=("decision", "first"), stratum_size=("stratum_size", "first"),
             sampled=("stratum_sampled", "first"), labeled=("_labeled", "sum"))
        .reset_index()
    )
    order = {name: position for position, name in enumerate(f"{d}/{b}" for d in ACTIONS for b in ("near", "far"))}
    strata = strata.sort_values("stratum", key=lambda names: names.map(lambda n: order.get(n, len(order))))
    strata = strata.reset_index(drop=True)
    rows = []
    for name, (decision, event, _) in _ESTIMANDS.items():
        block = strata[strata["decision"] == decision]
        positives = [int(events[event][(labels["stratum"] == stratum).to_numpy()].sum()) for stratum in block["stratum"]]
        estimate, low, high = stratified_share(block["stratum_size"], block["labeled"], positives, confidence=confidence)
        rows.append({
            "estimand": name,
            "decision": decision,
            "population": int(block["stratum_size"].sum()),
            "sampled": int(block["sampled"].sum()),
            "labeled": int(block["labeled"].sum()),
            "positives": int(sum(positives)),
            "estimate": estimate,
            "low": low,
            "high": high,
        })
    table = pd.DataFrame(rows)
    verdict = _refusal_verdict(table.iloc[0], confidence, wrong_refusal_limit)
    return ReviewEstimates(table, strata, float(confidence), verdict)
