"""One signal against a calibrated threshold, with an optional hedge band."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd

from ..signals import get_signal
from ._numbers import to_json_number
from .base import Decided, Decision, Gate, decide_table_from_arrays, decided, register_gate_type

__all__ = ["ThresholdGate", "cut_passages", "zero_means_no_match"]


def zero_means_no_match(signal: str) -> bool:
    """True for a BM25 top score, which is 0 exactly when the retriever matched nothing."""
    entry = get_signal(signal)
    return entry.passage_scale and entry.retrievers[0].startswith("bm25")


def _check_max_passages(value, owner: str):
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(
            f"The 'max_passages' parameter of {owner} must be a positive int or None. Got {value!r} instead."
        )


def cut_passages(results, view: str, *, bar_retriever: str | None, bar: float | None, max_passages: int | None):
    """Passages of ``view`` (in its order) whose score in ``bar_retriever`` is at least ``bar``.

    Seed 000's "pass on only what clears the bar": the cut follows the scores,
    not a fixed k; ``max_passages`` only caps it. The scores returned are the
    ones that cleared the bar. With no bar, only the top passage of ``view``
    is passed on.
    """
    listed = results[view]
    if listed.is_empty:
        return []
    if bar is None or bar_retriever is None:
        return [(listed.chunk_ids[0], float(listed.scores[0]))]
    if bar_retriever == view:
        scores = dict(zip(listed.chunk_ids, listed.scores))
    else:
        scores = dict(zip(results[bar_retriever].chunk_ids, results[bar_retriever].scores))
    passages = [
        (chunk_id, float(scores[chunk_id])) for chunk_id in listed.chunk_ids if scores.get(chunk_id, -math.inf) >= bar
    ]
    return passages[:max_passages] if max_passages is not None else passages


@register_gate_type
@dataclass(frozen=True)
class ThresholdGate(Gate):
    """Answer when a registered signal clears a calibrated threshold.

    Parameters
    ----------
    signal : str
        A registered signal (:data:`ragcal.signals.SIGNALS`).
    threshold : float
        Answer when ``score >= threshold`` (``<=`` when ``higher_is_answerable``
        is False), e.g. from :func:`ragcal.calibration.fit_threshold`.
    higher_is_answerable : bool, default=True
    hedge_below : float, default=None
        A second, stricter threshold: scores that clear ``threshold`` but not
        ``hedge_below`` are answered with a hedge. For the usual orientation it
        must be at least ``threshold``.
    passages_from : str, default=None
        Retriever whose list is passed on; the signal's own retriever when None.
        With ``"rrf"`` and ``dense_top1`` the passages come in fused order but
        each must clear the cosine bar.
    passage_floor : float, default=None
        Bar that a single passage must clear to be passed on. When None, the
        threshold itself for signals on a passage's scale (``dense_top1``,
        ``bm25_top1_*``, ``rrf_top1``; see :class:`ragcal.signals.Signal`), and
        only the top passage for other signals.
    max_passages : int or None, default=10
        Cap on the passages passed on.

    Examples
    --------
    >>> gate = ThresholdGate("dense_top1", 0.43, hedge_below=0.5)
    >>> gate.to_dict()["threshold"]
    0.43
    """

    type = "threshold"

    signal: str
    threshold: float
    higher_is_answerable: bool = True
    hedge_below: float | None = None
    passages_from: str | None = None
    passage_floor: float | None = None
    max_passages: int | None = 10

    def __post_init__(self):
        get_signal(self.signal)  # unknown names list the registered ones
        threshold = float(self.threshold)
        if math.isnan(threshold):
            raise ValueError("The 'threshold' parameter of ThresholdGate must be a number. Got nan instead.")
        object.__setattr__(self, "threshold", threshold)
        if self.hedge_below is not None:
            hedge = float(self.hedge_below)
            stricter = hedge >= threshold if self.higher_is_answerable else hedge <= threshold
            if not stricter:
                side = "at least" if self.higher_is_answerable else "at most"
                raise ValueError(
                    f"The 'hedge_below' parameter of ThresholdGate must be {side} the threshold {threshold}. "
                    f"Got {hedge} instead."
                )
            object.__setattr__(self, "hedge_below", hedge)
        _check_max_passages(self.max_passages, "ThresholdGate")

    @property
    def _signal(self):
        return get_signal(self.signal)

    @property
    def _view(self) -> str:
        return self.passages_from or self._signal.retrievers[0]

    @property
    def retrievers(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self._signal.retrievers, self._view)))

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.signal,)

    def _clears(self, score, bar):
        return score >= bar if self.higher_is_answerable else score <= bar

    def _passage_bar(self):
        signal = self._signal
        if self.passage_floor is not None:
            return signal.retrievers[0], self.passage_floor
        if signal.passage_scale and self.higher_is_answerable:
            return signal.retrievers[0], self.threshold
        return None, None

    def passages_for(self, results: Mapping, *, stage: str | None = None) -> list:
        """The ``(chunk id, score)`` pairs :meth:`decide` passes on when it answers (empty: nothing to pass on)."""
        bar_retriever, bar = self._passage_bar()
        passages = cut_passages(
            results, self._view, bar_retriever=bar_retriever, bar=bar, max_passages=self.max_passages
        )
        if not passages:  # the fused view may miss the bar retriever's best chunk; pass that one on
            passages = cut_passages(results, self._signal.retrievers[0], bar_retriever=None, bar=None, max_passages=1)
        return passages

    def decide(self, results: Mapping, *, query: str | None = None) -> Decision:
        self._check_results(results)
        score = self._signal(results)
        relation = ">=" if self.higher_is_answerable else "<="
        if math.isnan(score):
            return self._refuse(results, query, [f"{self.signal} is undefined (nothing retrieved)"], score)
        if not self._clears(score, self.threshold):
            return self._refuse(
                results, query, [f"{self.signal} {score:.3f} fails {relation} {self.threshold:.3f}"], score
            )
        reasons = [f"{self.signal} {score:.3f} {relation} {self.threshold:.3f}"]
        action = "answer"
        if self.hedge_below is not None and not self._clears(score, self.hedge_below):
            action = "hedge"
            reasons.append(f"{self.signal} {score:.3f} inside the hedge band (fails {relation} {self.hedge_below:.3f})")
        passages = self.passages_for(results)
        if not passages:  # never answer with nothing to answer from
            return self._refuse(results, query, reasons + ["no passage to pass on"], score)
        return self._answer(action, results, query, passages, reasons, score)

    decide_table = decide_table_from_arrays

    def decide_arrays(self, table: pd.DataFrame) -> Decided:
        """:meth:`decide_table`'s columns as arrays (:class:`~ragcal.gates.base.Decided`)."""
        self._check_table(table)
        scores = table[self.signal].to_numpy(dtype=float)
        with np.errstate(invalid="ignore"):
            answered = ~np.isnan(scores) & self._clears(scores, self.threshold)
            if zero_means_no_match(self.signal):
                answered &= scores != 0  # nothing matched: nothing to pass on, as decide() refuses
            hedged = answered & (~self._clears(scores, self.hedge_below) if self.hedge_below is not None else False)
        action = np.where(answered, np.where(hedged, "hedge", "answer"), "refuse")
        return decided(action, scores)

    def passage_key(self, *, stage: str | None = None):
        """Everything :meth:`passages_for` reads: the gate without its hedge band (see :meth:`Gate.passage_key`)."""
        return (ThresholdGate, self.signal, self.threshold, self.higher_is_answerable, self.passages_from,
                self.passage_floor, self.max_passages)

    def answers_at(self, table: pd.DataFrame, thresholds) -> np.ndarray:
        """Whether the gate at each of ``thresholds`` answers each row: :meth:`decide_table` without the frames.

        Returns
        -------
        ndarray of bool, shape (len(thresholds), len(table))
            Row i: ``replace(self, threshold=thresholds[i]).decide_table(table)["action"] != "refuse"``
            (the hedge band only turns answers into hedges, so it does not enter).
        """
        self._check_table(table)
        scores = table[self.signal].to_numpy(dtype=float)
        bars = np.asarray(thresholds, dtype=float).reshape(-1, 1)
        with np.errstate(invalid="ignore"):
            answered = ~np.isnan(scores)[None, :] & self._clears(scores[None, :], bars)
            if zero_means_no_match(self.signal):
                answered &= (scores != 0)[None, :]  # nothing matched: nothing to pass on, as decide() refuses
        return answered

    def to_dict(self) -> dict:
        return {
            "type": self.type,
            "signal": self.signal,
            "threshold": to_json_number(self.threshold),
            "higher_is_answerable": self.higher_is_answerable,
            "hedge_below": to_json_number(self.hedge_below),
            "passages_from": self.passages_from,
            "passage_floor": to_json_number(self.passage_floor),
            "max_passages": self.max_passages,
        }

    @classmethod
    def from_dict(cls, data: Mapping, *, where: str = "gate") -> "ThresholdGate":
        from . import _fields as f

        f.fields_of(data, where, required=("type", "signal", "threshold"), optional=_OPTIONAL)
        return cls(
            f.text(data, "signal", where),
            f.number(data, "threshold", where, infinite=True),
            higher_is_answerable=f.boolean(data, "higher_is_answerable", where, default=True),
            hedge_below=f.number(data, "hedge_below", where, default=None, infinite=True),
            passages_from=f.text(data, "passages_from", where, default=None),
            passage_floor=f.number(data, "passage_floor", where, default=None),
            max_passages=f.positive_int_or_none(data, "max_passages", where, default=10),
        )


_OPTIONAL = ("higher_is_answerable", "hedge_below", "passages_from", "passage_floor", "max_passages")
