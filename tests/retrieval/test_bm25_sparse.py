"""The sparse BM25 backend against the reference, rank-bm25's BM25Okapi."""

import math

import numpy as np
import pandas as pd
import pytest
from rank_bm25 import BM25Okapi

from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE, FASTAPI_QUERIES
from ragcal.retrieval import BM25Retriever
from ragcal.retrieval.bm25 import tokenize
from ragcal.retrieval.bm25_sparse import SparseBM25
from ragcal.retrieval.index import chunk_corpus


@pytest.fixture(scope="module")
def fastapi_chunks():
    return chunk_corpus(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE)[1]


@pytest.fixture(scope="module")
def fastapi_queries():
    return pd.read_csv(FASTAPI_QUERIES)["query"].tolist()


@pytest.mark.parametrize("variant", ["raw", "stopwords"])
def test_equal_to_rank_bm25_on_the_bundled_corpus(fastapi_chunks, fastapi_queries, variant):
    sparse = BM25Retriever.from_chunks(fastapi_chunks, variant=variant, backend="sparse")
    reference = BM25Retriever.from_chunks(fastapi_chunks, variant=variant, backend="rank_bm25")
    assert sparse.bm25.idf == pytest.approx(reference.bm25.idf, abs=1e-12)
    # Some words of the bundled corpus are in more than half of the chunks: the epsilon floor is exercised.
    assert any(value == reference.bm25.epsilon * reference.bm25.average_idf for value in reference.bm25.idf.values())
    for query in fastapi_queries:
        ours, theirs = sparse.search_one(query, k=100), reference.search_one(query, k=100)
        assert ours.chunk_ids == theirs.chunk_ids
        np.testing.assert_allclose(ours.scores, theirs.scores, rtol=0, atol=1e-12)


def test_every_matched_score_equals_get_scores(fastapi_chunks):
    corpus = [tokenize(chunk.text) or [""] for chunk in fastapi_chunks]
    reference = BM25Okapi(corpus)
    sparse = SparseBM25(corpus)
    query = tokenize("How do I return a response with a custom status code and the the header?")
    positions, scores = sparse.score(query)
    full = reference.get_scores(query)
    matched = [position for position, tokens in enumerate(corpus) if set(tokens) & set(query)]
    assert positions.tolist() == matched
    np.testing.assert_allclose(scores, full[positions], rtol=0, atol=1e-12)


def test_idf_floor_and_formula_by_hand():
    # "a" is in 3 of 4 documents: idf = log(4 - 3 + 0.5) - log(3 + 0.5) < 0, so it gets epsilon * mean idf.
    # "b" is in exactly 2 of 4: idf = log(2.5) - log(2.5) = 0, not floored, and still matches.
    corpus = [["a", "b"], ["a", "b", "c"], ["a", "d"], ["e"]]
    bm25 = SparseBM25(corpus, k1=1.5, b=0.75, epsilon=0.25)
    raw = {
        "a": math.log(1.5) - math.log(3.5),
        "b": 0.0,
        "c": math.log(3.5) - math.log(1.5),
        "d": math.log(3.5) - math.log(1.5),
        "e": math.log(3.5) - math.log(1.5),
    }
    floor = 0.25 * sum(raw.values()) / len(raw)
    assert bm25.idf == pytest.approx({**raw, "a": floor})
    avgdl = 8 / 4
    positions, scores = bm25.score(["a"])
    assert positions.tolist() == [0, 1, 2]
    expected = [floor * 1 * 2.5 / (1 + 1.5 * (1 - 0.75 + 0.75 * length / avgdl)) for length in (2, 3, 2)]
    np.testing.assert_allclose(scores, expected, rtol=1e-15)
    positions, scores = bm25.score(["b"])
    assert positions.tolist() == [0, 1] and scores.tolist() == [0.0, 0.0]


def test_repeated_query_tokens_count_twice_and_unknown_tokens_are_ignored():
    corpus = [["x", "y"], ["y", "z"], ["w"]]
    bm25 = SparseBM25(corpus)
    _, once = bm25.score(["x"])
    positions, twice = bm25.score(["x", "x", "unknown"])
    assert positions.tolist() == [0]
    assert twice[0] == pytest.approx(2 * once[0])
    np.testing.assert_allclose(twice, BM25Okapi(corpus).get_scores(["x", "x", "unknown"])[positions])
    assert bm25.score(["unknown"])[0].size == 0
    assert bm25.score([])[0].size == 0


def test_top_k_keeps_corpus_order_on_ties_at_the_cut():
    texts = ["same words", "other thing", "same words", "same words here and there", "same words"]
    ids = [f"d{n}#0" for n in range(len(texts))]
    for backend in ("sparse", "rank_bm25"):
        retriever = BM25Retriever(ids, texts, backend=backend)
        full = retriever.search_one("same", k=100)
        assert retriever.search_one("same", k=2).chunk_ids == full.chunk_ids[:2] == ("d0#0", "d2#0")
        assert retriever.search_one("same", k=0).is_empty


def test_empty_texts_count_like_rank_bm25():
    ids, texts = ["a#0", "b#0", "c#0"], ["cookie header", "", "cookie"]
    sparse, reference = BM25Retriever(ids, texts), BM25Retriever(ids, texts, backend="rank_bm25")
    assert sparse.bm25.avgdl == reference.bm25.avgdl
    ours, theirs = sparse.search_one("cookie"), reference.search_one("cookie")
    assert ours.chunk_ids == theirs.chunk_ids
    np.testing.assert_allclose(ours.scores, theirs.scores, atol=1e-12)


def test_unknown_backend_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"'backend' parameter of BM25Retriever.*'sparse', 'rank_bm25'.*'lucene'"):
        BM25Retriever(["a#0"], ["text"], backend="lucene")


def test_sparse_needs_a_document():
    with pytest.raises(ValueError, match="at least one document"):
        SparseBM25([])


def test_diagnostic_accessors_agree_across_backends():
    """The accessors the per-query diagnostics read (idf, postings) give the same answers on both backends."""
    from ragcal.retrieval.bm25 import BM25Retriever

    texts = ["the cookie jar", "", "cookie cookie header", "docker worker the", "header"]
    ids = [f"p{n}.md#0" for n in range(len(texts))]
    sparse = BM25Retriever(ids, texts, backend="sparse")
    reference = BM25Retriever(ids, texts, backend="rank_bm25")
    tokens = ["the", "cookie", "header", "docker", "worker", "jar", "absent", ""]
    np.testing.assert_array_equal(sparse.idf(tokens), reference.idf(tokens))
    assert np.isnan(sparse.idf(["absent", ""])).all()
    for token in tokens:
        np.testing.assert_array_equal(sparse.positions_with(token), reference.positions_with(token))
    np.testing.assert_array_equal(sparse.positions_with("cookie"), [0, 2])


def test_occurs_in_agrees_across_backends():
    from ragcal.retrieval.bm25 import BM25Retriever

    texts = ["the cookie jar", "", "cookie cookie header", "docker worker the", "header"]
    ids = [f"p{n}.md#0" for n in range(len(texts))]
    tokens = ["the", "cookie", "header", "docker", "jar", "absent", ""]
    for positions, expected in (([0], [1, 1, 0, 0, 1, 0, 0]), ([3, 4], [1, 0, 1, 1, 0, 0, 0]), ([], [0] * 7)):
        for backend in ("sparse", "rank_bm25"):
            retriever = BM25Retriever(ids, texts, backend=backend)
            np.testing.assert_array_equal(retriever.occurs_in(positions, tokens), np.array(expected, dtype=bool))
