"""How many labels are enough: the threshold and its held-out outcome against the size of the labeled set."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ._style import _finish, figure_style, slice_colours

__all__ = ["LabelCurveDisplay"]

_REQUIRED = ("size", "n_answerable", "n_unanswerable", "threshold", "threshold_low", "threshold_high")


@dataclass
class LabelCurveDisplay:
    """Threshold (left) and held-out shares (right) against the number of labeled questions, with bands.

    Attributes
    ----------
    curve : DataFrame
        :func:`ragcal.calibration.label_curve` output: one row per size, each
        measure with ``_low`` and ``_high``.
    signal, rule : str
    measures : dict of str to str
        Column -> legend label (``"answerable_kept"`` -> ``"answerable kept"``).
    n_repeats : int or None
    confidence : float or None
        Width of the bands (0.9: 5th to 95th percentile over repeats).
    """

    curve: pd.DataFrame
    signal: str
    rule: str
    measures: dict
    n_repeats: int | None = None
    confidence: float | None = None

    @classmethod
    def from_score_table(
        cls,
        table: pd.DataFrame,
        signal: str = "dense_top1",
        *,
        rule: str = "keep@0.95",
        sizes=None,
        n_repeats: int = 200,
        random_state: int = 0,
        higher_is_answerable: bool = True,
        confidence: float = 0.9,
    ) -> "LabelCurveDisplay":
        """Compute :func:`ragcal.calibration.label_curve` on ``table`` and keep it for drawing."""
        from ..calibration import label_curve

        curve = label_curve(
            table,
            signal,
            rule,
            sizes=sizes,
            n_repeats=n_repeats,
            random_state=random_state,
            higher_is_answerable=higher_is_answerable,
            confidence=confidence,
        )
        return cls.from_curve(curve)

    @classmethod
    def from_curve(cls, curve: pd.DataFrame, *, signal=None, rule=None, measures=None) -> "LabelCurveDisplay":
        """From a :func:`ragcal.calibration.label_curve` table (or one read back from its CSV).

        ``signal`` and ``rule`` default to the table's ``attrs`` (lost in a
        CSV round trip: then pass them).
        """
        if measures is None:
            refused = [
                column for column in curve.columns if column.endswith("_refused") and column != "unanswerable_refused"
            ]
            measures = {"answerable_kept": "answerable kept"}
            measures.update({column: column[: -len("_refused")].replace("_", "-") + " refused" for column in refused})
        wanted = [*_REQUIRED, *[f"{column}{end}" for column in measures for end in ("", "_low", "_high")]]
        missing = [column for column in wanted if column not in curve.columns]
        if missing:
            raise ValueError(f"LabelCurveDisplay.from_curve: missing column(s) {missing}")
        if curve.empty:
            raise ValueError("LabelCurveDisplay.from_curve: the curve has no rows")
        signal = signal or curve.attrs.get("signal", "score")
        rule = rule or curve.attrs.get("rule", "")
        return cls(
            curve.sort_values("size").reset_index(drop=True),
            signal,
            rule,
            dict(measures),
            curve.attrs.get("n_repeats"),
            curve.attrs.get("confidence"),
        )

    def plot(self, ax=None, *, name=None, **kwargs) -> "LabelCurveDisplay":
        """Draw the threshold panel and the held-out shares panel (``ax``: two Axes; a new figure when None).

        ``kwargs`` are matplotlib properties set on every median line.
        """
        import matplotlib.pyplot as plt

        with figure_style():
            if ax is None:
                _, ax = plt.subplots(1, 2, figsize=(8.4, 3.0), layout="constrained")
            axes = np.atleast_1d(ax)
            if axes.size != 2:
                raise ValueError(f"LabelCurveDisplay.plot: ax must be two Axes (threshold, shares); got {axes.size}")
            threshold_ax, share_ax = axes
            sizes = self.curve["size"].to_numpy()
            self.lines_, self.bands_ = {}, {}
            (self.lines_["threshold"],) = threshold_ax.plot(
                sizes, self.curve["threshold"], color="#000000", marker="o", markersize=3, linewidth=1.4
            )
            self.bands_["threshold"] = threshold_ax.fill_between(
                sizes,
                self.curve["threshold_low"],
                self.curve["threshold_high"],
                color="#000000",
                alpha=0.12,
                linewidth=0,
            )
            threshold_ax.set_ylabel(f"{self.rule} threshold\non {self.signal}")
            names = [
                "answerable" if column == "answerable_kept" else label[: -len(" refused")]
                for column, label in self.measures.items()
            ]
            colours = slice_colours(names)
            for (column, label), slice_name in zip(self.measures.items(), names):
                colour = colours[slice_name]
                (self.lines_[column],) = share_ax.plot(
                    sizes,
                    self.curve[column],
                    color=colour,
                    linestyle="-" if column == "answerable_kept" else "--",
                    marker="o",
                    markersize=3,
                    linewidth=1.6,
                    label=label,
                )
                self.bands_[column] = share_ax.fill_between(
                    sizes,
                    self.curve[f"{column}_low"],
                    self.curve[f"{column}_high"],
                    color=colour,
                    alpha=0.15,
                    linewidth=0,
                )
            share_ax.set_ylim(-0.02, 1.02)
            share_ax.set_ylabel("held-out share")
            share_ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
            band = f"{self.confidence:.0%} band" if self.confidence else "band"
            repeats = f"{self.n_repeats:,} subsamples per size" if self.n_repeats else "subsamples"
            for panel in axes:
                panel.set_xscale("log")
                panel.set_xticks(sizes, [str(size) for size in sizes])
                panel.minorticks_off()
                panel.set_xlabel("labeled questions (stratified subsample)")
            threshold_ax.set_title(f"threshold: median and {band}", loc="left")
            share_ax.set_title(f"held out, over {repeats}", loc="left")
            self.axes_, self.figure_ = axes, threshold_ax.figure
        return _finish(self, self.lines_, name=name, kwargs=kwargs)
