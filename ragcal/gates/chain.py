"""Seed 003's fallback chain: try one retrieval view after another, with confidence tiers.

:class:`FallbackChain` runs any :class:`Stage` list; :func:`default_chain` builds seed 003's stages (hybrid,
keyword, broad) from their bars and :func:`fit_default_chain` fits those bars on a calibration score table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd

from .._params import check_choice, parameter_error
from ..calibration import fit_threshold
from ..score_tables import check_score_table
from ..signals import SIGNALS
from .base import (
    Decided,
    Decision,
    Gate,
    decide_table_from_arrays,
    decided,
    decided_arrays,
    gate_from_dict,
    register_gate_type,
)
from .threshold import ThresholdGate, zero_means_no_match

__all__ = ["Stage", "FallbackChain", "STAGE_TIERS", "fit_default_chain", "default_chain", "DEFAULT_CHAIN_COLUMNS"]

#: Tiers a stage can answer with: ``"partial"`` turns its answers into hedges.
STAGE_TIERS = ("confident", "partial")
#: Score-table columns the default chain is fitted on and decides with.
DEFAULT_CHAIN_COLUMNS = ("dense_top1", "bm25_top1_stopwords")


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
        check_choice(self.tier, "tier", "Stage", STAGE_TIERS)
        if not isinstance(self.gate, Gate):
            raise parameter_error("gate", f"Stage {self.name!r}", "a Gate", self.gate, error=TypeError)

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
    ragcal.gates.chain.fit_default_chain : hybrid, then keyword-only, then a broad hedged dense search.
    """

    type = "chain"

    stages: tuple

    def __post_init__(self):
        stages = tuple(self.stages)
        if not stages:
            raise parameter_error("stages", "FallbackChain", "a sequence of at least one Stage", self.stages)
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

    def passage_key(self, *, stage: str | None = None):
        """The :meth:`Gate.passage_key` of stage ``stage``'s gate (None for a stage it does not have)."""
        for candidate in self.stages:
            if candidate.name == stage:
                return candidate.gate.passage_key()
        return None

    decide_table = decide_table_from_arrays

    def decide_arrays(self, table: pd.DataFrame) -> Decided:
        """:meth:`decide_table`'s columns as arrays (:class:`~ragcal.gates.base.Decided`)."""
        self._check_table(table)
        n = len(table)
        action = np.full(n, "refuse", dtype=object)
        stage_names = np.full(n, None, dtype=object)
        score = np.full(n, np.nan)
        undecided = np.ones(n, dtype=bool)
        for position, stage in enumerate(self.stages):
            stage_decided = decided_arrays(stage.gate, table)
            if position == 0:
                score = stage_decided.score.copy()
            fires = undecided & (stage_decided.action != "refuse")
            action[fires] = "hedge" if stage.tier == "partial" else stage_decided.action[fires]
            stage_names[fires] = stage.name
            score[fires] = stage_decided.score[fires]
            undecided &= ~fires
        return decided(action, score, stage_names)

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


def fit_default_chain(
    table: pd.DataFrame,
    *,
    rule: str = "keep@0.95",
    confident_rule: str = "false_answer_guarantee@0.1",
    keyword_rule: str = "false_answer_guarantee@0.1",
    delta: float = 0.1,
    max_passages: int = 10,
    broad_max_passages: int = 20,
    use_reranker: bool | None = None,
) -> FallbackChain:
    """Seed 003's chain, fitted: hybrid, then keyword-only BM25, then a broad hedged dense search, then refuse.

    Stages (their names are what :attr:`Decision.stage` reports):

    0. ``rerank`` (confident), only with a reranker: ``rerank_top1`` clears a
       bar fitted with ``confident_rule`` on the reranker's own scale; the
       passages are the re-scored candidates that clear the same bar.

    1. ``hybrid`` (confident): ``dense_top1`` clears a high bar fitted with
       ``confident_rule`` (by default: with 90% confidence, at most 10% of
       unanswerable questions clear it); passages in reciprocal-rank-fusion
       order, each clearing the same cosine bar.
    2. ``keyword`` (confident): BM25 without stop words clears a bar fitted
       with ``keyword_rule``: questions whose exact terms the corpus matches
       strongly, which dense retrieval can miss.
    3. ``broad`` (partial, so hedged): ``dense_top1`` clears the low bar of
       ``rule``, the same bar a single :class:`ThresholdGate` would use, with up
       to ``broad_max_passages`` passages.
    4. refuse, with a helpful message.

    ``use_reranker=None`` adds the ``rerank`` stage when the table has a
    ``rerank_top1`` column with values (the scores came from an index with a
    reranker); True requires it; False leaves it out.
    """
    missing = [column for column in DEFAULT_CHAIN_COLUMNS if column not in SIGNALS]
    if missing:  # pragma: no cover - the built-in signals are always registered
        raise ValueError(f"fit_default_chain needs the signals {missing}")
    table = check_score_table(table, list(DEFAULT_CHAIN_COLUMNS))
    answerable = table["answerable"]
    low = fit_threshold(rule, table["dense_top1"], answerable, delta=delta)
    high = max(fit_threshold(confident_rule, table["dense_top1"], answerable, delta=delta), low)
    keyword = fit_threshold(keyword_rule, table["bm25_top1_stopwords"], answerable, delta=delta)
    # BM25 gives 0 when nothing matched; a keyword stage must need at least one match.
    keyword = max(keyword, np.nextafter(0.0, 1.0)) if zero_means_no_match("bm25_top1_stopwords") else keyword
    rerank = None
    has_rerank = "rerank_top1" in table.columns and table["rerank_top1"].notna().any()
    if use_reranker and not has_rerank:
        raise ValueError("use_reranker=True but the score table has no rerank_top1 scores; score with a reranker")
    if has_rerank and use_reranker is not False:
        table = check_score_table(table, ["rerank_top1"])
        rerank = fit_threshold(confident_rule, table["rerank_top1"], answerable, delta=delta)
    return default_chain(
        high, keyword, low, rerank=rerank, max_passages=max_passages, broad_max_passages=broad_max_passages
    )


def default_chain(
    high: float,
    keyword: float,
    low: float,
    *,
    rerank: float | None = None,
    max_passages: int = 10,
    broad_max_passages: int = 20,
) -> FallbackChain:
    """The stages of :func:`fit_default_chain` with the bars given: ``hybrid`` at ``high``, ``keyword``, ``broad`` at ``low``.

    ``rerank`` (a bar on ``rerank_top1``) puts a ``rerank`` stage first. A bar
    of +inf turns its stage off.
    """
    stages = []
    if rerank is not None:
        stages.append(Stage("rerank", ThresholdGate("rerank_top1", rerank, max_passages=max_passages)))
    return FallbackChain(
        (
            *stages,
            Stage("hybrid", ThresholdGate("dense_top1", high, passages_from="rrf", max_passages=max_passages)),
            Stage("keyword", ThresholdGate("bm25_top1_stopwords", keyword, max_passages=max_passages)),
            Stage("broad", ThresholdGate("dense_top1", low, max_passages=broad_max_passages), tier="partial"),
        )
    )
