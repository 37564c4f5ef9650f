import math

import numpy as np
import pytest

from ragcal.retrieval import BM25Retriever, DenseRetriever, RetrievalResult
from ragcal.retrieval.diagnostics import BM25_KEYS, attach_diagnostics, bm25_info, dense_info

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
    assert info == {"max_score": 0.0, "coverage_top": 0.0, "coverage_corpus": 0.0, "corpus_score": 0.0,
                    "query_terms": 0.0, "clarity": 0.0}
    # Without the QPP keys, the diagnostics before issue 21.
    info = bm25_info(retriever, "zebra", retriever.search_one("zebra"), qpp=False)
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
    assert set(attached["bm25_raw"][0].info) == set(BM25_KEYS)
    assert attached["bm25_raw"][0].chunk_ids == retrieved["bm25_raw"][0].chunk_ids


# --------------------------------------------------------------------------- batches


def same_info(first: dict, second: dict) -> bool:
    return list(first) == list(second) and np.array_equal(list(first.values()), list(second.values()), equal_nan=True)


BATCH = [
    "apple cherry zebra apple",  # a repeated term and one the corpus lacks
    "the of and",  # only stop words: no token for the "stopwords" variant
    "zebra",  # no term in the corpus: nothing matches
    "",  # no token at all
    "banana banana banana date elder apple cherry",
    "date",
]


@pytest.mark.parametrize("variant", ["raw", "stopwords"])
@pytest.mark.parametrize("backend", ["sparse", "rank_bm25"])
def test_bm25_diagnostics_of_a_batch_are_those_of_each_query(variant, backend):
    from ragcal.retrieval.diagnostics import bm25_diagnostics

    retriever = BM25Retriever(IDS, [*TEXTS[:3], "date elder the"], variant=variant, backend=backend)
    results = retriever.search(BATCH, k=3)
    columns = bm25_diagnostics(retriever, BATCH, results, depth=2)
    assert list(columns) == list(BM25_KEYS)
    for position, (query, result) in enumerate(zip(BATCH, results)):
        alone = bm25_info(retriever, query, result, depth=2)
        assert same_info({key: float(values[position]) for key, values in columns.items()}, alone)
    assert all(math.isnan(values[3]) for values in columns.values())  # no token
    nothing = {key: float(values[2]) for key, values in columns.items()}  # nothing in the corpus
    assert math.isnan(nothing.pop("clarity")) if variant == "raw" else nothing.pop("clarity") == 0.0
    assert list(nothing.values()) == [0.0] * 5
    # The scorer's own numbers: the rank_bm25 reference backend gives the same as the sparse one.
    other = BM25Retriever(IDS, [*TEXTS[:3], "date elder the"], variant=variant,
                          backend="sparse" if backend == "rank_bm25" else "rank_bm25")
    again = bm25_diagnostics(other, BATCH, other.search(BATCH, k=3), depth=2)
    for key in columns:
        np.testing.assert_allclose(again[key], columns[key], rtol=1e-12, atol=0)


def test_bm25_diagnostics_check_their_input():
    from ragcal.retrieval.diagnostics import bm25_diagnostics

    retriever = BM25Retriever(IDS, TEXTS)
    with pytest.raises(ValueError, match="2 queries but 1 results"):
        bm25_diagnostics(retriever, ["apple", "date"], retriever.search(["apple"]))
    with pytest.raises(ValueError, match="'depth' parameter of bm25_diagnostics must be an int >= 0. Got -1"):
        bm25_diagnostics(retriever, ["apple"], retriever.search(["apple"]), depth=-1)


def test_dense_diagnostics_are_the_plain_products():
    # Computed with np.einsum (the same bits on every processor, unlike BLAS): the plain products to 1e-12.
    from ragcal.retrieval.diagnostics import dense_diagnostics

    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((40, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    retriever = DenseRetriever([f"p{n % 9}.md#{n}" for n in range(40)], vectors)
    queries = rng.standard_normal((600, 384))  # large enough for a multi-threaded OpenBLAS to split the products
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    columns = dense_diagnostics(retriever, queries, neighbours=3)
    stored = vectors.astype(np.float64)
    centroid = stored.mean(axis=0) / np.linalg.norm(stored.mean(axis=0))
    pages = np.array([stored[[n for n in range(40) if n % 9 == page]].sum(axis=0) for page in range(9)])
    pages /= np.linalg.norm(pages, axis=1, keepdims=True)
    np.testing.assert_allclose(columns["centroid_cosine"], queries @ centroid, rtol=0, atol=1e-12)
    nearest = np.sort(queries @ pages.T, axis=1)[:, ::-1][:, :3]
    np.testing.assert_allclose(columns["page_knn_cosine"], nearest.mean(axis=1), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(columns["centroid_cosine"], np.einsum("qd,pd->qp", queries, centroid[None, :])[:, 0])
    # A query's row does not depend on the batch it came in: dense_info of two queries gives the same bits.
    rows = dense_info(retriever, queries[:2], neighbours=3)
    assert rows == [{key: float(values[n]) for key, values in columns.items()} for n in range(2)]
    empty = DenseRetriever([], np.zeros((0, 384), np.float32))
    assert np.isnan(dense_diagnostics(empty, queries[:2])["page_knn_cosine"]).all()


def test_attach_diagnostics_stamps_every_result_of_the_batch():
    retriever = BM25Retriever(IDS, TEXTS)
    retrieved = {"bm25_raw": retriever.search(BATCH)}
    attached = attach_diagnostics(retrieved, BATCH, {"bm25_raw": retriever})["bm25_raw"]
    for query, before, after in zip(BATCH, retrieved["bm25_raw"], attached):
        assert before.info == {} and same_info(after.info, bm25_info(retriever, query, before))
        assert after.chunk_ids == before.chunk_ids and after.scores is before.scores and after.view == before.view
