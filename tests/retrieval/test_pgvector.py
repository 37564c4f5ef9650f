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


# --------------------------------------------------------------------------- access levels inside the engine

#: 5% of the rows are public; the rest internal or restricted.
def levels_of(n):
    return ["public" if i % 20 == 0 else ("internal" if i % 2 else "restricted") for i in range(n)]


@pytest.fixture(scope="module")
def leveled(database_url, corpus):
    with PgvectorRetriever(database_url, table="leveled_chunks") as retriever:
        retriever.load(corpus.chunk_ids, corpus.embeddings, levels=levels_of(len(corpus.chunk_ids)))
        yield retriever


def ragcal_view(corpus, allowed):
    """ragcal's own view of the same levels: an exact faiss index over the allowed rows only."""
    keep = [i for i, level in enumerate(levels_of(len(corpus.chunk_ids))) if level in allowed]
    return DenseRetriever(corpus.chunk_ids, corpus.embeddings).subset(keep), {corpus.chunk_ids[i] for i in keep}


@pytest.mark.parametrize("allowed", [("public",), ("internal",), ("public", "restricted")])
def test_a_level_filter_returns_k_allowed_chunks_with_ragcals_scores(leveled, corpus, allowed):
    view, visible = ragcal_view(corpus, allowed)
    ours = view.search_vectors(corpus.queries, k=10)
    theirs = leveled.search_vectors(corpus.queries, k=10, allowed_levels=allowed)
    embeddings = dict(zip(corpus.chunk_ids, corpus.embeddings.astype(np.float64)))
    for query, mine, found in zip(corpus.queries, ours, theirs):
        assert set(found.chunk_ids) <= visible  # zero hidden chunk ids
        assert len(found) == 10  # k results even when the filter keeps 5% of the rows
        assert found.view == view.view  # stamped as ragcal's view of those levels
        cosines = [embeddings[chunk_id] @ query for chunk_id in found.chunk_ids]
        np.testing.assert_allclose(found.scores, cosines, atol=1e-5)
        if not leveled.iterative_scan:  # exact under a filter: ragcal's view, list for list
            np.testing.assert_allclose(found.scores, mine.scores, atol=1e-5)
    if leveled.iterative_scan:  # approximate, like unfiltered HNSW
        assert np.nanmean(topk_overlap(ours, theirs, k=10)) >= 0.9


def test_without_the_filter_an_hnsw_scan_would_come_back_short(leveled, corpus):
    """Why the filter needs care: post-filtering ef_search=100 HNSW candidates keeps about 5% of them."""
    before = leveled.exact_fallbacks
    with leveled._connection.transaction(), leveled._connection.cursor() as cursor:
        leveled._set_search_options(cursor, 10)  # plain HNSW, no iterative scan
        cursor.execute("SET LOCAL hnsw.ef_search = 100")
        counts = []
        for query in corpus.queries[:20]:
            cursor.execute(
                "SELECT chunk_id FROM leveled_chunks WHERE level = 'public' "
                "ORDER BY embedding <=> %s::vector LIMIT 10",
                ("[" + ",".join(map(repr, query.tolist())) + "]",),
            )
            counts.append(len(cursor.fetchall()))
    assert np.mean(counts) < 10
    assert leveled.exact_fallbacks == before


def test_the_filter_sits_inside_the_engine_and_provenance_says_how(leveled, corpus):
    plan = leveled.explain(corpus.queries[0], allowed_levels="public")
    assert "Filter: (level = ANY ('{public}'::text[]))" in plan, plan  # in the scan, below the ranking's Limit
    assert ("leveled_chunks_hnsw" in plan) == leveled.iterative_scan, plan  # else exact: a scan of the allowed rows
    assert "leveled_chunks_hnsw" in leveled.explain(corpus.queries[0])  # unfiltered searches still use HNSW
    recorded = leveled.index_config["filtered_search"]
    assert ("iterative_scan" in recorded) == leveled.iterative_scan
    assert "exact" in recorded
    assert leveled.index_config["pgvector_version"] == ".".join(map(str, leveled.pgvector_version))


def test_unfiltered_search_of_a_leveled_table_sees_every_level(leveled, corpus):
    found = leveled.search_vectors(corpus.embeddings[:2], k=3)
    assert [result.chunk_ids[0] for result in found] == corpus.chunk_ids[:2]


def test_a_table_without_levels_cannot_be_filtered(pg, corpus, database_url):
    with PgvectorRetriever(database_url, table="legacy_chunks") as legacy:
        legacy._connection.execute(
            "CREATE TABLE legacy_chunks (position integer PRIMARY KEY, chunk_id text NOT NULL, embedding vector(48))"
        )
        with pytest.raises(ValueError, match="'legacy_chunks' has no 'level' column.*levels="):
            legacy.search_vectors(corpus.queries[:1], k=3, allowed_levels="public")
    with pytest.raises(ValueError, match="letters, digits"):
        pg.load(corpus.chunk_ids[:2], corpus.embeddings[:2], levels=["public", "top secret"], replace=False)


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
