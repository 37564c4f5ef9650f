"""Seed 003's fallback chain: try one retrieval view after another, with confidence tiers."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd

from .base import Decision, Gate, actions_frame, gate_from_dict, register_gate_type

__all__ = ["Stage", "FallbackChain", "STAGE_TIERS"]

#: Tiers a stage can answer with: ``"partial"`` turns its answers into hedges.
STAGE_TIERS = ("confident", "partial")


@dataclass(frozen=True)
class Stage:
    """One step of a :class:`FallbackChain`.

    Parameters
    ----------
    name : str
        Reported as :attr:`Decision.stage`, e.g. ``"hybrid"``.
    gate : Gate
        Decides for this stage; the retriever view it reads (``"rrf"``,
        ``"bm25_stopwords"``, ``"dense"``, later ``"rerank"``) is the stage's view.
    tier : {"confident", "partial"}, default="confident"
        ``"partial"``: what this stage answers is hedged.
    """

    name: str
    gate: Gate
    tier: str = "confident"

    def __post_init__(self):
        if self.tier not in STAGE_TIERS:
            raise ValueError(f"The 'tier' parameter of Stage must be one of {STAGE_TIERS}. Got {self.tier!r} instead.")
        if not isinstance(self.gate, Gate):
            raise TypeError(f"Stage {self.name!r}: gate must be a Gate, got {type(self.gate).__name__}")

    def to_dict(self) -> dict:
        return {"name": self.name, "tier": self.tier, "gate": self.gate.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping, *, where: str = "stage") -> "Stage":
        from . import _fields as f

        f.fields_of(data, where, required=("name", "gate"), optional=("tier",))
        tier = f.text(data, "tier", where, default="confident")
        if tier not in STAGE_TIERS:
            raise f.GateFieldError(f"field {where + '.tier'!r}: expected one of {STAGE_TIERS}, got {tier!r}")
        return cls(f.text(data, "name", where), gate_from_dict(data["gate"], where=f"{where}.gate"), tier)


@register_gate_type
@dataclass(frozen=True)
class FallbackChain(Gate):
    """Run the stages in order and return the first that does not refuse.

    A stage's answer keeps its action unless the stage's tier is
    ``"partial"``, which makes it a hedge. When every stage refuses, the chain
    refuses with the reasons of all stages, ``stage=None`` and the score of
    the first stage.

    Parameters
    ----------
    stages : sequence of Stage
        At least one; names must be unique. Stages added later (a reranker,
        say) are ordinary stages whose gate reads another view.

    See Also
    --------
    ragcal.gates.fit_default_chain : hybrid, then keyword-only, then a broad hedged dense search.
    """

    type = "chain"

    stages: tuple

    def __post_init__(self):
        stages = tuple(self.stages)
        if not stages:
            raise ValueError("The 'stages' parameter of FallbackChain needs at least one Stage. Got none.")
        names = [stage.name for stage in stages]
        if len(set(names)) != len(names):
            raise ValueError(f"FallbackChain stage names must be unique. Got {names}.")
        object.__setattr__(self, "stages", stages)

    @property
    def retrievers(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(name for stage in self.stages for name in stage.gate.retrievers))

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(column for stage in self.stages for column in stage.gate.columns))

    def bind(self, refusals) -> "FallbackChain":
        from dataclasses import replace

        stages = tuple(replace(stage, gate=stage.gate.bind(refusals)) for stage in self.stages)
        return replace(self, stages=stages, refusals=refusals)

    def decide(self, results: Mapping, *, query: str | None = None) -> Decision:
        self._check_results(results)
        reasons, first_score = [], math.nan
        for position, stage in enumerate(self.stages):
            decision = stage.gate.decide(results, query=query)
            if position == 0:
                first_score = decision.score
            stage_reasons = [f"{stage.name}: {reason}" for reason in decision.reasons]
            if decision.answered:
                action = "hedge" if stage.tier == "partial" else decision.action
                return self._answer(
                    action, results, query, decision.passages, reasons + stage_reasons, decision.score, stage.name
                )
            reasons += stage_reasons
        return self._refuse(results, query, reasons, first_score)

    def passages_for(self, results: Mapping, *, stage: str | None = None) -> list:
        """The passages stage ``stage`` (the :attr:`Decision.stage` that answered) passes on."""
        for candidate in self.stages:
            if candidate.name == stage:
                return candidate.gate.passages_for(results)
        raise ValueError(f"FallbackChain has no stage {stage!r}; its stages are {[s.name for s in self.stages]}")

    def decide_table(self, table: pd.DataFrame) -> pd.DataFrame:
        self._check_table(table)
        n = len(table)
        action = np.full(n, "refuse", dtype=object)
        stage_names = np.full(n, None, dtype=object)
        score = np.full(n, np.nan)
        undecided = np.ones(n, dtype=bool)
        for position, stage in enumerate(self.stages):
            decided = stage.gate.decide_table(table)
            stage_action = decided["action"].to_numpy(dtype=object)
            if position == 0:
                score = decided["score"].to_numpy(dtype=float).copy()
            fires = undecided & (stage_action != "refuse")
            action[fires] = "hedge" if stage.tier == "partial" else stage_action[fires]
            stage_names[fires] = stage.name
            score[fires] = decided["score"].to_numpy(dtype=float)[fires]
            undecided &= ~fires
        return actions_frame(action, score, stage_names)

    def to_dict(self) -> dict:
        return {"type": self.type, "stages": [stage.to_dict() for stage in self.stages]}

    @classmethod
    def from_dict(cls, data: Mapping, *, where: str = "gate") -> "FallbackChain":
        from . import _fields as f

        f.fields_of(data, where, required=("type", "stages"))
        stages = data["stages"]
        if not isinstance(stages, list) or not stages:
            raise f.GateFieldError(f"field {where + '.stages'!r}: expected a non-empty list of stages, got {stages!r:.60}")
        return cls(tuple(Stage.from_dict(stage, where=f"{where}.stages[{n}]") for n, stage in enumerate(stages)))
