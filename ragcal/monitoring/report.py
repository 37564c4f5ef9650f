"""The monitor: does an unlabeled live score log still look like the gate's calibration set?

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

:func:`~ragcal.monitoring.read_score_log` reads the live log (CSV, CSV.gz or Parquet).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .._params import check_float
from .score_log import read_score_log
from .sequential import SequentialTest, sequential_test
from .shift_tests import share_tests, signal_tests

__all__ = ["MIN_ROWS", "MonitorReport", "assemble_report", "monitor", "two_sample_family"]

#: Below this many live rows the verdict says that "no shift" means little.
MIN_ROWS = 30


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
    notes : tuple of str
        How the report was computed where it differs from :func:`monitor` on
        rows in memory (an engine's bins, the rows the test over time saw);
        empty for :func:`monitor`.
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
    notes: tuple[str, ...] = ()

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
            "notes": list(self.notes),
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
        if self.notes:
            lines += ["", *(f"- {note}" for note in self.notes)]
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.to_markdown()


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows as dicts of plain Python values, NaN as None (valid JSON)."""
    frame = frame.astype(object).where(frame.notna(), None)
    return [{key: (value.item() if isinstance(value, np.generic) else value) for key, value in row.items()}
            for row in frame.to_dict(orient="records")]



def monitor(gate, live, calibration, *, alpha: float = 0.05, n_resamples: int = 2000, random_state=0,
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
    n_resamples : int, default=2000
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
    ...                  "results/fastapi/scores.csv", "results/fastapi/scores.csv", n_resamples=0)
    >>> report.shift_detected
    False
    """
    from ..score_tables import check_numeric_columns, read_score_table

    alpha = check_float(alpha, "alpha", "monitor", low=0, high=1)
    if isinstance(gate, (str, Path)):
        from ..gates.files import read_gate_file

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
    signals = signal_tests(live, calibration, columns, n_resamples=n_resamples, random_state=rng)

    has_time = "timestamp" in live.columns
    level = alpha / max(len(two_sample_family(shares, signals)) + has_time, 1)
    sequential = None
    if has_time:
        sequential = sequential_test(live_decisions["score"], live["timestamp"], alpha=level, random_state=rng)
    return assemble_report(shares, signals, sequential, alpha=alpha, n_live=len(live),
                           n_calibration=len(calibration), min_rows=min_rows)


def two_sample_family(shares: pd.DataFrame, signals: pd.DataFrame) -> list[tuple[str, float]]:
    """The tests of the family before the one over time: ``(name, p-value)`` of each counted share and KS test."""
    family = [(f"share of {action} (Fisher)", p_value)
              for action, p_value, tested in zip(shares["action"], shares["p_value"], shares["tested"]) if tested]
    family += [(f"{signal} (KS)", p_value)
               for signal, p_value in zip(signals["signal"], signals["p_value"]) if not np.isnan(p_value)]
    return family


def assemble_report(shares: pd.DataFrame, signals: pd.DataFrame, sequential: SequentialTest | None, *,
                    alpha: float, n_live: int, n_calibration: int, min_rows: int = MIN_ROWS,
                    notes=()) -> MonitorReport:  # fmt: skip
    """The family of tests at the Bonferroni level ``alpha / m``, the verdict and the report (see :func:`monitor`).

    ``sequential`` (None when not run) should have been run with ``alpha`` set to
    that level, ``alpha / (len(two_sample_family(shares, signals)) + 1)``, for its
    ``bar`` to be the family's.
    """
    family = two_sample_family(shares, signals)
    if sequential is not None:
        family.append(("exchangeability over time (martingale)", sequential.p_value))
    level = alpha / max(len(family), 1)
    tests = pd.DataFrame(family, columns=["test", "p_value"])
    tests["level"] = level
    tests["fired"] = tests["p_value"] <= level
    shift_detected = bool(tests["fired"].any())
    verdict = _verdict(tests, alpha, shift_detected, n_live, min_rows)
    return MonitorReport(
        shares=shares,
        signals=signals,
        sequential=sequential,
        alpha=alpha,
        tests=tests,
        shift_detected=shift_detected,
        verdict=verdict,
        n_live=n_live,
        n_calibration=n_calibration,
        notes=tuple(notes),
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
