"""The monitor on a score log of any size: decision shares, KS tests and medians from counts, through an engine.

:func:`monitor_log` runs :func:`ragcal.monitoring.monitor`'s family of tests
on a live log that DuckDB or Spark reads where it lies (a file, a folder or a
glob of Parquet files, a lake URI), with only counts coming back to Python:

- **decision shares**: :func:`ragcal.logs.engines.sum_batches` applies
  ``gate.decide_table`` to every batch of rows and counts the actions; the
  Fisher tests come from the counts alone
  (:func:`ragcal.monitoring.shift_tests.share_tests_from_counts`), so they
  equal the in-memory ones exactly;
- **each signal**: its counts per score bin
  (:func:`ragcal.logs.engines.count_signal`) against the calibration values
  (a small table, in memory) put in the same bins. :func:`ks_from_counts`
  computes the Kolmogorov-Smirnov statistic and p-value from the two binned
  samples, :func:`median_from_counts` the medians and
  :func:`bootstrap_median_shift` their shift's interval;
- **exchangeability over time**: the conformal martingale needs the rows in
  time order in memory, so it runs on the first ``sequential_rows`` rows of
  the window in time order (all of them when the window is no longer), and
  the report's notes say how many it saw.

With distinct-score bins (at most ``max_distinct`` distinct live scores) the
shares, KS statistics and p-values and the medians are those of
:func:`~ragcal.monitoring.monitor` on the same rows. On a grid, each score is
counted at its cell's lower edge: the KS statistic is that of the binned
values, at most the largest share of either sample in one cell below the
exact one (``ks_error``), and its p-value is the exact-size test of the binned
values (valid, conservative like any test with ties); the medians are cell
edges, at most one cell width below the exact ones. What differs by design:
the bootstrap draws (the same distribution, other random numbers), and text
that is not a number in a signal column, which the in-memory path refuses and
the engines read as a missing score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from .._params import check_float, check_int
from ..gates.base import ACTIONS
from ..monitoring.report import MIN_ROWS, MonitorReport, assemble_report, monitor, two_sample_family
from ..monitoring.sequential import sequential_test
from ..monitoring.shift_tests import share_tests_from_counts
from .counts import DEFAULT_BINS, MAX_DISTINCT, Binning, grid_index
from .engines import choose_engine, collect_batches, count_signal, sum_batches
from .sources import parse_time, read_pandas

__all__ = [
    "KS_EXACT_ROWS",
    "SEQUENTIAL_ROWS",
    "bootstrap_median_shift",
    "ks_from_counts",
    "median_from_counts",
    "monitor_log",
]

#: scipy's ``ks_2samp(method="auto")`` computes the exact p-value when neither sample has more rows than this.
KS_EXACT_ROWS = 10_000
#: Rows of the window, in time order, that the test over time sees on the engine path.
SEQUENTIAL_ROWS = 100_000


def ks_from_counts(live_values, live_counts, calibration_values, calibration_counts) -> tuple[float, float]:
    """Two-sided two-sample Kolmogorov-Smirnov statistic and p-value from two samples given as counts per value.

    The statistic is computed as :func:`scipy.stats.ks_2samp` computes it
    (the largest difference of the two empirical CDFs over the pooled values,
    each CDF a count divided by its sample size), so it is identical to the
    bit. The p-value is scipy's for ``method="auto"``: when neither sample
    has more than :data:`KS_EXACT_ROWS` rows, ``ks_2samp`` itself on the rows
    the counts stand for (at most that many, so cheap), which computes the
    exact p-value (falling back as scipy does); above, scipy's asymptotic
    p-value ``kstwo.sf(D, round(n m / (n + m)))`` (:data:`scipy.stats.kstwo`,
    public API), which is what ``ks_2samp`` computes there.

    Parameters
    ----------
    live_values, calibration_values : array-like of float
        Sorted ascending, without NaN, each value once.
    live_counts, calibration_counts : array-like of int
        Rows at each value.

    Returns
    -------
    (float, float)
        The statistic D and the p-value; NaN, NaN when a side has no row.
    """
    from scipy.stats import kstwo

    live_values, calibration_values = np.asarray(live_values, float), np.asarray(calibration_values, float)
    live_counts = np.asarray(live_counts, dtype=np.int64)
    calibration_counts = np.asarray(calibration_counts, dtype=np.int64)
    for values, counts in ((live_values, live_counts), (calibration_values, calibration_counts)):
        if values.shape != counts.shape or np.isnan(values).any() or np.any(np.diff(values) <= 0):
            raise ValueError("ks_from_counts: values must be distinct, sorted, without NaN, one count each")
    n_live, n_calibration = int(live_counts.sum()), int(calibration_counts.sum())
    if n_live == 0 or n_calibration == 0:
        return math.nan, math.nan
    if max(n_live, n_calibration) <= KS_EXACT_ROWS:
        from scipy.stats import ks_2samp

        result = ks_2samp(np.repeat(live_values, live_counts), np.repeat(calibration_values, calibration_counts))
        return float(result.statistic), float(result.pvalue)
    pooled = np.union1d(live_values, calibration_values)
    live_cdf = _cumulative(live_values, live_counts, pooled) / n_live
    calibration_cdf = _cumulative(calibration_values, calibration_counts, pooled) / n_calibration
    differences = live_cdf - calibration_cdf
    statistic = max(float(np.clip(-differences.min(), 0, 1)), float(differences.max()))
    larger, smaller = max(n_live, n_calibration), min(n_live, n_calibration)
    effective = np.round(larger * smaller / (larger + smaller))
    return statistic, float(np.clip(kstwo.sf(statistic, effective), 0, 1))


def _cumulative(values, counts, points) -> np.ndarray:
    """Rows at or below each point (integers)."""
    cumulative = np.concatenate([[0], np.cumsum(counts)])
    return cumulative[np.searchsorted(values, points, side="right")]


def median_from_counts(values, counts) -> float:
    """``numpy.median`` of the rows that ``counts`` stand for (sorted distinct ``values``); NaN without rows."""
    values, counts = np.asarray(values, float), np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return math.nan
    middle = np.array([(total - 1) // 2, total // 2])  # the middle row(s), from 0
    return float(np.median(values[np.searchsorted(np.cumsum(counts), middle, side="right")]))


def _resampled_medians(values, counts, n_resamples, rng) -> np.ndarray:
    """Medians of ``n_resamples`` samples of n rows drawn with replacement, drawn through their order statistics.

    The k-th smallest of n uniform draws is Beta(k, n + 1 - k), and the next
    one is it plus (1 - it) times a Beta(1, n - k); a row of the sample at
    uniform ``u`` is the row of rank ``floor(u n)``. So the medians have the
    distribution of those of resampled rows, in O(log bins) each.
    """
    total = int(counts.sum())
    cumulative = np.cumsum(counts)
    rank = (total + 1) // 2  # k: the median's rank (from 1) when n is odd, the lower middle when even
    lower = rng.beta(rank, total + 1 - rank, size=n_resamples)
    middle = [lower]
    if total % 2 == 0:
        middle.append(lower + (1 - lower) * rng.beta(1, total - rank, size=n_resamples))
    rows = [np.minimum(np.floor(uniform * total), total - 1) for uniform in middle]
    picked = [values[np.searchsorted(cumulative, row, side="right")] for row in rows]
    return np.mean(picked, axis=0)


def bootstrap_median_shift(live_values, live_counts, calibration_values, calibration_counts, *,
                           n_resamples: int = 2000, confidence: float = 0.95, random_state=0) -> tuple[float, float]:  # fmt: skip
    """Percentile bootstrap interval of the live median minus the calibration median, from counts.

    Each sample is resampled on its own, as :func:`scipy.stats.bootstrap`
    does with ``paired=False`` on the rows, but the resampled medians are
    drawn through their order statistics (see the module's
    ``_resampled_medians``): the same distribution as resampling the rows,
    other random numbers, and O(``n_resamples`` log bins) whatever the number
    of rows.

    Returns
    -------
    (float, float)
        ``(low, high)``; NaN, NaN when ``n_resamples`` is 0 or a side has fewer than two rows.
    """
    n_resamples = check_int(n_resamples, "n_resamples", "bootstrap_median_shift", low=0)
    confidence = check_float(confidence, "confidence", "bootstrap_median_shift", low=0, high=1)
    live_values, calibration_values = np.asarray(live_values, float), np.asarray(calibration_values, float)
    live_counts = np.asarray(live_counts, dtype=np.int64)
    calibration_counts = np.asarray(calibration_counts, dtype=np.int64)
    if n_resamples == 0 or live_counts.sum() < 2 or calibration_counts.sum() < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(random_state)
    shifts = _resampled_medians(live_values, live_counts, n_resamples, rng) - _resampled_medians(
        calibration_values, calibration_counts, n_resamples, rng
    )
    low, high = np.quantile(shifts, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(low), float(high)


@dataclass(frozen=True)
class _ActionCounts:
    """A batch's decisions counted per action, and whether it has timestamps (a class: Spark pickles the gate in it)."""

    gate: object

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        counted = self.gate.decide_table(batch)["action"].value_counts()
        return pd.DataFrame({
            "action": counted.index.astype(str),
            "timestamped": "yes" if "timestamp" in batch.columns else "no",
            "n": counted.to_numpy(np.int64),
        })  # fmt: skip


