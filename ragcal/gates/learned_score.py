"""The learned score: a scikit-learn classifier over named signals, logistic regression by default.

A learned score reads named signals (columns of the score table) and outputs
a probability-like score, ``P(answerable | signals)``, which a
:class:`~ragcal.gates.learned.LearnedGate` then cuts at a calibrated threshold.

Missing values (a signal that is NaN for a query) are replaced by the
calibration mean, and every signal is standardised, inside the pipeline
(:func:`learned_pipeline`). A linear model is kept as plain numbers
(:class:`LinearScore`: the scaler's mean and scale, the coefficients and the
intercept), which is what a gate file stores; nothing opaque is pickled. Other
classifiers work in memory (:class:`SklearnScore`, for evaluation) but cannot
be saved.

Every fit goes through scikit-learn's public estimators. The default model on
a calibration matrix without NaN skips only the imputer (which would copy the
matrix unchanged) and scikit-learn's input checks
(``sklearn.config_context(assume_finite=True, skip_parameter_validation=True)``):
the numbers are the pipeline's (``tests/gates/test_learned_gate.py`` compares
them on random problems).

::

    from ragcal.gates import fit_learned_score

    model = fit_learned_score(calibration, ["dense_top1", "bm25_coverage_corpus"])
    model.score(calibration[list(model.signals)].to_numpy())
"""

from __future__ import annotations

import contextlib
import functools
import threading
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd

from .._params import parameter_error
from ..score_tables import check_score_table
from ._numbers import to_json_number

__all__ = ["LinearScore", "SklearnScore", "learned_pipeline", "fit_learned_score"]


def _expit(values):
    return 1.0 / (1.0 + np.exp(-values))


def signal_matrix(table: pd.DataFrame, signals) -> np.ndarray:
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
                raise parameter_error(name, "LinearScore", f"one value per signal ({n})", values)
            object.__setattr__(self, name, values)
        if any(not value > 0 for value in self.scale):
            raise parameter_error("scale", "LinearScore", "positive floats", self.scale)
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


#: The default classifier: ``LogisticRegression`` with these options, scikit-learn's defaults otherwise.
_LOGISTIC_OPTIONS = {"C": 1.0, "max_iter": 1000}


def learned_pipeline(estimator=None, *, random_state=0):
    """Mean imputation, standard scaling and ``estimator`` (``LogisticRegression()`` when None) in one pipeline."""
    from sklearn.base import clone
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    if estimator is None:
        estimator = LogisticRegression(**_LOGISTIC_OPTIONS, random_state=random_state)
    elif not hasattr(estimator, "fit"):
        raise parameter_error("estimator", "learned_pipeline", "a scikit-learn classifier", estimator, error=TypeError)
    return Pipeline(
        [
            ("impute", SimpleImputer(strategy="mean", keep_empty_features=True)),
            ("scale", StandardScaler()),
            ("model", clone(estimator)),
        ]
    )


def signal_names(signals, function: str) -> tuple:
    """``signals`` as a tuple of names: one name or several, none twice."""
    if isinstance(signals, str):
        signals = (signals,)
    signals = tuple(signals)
    if not signals:
        raise parameter_error("signals", function, "a non-empty sequence of signal names", signals)
    if len(set(signals)) != len(signals):
        raise parameter_error("signals", function, "signal names without repeats", signals)
    return signals


def check_not_empty(signals: tuple, X: np.ndarray, function: str) -> None:
    """A ``ValueError`` naming the signals that are NaN on every row of ``X``; a warning for constant ones.

    A constant signal (a binary verdict that is 1 on every calibration row)
    is standardised to 0 and gets coefficient 0: it carries no information,
    and :class:`~ragcal.metrics.DegenerateInputWarning` says so.
    """
    empty = [name for name, nan in zip(signals, np.isnan(X).all(axis=0)) if nan]
    if empty:
        raise ValueError(f"{function}: signal(s) {empty} are NaN on every calibration row; leave them out")
    with np.errstate(invalid="ignore"):
        constant = [name for name, low, high in zip(signals, np.nanmin(X, axis=0), np.nanmax(X, axis=0)) if low == high]
    if constant and len(X) > 1:
        import warnings

        from ..metrics import DegenerateInputWarning

        warnings.warn(
            f"{function}: signal(s) {constant} are constant on the calibration rows; they carry no information "
            "and get coefficient 0",
            DegenerateInputWarning,
            stacklevel=3,
        )


