"""The pgvector adapter against faiss exact search, on a real PostgreSQL server started from the pgserver wheel."""

import shutil
import tempfile

import numpy as np
import pandas as pd
import pytest

from ragcal.gates import ThresholdGate
from ragcal.retrieval import DenseRetriever
from ragcal.retrieval.approximate import decision_flips, synthetic_corpus, top1_comparison, topk_overlap
from ragcal.retrieval.pgvector import PgvectorRetriever, cosine_distance_to_similarity
from ragcal.retrieval.protocol import Retriever, retrieve_with
from ragcal.scoring import score_table


@pytest.fixture(scope="module")
def database_url():
    """A throw-away server in a temporary folder, stopped and deleted even when a test fails."""
    import pgserver

    data_dir = tempfile.mkdtemp(prefix="ragcal-pg-")
    server = None
    try:
        server = pgserver.get_server(data_dir, cleanup_mode="delete")
        yield server.get_uri()
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(data_dir, ignore_errors=True)


class VectorEmbedder:
    """Stands in for the MiniLM embedder: query text -> a fixed vector."""

    def __init__(self, vectors: dict):
        self.vectors = vectors

    def encode(self, texts, show_progress_bar=None):
        return np.stack([self.vectors[text] for text in texts])


@pytest.fixture(scope="module")
def corpus():
    return synthetic_corpus(1500, 80, dim=48, random_state=11)


@pytest.fixture(scope="module")
def pg(database_url, corpus):
    embedder = VectorEmbedder({f"q{i}": vector for i, vector in enumerate(corpus.queries)})
    with PgvectorRetriever(database_url, table="synthetic_chunks", embedder=embedder) as retriever:
        retriever.load(corpus.chunk_ids, corpus.embeddings)
        yield retriever


def test_distance_is_converted_to_similarity():
    assert cosine_distance_to_similarity(0.0) == 1.0  # same direction
    assert cosine_distance_to_similarity(2.0) == -1.0  # opposite
    np.testing.assert_allclose(cosine_distance_to_similarity([0.25, 1.0]), [0.75, 0.0])


def test_search_uses_the_hnsw_index(pg, corpus):
    plan = pg.explain(corpus.queries[0])
    assert "synthetic_chunks_hnsw" in plan, plan
    assert pg.index_config["dense_index"] == "pgvector-hnsw" and pg.index_config["ef_search"] == 100


def test_a_chunk_finds_itself_with_similarity_one(pg, corpus):
    result = pg.search_vectors(corpus.embeddings[:3], k=5)
    for position, found in enumerate(result):
        assert found.chunk_ids[0] == corpus.chunk_ids[position]
        assert found.scores[0] == pytest.approx(1.0, abs=1e-6)


def test_top_k_and_scores_match_faiss_exact(pg, corpus):
    exact = DenseRetriever(corpus.chunk_ids, corpus.embeddings).search_vectors(corpus.queries, k=10)
    hnsw = pg.search_vectors(corpus.queries, k=10)
    assert np.nanmean(topk_overlap(exact, hnsw, k=10)) >= 0.95
    comparison = top1_comparison(exact, hnsw)
    # pgvector keeps full vectors: where it finds faiss's top chunk, it reports the same cosine.
    same = comparison["same_top1"]
    assert same.mean() >= 0.95
    np.testing.assert_allclose(comparison.loc[same, "approximate_top1"], comparison.loc[same, "exact_top1"], atol=1e-5)
    for ours, theirs in zip(exact, hnsw):
        common = set(ours.chunk_ids) & set(theirs.chunk_ids)
        mine = dict(zip(ours.chunk_ids, ours.scores))
        for chunk_id, score in zip(theirs.chunk_ids, theirs.scores):
            if chunk_id in common:
                assert score == pytest.approx(mine[chunk_id], abs=1e-5)
        assert np.all(np.diff(theirs.scores) <= 0)


def test_exact_mode_equals_faiss(database_url, corpus):
    with PgvectorRetriever(database_url, table="synthetic_chunks", use_index=False) as exact_pg:
        assert "synthetic_chunks_hnsw" not in exact_pg.explain(corpus.queries[0])
        theirs = exact_pg.search_vectors(corpus.queries, k=5)
    ours = DenseRetriever(corpus.chunk_ids, corpus.embeddings).search_vectors(corpus.queries, k=5)
    assert np.nanmean(topk_overlap(ours, theirs, k=5)) == 1.0
    np.testing.assert_allclose([r.score_at(1) for r in theirs], [r.score_at(1) for r in ours], atol=1e-5)


def test_gates_and_signals_run_unchanged_through_the_protocol(pg, corpus):
    assert isinstance(pg, Retriever)
    queries = pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(len(corpus.queries))],
            "query": [f"q{i}" for i in range(len(corpus.queries))],
            "answerable": corpus.answerable,
            "slice": corpus.slices,
        }
    )
    retrieved = retrieve_with({"dense": pg}, queries["query"], k=10)
    table = score_table(queries, retrieved, signals=["dense_top1", "dense_gap"])
    np.testing.assert_allclose(table["dense_top1"], [result.score_at(1) for result in retrieved["dense"]])
    gate = ThresholdGate(signal="dense_top1", threshold=0.55)
    decided = gate.decide_table(table)
    for position in range(len(queries)):
        decision = gate.decide({"dense": retrieved["dense"][position]})
        assert decision.action == decided["action"].iloc[position]


def test_bad_table_name_is_refused_before_connecting():
    with pytest.raises(ValueError, match="'table' parameter of PgvectorRetriever must be a plain SQL identifier"):
        PgvectorRetriever("postgresql://nowhere", table="chunks; DROP TABLE x")


@pytest.mark.slow
def test_bundled_labeled_set_through_pgvector_gets_faiss_decisions_up_to_predicted_flips(database_url):
    """The bundled FastAPI set, real MiniLM embeddings (cached), the published keep@0.95 threshold."""
    from ragcal import build_index, load_queries
    from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE, FASTAPI_QUERIES

    index = build_index(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE)
    queries = load_queries(FASTAPI_QUERIES, corpus_paths=index.doc_paths)
    embeddings = index.dense.index.reconstruct_n(0, index.dense.index.ntotal)
    with PgvectorRetriever(database_url, table="fastapi_chunks", embedder=index.dense.embedder) as pg:
        pg.load(index.dense.chunk_ids, embeddings)
        through_pg = retrieve_with({"dense": pg, **index.bm25}, queries["query"], k=100)
    faiss_exact = index.retrieve(queries["query"])
    assert np.nanmean(topk_overlap(faiss_exact["dense"], through_pg["dense"], k=10)) >= 0.95
    threshold = 0.4791  # results/fastapi/thresholds.csv, keep@0.95
    exact_table = score_table(queries, faiss_exact)
    pg_table = score_table(queries, through_pg)
    gate = ThresholdGate(signal="dense_top1", threshold=threshold)
    flipped = gate.decide_table(exact_table)["action"] != gate.decide_table(pg_table)["action"]
    comparison = top1_comparison(faiss_exact["dense"], through_pg["dense"])
    # A decision may only change where the study says it can: pgvector missed faiss's top chunk, or the two
    # engines' float rounding (1e-5) straddles the threshold.
    explained = (comparison["top1_error"].abs() > 1e-5) | ((exact_table["dense_top1"] - threshold).abs() < 1e-5)
    assert not (flipped & ~explained).any()
    flips = decision_flips(exact_table["dense_top1"], pg_table["dense_top1"], {"keep@0.95": threshold}).iloc[0]
    assert flips["flips"] == int(flipped.sum())
