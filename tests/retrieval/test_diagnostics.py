import math

import numpy as np
import pytest

from ragcal.retrieval import BM25Retriever, DenseRetriever, RetrievalResult
from ragcal.retrieval.diagnostics import attach_diagnostics, bm25_info, dense_info

TEXTS = ["apple banana apple", "banana cherry", "cherry date", "date elder"]
IDS = [f"p{n}.md#0" for n in range(len(TEXTS))]


def okapi_idf(retriever, token):
    return retriever.bm25.idf[token]


def test_bm25_info_follows_its_formulas():
    retriever = BM25Retriever(IDS, TEXTS)
    query = "apple cherry zebra apple"
    result = retriever.search_one(query, k=1)
    info = bm25_info(retriever, query, result, depth=1)
    apple, cherry = okapi_idf(retriever, "apple"), okapi_idf(retriever, "cherry")
    unseen = math.log((len(TEXTS) + 0.5) / 0.5)
    # Repeated query terms count twice in the score, and so in the maximum.
    assert info["max_score"] == pytest.approx((2 * apple + cherry) * (retriever.k1 + 1))
    assert info["coverage_corpus"] == pytest.approx((apple + cherry) / (apple + cherry + unseen))
    # The top chunk is p0 ("apple banana apple"): of the distinct terms only apple is in it.
    assert result.chunk_ids[0] == "p0.md#0"
    assert info["coverage_top"] == pytest.approx(apple / (apple + cherry + unseen))
    full = retriever.search_one(query, k=10)
    assert full.scores[0] <= info["max_score"]


def test_bm25_info_of_a_query_with_no_token_is_nan_and_of_no_match_is_zero():
    retriever = BM25Retriever(IDS, TEXTS, variant="stopwords")
    info = bm25_info(retriever, "the of and", retriever.search_one("the of and"))
    assert all(math.isnan(value) for value in info.values())
    info = bm25_info(retriever, "zebra", retriever.search_one("zebra"))
    assert info == {"max_score": 0.0, "coverage_top": 0.0, "coverage_corpus": 0.0}


def test_diagnostics_come_only_from_the_retriever_that_is_passed():
    # A caller who may not see the "zebra" page gets a retriever without it; the restricted page must not count.
    allowed = BM25Retriever(IDS, TEXTS)
    everything = BM25Retriever([*IDS, "secret.md#0"], [*TEXTS, "zebra stripes"])
    query = "apple zebra"
    retrieved = {"bm25_raw": [allowed.search_one(query)]}
    restricted = attach_diagnostics(retrieved, [query], {"bm25_raw": allowed})["bm25_raw"][0]
    leaked = attach_diagnostics(retrieved, [query], {"bm25_raw": everything})["bm25_raw"][0]
    assert restricted.info["coverage_corpus"] < 1.0 and leaked.info["coverage_corpus"] == 1.0
    assert retrieved["bm25_raw"][0].info == {}  # the input is not modified


def test_dense_info_centroid_and_nearest_pages():
    vectors = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.6, 0.8]], dtype=np.float32)
    retriever = DenseRetriever(["a.md#0", "a.md#1", "b.md#0", "c.md#0"], vectors)
    query = np.array([[0.0, 1.0, 0.0]])
    (info,) = dense_info(retriever, query, neighbours=2)
    centroid = vectors.mean(axis=0) / np.linalg.norm(vectors.mean(axis=0))
    pages = {
        "a.md": (vectors[0] + vectors[1]) / np.linalg.norm(vectors[0] + vectors[1]),
        "b.md": vectors[2],
        "c.md": vectors[3],
    }
    cosines = sorted((float(query[0] @ page) for page in pages.values()), reverse=True)
    assert info["centroid_cosine"] == pytest.approx(float(query[0] @ centroid))
    assert info["page_knn_cosine"] == pytest.approx(np.mean(cosines[:2]))


def test_attach_diagnostics_leaves_other_lists_alone():
    fused = RetrievalResult("rrf", ("a.md#0",), np.array([0.1]))
    retriever = BM25Retriever(IDS, TEXTS)
    retrieved = {"bm25_raw": [retriever.search_one("apple")], "rrf": [fused]}
    attached = attach_diagnostics(retrieved, ["apple"], {"bm25_raw": retriever})
    assert attached["rrf"][0] is fused
    assert set(attached["bm25_raw"][0].info) == {"max_score", "coverage_top", "coverage_corpus"}
    assert attached["bm25_raw"][0].chunk_ids == retrieved["bm25_raw"][0].chunk_ids
