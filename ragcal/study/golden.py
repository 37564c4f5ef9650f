"""A golden set: pinned scores that fail CI when the score scale moves.

Thresholds are specific to one model, one chunking and one corpus. The
golden file pins ``dense_top1`` for a few fixed questions and the threshold
that a rule fits on the whole labeled set. Any change that moves them beyond
the tolerance, such as another model, another chunk limit or a tokenizer
change, fails ``tests/test_golden.py``, and whoever made the change must
re-baseline on purpose::

    ragcal golden --write tests/golden/fastapi_minilm.json
    ragcal golden --corpus rust-book --write tests/golden/rust-book_minilm.json
    ragcal golden --model wordllama:l2_supercat_256 --write tests/golden/fastapi_wordllama.json

(then review the diff of that file, re-run ``make reproduce`` and commit both).
Each bundled corpus and each model has its own golden file, because each has its own scale.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .._io import atomic_write_text
from ..calibration import fit_threshold

__all__ = [
    "GOLDEN_DIR",
    "GOLDEN_FILE",
    "GOLDEN_IDS",
    "model_name_label",
    "slug",
    "model_slug",
    "golden_file",
    "golden_snapshot",
    "candidate_golden_snapshot",
    "compare_golden",
    "write_golden",
]

GOLDEN_DIR = Path(__file__).resolve().parents[2] / "tests" / "golden"
#: Fixed questions per bundled corpus: answerable ones across the corpus, near-domain and unrelated.
GOLDEN_IDS = {
    "fastapi": ("a01", "a04", "a05", "a27", "a53", "a73", "a87", "n01", "n02", "n37", "n44", "u01", "u03", "u21"),
    # u01 is a word-overlap trap ("rust" on a cast-iron pan).
    "rust-book": (
        "a001",
        "a020",
        "a047",
        "a052",
        "a091",
        "a105",
        "a128",
        "a149",
        "n01",
        "n08",
        "n20",
        "n41",
        "u01",
        "u20",
    ),
}


def model_name_label(model: str) -> str:
    """A model's short name: ``MiniLM``, ``WordLlama`` (``WordLlama-64`` truncated), else the name itself."""
    from ..embedding import DEFAULT_MODEL
    from ..embedding.word_llama import WORDLLAMA_PREFIX

    if model == DEFAULT_MODEL:
        return "MiniLM"
    if model.startswith(WORDLLAMA_PREFIX):
        parts = model[len(WORDLLAMA_PREFIX) :].split(":")
        return "WordLlama" + (f"-{parts[1]}" if len(parts) > 1 else "")
    return model


def slug(text: str) -> str:
    """``text`` for a file name: lower case, every run of other characters than letters and digits a ``-``."""
    return "".join(character if character.isalnum() else "-" for character in text).strip("-").lower()


def model_slug(model: str) -> str:
    """The model part of a golden file name: ``minilm``, ``wordllama`` (``wordllama-64`` truncated), else the name."""
    return slug(model_name_label(model))


def golden_file(corpus: str = "fastapi", model: str | None = None) -> Path:
    """``tests/golden/<corpus>_<model slug>.json``: ``<corpus>_minilm.json`` for the default model."""
    from ..embedding import DEFAULT_MODEL

    return GOLDEN_DIR / f"{corpus}_{model_slug(model or DEFAULT_MODEL)}.json"


GOLDEN_FILE = golden_file("fastapi")


def golden_snapshot(
    index, queries, *, ids=GOLDEN_IDS["fastapi"], rule: str = "keep@1.0", tolerance: float = 0.005, band: float = 0.02
) -> dict:
    """Pinned values for the golden file, computed with ``index`` on the labeled ``queries``."""
    top1 = {
        query_id: result.score_at(1)
        for query_id, result in zip(queries["id"], index.dense.search(list(queries["query"]), k=1))
    }
    return _snapshot(top1, queries, index.config, ids=ids, rule=rule, tolerance=tolerance, band=band)


