r"""Calibrating on large logged score tables: millions of rows, CSV or Parquet.

A production system logs one row per query. Calibrating on its log differs
from calibrating on a labeled set of 200 questions in three ways, each handled
here and stated in every result:

**Reading.** :func:`read_score_log` reads CSV or Parquet through pyarrow and
keeps only the columns calibration needs (``answerable``, ``slice`` and the
signals), with ``slice`` as a categorical. Ten million rows take about 0.5 GB.

**Exact where it is cheap.** Group statistics, every threshold rule and the
per-slice outcome at each fitted threshold (with exact Clopper-Pearson
intervals) use every row. :func:`log_sweep` gives exact counts at every
threshold it lists: every distinct score, as :func:`ragcal.metrics.sweep`
does, while there are at most ``every_score_limit`` of them; beyond that, an
evenly spaced grid of ``grid_points`` thresholds plus the fitted ones. The
rows are still exact; there are only fewer of them (a sweep with a row per
distinct score of ten million rows would be ten million rows long).

**Bootstrap intervals on a subsample.** The stratified bootstrap of the AUC
costs O(resamples x rows). Above ``bootstrap_rows`` rows, :func:`auc_interval`
uses the m-out-of-n bootstrap: it draws, without replacement and per class, a
subsample of about ``bootstrap_rows`` rows in the table's class proportions,
bootstraps it (stratified, ``n_resamples`` times), and rescales the
deviations of the resampled AUCs from the subsample's AUC to the full table's
size. The AUC is a two-sample U-statistic whose variance is
:math:`\approx c_1 / n_{pos} + c_0 / n_{neg}`, so with the same share
:math:`f = m/n` drawn from each class the deviations shrink by
:math:`\sqrt{f}`:

.. math:: [\hat A + s\, q_{\alpha/2},\; \hat A + s\, q_{1-\alpha/2}], \qquad
          s = \sqrt{(1/n_{pos} + 1/n_{neg}) / (1/m_{pos} + 1/m_{neg})},

where :math:`\hat A` is the AUC of the whole table (exact, every row) and
:math:`q` are quantiles of the subsample's bootstrap deviations. Below
``bootstrap_rows`` rows nothing changes: the plain stratified percentile
bootstrap on every row. The ``interval`` column says which was used.
"""

from __future__ import annotations

import csv
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ._io import check_csv_delimiter, delimiter_problem
from .calibration import CalibrationWarning, fit_threshold
from .metrics import (
    DegenerateInputWarning,
    auc_bootstrap,
    check_score_table,
    group_stats,
    outcome_table,
    sweep,
    unanswerable_slices,
)

__all__ = [
    "read_score_log",
    "auc_interval",
    "AucInterval",
    "log_auc_table",
    "log_sweep",
    "calibrate_log",
    "LogCalibration",
    "SCORE_LOG_FORMATS",
]

#: File endings :func:`read_score_log` understands, and the reader each one uses.
SCORE_LOG_FORMATS = {".csv": "csv", ".gz": "csv", ".parquet": "parquet", ".pq": "parquet"}


def _log_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".gz" and not path.name.lower().endswith(".csv.gz"):
        suffix = ""
    if suffix not in SCORE_LOG_FORMATS:
        # Unknown endings are read as CSV, as the score command writes them.
        return "csv"
    return SCORE_LOG_FORMATS[suffix]


