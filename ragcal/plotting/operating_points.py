"""Binary decisions (an LLM's "I don't know", a judge's verdict) as points on ROC or risk-coverage axes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._params import check_choice
from ._style import _finish, _new_axes, figure_style

__all__ = ["OperatingPointDisplay"]

#: The axes a point can be drawn on: ROC (x FPR, y TPR) or risk-coverage (x coverage, y selective risk).
SPACES = ("roc", "risk-coverage")
_POINT_COLUMNS = ("name", "x", "x_low", "x_high", "y", "y_low", "y_high")


@dataclass
class OperatingPointDisplay:
    """One point per binary decision column, with interval bars, drawn onto existing ROC or risk-coverage axes.

    A decision that is only "answered" or "abstained" has no threshold to
    sweep: it is a single operating point, not a curve. Draw the curves
    first (:class:`~ragcal.plotting.RocDisplay`,
    :class:`~ragcal.plotting.RiskCoverageDisplay`), then the points onto the
    same Axes.

    Attributes
    ----------
    points : DataFrame
        ``name, x, x_low, x_high, y, y_low, y_high``: in ROC space x is the
        share of unanswerable questions answered (FPR) and y the share of
        answerable ones answered (TPR); in risk-coverage space x is the share
        of all questions answered and y the unsupported share of the answers.
    space : {"roc", "risk-coverage"}
    """

    points: pd.DataFrame
    space: str = "roc"

    def __post_init__(self):
        check_choice(self.space, "space", "OperatingPointDisplay", SPACES)
        missing = [column for column in _POINT_COLUMNS if column not in self.points.columns]
        if missing:
            raise ValueError(f"OperatingPointDisplay: the points lack column(s) {missing}")

    @classmethod
    def from_decisions(
        cls, answered: dict, answerable, *, support=None, space: str = "roc", confidence: float = 0.95
    ) -> "OperatingPointDisplay":
        """Points of ``{name: answered per question}`` with Clopper-Pearson intervals.

        Parameters
        ----------
        answered : dict of str to array-like of bool
            True where the system answered, per question.
        answerable : array-like of bool
        support : array-like of bool, default=None
            Per question, whether an answer to it would be supported; needed
            for ``space="risk-coverage"``.
        """
        from ..metrics import clopper_pearson
        from ..metrics.binary import operating_point_masks

        check_choice(space, "space", "OperatingPointDisplay.from_decisions", SPACES)
        answerable = np.asarray(answerable, dtype=bool)
        if space == "risk-coverage" and support is None:
            raise ValueError("OperatingPointDisplay.from_decisions: space='risk-coverage' needs support=")
        rows = []
        for name, decisions in answered.items():
            decisions = np.asarray(decisions, dtype=bool)
            if decisions.shape != answerable.shape:
                raise ValueError(
                    f"OperatingPointDisplay.from_decisions: {name} has {decisions.size} decisions for "
                    f"{answerable.size} questions"
                )
            (x_hits, x_rows), (y_hits, y_rows) = operating_point_masks(decisions, answerable, support)[space]
            x_k, x_n, y_k, y_n = (int(mask.sum()) for mask in (x_hits & x_rows, x_rows, y_hits & y_rows, y_rows))
            (x_low, y_low), (x_high, y_high) = clopper_pearson([x_k, y_k], [x_n, y_n], confidence=confidence)
            rows.append(
                {
                    "name": name,
                    "x": x_k / x_n if x_n else np.nan,
                    "x_low": x_low,
                    "x_high": x_high,
                    "y": y_k / y_n if y_n else np.nan,
                    "y_low": y_low,
                    "y_high": y_high,
                }
            )
        return cls(pd.DataFrame(rows, columns=list(_POINT_COLUMNS)), space)

    @classmethod
    def from_table(cls, points: pd.DataFrame, *, space: str = "roc") -> "OperatingPointDisplay":
        """The rows of one space from a table with a ``space`` column (``operating_points.csv`` of the benchmark
        study), or every row of a table without one."""
        check_choice(space, "space", "OperatingPointDisplay.from_table", SPACES)
        if "space" in points.columns:
            points = points[points["space"] == space]
        return cls(points.reset_index(drop=True), space)

    def plot(self, ax=None, *, name=None, **kwargs) -> "OperatingPointDisplay":
        """Draw each point with its interval bars, in a legend of its own inside the Axes (``legend_``); a legend
        the Axes already has (the curves') stays as it is."""
        markers = ("*", "X", "P", "D", "h")
        with figure_style():
            ax = _new_axes(ax, size=(4.4, 4.2))
            kept = ax.get_legend()
            self.points_ = {}
            for position, point in enumerate(self.points.itertuples()):
                self.points_[point.name] = ax.errorbar(
                    point.x,
                    point.y,
                    xerr=[[point.x - point.x_low], [point.x_high - point.x]],
                    yerr=[[point.y - point.y_low], [point.y_high - point.y]],
                    fmt=markers[position % len(markers)],
                    color="#333333",
                    markersize=9,
                    capsize=3,
                    linewidth=1.0,
                    label=f"{point.name}: ({point.x:.2f}, {point.y:.2f})",
                )
            self.legend_ = None
            if self.points_:
                options = {"loc": "lower right", "fontsize": 7, "title_fontsize": 7}
                options["title"] = "operating point (95% CI)"
                handles = list(self.points_.values())
                if kept is None:
                    self.legend_ = ax.legend(handles=handles, **options)
                else:  # the curves' legend stays the Axes' legend (the one the layout makes room for)
                    from matplotlib.legend import Legend

                    self.legend_ = Legend(ax, handles, [handle.get_label() for handle in handles], **options)
                    ax.add_artist(self.legend_)
            self.ax_, self.figure_ = ax, ax.figure
        return _finish(self, list(self.points_.values()), name=name, kwargs=kwargs)
