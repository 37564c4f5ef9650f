"""A built index saved in the cache, so that a later start loads it instead of rebuilding it.

:func:`ragcal.retrieval.index.build_index` saves what it built (chunks and
their access levels, the faiss index, each BM25 variant's sparse matrix and
vocabulary, the provenance) in one folder of the cache, and a later build with
the same key loads that folder. Loading skips chunking, the embedding cache
(one SQLite lookup per chunk) and every index build: at 200,000 chunks that is
the difference between minutes (an HNSW graph) and a second or two.

**The key** is a sha256 over everything the index depends on:

- the corpus: the path and sha256 of every page :func:`ragcal.corpus.load_corpus`
  would read (listed and hashed again at every start, so an edited, added or
  removed page gives another key);
- the chunker and its options, the excluded pages and include expansion;
- the embedding model's :attr:`~ragcal.embedding.Embedder.cache_key`
  (fingerprint and encoding scheme);
- the dense index kind and its build parameters (``ef_search`` and ``nprobe``
  are read at query time and are not part of it);
- the access policy (the access map's sha256 and the default level);
- :data:`INDEX_FORMAT` and the source of the modules that shape chunks, tokens
  and indexes (a new ragcal that chunks differently never reads an old entry).

Files that pages *include* (FastAPI's ``docs_src``, the Rust book's listings)
are not known before the pages are read, so every entry lists each include
target its pages looked up, with the file it resolved to and its sha256, and
:func:`load_index` checks them all: a changed, created or deleted included file
makes the entry stale, and the index is rebuilt.

**Integrity.** Each file's size and sha256 are in the entry's
``manifest.json`` and are checked before it is used; a missing, truncated or
altered file (or an unreadable manifest) is reported with an
:class:`IndexCacheWarning` and the index is rebuilt and saved again. An entry
is written into a temporary folder and renamed into place whole, so a killed
run never leaves half an entry under its key, and two runs that build the same
index at once both succeed (the second rename finds the first entry and drops
its own). When an entry is saved, older entries of the same corpus folder and
options (another version of its pages) are removed.

**Memory mapping.** The faiss index is read with ``IO_FLAG_MMAP_IFC`` (its
vectors stay in the page cache, shared between processes) and the BM25
matrices with ``numpy.load(mmap_mode="r")``.

Nothing is pickled: chunks are a Parquet table (front matter as JSON), arrays
are ``.npy`` files read with ``allow_pickle=False``, and the rest is JSON.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np

from .._io import atomic_write_text, sha256_file
from ..extras import import_extra
from ..embedding.cache import CacheWarning

__all__ = [
    "INDEX_FORMAT",
    "IndexCacheWarning",
    "corpus_digest",
    "index_key",
    "load_index",
    "load_view",
    "save_index",
    "save_view",
]

#: Version of the saved layout; a change here makes every older entry unreachable.
INDEX_FORMAT = 3  # 3: each BM25 scorer's raw term frequencies (for clarity, ragcal.signals.qpp)
_MANIFEST = "manifest.json"
_FOLDER = "indexes"
#: Modules whose code decides what a saved index holds (pages, chunks, tokens, BM25 weights, access levels).
_SHAPING_MODULES = ("corpus", "chunking", "access", "retrieval/bm25", "retrieval/bm25_sparse", "retrieval/ann")


class IndexCacheWarning(CacheWarning):
    """A saved index was unusable (corrupt, truncated, unreadable) and has been rebuilt."""


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _code_digest() -> str:
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for module in _SHAPING_MODULES:
        digest.update(module.encode())
        digest.update((package / f"{module}.py").read_bytes())
    return digest.hexdigest()


def corpus_digest(corpus_dir, *, exclude=()) -> str:
    """sha256 over the relative path and sha256 of every page :func:`~ragcal.corpus.load_corpus` would read."""
    from ..corpus import corpus_pages

    prefix = len(str(Path(corpus_dir))) + 1
    digest = hashlib.sha256()
    for path in corpus_pages(corpus_dir, exclude=exclude):
        name = str(path)[prefix:].replace(os.sep, "/")  # the relative path, without pathlib's cost per page
        with open(path, "rb") as handle:
            page = hashlib.sha256(handle.read()).digest()
        digest.update(name.encode("utf-8") + b"\x00" + page)
    return digest.hexdigest()


def index_key(corpus_dir, *, options: dict, embedder_key: str, dense_build: dict, access: dict) -> tuple[str, str]:
    """``(slot, key)`` of a saved index.

    ``slot`` names the corpus folder and options (everything but the pages'
    content); ``key`` adds the pages' digest and the code that shapes an
    index. Entries of one slot replace each other.
    """
    slot_parts = {
        "format": INDEX_FORMAT,
        "corpus": str(Path(corpus_dir).resolve()),
        "options": options,
        "embedder": embedder_key,
        "dense": dense_build,
        "access": access,
    }
    slot = _sha256_text(json.dumps(slot_parts, sort_keys=True, default=str))
    pages = corpus_digest(corpus_dir, exclude=options.get("exclude", ()))
    key = _sha256_text(json.dumps({"slot": slot, "pages": pages, "code": _code_digest()}, sort_keys=True))
    return slot, key


def entry_dir(cache_dir, key: str) -> Path:
    return Path(cache_dir) / _FOLDER / key[:32]


# --------------------------------------------------------------------------- includes


def _include_state(candidate: str) -> list:
    resolved = Path(candidate).resolve()
    if resolved.is_file():
        return [str(resolved), sha256_file(resolved)]
    return [str(resolved), None if not resolved.exists() else "not a regular file"]


def include_states(documents) -> dict:
    """``{include target looked up: [the file it resolves to, its sha256 or None]}`` over every document."""
    candidates = sorted({candidate for document in documents for candidate in document.consulted})
    return {candidate: _include_state(candidate) for candidate in candidates}


def _changed_include(states: dict) -> str | None:
    for candidate, recorded in states.items():
        if _include_state(candidate) != recorded:
            return candidate
    return None


# --------------------------------------------------------------------------- chunks


def _json_default(value):
    if isinstance(value, datetime.datetime):
        return {"__datetime__": value.isoformat()}
    if isinstance(value, datetime.date):
        return {"__date__": value.isoformat()}
    raise TypeError(f"front-matter value {value!r} of type {type(value).__name__} cannot be saved as JSON")


def _json_hook(mapping):
    if set(mapping) == {"__datetime__"}:
        return datetime.datetime.fromisoformat(mapping["__datetime__"])
    if set(mapping) == {"__date__"}:
        return datetime.date.fromisoformat(mapping["__date__"])
    return mapping


def _chunk_table(chunks, levels):
    import pyarrow as pa

    return pa.table(
        {
            "chunk_id": [chunk.chunk_id for chunk in chunks],
            "doc_path": [chunk.doc_path for chunk in chunks],
            "heading_path": [list(chunk.heading_path) for chunk in chunks],
            "body": [chunk.body for chunk in chunks],
            "n_tokens": pa.array([chunk.n_tokens for chunk in chunks], type=pa.int64()),
            "oversized": [bool(chunk.oversized) for chunk in chunks],
            "metadata": [json.dumps(chunk.metadata, default=_json_default, sort_keys=True) for chunk in chunks],
            "level": list(levels),
        }
    )


def _read_chunks(path: Path):
    import pyarrow.parquet as pq

    from ..chunking import Chunk

    columns = pq.read_table(path).to_pydict()
    # One decoded dict per distinct front matter (chunks of a page share theirs), as chunking shares one dict per page.
    decoded: dict[str, dict] = {}
    for text in columns["metadata"]:
        if text not in decoded:
            decoded[text] = json.loads(text, object_hook=_json_hook)
    metadata = [decoded[text] for text in columns["metadata"]]
    chunks = [
        Chunk(chunk_id, doc_path, tuple(headings), body, n_tokens, oversized, meta)
        for chunk_id, doc_path, headings, body, n_tokens, oversized, meta in zip(
            columns["chunk_id"],
            columns["doc_path"],
            columns["heading_path"],
            columns["body"],
            columns["n_tokens"],
            columns["oversized"],
            metadata,
        )
    ]
    return chunks, columns["level"]


# --------------------------------------------------------------------------- BM25


def _bm25_arrays(retriever) -> tuple[dict, dict]:
    sparse = retriever.bm25
    arrays = {
        "data": sparse.weights.data,
        "indices": sparse.weights.indices,
        "indptr": sparse.weights.indptr,
        "frequencies": sparse.frequencies,
        "doc_len": sparse.doc_len,
        "idf": np.fromiter(sparse.idf.values(), dtype=np.float64, count=len(sparse.idf)),
    }
    state = {
        "variant": retriever.variant,
        "name": retriever.name,
        "vocabulary": list(sparse.vocabulary),
        "k1": sparse.k1,
        "b": sparse.b,
        "epsilon": sparse.epsilon,
        "avgdl": sparse.avgdl,
        "average_idf": sparse.average_idf,
    }
    return arrays, state


def _load_bm25(folder: Path, state: dict, chunk_ids):
    from .bm25 import BM25Retriever
    from .bm25_sparse import SparseBM25

    prefix = state["name"]
    arrays = {
        name: np.load(folder / f"{prefix}.{name}.npy", mmap_mode="r", allow_pickle=False)
        for name in ("data", "indices", "indptr", "frequencies", "doc_len", "idf")
    }
    sparse = SparseBM25.from_arrays(
        vocabulary=state["vocabulary"],
        idf=arrays["idf"],
        weights=(arrays["data"], arrays["indices"], arrays["indptr"]),
        frequencies=arrays["frequencies"],
        doc_len=arrays["doc_len"],
        k1=state["k1"],
        b=state["b"],
        epsilon=state["epsilon"],
        avgdl=state["avgdl"],
        average_idf=state["average_idf"],
    )
    return BM25Retriever.from_sparse(chunk_ids, sparse, variant=state["variant"], name=state["name"])


# --------------------------------------------------------------------------- folders written whole


def _write_folder(final: Path, fill, manifest: dict) -> Path | None:
    """Create ``final`` whole: ``fill(temporary)`` writes the payload, then the manifest (with every file's
    size and sha256) is added, everything is fsynced and the folder renamed into place.

    Returns ``final``, or None when the cache cannot be written (an
    :class:`IndexCacheWarning` says so; the index in memory is fine). When
    another process renamed its copy into place first, theirs is kept.
    """
    if final.is_dir():
        return final
    parent = final.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        temporary = Path(tempfile.mkdtemp(dir=parent, prefix=f".{final.name}.", suffix=".tmp"))
    except OSError as error:
        warnings.warn(f"{parent}: cannot save the index ({error}); it is rebuilt next time", IndexCacheWarning)
        return None
    try:
        fill(temporary)
        files = {
            path.name: {"bytes": path.stat().st_size, "sha256": sha256_file(path)}
            for path in sorted(temporary.iterdir())
            if path.is_file()
        }
        atomic_write_text(temporary / _MANIFEST, json.dumps({**manifest, "files": files}, indent=1, default=str))
        for path in temporary.iterdir():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
        try:
            os.rename(temporary, final)
        except OSError:  # another process saved the same folder first: keep theirs
            shutil.rmtree(temporary, ignore_errors=True)
            return final if final.is_dir() else None
    except OSError as error:
        shutil.rmtree(temporary, ignore_errors=True)
        warnings.warn(f"{parent}: cannot save the index ({error}); it is rebuilt next time", IndexCacheWarning)
        return None
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return final


def _read_manifest(folder: Path, **expected) -> dict | None:
    """The manifest of ``folder`` once every file it lists has its size and checksum; None (and a warning,
    the folder removed) when anything is off; None without a warning when there is no such folder."""
    if not folder.is_dir():
        return None
    try:
        manifest = json.loads((folder / _MANIFEST).read_text(encoding="utf-8"))
        if manifest.get("format") != INDEX_FORMAT or any(manifest.get(k) != v for k, v in expected.items()):
            raise ValueError("its key or format does not match")
        problem = _check_files(folder, manifest["files"])
        if problem is not None:
            raise ValueError(problem)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        _discard(folder, f"{error}")
        return None
    return manifest


def _check_files(folder: Path, files: dict) -> str | None:
    for name, expected in files.items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != expected["bytes"]:
            return f"{name} has {path.stat().st_size} bytes, {expected['bytes']} expected"
        if sha256_file(path) != expected["sha256"]:
            return f"{name} does not match its checksum"
    return None


def _discard(folder: Path, reason: str) -> None:
    warnings.warn(f"{folder}: saved index unusable ({reason}); rebuilding it", IndexCacheWarning, stacklevel=4)
    shutil.rmtree(folder, ignore_errors=True)


def _write_retrievers(folder: Path, dense, bm25: dict) -> dict:
    """Write the faiss index and every BM25 scorer's arrays into ``folder``; returns their manifest part."""
    import faiss

    from .diagnostics.dense_domain import dense_domain

    faiss.write_index(dense.index, str(folder / "dense.faiss"))
    centroid, page_centroids = dense_domain(dense)  # what the dense diagnostics compare queries with
    np.save(folder / "dense.centroid.npy", centroid, allow_pickle=False)
    np.save(folder / "dense.page_centroids.npy", page_centroids, allow_pickle=False)
    states = []
    for retriever in bm25.values():
        arrays, state = _bm25_arrays(retriever)
        for name, array in arrays.items():
            np.save(folder / f"{state['name']}.{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
        states.append(state)
    return {"dense": {"name": dense.name, "spec": _spec_dict(dense.index_spec)}, "bm25": states}


def _read_retrievers(folder: Path, manifest: dict, chunk_ids, *, embedder, dense_spec):
    """``(dense, bm25)`` from what :func:`_write_retrievers` wrote, searched with ``dense_spec``'s query-time
    parameters; None when the saved graph was built with other parameters than ``dense_spec`` asks for."""
    faiss = import_extra("faiss", "retrieval", "reading a saved dense index (faiss)")

    from .ann import DenseIndexSpec
    from .dense import DenseRetriever

    saved = DenseIndexSpec(**manifest["dense"]["spec"])
    spec = DenseIndexSpec(
        **{**manifest["dense"]["spec"], "ef_search": dense_spec.ef_search, "nprobe": dense_spec.nprobe}
    )
    if spec != dense_spec or saved.kind != dense_spec.kind:
        return None
    faiss_index = faiss.read_index(str(folder / "dense.faiss"), faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY)
    dense = DenseRetriever.from_faiss(
        chunk_ids, faiss_index, embedder=embedder, name=manifest["dense"]["name"], index=spec
    )
    from .diagnostics.dense_domain import set_dense_domain

    set_dense_domain(
        dense,
        np.load(folder / "dense.centroid.npy", allow_pickle=False),
        np.load(folder / "dense.page_centroids.npy", allow_pickle=False),
    )
    bm25 = {state["name"]: _load_bm25(folder, state, chunk_ids) for state in manifest["bm25"]}
    return dense, bm25


#: What reading a saved payload can raise when a file is damaged in a way its checksum cannot show
#: (faiss raises RuntimeError), or the manifest lacks a field.
_READ_ERRORS = (OSError, ValueError, KeyError, TypeError, RuntimeError)


def _spec_dict(spec) -> dict:
    from dataclasses import asdict

    return asdict(spec)


# --------------------------------------------------------------------------- whole indexes


def save_index(index, cache_dir, *, slot: str, key: str, facts: dict, includes: dict, build_warnings=()) -> Path | None:
    """Save ``index`` (a whole index, not a view) under ``key``; returns the entry folder, or None if not saved.

    ``facts`` holds what the provenance needs and only a build knows
    (``documents``, ``n_chunks``, ``chunks_sha256``); ``includes`` is
    :func:`include_states` of the loaded documents; ``build_warnings`` the
    ``(category name, message)`` pairs loading them warned, issued again by
    every load. Older entries of the same ``slot`` are removed.

    An index whose front matter holds values JSON cannot represent, or a
    cache folder that cannot be written, is simply not saved (with an
    :class:`IndexCacheWarning` for the latter): the index itself is fine.
    """
    import pyarrow.parquet as pq

    try:
        table = _chunk_table(index.chunks, index.levels)
    except TypeError:
        return None
    parts = {}

    def fill(folder: Path) -> None:
        pq.write_table(table, folder / "chunks.parquet")
        parts.update(_write_retrievers(folder, index.dense, index.bm25))
        atomic_write_text(folder / "retrievers.json", json.dumps(parts))

    manifest = {
        "format": INDEX_FORMAT,
        "slot": slot,
        "key": key,
        "facts": facts,
        "includes": includes,
        "warnings": [list(pair) for pair in build_warnings],
    }
    final = _write_folder(entry_dir(cache_dir, key), fill, manifest)
    if final is not None:
        _remove_older(final.parent, slot=slot, keep=final)
    return final


def _remove_older(parent: Path, *, slot: str, keep: Path) -> None:
    for entry in parent.iterdir():
        if entry == keep or not entry.is_dir() or entry.name.startswith("."):
            continue
        try:
            if json.loads((entry / _MANIFEST).read_text(encoding="utf-8")).get("slot") == slot:
                shutil.rmtree(entry, ignore_errors=True)
        except (OSError, ValueError):
            continue


def load_index(cache_dir, key: str, *, embedder, dense_spec):
    """The saved index under ``key`` as ``(chunks, levels, dense, bm25, facts, warnings)``, or None.

    None when there is no entry (the caller builds and saves one) or when it
    is stale: an included file changed, or the dense index parameters of the
    entry differ from ``dense_spec`` in anything but the query-time ones.

    Warns
    -----
    IndexCacheWarning
        When the entry is corrupt: a file missing, truncated or altered, the
        manifest unreadable. The entry is removed and None returned, so that
        the caller rebuilds it.
    """
    folder = entry_dir(cache_dir, key)
    manifest = _read_manifest(folder, key=key)
    if manifest is None:
        return None
    if _changed_include(manifest["includes"]) is not None:
        return None  # stale, not corrupt: an included file changed since the entry was saved
    try:
        chunks, levels = _read_chunks(folder / "chunks.parquet")
        parts = json.loads((folder / "retrievers.json").read_text(encoding="utf-8"))
        retrievers = _read_retrievers(
            folder, parts, [chunk.chunk_id for chunk in chunks], embedder=embedder, dense_spec=dense_spec
        )
    except _READ_ERRORS as error:
        _discard(folder, f"{error}")
        return None
    if retrievers is None:
        return None
    build_warnings = [(name, message) for name, message in manifest.get("warnings", ())]
    return chunks, levels, *retrievers, manifest["facts"], build_warnings


# --------------------------------------------------------------------------- access views


def _view_dir(cache_dir, key: str, allowed) -> Path:
    return entry_dir(cache_dir, key) / "views" / _sha256_text("\n".join(allowed))[:16]


def _positions_digest(positions) -> str:
    return hashlib.sha256(np.asarray(positions, dtype=np.int64).tobytes()).hexdigest()


def save_view(cache_dir, key: str, allowed, positions, dense, bm25) -> Path | None:
    """Save the retrievers of the access view ``allowed`` (the chunks at ``positions``) beside entry ``key``.

    A view's BM25 statistics come from its own chunks, so at scale a view
    costs a full BM25 build; saving it makes the next start's first request
    at those levels as cheap as one at the default level.
    """
    if not entry_dir(cache_dir, key).is_dir():
        return None
    manifest = {"format": INDEX_FORMAT, "key": key, "allowed": list(allowed), "positions": _positions_digest(positions)}
    parts = {}

    def fill(folder: Path) -> None:
        parts.update(_write_retrievers(folder, dense, bm25))
        atomic_write_text(folder / "retrievers.json", json.dumps(parts))

    return _write_folder(_view_dir(cache_dir, key, allowed), fill, manifest)


def load_view(cache_dir, key: str, allowed, positions, chunk_ids, *, embedder, dense_spec):
    """``(dense, bm25)`` of a view saved by :func:`save_view`, or None (after an :class:`IndexCacheWarning`
    when it was damaged). ``positions`` must be the view's chunks as the entry's levels give them."""
    folder = _view_dir(cache_dir, key, allowed)
    manifest = _read_manifest(folder, key=key, allowed=list(allowed), positions=_positions_digest(positions))
    if manifest is None:
        return None
    try:
        parts = json.loads((folder / "retrievers.json").read_text(encoding="utf-8"))
        return _read_retrievers(folder, parts, chunk_ids, embedder=embedder, dense_spec=dense_spec)
    except _READ_ERRORS as error:
        _discard(folder, f"{error}")
        return None
