"""ROC curves of several signals with bootstrap bands, and AUCs of several corpora side by side."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..metrics import auc_interval, roc_band
from ..metrics.binary import is_binary_signal, roc_operating_point
from ..score_tables import check_score_table
from ._style import _CORPUS_MARKERS, _SIGNAL_COLOURS, _finish, _new_axes, figure_style

__all__ = ['RocDisplay', 'AucComparisonDisplay']


@dataclass
class RocDisplay:
    """ROC curves of several signals on shared axes, with bootstrap bands; binary signals as operating points.

    A binary signal (0/1, an LLM's verdict: :func:`ragcal.metrics.binary.is_binary_signal`)
    has one decision, so it is drawn as one marker at its (FPR, TPR), not as
    the straight lines through it that ``roc_curve`` returns; its AUC (the
    balanced accuracy) stays in the legend.

    Attributes
    ----------
    curves : dict of str to (fpr, tpr)
        From ``sklearn.metrics.roc_curve``, for the signals that are not binary.
    bands : dict of str to (fpr_grid, tpr_low, tpr_high)
        Pointwise 2.5 and 97.5 percentiles of the TPR at fixed FPRs over
        stratified bootstrap resamples.
    aucs : dict of str to (auc, low, high)
    comparison : str
        What the negatives are (``"all unanswerable"`` or a slice name).
    points : dict of str to (fpr, tpr)
        The operating point of each binary signal, "answer when it says
        answerable" (:func:`ragcal.metrics.binary.roc_operating_point`).
    """

    curves: dict
    bands: dict
    aucs: dict
    comparison: str
    points: dict = field(default_factory=dict)

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
        curves, bands, aucs, points = {}, {}, {}, {}
        rng = np.random.default_rng(random_state)
        for signal in signals:
            subset = table[~table[signal].isna()]
            labels = subset["answerable"].to_numpy(dtype=bool)
            scores = subset[signal].to_numpy(dtype=float) * (1 if directions.get(signal, True) else -1)
            interval = auc_interval(labels, scores, n_resamples=n_resamples, random_state=random_state, bootstrap_rows=None)
            aucs[signal] = (interval.auc, interval.low, interval.high)
            if np.isnan(aucs[signal][0]):
                continue
            if is_binary_signal(subset[signal]):
                points[signal] = roc_operating_point(
                    labels, subset[signal], higher_is_answerable=directions.get(signal, True)
                )
                continue
            fpr, tpr, _ = roc_curve(labels, scores)
            curves[signal] = (fpr, tpr)
            # One random stream across signals (each band draws from where the previous one stopped).
            bands[signal] = roc_band(labels, scores, n_resamples=n_band_resamples, grid=grid, random_state=rng)
        return cls(curves, bands, aucs, comparison, points)

    def plot(self, ax=None, *, bands=True, chance: bool = True, name=None, **kwargs) -> "RocDisplay":
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
        beside = len(self.curves) + len(self.points) > 10
        with figure_style():
            ax = _new_axes(ax, size=(8.6, 4.6) if beside else (3.8, 5.0))
            self.lines_, self.bands_, self.points_ = {}, {}, {}
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
            for position, (signal, (fpr, tpr)) in enumerate(self.points.items(), start=len(self.curves)):
                auc, low, high = self.aucs[signal]
                (self.points_[signal],) = ax.plot(
                    [fpr],
                    [tpr],
                    linestyle="none",
                    marker=("o", "s", "D", "^", "v")[position // len(_SIGNAL_COLOURS) % 5],
                    markersize=7,
                    markeredgecolor="#000000",
                    markeredgewidth=0.6,
                    color=_SIGNAL_COLOURS[position % len(_SIGNAL_COLOURS)],
                    label=f"{signal} (binary: FPR {fpr:.2f}, TPR {tpr:.2f}): {auc:.3f} [{low:.3f}, {high:.3f}]",
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
            drawn = {**self.lines_, **self.points_}
            ranked = sorted(drawn, key=lambda signal: -self.aucs[signal][0])
            handles = [drawn[signal] for signal in ranked] + ([self.chance_line_] if chance else [])
            ax.legend(
                handles=handles,
                loc="upper left",
                bbox_to_anchor=(1.04, 1.0) if beside else (0.0, -0.16),
                title="AUC with 95% bootstrap interval",
                title_fontsize=8,
                alignment="left",
            )
            self.ax_, self.figure_ = ax, ax.figure
        return _finish(self, drawn, name=name, kwargs=kwargs)


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

    def plot(
        self, ax=None, *, chance: bool = True, legend: bool = True, name=None, **kwargs
    ) -> "AucComparisonDisplay":
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
        return _finish(self, self.errorbars_, name=name, kwargs=kwargs)
