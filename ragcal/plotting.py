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
    "AucComparisonDisplay",
    "ChunkingSweepDisplay",
    "CoefficientDisplay",
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
        # Up to about ten curves the legend fits under the axes; more would squash them, so it goes to the right.
        beside = len(self.curves) > 10
        with figure_style():
            ax = _new_axes(ax, size=(8.6, 4.6) if beside else (3.8, 5.0))
            self.lines_, self.bands_ = {}, {}
            for position, (signal, (fpr, tpr)) in enumerate(self.curves.items()):
                # Past the palette, colours repeat with another line style, so any number of signals can be drawn.
                colour = _SIGNAL_COLOURS[position % len(_SIGNAL_COLOURS)]
                style = ("-", "--", ":")[position // len(_SIGNAL_COLOURS) % 3]
                auc, low, high = self.aucs[signal]
                (self.lines_[signal],) = ax.plot(
                    fpr,
                    tpr,
                    color=colour,
                    linestyle=style,
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
                bbox_to_anchor=(1.04, 1.0) if beside else (0.0, -0.16),
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


# --------------------------------------------------------------------------- several corpora

#: Markers for corpora on shared axes, so that they differ without colour too.
_CORPUS_MARKERS = ("o", "s", "D", "^", "v", "P")


def _check_corpus_tables(tables, required, owner: str) -> dict:
    """``{corpus: DataFrame}`` with every column of ``required``, or a ValueError naming what is missing."""
    if not isinstance(tables, dict) or not tables:
        raise TypeError(
            f"The 'tables' parameter of {owner} must be a non-empty dict of corpus name to DataFrame. "
            f"Got {type(tables).__name__} instead."
        )
    for corpus, table in tables.items():
        if not isinstance(table, pd.DataFrame):
            raise TypeError(f"{owner}: the table of corpus {corpus!r} must be a DataFrame. Got {type(table).__name__}.")
        missing = [column for column in required if column not in table.columns]
        if missing:
            raise ValueError(f"{owner}: the table of corpus {corpus!r} is missing column(s) {missing}")
    return {str(corpus): table for corpus, table in tables.items()}


def _ordered_union(columns) -> list:
    """Values in order of first appearance, the first column's values first."""
    return list(pd.unique(pd.concat([pd.Series(column, dtype=object) for column in columns], ignore_index=True)))


@dataclass
class AucComparisonDisplay:
    """AUC with its bootstrap interval per signal, one marker per corpus, on shared axes.

    Create with :meth:`from_auc_tables`; draw with :meth:`plot`.

    Attributes
    ----------
    comparison : str
        What the negatives are (``"all unanswerable"`` or a slice name).
    corpora : list of str
        Corpus names, in the order of the tables given (legend order).
    signals : list of str
        One row per signal, top to bottom.
    auc, ci_low, ci_high : ndarray of shape (len(signals), len(corpora))
        Element ``[i, j]`` is for ``signals[i]`` on ``corpora[j]``; NaN where
        the signal is constant on that corpus (or absent from its table).
    counts : dict of str to (int, int)
        ``(n_answerable, n_unanswerable)`` per corpus for this comparison.
    dropped : list of str
        Signals left out because their AUC is NaN on every corpus.
    """

    comparison: str
    corpora: list
    signals: list
    auc: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    counts: dict
    dropped: list = field(default_factory=list)

    _COLUMNS = ("signal", "comparison", "auc", "ci_low", "ci_high", "n_answerable", "n_unanswerable")

    @classmethod
    def from_auc_tables(
        cls, tables: dict, *, comparison: str = "all unanswerable", signals=None
    ) -> "AucComparisonDisplay":
        """Collect one comparison from several ``auc.csv`` tables.

        Parameters
        ----------
        tables : dict of str to DataFrame
            ``{corpus name: auc table}``, each with the columns of
            ``results/<corpus>/auc.csv``. Dict order is legend order.
        comparison : str, default="all unanswerable"
            The ``comparison`` rows to keep.
        signals : list of str, default=None
            The signals to show, in this order. None: every signal, in the
            order of the first table (signals only in later tables follow).

        Returns
        -------
        AucComparisonDisplay

        Examples
        --------
        >>> tables = {name: pd.read_csv(f"results/{name}/auc.csv") for name in ("fastapi", "rust-book")}
        >>> AucComparisonDisplay.from_auc_tables(tables, comparison="near-domain").plot()  # doctest: +SKIP
        """
        owner = "AucComparisonDisplay.from_auc_tables"
        tables = _check_corpus_tables(tables, cls._COLUMNS, owner)
        rows = {}
        for corpus, table in tables.items():
            kept = table[table["comparison"] == comparison]
            if kept.empty:
                known = list(pd.unique(table["comparison"]))
                raise ValueError(f"{owner}: the table of corpus {corpus!r} has no {comparison!r} rows; it has {known}")
            repeated = kept["signal"][kept["signal"].duplicated()].tolist()
            if repeated:
                raise ValueError(f"{owner}: the table of corpus {corpus!r} repeats signal(s) {repeated}")
            rows[corpus] = kept.set_index("signal")
        available = _ordered_union([kept.index for kept in rows.values()])
        if signals is None:
            signals = available
        else:
            signals = [signals] if isinstance(signals, str) else list(signals)
            unknown = [signal for signal in signals if signal not in available]
            if unknown:
                raise ValueError(
                    f"The 'signals' parameter of {owner} must name signals of the tables {available}. Got {unknown}."
                )

        def column(name):
            return np.array(
                [[rows[corpus][name].get(signal, np.nan) for corpus in rows] for signal in signals], dtype=float
            ).reshape(len(signals), len(rows))

        auc, low, high = column("auc"), column("ci_low"), column("ci_high")
        shown = ~np.all(np.isnan(auc), axis=1)
        dropped = [signal for signal, keep in zip(signals, shown) if not keep]
        counts = {
            corpus: (int(kept["n_answerable"].iloc[0]), int(kept["n_unanswerable"].iloc[0]))
            for corpus, kept in rows.items()
        }
        return cls(
            comparison,
            list(rows),
            [signal for signal, keep in zip(signals, shown) if keep],
            auc[shown],
            low[shown],
            high[shown],
            counts,
            dropped,
        )

    def plot(self, ax=None, *, chance: bool = True, legend: bool = True) -> "AucComparisonDisplay":
        """Draw a horizontal dot plot: one row per signal, one marker and interval per corpus.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            None: a new figure sized to the number of signals.
        chance : bool, default=True
            Mark AUC 0.5 with a dashed line.
        legend : bool, default=True
        """
        with figure_style():
            ax = _new_axes(ax, size=(5.4, 0.34 * len(self.signals) * max(1.0, 0.6 * len(self.corpora)) + 1.1))
            rows = np.arange(len(self.signals))[::-1].astype(float)
            step = min(0.25, 0.7 / max(len(self.corpora), 1))
            self.errorbars_, self.missing_ = {}, {}
            for position, corpus in enumerate(self.corpora):
                colour = _SIGNAL_COLOURS[position % len(_SIGNAL_COLOURS)]
                marker = _CORPUS_MARKERS[position % len(_CORPUS_MARKERS)]
                # The first corpus on top within each row, like the legend.
                offset = ((len(self.corpora) - 1) / 2 - position) * step
                auc, low, high = self.auc[:, position], self.ci_low[:, position], self.ci_high[:, position]
                finite = ~np.isnan(auc)
                n_answerable, n_unanswerable = self.counts[corpus]
                self.errorbars_[corpus] = ax.errorbar(
                    auc[finite],
                    rows[finite] + offset,
                    xerr=np.vstack([auc[finite] - low[finite], high[finite] - auc[finite]]),
                    fmt=marker,
                    color=colour,
                    markersize=5,
                    markeredgecolor="#000000",
                    markeredgewidth=0.5,
                    elinewidth=1.4,
                    capsize=2,
                    label=f"{corpus} ({n_answerable} / {n_unanswerable})",
                )
                self.missing_[corpus] = [
                    ax.text(0.505, row + offset, f"{corpus}: constant, no AUC", color=colour, fontsize=7, va="center")
                    for row in rows[~finite]
                ]
            if chance:
                self.chance_line_ = ax.axvline(0.5, color="#777777", linestyle="--", linewidth=1)
            lowest = np.nanmin(self.ci_low) if np.any(~np.isnan(self.ci_low)) else 0.5
            ax.set_xlim(min(0.49, lowest - 0.02), 1.01)
            ax.set_ylim(-0.6, len(self.signals) - 0.4)
            ax.set_yticks(rows, self.signals)
            ax.grid(False, axis="y")
            for boundary in rows[:-1] - 0.5:
                ax.axhline(boundary, color="#DDDDDD", linewidth=0.6, zorder=0)
            ax.set_xlabel("AUC with 95% bootstrap interval (0.5: chance)")
            ax.set_title(f"Answerable vs {self.comparison}", loc="left")
            if legend:
                ax.legend(
                    loc="upper left",
                    bbox_to_anchor=(1.01, 1.0),
                    title=f"corpus (answerable /\n{self.comparison})",
                    title_fontsize=8,
                    alignment="left",
                )
            self.ax_, self.figure_ = ax, ax.figure
        return self


@dataclass
class ChunkingSweepDisplay:
    """Retrieval and signal metrics per chunking variant, one series per corpus, one panel per metric.

    Create with :meth:`from_chunking_tables`; draw with :meth:`plot`.

    Attributes
    ----------
    corpora : list of str
        Corpus names, in the order of the tables given.
    variants : list of str
        Chunking variants along x, in the order of the first table (variants
        only in later tables follow).
    metrics : list of str
        One panel per metric.
    baseline : str
        The variant the paired differences are taken against.
    values, lows, highs : dict of str to ndarray of shape (len(variants), len(corpora))
        Metric value and its 95% bootstrap interval; element ``[i, j]`` is for
        ``variants[i]`` on ``corpora[j]``, NaN where a corpus lacks the variant.
    differs : dict of str to ndarray of bool, same shape
        True where the 95% interval of the paired difference against
        ``baseline`` excludes 0 (False for the baseline itself and for NaN).
    chunks : ndarray of shape (len(variants), len(corpora))
        Number of chunks (NaN where a corpus lacks the variant).
    """

    corpora: list
    variants: list
    metrics: list
    baseline: str
    values: dict
    lows: dict
    highs: dict
    differs: dict
    chunks: np.ndarray

    @classmethod
    def from_chunking_tables(
        cls,
        tables: dict,
        *,
        metrics=("recall@5", "mrr@10", "dense_top1_auc", "bm25_top1_raw_auc"),
        baseline: str = "headings-256",
    ) -> "ChunkingSweepDisplay":
        """Collect several ``chunking.csv`` tables.

        Parameters
        ----------
        tables : dict of str to DataFrame
            ``{corpus name: chunking table}``, one row per variant with the
            columns ``variant``, ``chunks`` and, per metric ``m``: ``m``,
            ``m_low``, ``m_high``, ``m_diff``, ``m_diff_low``, ``m_diff_high``.
        metrics : tuple of str, default=("recall@5", "mrr@10", "dense_top1_auc", "bm25_top1_raw_auc")
        baseline : str, default="headings-256"
            The variant marked in the plot; it must be in every table.

        Returns
        -------
        ChunkingSweepDisplay

        Examples
        --------
        >>> tables = {name: pd.read_csv(f"results/{name}/chunking.csv") for name in ("fastapi", "rust-book")}
        >>> ChunkingSweepDisplay.from_chunking_tables(tables).plot()  # doctest: +SKIP
        """
        owner = "ChunkingSweepDisplay.from_chunking_tables"
        metrics = [metrics] if isinstance(metrics, str) else list(metrics)
        if not metrics:
            raise ValueError(f"The 'metrics' parameter of {owner} must name at least one metric. Got [] instead.")
        suffixes = ("", "_low", "_high", "_diff", "_diff_low", "_diff_high")
        required = ["variant", "chunks", *[f"{metric}{suffix}" for metric in metrics for suffix in suffixes]]
        tables = _check_corpus_tables(tables, required, owner)
        rows = {}
        for corpus, table in tables.items():
            repeated = table["variant"][table["variant"].duplicated()].tolist()
            if repeated:
                raise ValueError(f"{owner}: the table of corpus {corpus!r} repeats variant(s) {repeated}")
            if baseline not in set(table["variant"]):
                raise ValueError(
                    f"The 'baseline' parameter of {owner} must be a variant of every table. Got {baseline!r}; "
                    f"corpus {corpus!r} has {table['variant'].tolist()}."
                )
            rows[corpus] = table.set_index("variant")
        variants = _ordered_union([kept.index for kept in rows.values()])

        def column(name):
            return np.array(
                [[rows[corpus][name].get(variant, np.nan) for corpus in rows] for variant in variants], dtype=float
            ).reshape(len(variants), len(rows))

        values = {metric: column(metric) for metric in metrics}
        lows = {metric: column(f"{metric}_low") for metric in metrics}
        highs = {metric: column(f"{metric}_high") for metric in metrics}
        differs = {
            metric: (column(f"{metric}_diff_low") > 0) | (column(f"{metric}_diff_high") < 0) for metric in metrics
        }
        return cls(list(rows), variants, metrics, baseline, values, lows, highs, differs, column("chunks"))

    def plot(self, axes=None, *, ncols: int | None = None) -> "ChunkingSweepDisplay":
        """Draw one panel per metric: value and 95% interval per variant, one series per corpus.

        A filled marker means the paired difference from ``baseline`` on that
        corpus has a 95% interval excluding 0; a hollow one means it does not
        (the baseline itself is always filled). The baseline column is shaded.

        Parameters
        ----------
        axes : array of matplotlib Axes, default=None
            At least ``len(metrics)`` axes. None: a new figure.
        ncols : int, default=None
            Panels per row for a new figure; None: 2 (a 2 x 2 grid for four metrics).
        """
        import matplotlib.pyplot as plt
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch

        with figure_style():
            if axes is None:
                ncols = ncols or min(2, len(self.metrics))
                nrows = -(-len(self.metrics) // ncols)
                _, axes = plt.subplots(
                    nrows,
                    ncols,
                    figsize=(3.4 * ncols + 0.4, 2.3 * nrows + 1.2),
                    layout="constrained",
                    sharex=True,
                    squeeze=False,
                )
            axes = np.ravel(axes)
            if axes.size < len(self.metrics):
                raise ValueError(
                    f"The 'axes' parameter of ChunkingSweepDisplay.plot must hold at least {len(self.metrics)} axes "
                    f"(one per metric). Got {axes.size} instead."
                )
            positions = np.arange(len(self.variants), dtype=float)
            base = self.variants.index(self.baseline)
            step = min(0.2, 0.6 / max(len(self.corpora), 1))
            colours = {corpus: _SIGNAL_COLOURS[j % len(_SIGNAL_COLOURS)] for j, corpus in enumerate(self.corpora)}
            markers = {corpus: _CORPUS_MARKERS[j % len(_CORPUS_MARKERS)] for j, corpus in enumerate(self.corpora)}
            self.errorbars_, self.markers_, self.baseline_bands_ = {}, {}, {}
            for ax, metric in zip(axes, self.metrics):
                self.baseline_bands_[metric] = ax.axvspan(
                    base - 0.45, base + 0.45, color="#000000", alpha=0.07, linewidth=0, zorder=0
                )
                for j, corpus in enumerate(self.corpora):
                    x = positions + (j - (len(self.corpora) - 1) / 2) * step
                    value, low, high = self.values[metric][:, j], self.lows[metric][:, j], self.highs[metric][:, j]
                    finite = ~np.isnan(value)
                    self.errorbars_[(metric, corpus)] = ax.errorbar(
                        x[finite],
                        value[finite],
                        yerr=np.vstack([value[finite] - low[finite], high[finite] - value[finite]]),
                        fmt="none",
                        ecolor=colours[corpus],
                        elinewidth=1.3,
                        capsize=2,
                    )
                    filled = self.differs[metric][finite, j] | (np.arange(len(self.variants))[finite] == base)
                    self.markers_[(metric, corpus)] = ax.scatter(
                        x[finite],
                        value[finite],
                        marker=markers[corpus],
                        s=26,
                        facecolors=[colours[corpus] if fill else "#FFFFFF" for fill in filled],
                        edgecolors=colours[corpus],
                        linewidths=1.2,
                        zorder=3,
                    )
                ax.set_title(metric, loc="left")
                ax.set_xlim(-0.6, len(self.variants) - 0.4)
                ax.grid(False, axis="x")
                ax.set_xticks(positions, self.variants, rotation=30, ha="right")
                ax.xaxis.get_major_ticks()[base].label1.set_fontweight("bold")
            for ax in axes[len(self.metrics) :]:
                ax.set_visible(False)
            corpus_handles = [
                Line2D([], [], marker=markers[corpus], color=colours[corpus], linestyle="none", label=corpus)
                for corpus in self.corpora
            ]
            key = {"marker": "o", "color": "#555555", "markeredgecolor": "#555555", "linestyle": "none"}
            key_handles = [
                Line2D([], [], markerfacecolor="#555555", label=f"differs from {self.baseline}", **key),
                Line2D([], [], markerfacecolor="#FFFFFF", label="no clear difference", **key),
                Patch(color="#000000", alpha=0.07, label=f"baseline: {self.baseline}"),
            ]
            figure = axes[0].figure
            self.legend_ = figure.legend(
                handles=corpus_handles,
                loc="outside upper left",
                ncols=len(corpus_handles),
                title="value with 95% bootstrap interval",
                alignment="left",
            )
            self.key_legend_ = figure.legend(
                handles=key_handles,
                loc="outside upper right",
                ncols=1,
                title="paired difference (95% interval excludes 0?)",
                alignment="left",
            )
            self.axes_, self.figure_ = axes, figure
        return self


# --------------------------------------------------------------------------- learned gates


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
        """From the ``coefficients`` summary of :func:`ragcal.learned_study.summarize_learned`.

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

    def plot(self, ax=None) -> "CoefficientDisplay":
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
        return self
