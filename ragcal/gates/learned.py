"""A gate on a learned combination of signals: any scikit-learn classifier, logistic regression by default.

The classifier (:mod:`ragcal.gates.learned_score`) reads named signals
(columns of the score table, or the registered signal functions on one
query's results) and outputs a probability-like score,
``P(answerable | signals)``. That score is then calibrated by the same
threshold rules as any single signal (``keep@0.95`` ...), on out-of-fold
scores of the calibration rows, so a :class:`LearnedGate` answers when its
score clears a threshold.

::

    from ragcal.gates import fit_learned_gate

    gate = fit_learned_gate(calibration, "keep@0.95", signals=["dense_top1", "bm25_coverage_corpus"])
    gate.decide(results).score          # the learned score of one query
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd

from .._params import check_float, check_int
from ..calibration import fit_threshold
from ..score_tables import check_score_table
from ..signals import get_signal
from ._numbers import to_json_number
from .base import Decided, Decision, Gate, decide_table_from_arrays, decided, register_gate_type
from .learned_score import (
    LinearScore,
    check_not_empty,
    check_signals,
    fit_score_matrix,
    one_blas_thread,
    signal_matrix,
    signal_names,
)
from .threshold import cut_passages

__all__ = [
    "DEFAULT_LEARNED_SIGNALS",
    "LearnedGate",
    "fit_learned_gate",
    "crossfit_scores",
]

#: The signals a learned gate combines when none are named. In the nested held-out evaluation of
#: :mod:`ragcal.study.learned` (1,000 splits, both bundled corpora) this set refused as many near-domain questions at
#: keep@0.95 as all 17 continuous signals together (FastAPI 95.5% vs 96.6%, Rust book 85.7% vs 86.2%) and far more
#: than dense_top1 + bm25_top1_raw on the Rust book (65.3%), with every coefficient positive on every split. It was
#: picked among three candidate sets on the same labeled data, so treat it as a good default, not a tuned optimum.
DEFAULT_LEARNED_SIGNALS = ("dense_top1", "bm25_top1_raw", "bm25_coverage_corpus", "bm25_coverage_top10")


def fold_strata(table: pd.DataFrame) -> np.ndarray:
    """Slice and label of each row, what the out-of-fold folds are stratified by."""
    return (table["slice"].astype(str) + "|" + table["answerable"].astype(str)).to_numpy()


def _folds(strata: np.ndarray, n_folds: int, random_state, *, groups=None) -> list:
    """``[(train, test)]``: stratified by ``strata``, shuffled, at most as many folds as the smallest stratum has rows.

    ``StratifiedKFold`` numbers the strata in order of first appearance, so
    any labels that tell the same strata apart (the strings of
    :func:`fold_strata` or integer codes of them) give the same folds.

    With ``groups`` (one label per row), every group is in one fold only
    (``StratifiedGroupKFold``, as stratified as whole groups allow), with at
    most as many folds as there are groups.
    """
    from sklearn.model_selection import StratifiedKFold

    if groups is not None:
        return _group_folds(strata, np.asarray(groups), n_folds, random_state)
    smallest = int(np.unique(strata, return_counts=True)[1].min())
    n_folds = max(2, min(n_folds, smallest))
    folds = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=random_state)
    return list(folds.split(np.zeros(len(strata)), strata))


def _group_folds(strata: np.ndarray, groups: np.ndarray, n_folds: int, random_state) -> list:
    from sklearn.model_selection import StratifiedGroupKFold

    if groups.shape != (len(strata),):
        raise ValueError(f"crossfit_scores: {groups.size} group labels for {len(strata)} rows")
    n_groups = len(pd.unique(groups))
    if n_groups < 2:
        raise ValueError(f"crossfit_scores: grouped folds need at least two groups. Got {n_groups}.")
    folds = StratifiedGroupKFold(n_splits=min(n_folds, n_groups), shuffle=True, random_state=random_state)
    return list(folds.split(np.zeros(len(strata)), strata, groups))


def _crossfit_matrix(X, labels, folds, signals: tuple, estimator, random_state) -> np.ndarray:
    scores = np.full(len(X), np.nan)
    with one_blas_thread():
        for train, test in folds:
            model = fit_score_matrix(X[train], labels[train], signals, estimator, random_state)
            scores[test] = model.score(X[test])
    return scores


def crossfit_scores(
    table: pd.DataFrame, signals, *, estimator=None, n_folds: int = 5, random_state=0, groups=None
) -> np.ndarray:
    """Out-of-fold learned scores: each row scored by a model fitted on the other folds (stratified by slice).

    These are the scores a threshold is fitted on, so that the threshold does
    not see the optimistic in-sample scores of the rows the model was trained on.

    Parameters
    ----------
    groups : array-like, default=None
        One label per row (e.g. the article of each question). When given,
        every group is in one fold only, so no row is scored by a model fitted
        on a row of its own group (scikit-learn's ``StratifiedGroupKFold``,
        at most as many folds as groups; ``n_folds`` at least the number of
        groups leaves one group out at a time). Needs at least two groups.
    """
    signals = check_signals(table, signals, "crossfit_scores")
    folds = _folds(fold_strata(table), n_folds, random_state, groups=groups)
    return _crossfit_matrix(
        signal_matrix(table, signals), table["answerable"].to_numpy(dtype=bool), folds, signals, estimator, random_state
    )


def _warn_missing(signals, where: str) -> None:
    from .files import GateWarning

    warnings.warn(
        f"learned gate: signal(s) {', '.join(signals)} are NaN {where}; the model fills in their training mean, "
        "so the learned score is not the one it was calibrated with. Retrieve with ragcal's retrievers (or "
        "retrieve_with, which attaches their diagnostics), or fit the gate on signals your engine provides",
        GateWarning,
        stacklevel=3,
    )


@register_gate_type
@dataclass(frozen=True)
class LearnedGate(Gate):
    """Answer when a learned combination of signals clears a calibrated threshold.

    Parameters
    ----------
    model : LinearScore or SklearnScore
        From :func:`fit_learned_score`; its ``signals`` are registered signal names.
    threshold : float
        Answer when the learned score is at least this.
    hedge_below : float, default=None
        Scores between ``threshold`` and ``hedge_below`` are answered with a hedge.
    passages_from : str, default="dense"
        Retriever whose list is passed on.
    passage_floor : float, default=None
        Cosine (score in ``passages_from``) a passage must reach to be passed
        on; None passes on only the top passage (the learned score is not on a
        passage's scale).
    max_passages : int or None, default=10

    Examples
    --------
    >>> model = LinearScore(("dense_top1",), (0.4,), (0.1,), (2.0,), 0.0)
    >>> gate = LearnedGate(model, 0.5)
    >>> round(float(model.score([[0.5]])[0]), 4)
    0.8808
    """

    type = "learned"

    model: object
    threshold: float
    hedge_below: float | None = None
    passages_from: str = "dense"
    passage_floor: float | None = None
    max_passages: int | None = 10

    def __post_init__(self):
        for name in self.model.signals:
            get_signal(name)  # unknown names list the registered ones
        threshold = check_float(self.threshold, "threshold", "LearnedGate")
        object.__setattr__(self, "threshold", threshold)
        hedge = check_float(
            self.hedge_below, "hedge_below", "LearnedGate", low=threshold, low_open=False, allow_none=True
        )
        object.__setattr__(self, "hedge_below", hedge)
        max_passages = check_int(self.max_passages, "max_passages", "LearnedGate", low=1, allow_none=True)
        object.__setattr__(self, "max_passages", max_passages)

    @property
    def signals(self) -> tuple:
        return self.model.signals

    @property
    def retrievers(self) -> tuple[str, ...]:
        names = [retriever for signal in self.signals for retriever in get_signal(signal).retrievers]
        return tuple(dict.fromkeys((*names, self.passages_from)))

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.signals)

    def score_table(self, table: pd.DataFrame) -> np.ndarray:
        """The learned score of every row of a score table."""
        self._check_table(table)
        X = signal_matrix(table, self.signals)
        missing = [name for name, empty in zip(self.signals, np.isnan(X).all(axis=0)) if empty] if len(X) else []
        if missing:
            _warn_missing(missing, "on every row of the table")
        return self.model.score(X)

    def score(self, results: Mapping) -> float:
        """The learned score of one query's retrieval results."""
        self._check_results(results)
        values = [get_signal(name)(results) for name in self.signals]
        # NaN from a retriever that carries no diagnostics (another engine, or retrieve(diagnostics=False)).
        missing = [
            name
            for name, value in zip(self.signals, values)
            if math.isnan(value) and not any(results[r].info for r in get_signal(name).retrievers)
        ]
        if missing:
            _warn_missing(missing, "because the results carry no per-query diagnostics")
        return float(self.model.score(np.array([values], dtype=float))[0])

    def passages_for(self, results: Mapping, *, stage: str | None = None) -> list:
        """The ``(chunk id, score)`` pairs :meth:`decide` passes on when it answers (empty: nothing to pass on)."""
        bar_retriever = self.passages_from if self.passage_floor is not None else None
        passages = cut_passages(
            results,
            self.passages_from,
            bar_retriever=bar_retriever,
            bar=self.passage_floor,
            max_passages=self.max_passages,
        )
        if not passages:
            passages = cut_passages(results, self.passages_from, bar_retriever=None, bar=None, max_passages=1)
        return passages

    def passage_key(self, *, stage: str | None = None):
        """Everything :meth:`passages_for` reads: the cosine bar's cut, whatever the model and threshold."""
        return (LearnedGate, self.passages_from, self.passage_floor, self.max_passages)

    def decide(self, results: Mapping, *, query: str | None = None) -> Decision:
        score = self.score(results)
        if math.isnan(score):
            return self._refuse(results, query, ["learned score is undefined"], score)
        if score < self.threshold:
            return self._refuse(results, query, [f"learned score {score:.3f} fails >= {self.threshold:.3f}"], score)
        reasons = [f"learned score {score:.3f} >= {self.threshold:.3f} ({', '.join(self.signals)})"]
        action = "answer"
        if self.hedge_below is not None and score < self.hedge_below:
            action = "hedge"
            reasons.append(f"learned score {score:.3f} inside the hedge band (fails >= {self.hedge_below:.3f})")
        passages = self.passages_for(results)
        if not passages:  # never answer with nothing to answer from
            return self._refuse(results, query, reasons + ["no passage to pass on"], score)
        return self._answer(action, results, query, passages, reasons, score)

    decide_table = decide_table_from_arrays

    def decide_arrays(self, table: pd.DataFrame) -> Decided:
        """:meth:`decide_table`'s columns as arrays (:class:`~ragcal.gates.base.Decided`)."""
        scores = self.score_table(table)
        with np.errstate(invalid="ignore"):
            answered = ~np.isnan(scores) & (scores >= self.threshold)
            hedged = answered & (scores < self.hedge_below if self.hedge_below is not None else False)
        action = np.where(answered, np.where(hedged, "hedge", "answer"), "refuse")
        return decided(action, scores)

    def to_dict(self) -> dict:
        return {
            "type": self.type,
            **self.model.to_dict(),
            "threshold": to_json_number(self.threshold),
            "hedge_below": to_json_number(self.hedge_below),
            "passages_from": self.passages_from,
            "passage_floor": to_json_number(self.passage_floor),
            "max_passages": self.max_passages,
        }

    @classmethod
    def from_dict(cls, data: Mapping, *, where: str = "gate") -> "LearnedGate":
        from . import _fields as f

        f.fields_of(
            data,
            where,
            required=("type", "signals", "scaler_mean", "scaler_scale", "coefficients", "intercept", "threshold"),
            optional=("model", "params", "link", "hedge_below", "passages_from", "passage_floor", "max_passages"),
        )
        return cls(
            LinearScore.from_dict(data, where=where),
            f.number(data, "threshold", where, infinite=True),
            hedge_below=f.number(data, "hedge_below", where, default=None, infinite=True),
            passages_from=f.text(data, "passages_from", where, default="dense"),
            passage_floor=f.number(data, "passage_floor", where, default=None),
            max_passages=f.positive_int_or_none(data, "max_passages", where, default=10),
        )


def fit_learned_gate(
    table: pd.DataFrame,
    rule: str,
    *,
    signals=DEFAULT_LEARNED_SIGNALS,
    estimator=None,
    hedge_rule: str | None = None,
    delta: float = 0.1,
    n_folds: int | None = 5,
    random_state=0,
    **gate_options,
) -> LearnedGate:
    """Fit a classifier on ``table`` and calibrate its score with ``rule``.

    Parameters
    ----------
    table : DataFrame
        Calibration score table; every row is used for the model, and the
        threshold is fitted on the same rows' out-of-fold scores.
    rule : str
        Any threshold rule, e.g. ``"keep@0.95"``.
    signals : sequence of str, default=DEFAULT_LEARNED_SIGNALS
    estimator : scikit-learn classifier, default=None
        ``LogisticRegression()`` when None; imputation and scaling are added in front.
    hedge_rule : str, default=None
    delta : float, default=0.1
        For the guarantee rules.
    n_folds : int or None, default=5
        The threshold is fitted on ``n_folds``-fold out-of-fold scores
        (:func:`crossfit_scores`); None fits it on the final model's in-sample
        scores, which are optimistic for the rows it was trained on.
    **gate_options
        Passed to :class:`LearnedGate` (``passages_from``, ``passage_floor``, ``max_passages``). Without a
        ``passage_floor``, passages from ``"dense"`` are cut at the cosine bar that ``rule`` gives
        ``dense_top1`` on the same table (at most ``max_passages``).
    """
    signals = signal_names(signals, "fit_learned_gate")
    gates = fit_learned_gates(
        table,
        rule,
        {"gate": signals},
        estimator=estimator,
        hedge_rule=hedge_rule,
        delta=delta,
        n_folds=n_folds,
        random_state=random_state,
        **gate_options,
    )
    return gates["gate"]


def fit_learned_gates(
    table: pd.DataFrame,
    rule: str,
    signal_sets: Mapping,
    *,
    estimator=None,
    hedge_rule: str | None = None,
    delta: float = 0.1,
    n_folds: int | None = 5,
    random_state=0,
    strata=None,
    checked: bool = False,
    **gate_options,
) -> dict:
    """``{name: LearnedGate}``: :func:`fit_learned_gate` on ``table`` for each ``{name: signals}`` of ``signal_sets``.

    Each gate is the one :func:`fit_learned_gate` returns for its signals.
    What does not depend on the signals is done once: the table's checks,
    the cosine bar of the passages and, for an integer ``random_state``, the
    out-of-fold folds (another seed draws new folds for every set, as
    separate calls would).

    Parameters
    ----------
    strata : ndarray, default=None
        ``fold_strata(table)``, when the caller has it (the rows of a larger table's).
    checked : bool, default=False
        True when ``check_score_table`` has passed on these columns already
        (on a larger table): only "NaN on every calibration row" is left to check.
    """
    sets = {name: signal_names(signals, "fit_learned_gate") for name, signals in signal_sets.items()}
    if not checked:
        check_score_table(table, list(dict.fromkeys(signal for signals in sets.values() for signal in signals)))
    matrices = {name: signal_matrix(table, signals) for name, signals in sets.items()}
    for name, signals in sets.items():
        check_not_empty(signals, matrices[name], "fit_learned_gate")
    labels = table["answerable"].to_numpy(dtype=bool)
    if gate_options.get("passage_floor") is None and gate_options.get("passages_from", "dense") == "dense":
        if "dense_top1" in table.columns and table["dense_top1"].notna().any():
            # The learned score is not on a passage's scale: pass on the dense passages that clear the cosine bar
            # the same rule gives dense_top1, as a ThresholdGate would.
            gate_options["passage_floor"] = fit_threshold(rule, table["dense_top1"], labels, delta=delta)
    fitted, folds = {}, None
    with one_blas_thread():
        for name, signals in sets.items():
            model = fit_score_matrix(matrices[name], labels, signals, estimator, random_state)
            out_of_fold = None
            if n_folds is not None:
                if folds is None or not isinstance(random_state, numbers.Integral):
                    folds = _folds(fold_strata(table) if strata is None else strata, n_folds, random_state)
                out_of_fold = _crossfit_matrix(matrices[name], labels, folds, signals, estimator, random_state)
            fitted[name] = model, out_of_fold
    gates = {}
    for name, (model, scores) in fitted.items():
        if scores is None:
            scores = model.score(matrices[name])
        threshold = fit_threshold(rule, scores, labels, delta=delta)
        hedge_below = None
        if hedge_rule is not None:
            hedge_below = max(fit_threshold(hedge_rule, scores, labels, delta=delta), threshold)
        gates[name] = LearnedGate(model, threshold, hedge_below=hedge_below, **gate_options)
    return gates
