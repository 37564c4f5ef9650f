"""Gates: decisions a RAG system can act on (answer, hedge or refuse, with passages and a helpful refusal).

::

    from ragcal.gates import fit_threshold_gate, save_gate, load_gate

    gate = fit_threshold_gate(scores, "dense_top1", "keep@0.95")
    save_gate("gate.json", gate, rule="keep@0.95", provenance=meta)
    gate = load_gate("gate.json", index=index)        # refuses another model or chunking
    decision = gate.decide(results, query="How do I set a cookie?")

Gates: :class:`ThresholdGate` (any registered signal), :class:`FloorGapGate`
(seed 001), :class:`FallbackChain` of :class:`Stage` (seed 003),
:class:`LearnedGate` (a classifier over several signals, calibrated like one). Every gate
has ``decide(results)``, ``decide_table(table)`` (for evaluation),
``to_dict()`` and ``from_dict()``.
"""

from .ask import ask
from .base import ACTIONS, TIERS, Decision, Gate, gate_from_dict
from .certify import certify_chain, certify_floor_gap, certify_learned_gate, certify_threshold_gate
from .chain import FallbackChain, Stage, default_chain, fit_default_chain
from .evaluate import (
    answered_shares,
    gate_outcomes,
    heldout_gates,
    paired_differences,
    passage_metrics,
    summarize_heldout_gates,
)
from .files import GateFileError, GateWarning, load_gate, read_gate_file, save_gate
from .fit import (
    fit_floor_gap,
    fit_gate,
    fit_threshold_gate,
    floor_gap_sweep,
    gate_columns,
    gate_kinds,
    retriever_features,
)
from .floor_gap import FloorGapGate
from .learned import DEFAULT_LEARNED_SIGNALS, LearnedGate, fit_learned_gate
from .learned_score import LinearScore, fit_learned_score
from .refusal import CorpusDescription, hedge_message, refusal_message
from .support import (
    bar_support,
    cut_support,
    gold_pages,
    signal_support,
    support_inputs,
    support_levels,
    supported_answers,
    table_support,
)
from .threshold import ThresholdGate

__all__ = [
    "certify_threshold_gate",
    "certify_floor_gap",
    "certify_learned_gate",
    "certify_chain",
    "gold_pages",
    "signal_support",
    "support_levels",
    "support_inputs",
    "supported_answers",
    "table_support",
    "cut_support",
    "bar_support",
    "ACTIONS",
    "TIERS",
    "Decision",
    "Gate",
    "gate_from_dict",
    "ThresholdGate",
    "FloorGapGate",
    "LearnedGate",
    "LinearScore",
    "DEFAULT_LEARNED_SIGNALS",
    "fit_learned_gate",
    "fit_learned_score",
    "Stage",
    "FallbackChain",
    "CorpusDescription",
    "refusal_message",
    "hedge_message",
    "save_gate",
    "load_gate",
    "read_gate_file",
    "GateFileError",
    "GateWarning",
    "retriever_features",
    "fit_threshold_gate",
    "floor_gap_sweep",
    "fit_floor_gap",
    "fit_default_chain",
    "default_chain",
    "fit_gate",
    "gate_kinds",
    "gate_columns",
    "gate_outcomes",
    "answered_shares",
    "heldout_gates",
    "summarize_heldout_gates",
    "paired_differences",
    "passage_metrics",
    "ask",
]
