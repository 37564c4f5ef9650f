"""Calibrated gates as JSON files that remember which score scale they belong to.

A threshold belongs to one engine's score scale: the embedding model, the
chunking and the corpus. A gate file carries the gate, the rule and numbers it
was fitted with, and the provenance of the score table it was fitted on
(``scores.meta.json``). :func:`load_gate` refuses to put it in front of an
index with another model or another chunking: a threshold on another model's
scale is wrong, not approximate.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from .._io import atomic_write_text
from ..calibration.midway import THRESHOLD_PLACEMENT
from .base import Gate, gate_from_dict

__all__ = [
    "GATE_FORMAT",
    "MAX_GATE_FILE_BYTES",
    "PROVENANCE_KEYS",
    "CHUNKING_KEYS",
    "GateFileError",
    "GateWarning",
    "save_gate",
    "read_gate_file",
    "load_gate",
    "check_provenance",
    "index_options",
    "gate_corpus",
    "load_gate_index",
]

GATE_FORMAT = "ragcal-gate/1"
#: Larger files are refused unread: a gate file holds a few numbers (a learned gate, a few KB).
MAX_GATE_FILE_BYTES = 1 << 20
#: What a gate file keeps of the score table's provenance.
PROVENANCE_KEYS = (
    "model",
    "model_fingerprint",
    "chunker",
    "max_tokens",
    "window",
    "expand_includes",
    "n_chunks",
    "chunks_sha256",
    "corpus",
    "excluded",
    "queries",
    "reranker",
    "reranker_fingerprint",
    "rerank_depth",
    "judge",
    "judge_fingerprint",
    "judge_depth",
    "access_map",
    "access_map_sha256",
    "default_access",
    "allowed_levels",
    "dense_index",
    # a score table scored through a framework's store (ragcal.integrations): which store, which score
    "score_scale",
    "store",
    "framework",
    "store_depth",
    "store_contents",
    # a score table of a system's own candidates (`ragcal score --candidates`): `ragcal ask --candidates` rebuilds
    # the views the gate reads over new candidates, fused as they were
    "scoring",
    "rrf_k",
    "rrf_top",
)
#: Provenance that must match the index exactly (anything else changes the score scale).
CHUNKING_KEYS = ("chunker", "max_tokens", "window", "expand_includes")
#: The dense index kind must match too: approximate search lowers top-1 scores (docs/approximate_search.md).
DENSE_INDEX_KEY = "dense_index"


class GateFileError(ValueError):
    """A gate file cannot be read, or cannot be used with this index."""


class GateWarning(UserWarning):
    """A gate is usable but something about its provenance deserves a look (e.g. the corpus changed)."""


def save_gate(path, gate: Gate, *, rule=None, fitted=None, provenance=None, threshold_placement="auto") -> Path:
    """Write ``gate`` with its rule, fitted numbers, how its thresholds were placed and provenance as JSON (atomically).

    Parameters
    ----------
    path : str or Path
    gate : Gate
    rule : str or dict, default=None
        How it was fitted, e.g. ``"keep@0.95"``.
    fitted : dict, default=None
        Numbers from the fit (calibration sizes, in-sample outcome, ...).
    provenance : dict, default=None
        The score table's ``.meta.json``; only :data:`PROVENANCE_KEYS` are kept.
    threshold_placement : str or None, default="auto"
        Written as the file's ``"threshold_placement"``: how the thresholds
        sit relative to the calibration scores. ``"auto"`` is
        :data:`ragcal.calibration.THRESHOLD_PLACEMENT` (midway between the
        boundary calibration score and the next one, as every ragcal fit
        places them) when ``rule`` is given, and None (a gate set by hand)
        otherwise. Files written before this field existed load as None.
    """
    if threshold_placement == "auto":
        threshold_placement = THRESHOLD_PLACEMENT if rule is not None else None
    if threshold_placement is not None and not isinstance(threshold_placement, str):
        raise ValueError(
            "The 'threshold_placement' parameter of save_gate must be a str, None or 'auto'. "
            f"Got {threshold_placement!r} instead."
        )
    provenance = {key: provenance[key] for key in PROVENANCE_KEYS if provenance and key in provenance}
    document = {
        "format": GATE_FORMAT,
        "gate": gate.to_dict(),
        "rule": rule,
        "threshold_placement": threshold_placement,
        "fitted": fitted or {},
        "provenance": provenance,
    }
    return atomic_write_text(path, json.dumps(document, indent=2) + "\n")


def read_gate_file(path) -> dict:
    """The whole gate file, checked; ``document["gate"]`` is already a :class:`Gate`.

    ``document["threshold_placement"]`` is None for files written before
    that field existed (their thresholds may sit on a calibration score).
    """
    path = Path(path)
    if not path.is_file():
        raise GateFileError(f"{path}: gate file not found")
    size = path.stat().st_size
    if size > MAX_GATE_FILE_BYTES:
        raise GateFileError(
            f"{path}: {size / 2**20:.1f} MiB is no gate file (they hold a few numbers; at most "
            f"{MAX_GATE_FILE_BYTES // 2**20} MiB is read)"
        )
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as error:
        raise GateFileError(f"{path}: not a JSON gate file ({str(error)[:200]})") from None
    if not isinstance(document, dict) or document.get("format") != GATE_FORMAT:
        found = document.get("format") if isinstance(document, dict) else type(document).__name__
        raise GateFileError(f"{path}: expected a {GATE_FORMAT!r} file, found format {found!r:.80}")
    try:
        document["gate"] = gate_from_dict(document.get("gate"))
    except (KeyError, TypeError, ValueError, RecursionError) as error:
        raise GateFileError(f"{path}: invalid gate: {str(error)[:300]}") from None
    document.setdefault("threshold_placement", None)
    if document["threshold_placement"] is not None and not isinstance(document["threshold_placement"], str):
        raise GateFileError(
            f"{path}: field 'threshold_placement': expected a string or null, "
            f"got {type(document['threshold_placement']).__name__}"
        )
    for key in ("provenance", "fitted"):
        document.setdefault(key, {})
        if not isinstance(document[key], dict):
            raise GateFileError(f"{path}: field {key!r}: expected an object, got {type(document[key]).__name__}")
    return document


def check_provenance(provenance: dict, config: dict, *, source="gate file", retrievers=()) -> None:
    """Raise :class:`GateFileError` unless the gate was fitted on this model and chunking.

    ``config`` is an index's :attr:`ragcal.retrieval.index.RetrievalIndex.config`. A
    gate that reads the ``"rerank"`` view (in ``retrievers``) also needs the
    same reranker, and one that reads the ``"judge"`` view the same judge
    (fingerprint) reading as many passages. A different corpus digest (the
    docs changed) or other access levels are only a :class:`GateWarning`.
    """
    fitted_on = provenance.get("model_fingerprint")
    if not fitted_on:
        raise GateFileError(
            f"{source}: the gate records no model fingerprint, so nothing says which score scale its thresholds "
            "belong to; fit it with `ragcal fit-gate` from a score table that has its .meta.json beside it"
        )
    if provenance.get("score_scale") != config.get("score_scale"):
        raise GateFileError(
            f"{source}: fitted on the scores of {provenance.get('score_scale') or 'ragcal own index'}, but these "
            f"come from {config.get('score_scale') or 'ragcal own index'}; a threshold on another score scale is "
            "wrong, not approximate: put the gate in front of the store it was fitted on (ragcal.integrations), "
            "or score a labeled set here and fit again"
        )
    if fitted_on != config.get("model_fingerprint"):
        raise GateFileError(
            f"{source}: fitted on model {fitted_on} but the index uses {config.get('model_fingerprint')}; "
            "a threshold on another model's scale is wrong, not approximate: score and fit again with this model"
        )
    for key in CHUNKING_KEYS:
        if key in provenance and provenance[key] != config.get(key):
            raise GateFileError(
                f"{source}: fitted with {key}={provenance[key]!r} but the index has {key}={config.get(key)!r}; "
                "chunking changes the score scale: build the index with the gate's chunking, or fit again"
            )
    if DENSE_INDEX_KEY in provenance and provenance[DENSE_INDEX_KEY] != config.get(DENSE_INDEX_KEY, "flat"):
        raise GateFileError(
            f"{source}: fitted on {provenance[DENSE_INDEX_KEY]!r} dense scores but the index uses "
            f"{config.get(DENSE_INDEX_KEY, 'flat')!r}; approximate search changes the top-1 scores: build the index "
            "with the gate's dense_index, or fit again (docs/approximate_search.md)"
        )
    if "rerank" in retrievers and provenance.get("reranker_fingerprint") != config.get("reranker_fingerprint"):
        raise GateFileError(
            f"{source}: the gate reads reranker scores fitted with reranker "
            f"{provenance.get('reranker_fingerprint') or '(none recorded)'} but the index uses "
            f"{config.get('reranker_fingerprint') or 'no reranker'}; a threshold on another reranker's scale is wrong: "
            "pass the gate's --reranker, or fit again"
        )
    if "judge" in retrievers:
        _check_judge(provenance, config, source)
    fitted_levels, levels = provenance.get("allowed_levels"), config.get("allowed_levels")
    if fitted_levels != levels:
        warnings.warn(
            f"{source}: fitted on what callers at access level(s) {', '.join(fitted_levels or ['(all)'])} see, "
            f"used for level(s) {', '.join(levels or ['(all)'])}; BM25 statistics and the pages searched differ, so "
            "re-check the threshold on a labeled set at these levels",
            GateWarning,
            stacklevel=3,
        )
    digest = provenance.get("chunks_sha256")
    if digest and digest != config.get("chunks_sha256"):
        warnings.warn(
            f"{source}: the corpus changed since the gate was fitted ({provenance.get('n_chunks')} chunks then, "
            f"{config.get('n_chunks')} now); the threshold may have drifted: re-check it on a labeled set",
            GateWarning,
            stacklevel=3,
        )


def _check_judge(provenance: dict, config: dict, source) -> None:
    """A gate on judge signals needs the judge it was fitted with, reading as many passages."""
    if provenance.get("judge_fingerprint") != config.get("judge_fingerprint"):
        raise GateFileError(
            f"{source}: the gate reads judge scores fitted with judge "
            f"{provenance.get('judge_fingerprint') or '(none recorded)'} but the index uses "
            f"{config.get('judge_fingerprint') or 'no judge'}; a threshold on another judge's scale is wrong: "
            "pass the gate's --judge, or fit again"
        )
    fitted_depth, depth = provenance.get("judge_depth"), config.get("judge_depth")
    if fitted_depth is not None and fitted_depth != depth:
        raise GateFileError(
            f"{source}: the gate's judge signals were fitted over the top {fitted_depth} passages but the index's "
            f"judge reads {depth}; pass the gate's --judge-depth {fitted_depth}, or fit again"
        )


def index_options(provenance: dict) -> dict:
    """The index settings a gate's provenance records: model, chunking, excluded pages, reranker, judge, faiss kind.

    Flat, as :func:`ragcal.scoring.index_arguments` reads them (``model``,
    ``chunker``, ``max_tokens``, ``window``, ``expand_includes``, ``exclude``,
    ``reranker`` and ``rerank_depth``, ``judge`` and ``judge_depth``,
    ``dense_index``); only those recorded are present.
    """
    options = {key: provenance[key] for key in CHUNKING_KEYS if key in provenance}
    if provenance.get("model"):
        options["model"] = provenance["model"]
    if provenance.get("excluded") is not None:
        options["exclude"] = tuple(provenance["excluded"])
    if provenance.get("reranker"):
        options["reranker"] = provenance["reranker"]
        options["rerank_depth"] = int(provenance.get("rerank_depth") or 50)
    if provenance.get("judge"):
        options["judge"] = provenance["judge"]
        options["judge_depth"] = int(provenance.get("judge_depth") or 10)
    from ..retrieval.ann import DENSE_INDEXES

    # A faiss kind is rebuilt; another engine's (e.g. "pgvector-hnsw") is not, and check_provenance then says so.
    if provenance.get(DENSE_INDEX_KEY) in DENSE_INDEXES:
        options["dense_index"] = provenance[DENSE_INDEX_KEY]
    return options


def load_gate(path, *, index=None) -> Gate:
    """Read a gate file; with ``index``, check its provenance and bind refusals to that corpus.

    Parameters
    ----------
    path : str or Path
    index : RetrievalIndex, default=None
        The index the gate will decide on. Its model fingerprint and chunking
        must match the gate's provenance, and it must offer every retriever
        view the gate reads.

    Raises
    ------
    GateFileError
        Missing or malformed file, another model or chunking, a missing view.
    """
    document = read_gate_file(path)
    gate = document["gate"]
    if index is None:
        return gate
    check_provenance(document["provenance"], index.config, source=str(path), retrievers=gate.retrievers)
    missing = [name for name in gate.retrievers if name not in index.retriever_names]
    if missing:
        raise GateFileError(
            f"{path}: the gate reads retriever view(s) {missing}, which this index does not offer "
            f"({', '.join(index.retriever_names)})"
        )
    return gate.bind(index.description)


def gate_corpus(provenance: dict) -> Path:
    """The corpus a gate was fitted on, from its provenance; a relative path is also tried from the project root.

    Raises
    ------
    ValueError
        The provenance records no corpus, or its corpus is not a folder here.
    """
    from ..datasets import DATA_DIR

    recorded = provenance.get("corpus")
    if not recorded:
        raise ValueError("the gate does not record its corpus; pass its folder (corpus=, or --corpus DIR)")
    for candidate in (Path(recorded), DATA_DIR.parent / recorded):
        if candidate.is_dir():
            return candidate
    raise ValueError(f"the gate's corpus {recorded!r} is not a folder here; pass its folder (corpus=, or --corpus DIR)")


def load_gate_index(path, *, corpus=None, allowed_levels=None, cache_dir=None, use_cache: bool = True):
    """Rebuild the index a gate file was fitted on, to decide with it (:func:`load_gate` with ``index=``).

    The gate's provenance gives the corpus, model, chunking, excluded pages,
    faiss kind, reranker, judge and access policy
    (:func:`index_options`); the index is loaded from the cache when it was
    saved there.

    ::

        index = load_gate_index("gate.json")
        gate = load_gate("gate.json", index=index)
        decisions = ask(gate, index, ["How do I set a cookie?"])

    Parameters
    ----------
    path : str or Path
        A gate file (``ragcal fit-gate``, :func:`save_gate`).
    corpus : str or Path, default=None
        The corpus folder; the one the gate records when None.
    allowed_levels : str or sequence of str, default=None
        Access levels of the caller; the levels the gate was fitted at (else
        the default level) when None.
    cache_dir : str or Path, default=None
    use_cache : bool, default=True

    Returns
    -------
    RetrievalIndex
    """
    from ..access import DEFAULT_ACCESS, AccessPolicy
    from ..datasets import default_exclude
    from ..retrieval.index import build_index
    from ..scoring import index_arguments

    provenance = read_gate_file(path)["provenance"]
    corpus = Path(corpus) if corpus is not None else gate_corpus(provenance)
    settings = index_options(provenance)
    settings.setdefault("exclude", default_exclude(corpus))  # a gate from before provenance recorded them
    default = provenance.get("default_access") or DEFAULT_ACCESS
    access = AccessPolicy.from_options(access_map=provenance.get("access_map") or None, default=default)
    if allowed_levels is None:
        allowed_levels = provenance.get("allowed_levels") or default
    arguments = index_arguments(
        settings, cache_dir=cache_dir, use_cache=use_cache, access=access, allowed_levels=allowed_levels
    )
    return build_index(corpus, **arguments)
