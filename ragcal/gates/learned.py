"""A gate on a learned combination of signals: any scikit-learn classifier, logistic regression by default.

The classifier reads named signals (columns of the score table, or the
registered signal functions on one query's results) and outputs a
probability-like score, ``P(answerable | signals)``. That score is then
calibrated by the same threshold rules as any single signal (``keep@0.95``
...), so a :class:`LearnedGate` answers when its score clears a threshold.

Missing values (a signal that is NaN for a query) are replaced by the
calibration mean, and every signal is standardised, inside the pipeline.
A linear model is kept as plain numbers (:class:`LinearScore`: the scaler's
mean and scale, the coefficients and the intercept), which is what a gate
file stores; nothing opaque is pickled. Other classifiers work in memory
(for evaluation) but cannot be saved.

::

    from ragcal.gates import fit_learned_gate

    gate = fit_learned_gate(calibration, "keep@0.95", signals=["dense_top1", "bm25_coverage_corpus"])
    gate.decide(results).score          # the learned score of one query
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd

from ..calibration import fit_threshold
from ..score_tables import check_score_table
from ..signals import get_signal
from ._numbers import to_json_number
from .base import Decision, Gate, actions_frame, register_gate_type
from .threshold import _check_max_passages, cut_passages

__all__ = [
    "DEFAULT_LEARNED_SIGNALS",
    "LinearScore",
    "SklearnScore",
    "LearnedGate",
    "learned_pipeline",
    "fit_learned_score",
    "fit_learned_gate",
    "crossfit_scores",
]

#: The signals a learned gate combines when none are named. In the nested held-out evaluation of
#: :mod:`ragcal.study.learned` (1,000 splits, both bundled corpora) this set refused as many near-domain questions at
#: keep@0.95 as all 17 continuous signals together (FastAPI 95.5% vs 96.6%, Rust book 85.7% vs 86.2%) and far more
#: than dense_top1 + bm25_top1_raw on the Rust book (65.3%), with every coefficient positive on every split. It was
#: picked among three candidate sets on the same labeled data, so treat it as a good default, not a tuned optimum.
DEFAULT_LEARNED_SIGNALS = ("dense_top1", "bm25_top1_raw", "bm25_coverage_corpus", "bm25_coverage_top10")


def _expit(values):
    return 1.0 / (1.0 + np.exp(-values))


def _matrix(table: pd.DataFrame, signals) -> np.ndarray:
    return table[list(signals)].to_numpy(dtype=float)


@dataclass(frozen=True)
class LinearScore:
    """A fitted linear model over standardised signals, as plain numbers.

    ``score(X) = 1 / (1 + exp(-(intercept + sum_j coef_j * z_j)))`` with
    ``z_j = (x_j - mean_j) / scale_j`` and ``z_j = 0`` (the calibration mean)
    where ``x_j`` is NaN: exactly what scikit-learn's mean imputation,
    ``StandardScaler`` and ``LogisticRegression.predict_proba`` compute.
    ``coef`` are the standardised coefficients: the change of the log-odds of
    "answerable" per standard deviation of each signal.

    Attributes
    ----------
    signals : tuple of str
    mean, scale, coef : tuple of float
        One value per signal.
    intercept : float
    model : str, default="logistic_regression"
        What produced the numbers (for the record).
    params : dict
        The estimator's parameters (for the record).
    """

    signals: tuple
    mean: tuple
    scale: tuple
    coef: tuple
    intercept: float
    model: str = "logistic_regression"
    params: Mapping = None

    def __post_init__(self):
        n = len(self.signals)
        for name in ("mean", "scale", "coef"):
            values = tuple(float(value) for value in getattr(self, name))
            if len(values) != n:
                raise ValueError(f"LinearScore: {n} signals but {len(values)} values of {name!r}")
            object.__setattr__(self, name, values)
        if any(not value > 0 for value in self.scale):
            raise ValueError(f"LinearScore: every scale must be positive. Got {self.scale} instead.")
        object.__setattr__(self, "signals", tuple(self.signals))
        object.__setattr__(self, "intercept", float(self.intercept))
        object.__setattr__(self, "params", dict(self.params or {}))

    def standardise(self, X) -> np.ndarray:
        standardised = (np.asarray(X, dtype=float) - np.asarray(self.mean)) / np.asarray(self.scale)
        return np.where(np.isnan(standardised), 0.0, standardised)

    def score(self, X) -> np.ndarray:
        """Learned score of each row of ``X`` (columns in :attr:`signals` order)."""
        return _expit(self.standardise(np.atleast_2d(X)) @ np.asarray(self.coef) + self.intercept)

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "params": self.params,
            "signals": list(self.signals),
            "scaler_mean": [to_json_number(value) for value in self.mean],
            "scaler_scale": [to_json_number(value) for value in self.scale],
            "coefficients": [to_json_number(value) for value in self.coef],
            "intercept": to_json_number(self.intercept),
            "link": "logistic",
        }

    @classmethod
    def from_dict(cls, data: Mapping, *, where: str = "gate") -> "LinearScore":
        from . import _fields as f

        if data.get("link", "logistic") != "logistic":
            raise f.GateFieldError(f"field {where + '.link'!r}: only 'logistic' is supported, got {data.get('link')!r}")
        signals = data.get("signals")
        if not isinstance(signals, list) or not signals or not all(isinstance(name, str) for name in signals):
            raise f.GateFieldError(f"field {where + '.signals'!r}: expected a non-empty list of signal names")
        params = data.get("params") or {}
        if not isinstance(params, Mapping):
            raise f.GateFieldError(f"field {where + '.params'!r}: expected an object")
        n = len(signals)
        return cls(
            tuple(signals),
            f.numbers(data, "scaler_mean", where, length=n),
            f.numbers(data, "scaler_scale", where, length=n),
            f.numbers(data, "coefficients", where, length=n),
            f.number(data, "intercept", where),
            model=f.text(data, "model", where, default="logistic_regression"),
            params=params,
        )


@dataclass(frozen=True)
class SklearnScore:
    """A fitted scikit-learn pipeline whose last step is not linear; usable in memory, not savable."""

    signals: tuple
    pipeline: object

    def score(self, X) -> np.ndarray:
        X = np.atleast_2d(np.asarray(X, dtype=float))
        if hasattr(self.pipeline, "predict_proba"):
            return self.pipeline.predict_proba(X)[:, list(self.pipeline.classes_).index(True)]
        return self.pipeline.decision_function(X)

    def to_dict(self) -> dict:
        estimator = type(self.pipeline.steps[-1][1]).__name__
        raise ValueError(
            f"a learned gate over {estimator} cannot be saved: gate files hold numbers, not pickled objects; "
            "use a linear model (LogisticRegression, the default) to save it"
        )


def learned_pipeline(estimator=None, *, random_state=0):
    """Mean imputation, standard scaling and ``estimator`` (``LogisticRegression()`` when None) in one pipeline."""
    from sklearn.base import clone
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    if estimator is None:
        estimator = LogisticRegression(C=1.0, max_iter=1000, random_state=random_state)
    elif not hasattr(estimator, "fit"):
        raise TypeError(f"The 'estimator' parameter must be a scikit-learn classifier. Got {estimator!r} instead.")
    return Pipeline(
        [
            ("impute", SimpleImputer(strategy="mean", keep_empty_features=True)),
            ("scale", StandardScaler()),
            ("model", clone(estimator)),
        ]
    )


def _check_signals(table: pd.DataFrame, signals, function: str) -> tuple:
    if isinstance(signals, str):
        signals = (signals,)
    signals = tuple(signals)
    if not signals:
        raise ValueError(f"The 'signals' parameter of {function} must name at least one signal. Got () instead.")
    if len(set(signals)) != len(signals):
        raise ValueError(f"The 'signals' parameter of {function} lists a signal twice: {signals}")
    check_score_table(table, list(signals))
    empty = [name for name in signals if table[name].isna().all()]
    if empty:
        raise ValueError(f"{function}: signal(s) {empty} are NaN on every calibration row; leave them out")
    return signals


def _fit_matrix(X: np.ndarray, labels: np.ndarray, signals: tuple, estimator, random_state):
    if labels.all() or not labels.any():
        raise ValueError("fit_learned_score needs answerable and unanswerable calibration questions; got one class")
    pipeline = learned_pipeline(estimator, random_state=random_state).fit(X, labels)
    model = pipeline.named_steps["model"]
    coef = getattr(model, "coef_", None)
    if type(model).__name__ == "LogisticRegression" and np.ndim(coef) == 2 and coef.shape[0] == 1:
        scaler = pipeline.named_steps["scale"]
        params = {key: value for key, value in model.get_params().items() if isinstance(value, (int, float, str))}
        return LinearScore(signals, scaler.mean_, scaler.scale_, coef[0], float(model.intercept_[0]), params=params)
    return SklearnScore(signals, pipeline)


def fit_learned_score(table: pd.DataFrame, signals, *, estimator=None, random_state=0):
    """Fit the pipeline on ``table`` (``answerable`` as the label); a :class:`LinearScore` when the model is linear.

    BLAS runs single-threaded here: on these tiny problems threads only add overhead (five times slower on two
    busy cores).

    Returns
    -------
    LinearScore or SklearnScore
    """
    from threadpoolctl import threadpool_limits

    signals = _check_signals(table, signals, "fit_learned_score")
    with threadpool_limits(1):
        return _fit_matrix(
            _matrix(table, signals), table["answerable"].to_numpy(dtype=bool), signals, estimator, random_state
        )


def crossfit_scores(table: pd.DataFrame, signals, *, estimator=None, n_folds: int = 5, random_state=0) -> np.ndarray:
    """Out-of-fold learned scores: each row scored by a model fitted on the other folds (stratified by slice).

    These are the scores a threshold is fitted on, so that the threshold does
    not see the optimistic in-sample scores of the rows the model was trained on.
    """
    from sklearn.model_selection import StratifiedKFold
    from threadpoolctl import threadpool_limits

    signals = _check_signals(table, signals, "crossfit_scores")
    strata = (table["slice"].astype(str) + "|" + table["answerable"].astype(str)).to_numpy()
    smallest = int(pd.Series(strata).value_counts().min())
    n_folds = max(2, min(n_folds, smallest))
    folds = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=random_state)
    X, labels = _matrix(table, signals), table["answerable"].to_numpy(dtype=bool)
    scores = np.full(len(table), np.nan)
    with threadpool_limits(1):
        for train, test in folds.split(X, strata):
            model = _fit_matrix(X[train], labels[train], signals, estimator, random_state)
            scores[test] = model.score(X[test])
    return scores


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
        threshold = float(self.threshold)
        if math.isnan(threshold):
            raise ValueError("The 'threshold' parameter of LearnedGate must be a number. Got nan instead.")
        object.__setattr__(self, "threshold", threshold)
        if self.hedge_below is not None:
            hedge = float(self.hedge_below)
            if hedge < threshold:
                raise ValueError(
                    f"The 'hedge_below' parameter of LearnedGate must be at least the threshold {threshold}. "
                    f"Got {hedge} instead."
                )
            object.__setattr__(self, "hedge_below", hedge)
        _check_max_passages(self.max_passages, "LearnedGate")

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
        missing = [name for name in self.signals if len(table) and table[name].isna().all()]
        if missing:
            _warn_missing(missing, "on every row of the table")
        return self.model.score(_matrix(table, self.signals))

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

    def decide_table(self, table: pd.DataFrame) -> pd.DataFrame:
        scores = self.score_table(table)
        with np.errstate(invalid="ignore"):
            answered = ~np.isnan(scores) & (scores >= self.threshold)
            hedged = answered & (scores < self.hedge_below if self.hedge_below is not None else False)
        action = np.where(answered, np.where(hedged, "hedge", "answer"), "refuse")
        return actions_frame(action, scores)

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
    signals = _check_signals(table, signals, "fit_learned_gate")
    if gate_options.get("passage_floor") is None and gate_options.get("passages_from", "dense") == "dense":
        if "dense_top1" in table.columns and table["dense_top1"].notna().any():
            # The learned score is not on a passage's scale: pass on the dense passages that clear the cosine bar
            # the same rule gives dense_top1, as a ThresholdGate would.
            gate_options["passage_floor"] = fit_threshold(rule, table["dense_top1"], table["answerable"], delta=delta)
    model = fit_learned_score(table, signals, estimator=estimator, random_state=random_state)
    if n_folds is None:
        scores = model.score(_matrix(table, signals))
    else:
        scores = crossfit_scores(table, signals, estimator=estimator, n_folds=n_folds, random_state=random_state)
    answerable = table["answerable"]
    threshold = fit_threshold(rule, scores, answerable, delta=delta)
    hedge_below = None
    if hedge_rule is not None:
        hedge_below = max(fit_threshold(hedge_rule, scores, answerable, delta=delta), threshold)
    return LearnedGate(model, threshold, hedge_below=hedge_below, **gate_options)
