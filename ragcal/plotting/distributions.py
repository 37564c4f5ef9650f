"""Per-slice distribution of one signal, with the thresholds that rules pick."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._params import check_choice
from ..calibration import fit_threshold
from ..score_tables import check_score_table
from ._style import _finish, _mark_thresholds, _new_axes, figure_style, slice_colours

__all__ = ['ScoreDistributionDisplay']


@dataclass
class ScoreDistributionDisplay:
    """Per-slice distribution of one signal, with threshold markers.

    Create with :meth:`from_score_table`; draw with :meth:`plot`.

    Attributes
    ----------
    signal : str
    scores : dict of str to ndarray
        Sorted scores per slice.
    thresholds : dict of str to float
        Marked thresholds by label, e.g. ``{"keep@1.0": 0.426}``.
    bins : ndarray
        Shared histogram edges.
    jitter : dict of str to ndarray
        Vertical offsets for the strip plot (seeded).
    """

    signal: str
    scores: dict
    thresholds: dict
    bins: np.ndarray
    jitter: dict = field(repr=False)

    @classmethod
    def from_score_table(
        cls,
        table: pd.DataFrame,
        signal: str = "dense_top1",
        *,
        thresholds=None,
        rules=("keep@1.0",),
        higher_is_answerable: bool = True,
        bins: int = 30,
        random_state=0,
    ) -> "ScoreDistributionDisplay":
        """Compute from a score table.

        Parameters
        ----------
        thresholds : dict of str to float, default=None
            Thresholds to mark. When None, ``rules`` are fitted on the table.
        rules : tuple of str, default=("keep@1.0",)
        """
        table = check_score_table(table, [signal])
        table = table[~table[signal].isna()]
        if thresholds is None:
            thresholds = {
                rule: fit_threshold(rule, table[signal], table["answerable"], higher_is_answerable=higher_is_answerable)
                for rule in rules
            }
        slices = list(pd.unique(table["slice"]))
        scores = {name: np.sort(table.loc[table["slice"] == name, signal].to_numpy(dtype=float)) for name in slices}
        rng = np.random.default_rng(random_state)
        jitter = {name: rng.uniform(-0.25, 0.25, size=values.size) for name, values in scores.items()}
        edges = np.histogram_bin_edges(table[signal].to_numpy(dtype=float), bins=bins)
        return cls(signal, scores, dict(thresholds), edges, jitter)

    def plot(
        self, ax=None, *, kind: str = "hist", legend: bool = True, name=None, **kwargs
    ) -> "ScoreDistributionDisplay":
        """Draw as ``"hist"`` (step histograms), ``"ecdf"`` or ``"strip"`` (one row per slice)."""
        check_choice(kind, "kind", "ScoreDistributionDisplay.plot", ("hist", "ecdf", "strip"))
        with figure_style():
            ax = _new_axes(ax)
            colours = slice_colours(self.scores)
            self.artists_ = {}
            for position, (slice_name, values) in enumerate(self.scores.items()):
                label = f"{slice_name} (n={values.size})"
                if kind == "hist":
                    self.artists_[slice_name] = ax.hist(
                        values, bins=self.bins, histtype="step", linewidth=1.5, color=colours[slice_name], label=label
                    )[2]
                elif kind == "ecdf":
                    self.artists_[slice_name] = ax.ecdf(values, color=colours[slice_name], linewidth=1.5, label=label)
                else:
                    self.artists_[slice_name] = ax.scatter(
                        values,
                        position + self.jitter[slice_name],
                        s=9,
                        alpha=0.7,
                        color=colours[slice_name],
                        label=label,
                        linewidths=0,
                    )
            self.threshold_lines_ = _mark_thresholds(ax, self.thresholds)
            ax.set_xlabel(f"{self.signal}")
            ax.set_ylabel({"hist": "queries", "ecdf": "share of queries at or below", "strip": ""}[kind])
            if kind == "strip":
                ax.set_yticks(range(len(self.scores)), list(self.scores))
                ax.grid(False, axis="y")
            if legend:
                ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
            self.ax_, self.figure_ = ax, ax.figure
        return _finish(self, self.artists_, name=name, kwargs=kwargs)
