"""Shift checks on an unlabeled live score log: does the traffic still look like the calibration set?

A gate's numbers (how many answerable questions it keeps, how many
unanswerable ones it answers) were measured on one labeled calibration set.
They carry over to live traffic only as long as that traffic looks like the
calibration set. :func:`monitor` checks this from a score log alone, with no
labels:

- the shares of answers, hedges and refusals the gate gives on the live log,
  against the shares it gives on the calibration set (under the calibration
  set's own slice mix), one Fisher exact test per action;
- for every signal the gate reads, a two-sample Kolmogorov-Smirnov test of the
  live values against the calibration values, and the shift of the median
  with a seeded bootstrap interval;
- when the log has a ``timestamp`` column, an on-line test of exchangeability
  over time: a conformal test martingale over the gate's score
  (:func:`conformal_p_values`, :func:`jumper_martingale`).

All the tests together form one family, and the overall decision controls the
probability of any false alarm at ``alpha`` by Bonferroni's correction: a test
fires when its p-value is at most ``alpha / m``, ``m`` the number of tests run.

:func:`read_score_log` reads the live log (CSV, CSV.gz or Parquet).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "ACTIONS",
    "MIN_ROWS",
    "MonitorReport",
    "SequentialTest",
    "read_score_log",
    "CALIBRATORS",
    "conformal_p_values",
    "jumper_martingale",
    "share_tests",
    "signal_tests",
    "sequential_test",
    "monitor",
]

#: What a gate does with a question, in the order reports list them.
ACTIONS = ("answer", "hedge", "refuse")
#: Below this many live rows the verdict says that "no shift" means little.
MIN_ROWS = 30
#: Optional columns of a score log, kept when present (``answerable`` and ``slice`` are ignored by the monitor).
LOG_OPTIONAL_COLUMNS = ("id", "query", "answerable", "slice", "timestamp")


def read_score_log(path, signals=(), *, source: str | None = None) -> pd.DataFrame:
    """Read an unlabeled score log: the signal columns, plus ``id``, ``query``, ``timestamp`` when present.

    Parameters
    ----------
    path : str or Path
        ``*.parquet`` / ``*.pq`` are read as Parquet, anything else as CSV
        (``*.csv.gz`` decompressed on the fly), as
        :func:`ragcal.score_tables.read_score_table` reads them.
    signals : sequence of str, default=()
        Signal columns that must be present and numeric (a gate's
        :attr:`~ragcal.gates.Gate.columns`). Empty cells are read as NaN.
    source : str, default=None
        How messages name the file; ``str(path)`` when None.

    Returns
    -------
    DataFrame
        The columns of :data:`LOG_OPTIONAL_COLUMNS` that the file has, then
        ``signals``, in the file's row order. ``timestamp``, when present, is
        parsed to timezone-aware (UTC) datetimes; a timestamp without a zone is
        taken as UTC. ``answerable`` and ``slice`` are kept as read (no labels
        are needed, none are checked).

    Raises
    ------
    ValueError
        Naming the file: not found, unreadable, a missing signal column, a
        non-numeric signal cell (with its line for CSV), a timestamp that is
        not a date and time (with its line).

    Examples
    --------
    >>> from ragcal.monitoring import read_score_log
    >>> log = read_score_log("results/fastapi/scores.csv", ["dense_top1"])
    >>> list(log.columns)
    ['id', 'query', 'answerable', 'slice', 'dense_top1']
    """
    from ..score_tables import _read_columns, check_numeric_columns

    path = Path(path)
    source = source or str(path)
    signals = list(dict.fromkeys(signals))
    table = _read_columns(
        path,
        signals,
        source=source,
        what="score log",
        optional=LOG_OPTIONAL_COLUMNS,
        text_columns=("query", "timestamp"),
    )
    if len(table):  # an empty file's columns have no type; there is no cell to be wrong
        check_numeric_columns(table, signals, source=source)
    for signal in signals:
        table[signal] = pd.to_numeric(table[signal]).astype(float)
    if "timestamp" in table.columns:
        table["timestamp"] = _parse_timestamps(table["timestamp"], source)
    return table


def _parse_timestamps(values: pd.Series, source: str) -> pd.Series:
    if isinstance(values.dtype, pd.DatetimeTZDtype):
        parsed = values.dt.tz_convert("UTC")
    elif pd.api.types.is_datetime64_dtype(values):
        parsed = values.dt.tz_localize("UTC")
    elif pd.api.types.is_object_dtype(values) or pd.api.types.is_string_dtype(values):
        parsed = pd.to_datetime(values, errors="coerce", utc=True, format="ISO8601")
    else:
        raise ValueError(
            f"{source}, column 'timestamp': expected ISO 8601 dates and times (e.g. 2024-05-01T12:00:00Z), "
            f"got a column of {values.dtype}"
        )
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if bad.size:
        from ..queries import describe_cell

        raise ValueError(
            f"{source}, line {bad[0] + 2}, column 'timestamp': expected an ISO 8601 date and time "
            f"(e.g. 2024-05-01T12:00:00Z), got {describe_cell(values.iloc[bad[0]])}"
        )
    return parsed


# ---------------------------------------------------------------------------------------------------------- shares


def share_tests(live_actions, calibration_actions, *, confidence: float = 0.95) -> pd.DataFrame:
    """Live answer, hedge and refuse shares against the calibration set's, with exact intervals and tests.

    For each action, the count in the live log and in the calibration set form
    a 2x2 table (this action or another, live or calibration), tested with
    Fisher's exact test (two-sided). If calibration and live rows are
    exchangeable (drawn from the same traffic), then given the pooled count
    of the action the live count is hypergeometric, and that is exactly the
    null distribution of Fisher's test: the test is exact at any sample size,
    including a random split of one fixed set, and conservative where counts
    are small, where a chi-square test is not valid. Both shares are estimates,
    so neither side is treated as known.

    Parameters
    ----------
    live_actions, calibration_actions : array-like of str
        ``action`` column of :meth:`ragcal.gates.Gate.decide_table`.
    confidence : float, default=0.95
        Of the Clopper-Pearson intervals.

    Returns
    -------
    DataFrame
        One row per action of :data:`ACTIONS`: ``live_k, live_n, live_share,
        live_low, live_high``, the same for ``calibration_``, ``difference``
        (live minus calibration share), ``p_value`` and ``tested``. Only
        actions the gate took somewhere are tested; when only two occur, the
        tests of the two are the same test and only the first is counted
        (``tested`` False on the other, which repeats its p-value). An action
        that never occurs has ``p_value`` 1 and ``tested`` False.
    """
    from scipy.stats import fisher_exact

    from ..metrics import clopper_pearson

    live_actions = np.asarray(live_actions, dtype=object)
    calibration_actions = np.asarray(calibration_actions, dtype=object)
    known = np.array(ACTIONS, dtype=object)
    unknown = sorted(map(str, set(np.concatenate([live_actions, calibration_actions])) - set(ACTIONS)))
    if unknown:
        raise ValueError(f"share_tests: actions must be among {ACTIONS}; got {unknown}")
    live_k = (live_actions[:, None] == known).sum(axis=0)
    calibration_k = (calibration_actions[:, None] == known).sum(axis=0)
    live_n, calibration_n = live_actions.size, calibration_actions.size
    live_low, live_high = clopper_pearson(live_k, live_n, confidence=confidence)
    calibration_low, calibration_high = clopper_pearson(calibration_k, calibration_n, confidence=confidence)
    occurs = (live_k + calibration_k) > 0
    p_values = np.ones(len(ACTIONS))
    tested = np.zeros(len(ACTIONS), dtype=bool)
    for position in np.flatnonzero(occurs):
        counts = [[live_k[position], live_n - live_k[position]],
                  [calibration_k[position], calibration_n - calibration_k[position]]]
        p_values[position] = fisher_exact(counts).pvalue
    if occurs.sum() == 2:
        tested[np.flatnonzero(occurs)[0]] = True
    elif occurs.sum() == 3:
        tested[:] = True
    with np.errstate(invalid="ignore", divide="ignore"):
        live_share = live_k / live_n
        calibration_share = calibration_k / calibration_n
    return pd.DataFrame(
        {
            "action": list(ACTIONS),
            "live_k": live_k,
            "live_n": live_n,
            "live_share": live_share,
            "live_low": live_low,
            "live_high": live_high,
            "calibration_k": calibration_k,
            "calibration_n": calibration_n,
            "calibration_share": calibration_share,
            "calibration_low": calibration_low,
            "calibration_high": calibration_high,
            "difference": live_share - calibration_share,
            "p_value": p_values,
            "tested": tested,
        }
    )


# ---------------------------------------------------------------------------------------------------------- signals


def signal_tests(live: pd.DataFrame, calibration: pd.DataFrame, signals, *, n_bootstrap: int = 2000,
                 confidence: float = 0.95, random_state=0) -> pd.DataFrame:
    """Two-sample comparison of each signal's live and calibration values.

    NaN values are dropped signal by signal, and counted (``live_nan``,
    ``calibration_nan``). The Kolmogorov-Smirnov test is
    :func:`scipy.stats.ks_2samp` (two-sided, exact p-value for small samples):
    under exchangeability of live and calibration rows it is valid for any
    split of one pooled set (ties, such as a BM25 score of 0, make it
    conservative). The median shift is live minus calibration, with a
    percentile bootstrap interval (:func:`scipy.stats.bootstrap`, each sample
    resampled on its own), which describes the size of a shift and takes no
    part in the decision.

    Parameters
    ----------
    live, calibration : DataFrame
        With the ``signals`` columns.
    signals : sequence of str
    n_bootstrap : int, default=2000
        Bootstrap resamples of the median shift; 0 leaves its interval NaN.
    confidence : float, default=0.95
    random_state : int or numpy.random.Generator, default=0

    Returns
    -------
    DataFrame
        One row per signal: ``signal, live_n, live_nan, calibration_n,
        calibration_nan, ks_statistic, p_value, live_median,
        calibration_median, median_shift, shift_low, shift_high``. A signal
        with no value on one side has NaN statistics and p-value (and is not
        tested).
    """
    from scipy.stats import bootstrap, ks_2samp

    rng = np.random.default_rng(random_state)
    rows = []
    for signal in signals:
        live_values = live[signal].to_numpy(dtype=float)
        calibration_values = calibration[signal].to_numpy(dtype=float)
        live_kept = live_values[~np.isnan(live_values)]
        calibration_kept = calibration_values[~np.isnan(calibration_values)]
        row = {
            "signal": signal,
            "live_n": live_kept.size,
            "live_nan": int(live_values.size - live_kept.size),
            "calibration_n": calibration_kept.size,
            "calibration_nan": int(calibration_values.size - calibration_kept.size),
            "ks_statistic": np.nan,
            "p_value": np.nan,
            "live_median": np.nan,
            "calibration_median": np.nan,
            "median_shift": np.nan,
            "shift_low": np.nan,
            "shift_high": np.nan,
        }
        if live_kept.size and calibration_kept.size:
            result = ks_2samp(live_kept, calibration_kept)
            row["ks_statistic"], row["p_value"] = float(result.statistic), float(result.pvalue)
            row["live_median"], row["calibration_median"] = float(np.median(live_kept)), float(np.median(calibration_kept))
            row["median_shift"] = row["live_median"] - row["calibration_median"]
            if n_bootstrap > 0 and live_kept.size > 1 and calibration_kept.size > 1:
                interval = bootstrap(
                    (live_kept, calibration_kept),
                    _median_difference,
                    n_resamples=n_bootstrap,
                    confidence_level=confidence,
                    method="percentile",
                    paired=False,
                    vectorized=True,
                    rng=rng,
                ).confidence_interval
                row["shift_low"], row["shift_high"] = float(interval.low), float(interval.high)
        rows.append(row)
    return pd.DataFrame(rows, columns=list(rows[0]) if rows else None)


def _median_difference(live_values, calibration_values, axis=-1):
    return np.median(live_values, axis=axis) - np.median(calibration_values, axis=axis)


# ---------------------------------------------------------------------------------------------------------- sequential


def conformal_p_values(scores, *, random_state=0, block: int = 512) -> np.ndarray:
    """Smoothed conformal p-values of a sequence, each point against the points before it.

    With the score itself as nonconformity, the p-value of point ``t``
    (counting from 1) is::

        p_t = (#{i <= t : z_i > z_t} + theta_t * #{i <= t : z_i == z_t}) / t

    with ``theta_t`` uniform on [0, 1). If the sequence is exchangeable, the
    p-values are independent and uniform on [0, 1] (Vovk, Gammerman & Shafer
    2005, *Algorithmic Learning in a Random World*, Theorem 8.2; Vovk,
    Nouretdinov & Gammerman 2003, "Testing exchangeability on-line", ICML).
    A late point that is unusually high gets a small p-value, an unusually low
    one a p-value near 1.

    Parameters
    ----------
    scores : array-like of float
        In time order, without NaN.
    random_state : int or numpy.random.Generator, default=0
        Draws ``theta``.
    block : int, default=512
        Points compared at once: O(n log n + n * block) time, O(block**2)
        memory.

    Returns
    -------
    ndarray of float, shape (n,)
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 1:
        raise ValueError(f"conformal_p_values: expected a 1-D sequence of scores, got shape {scores.shape}")
    if np.isnan(scores).any():
        raise ValueError("conformal_p_values: scores contain NaN; drop them first")
    rng = np.random.default_rng(random_state)
    theta = rng.random(scores.size)
    greater = np.empty(scores.size)
    equal = np.empty(scores.size)
    earlier = np.empty(0)  # the points before the current block, sorted
    for start in range(0, scores.size, block):
        current = scores[start:start + block]
        left = np.searchsorted(earlier, current, side="left")
        right = np.searchsorted(earlier, current, side="right")
        up_to_self = np.tril(np.ones((current.size, current.size), dtype=bool))  # [t, i]: i <= t
        greater[start:start + current.size] = (earlier.size - right) + (
            (current[None, :] > current[:, None]) & up_to_self
        ).sum(axis=1)
        equal[start:start + current.size] = (right - left) + (
            (current[None, :] == current[:, None]) & up_to_self
        ).sum(axis=1)
        ordered = np.sort(current)
        earlier = np.insert(earlier, np.searchsorted(earlier, ordered), ordered)
    return (greater + theta * equal) / np.arange(1, scores.size + 1)


#: Betting functions of :func:`jumper_martingale`: each maps a p-value to a factor, and integrates to 1 over [0, 1].
CALIBRATORS = {
    "none": lambda p: np.ones_like(p),
    "low": lambda p: 1.5 - p,  # Vovk's eps = -1: a late point unusually high
    "high": lambda p: 0.5 + p,  # eps = +1: unusually low
    "middle": lambda p: 2 - 4 * np.abs(p - 0.5),  # late points bunched in the middle of the earlier ones
    "tails": lambda p: 4 * np.abs(p - 0.5),  # late points more spread out than the earlier ones
}


def jumper_martingale(p_values, *, jump: float = 0.03) -> np.ndarray:
    """A jumper conformal test martingale over a sequence of p-values (Vovk's Simple Jumper, more calibrators).

    Several betting functions (:data:`CALIBRATORS`) share the capital; after
    each p-value every one multiplies its share by its factor, and before each
    a share ``jump`` of the whole capital is spread evenly over all of them
    again, so that the capital follows a change that comes late. This is
    Vovk's Simple Jumper (Vovk 2021, "Testing randomness online", *Statistical
    Science* 36(4), 595-611, Algorithm 1), whose calibrators
    ``1 + eps * (p - 1/2)``, ``eps`` in -1, 0, 1 detect a shift of the score
    up or down, with two more, ``2 - 4|p - 1/2|`` and ``4|p - 1/2|``, that
    detect a change of spread: near-domain questions, whose scores sit between
    the answerable and the unrelated ones, give p-values bunched around 1/2.
    Each calibrator integrates to 1 over [0, 1], so when the p-values are
    independent and uniform (:func:`conformal_p_values` of an exchangeable
    sequence) the capital is a nonnegative martingale starting at 1, and by
    Ville's inequality ``P(sup_t M_t >= 1/alpha) <= alpha``.

    Parameters
    ----------
    p_values : array-like of float in [0, 1]
    jump : float, default=0.03
        Vovk's J (his examples use 0.01; 0.03 followed a change half-way through a log of 140 rows better, see
        docs/monitoring.md).

    Returns
    -------
    ndarray of float, shape (n,)
        The capital ``M_t`` after each p-value.
    """
    p_values = np.asarray(p_values, dtype=float)
    if isinstance(jump, bool) or not isinstance(jump, (int, float)) or not 0 <= jump <= 1:
        raise ValueError(f"The 'jump' parameter of jumper_martingale must be a float in [0, 1]. Got {jump!r} instead.")
    if p_values.size and (np.isnan(p_values).any() or p_values.min() < 0 or p_values.max() > 1):
        raise ValueError("jumper_martingale: p-values must be in [0, 1]")
    bets = np.column_stack([calibrator(p_values) for calibrator in CALIBRATORS.values()])  # (n, strategies)
    capital = np.full(bets.shape[1], 1 / bets.shape[1])
    path = np.empty(p_values.size)
    log_scale = 0.0  # the shares are kept summing to 1 and the log of the total apart, so long logs never underflow
    for step, bet in enumerate(bets):
        capital = ((1 - jump) * capital + jump / capital.size) * bet
        total = capital.sum()
        log_scale += np.log(total) if total > 0 else -np.inf
        capital = capital / total if total > 0 else capital
        path[step] = np.exp(log_scale)
    return path


@dataclass(frozen=True)
class SequentialTest:
    """The exchangeability check over time of :func:`sequential_test`.

    Attributes
    ----------
    n : int
        Rows tested (those with a score).
    dropped_nan : int
        Rows left out because the gate's score was NaN.
    martingale_max : float
        ``sup_t M_t`` of the Simple Jumper martingale.
    p_value : float
        ``min(1, 1 / martingale_max)``, a valid p-value by Ville's inequality.
    bar : float
        The capital at which it fires, ``1 / level``.
    crossed_at : pandas.Timestamp or None
        Timestamp of the first row where the capital reached ``bar``.
    crossed_row : int or None
        Position of that row in time order (from 0).
    martingale : ndarray
        The capital after each row, in time order.
    """

    n: int
    dropped_nan: int
    martingale_max: float
    p_value: float
    bar: float
    crossed_at: object = None
    crossed_row: int | None = None
    martingale: np.ndarray = field(default=None, repr=False, compare=False)


def sequential_test(scores, timestamps, *, level: float = 0.05, random_state=0, jump: float = 0.03) -> SequentialTest:
    """Test whether the scores of a live log are exchangeable over time (no drift, no change point).

    The rows are put in time order (stable: rows with the same timestamp keep
    the file's order), rows with a NaN score are dropped, and the scores go
    through :func:`conformal_p_values` and :func:`jumper_martingale`.
    Under exchangeability the chance that the capital ever reaches
    ``1 / level`` is at most ``level`` (Ville's inequality), however long the
    log, so looking at it after every row is allowed.

    Parameters
    ----------
    scores : array-like of float
        The gate's score per row (``score`` of :meth:`~ragcal.gates.Gate.decide_table`).
    timestamps : array-like of datetimes
    level : float, default=0.05
        Where ``bar`` (``1 / level``) is set; ``crossed_at`` refers to it.
    random_state : int or numpy.random.Generator, default=0
    jump : float, default=0.03

    Returns
    -------
    SequentialTest
    """
    scores = np.asarray(scores, dtype=float)
    timestamps = pd.Series(pd.to_datetime(pd.Series(timestamps)), copy=False).reset_index(drop=True)
    if len(timestamps) != scores.size:
        raise ValueError(f"sequential_test: {scores.size} scores but {len(timestamps)} timestamps")
    order = np.argsort(timestamps.to_numpy(), kind="stable")
    scores, timestamps = scores[order], timestamps.iloc[order].reset_index(drop=True)
    kept = ~np.isnan(scores)
    scores, timestamps = scores[kept], timestamps[kept].reset_index(drop=True)
    path = jumper_martingale(conformal_p_values(scores, random_state=random_state), jump=jump)
    largest = float(path.max()) if path.size else 1.0
    bar = 1 / level
    crossed = np.flatnonzero(path >= bar)
    first = int(crossed[0]) if crossed.size else None
    return SequentialTest(
        n=int(scores.size),
        dropped_nan=int((~kept).sum()),
        martingale_max=largest,
        p_value=min(1.0, 1 / max(largest, 1e-300)),
        bar=bar,
        crossed_at=None if first is None else timestamps.iloc[first],
        crossed_row=first,
        martingale=path,
    )


# ---------------------------------------------------------------------------------------------------------- report


@dataclass(frozen=True)
class MonitorReport:
    """What :func:`monitor` found; ``str(report)`` is its Markdown form.

    Attributes
    ----------
    shares : DataFrame
        :func:`share_tests`: live and calibration shares of each action.
    signals : DataFrame
        :func:`signal_tests`: one row per signal the gate reads.
    sequential : SequentialTest or None
        The exchangeability check over time; None without timestamps.
    alpha : float
        Chance of any false alarm, over the whole family of tests.
    tests : DataFrame
        The family: ``test, p_value, level, fired``, with ``level`` = alpha / m.
    shift_detected : bool
        Whether any test of the family fired.
    verdict : str
        One plain sentence.
    n_live, n_calibration : int
        Rows of each.
    """

    shares: pd.DataFrame
    signals: pd.DataFrame
    sequential: SequentialTest | None
    alpha: float
    tests: pd.DataFrame
    shift_detected: bool
    verdict: str
    n_live: int
    n_calibration: int

    def to_dict(self) -> dict:
        """JSON-ready form (what ``ragcal monitor --json`` prints)."""
        sequential = None
        if self.sequential is not None:
            sequential = {
                key: getattr(self.sequential, key)
                for key in ("n", "dropped_nan", "martingale_max", "p_value", "bar", "crossed_row")
            }
            crossed = self.sequential.crossed_at
            sequential["crossed_at"] = None if crossed is None else pd.Timestamp(crossed).isoformat()
        return {
            "alpha": self.alpha,
            "shift_detected": self.shift_detected,
            "verdict": self.verdict,
            "n_live": self.n_live,
            "n_calibration": self.n_calibration,
            "shares": _records(self.shares),
            "signals": _records(self.signals),
            "sequential": sequential,
            "tests": _records(self.tests),
        }

    def to_markdown(self) -> str:
        """The report as Markdown: the verdict, the shares, the signals, the sequential check, the family."""
        lines = [self.verdict, ""]
        lines += [
            f"Live log: {self.n_live} rows; calibration set: {self.n_calibration} rows. "
            f"False-alarm rate controlled at alpha={self.alpha:g} over {len(self.tests)} test(s) "
            f"(Bonferroni: each fires at p <= {self.alpha / max(len(self.tests), 1):.4g}).",
            "",
            "| action | live share [95% exact] | calibration share [95% exact] | difference | Fisher p |",
            "|---|---|---|---|---|",
        ]
        for row in self.shares.itertuples():
            lines.append(
                f"| {row.action} | {row.live_share:.1%} ({row.live_k}/{row.live_n}) [{row.live_low:.1%}, "
                f"{row.live_high:.1%}] | {row.calibration_share:.1%} ({row.calibration_k}/{row.calibration_n}) "
                f"[{row.calibration_low:.1%}, {row.calibration_high:.1%}] | {row.difference:+.1%} | "
                f"{row.p_value:.3g}{'' if row.tested else ' (not counted)'} |"
            )
        lines += [
            "",
            "| signal | live median | calibration median | median shift [95% bootstrap] | KS D | KS p | NaN live/cal |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in self.signals.itertuples():
            lines.append(
                f"| {row.signal} | {row.live_median:.4g} | {row.calibration_median:.4g} | {row.median_shift:+.4g} "
                f"[{row.shift_low:+.4g}, {row.shift_high:+.4g}] | {row.ks_statistic:.3f} | {row.p_value:.3g} | "
                f"{row.live_nan}/{row.calibration_nan} |"
            )
        lines.append("")
        if self.sequential is None:
            lines.append("No timestamp column: the exchangeability check over time was not run.")
        else:
            test = self.sequential
            crossed = (
                f"first reached {test.bar:.4g} at row {test.crossed_row} ({test.crossed_at})"
                if test.crossed_row is not None
                else f"never reached {test.bar:.4g}"
            )
            lines.append(
                f"Exchangeability over time (conformal jumper martingale of the gate's score, {test.n} rows"
                f"{f', {test.dropped_nan} without a score left out' if test.dropped_nan else ''}): "
                f"max {test.martingale_max:.4g}, {crossed}; p <= {test.p_value:.3g}."
            )
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.to_markdown()


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows as dicts of plain Python values, NaN as None (valid JSON)."""
    frame = frame.astype(object).where(frame.notna(), None)
    return [{key: (value.item() if isinstance(value, np.generic) else value) for key, value in row.items()}
            for row in frame.to_dict(orient="records")]


def _check_alpha(alpha) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 1:
        raise ValueError(f"The 'alpha' parameter of monitor must be a float in (0, 1). Got {alpha!r} instead.")
    return float(alpha)


def monitor(gate, live, calibration, *, alpha: float = 0.05, n_bootstrap: int = 2000, random_state=0,
            min_rows: int = MIN_ROWS, live_source: str = "live log",
            calibration_source: str = "calibration table") -> MonitorReport:
    """Check an unlabeled live score log against the gate's calibration set.

    Runs :func:`share_tests` on the gate's decisions, :func:`signal_tests` on
    every signal the gate reads (:attr:`~ragcal.gates.Gate.columns`) and, when
    the live log has a ``timestamp`` column, :func:`sequential_test` on the
    gate's score. The overall false-alarm rate is controlled at ``alpha`` by
    Bonferroni's correction over the family: with ``m`` tests run, each fires
    at p-value <= ``alpha / m``, so if live and calibration rows are
    exchangeable the chance that any fires is at most ``alpha``, whatever the
    dependence between the tests. The family is the share tests counted in
    :func:`share_tests` (one when the gate only answers and refuses, three
    with hedges), one Kolmogorov-Smirnov test per signal with values on both
    sides, and the martingale (p-value ``1 / sup M``, by Ville's inequality).

    The calibration shares are those of the calibration set under its own
    slice mix: a live log with more near-domain questions than the
    calibration set is a shift, and it is one that changes the gate's numbers.

    NaN scores: a row with a NaN signal goes through the gate as it would in
    production (the gates refuse it), so it counts in the shares; it is left
    out of that signal's comparison and out of the martingale, and counted
    there (``live_nan``, ``SequentialTest.dropped_nan``).

    Parameters
    ----------
    gate : Gate or str or Path
        A gate, or a gate file (:func:`ragcal.gates.read_gate_file`).
    live : DataFrame or str or Path
        The live score log, or its file (:func:`read_score_log`).
    calibration : DataFrame or str or Path
        The labeled score table the gate was fitted on, or its file
        (:func:`ragcal.score_tables.read_score_table`).
    alpha : float, default=0.05
        Chance of a false alarm, over all the tests together.
    n_bootstrap : int, default=2000
        Bootstrap resamples of each median shift (descriptive only).
    random_state : int, default=0
        Seeds the bootstrap and the smoothing of the conformal p-values.
    min_rows : int, default=MIN_ROWS
        With fewer live rows, a "no shift" verdict says that the log is too
        short to rule one out (the tests stay valid; they only lack power).
    live_source, calibration_source : str
        How messages name the two tables when they are given as DataFrames.

    Returns
    -------
    MonitorReport

    Raises
    ------
    ValueError
        An empty live log or calibration table, a missing or non-numeric
        signal column (naming the file), a bad ``alpha``.

    Examples
    --------
    >>> from ragcal.monitoring import monitor
    >>> report = monitor("results/fastapi/gates/threshold_keep095.json",
    ...                  "results/fastapi/scores.csv", "results/fastapi/scores.csv", n_bootstrap=0)
    >>> report.shift_detected
    False
    """
    from ..score_tables import check_numeric_columns, read_score_table

    alpha = _check_alpha(alpha)
    if isinstance(gate, (str, Path)):
        from ..gates import read_gate_file

        gate = read_gate_file(gate)["gate"]
    columns = list(gate.columns)
    if isinstance(live, (str, Path)):
        live_source = str(live)
        live = read_score_log(live, columns)
    if isinstance(calibration, (str, Path)):
        calibration_source = str(calibration)
        calibration = read_score_table(calibration, columns)
    for table, source in ((live, live_source), (calibration, calibration_source)):
        missing = [column for column in columns if column not in table.columns]
        if missing:
            raise ValueError(
                f"{source}: missing column(s) {', '.join(map(repr, missing))} that the gate reads; "
                f"have {', '.join(map(str, table.columns))}"
            )
        check_numeric_columns(table, columns, source=source)
        if len(table) == 0:
            raise ValueError(f"{source}: no rows; the monitor needs a log with the gate's scores")
    live = live.reset_index(drop=True)
    calibration = calibration.reset_index(drop=True)
    live_decisions = gate.decide_table(live)
    shares = share_tests(live_decisions["action"], gate.decide_table(calibration)["action"])
    rng = np.random.default_rng(random_state)
    signals = signal_tests(live, calibration, columns, n_bootstrap=n_bootstrap, random_state=rng)

    family = [(f"share of {action} (Fisher)", p_value)
              for action, p_value, tested in zip(shares["action"], shares["p_value"], shares["tested"]) if tested]
    family += [(f"{signal} (KS)", p_value)
               for signal, p_value in zip(signals["signal"], signals["p_value"]) if not np.isnan(p_value)]
    has_time = "timestamp" in live.columns
    size = len(family) + has_time
    level = alpha / max(size, 1)
    sequential = None
    if has_time:
        sequential = sequential_test(live_decisions["score"], live["timestamp"], level=level, random_state=rng)
        family.append(("exchangeability over time (martingale)", sequential.p_value))
    tests = pd.DataFrame(family, columns=["test", "p_value"])
    tests["level"] = level
    tests["fired"] = tests["p_value"] <= level
    shift_detected = bool(tests["fired"].any())
    verdict = _verdict(tests, alpha, shift_detected, len(live), min_rows)
    return MonitorReport(
        shares=shares,
        signals=signals,
        sequential=sequential,
        alpha=alpha,
        tests=tests,
        shift_detected=shift_detected,
        verdict=verdict,
        n_live=len(live),
        n_calibration=len(calibration),
    )


def _verdict(tests: pd.DataFrame, alpha: float, shift_detected: bool, n_live: int, min_rows: int) -> str:
    if shift_detected:
        fired = ", ".join(f"{row.test}, p={row.p_value:.2g}" for row in tests[tests["fired"]].itertuples())
        return (
            f"Shift detected at alpha={alpha:g} ({fired}): label a sample with `ragcal review` before trusting "
            "the gate's numbers."
        )
    sentence = (
        f"No shift detected at alpha={alpha:g} ({len(tests)} test(s), Bonferroni): the live log looks like the "
        "calibration set"
    )
    if n_live < min_rows:
        return (
            f"{sentence}, but it has only {n_live} rows (fewer than {min_rows}), too few to rule out a shift: "
            "collect more before trusting the gate's numbers."
        )
    return sentence + "."
