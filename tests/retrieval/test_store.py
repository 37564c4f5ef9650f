"""The saved index (ragcal.retrieval.store): loaded when nothing changed, rebuilt when anything did or a file is bad."""

import hashlib
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from ragcal.access import AccessPolicy
from ragcal.corpus import IncludeWarning
from ragcal.embedding import CacheWarning, ModelSpec
from ragcal.retrieval import dense as dense_module
from ragcal.retrieval.index import IndexOptions, build_index
from ragcal.retrieval.store import IndexCacheWarning, save_index

QUESTIONS = ["How do I set a cookie?", "What is a background task?", "zebra migration patterns"]


class CachedHashEmbedder:
    """A deterministic bag-of-hashed-words embedder with a cache folder, so that build_index saves its index."""

    dimension = 32

    def __init__(self, cache_dir, name="hash-bag-32"):
        self.cache_dir = Path(cache_dir)
        self.use_cache = True
        self.spec = ModelSpec(name, name, None)
        self.fingerprint = f"{name}@test"
        self.cache_key = f"{self.fingerprint}/b1"
        self.calls = 0

    def encode(self, texts, *, show_progress_bar=None):
        self.calls += 1
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            vectors[row, 0] = 0.5
            for word in str(text).lower().split():
                vectors[row, int(hashlib.sha256(word.encode()).hexdigest()[:8], 16) % self.dimension] += 1.0
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def corpus(tmp_path):
    """Three pages, one with front matter (a date and an owner) and one that includes a code file."""
    docs = tmp_path / "project" / "docs"
    write(
        docs / "cookies.md",
        "---\nowner: web-team\neffective_date: 2024-05-01\n---\n# Cookies\n\nSet a cookie on the response.\n\n## Delete\n\nDelete cookies too.\n",
    )
    write(
        docs / "tasks.md",
        "# Background tasks\n\nRun a background task after returning a response.\n\n{* ../../docs_src/task.py *}\n",
    )
    write(docs / "guide/files.md", "# Files\n\nUpload files with a form.\n")
    write(tmp_path / "project" / "docs_src" / "task.py", "def write_log():\n    pass\n")
    return docs


def entries(cache_dir: Path) -> list:
    folder = cache_dir / "indexes"
    return sorted(path for path in folder.iterdir() if not path.name.startswith(".")) if folder.is_dir() else []


def same_retrieval(a, b) -> bool:
    left, right = a.retrieve(QUESTIONS), b.retrieve(QUESTIONS)
    return left.keys() == right.keys() and all(
        x.chunk_ids == y.chunk_ids and np.array_equal(x.scores, y.scores) and x.info.keys() == y.info.keys()
        for name in left
        for x, y in zip(left[name], right[name])
    )


def test_a_second_build_loads_the_saved_index_and_answers_the_same(corpus, tmp_path, monkeypatch):
    embedder = CachedHashEmbedder(tmp_path / "cache")
    built = build_index(corpus, embedder=embedder, exclude=())
    assert len(entries(tmp_path / "cache")) == 1
    fresh = build_index(corpus, embedder=CachedHashEmbedder(tmp_path / "other"), exclude=(),
        options=IndexOptions(persist=False))

    def no_build(*args, **kwargs):
        raise AssertionError("the dense index was rebuilt instead of loaded")

    monkeypatch.setattr(dense_module.DenseRetriever, "from_chunks", no_build)
    loader = CachedHashEmbedder(tmp_path / "cache")
    loaded = build_index(corpus, embedder=loader, exclude=())
    assert loader.calls == 0  # no chunk was embedded (or even looked up in the embedding cache)
    assert loaded.config == built.config == fresh.config
    assert list(loaded.config) == list(built.config)
    assert loaded.chunks == built.chunks and loaded.levels == built.levels
    assert [c.metadata for c in loaded.chunks] == [c.metadata for c in built.chunks]
    assert str(loaded.chunks[0].metadata["effective_date"]) == "2024-05-01"  # a date stays a date
    assert loaded.description.owners == built.description.owners == {"cookies.md": "web-team"}
    assert same_retrieval(loaded, built) and same_retrieval(loaded, fresh)
    view = loaded.restrict(["public"])
    assert view is loaded  # every chunk is public: the view is the index itself


