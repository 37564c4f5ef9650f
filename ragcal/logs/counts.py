"""A score log as mergeable counts, and the statistics computed from the counts alone.

Everything ragcal computes on a labeled score log for one signal depends only on
how many rows of each slice and label fall in each score bin: the AUC
(Mann–Whitney, ties counted half), a ``keep@p`` threshold, the share of each
slice a threshold answers with its exact interval. Counts merge by addition, so
any engine that can ``GROUP BY`` (pandas here, DuckDB in
:mod:`ragcal.logs.duckdb_counts`) produces the same small table, and this
module turns it into numbers with NumPy.

Bins are the distinct scores when there are at most ``max_distinct`` of them:
every statistic is then exactly the in-memory one. Otherwise they are a fixed
grid of ``bins`` equal cells over ``[low, high]``, each row counted at its
cell's lower edge: a threshold is then a cell edge, at most one cell width
(``(high - low) / bins``) below the in-memory threshold, and the AUC counts
pairs within one cell as ties. :attr:`Binning.exactness` says which in words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._params import check_float, check_int
from ..score_tables import answerable_sign
from .sources import label_values

__all__ = [
    "COUNT_COLUMNS", "Binning", "LogCounts", "choose_binning", "count_log", "grid_index", "place_counted_threshold"
]

#: The counts table: one row per (slice, label, bin) that holds rows; ``answerable`` is None for unlabeled logs.
COUNT_COLUMNS = ("slice", "answerable", "bin", "n")
#: Distinct scores up to which bins are exact.
MAX_DISTINCT = 200_000
#: Grid cells over the score range otherwise: a threshold moves by at most 1e-4 of the range.
DEFAULT_BINS = 10_000


@dataclass(frozen=True)
class Binning:
    """How scores were counted: ``"distinct"`` (exact) or ``"grid"`` (``bins`` cells over ``[low, high]``)."""

    kind: str
    low: float = math.nan
    high: float = math.nan
    bins: int = 0

    @property
    def width(self) -> float:
        """A grid cell's width (0 for distinct scores)."""
        return (self.high - self.low) / self.bins if self.kind == "grid" and self.bins else 0.0

    @property
    def exactness(self) -> str:
        if self.kind == "distinct":
            return "exact: one bin per distinct score, every statistic equals the in-memory one"
        return (
            f"binned: {self.bins:,} cells of width {self.width:.3g} over [{self.low:.6g}, {self.high:.6g}]; "
            f"thresholds are cell edges within {self.width:.3g} of the exact ones, on the side that keeps each "
            "rule's promise, and pairs within a cell count as ties in the AUC"
        )

    def edges(self, index) -> np.ndarray:
        """Lower edge of each grid cell ``index`` (computed the same way for every engine)."""
        index = np.asarray(index, dtype=np.float64)
        return self.low + index * self.width


def choose_binning(n_distinct: int, low: float, high: float, *, max_distinct=MAX_DISTINCT, bins=DEFAULT_BINS):
    """Distinct scores when there are at most ``max_distinct``, else a grid of ``bins`` cells over ``[low, high]``."""
    n_distinct = check_int(n_distinct, "n_distinct", "choose_binning", low=0)
    max_distinct = check_int(max_distinct, "max_distinct", "choose_binning", low=1)
    bins = check_int(bins, "bins", "choose_binning", low=1)
    if n_distinct <= max_distinct or not (high > low):
        return Binning("distinct")
    return Binning("grid", float(low), float(high), bins)


def grid_index(scores, binning: Binning) -> np.ndarray:
    """Each score's cell, ``floor((score - low) / width)``, the top edge in the last cell."""
    cells = np.floor((np.asarray(scores, dtype=np.float64) - binning.low) / binning.width)
    return np.clip(cells, 0, binning.bins - 1).astype(np.int64)


