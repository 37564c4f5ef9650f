"""A threshold slider for JupyterLab.

:class:`ThresholdExplorer` computes once (distribution, sweep, fitted
thresholds) and then, for each slider position, redraws the score
distribution and the per-slice trade-off with the threshold marked and
prints the per-slice counts. Without a widget front end (headless execution,
a static notebook viewer) the same output is available from
:meth:`ThresholdExplorer.show`, which the notebooks call too.
"""

from __future__ import annotations

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
        return pd.DataFrame(
            [
                {
                    "group": group.replace("_", " "),
                    "count": f"{int(row[group + '_k'])}/{int(row[group.rsplit('_', 1)[0] + '_n'])}",
                    "share": row[group],
                    "95% interval": f"[{row[group + '_low']:.2f}, {row[group + '_high']:.2f}]",
                }
                for group in groups
            ]
        )

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

    def widget(self, threshold: float | None = None, *, step: float = 0.005):
        """An ipywidgets slider that redraws :meth:`show` on every move."""
        import ipywidgets as widgets

        start = (
            self.distribution.thresholds.get("keep@1.0", (self.low + self.high) / 2) if threshold is None else threshold
        )
        slider = widgets.FloatSlider(
            value=round(start, 3),
            min=round(self.low, 3),
            max=round(self.high, 3),
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
