"""Standardised coefficients of learned gates, with their spread over splits."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ._style import _CORPUS_MARKERS, _SIGNAL_COLOURS, _finish, _new_axes, figure_style

__all__ = ['CoefficientDisplay']


@dataclass
class CoefficientDisplay:
    """Standardised coefficients of a learned gate with their spread across held-out splits.

    Attributes
    ----------
    coefficients : DataFrame
        ``gate, signal, mean, low, high`` (one row per coefficient, the
        intercept left out), in drawing order.
    gates : list of str
    """

    coefficients: pd.DataFrame
    gates: list

    @classmethod
    def from_coefficients(cls, coefficients: pd.DataFrame, *, gates=None) -> "CoefficientDisplay":
        """From the ``coefficients`` summary of :func:`ragcal.study.learned.summarize_learned`.

        Signals are ordered by the size of their mean coefficient in the first gate.
        """
        missing = [column for column in ("gate", "signal", "mean", "low", "high") if column not in coefficients]
        if missing:
            raise ValueError(f"CoefficientDisplay.from_coefficients: missing column(s) {missing}")
        table = coefficients[coefficients["signal"] != "(intercept)"]
        gates = list(gates) if gates is not None else list(pd.unique(table["gate"]))
        unknown = [gate for gate in gates if gate not in set(table["gate"])]
        if unknown:
            raise ValueError(f"CoefficientDisplay.from_coefficients: no coefficients for gate(s) {unknown}")
        table = table[table["gate"].isin(gates)]
        first = table[table["gate"] == gates[0]].sort_values("mean", key=np.abs, ascending=False)["signal"]
        order = list(first) + [name for name in pd.unique(table["signal"]) if name not in set(first)]
        table = table.assign(
            _gate=table["gate"].map(gates.index), _signal=table["signal"].map(order.index)
        ).sort_values(["_signal", "_gate"])
        return cls(table.drop(columns=["_gate", "_signal"]).reset_index(drop=True), gates)

    def plot(self, ax=None, *, name=None, **kwargs) -> "CoefficientDisplay":
        """One row per signal, a point (mean) and a line (2.5th-97.5th percentile) per gate."""
        signals = list(pd.unique(self.coefficients["signal"]))
        with figure_style():
            ax = _new_axes(ax, size=(5.6, 0.28 * len(signals) + 1.4))
            self.points_ = {}
            offsets = np.linspace(-0.2, 0.2, len(self.gates)) if len(self.gates) > 1 else np.zeros(1)
            positions = {signal: len(signals) - 1 - n for n, signal in enumerate(signals)}
            for gate, offset, colour, marker in zip(self.gates, offsets, _SIGNAL_COLOURS * 3, _CORPUS_MARKERS * 3):
                part = self.coefficients[self.coefficients["gate"] == gate]
                y = np.array([positions[signal] for signal in part["signal"]]) + offset
                ax.hlines(y, part["low"], part["high"], color=colour, linewidth=1.4)
                self.points_[gate] = ax.plot(
                    part["mean"], y, linestyle="none", marker=marker, color=colour, markersize=4.5, label=gate
                )[0]
            ax.axvline(0.0, color="#777777", linestyle=":", linewidth=1)
            ax.set_yticks([positions[signal] for signal in signals], signals)
            ax.set_xlabel("standardised coefficient (log-odds of answerable per SD)")
            ax.grid(axis="y", visible=False)
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), title="mean, 2.5th-97.5th pct. over splits")
            self.ax_, self.figure_ = ax, ax.figure
        return _finish(self, self.points_, name=name, kwargs=kwargs)
