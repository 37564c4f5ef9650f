"""The chunking sweep of several corpora side by side, with paired intervals against the default."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._style import _CORPUS_MARKERS, _SIGNAL_COLOURS, _finish, figure_style
from .roc import _check_corpus_tables, _ordered_union

__all__ = ['ChunkingSweepDisplay']


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

    def plot(
        self, ax=None, *, ncols: int | None = None, name=None, **kwargs
    ) -> "ChunkingSweepDisplay":
        """Draw one panel per metric: value and 95% interval per variant, one series per corpus.

        A filled marker means the paired difference from ``baseline`` on that
        corpus has a 95% interval excluding 0; a hollow one means it does not
        (the baseline itself is always filled). The baseline column is shaded.

        Parameters
        ----------
        ax : array of matplotlib Axes, default=None
            At least ``len(metrics)`` axes. None: a new figure.
        ncols : int, default=None
            Panels per row for a new figure; None: 2 (a 2 x 2 grid for four metrics).
        name : str, default=None
            Title of the figure.
        **kwargs
            matplotlib properties set on every marker series.
        """
        import matplotlib.pyplot as plt
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch

        axes = ax
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
                    f"The 'ax' parameter of ChunkingSweepDisplay.plot must hold at least {len(self.metrics)} axes "
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
        return _finish(self, self.markers_, name=name, kwargs=kwargs)
