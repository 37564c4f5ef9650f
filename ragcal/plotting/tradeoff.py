"""What each slice pays as the threshold moves, and how threshold rules hold up held out."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..calibration import fit_threshold
from ..metrics import sweep
from ..score_tables import check_score_table, slice_column, unanswerable_slices
from ._style import _finish, _mark_thresholds, _new_axes, figure_style, slice_colours

__all__ = ['TradeoffDisplay', 'HeldoutDisplay']


@dataclass
class TradeoffDisplay:
    """Per-slice abstention trade-off: threshold on x, kept / refused shares on y.

    Attributes
    ----------
    signal : str
    curves : DataFrame
        :func:`ragcal.metrics.sweep` output over an even grid.
    groups : dict of str to str
        Column prefix -> legend label (``"answerable_kept"`` -> ``"answerable kept"``).
    thresholds : dict of str to float
    """

    signal: str
    curves: pd.DataFrame
    groups: dict
    thresholds: dict

    @classmethod
    def from_score_table(
        cls,
        table: pd.DataFrame,
        signal: str = "dense_top1",
        *,
        thresholds=None,
        rules=("keep@1.0", "keep@0.95"),
        higher_is_answerable: bool = True,
        grid_size: int = 200,
    ) -> "TradeoffDisplay":
        table = check_score_table(table, [signal])
        finite = table[~table[signal].isna()]
        if thresholds is None:
            thresholds = {
                rule: fit_threshold(
                    rule, finite[signal], finite["answerable"], higher_is_answerable=higher_is_answerable
                )
                for rule in rules
            }
        low, high = finite[signal].min(), finite[signal].max()
        margin = 0.02 * (high - low)
        grid = np.linspace(low - margin, high + margin, grid_size)
        curves = sweep(finite, signal, grid=grid, higher_is_answerable=higher_is_answerable)
        curves = curves[curves["source"] != "score"].reset_index(drop=True)
        groups = {"answerable_kept": "answerable kept"}
        groups.update({f"{slice_column(name)}_refused": f"{name} refused" for name in unanswerable_slices(finite)})
        return cls(signal, curves, groups, dict(thresholds))

    def plot(self, ax=None, *, intervals: bool = True, name=None, **kwargs) -> "TradeoffDisplay":
        with figure_style():
            ax = _new_axes(ax, size=(4.6, 2.9))
            colours = slice_colours(
                ["answerable", *[label[: -len(" refused")] for label in list(self.groups.values())[1:]]]
            )
            self.lines_, self.bands_ = {}, {}
            for column, label in self.groups.items():
                slice_name = "answerable" if column == "answerable_kept" else label[: -len(" refused")]
                colour = colours[slice_name]
                style = "-" if column == "answerable_kept" else "--"
                (self.lines_[column],) = ax.plot(
                    self.curves["threshold"],
                    self.curves[column],
                    color=colour,
                    linestyle=style,
                    linewidth=1.6,
                    label=label,
                )
                if intervals:
                    self.bands_[column] = ax.fill_between(
                        self.curves["threshold"],
                        self.curves[f"{column}_low"],
                        self.curves[f"{column}_high"],
                        color=colour,
                        alpha=0.15,
                        linewidth=0,
                    )
            self.threshold_lines_ = _mark_thresholds(ax, self.thresholds)
            ax.set_ylim(-0.02, 1.02)
            ax.set_xlabel(f"{self.signal} threshold (answer at or above)")
            ax.set_ylabel("share of questions")
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
            self.ax_, self.figure_ = ax, ax.figure
        return _finish(self, self.lines_, name=name, kwargs=kwargs)


@dataclass
class HeldoutDisplay:
    """Distribution of held-out outcomes over repeated splits, per threshold rule.

    Attributes
    ----------
    outcomes : DataFrame
        :func:`ragcal.calibration.heldout_outcomes` output.
    measures : dict of str to str
        Column -> legend label.
    rules : list of str
    """

    outcomes: pd.DataFrame
    measures: dict
    rules: list

    @classmethod
    def from_heldout(cls, outcomes: pd.DataFrame, *, measures=None) -> "HeldoutDisplay":
        if measures is None:
            refused = [
                column
                for column in outcomes.columns
                if column.endswith("_refused") and column != "unanswerable_refused"
            ]
            measures = {"answerable_kept": "answerable kept"}
            measures.update({column: column[: -len("_refused")].replace("_", "-") + " refused" for column in refused})
        missing = [column for column in ("rule", *measures) if column not in outcomes.columns]
        if missing:
            raise ValueError(f"HeldoutDisplay.from_heldout: missing column(s) {missing}")
        return cls(outcomes, dict(measures), list(pd.unique(outcomes["rule"])))

    def plot(self, ax=None, *, name=None, **kwargs) -> "HeldoutDisplay":
        with figure_style():
            ax = _new_axes(ax, size=(6.4, 3.1))
            names = [
                "answerable" if column == "answerable_kept" else label[: -len(" refused")]
                for column, label in self.measures.items()
            ]
            colours = slice_colours(names)
            width = 0.8 / len(self.measures)
            self.boxes_ = {}
            for index, ((column, label), slice_name) in enumerate(zip(self.measures.items(), names)):
                data = [
                    self.outcomes.loc[self.outcomes["rule"] == rule, column].dropna().to_numpy() for rule in self.rules
                ]
                positions = np.arange(len(self.rules)) + (index - (len(self.measures) - 1) / 2) * width
                self.boxes_[column] = ax.boxplot(
                    data,
                    positions=positions,
                    widths=width * 0.85,
                    patch_artist=True,
                    whis=(5, 95),
                    showfliers=False,
                    medianprops={"color": "#000000"},
                    showmeans=True,
                    meanprops={
                        "marker": "o",
                        "markersize": 4,
                        "markerfacecolor": colours[slice_name],
                        "markeredgecolor": "#000000",
                        "markeredgewidth": 0.6,
                    },
                    boxprops={"facecolor": colours[slice_name], "alpha": 0.75, "edgecolor": colours[slice_name]},
                    whiskerprops={"color": colours[slice_name]},
                    capprops={"color": colours[slice_name]},
                    label=label,
                )
            ax.set_xticks(np.arange(len(self.rules)), self.rules, rotation=15, ha="right")
            ax.set_ylim(-0.02, 1.02)
            ax.set_ylabel("held-out share\n(box: quartiles, whiskers: 5-95%,\ndot: mean)")
            splits = self.outcomes["split"].nunique() if "split" in self.outcomes else len(self.outcomes)
            ax.set_title(f"{splits:,} random half splits", loc="left")
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
            self.ax_, self.figure_ = ax, ax.figure
        return _finish(self, [boxes["boxes"] for boxes in self.boxes_.values()], name=name, kwargs=kwargs)
