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

import contextlib
import functools
import math
import numbers
import threading
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
    """``table[list(signals)].to_numpy(dtype=float)``, memory layout included, with the columns looked up one
    by one (a list lookup on a pyarrow-backed column index costs a millisecond)."""
    locations = [table.columns.get_loc(name) for name in signals]
    if not all(isinstance(location, int) for location in locations):  # a column name that appears twice
        return table[list(signals)].to_numpy(dtype=float)
    return table.take(np.asarray(locations, dtype=np.intp), axis=1).to_numpy(dtype=float)


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


def _signal_names(signals, function: str) -> tuple:
    if isinstance(signals, str):
        signals = (signals,)
    signals = tuple(signals)
    if not signals:
        raise ValueError(f"The 'signals' parameter of {function} must name at least one signal. Got () instead.")
    if len(set(signals)) != len(signals):
        raise ValueError(f"The 'signals' parameter of {function} lists a signal twice: {signals}")
    return signals


def _check_not_empty(signals: tuple, X: np.ndarray, function: str) -> None:
    empty = [name for name, nan in zip(signals, np.isnan(X).all(axis=0)) if nan]
    if empty:
        raise ValueError(f"{function}: signal(s) {empty} are NaN on every calibration row; leave them out")


def _check_signals(table: pd.DataFrame, signals, function: str) -> tuple:
    signals = _signal_names(signals, function)
    check_score_table(table, list(signals))
    _check_not_empty(signals, _matrix(table, signals), function)
    return signals


@functools.cache
def _blas_controller():
    """One threadpoolctl controller, made once: taking stock of the loaded libraries costs milliseconds."""
    import sklearn.linear_model  # noqa: F401 -- scikit-learn's OpenMP and BLAS are loaded before the stock-taking
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


_blas_limited = threading.local()


@contextlib.contextmanager
def _one_blas_thread():
    """BLAS (and OpenMP) on one thread, as ``threadpool_limits(1)``: on these tiny problems threads only add
    overhead (five times slower on two busy cores). Inside another such block it changes nothing and costs
    nothing (setting the limit costs up to a millisecond on a busy machine)."""
    if getattr(_blas_limited, "depth", 0):
        yield
        return
    with _blas_controller().limit(limits=1):
        _blas_limited.depth = 1
        try:
            yield
        finally:
            _blas_limited.depth = 0


@functools.lru_cache(maxsize=16)
def _logistic_params(random_state) -> dict:
    """The recorded parameters of the default ``LogisticRegression`` (those that are numbers or text)."""
    from sklearn.linear_model import LogisticRegression

    params = LogisticRegression(C=1.0, max_iter=1000, random_state=random_state).get_params()
    return {key: value for key, value in params.items() if isinstance(value, (int, float, str))}


def _lbfgsb(loss_gradient, n_dof: int, *, maxiter: int, maxls: int, gtol: float, ftol: float):
    """``scipy.optimize.minimize(loss_gradient, zeros(n_dof), method="L-BFGS-B", jac=True, options=...)``.

    The driver loop of scipy's ``_minimize_lbfgsb`` around the same
    L-BFGS-B routine, with the bookkeeping of its ``ScalarFunction`` (the
    function is evaluated once at the start and again only at a new point)
    but not its wrappers, which cost more than the tiny problems here.

    Returns
    -------
    x : ndarray
    converged : bool
        False when the loop stopped at ``maxiter`` iterations, scipy's default
        of 15,000 function evaluations, or an abnormal line search.
    """
    from scipy.optimize import _lbfgsb

    maxcor, maxfun = 10, 15000
    factr = ftol / np.finfo(float).eps
    x = np.zeros(n_dof)
    lower, upper, bound_kinds = np.zeros(n_dof), np.zeros(n_dof), np.zeros(n_dof, np.int32)
    f, g = np.array(0.0), np.zeros(n_dof)
    work = np.zeros(2 * maxcor * n_dof + 5 * n_dof + 11 * maxcor * maxcor + 8 * maxcor)
    integer_work = np.zeros(3 * n_dof, dtype=np.int32)
    task, line_search_task = np.zeros(2, dtype=np.int32), np.zeros(2, dtype=np.int32)
    saved_flags, saved_integers, saved_floats = np.zeros(4, np.int32), np.zeros(44, np.int32), np.zeros(29)
    evaluated_at = x.copy()
    value, gradient = loss_gradient(x.copy())
    evaluations, iterations = 1, 0
    while True:
        g = g.astype(np.float64)
        _lbfgsb.setulb(
            maxcor, x, lower, upper, bound_kinds, f, g, factr, gtol, work, integer_work, task,
            saved_flags, saved_integers, saved_floats, maxls, line_search_task,
        )  # fmt: skip
        if task[0] == 3:  # the function and gradient at x
            if not np.array_equal(x, evaluated_at):
                evaluated_at = x.copy()
                value, gradient = loss_gradient(x.copy())
                evaluations += 1
            f, g = value, gradient
        elif task[0] == 1:  # a new iterate
            iterations += 1
            if iterations >= maxiter:
                task[0], task[1] = 5, 504
            elif evaluations > maxfun:
                task[0], task[1] = 5, 502
        else:
            break
    return x, task[0] == 4