def read_score_log(path, signals=(), *, source: str | None = None) -> pd.DataFrame:
    """Read a score table (CSV or Parquet) with only the columns calibration needs, validated.

    Parameters
    ----------
    path : str or Path
        ``*.parquet`` / ``*.pq`` are read as Parquet, anything else as CSV
        (``*.csv.gz`` decompressed on the fly).
    signals : sequence of str
        Signal columns to keep besides ``answerable`` and ``slice`` (and
        ``id`` when present).
    source : str, default=None
        How messages name the file; ``str(path)`` when None.

    Returns
    -------
    DataFrame
        As :func:`ragcal.metrics.check_score_table` returns it: boolean
        ``answerable``, categorical ``slice``, the signal columns.

    Raises
    ------
    ValueError
        Naming the file: not found, unreadable, a missing column, a bad
        ``answerable`` cell or a non-numeric signal (with its line for CSV).
    """
    import pyarrow as pa

    path = Path(path)
    source = source or str(path)
    if not path.is_file():
        raise ValueError(f"{source}: score table not found")
    signals = list(dict.fromkeys(signals))
    if _log_format(path) == "parquet":
        import pyarrow.parquet as pq

        try:
            available = pq.read_schema(path).names
        except (pa.ArrowException, OSError) as error:
            raise ValueError(f"{source}: cannot be read as Parquet ({error})") from error
        wanted = _wanted_columns(available, signals, source)
        arrow_table = pq.read_table(path, columns=wanted)
    else:
        import pyarrow.csv as pa_csv

        if not path.name.lower().endswith(".gz"):
            check_csv_delimiter(path)  # a compressed file's header is checked once decompressed, in _wanted_columns
        available = _csv_header(path, source)
        wanted = _wanted_columns(available, signals, source)
        # Signals are left to type inference, so that a stray text cell is reported with its line below.
        convert = pa_csv.ConvertOptions(
            include_columns=wanted,
            column_types={
                "slice": pa.dictionary(pa.int32(), pa.string()),
                **({"id": pa.string()} if "id" in wanted else {}),
            },
            strings_can_be_null=False,
        )
        try:
            arrow_table = pa_csv.read_csv(path, convert_options=convert)
        except (pa.ArrowException, OSError, UnicodeDecodeError) as error:
            raise ValueError(f"{source}: cannot be read as CSV ({error})") from error
    table = arrow_table.to_pandas()
    if not isinstance(table["slice"].dtype, pd.CategoricalDtype):
        table["slice"] = table["slice"].astype("category")
    return check_score_table(table, signals, source=source)


def _csv_header(path: Path, source: str) -> list[str]:
    import gzip

    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8-sig", newline="") as stream:
            return next(csv.reader(stream), [])
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{source}: cannot be read as CSV ({error})") from error


def _wanted_columns(available, signals, source) -> list[str]:
    # Worded as check_score_table words it, for every reader.
    available = list(available)
    missing = [column for column in ("answerable", "slice", *signals) if column not in available]
    if missing:
        if len(available) == 1:
            problem = delimiter_problem(str(available[0]))
            if problem:
                raise ValueError(f"{source}: {problem}")
        raise ValueError(
            f"{source}: missing column(s) {', '.join(map(repr, missing))}; have {', '.join(map(str, available))}"
        )
    return [column for column in ("id", "answerable", "slice", *signals) if column in available]


@dataclass(frozen=True)
class AucInterval:
    """An AUC with its bootstrap interval and how the interval was computed.

    Attributes
    ----------
    auc, low, high : float
        NaN when the AUC is undefined (one class, a constant score).
    interval : str
        ``"bootstrap"`` (stratified percentile bootstrap on every row) or
        ``"m-out-of-n bootstrap"`` (subsample, rescaled; see the module docstring).
    bootstrap_rows : int
        Rows the bootstrap resampled: all of them, or the subsample's size.
    """

    auc: float
    low: float
    high: float
    interval: str
    bootstrap_rows: int


