"""Approximate dense indexes (faiss HNSW and IVF) against exact search."""

import numpy as np
import pytest

from ragcal.gates.files import GateFileError, check_provenance, index_options
from ragcal.retrieval import DenseRetriever
from ragcal.retrieval.ann import DenseIndexSpec
from ragcal.retrieval.approximate import synthetic_corpus, top1_comparison


@pytest.fixture(scope="module")
def corpus():
    return synthetic_corpus(3000, 200, dim=32, random_state=3)


@pytest.fixture(scope="module")
def exact(corpus):
    return DenseRetriever(corpus.chunk_ids, corpus.embeddings).search_vectors(corpus.queries, k=10)


@pytest.mark.parametrize(
    "spec",
    [DenseIndexSpec("hnsw", ef_search=3000), DenseIndexSpec("ivf", nlist=16, nprobe=16)],
    ids=["hnsw-exhaustive", "ivf-all-cells"],
)
def test_exhaustive_settings_equal_exact_search(corpus, exact, spec):
    approximate = DenseRetriever(corpus.chunk_ids, corpus.embeddings, index=spec).search_vectors(corpus.queries, k=10)
    for ours, theirs in zip(exact, approximate):
        assert ours.chunk_ids == theirs.chunk_ids
        np.testing.assert_allclose(ours.scores, theirs.scores, atol=1e-6)


@pytest.mark.parametrize("spec", [DenseIndexSpec("hnsw", hnsw_m=4, ef_search=1), DenseIndexSpec("ivf", nprobe=1)])
def test_approximate_top1_is_never_above_exact(corpus, exact, spec):
    retriever = DenseRetriever(corpus.chunk_ids, corpus.embeddings, index=spec)
    comparison = top1_comparison(exact, retriever.search_vectors(corpus.queries, k=10))
    # Full vectors: every returned score is exact, so missing the best chunk can only lower the top-1.
    assert (comparison["top1_error"] >= -1e-6).all()
    assert (comparison["top1_error"] > 1e-6).any(), "these settings are chosen to miss some best chunks"
    assert ((comparison["top1_error"] > 1e-6) <= ~comparison["same_top1"]).all()


def test_builds_are_deterministic(corpus):
    for kind in ("hnsw", "ivf"):
        spec = DenseIndexSpec(kind, hnsw_m=8, ef_search=8, nprobe=2)
        first = DenseRetriever(corpus.chunk_ids, corpus.embeddings, index=spec).search_vectors(corpus.queries, k=5)
        second = DenseRetriever(corpus.chunk_ids, corpus.embeddings, index=spec).search_vectors(corpus.queries, k=5)
        assert [r.chunk_ids for r in first] == [r.chunk_ids for r in second]


def test_hnsw_returns_k_results_even_when_k_exceeds_ef_search(corpus):
    retriever = DenseRetriever(corpus.chunk_ids, corpus.embeddings, index=DenseIndexSpec("hnsw", ef_search=4))
    assert all(len(result) == 50 for result in retriever.search_vectors(corpus.queries[:5], k=50))


def test_index_config_records_the_scale(corpus):
    assert DenseRetriever(corpus.chunk_ids, corpus.embeddings).index_config["dense_index"] == "flat"
    config = DenseRetriever(corpus.chunk_ids, corpus.embeddings, index="hnsw").index_config
    assert config["dense_index"] == "hnsw" and config["ef_search"] == 64 and config["hnsw_m"] == 32
    config = DenseRetriever(corpus.chunk_ids, corpus.embeddings, index="ivf").index_config
    assert config == {**config, "dense_index": "ivf", "nlist": min(round(4 * np.sqrt(3000)), 3000 // 39), "nprobe": 8}


def test_bad_index_parameters_are_named():
    with pytest.raises(ValueError, match=r"'index' parameter of DenseRetriever.*'flat', 'hnsw', 'ivf'.*'annoy'"):
        DenseRetriever(["a#0"], np.ones((1, 4)), index="annoy")
    with pytest.raises(ValueError, match="'ef_search' parameter of DenseIndexSpec must be an int >= 1. Got 0"):
        DenseIndexSpec("hnsw", ef_search=0)


def test_a_gate_fitted_on_another_index_kind_is_refused():
    provenance = {"model_fingerprint": "m", "dense_index": "flat"}
    check_provenance(provenance, {"model_fingerprint": "m", "dense_index": "flat"})
    with pytest.raises(GateFileError, match="fitted on 'flat' dense scores but the index uses 'hnsw'"):
        check_provenance(provenance, {"model_fingerprint": "m", "dense_index": "hnsw"})
    # Gate files written before the index kind was recorded are still accepted.
    check_provenance({"model_fingerprint": "m"}, {"model_fingerprint": "m", "dense_index": "hnsw"})
    assert index_options({"dense_index": "hnsw"}) == {"dense_index": "hnsw"}
    # A gate fitted on another engine's scores cannot be rebuilt in faiss: refused by name, not rebuilt as flat.
    assert index_options({"dense_index": "pgvector-hnsw"}) == {}
    with pytest.raises(GateFileError, match="fitted on 'pgvector-hnsw' dense scores but the index uses 'flat'"):
        check_provenance({"model_fingerprint": "m", "dense_index": "pgvector-hnsw"}, {"model_fingerprint": "m"})


def test_query_time_parameters_are_read_at_every_search(corpus, exact):
    from dataclasses import replace

    retriever = DenseRetriever(corpus.chunk_ids, corpus.embeddings, index=DenseIndexSpec("ivf", nlist=16, nprobe=1))
    coarse = retriever.search_vectors(corpus.queries, k=10)
    retriever.index_spec = replace(retriever.index_spec, nprobe=16)  # every cell: exact again, same built index
    assert [r.chunk_ids for r in retriever.search_vectors(corpus.queries, k=10)] == [r.chunk_ids for r in exact]
    assert [r.chunk_ids for r in coarse] != [r.chunk_ids for r in exact]


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
def test_vectors_can_be_read_back_from_every_kind(corpus, kind):
    retriever = DenseRetriever(corpus.chunk_ids, corpus.embeddings, index=kind)
    np.testing.assert_array_equal(
        retriever.index.reconstruct_batch(np.array([5, 0, 42])), corpus.embeddings[[5, 0, 42]]
    )