def _default_logistic_fit(X: np.ndarray, labels: np.ndarray):
    """The default pipeline's fit on a finite ``X``, as scikit-learn computes it, without its overhead.

    The default pipeline is mean imputation, ``StandardScaler`` and
    ``LogisticRegression(C=1.0, max_iter=1000)`` (lbfgs). On a finite ``X``
    the imputer only copies it; the scaler's statistics below are the
    operations of ``StandardScaler.fit`` in its order, on a copy with ``X``'s
    memory layout (which decides how NumPy adds up a column); the solver is
    the one ``LogisticRegression.fit`` calls, from its starting point with its
    options, on scikit-learn's per-row loss summed as ``LinearModelLoss``
    sums it. So the numbers are the pipeline's to the last bit
    (:func:`_default_logistic_agrees` checks it once per process, the tests on
    random tables), five to ten times sooner: on a problem this small the
    pipeline and scipy's wrappers spend most of their time checking input.

    Returns
    -------
    (mean, scale, coef, intercept) or None
        None when the solver stops without converging (the pipeline then fits
        it and gives scikit-learn's warning).
    """
    from sklearn._loss.loss import HalfBinomialLoss

    # StandardScaler.fit: sklearn.utils.extmath._incremental_mean_and_var from nothing seen, no weights.
    imputed = np.array(X, dtype=float, copy=True)
    n_samples, n_features = imputed.shape
    last_count = np.zeros(n_features)
    new_sum = np.sum(imputed, axis=0)
    new_count = n_samples - np.sum(np.zeros((n_samples, n_features)), axis=0)
    count = last_count + new_count
    mean = (0.0 * last_count + new_sum) / count
    temp = imputed - new_sum / new_count
    correction = np.sum(temp, axis=0)
    temp **= 2
    unnormalised = np.sum(temp, axis=0)
    unnormalised -= correction**2 / new_count
    var = unnormalised / count
    # _is_constant_feature and _handle_zeros_in_scale: a (near) constant column keeps a scale of 1.
    eps = np.finfo(np.float64).eps
    scale = np.sqrt(var)
    scale[var <= count[0] * eps * var + (count[0] * mean * eps) ** 2] = 1.0
    standardised = imputed.copy()
    standardised -= mean
    standardised /= scale
    standardised = np.ascontiguousarray(standardised)

    # LogisticRegression.fit -> _logistic_regression_path: binary, lbfgs, C=1, no sample weights, one thread.
    target = np.ones(n_samples)
    target[~labels] = 0.0
    l2_strength = 1.0 / (1.0 * n_samples)
    pointwise_loss = HalfBinomialLoss()

    def loss_gradient(coef):  # LinearModelLoss(HalfBinomialLoss(), fit_intercept=True).loss_gradient
        weights, intercept = coef[:-1], coef[-1]
        losses, gradient_pointwise = pointwise_loss.loss_gradient(
            y_true=target, raw_prediction=standardised @ weights + intercept, sample_weight=None, n_threads=1
        )
        loss = float(np.sum(losses) / n_samples)
        loss += float(0.5 * l2_strength * (weights @ weights))
        gradient_pointwise /= n_samples
        gradient = np.empty_like(coef, dtype=weights.dtype)
        gradient[:n_features] = standardised.T @ gradient_pointwise + l2_strength * weights
        gradient[-1] = np.sum(gradient_pointwise)
        return loss, gradient

    coef, converged = _lbfgsb(loss_gradient, n_features + 1, maxiter=1000, maxls=50, gtol=1e-4, ftol=64 * eps)
    if not converged:
        return None
    return mean, scale, coef[:-1], float(coef[-1])


@functools.cache
def _default_logistic_agrees() -> bool:
    """Whether :func:`_default_logistic_fit` reproduces the installed scikit-learn's pipeline, bit for bit.

    Checked once per process on a small fixed problem, in both memory layouts
    and with a constant column. Where it does not agree (another
    scikit-learn, private names moved), every fit goes through the pipeline.
    """
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(0.5, 0.1, 60), rng.normal(10.0, 4.0, 60), np.full(60, 0.3)])
    labels = X[:, 0] + rng.normal(0.0, 0.05, 60) > 0.5
    try:
        with _one_blas_thread():
            for matrix in (np.asfortranarray(X), np.ascontiguousarray(X)):
                fast = _default_logistic_fit(matrix, labels)
                pipeline = learned_pipeline().fit(matrix, labels)
                model, scaler = pipeline.named_steps["model"], pipeline.named_steps["scale"]
                expected = (scaler.mean_, scaler.scale_, model.coef_[0], model.intercept_[0])
                if fast is None or not all(np.array_equal(ours, theirs) for ours, theirs in zip(fast, expected)):
                    return False
    except (ImportError, AttributeError, TypeError, ValueError):
        return False
    return True