def auc_interval(
    y_true,
    y_score,
    *,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    bootstrap_rows: int = 20_000,
    higher_is_positive: bool = True,
    random_state=0,
) -> AucInterval:
    """AUC on every row with a bootstrap interval that stays cheap for millions of rows.

    Parameters
    ----------
    y_true : array-like of bool
    y_score : array-like of float
    n_resamples : int, default=2000
    confidence : float, default=0.95
    bootstrap_rows : int, default=20_000
        Up to this many rows: stratified percentile bootstrap of every row
        (as :func:`ragcal.metrics.auc_with_ci`). Above: the m-out-of-n
        bootstrap of a stratified subsample of about this size.
    higher_is_positive : bool, default=True
    random_state : int, default=0

    Returns
    -------
    AucInterval
    """
    from sklearn.metrics import roc_auc_score

    if not isinstance(bootstrap_rows, (int, np.integer)) or bootstrap_rows < 2:
        raise ValueError(
            f"The 'bootstrap_rows' parameter of auc_interval must be an int >= 2. Got {bootstrap_rows!r} instead."
        )
    y_true = np.asarray(y_true, dtype=bool)
    y_score = np.asarray(y_score, dtype=float)
    if y_true.shape != y_score.shape or y_true.ndim != 1:
        raise ValueError(
            f"auc_interval: y_true and y_score must be 1-D of one length; got {y_true.shape}, {y_score.shape}"
        )
    if np.isnan(y_score).any():
        raise ValueError("auc_interval: y_score contains NaN; drop or impute those queries first")
    n = y_true.size
    interval = "bootstrap" if n <= bootstrap_rows else "m-out-of-n bootstrap"
    if not higher_is_positive:
        y_score = -y_score
    n_pos = int(y_true.sum())
    n_neg = n - n_pos
    if n_pos == 0 or n_neg == 0 or np.all(y_score == y_score[0]):
        reason = "only one class present" if n_pos == 0 or n_neg == 0 else "the score is constant"
        warnings.warn(f"auc_interval: {reason}; returning NaN", DegenerateInputWarning, stacklevel=2)
        return AucInterval(math.nan, math.nan, math.nan, interval, min(n, bootstrap_rows))
    auc = float(roc_auc_score(y_true, y_score))
    alpha = (1 - confidence) / 2
    if n <= bootstrap_rows:
        resampled = auc_bootstrap(y_true, y_score, n_resamples=n_resamples, random_state=random_state)
        low, high = np.quantile(resampled, [alpha, 1 - alpha])
        return AucInterval(auc, float(low), float(high), interval, n)
    rng = np.random.default_rng(random_state)
    share = bootstrap_rows / n
    m_pos = max(1, round(n_pos * share))
    m_neg = max(1, round(n_neg * share))
    positives = rng.choice(np.flatnonzero(y_true), size=m_pos, replace=False)
    negatives = rng.choice(np.flatnonzero(~y_true), size=m_neg, replace=False)
    chosen = np.concatenate([positives, negatives])
    sub_true, sub_score = y_true[chosen], y_score[chosen]
    sub_auc = float(roc_auc_score(sub_true, sub_score)) if np.ptp(sub_score) > 0 else 0.5
    resampled = auc_bootstrap(sub_true, sub_score, n_resamples=n_resamples, random_state=random_state)
    scale = math.sqrt((1 / n_pos + 1 / n_neg) / (1 / m_pos + 1 / m_neg))
    low, high = auc + scale * (np.quantile(resampled, [alpha, 1 - alpha]) - sub_auc)
    return AucInterval(auc, float(max(low, 0.0)), float(min(high, 1.0)), interval, m_pos + m_neg)


