"""The decision every gate returns, the gate interface and the gate registry."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar, Mapping, NamedTuple

import numpy as np
import pandas as pd

from .._params import parameter_error
from ..retrieval.base import RetrievalResult

__all__ = ["ACTIONS", "TIERS", "Decision", "Gate", "GATE_TYPES", "gate_from_dict", "register_gate_type"]

#: What a gate can tell the generator to do.
ACTIONS = ("answer", "hedge", "refuse")
#: Confidence tier of each action (seed 003's tiers).
TIERS = {"answer": "confident", "hedge": "partial", "refuse": "refuse"}


def _float_or_nan(value) -> float:
    return float("nan") if value is None else float(value)


@dataclass(frozen=True)
class Decision:
    """What to do with one query.

    Attributes
    ----------
    action : {"answer", "hedge", "refuse"}
        ``"hedge"`` means: answer, but say that the passages may only partly
        cover the question.
    score : float
        The number the deciding gate compared with its bar (NaN when there was
        nothing to score, e.g. no hits).
    passages : tuple of (str, float)
        ``(chunk_id, score)`` of the passages to pass on to the generator, in
        the order to show them; empty on refusal. Only passages that clear the
        gate's bar are listed (a cut, not a fixed top-k).
    stage : str or None
        Name of the chain stage that decided; None for a single gate, or when a
        chain refused at every stage.
    reasons : tuple of str
        Short machine-readable reasons, one per check that was made.
    message : str or None
        Text for the user: a refusal that says what was searched, what was
        close and what to try next; a caveat when hedging; None when answering.
    """

    action: str
    score: float
    passages: tuple = ()
    stage: str | None = None
    reasons: tuple = ()
    message: str | None = None

    def __post_init__(self):
        if self.action not in ACTIONS:
            raise parameter_error("action", "Decision", f"one of {', '.join(map(repr, ACTIONS))}", self.action)
        passages = tuple((str(chunk_id), float(score)) for chunk_id, score in self.passages)
        if self.action == "refuse" and passages:
            raise ValueError("a refusal passes no passages on")
        object.__setattr__(self, "score", _float_or_nan(self.score))
        object.__setattr__(self, "passages", passages)
        object.__setattr__(self, "reasons", tuple(str(reason) for reason in self.reasons))

    @property
    def tier(self) -> str:
        """``"confident"``, ``"partial"`` or ``"refuse"``."""
        return TIERS[self.action]

    @property
    def answered(self) -> bool:
        """True for answer and hedge."""
        return self.action != "refuse"

    def to_dict(self) -> dict:
        """JSON-ready form (``score`` None when NaN), as ``ragcal ask --json`` prints it."""
        return {
            "action": self.action,
            "score": None if math.isnan(self.score) else self.score,
            "stage": self.stage,
            "tier": self.tier,
            "passages": [{"chunk_id": chunk_id, "score": score} for chunk_id, score in self.passages],
            "reasons": list(self.reasons),
            "message": self.message,
        }


#: ``type`` key in a gate's dict -> gate class; filled by :func:`register_gate_type`.
GATE_TYPES: dict[str, type] = {}


def register_gate_type(cls):
    """Class decorator: make ``cls`` loadable by :func:`gate_from_dict` under ``cls.type``."""
    GATE_TYPES[cls.type] = cls
    return cls


def gate_from_dict(data: Mapping, *, where: str = "gate") -> "Gate":
    """Rebuild any gate from its :meth:`Gate.to_dict` form; an unknown type lists the known ones.

    Every field is checked (presence, type, range, no unknown keys) and a
    problem names it, e.g. ``field 'gate.stages[1].gate.threshold'``.
    """
    from ._fields import GateFieldError

    if not isinstance(data, Mapping) or "type" not in data:
        raise GateFieldError(f"field {where!r}: a gate needs a 'type' key, one of {sorted(GATE_TYPES)}")
    kind = data["type"]
    if not isinstance(kind, str) or kind not in GATE_TYPES:
        raise GateFieldError(f"field {where + '.type'!r}: unknown gate type {kind!r}; known types are {sorted(GATE_TYPES)}")
    from_dict = GATE_TYPES[kind].from_dict
    import inspect

    # A gate type registered outside ragcal may take the dict alone.
    takes_where = "where" in inspect.signature(from_dict).parameters
    return from_dict(data, where=where) if takes_where else from_dict(data)


@dataclass(frozen=True)
class Gate(ABC):
    """Interface of every gate.

    A gate decides on one query's retrieval results (the same mapping
    ``{retriever name: RetrievalResult}`` that signals take) with
    :meth:`decide`, and on a whole table of per-query numbers at once with
    :meth:`decide_table`, which the held-out evaluation uses; the two agree
    on action, score and stage.

    ``refusals`` is an optional :class:`ragcal.retrieval.views.CorpusDescription` that
    words refusals and hedges with the corpus's page titles and terms; it is
    not part of the gate's saved form (bind it with :meth:`bind`). Results
    from :meth:`ragcal.retrieval.index.RetrievalIndex.retrieve` carry the
    description of the view that was searched, and messages always use that
    one: a gate bound to the full index that decides on a restricted view
    names only what that view holds (:func:`ragcal.retrieval.views.searched_corpus`).
    """

    type: ClassVar[str] = ""
    refusals: object = field(default=None, repr=False, compare=False, kw_only=True)

    @abstractmethod
    def decide(self, results: Mapping[str, RetrievalResult], *, query: str | None = None) -> Decision:
        """The decision for one query; ``query`` (its text) only improves the wording of messages."""

    @abstractmethod
    def decide_table(self, table: pd.DataFrame) -> pd.DataFrame:
        """``action``, ``score`` and ``stage`` for every row of a table of signals."""

    @property
    @abstractmethod
    def retrievers(self) -> tuple[str, ...]:
        """Retriever views that :meth:`decide` reads."""

    @property
    @abstractmethod
    def columns(self) -> tuple[str, ...]:
        """Columns of a score table that :meth:`decide_table` reads."""

    @abstractmethod
    def to_dict(self) -> dict:
        """JSON-ready form with a ``type`` key; :func:`gate_from_dict` reverses it."""

    @abstractmethod
    def passages_for(self, results: Mapping[str, RetrievalResult], *, stage: str | None = None) -> list:
        """The ``(chunk id, score)`` pairs :meth:`decide` passes on when it answers, without deciding again.

        With :meth:`decide_table`'s ``action`` and ``stage`` this tells what a
        row's answer is built from (see :func:`ragcal.gates.support.table_support`).
        ``stage`` names the stage that answered, for a chain.
        """

    def passage_key(self, *, stage: str | None = None):
        """A hashable key of everything :meth:`passages_for` reads, or None when the gate does not say.

        Two gates with one key pass on the same passages for any results, so
        what they pass on can be remembered across gates fitted again and
        again (:class:`ragcal.gates.support.SupportMemo`). None (this default)
        remembers nothing.
        """
        return None

    def bind(self, refusals) -> "Gate":
        """A copy that words its refusals with ``refusals`` (a CorpusDescription)."""
        from dataclasses import replace

        return replace(self, refusals=refusals)

    # ------------------------------------------------------------------ helpers shared by the gates

    def _check_results(self, results: Mapping[str, RetrievalResult]) -> None:
        missing = [name for name in self.retrievers if name not in results]
        if missing:
            raise KeyError(f"{type(self).__name__} needs retriever results {missing}; got {sorted(results)}")
        self._described(results)  # results of two corpus views (one restricted, one not) are refused here

    def _check_table(self, table: pd.DataFrame) -> None:
        missing = [column for column in self.columns if column not in table.columns]
        if missing:
            raise ValueError(
                f"{type(self).__name__} needs column(s) {', '.join(map(repr, missing))}; "
                f"the table has {', '.join(map(str, table.columns))}"
            )

    def _described(self, results):
        """The description of the view ``results`` came from (never a larger one): see :func:`searched_corpus`."""
        from ..retrieval.views import searched_corpus

        return searched_corpus(results, self.refusals)

    def _refuse(self, results, query, reasons, score, stage=None) -> Decision:
        from .refusal import refusal_message

        message = refusal_message(results, query=query, reasons=reasons, corpus=self.refusals)
        return Decision("refuse", score, (), stage, tuple(reasons), message)

    def _answer(self, action, results, query, passages, reasons, score, stage=None) -> Decision:
        from .refusal import hedge_message

        corpus = self._described(results)
        message = hedge_message(passages, query=query, corpus=corpus) if action == "hedge" else None
        return Decision(action, score, tuple(passages), stage, tuple(reasons), message)


class Decided(NamedTuple):
    """:meth:`Gate.decide_table`'s three columns as arrays, one entry per row of the table.

    The held-out studies decide thousands of calibration halves and read
    these arrays back; building a frame for each cost more than deciding
    (:func:`decided_arrays`).
    """

    action: np.ndarray  # object: "answer", "hedge" or "refuse"
    score: np.ndarray  # float
    stage: np.ndarray  # object: a chain stage's name, or None

    def frame(self) -> pd.DataFrame:
        """The :meth:`Gate.decide_table` frame of these columns."""
        # object dtype keeps None as None (pandas would otherwise infer strings and turn it into NaN)
        return pd.DataFrame(
            {
                "action": pd.Series(self.action, dtype=object),
                "score": self.score,
                "stage": pd.Series(self.stage, dtype=object),
            }
        )


def decided(action, score, stage=None) -> Decided:
    """A :class:`Decided` of ``action`` (any array of strings), ``score`` and ``stage`` (None for every row when
    None)."""
    action = np.array(action, dtype=object)
    stage = np.full(action.shape, None, dtype=object) if stage is None else np.array(stage, dtype=object)
    return Decided(action, np.array(score, dtype=float), stage)  # copies: never a view of the table's columns


def decide_table_from_arrays(self, table: pd.DataFrame) -> pd.DataFrame:
    """``action``, ``score`` and ``stage`` for every row of a table of signals: :meth:`decide_arrays` as a frame.

    A gate class whose ``decide_table`` is this function decides by arrays, and :func:`decided_arrays` asks it
    for them; a subclass that overrides ``decide_table`` is asked through it instead.
    """
    return self.decide_arrays(table).frame()


def decided_arrays(gate, table: pd.DataFrame) -> Decided:
    """``gate.decide_table(table)`` as a :class:`Decided`, without building the frame when the gate decides by
    arrays."""
    if getattr(type(gate), "decide_table", None) is decide_table_from_arrays:
        return gate.decide_arrays(table)
    return decisions_as_arrays(gate.decide_table(table))


def decisions_as_arrays(decisions) -> Decided:
    """A :meth:`Gate.decide_table` frame (or a :class:`Decided`, returned as it is) as a :class:`Decided`.

    A frame of decisions made elsewhere (a framework's answers, say) may have only ``action`` and ``stage``, which is
    all that counting outcomes and support reads: its scores are then NaN.
    """
    if isinstance(decisions, Decided):
        return decisions
    action = decisions["action"].to_numpy(dtype=object)
    score = decisions["score"].to_numpy(dtype=float) if "score" in decisions else np.full(len(action), np.nan)
    return Decided(action, score, decisions["stage"].to_numpy(dtype=object))


def actions_frame(action, score, stage=None) -> pd.DataFrame:
    """The return value of :meth:`Gate.decide_table`."""
    return decided(action, score, stage).frame()
