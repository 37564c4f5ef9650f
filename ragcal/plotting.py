"""Display objects in the style of scikit-learn's ``RocCurveDisplay``.

Each ``*Display.from_*`` constructor validates its input and computes through
ragcal's own functions (:mod:`ragcal.metrics`, :mod:`ragcal.calibration`); the
display keeps plain arrays and DataFrames. ``plot(ax=None, ...)`` only draws,
never computes, and returns the display, which keeps ``ax_`` and ``figure_``
(and what it drew) so that a notebook can restyle it.

matplotlib is imported inside the drawing code only, so ``import ragcal``
does not need it.

Colours come from the Okabe-Ito palette, which stays distinguishable for the
common forms of colour blindness.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .calibration import fit_threshold
from .metrics import auc_with_ci, check_score_table, slice_column, sweep, unanswerable_slices

__all__ = [
    "OKABE_ITO",
    "SLICE_COLOURS",
    "figure_style",
    "save_figure",
    "ScoreDistributionDisplay",
    "RocDisplay",
    "TradeoffDisplay",
    "HeldoutDisplay",
    "FloorGapDisplay",
    "GateOutcomeDisplay",
]

#: Okabe & Ito (2008) colour-blind-safe palette, black first.
OKABE_ITO = ("#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7")
#: Fixed colours for the bundled slices; other slices take the remaining palette colours in order.
SLICE_COLOURS = {"answerable": "#0072B2", "near-domain": "#E69F00", "unrelated": "#CC79A7"}
_EXTRA_COLOURS = ("#009E73", "#56B4E9", "#D55E00", "#000000", "#F0E442")
#: Colours for signals on shared axes, in order (Okabe-Ito without the low-contrast yellow).
_SIGNAL_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000")
#: Line styles for threshold markers, so that they differ without colour too.
_THRESHOLD_STYLES = ("--", ":", "-.", (0, (5, 1, 1, 1)), (0, (1, 3)))

_STYLE = {
    "figure.dpi": 100,
    "savefig.dpi": 200,
    "savefig.bbox": "tight",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.frameon": False,
    "svg.hashsalt": "ragcal",
    "svg.fonttype": "none",
}


@contextmanager
def figure_style():
    """The ragcal figure style (sizes for a single-column figure), as a context manager."""
    import matplotlib.pyplot as plt

    import matplotlib

    with plt.rc_context(_STYLE):
        try:
            yield
        finally:
            # The inline backend switches interactive mode on when the first figure is created; leaving
            # rc_context would switch it off again and later figures would never be shown in a notebook.
            interactive = matplotlib.is_interactive()
    matplotlib.interactive(interactive)


def save_figure(figure, stem, *, formats=("png", "svg")) -> list[Path]:
    """Save ``figure`` as ``<stem>.png`` and ``<stem>.svg`` (creating the folder).

    SVG output carries no date, so regenerating an unchanged figure gives an
    unchanged file.
    """
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for extension in formats:
        path = stem.with_suffix(f".{extension}")
        metadata = {"Date": None} if extension == "svg" else {"Software": None}
        with figure_style():
            figure.savefig(path, format=extension, metadata=metadata)
        paths.append(path)
    return paths


def slice_colours(slices) -> dict:
    """A colour per slice: the fixed ones for the bundled names, the palette for the rest."""
    extra = iter(_EXTRA_COLOURS * 4)
    return {name: SLICE_COLOURS.get(name) or next(extra) for name in slices}


def _new_axes(ax, size=(4.2, 2.8)):
    import matplotlib.pyplot as plt

    if ax is None:
        with figure_style():
            _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax


def _mark_thresholds(ax, thresholds: dict, *, orientation="vertical"):
    lines = {}
    for (name, value), style in zip(thresholds.items(), _THRESHOLD_STYLES * 3):
        if not np.isfinite(value):
            continue
        draw = ax.axvline if orientation == "vertical" else ax.axhline
        lines[name] = draw(value, color="#000000", linestyle=style, linewidth=1.1, label=f"{name}: {value:.3f}")
    return lines


# --------------------------------------------------------------------------- score distributions


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

    def plot(self, ax=None, *, kind: str = "hist", legend: bool = True) -> "ScoreDistributionDisplay":
        """Draw as ``"hist"`` (step histograms), ``"ecdf"`` or ``"strip"`` (one row per slice)."""
        if kind not in ("hist", "ecdf", "strip"):
            raise ValueError(
                f"The 'kind' parameter of ScoreDistributionDisplay.plot must be one of "
                f"('hist', 'ecdf', 'strip'). Got {kind!r} instead."
            )
        with figure_style():
            ax = _new_axes(ax)
            colours = slice_colours(self.scores)
            self.artists_ = {}
            for position, (name, values) in enumerate(self.scores.items()):
                label = f"{name} (n={values.size})"
                if kind == "hist":
                    self.artists_[name] = ax.hist(
                        values, bins=self.bins, histtype="step", linewidth=1.5, color=colours[name], label=label
                    )[2]
                elif kind == "ecdf":
                    self.artists_[name] = ax.ecdf(values, color=colours[name], linewidth=1.5, label=label)
                else:
                    self.artists_[name] = ax.scatter(
                        values,
                        position + self.jitter[name],
                        s=9,
                        alpha=0.7,
                        color=colours[name],
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
        return self


# --------------------------------------------------------------------------- ROC


@dataclass
class RocDisplay:
    """ROC curves of several signals on shared axes, with bootstrap bands.

    Attributes
    ----------
    curves : dict of str to (fpr, tpr)
        From ``sklearn.metrics.roc_curve``.
    bands : dict of str to (fpr_grid, tpr_low, tpr_high)
        Pointwise 2.5 and 97.5 percentiles of the TPR at fixed FPRs over
        stratified bootstrap resamples.
    aucs : dict of str to (auc, low, high)
    comparison : str
        What the negatives are (``"all unanswerable"`` or a slice name).
    """

    curves: dict
    bands: dict
    aucs: dict
    comparison: str

    @classmethod
    def from_score_table(
        cls,
        table: pd.DataFrame,
        signals=("dense_top1",),
        *,
        directions=None,
        comparison: str = "all unanswerable",
        n_resamples: int = 2000,
        n_band_resamples: int = 300,
        random_state=0,
    ) -> "RocDisplay":
        """Compute ROC curves, AUC intervals (``n_resamples``) and bands (``n_band_resamples``).

        ``directions`` maps a signal to ``higher_is_answerable`` (default
        True); a signal where low means answerable is scored negated.
        """
        from sklearn.metrics import roc_curve

        table = check_score_table(table, list(signals))
        if comparison != "all unanswerable":
            table = table[table["answerable"] | (table["slice"] == comparison)]
        directions = directions or {}
        grid = np.linspace(0, 1, 101)
        curves, bands, aucs = {}, {}, {}
        rng = np.random.default_rng(random_state)
        for signal in signals:
            subset = table[~table[signal].isna()]
            labels = subset["answerable"].to_numpy(dtype=bool)
            scores = subset[signal].to_numpy(dtype=float) * (1 if directions.get(signal, True) else -1)
            aucs[signal] = auc_with_ci(labels, scores, n_resamples=n_resamples, random_state=random_state)
            if np.isnan(aucs[signal][0]):
                continue
            fpr, tpr, _ = roc_curve(labels, scores)
            curves[signal] = (fpr, tpr)
            positives, negatives = np.nonzero(labels)[0], np.nonzero(~labels)[0]
            resampled = np.empty((n_band_resamples, grid.size))
            for b in range(n_band_resamples):
                chosen = np.concatenate([rng.choice(positives, positives.size), rng.choice(negatives, negatives.size)])
                band_fpr, band_tpr, _ = roc_curve(labels[chosen], scores[chosen])
                resampled[b] = np.interp(grid, band_fpr, band_tpr)
            low, high = np.quantile(resampled, [0.025, 0.975], axis=0)
            bands[signal] = (grid, low, high)
        return cls(curves, bands, aucs, comparison)

    def plot(self, ax=None, *, bands=True, chance: bool = True) -> "RocDisplay":
        """Draw the curves.

        Parameters
        ----------
        bands : bool or iterable of str, default=True
            Draw the bootstrap bands of all signals, none, or only the named
            ones (many overlapping bands get hard to read).
        chance : bool, default=True
        """
        band_signals = set(self.curves) if bands is True else set() if bands is False else set(bands)
        with figure_style():
            ax = _new_axes(ax, size=(3.8, 5.0))
            self.lines_, self.bands_ = {}, {}
            colours = iter(_SIGNAL_COLOURS * 2)
            for signal, (fpr, tpr) in self.curves.items():
                colour = next(colours)
                auc, low, high = self.aucs[signal]
                (self.lines_[signal],) = ax.plot(
                    fpr,
                    tpr,
                    color=colour,
                    linewidth=1.5,
                    drawstyle="steps-post",
                    label=f"{signal}: {auc:.3f} [{low:.3f}, {high:.3f}]",
                )
                if signal in band_signals:
                    grid, band_low, band_high = self.bands[signal]
                    self.bands_[signal] = ax.fill_between(
                        grid, band_low, band_high, color=colour, alpha=0.15, linewidth=0, step="post"
                    )
            if chance:
                (self.chance_line_,) = ax.plot(
                    [0, 1], [0, 1], color="#777777", linestyle=":", linewidth=1, label="chance: 0.5"
                )
            ax.set_xlim(-0.01, 1.01)
            ax.set_ylim(-0.01, 1.01)
            ax.set_aspect("equal")
            ax.set_xlabel(f"share of {self.comparison} answered (FPR)")
            ax.set_ylabel("share of answerable answered (TPR)")
            # Legend entries from the best AUC down; colours stay tied to the signal order.
            ranked = sorted(self.lines_, key=lambda signal: -self.aucs[signal][0])
            handles = [self.lines_[signal] for signal in ranked] + ([self.chance_line_] if chance else [])
            ax.legend(
                handles=handles,
                loc="upper left",
                bbox_to_anchor=(0.0, -0.16),
                title="AUC with 95% bootstrap interval",
                title_fontsize=8,
                alignment="left",
            )
            self.ax_, self.figure_ = ax, ax.figure
        return self


# --------------------------------------------------------------------------- trade-off


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

    def plot(self, ax=None, *, intervals: bool = True) -> "TradeoffDisplay":
        with figure_style():
            ax = _new_axes(ax, size=(4.6, 2.9))
            colours = slice_colours(
                ["answerable", *[label[: -len(" refused")] for label in list(self.groups.values())[1:]]]
            )
            self.lines_, self.bands_ = {}, {}
            for column, label in self.groups.items():
                name = "answerable" if column == "answerable_kept" else label[: -len(" refused")]
                colour = colours[name]
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
        return self


# --------------------------------------------------------------------------- held-out


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

    def plot(self, ax=None) -> "HeldoutDisplay":
        with figure_style():
            ax = _new_axes(ax, size=(6.4, 3.1))
            names = [
                "answerable" if column == "answerable_kept" else label[: -len(" refused")]
                for column, label in self.measures.items()
            ]
            colours = slice_colours(names)
            width = 0.8 / len(self.measures)
            self.boxes_ = {}
            for index, ((column, label), name) in enumerate(zip(self.measures.items(), names)):
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
                        "markerfacecolor": colours[name],
                        "markeredgecolor": "#000000",
                        "markeredgewidth": 0.6,
                    },
                    boxprops={"facecolor": colours[name], "alpha": 0.75, "edgecolor": colours[name]},
                    whiskerprops={"color": colours[name]},
                    capprops={"color": colours[name]},
                    label=label,
                )
            ax.set_xticks(np.arange(len(self.rules)), self.rules, rotation=15, ha="right")
            ax.set_ylim(-0.02, 1.02)
            ax.set_ylabel("held-out share\n(box: quartiles, whiskers: 5-95%,\ndot: mean)")
            splits = self.outcomes["split"].nunique() if "split" in self.outcomes else len(self.outcomes)
            ax.set_title(f"{splits:,} random half splits", loc="left")
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
            self.ax_, self.figure_ = ax, ax.figure
        return self


# --------------------------------------------------------------------------- gates


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

    def plot(self, axes=None) -> "FloorGapDisplay":
        import matplotlib.pyplot as plt

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
        return self


#: Colours of the three actions.
ACTION_COLOURS = {"answer": "#009E73", "hedge": "#F0E442", "refuse": "#CC79A7"}


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
    def from_outcomes(cls, outcomes: pd.DataFrame, *, value: str = "heldout_mean", gates=None) -> "GateOutcomeDisplay":
        """From the ``gates`` table of :func:`ragcal.gate_study.evaluate_gates` (or any ``gate, slice, outcome`` table)."""
        missing = [column for column in ("gate", "slice", "outcome", value) if column not in outcomes]
        if missing:
            raise ValueError(f"GateOutcomeDisplay.from_outcomes: missing column(s) {missing}")
        actions = outcomes[outcomes["outcome"].isin(ACTION_COLOURS)]
        gates = list(gates) if gates is not None else list(pd.unique(actions["gate"]))
        slices = [name for name in pd.unique(actions["slice"]) if name != "all unanswerable"]
        shares = actions.pivot_table(index=["gate", "slice"], columns="outcome", values=value, aggfunc="first")
        shares = shares.reindex(columns=list(ACTION_COLOURS)).fillna(0.0)
        return cls(shares, gates, slices)

    def plot(self, axes=None) -> "GateOutcomeDisplay":
        import matplotlib.pyplot as plt

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
        return self