def place_counted_threshold(threshold: float, values, width: float = 0.0) -> float:
    """Place a threshold fitted from counts midway, as :func:`ragcal.calibration.rules.place_threshold` does.

    Works in the oriented scores (answer when ``score >= threshold``).

    Parameters
    ----------
    threshold : float
        A bin value (or, for ``false_answer_guarantee@``, just above one).
    values : array-like of float
        The oriented bin values holding calibration rows.
    width : float, default=0.0
        The grid cell width; 0 for distinct bins.

    Returns
    -------
    float
        Distinct bins: midway between the boundary bin value and the next one
        below, exactly the in-memory placement (edge cases as in
        :func:`ragcal.calibration.midway_threshold`). Grid cells (``[edge,
        edge + width)``): midway between the boundary cell's edge and the top
        of the next occupied cell below, so that no counted row changes side;
        when those cells touch there is no room, and the threshold stays on
        the edge. With no occupied cell below, half a cell below the boundary
        edge; above every cell, half a cell above ``threshold``. ``-inf``,
        ``+inf`` and NaN unchanged.
    """
    from ..calibration.rules import place_threshold

    threshold = float(threshold)
    values = np.asarray(values, dtype=float).reshape(-1)
    values = np.unique(values[np.isfinite(values)])
    if not width:
        return place_threshold(threshold, values)
    if not math.isfinite(threshold) or values.size == 0:
        return threshold
    answered = values[values >= threshold]
    if answered.size == 0:
        return threshold + width / 2
    edge = float(answered[0])
    below = values[values < edge]
    if below.size == 0:
        return edge - width / 2
    top_below = float(below[-1]) + width
    return (top_below + edge) / 2 if top_below < edge else edge


@dataclass(frozen=True)
class LogCounts:
    """The counts of one signal in one log.

    Attributes
    ----------
    signal : str
    frame : DataFrame
        :data:`COUNT_COLUMNS`; ``bin`` is the score (distinct) or the cell's lower edge (grid).
    binning : Binning
        Over the oriented score (``score`` or ``-score``, higher meaning answerable).
    n_rows : int
        Rows read, NaN scores included.
    n_nan : int
        Rows whose score is missing: counted nowhere else (a gate refuses them).
    higher_is_answerable : bool, default=True
        The orientation the bins were made in. With False a grid cell is
        ``(-(edge + width), -edge]`` in the signal's units, and ``bin`` holds
        ``-edge``: a threshold on a bin answers ``score <= bin`` for whole cells.
    """

    signal: str
    frame: pd.DataFrame
    binning: Binning
    n_rows: int
    n_nan: int
    higher_is_answerable: bool = True

    @property
    def sign(self) -> float:
        """1 when higher means answerable, else -1: ``sign * bin`` is the oriented score."""
        return answerable_sign(self.higher_is_answerable)

    def _labeled(self, value: bool) -> pd.DataFrame:
        labeled = self.frame[self.frame["answerable"].notna()]
        return labeled[labeled["answerable"].astype(bool) == value]

    def _by_bin(self, frame) -> pd.Series:
        """Counts per oriented bin (``sign * bin``), ascending."""
        return frame.assign(bin=self.sign * frame["bin"]).groupby("bin")["n"].sum().sort_index()

    def auc(self) -> float:
        """Mann–Whitney AUC of answerable against unanswerable rows, ties counted half; NaN with one class."""
        positive, negative = self._by_bin(self._labeled(True)), self._by_bin(self._labeled(False))
        n_positive, n_negative = positive.sum(), negative.sum()
        if n_positive == 0 or n_negative == 0:
            return math.nan
        bins = np.union1d(positive.index.to_numpy(float), negative.index.to_numpy(float))
        pos = positive.reindex(bins, fill_value=0).to_numpy(np.float64)
        neg = negative.reindex(bins, fill_value=0).to_numpy(np.float64)
        below = np.cumsum(neg) - neg
        return float(np.sum(pos * (below + 0.5 * neg)) / (n_positive * n_negative))

    def keep_threshold(self, keep: float) -> float:
        """``keep@p`` from the counts: midway below the highest bin that keeps at least ``ceil(p n)`` answerable rows.

        The boundary is the highest such bin; the threshold goes midway
        between it and the next labeled bin below (:func:`place_counted_threshold`),
        as :func:`ragcal.calibration.fit_threshold` does in memory.
        """
        keep = check_float(keep, "keep", "LogCounts.keep_threshold", low=0, high=1, high_open=False)
        positive = self._by_bin(self._labeled(True))
        total = int(positive.sum())
        if total == 0:
            raise ValueError(f"{self.signal}: keep@{keep:g} needs at least one answerable row with a score")
        needed = max(math.ceil(keep * total - 1e-12), 1)
        kept_from = positive[::-1].cumsum()[::-1]  # rows at or above each bin
        boundary = float(kept_from.index[kept_from.to_numpy() >= needed].max())
        labeled = self.frame[self.frame["answerable"].notna()]
        values = self.sign * labeled["bin"].to_numpy(float)
        return self.sign * place_counted_threshold(boundary, values, self.binning.width)

    def answered(self, threshold: float, *, confidence: float = 0.95) -> pd.DataFrame:
        """Per slice (and label), the rows at or above ``threshold``: ``k``, ``n``, share and exact interval."""
        from ..metrics.outcomes import clopper_pearson

        oriented = self.sign * self.frame["bin"].to_numpy(float)
        frame = self.frame.assign(k=np.where(oriented >= self.sign * threshold, self.frame["n"], 0))
        grouped = frame.groupby(["slice"], sort=True, dropna=False)[["k", "n"]].sum().reset_index()
        low, high = clopper_pearson(grouped["k"], grouped["n"], confidence=confidence)
        return grouped.assign(share=grouped["k"] / grouped["n"], low=low, high=high)