def _fit_matrix(X: np.ndarray, labels: np.ndarray, signals: tuple, estimator, random_state):
    if labels.all() or not labels.any():
        raise ValueError("fit_learned_score needs answerable and unanswerable calibration questions; got one class")
    if estimator is None and np.isfinite(X).all() and _default_logistic_agrees():
        fitted = _default_logistic_fit(X, labels)
        if fitted is not None:
            return LinearScore(signals, *fitted, params=_logistic_params(random_state))
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
    signals = _check_signals(table, signals, "fit_learned_score")
    with _one_blas_thread():
        return _fit_matrix(
            _matrix(table, signals), table["answerable"].to_numpy(dtype=bool), signals, estimator, random_state
        )


def _strata(table: pd.DataFrame) -> np.ndarray:
    """Slice and label of each row, what the out-of-fold folds are stratified by."""
    return (table["slice"].astype(str) + "|" + table["answerable"].astype(str)).to_numpy()


def _folds(strata: np.ndarray, n_folds: int, random_state) -> list:
    """``[(train, test)]``: stratified by ``strata``, shuffled, at most as many folds as the smallest stratum has rows.

    ``StratifiedKFold`` numbers the strata in order of first appearance, so
    any labels that tell the same strata apart (the strings of
    :func:`_strata` or integer codes of them) give the same folds.
    """
    from sklearn.model_selection import StratifiedKFold

    smallest = int(np.unique(strata, return_counts=True)[1].min())
    n_folds = max(2, min(n_folds, smallest))
    folds = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=random_state)
    return list(folds.split(np.zeros(len(strata)), strata))


def _crossfit_matrix(X, labels, folds, signals: tuple, estimator, random_state) -> np.ndarray:
    scores = np.full(len(X), np.nan)
    with _one_blas_thread():
        for train, test in folds:
            model = _fit_matrix(X[train], labels[train], signals, estimator, random_state)
            scores[test] = model.score(X[test])
    return scores


def crossfit_scores(table: pd.DataFrame, signals, *, estimator=None, n_folds: int = 5, random_state=0) -> np.ndarray:
    """Out-of-fold learned scores: each row scored by a model fitted on the other folds (stratified by slice).

    These are the scores a threshold is fitted on, so that the threshold does
    not see the optimistic in-sample scores of the rows the model was trained on.
    """
    signals = _check_signals(table, signals, "crossfit_scores")
    folds = _folds(_strata(table), n_folds, random_state)
    return _crossfit_matrix(
        _matrix(table, signals), table["answerable"].to_numpy(dtype=bool), folds, signals, estimator, random_state
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
        X = _matrix(table, self.signals)
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
    signals = _signal_names(signals, "fit_learned_gate")
    gates = _fit_learned_gates(
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


def _fit_learned_gates(
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
        ``_strata(table)``, when the caller has it (the rows of a larger table's).
    checked : bool, default=False
        True when ``check_score_table`` has passed on these columns already
        (on a larger table): only "NaN on every calibration row" is left to check.
    """
    sets = {name: _signal_names(signals, "fit_learned_gate") for name, signals in signal_sets.items()}
    if not checked:
        check_score_table(table, list(dict.fromkeys(signal for signals in sets.values() for signal in signals)))
    matrices = {name: _matrix(table, signals) for name, signals in sets.items()}
    for name, signals in sets.items():
        _check_not_empty(signals, matrices[name], "fit_learned_gate")
    labels = table["answerable"].to_numpy(dtype=bool)
    if gate_options.get("passage_floor") is None and gate_options.get("passages_from", "dense") == "dense":
        if "dense_top1" in table.columns and table["dense_top1"].notna().any():
            # The learned score is not on a passage's scale: pass on the dense passages that clear the cosine bar
            # the same rule gives dense_top1, as a ThresholdGate would.
            gate_options["passage_floor"] = fit_threshold(rule, table["dense_top1"], labels, delta=delta)
    fitted, folds = {}, None
    with _one_blas_thread():
        for name, signals in sets.items():
            model = _fit_matrix(matrices[name], labels, signals, estimator, random_state)
            out_of_fold = None
            if n_folds is not None:
                if folds is None or not isinstance(random_state, numbers.Integral):
                    folds = _folds(_strata(table) if strata is None else strata, n_folds, random_state)
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
