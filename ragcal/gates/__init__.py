"""Gates: decisions a RAG system can act on (answer, hedge or refuse, with passages and a helpful refusal).

::

    from ragcal.gates import fit_threshold_gate, save_gate, load_gate, load_gate_index

    gate = fit_threshold_gate(scores, "dense_top1", "keep@0.95")
    save_gate("gate.json", gate, rule="keep@0.95", provenance=meta)
    index = load_gate_index("gate.json")              # the index the gate was fitted on, rebuilt
    gate = load_gate("gate.json", index=index)        # refuses another model or chunking
    decision = gate.decide(results, query="How do I set a cookie?")

Gates: :class:`ThresholdGate` (any registered signal), :class:`FloorGapGate`
(seed 001), :class:`FallbackChain` of :class:`Stage` (seed 003),
:class:`LearnedGate` (a classifier over several signals, calibrated like one). Every gate
has ``decide(results)``, ``decide_table(table)`` (for evaluation),
``to_dict()`` and ``from_dict()``.
"""

from .ask import ask, ask_candidates
from .base import Decision, Gate
from .certify import (
    certify_chain,
    certify_floor_gap,  # noqa: F401  (deprecated name, kept importable)
    certify_floor_gap_gate,
    certify_learned_gate,
    certify_threshold_gate,
)
from .chain import FallbackChain, Stage
from .evaluate import gate_outcomes, heldout_gates, summarize_heldout_gates
from .files import GateFileError, GateWarning, load_gate, load_gate_index, read_gate_file, save_gate
from .fit import fit_floor_gap, fit_floor_gap_gate, fit_gate, fit_threshold_gate, floor_gap_sweep, gate_kinds  # noqa: F401
from .floor_gap import FloorGapGate
from .learned import DEFAULT_LEARNED_SIGNALS, LearnedGate, fit_learned_gate
from .support import support_levels, supported_answers, table_support
from .threshold import ThresholdGate

#: What a user of gates calls. Helpers shared inside the package (support levels of one passage bar, refusal
#: wording, the default chain's parts, the study's paired differences) are imported from their modules.
__all__ = [
    "Decision",
    "Gate",
    "ThresholdGate",
    "FloorGapGate",
    "Stage",
    "FallbackChain",
    "LearnedGate",
    "DEFAULT_LEARNED_SIGNALS",
    "fit_gate",
    "gate_kinds",
    "fit_threshold_gate",
    "fit_floor_gap_gate",
    "fit_learned_gate",
    "floor_gap_sweep",
    "save_gate",
    "load_gate",
    "load_gate_index",
    "read_gate_file",
    "GateFileError",
    "GateWarning",
    "ask",
    "ask_candidates",
    "gate_outcomes",
    "heldout_gates",
    "summarize_heldout_gates",
    "certify_threshold_gate",
    "certify_floor_gap_gate",
    "certify_learned_gate",
    "certify_chain",
    "support_levels",
    "table_support",
    "supported_answers",
]