def canonical(frame: pd.DataFrame) -> pd.DataFrame:
    """The counts in one order for every engine: slice, label (None, False, True), bin; integer counts."""
    frame = frame.assign(
        bin=frame["bin"].astype(np.float64),
        n=frame["n"].astype(np.int64),
        answerable=frame["answerable"].astype(object).where(frame["answerable"].notna(), None),
    )
    label_order = frame["answerable"].map(lambda value: -1 if value is None else int(bool(value)))
    order = np.lexsort((frame["bin"].to_numpy(), label_order.to_numpy(), frame["slice"].astype(str).to_numpy()))
    return frame.iloc[order].reset_index(drop=True)[list(COUNT_COLUMNS)]


def count_log(table: pd.DataFrame, signal: str, *, max_distinct=MAX_DISTINCT, bins=DEFAULT_BINS,
              higher_is_answerable: bool = True) -> LogCounts:  # fmt: skip
    """The pandas engine: a score log already in memory (a score table or a live log) as counts of ``signal``.

    ``higher_is_answerable`` orients the grid (see :class:`LogCounts`); distinct bins do not depend on it.
    """
    if signal not in table.columns:
        raise ValueError(f"count_log: no column {signal!r}; the log has {', '.join(map(str, table.columns))}")
    scores = pd.to_numeric(table[signal], errors="coerce").to_numpy(np.float64)
    present = ~np.isnan(scores)
    kept = scores[present]
    sign = answerable_sign(higher_is_answerable)
    oriented = sign * kept
    binning = choose_binning(
        int(pd.unique(kept).size),
        float(oriented.min()) if kept.size else math.nan,
        float(oriented.max()) if kept.size else math.nan,
        max_distinct=max_distinct,
        bins=bins,
    )
    bin_value = kept if binning.kind == "distinct" else sign * binning.edges(grid_index(oriented, binning))
    slices = table["slice"].astype(str).to_numpy()[present] if "slice" in table.columns else np.full(kept.size, "all")
    if "answerable" in table.columns:
        labels = label_values(table["answerable"].to_numpy(object)[present])
    else:
        labels = np.full(kept.size, None, dtype=object)
    frame = pd.DataFrame({"slice": slices, "answerable": labels, "bin": bin_value})
    counted = frame.groupby(["slice", "answerable", "bin"], dropna=False, sort=False).size().rename("n").reset_index()
    return LogCounts(
        signal, canonical(counted), binning, int(scores.size), int((~present).sum()), bool(higher_is_answerable)
    )