def log_auc_table(
    table: pd.DataFrame,
    signal: str,
    *,
    higher_is_answerable: bool = True,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    bootstrap_rows: int = 20_000,
    random_state=0,
) -> pd.DataFrame:
    """:func:`auc_interval` for answerable vs all unanswerable, then vs each unanswerable slice.

    Returns
    -------
    DataFrame
        ``signal, comparison, auc, ci_low, ci_high, n_answerable, n_unanswerable, interval, bootstrap_rows``
        (the columns of :func:`ragcal.metrics.auc_table` plus how the interval was made).
    """
    table = table[~table[signal].isna()]
    answerable = table["answerable"].to_numpy(dtype=bool)
    scores = table[signal].to_numpy(dtype=float)
    slices = table["slice"].to_numpy()
    comparisons = [("all unanswerable", ~answerable)]
    comparisons += [(name, (slices == name) & ~answerable) for name in unanswerable_slices(table)]
    rows = []
    for comparison, negative in comparisons:
        keep = answerable | negative
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DegenerateInputWarning)
            result = auc_interval(
                answerable[keep],
                scores[keep],
                n_resamples=n_resamples,
                confidence=confidence,
                bootstrap_rows=bootstrap_rows,
                higher_is_positive=higher_is_answerable,
                random_state=random_state,
            )
        for warning in caught:
            warnings.warn(
                f"{signal} (answerable vs {comparison}): {warning.message}", DegenerateInputWarning, stacklevel=2
            )
        rows.append(
            {
                "signal": signal,
                "comparison": comparison,
                "auc": result.auc,
                "ci_low": result.low,
                "ci_high": result.high,
                "n_answerable": int(answerable[keep].sum()),
                "n_unanswerable": int((~answerable[keep]).sum()),
                "interval": result.interval,
                "bootstrap_rows": result.bootstrap_rows,
            }
        )
    return pd.DataFrame(rows)