def _earliest(frame: pd.DataFrame, rows: int) -> pd.DataFrame:
    """The ``rows`` earliest rows of ``frame`` by ``micros`` (ties in their order), as int64 and float."""
    frame = frame.astype({"micros": np.int64, "score": float})
    return frame.iloc[np.argsort(frame["micros"].to_numpy(), kind="stable")[:rows]]


@dataclass(frozen=True)
class _EarliestScores:
    """A batch's ``rows`` earliest rows (by timestamp, then batch order): timestamp in microseconds, gate's score."""

    gate: object
    rows: int

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        stamps = pd.to_datetime(batch["timestamp"], utc=True)
        kept = stamps.notna().to_numpy()
        micros = (stamps[kept] - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(microseconds=1)
        frame = pd.DataFrame({"micros": micros.to_numpy(np.int64),
                              "score": self.gate.decide_table(batch)["score"].to_numpy(float)[kept]})  # fmt: skip
        return _earliest(frame, self.rows)


def _binned(values, binning: Binning) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct bin values of ``values`` (NaN dropped) and their counts, in ``binning``'s bins."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if binning.kind == "grid" and values.size:
        values = binning.edges(grid_index(values, binning))
    return np.unique(values, return_counts=True)


def _signal_row(signal, counts, calibration_values, *, n_resamples, confidence, rng) -> tuple[dict, str]:
    """One row of :func:`ragcal.monitoring.shift_tests.signal_tests` from the live counts, and a note on its bins."""
    live_by_bin = counts.frame.groupby("bin")["n"].sum().sort_index()
    live_values, live_counts = live_by_bin.index.to_numpy(float), live_by_bin.to_numpy(np.int64)
    calibration_values = np.asarray(calibration_values, dtype=float)
    cal_values, cal_counts = _binned(calibration_values, counts.binning)
    statistic, p_value = ks_from_counts(live_values, live_counts, cal_values, cal_counts)
    row = {
        "signal": signal,
        "live_n": int(live_counts.sum()),
        "live_nan": counts.n_nan,
        "calibration_n": int(cal_counts.sum()),
        "calibration_nan": int(np.isnan(calibration_values).sum()),
        "ks_statistic": statistic,
        "p_value": p_value,
        "live_median": median_from_counts(live_values, live_counts),
        "calibration_median": median_from_counts(cal_values, cal_counts),
    }
    row["median_shift"] = row["live_median"] - row["calibration_median"]
    row["shift_low"], row["shift_high"] = bootstrap_median_shift(
        live_values, live_counts, cal_values, cal_counts, n_resamples=n_resamples, confidence=confidence,
        random_state=rng,
    )  # fmt: skip
    error = 0.0
    if counts.binning.kind == "grid" and live_counts.sum() and cal_counts.sum():
        error = float(max(live_counts.max() / live_counts.sum(), cal_counts.max() / cal_counts.sum()))
    row["ks_error"] = error
    note = f"{signal}: bins {counts.binning.exactness}"
    if counts.binning.kind == "grid":
        note += (
            f"; the KS statistic is that of the binned values, at most {error:.3g} below the exact one, and the "
            f"medians are cell edges, at most {counts.binning.width:.3g} below the exact ones"
        )
    return row, note


def monitor_log(gate, source, calibration, *, engine: str = "auto", since=None, until=None,
                bins: int = DEFAULT_BINS, max_distinct: int = MAX_DISTINCT, alpha: float = 0.05,
                n_resamples: int = 2000, random_state=0, min_rows: int = MIN_ROWS,
                sequential_rows: int = SEQUENTIAL_ROWS) -> MonitorReport:  # fmt: skip
    """:func:`ragcal.monitoring.monitor` on a live log of any size, read by an engine.

    With ``engine="pandas"`` (and under ``"auto"`` for one file up to
    :data:`ragcal.logs.engines.AUTO_BYTES`) the log is read into memory and
    :func:`~ragcal.monitoring.monitor` runs on its rows in the window: the
    report is today's, with no notes. With ``"duckdb"`` or ``"spark"`` the
    tests come from counts (see the module docstring for what is exact and
    what is not), and the report's ``notes`` say so.

    Parameters
    ----------
    gate : Gate or str or Path
        A gate, or a gate file (:func:`ragcal.gates.read_gate_file`).
    source : str or Path
        The live log: a CSV, CSV.gz or Parquet file, a folder or a glob of
        Parquet files; on Spark also a URI Spark lists (``s3a://...``). The
        signal columns the gate reads, optionally ``timestamp``.
    calibration : DataFrame or str or Path
        The labeled score table the gate was fitted on (small: read into memory).
    engine : {"auto", "pandas", "duckdb", "spark"}, default="auto"
    since, until : str or datetime, optional
        Keep the live rows whose ``timestamp`` is in ``[since, until)``.
    bins : int, default=DEFAULT_BINS
        Grid cells over a signal's live range when it has more than ``max_distinct`` distinct scores.
    max_distinct : int, default=MAX_DISTINCT
    alpha : float, default=0.05
        Chance of any false alarm, over the whole family (Bonferroni).
    n_resamples : int, default=2000
        Bootstrap resamples of each median shift (descriptive only).
    random_state : int, default=0
        Seeds the bootstrap and the smoothing of the conformal p-values.
    min_rows : int, default=MIN_ROWS
        With fewer live rows, a "no shift" verdict says the log is too short to rule one out.
    sequential_rows : int, default=SEQUENTIAL_ROWS
        Engine path: the test over time runs on this many of the window's
        earliest rows (all when the window has no more).

    Returns
    -------
    MonitorReport

    Raises
    ------
    ValueError
        No row in the window, a signal column the log lacks (naming the log),
        ``since``/``until`` without a ``timestamp`` column, a bad parameter.
    """
    from ..score_tables import read_score_table

    alpha = check_float(alpha, "alpha", "monitor_log", low=0, high=1)
    n_resamples = check_int(n_resamples, "n_resamples", "monitor_log", low=0)
    sequential_rows = check_int(sequential_rows, "sequential_rows", "monitor_log", low=1)
    min_rows = check_int(min_rows, "min_rows", "monitor_log", low=0)
    if isinstance(gate, (str, Path)):
        from ..gates.files import read_gate_file

        gate = read_gate_file(gate)["gate"]
    columns = list(gate.columns)
    engine = choose_engine(engine, source)
    since, until = parse_time(since, "since"), parse_time(until, "until")
    if engine == "pandas":
        live = read_pandas(source, columns, since, until)
        return monitor(gate, live, calibration, alpha=alpha, n_resamples=n_resamples, random_state=random_state,
                       min_rows=min_rows, live_source=str(source))  # fmt: skip

    calibration_source = "calibration table"
    if isinstance(calibration, (str, Path)):
        calibration_source = str(calibration)
        calibration = read_score_table(calibration, columns)
    missing = [column for column in columns if column not in calibration.columns]
    if missing:
        raise ValueError(f"{calibration_source}: missing column(s) {', '.join(map(repr, missing))} that the gate reads")
    if len(calibration) == 0:
        raise ValueError(f"{calibration_source}: no rows; the monitor needs a log with the gate's scores")
    window = {"engine": engine, "since": since, "until": until}
    counts = {signal: count_signal(source, signal, max_distinct=max_distinct, bins=bins, **window)
              for signal in columns}  # fmt: skip
    n_live = next(iter(counts.values())).n_rows
    if n_live == 0:
        raise ValueError(f"{source}: no rows in the window; the monitor needs a log with the gate's scores")

    summed = sum_batches(source, columns, _ActionCounts(gate), ["action", "timestamped"], **window)
    timestamped = bool((summed["timestamped"] == "yes").any())
    summed = summed.groupby("action")["n"].sum()
    unknown = sorted(set(summed.index) - set(ACTIONS))
    if unknown:
        raise ValueError(f"monitor_log: the gate returned actions outside {ACTIONS}: {unknown}")
    live_k = summed.reindex(list(ACTIONS), fill_value=0).to_numpy(np.int64)
    calibration_actions = gate.decide_table(calibration.reset_index(drop=True))["action"].to_numpy(object)
    calibration_k = np.array([(calibration_actions == action).sum() for action in ACTIONS])
    shares = share_tests_from_counts(live_k, int(live_k.sum()), calibration_k, len(calibration))

    rng = np.random.default_rng(random_state)
    rows, notes = [], [f"Engine {engine}: the live log was read as counts; only they came back to Python."]
    for signal in columns:
        calibration_values = pd.to_numeric(calibration[signal], errors="coerce").to_numpy(float)
        row, note = _signal_row(signal, counts[signal], calibration_values, n_resamples=n_resamples,
                                confidence=0.95, rng=rng)  # fmt: skip
        rows.append(row)
        notes.append(note)
    signals = pd.DataFrame(rows)
    notes.append(
        "Median shift intervals: percentile bootstrap with each side's medians drawn through their order "
        "statistics (the distribution of resampled rows; other random numbers than the in-memory path)."
    )

    sequential = None
    if timestamped:
        level = alpha / (len(two_sample_family(shares, signals)) + 1)
        earliest = collect_batches(source, columns, _EarliestScores(gate, sequential_rows), ["micros", "score"],
                                   output_types={"micros": "long", "score": "double"},
                                   reduce=partial(_earliest, rows=sequential_rows), **window)  # fmt: skip
        stamps = pd.to_datetime(earliest["micros"].to_numpy(), unit="us", utc=True)
        sequential = sequential_test(earliest["score"].to_numpy(), stamps, alpha=level, random_state=rng)
        seen = len(earliest)
        notes.append(
            f"Exchangeability over time: on the window's {seen:,} earliest rows in time order"
            + (" (all of them)." if seen == n_live else
               f" of {n_live:,} (the martingale needs the rows in order in memory; later rows are not in it).")
        )  # fmt: skip
    return assemble_report(shares, signals, sequential, alpha=alpha, n_live=int(n_live),
                           n_calibration=len(calibration), min_rows=min_rows, notes=notes)  # fmt: skip