@pytest.mark.parametrize(
    "change",
    ["edit a page", "add a page", "remove a page", "edit an included file", "create a missing include"],
)
def test_a_changed_corpus_never_loads_the_old_index(corpus, tmp_path, change):
    cache = tmp_path / "cache"
    if change == "create a missing include":
        write(corpus / "extra.md", "# Extra\n\n{* ../../docs_src/later.py *}\n")
    build_index(corpus, embedder=CachedHashEmbedder(cache), exclude=())
    if change == "edit a page":
        write(corpus / "guide/files.md", "# Files\n\nUpload files with a multipart form quokka.\n")
    elif change == "add a page":
        write(corpus / "new.md", "# New\n\nA quokka page.\n")
    elif change == "remove a page":
        (corpus / "guide/files.md").unlink()
    elif change == "edit an included file":
        write(corpus.parent / "docs_src" / "task.py", "def quokka():\n    pass\n")
    else:
        write(corpus.parent / "docs_src" / "later.py", "quokka = 1\n")
    index = build_index(corpus, embedder=CachedHashEmbedder(cache), exclude=())
    texts = " ".join(chunk.text for chunk in index.chunks)
    expected = build_index(corpus, embedder=CachedHashEmbedder(tmp_path / "clean"), exclude=(),
        options=IndexOptions(persist=False))
    assert [c.text for c in index.chunks] == [c.text for c in expected.chunks]
    assert index.config == expected.config
    assert ("quokka" in texts) == (change != "remove a page")
    if change == "remove a page":
        assert "guide/files.md" not in index.doc_paths
    assert len(entries(cache)) == 1  # the stale entry of this folder and options was replaced


def test_other_options_model_index_kind_or_access_get_their_own_index(corpus, tmp_path):
    cache = tmp_path / "cache"
    base = build_index(corpus, embedder=CachedHashEmbedder(cache), exclude=())
    variants = {
        "chunking": build_index(corpus, embedder=CachedHashEmbedder(cache), exclude=(),
            options=IndexOptions(max_tokens=8)),
        "model": build_index(corpus, embedder=CachedHashEmbedder(cache, name="other-model"), exclude=()),
        "index kind": build_index(corpus, embedder=CachedHashEmbedder(cache), exclude=(),
            options=IndexOptions(dense_index="hnsw")),
        "excluded": build_index(corpus, embedder=CachedHashEmbedder(cache), exclude=("guide/files.md",)),
    }
    access_map = write(tmp_path / "access.csv", "path_glob,level\nguide/*,internal\n")
    variants["access"] = build_index(corpus, embedder=CachedHashEmbedder(cache), exclude=(),
        options=IndexOptions(access=AccessPolicy.from_options(access_map=access_map)))
    assert len(entries(cache)) == 1 + len(variants)
    assert len(variants["chunking"].chunks) > len(base.chunks)
    assert variants["model"].config["model_fingerprint"] == "other-model@test"
    assert variants["index kind"].config["dense_index"] == "hnsw"
    assert "guide/files.md" not in variants["excluded"].doc_paths
    assert "internal" in variants["access"].levels and "internal" not in base.levels
    # Each loads as itself the next time.
    again = build_index(corpus, embedder=CachedHashEmbedder(cache), exclude=(),
        options=IndexOptions(access=AccessPolicy.from_options(access_map=access_map)))
    assert again.levels == variants["access"].levels


def test_query_time_parameters_reuse_the_saved_graph(corpus, tmp_path):
    from ragcal.retrieval.ann import DenseIndexSpec

    cache = tmp_path / "cache"
    build_index(corpus, embedder=CachedHashEmbedder(cache), exclude=(),
        options=IndexOptions(dense_index=DenseIndexSpec("hnsw", ef_search=16)))
    loader = CachedHashEmbedder(cache)
    index = build_index(corpus, embedder=loader, exclude=(),
        options=IndexOptions(dense_index=DenseIndexSpec("hnsw", ef_search=128)))
    assert loader.calls == 0 and len(entries(cache)) == 1
    assert index.config["ef_search"] == 128 and index.dense.index_spec.ef_search == 128


@pytest.mark.parametrize(
    "damage",
    ["truncate the faiss file", "flip a byte of a BM25 matrix", "garble the manifest", "delete the chunk table"],
)
def test_a_corrupt_saved_index_is_rebuilt_with_a_warning(corpus, tmp_path, damage):
    cache = tmp_path / "cache"
    built = build_index(corpus, embedder=CachedHashEmbedder(cache), exclude=())
    (entry,) = entries(cache)
    if damage == "truncate the faiss file":
        path = entry / "dense.faiss"
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "flip a byte of a BM25 matrix":
        path = entry / "bm25_raw.data.npy"
        data = bytearray(path.read_bytes())
        data[-3] ^= 0xFF
        path.write_bytes(bytes(data))
    elif damage == "garble the manifest":
        (entry / "manifest.json").write_text("{not json", encoding="utf-8")
    else:
        (entry / "chunks.parquet").unlink()
    loader = CachedHashEmbedder(cache)
    with pytest.warns(IndexCacheWarning, match="saved index unusable") as caught:
        rebuilt = build_index(corpus, embedder=loader, exclude=())
    assert issubclass(IndexCacheWarning, CacheWarning)
    assert str(entry) in str(caught[0].message)
    assert loader.calls == 1  # rebuilt from the chunks
    assert same_retrieval(rebuilt, built)
    # The rebuilt entry was saved whole and loads without a warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error", IndexCacheWarning)
        again_loader = CachedHashEmbedder(cache)
        build_index(corpus, embedder=again_loader, exclude=())
    assert again_loader.calls == 0