def candidate_golden_snapshot(
    chunks,
    chunking: dict,
    embedder,
    queries,
    run,
    *,
    ids=GOLDEN_IDS["rust-book"],
    rule: str = "keep@1.0",
    lowest: int = 5,
    depth: int = 10,
    tolerance: float = 0.005,
    band: float = 0.02,
) -> dict:
    """:func:`golden_snapshot` searching, for each question it needs, only the chunks a committed run ranked first.

    The golden questions ``ids``, the ``lowest`` answerable questions of
    ``run`` with the lowest top-1 scores and the ``lowest`` questions just
    below those (a ``keep@1.0`` threshold sits midway between the two) are
    searched over the union of their ``depth`` best chunks in ``run``,
    embedded by ``embedder``, not over the whole corpus. While the model and
    the chunks are those the run was made with, every such question finds
    the same top-1 chunk and score as over the whole corpus: a moved score
    scale moves these scores too, which is what a golden set is for. A chunk
    of ``run`` that ``chunks`` no longer holds is an error. The threshold is
    fitted on these questions only, which gives the whole set's as long as
    the questions on both sides of it are among them.

    Parameters
    ----------
    chunks : sequence of Chunk
        The whole corpus's chunks (:func:`ragcal.retrieval.index.chunk_corpus`).
    chunking : dict
        Their chunker's options; ``n_chunks`` is taken from ``chunks``.
    run : DataFrame
        A dense TREC run of ``queries`` (:func:`ragcal.runs.read_trec_run`).
    """
    from ..retrieval.dense import DenseRetriever

    queries = queries.reset_index(drop=True)
    run = run.assign(rank=run["rank"].astype(int), score=run["score"].astype(float))
    first = run[run["rank"] == 1].set_index("qid")["score"]
    answerable = first.reindex(queries.loc[queries["answerable"].astype(bool), "id"]).dropna()
    # keep@1.0 sits midway between the lowest answerable score and the next one below, of any question.
    below = first[first < answerable.min()] if len(answerable) else first.iloc[:0]
    needed = set(ids) | set(answerable.nsmallest(lowest).index) | set(below.nlargest(lowest).index)
    missing = sorted(needed - set(first.index))
    if missing:
        raise ValueError(f"candidate_golden_snapshot: the run has no results for {missing}")
    wanted = set(run.loc[run["qid"].isin(needed) & (run["rank"] <= depth), "docid"])
    by_id = {chunk.chunk_id: chunk for chunk in chunks}
    gone = sorted(wanted - set(by_id))
    if gone:
        raise ValueError(f"candidate_golden_snapshot: chunks of the run are not in the corpus: {gone[:5]}")
    retriever = DenseRetriever.from_chunks([by_id[chunk_id] for chunk_id in sorted(wanted)], embedder)
    asked = queries[queries["id"].isin(needed)].reset_index(drop=True)
    top1 = {
        query_id: result.score_at(1)
        for query_id, result in zip(asked["id"], retriever.search(list(asked["query"]), k=1))
    }
    config = {"model_fingerprint": embedder.fingerprint, **chunking, "n_chunks": len(chunks)}
    return _snapshot(top1, asked, config, ids=ids, rule=rule, tolerance=tolerance, band=band)


def _snapshot(top1: dict, queries, config: dict, *, ids, rule: str, tolerance: float, band: float) -> dict:
    missing = [query_id for query_id in ids if query_id not in top1]
    if missing:
        raise ValueError(f"golden ids not in the query file: {missing}")
    threshold = fit_threshold(rule, np.array([top1[query_id] for query_id in queries["id"]]), queries["answerable"])
    return {
        "model_fingerprint": config["model_fingerprint"],
        "chunking": {
            key: config[key] for key in ("chunker", "max_tokens", "expand_includes", "n_chunks") if key in config
        },
        "tolerance": tolerance,
        "dense_top1": {query_id: round(top1[query_id], 6) for query_id in ids},
        "threshold": {
            "rule": rule,
            "value": round(threshold, 6),
            "band": [round(threshold - band, 4), round(threshold + band, 4)],
        },
    }


def compare_golden(current: dict, pinned: dict) -> list[str]:
    """Differences that break the pinned scale; empty when everything holds."""
    problems = []
    tolerance = pinned["tolerance"]
    for query_id, expected in pinned["dense_top1"].items():
        actual = current["dense_top1"].get(query_id)
        if actual is None or abs(actual - expected) > tolerance:
            problems.append(f"dense_top1 of {query_id}: {actual} vs pinned {expected} (tolerance {tolerance})")
    low, high = pinned["threshold"]["band"]
    value = current["threshold"]["value"]
    if not low <= value <= high:
        problems.append(f"{pinned['threshold']['rule']} threshold {value} outside the pinned band [{low}, {high}]")
    return problems


def write_golden(path, snapshot: dict) -> Path:
    return atomic_write_text(path, json.dumps(snapshot, indent=2) + "\n")
