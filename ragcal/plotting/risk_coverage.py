"""Risk-coverage curves of several signals, with gates as held-out operating points."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ._style import _SIGNAL_COLOURS, _finish, _new_axes, figure_style

__all__ = ["RiskCoverageDisplay"]


@dataclass
class RiskCoverageDisplay:
    """Selective risk against coverage: one step curve per signal, one point (with its spread) per gate.

    A binary signal (0/1: :func:`ragcal.metrics.binary.is_binary_signal`) is
    one marker at its operating point, "answer when it says answerable",
    instead of its two-point curve.

    Attributes
    ----------
    curves : dict of str to DataFrame
        ``coverage`` and ``risk`` per threshold, strictest first, from
        :func:`ragcal.metrics.selective.risk_coverage`.
    aurc : dict of str to (value, low, high)
        Shown in the legend; signals without an entry show none.
    points : DataFrame
        One row per gate: ``name, coverage, coverage_low, coverage_high,
        risk, risk_low, risk_high`` (empty: no gates).
    operating_points : dict of str to (coverage, risk)
        One per binary signal, from
        :func:`ragcal.metrics.binary.risk_coverage_operating_point`.
    """

    curves: dict
    aurc: dict = field(default_factory=dict)
    points: pd.DataFrame = field(default_factory=pd.DataFrame)
    operating_points: dict = field(default_factory=dict)

    @classmethod
    def from_scores(cls, scores: dict, support: dict, *, directions=None) -> "RiskCoverageDisplay":
        """Curves (and AURC without interval) from ``{signal: scores}`` and ``{signal: support levels}``.

        A binary signal gets its operating point instead of a curve.
        """
        from ..metrics.binary import is_binary_signal, risk_coverage_operating_point
        from ..metrics.selective import risk_coverage, selective_areas

        directions = directions or {}
        curves, aurc, operating_points = {}, {}, {}
        for name, values in scores.items():
            higher = directions.get(name, True)
            if is_binary_signal(values):
                operating_points[name] = risk_coverage_operating_point(
                    values, support[name], higher_is_answerable=higher
                )
            else:
                curves[name] = risk_coverage(values, support[name], higher_is_answerable=higher)
            value = selective_areas(values, support[name], higher_is_answerable=higher)["aurc"]
            aurc[name] = (value, float("nan"), float("nan"))
        return cls(curves, aurc, operating_points=operating_points)

    @classmethod
    def from_results(cls, curves: pd.DataFrame, summary: pd.DataFrame, *, signals=None, gates=None):
        """From ``risk_coverage.csv`` and ``risk_coverage_summary.csv`` of ``make reproduce``.

        ``signals`` and ``gates`` pick what to draw (all when None), in that order.
        """
        signal_rows = curves[curves["kind"].isin(["signal", "gate curve"])]
        names = list(dict.fromkeys(signal_rows["name"])) if signals is None else list(signals)
        missing = [name for name in names if name not in set(signal_rows["name"])]
        if missing:
            raise ValueError(f"RiskCoverageDisplay: no curve for {missing}; the table has {sorted(set(signal_rows['name']))}")
        drawn = {name: signal_rows[signal_rows["name"] == name].reset_index(drop=True) for name in names}
        areas = summary[summary["measure"] == "aurc"].set_index("name")
        aurc = {name: tuple(areas.loc[name, ["value", "low", "high"]]) for name in names if name in areas.index}
        points = curves[curves["kind"] == "gate"]
        if gates is not None:
            points = points.set_index("name").loc[list(gates)].reset_index()
        return cls(drawn, aurc, points.reset_index(drop=True))

    def plot(self, ax=None, *, name=None, **kwargs) -> "RiskCoverageDisplay":
        """Draw the curves (steps), binary signals (markers) and gates (points with 2.5th-97.5th percentile bars)."""
        with figure_style():
            ax = _new_axes(ax, size=(6.4, 4.2))
            self.lines_, self.points_, self.operating_points_ = {}, {}, {}
            for position, (signal, curve) in enumerate(self.curves.items()):
                colour = _SIGNAL_COLOURS[position % len(_SIGNAL_COLOURS)]
                style = ("-", "--", ":")[position // len(_SIGNAL_COLOURS) % 3]
                label = signal
                if signal in self.aurc:
                    value, low, high = self.aurc[signal]
                    label = f"{signal}: AURC {value:.3f}" + ("" if pd.isna(low) else f" [{low:.3f}, {high:.3f}]")
                (self.lines_[signal],) = ax.plot(
                    curve["coverage"], curve["risk"], color=colour, linestyle=style, linewidth=1.5,
                    drawstyle="steps-post", label=label,
                )
            for position, (signal, (coverage, risk)) in enumerate(self.operating_points.items(), len(self.curves)):
                (self.operating_points_[signal],) = ax.plot(
                    [coverage], [risk], linestyle="none", marker="D", markersize=7, markeredgecolor="#000000",
                    markeredgewidth=0.6, color=_SIGNAL_COLOURS[position % len(_SIGNAL_COLOURS)],
                    label=f"{signal} (binary: coverage {coverage:.2f}, risk {risk:.2f})",
                )
            markers = ("o", "s", "D", "^", "v", "P", "X", "*")
            for position, point in enumerate(self.points.itertuples()):
                self.points_[point.name] = ax.errorbar(
                    point.coverage, point.risk,
                    xerr=[[point.coverage - point.coverage_low], [point.coverage_high - point.coverage]],
                    yerr=[[point.risk - point.risk_low], [point.risk_high - point.risk]],
                    fmt=markers[position % len(markers)], color="#333333", markersize=5, capsize=2, linewidth=0.8,
                    label=f"{point.name} (held out)",
                )
            ax.set_xlim(0, 1.01)
            ax.set_ylim(0, 1.01)
            ax.set_xlabel("coverage: share of all questions answered")
            ax.set_ylabel("selective risk: unsupported / answered")
            ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7)
            self.ax_, self.figure_ = ax, ax.figure
        return _finish(self, {**self.lines_, **self.operating_points_}, name=name, kwargs=kwargs)