def check_signals(table: pd.DataFrame, signals, function: str) -> tuple:
    """The signal names, checked to be columns of ``table`` with a value on some row."""
    signals = signal_names(signals, function)
    check_score_table(table, list(signals))
    check_not_empty(signals, signal_matrix(table, signals), function)
    return signals


@functools.cache
def _blas_controller():
    """One threadpoolctl controller, made once: taking stock of the loaded libraries costs milliseconds."""
    import sklearn.linear_model  # noqa: F401 -- scikit-learn's OpenMP and BLAS are loaded before the stock-taking
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


_blas_limited = threading.local()


@contextlib.contextmanager
def one_blas_thread():
    """BLAS (and OpenMP) on one thread, as ``threadpool_limits(1)``: on these tiny problems threads only add
    overhead (four to ten times slower on two busy cores). Inside another such block it changes nothing and costs
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

    params = LogisticRegression(**_LOGISTIC_OPTIONS, random_state=random_state).get_params()
    return {key: value for key, value in params.items() if isinstance(value, (int, float, str))}


def _fit_default_logistic(X: np.ndarray, labels: np.ndarray, signals: tuple, random_state) -> LinearScore:
    """The default pipeline's fit on a finite ``X``: ``StandardScaler`` and ``LogisticRegression``, no imputer.

    On a matrix without NaN the pipeline's mean imputation only copies it, so
    the scaler and the model see the same numbers here. scikit-learn's input
    checks are switched off through its public configuration: the matrix is
    known to be finite and the parameters are the defaults. On these small
    problems the checks cost about as much as the solver, so this is about
    half again as fast as the pipeline; the fit itself is scikit-learn's.
    """
    from sklearn import config_context
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    with config_context(assume_finite=True, skip_parameter_validation=True):
        scaler = StandardScaler().fit(X)
        model = LogisticRegression(**_LOGISTIC_OPTIONS, random_state=random_state)
        model.fit(scaler.transform(X), labels)
    return LinearScore(
        signals,
        scaler.mean_,
        scaler.scale_,
        model.coef_[0],
        float(model.intercept_[0]),
        params=_logistic_params(random_state),
    )


def fit_score_matrix(X: np.ndarray, labels: np.ndarray, signals: tuple, estimator, random_state):
    """:func:`fit_learned_score` on a checked matrix ``X`` (columns in ``signals`` order) and boolean ``labels``."""
    if labels.all() or not labels.any():
        raise ValueError("fit_learned_score needs answerable and unanswerable calibration questions; got one class")
    if estimator is None and np.isfinite(X).all():
        return _fit_default_logistic(X, labels, signals, random_state)
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

    BLAS runs single-threaded here: on these tiny problems threads only add overhead (four to ten times slower on
    two busy cores).

    Parameters
    ----------
    table : DataFrame
        Calibration score table with both answerable and unanswerable rows.
    signals : str or sequence of str
        Columns of ``table`` the model reads, in this order.
    estimator : scikit-learn classifier, default=None
        ``LogisticRegression(C=1.0, max_iter=1000)`` when None; imputation and scaling are added in front.
    random_state : int, default=0
        Passed to the default estimator.

    Returns
    -------
    LinearScore or SklearnScore
    """
    signals = check_signals(table, signals, "fit_learned_score")
    with one_blas_thread():
        return fit_score_matrix(
            signal_matrix(table, signals), table["answerable"].to_numpy(dtype=bool), signals, estimator, random_state
        )