def test_a_half_written_entry_is_never_read(corpus, tmp_path):
    cache = tmp_path / "cache"
    (cache / "indexes" / ".0123.tmp").mkdir(parents=True)  # what a run killed while saving leaves
    (cache / "indexes" / ".0123.tmp" / "dense.faiss").write_bytes(b"half")
    index = build_index(corpus, embedder=CachedHashEmbedder(cache), exclude=())
    assert len(entries(cache)) == 1 and len(index.chunks) > 0


def test_saving_over_an_entry_another_run_saved_keeps_it(corpus, tmp_path):
    cache = tmp_path / "cache"
    index = build_index(corpus, embedder=CachedHashEmbedder(cache), exclude=())
    (entry,) = entries(cache)
    manifest = json.loads((entry / "manifest.json").read_text())
    before = sorted((path.name, path.stat().st_mtime_ns) for path in entry.iterdir())
    again = save_index(index, cache, slot=manifest["slot"], key=manifest["key"], facts=manifest["facts"], includes={})
    assert again == entry and sorted((p.name, p.stat().st_mtime_ns) for p in entry.iterdir()) == before


def test_build_warnings_are_issued_again_on_load(tmp_path):
    docs = tmp_path / "project" / "docs"
    write(docs / "page.md", "# Page\n\nSee this:\n\n{{#include /etc/passwd}}\n\n")
    cache = tmp_path / "cache"
    for _ in range(2):
        with pytest.warns(IncludeWarning, match="absolute paths are not allowed"):
            build_index(docs, embedder=CachedHashEmbedder(cache), exclude=())
    assert len(entries(cache)) == 1


def test_nothing_is_saved_without_a_cache(corpus, tmp_path):
    cache = tmp_path / "cache"
    build_index(corpus, embedder=CachedHashEmbedder(cache), exclude=(), options=IndexOptions(persist=False))
    embedder = CachedHashEmbedder(cache)
    embedder.use_cache = False
    build_index(corpus, embedder=embedder, exclude=())
    assert entries(cache) == []


def test_access_views_of_a_loaded_index_equal_those_of_a_fresh_one(corpus, tmp_path):
    write(corpus / "payroll.md", "---\naccess_level: internal\n---\n# Payroll\n\nZanzibarquux payroll cookie runs.\n")
    cache = tmp_path / "cache"
    build_index(corpus, embedder=CachedHashEmbedder(cache), exclude=())
    loaded = build_index(corpus, embedder=CachedHashEmbedder(cache), exclude=())
    fresh = build_index(corpus, embedder=CachedHashEmbedder(tmp_path / "clean"), exclude=(),
        options=IndexOptions(persist=False))
    assert set(loaded.levels) == {"public", "internal"}
    public_loaded, public_fresh = loaded.restrict(["public"]), fresh.restrict(["public"])
    assert same_retrieval(public_loaded, public_fresh)
    assert public_loaded.config == public_fresh.config
    assert len(list((entries(cache)[0] / "views").iterdir())) == 1  # the public view was saved beside the index
    retrieved = public_loaded.retrieve(["zanzibarquux payroll"])
    assert all(
        "payroll.md" not in chunk_id for results in retrieved.values() for r in results for chunk_id in r.chunk_ids
    )


def test_a_saved_view_is_loaded_by_the_next_start(corpus, tmp_path, monkeypatch):
    from ragcal.retrieval import bm25 as bm25_module

    write(corpus / "payroll.md", "---\naccess_level: internal\n---\n# Payroll\n\nZanzibarquux payroll cookie runs.\n")
    cache = tmp_path / "cache"
    first = build_index(corpus, embedder=CachedHashEmbedder(cache), exclude=()).restrict(["public"])

    def no_build(*args, **kwargs):
        raise AssertionError("a BM25 index was built instead of loaded")

    monkeypatch.setattr(bm25_module.BM25Retriever, "from_chunks", no_build)
    second = build_index(corpus, embedder=CachedHashEmbedder(cache), exclude=()).restrict(["public"])
    assert same_retrieval(first, second) and second.config == first.config
    (view,) = (entries(cache)[0] / "views").iterdir()
    (view / "bm25_raw.idf.npy").write_bytes(b"damaged")
    monkeypatch.undo()
    with pytest.warns(IndexCacheWarning, match="saved index unusable"):
        third = build_index(corpus, embedder=CachedHashEmbedder(cache), exclude=()).restrict(["public"])
    assert same_retrieval(first, third)


def test_the_saved_dense_domain_is_the_computed_one(corpus, tmp_path):
    from ragcal.retrieval.diagnostics.dense_domain import _build_domain, dense_domain

    cache = tmp_path / "cache"
    build_index(corpus, embedder=CachedHashEmbedder(cache), exclude=())
    loaded = build_index(corpus, embedder=CachedHashEmbedder(cache), exclude=())
    centroid, pages = dense_domain(loaded.dense)
    expected_centroid, expected_pages = _build_domain(loaded.dense)
    assert np.array_equal(centroid, expected_centroid) and np.array_equal(pages, expected_pages)
    assert centroid.dtype == np.float64 and pages.shape[0] == len(loaded.doc_paths)