def log_sweep(
    table: pd.DataFrame,
    signal: str,
    *,
    thresholds=(),
    higher_is_answerable: bool = True,
    grid_points: int = 1001,
    every_score_limit: int = 20_000,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Exact per-slice outcome over a sweep of thresholds, sized for large tables.

    Parameters
    ----------
    thresholds : array-like of float, default=()
        Thresholds that must appear (e.g. the fitted ones); ``source`` ``"rule"``.
    grid_points : int, default=1001
        Evenly spaced thresholds from the lowest to the highest score, used
        when there are more than ``every_score_limit`` distinct scores.
    every_score_limit : int, default=20_000
        Up to this many distinct scores, the sweep is
        :func:`ragcal.metrics.sweep`'s (a 51-point grid and every distinct
        score) plus ``thresholds``.

    Returns
    -------
    DataFrame
        :func:`ragcal.metrics.outcome_table`'s columns with ``signal`` and
        ``source`` (``"grid"``, ``"score"``, ``"grid+score"`` or ``"rule"``)
        in front, sorted by threshold. Every count is exact. ``attrs["scheme"]``
        says which thresholds were swept.
    """
    table = table[~table[signal].isna()]
    scores = table[signal].to_numpy(dtype=float)
    if scores.size == 0:
        raise ValueError(f"log_sweep: no finite {signal!r} scores")
    extra = np.asarray(thresholds, dtype=float).reshape(-1)
    extra = extra[np.isfinite(extra)]
    n_distinct = np.unique(scores).size
    if n_distinct <= every_score_limit:
        swept = sweep(table, signal, higher_is_answerable=higher_is_answerable, confidence=confidence)
        swept.attrs["scheme"] = "every distinct score"
        missing = np.setdiff1d(extra, swept["threshold"].to_numpy())
        if missing.size == 0:
            return swept
        added = outcome_table(table, signal, missing, higher_is_answerable=higher_is_answerable, confidence=confidence)
        added.insert(0, "source", "rule")
        added.insert(0, "signal", signal)
        merged = pd.concat([swept, added], ignore_index=True).sort_values("threshold", kind="stable", ignore_index=True)
        merged.attrs["scheme"] = "every distinct score"
        return merged
    grid = np.linspace(scores.min(), scores.max(), grid_points)
    chosen = np.union1d(grid, extra)
    outcomes = outcome_table(table, signal, chosen, higher_is_answerable=higher_is_answerable, confidence=confidence)
    outcomes.insert(0, "source", np.where(np.isin(chosen, extra), "rule", "grid"))
    outcomes.insert(0, "signal", signal)
    outcomes.attrs["scheme"] = (
        f"grid of {grid_points} + rule thresholds ({n_distinct} distinct scores > every_score_limit {every_score_limit})"
    )
    return outcomes


@dataclass(frozen=True)
class LogCalibration:
    """Everything :func:`calibrate_log` computed, as plain tables.

    Attributes
    ----------
    signal : str
    n_rows : int
    group_stats : DataFrame
        :func:`ragcal.metrics.group_stats` (exact).
    auc : DataFrame
        :func:`log_auc_table`; its ``interval`` column names the bootstrap scheme.
    thresholds : DataFrame
        One row per rule: ``rule``, ``threshold``, ``fallback`` (the rule could
        not be met, see :class:`ragcal.calibration.CalibrationWarning`) and the
        exact per-slice outcome with Clopper-Pearson intervals.
    sweep : DataFrame
        :func:`log_sweep`.
    sweep_scheme : str
        ``"every distinct score"`` or ``"grid of N + rule thresholds"``.
    """

    signal: str
    n_rows: int
    group_stats: pd.DataFrame
    auc: pd.DataFrame
    thresholds: pd.DataFrame
    sweep: pd.DataFrame
    sweep_scheme: str


def calibrate_log(
    table: pd.DataFrame,
    signal: str,
    rules=("keep@0.95",),
    *,
    higher_is_answerable: bool = True,
    delta: float = 0.1,
    n_resamples: int = 2000,
    bootstrap_rows: int = 20_000,
    grid_points: int = 1001,
    every_score_limit: int = 20_000,
    random_state=0,
) -> LogCalibration:
    """Group statistics, AUC with intervals, every rule with its exact outcome, and a sweep.

    Parameters
    ----------
    table : DataFrame
        A checked score table, e.g. from :func:`read_score_log`.
    signal : str
    rules : sequence of str, default=("keep@0.95",)
        Rule keys, see :func:`ragcal.calibration.fit_threshold`.
    higher_is_answerable, delta
        As for :func:`ragcal.calibration.fit_threshold`.
    n_resamples, bootstrap_rows
        See :func:`auc_interval`.
    grid_points, every_score_limit
        See :func:`log_sweep`.
    random_state : int, default=0

    Returns
    -------
    LogCalibration

    Examples
    --------
    >>> table = read_score_log("scores.parquet", ["dense_top1"])  # doctest: +SKIP
    >>> calibrate_log(table, "dense_top1", ["keep@0.95", "min_cost@5"]).thresholds  # doctest: +SKIP
    """
    stats = group_stats(table, [signal])
    auc = log_auc_table(
        table,
        signal,
        higher_is_answerable=higher_is_answerable,
        n_resamples=n_resamples,
        bootstrap_rows=bootstrap_rows,
        random_state=random_state,
    )
    finite = table[~table[signal].isna()]
    scores = finite[signal].to_numpy(dtype=float)
    answerable = finite["answerable"].to_numpy(dtype=bool)
    fitted = []
    for rule in rules:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CalibrationWarning)
            if rule.startswith("keep@") and not answerable.any():
                threshold = math.nan
            else:
                threshold = fit_threshold(
                    rule, scores, answerable, higher_is_answerable=higher_is_answerable, delta=delta
                )
        fallback = math.isnan(threshold) or any(issubclass(w.category, CalibrationWarning) for w in caught)
        for warning in caught:
            warnings.warn(f"{rule}: {warning.message}", warning.category, stacklevel=2)
        fitted.append((rule, threshold, fallback))
    outcomes = outcome_table(
        finite, signal, [threshold for _, threshold, _ in fitted], higher_is_answerable=higher_is_answerable
    )
    outcomes.insert(0, "fallback", [fallback for _, _, fallback in fitted])
    outcomes.insert(0, "rule", [rule for rule, _, _ in fitted])
    swept = log_sweep(
        finite,
        signal,
        thresholds=[threshold for _, threshold, _ in fitted],
        higher_is_answerable=higher_is_answerable,
        grid_points=grid_points,
        every_score_limit=every_score_limit,
    )
    return LogCalibration(signal, len(table), stats, auc, outcomes, swept, swept.attrs["scheme"])
