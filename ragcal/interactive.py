"""A threshold slider for JupyterLab.

:class:`ThresholdExplorer` computes once (distribution, sweep, fitted
thresholds) and then, for each slider position, redraws the score
distribution and the per-slice trade-off with the threshold marked and
prints the per-slice counts. Without a widget front end (headless execution,
a static notebook viewer) the same output is available from
:meth:`ThresholdExplorer.show`, which the notebooks call too.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pandas as pd

from .metrics import outcome_table
from .plotting import ScoreDistributionDisplay, TradeoffDisplay, figure_style

__all__ = ["ThresholdExplorer"]


class ThresholdExplorer:
    """Explore one signal's threshold interactively.

    Parameters
    ----------
    table : DataFrame
        Score table.
    signal : str, default="dense_top1"
    higher_is_answerable : bool, default=True
    rules : tuple of str, default=("keep@1.0", "keep@0.95")
        Fitted thresholds, marked alongside the slider's.
    """

    def __init__(
        self,
        table: pd.DataFrame,
        signal: str = "dense_top1",
        *,
        higher_is_answerable: bool = True,
        rules=("keep@1.0", "keep@0.95"),
    ):
        self.table = table
        self.signal = signal
        self.higher_is_answerable = higher_is_answerable
        self.distribution = ScoreDistributionDisplay.from_score_table(
            table, signal, rules=rules, higher_is_answerable=higher_is_answerable
        )
        self.tradeoff = TradeoffDisplay.from_score_table(
            table, signal, thresholds=self.distribution.thresholds, higher_is_answerable=higher_is_answerable
        )
        scores = table[signal].dropna()
        self.low, self.high = float(scores.min()), float(scores.max())

    def counts_at(self, threshold: float) -> pd.DataFrame:
        """Per-slice outcome at ``threshold``: counts, shares and exact 95% intervals."""
        outcome = outcome_table(self.table, self.signal, [threshold], higher_is_answerable=self.higher_is_answerable)
        row = outcome.iloc[0]
        groups = [column[: -len("_k")] for column in outcome.columns if column.endswith("_k")]
        rows = []
        for group in groups:
            size = int(row[group.rsplit("_", 1)[0] + "_n"])
            share, low, high = row[group], row[group + "_low"], row[group + "_high"]
            rows.append(
                {
                    "group": group.replace("_", " "),
                    "count": f"{int(row[group + '_k'])}/{size}",
                    "share": "n/a" if size == 0 else f"{share:.1%}",
                    "95% interval": "n/a" if size == 0 else f"[{low:.1%}, {high:.1%}]",
                }
            )
        return pd.DataFrame(rows).set_index("group")

    def figure_at(self, threshold: float):
        """Distribution and trade-off side by side, with ``threshold`` marked."""
        import matplotlib.pyplot as plt

        marked = {"slider": threshold, **self.distribution.thresholds}
        with figure_style():
            figure, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.0), layout="constrained")
        replace(self.distribution, thresholds=marked).plot(ax=left, legend=False)
        replace(self.tradeoff, thresholds=marked).plot(ax=right)
        left.set_title("score distribution", loc="left")
        right.set_title("per-slice trade-off", loc="left")
        return figure

    def show(self, threshold: float):
        """Static output for one threshold: the figure and the per-slice counts."""
        from IPython.display import display

        figure = self.figure_at(threshold)
        display(figure)
        display(self.counts_at(threshold))
        import matplotlib.pyplot as plt

        plt.close(figure)

    def slider_range(self, anchor: float, *, step: float = 0.005) -> tuple[float, float]:
        """Ends of a slider whose grid of ``step`` passes through ``anchor``.

        The browser's slider only takes ``min + k * step``; anchoring the grid
        on the starting threshold keeps the handle exactly where the counts
        are. One end answers every question and the other refuses every one:
        for the usual orientation the left end is at or below the lowest score
        and the right end above the highest (mirrored for the other).
        """
        below = math.ceil((anchor - self.low) / step)
        above = math.floor((self.high - anchor) / step)
        if self.higher_is_answerable:
            return anchor - below * step, anchor + (above + 1) * step
        return anchor - (below + 1) * step, anchor + above * step

    def widget(self, threshold: float | None = None, *, step: float = 0.005):
        """An ipywidgets slider that redraws :meth:`show` on every move.

        It starts at ``threshold`` (default: the ``keep@1.0`` threshold) exactly,
        not rounded, so its first counts equal the rule's outcome; the readout
        shows three decimals.
        """
        import ipywidgets as widgets

        start = (
            self.distribution.thresholds.get("keep@1.0", (self.low + self.high) / 2) if threshold is None else threshold
        )
        low, high = self.slider_range(float(start), step=step)
        slider = widgets.FloatSlider(
            value=float(start),
            min=low,
            max=high,
            step=step,
            description=self.signal,
            readout_format=".3f",
            continuous_update=False,
            layout=widgets.Layout(width="60%"),
        )
        output = widgets.Output()

        def redraw(change=None):
            with output:
                output.clear_output(wait=True)
                self.show(slider.value)

        slider.observe(redraw, names="value")
        redraw()
        return widgets.VBox([slider, output])
