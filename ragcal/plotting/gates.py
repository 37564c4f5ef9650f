"""Gates: the floor x min_gap surface, and answer / hedge / refuse shares per gate and slice."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ._style import ACTION_COLOURS, _finish, figure_style

__all__ = ['FloorGapDisplay', 'GateOutcomeDisplay']


@dataclass
class FloorGapDisplay:
    """Heatmaps of a floor x min_gap sweep: answerable kept and one unanswerable slice refused.

    Attributes
    ----------
    floors, gaps : ndarray
        The grid, sorted.
    panels : dict of str to ndarray of shape (len(floors), len(gaps))
        Share per grid point, by panel title.
    fitted : tuple of (float, float) or None
        ``(floor, min_gap)`` to mark.
    """

    floors: np.ndarray
    gaps: np.ndarray
    panels: dict
    fitted: tuple | None = None

    @classmethod
    def from_sweep(cls, sweep: pd.DataFrame, *, refused="near_domain_refused", fitted=None) -> "FloorGapDisplay":
        """From :func:`ragcal.gates.floor_gap_sweep`; ``fitted`` is a FloorGapGate or ``(floor, min_gap)``."""
        missing = [column for column in ("floor", "min_gap", "answerable_kept", refused) if column not in sweep]
        if missing:
            raise ValueError(f"FloorGapDisplay.from_sweep: missing column(s) {missing}")
        floors, gaps = np.unique(sweep["floor"]), np.unique(sweep["min_gap"])
        panels = {}
        for column, title in (
            ("answerable_kept", "answerable kept"),
            (refused, refused.replace("_", " ").replace("near domain", "near-domain")),
        ):
            panels[title] = sweep.pivot(index="floor", columns="min_gap", values=column).loc[floors, gaps].to_numpy()
        if fitted is not None and not isinstance(fitted, tuple):
            fitted = (fitted.floor, fitted.min_gap)
        return cls(floors, gaps, panels, fitted)

    def plot(self, ax=None, *, name=None, **kwargs) -> "FloorGapDisplay":
        """Draw one panel per measure on ``ax`` (one Axes per panel; a new figure when None).

        ``name`` titles the figure; ``kwargs`` are matplotlib properties set on every image
        (``cmap=``, ``alpha=``, ...).
        """
        import matplotlib.pyplot as plt

        axes = ax
        with figure_style():
            if axes is None:
                _, axes = plt.subplots(1, len(self.panels), figsize=(7.6, 3.0), layout="constrained", sharey=True)
            axes = np.atleast_1d(axes)
            self.images_ = {}
            for ax, (title, values) in zip(axes, self.panels.items()):
                image = ax.pcolormesh(self.gaps, self.floors, values, vmin=0, vmax=1, cmap="cividis", shading="nearest")
                contour = ax.contour(
                    self.gaps, self.floors, values, levels=[0.5, 0.8, 0.95], colors="white", linewidths=0.7
                )
                ax.clabel(contour, fmt=lambda level: f"{level:.0%}", fontsize=7)
                if self.fitted is not None:
                    ax.plot(
                        self.fitted[1],
                        self.fitted[0],
                        marker="*",
                        markersize=11,
                        color="#D55E00",
                        markeredgecolor="#000000",
                        linestyle="none",
                        label="fitted",
                    )
                ax.set_title(title, loc="left")
                ax.set_xlabel("min gap (top - second)")
                ax.grid(False)
                self.images_[title] = image
            axes[0].set_ylabel("floor (top-1 score)")
            if self.fitted is not None:
                axes[-1].legend(loc="upper right")
            axes[0].figure.colorbar(image, ax=list(axes), label="share", shrink=0.9)
            self.axes_, self.figure_ = axes, axes[0].figure
        return _finish(self, self.images_, name=name, kwargs=kwargs)


@dataclass
class GateOutcomeDisplay:
    """Stacked answer / hedge / refuse shares per gate, one panel per slice.

    Attributes
    ----------
    shares : DataFrame
        Index (gate, slice), columns ``answer, hedge, refuse``.
    gates, slices : list of str
    """

    shares: pd.DataFrame
    gates: list
    slices: list

    @classmethod
    def from_outcomes(cls, outcomes: pd.DataFrame, *, value: str | None = None, gates=None) -> "GateOutcomeDisplay":
        """From any ``gate, slice, outcome`` table with a share column.

        Parameters
        ----------
        outcomes : DataFrame
            E.g. :func:`ragcal.gates.summarize_heldout_gates` (shares in
            ``mean``), or per-gate :func:`ragcal.gates.gate_outcomes` with a
            ``gate`` column added (shares in ``share``).
        value : str, default=None
            The share column; None takes ``mean``, else ``share``.
        gates : sequence of str, default=None
            Gates to draw, top to bottom; all, in order of appearance, when None.
        """
        if value is None:
            value = next((column for column in ("mean", "share") if column in outcomes), "mean")
        missing = [column for column in ("gate", "slice", "outcome", value) if column not in outcomes]
        if missing:
            raise ValueError(f"GateOutcomeDisplay.from_outcomes: missing column(s) {missing}")
        actions = outcomes[outcomes["outcome"].isin(ACTION_COLOURS)]
        gates = list(gates) if gates is not None else list(pd.unique(actions["gate"]))
        slices = [name for name in pd.unique(actions["slice"]) if name != "all unanswerable"]
        shares = actions.pivot_table(index=["gate", "slice"], columns="outcome", values=value, aggfunc="first")
        shares = shares.reindex(columns=list(ACTION_COLOURS)).fillna(0.0)
        return cls(shares, gates, slices)

    def plot(self, ax=None, *, name=None, **kwargs) -> "GateOutcomeDisplay":
        """Draw one panel per slice on ``ax`` (one Axes per panel; a new figure when None).

        ``name`` titles the figure; ``kwargs`` are matplotlib properties set on every bar.
        """
        import matplotlib.pyplot as plt

        axes = ax
        with figure_style():
            if axes is None:
                _, axes = plt.subplots(
                    1,
                    len(self.slices),
                    figsize=(2.6 * len(self.slices) + 1.2, 0.32 * len(self.gates) + 1.2),
                    layout="constrained",
                    sharey=True,
                )
            axes = np.atleast_1d(axes)
            positions = np.arange(len(self.gates))[::-1]
            self.bars_ = {}
            for ax, slice_name in zip(axes, self.slices):
                left = np.zeros(len(self.gates))
                for action, colour in ACTION_COLOURS.items():
                    widths = np.array([self.shares.loc[(gate, slice_name), action] for gate in self.gates])
                    self.bars_[(slice_name, action)] = ax.barh(
                        positions, widths, left=left, color=colour, edgecolor="#000000", linewidth=0.3, label=action
                    )
                    left += widths
                ax.set_xlim(0, 1)
                ax.set_title(slice_name, loc="left")
                ax.xaxis.set_major_formatter(lambda value, _: f"{value:.0%}")
                ax.grid(axis="y", visible=False)
            axes[0].set_yticks(positions, self.gates)
            axes[-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
            self.axes_, self.figure_ = axes, axes[0].figure
        return _finish(self, self.bars_, name=name, kwargs=kwargs)
