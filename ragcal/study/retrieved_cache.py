"""Retrieved lists saved in the cache, so that trying a new signal does not retrieve every question again.

:func:`ragcal.study.try_signal.try_signal` computes a new signal on every
question of every dataset. With the index saved (:mod:`ragcal.retrieval.store`)
and the queries' embeddings cached, retrieving them all again (BM25 over the
corpus, the diagnostics) is still most of a warm run; :func:`cached_retrieval`
saves the lists once and reads them back.

**The key** is a sha256 over everything the lists depend on: the index's
provenance (``config``: the pages' chunks and their digest, chunker and its
options, the model's fingerprint, the dense index kind, the access policy, the
ragcal version) and the embedder's cache key, the question texts in order, the
registered diagnostics (name and defining function: they fill each result's
``info``), the retrieval defaults and the source of the modules that retrieve
(``ragcal/retrieval/``). A change in any gives another key; a new signal changes
none of them.

**What is saved** per retriever: each question's chunk positions in the
index, scores, ``info`` values, BM25 tokens and the view key, as ``.npy``
arrays and JSON (nothing pickled), in a folder written whole and renamed into
place. A result read back equals the one retrieved: the same chunk ids,
scores, ``info``, tokens, positions, and the producing retriever's own
``chunk_ids`` as ``source_ids``, stamped with the index's description.
A corpus signal (:func:`ragcal.signals.register_corpus_signal`) runs at
retrieval time, so a caller retrieving for one passes ``refresh=True``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np

from .. import __version__
from .._io import atomic_write_text
from ..retrieval.base import RetrievalResult
from ..retrieval.diagnostics.registry import DIAGNOSTICS

__all__ = ["RETRIEVED_FORMAT", "retrieved_key", "save_retrieved", "load_retrieved", "cached_retrieval"]

#: Version of the saved layout; a change here makes every older entry unreachable.
RETRIEVED_FORMAT = 1
_FOLDER = "retrieved"
#: What :meth:`ragcal.retrieval.index.RetrievalIndex.retrieve` is called with (its defaults).
_RETRIEVE_OPTIONS = {"depth": 100, "rrf_k": 60, "rrf_top": 50, "diagnostics": True}
_RETRIEVAL_SOURCE = Path(__file__).resolve().parent.parent / "retrieval"


def _source_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(_RETRIEVAL_SOURCE.rglob("*.py")):
        digest.update(path.relative_to(_RETRIEVAL_SOURCE).as_posix().encode() + b"\x00" + path.read_bytes())
    return digest.hexdigest()


def retrieved_key(index, questions) -> str:
    """The sha256 (hex) naming the saved lists of ``questions`` (texts, in order) retrieved from ``index``."""
    facts = {
        "format": RETRIEVED_FORMAT,
        "ragcal_version": __version__,
        "config": index.config,
        "embedder": getattr(index.dense.embedder, "cache_key", None) or index.config.get("model_fingerprint"),
        "questions": hashlib.sha256("\x00".join(map(str, questions)).encode()).hexdigest(),
        "diagnostics": sorted((name, diagnostic.origin) for name, diagnostic in DIAGNOSTICS.items()),
        "retrieve": _RETRIEVE_OPTIONS,
        "retrieval_source": _source_digest(),
        "retrievers": list(index.retriever_names),
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()


def _sources(index) -> dict:
    """The retriever objects whose ``chunk_ids`` results index with ``positions``."""
    return {"dense": index.dense, **index.bm25}


def save_retrieved(folder, index, retrieved: dict) -> Path | None:
    """Write ``retrieved`` (``{retriever: [result per question]}``, from ``index``) into ``folder``, whole.

    Returns the folder, or None when the results hold something this layout
    cannot hold (a chunk the index does not have, results of one retriever
    from two views, a result whose ``source_ids`` is not its retriever's
    chunk list): nothing is written then.
    """
    folder = Path(folder)
    position_of = {chunk.chunk_id: position for position, chunk in enumerate(index.chunks)}
    sources = _sources(index)
    arrays, meta = {}, {"format": RETRIEVED_FORMAT, "retrievers": {}}
    for number, (name, results) in enumerate(retrieved.items()):
        views = {result.view for result in results}
        if len(views) > 1 or any(chunk not in position_of for result in results for chunk in result.chunk_ids):
            return None
        with_positions = [result.positions is not None for result in results]
        if any(with_positions) and (
            not all(with_positions)
            or name not in sources
            or any(result.source_ids is not sources[name].chunk_ids for result in results)
        ):
            return None
        keys = list(dict.fromkeys(key for result in results for key in result.info))
        prefix = f"r{number}_"
        arrays[prefix + "lengths"] = np.array([len(result) for result in results], dtype=np.int64)
        arrays[prefix + "chunks"] = np.array(
            [position_of[chunk] for result in results for chunk in result.chunk_ids], dtype=np.int64
        )
        arrays[prefix + "scores"] = np.concatenate([result.scores for result in results] or [np.empty(0)])
        if any(with_positions):
            arrays[prefix + "positions"] = np.concatenate([result.positions for result in results])
        for position, key in enumerate(keys):
            arrays[f"{prefix}info{position}"] = np.array([result.info.get(key, np.nan) for result in results])
            arrays[f"{prefix}has{position}"] = np.array([key in result.info for result in results])
        meta["retrievers"][name] = {
            "prefix": prefix,
            "view": views.pop() if views else None,
            "info": keys,
            "positions": any(with_positions),
            "tokens": None if results and results[0].tokens is None else [list(r.tokens or ()) for r in results],
        }
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".writing-", dir=folder.parent))
    try:
        for key, array in arrays.items():
            np.save(staging / f"{key}.npy", array, allow_pickle=False)
        atomic_write_text(staging / "retrieved.json", json.dumps(meta))
        try:
            staging.rename(folder)
        except OSError:  # another run saved the same lists first
            if not (folder / "retrieved.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def load_retrieved(folder, index, n_questions: int) -> dict | None:
    """The lists :func:`save_retrieved` wrote in ``folder``, as results of ``index``; None when absent or unreadable."""
    folder = Path(folder)
    try:
        meta = json.loads((folder / "retrieved.json").read_text(encoding="utf-8"))
        if meta.get("format") != RETRIEVED_FORMAT:
            return None
        chunk_ids = [chunk.chunk_id for chunk in index.chunks]
        sources = _sources(index)
        stamp = {"corpus": index.description}
        retrieved = {}
        for name, entry in meta["retrievers"].items():

            def read(key):
                return np.load(folder / f"{entry['prefix']}{key}.npy", allow_pickle=False)

            lengths = read("lengths")
            if lengths.size != n_questions:
                return None
            ends = np.cumsum(lengths)
            starts = ends - lengths
            chunks, scores = read("chunks"), read("scores")
            positions = read("positions") if entry["positions"] else None
            info = [(key, read(f"info{number}"), read(f"has{number}")) for number, key in enumerate(entry["info"])]
            tokens = entry["tokens"]
            results = []
            for question, (start, end) in enumerate(zip(starts.tolist(), ends.tolist())):
                result = RetrievalResult(
                    name,
                    tuple(chunk_ids[position] for position in chunks[start:end].tolist()),
                    scores[start:end],
                    info={key: values[question] for key, values, has in info if has[question]},
                    view=entry["view"],
                    positions=None if positions is None else positions[start:end],
                    source_ids=None if positions is None else sources[name].chunk_ids,
                    tokens=None if tokens is None else tokens[question],
                )
                results.append(result._with_info(None, **stamp))
            retrieved[name] = results
        return retrieved
    except (OSError, ValueError, KeyError, IndexError, TypeError):  # a damaged entry: retrieve again
        return None


def cached_retrieval(index, questions, retrieve, *, cache_dir, refresh: bool = False) -> tuple[dict, bool]:
    """``(retrieved, from_cache)``: the saved lists of ``questions`` on ``index``, else ``retrieve()``'s, then saved.

    Parameters
    ----------
    index : RetrievalIndex
    questions : sequence of str
        The question texts, in the order of the lists.
    retrieve : callable
        ``retrieve() -> {retriever: [result per question]}``, called when
        nothing is saved under the key (or ``refresh``); what it returns
        must come from ``index`` (:meth:`~ragcal.retrieval.index.RetrievalIndex.retrieve`).
    cache_dir : str or Path or None
        The cache folder; None retrieves and saves nothing.
    refresh : bool, default=False
        Retrieve even when saved lists exist, and save the new ones.
    """
    if cache_dir is None:
        return retrieve(), False
    questions = list(questions)
    folder = Path(cache_dir) / _FOLDER / retrieved_key(index, questions)
    if not refresh:
        loaded = load_retrieved(folder, index, len(questions))
        if loaded is not None:
            return loaded, True
    retrieved = retrieve()
    if refresh and folder.exists():
        shutil.rmtree(folder, ignore_errors=True)
    save_retrieved(folder, index, retrieved)
    return retrieved, False
