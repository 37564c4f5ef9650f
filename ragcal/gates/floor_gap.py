"""Seed 001's floor-and-gap check (``groundedEnough``), with its exact semantics."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd

from .._params import parameter_error
from ._numbers import to_json_number
from .base import Decided, Decision, Gate, decide_table_from_arrays, decided, register_gate_type
from .threshold import _check_max_passages, cut_passages

__all__ = ["FloorGapGate", "floor_gap_columns", "floor_gap_answers", "floor_gap_order"]


def floor_gap_columns(retriever: str) -> tuple[str, str]:
    """Score-table columns with the top and second score of ``retriever``.

    ``("dense_top1", "dense_top2")`` for dense (the registered signals), else
    ``("<retriever>_top1", "<retriever>_top2")`` as written by
    :func:`ragcal.gates.fit.retriever_features`. NaN means "no such hit".
    """
    return f"{retriever}_top1", f"{retriever}_top2"


@register_gate_type
@dataclass(frozen=True)
class FloorGapGate(Gate):
    """Answer when the best passage clears a floor and stands out, or has company above the floor.

    The cases, checked in this order (seed 001)::

        no hits                         -> refuse
        top < floor                     -> refuse
        a single hit                    -> answer
        top - second > min_gap          -> answer   (strictly greater)
        second >= floor                 -> answer
        otherwise                       -> refuse

    Parameters
    ----------
    floor : float
        Lowest acceptable top score.
    min_gap : float
        Margin by which the top score must beat the second when the second is
        below the floor.
    retriever : str, default="dense"
        Whose scores are checked.
    max_passages : int or None, default=10
        Cap on the passages passed on: those scoring at least ``floor``.

    Examples
    --------
    >>> from ragcal.retrieval import RetrievalResult
    >>> hits = RetrievalResult("dense", ("a.md#0", "b.md#0"), [0.62, 0.41])
    >>> FloorGapGate(0.5, 0.1).decide({"dense": hits}).reasons
    ('gap 0.210 > min_gap 0.100',)
    """

    type = "floor_gap"

    floor: float
    min_gap: float
    retriever: str = "dense"
    max_passages: int | None = 10

    def __post_init__(self):
        for name in ("floor", "min_gap"):
            value = float(getattr(self, name))
            if math.isnan(value):
                raise parameter_error(name, "FloorGapGate", "a number", value)
            object.__setattr__(self, name, value)
        _check_max_passages(self.max_passages, "FloorGapGate")

    @property
    def retrievers(self) -> tuple[str, ...]:
        return (self.retriever,)

    @property
    def columns(self) -> tuple[str, ...]:
        return floor_gap_columns(self.retriever)

    def decide(self, results: Mapping, *, query: str | None = None) -> Decision:
        self._check_results(results)
        hits = results[self.retriever]
        if hits.is_empty:
            return self._refuse(results, query, ["no hits"], math.nan)
        top = float(hits.scores[0])
        if top < self.floor:
            return self._refuse(results, query, [f"top score {top:.3f} < floor {self.floor:.3f}"], top)
        if len(hits) == 1:
            reason = f"single hit, top score {top:.3f} >= floor {self.floor:.3f}"
        else:
            second = float(hits.scores[1])
            gap = top - second
            if gap > self.min_gap:
                reason = f"gap {gap:.3f} > min_gap {self.min_gap:.3f}"
            elif second >= self.floor:
                reason = f"second score {second:.3f} >= floor {self.floor:.3f}"
            else:
                return self._refuse(
                    results,
                    query,
                    [
                        f"second score {second:.3f} < floor {self.floor:.3f} and gap {gap:.3f} <= min_gap {self.min_gap:.3f}"
                    ],
                    top,
                )
        return self._answer("answer", results, query, self.passages_for(results), [reason], top)

    def passages_for(self, results: Mapping, *, stage: str | None = None) -> list:
        """The ``(chunk id, score)`` pairs :meth:`decide` passes on when it answers: those clearing the floor."""
        return cut_passages(
            results, self.retriever, bar_retriever=self.retriever, bar=self.floor, max_passages=self.max_passages
        )

    def passage_key(self, *, stage: str | None = None):
        """Everything :meth:`passages_for` reads: the floor and the list cut (see :meth:`Gate.passage_key`)."""
        return (FloorGapGate, self.floor, self.retriever, self.max_passages)

    decide_table = decide_table_from_arrays

    def decide_arrays(self, table: pd.DataFrame) -> Decided:
        """:meth:`decide_table`'s columns as arrays (:class:`~ragcal.gates.base.Decided`)."""
        self._check_table(table)
        top_column, second_column = self.columns
        top = table[top_column].to_numpy(dtype=float)
        second = table[second_column].to_numpy(dtype=float)
        return decided(np.where(floor_gap_answers(top, second, self.floor, self.min_gap), "answer", "refuse"), top)

    def to_dict(self) -> dict:
        return {
            "type": self.type,
            "floor": to_json_number(self.floor),
            "min_gap": to_json_number(self.min_gap),
            "retriever": self.retriever,
            "max_passages": self.max_passages,
        }

    @classmethod
    def from_dict(cls, data: Mapping, *, where: str = "gate") -> "FloorGapGate":
        from . import _fields as f

        f.fields_of(data, where, required=("type", "floor", "min_gap"), optional=("retriever", "max_passages"))
        return cls(
            f.number(data, "floor", where),
            f.number(data, "min_gap", where),
            retriever=f.text(data, "retriever", where, default="dense"),
            max_passages=f.positive_int_or_none(data, "max_passages", where, default=10),
        )


def floor_gap_answers(top, second, floor, min_gap):
    """Vectorised :meth:`FloorGapGate.decide`: True where it answers.

    ``top`` and ``second`` are arrays (NaN: no such hit); ``floor`` and
    ``min_gap`` broadcast against them, so a grid of floors and gaps can be
    evaluated in one call.
    """
    top, second = np.asarray(top, dtype=float), np.asarray(second, dtype=float)
    with np.errstate(invalid="ignore"):
        above = top >= floor  # False for NaN: no hits
        single = np.isnan(second)
        return above & (single | (top - second > min_gap) | (second >= floor))


def floor_gap_order(top, second, min_gap):
    """The highest floor at which :class:`FloorGapGate` with this ``min_gap`` answers each question.

    With the gap fixed, lowering the floor only adds answers, so the gates of
    every floor are one threshold family on this score: the top score when the
    top stands out by more than ``min_gap`` (or is the only hit), else the
    second score. ``floor_gap_answers(top, second, f, min_gap)`` equals
    ``floor_gap_order(top, second, min_gap) >= f`` for every floor ``f``.
    NaN when there are no hits.
    """
    top, second = np.asarray(top, dtype=float), np.asarray(second, dtype=float)
    with np.errstate(invalid="ignore"):
        stands_out = np.isnan(second) | (top - second > min_gap)
    return np.where(stands_out, top, second)
