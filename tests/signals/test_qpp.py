"""Query-performance predictors (ragcal.signals.qpp): each formula by hand, the diagnostics they read, the edge cases."""

import math

import numpy as np
import pytest

from ragcal.retrieval import BM25Retriever, DenseRetriever, RetrievalResult
from ragcal.retrieval.diagnostics import bm25_info, dense_diagnostics, dense_info
from ragcal.retrieval.diagnostics.clarity import CLARITY_LAMBDA
from ragcal.retrieval.diagnostics.perturbation import (
    PERTURBATION_NOISE,
    PERTURBATION_SEED,
    PERTURBATIONS,
    _kept_share,
)
from ragcal.signals import JUDGE_SIGNALS, QPP_SIGNALS, SIGNALS, compute_signals, compute_signals_batch, get_signal

DENSE = ("dense_nqc", "dense_wig", "dense_smv", "dense_sigma100", "dense_sigma50pct")
LEXICAL = ("bm25_nqc_stopwords", "bm25_wig_stopwords", "bm25_smv_stopwords", "bm25_sigma100_stopwords",
           "bm25_sigma50pct_stopwords")


def dense(scores, **info):
    return {"dense": RetrievalResult("dense", tuple(f"p{n}.md#0" for n in range(len(scores))), np.array(scores, float),
                                     info=info)}


def lexical(scores, **info):
    return {"bm25_stopwords": RetrievalResult(
        "bm25_stopwords", tuple(f"p{n}.md#0" for n in range(len(scores))), np.array(scores, float), info=info
    )}


def values(results, names):
    computed = compute_signals(results, list(names))
    return [computed[name] for name in names]


def population_std(scores):
    mean = sum(scores) / len(scores)
    return math.sqrt(sum((score - mean) ** 2 for score in scores) / len(scores))


def test_the_predictors_are_registered_oriented_and_described():
    # The predictors come last but for the judge signals, registered after them.
    before_judges = [name for name in SIGNALS if name not in JUDGE_SIGNALS]
    assert before_judges[-len(QPP_SIGNALS):] == list(QPP_SIGNALS)
    for name in QPP_SIGNALS:
        signal = get_signal(name)
        assert signal.higher_is_answerable and signal.description and signal.batch is not None, name
        assert not signal.passage_scale


def test_dense_formulas_by_hand():
    nqc, wig, smv, sigma, share = values(dense([0.9, 0.7, 0.5], centroid_cosine=0.2), DENSE)
    # mean 0.7, deviations 0.2, 0, -0.2: population variance 0.08 / 3.
    assert nqc == pytest.approx(math.sqrt(0.08 / 3) / 0.2, rel=1e-12)
    assert wig == pytest.approx(((0.9 - 0.2) + (0.7 - 0.2) + (0.5 - 0.2)) / 3, rel=1e-12)  # fewer than 5: all 3
    assert smv == pytest.approx((0.9 * abs(math.log(0.9 / 0.7)) + 0 + 0.5 * abs(math.log(0.5 / 0.7))) / 3 / 0.2)
    assert sigma == pytest.approx(math.sqrt(0.08 / 3), rel=1e-12)
    assert share == pytest.approx(math.sqrt(0.08 / 3), rel=1e-12)  # every cosine >= 0.45 = 50% of 0.9, |q| = 1
    # n(σ_50%) keeps 0.9 and 0.5 (>= 0.45), not 0.4: std of two numbers 0.4 apart is 0.2.
    assert values(dense([0.9, 0.5, 0.4], centroid_cosine=0.2), ["dense_sigma50pct"]) == [pytest.approx(0.2)]
    # WIG reads the top 5 only; NQC, SMV and σ the top 100.
    seven = [0.9, 0.8, 0.7, 0.6, 0.5, 0.1, 0.0]
    wig, sigma = values(dense(seven, centroid_cosine=0.1), ["dense_wig", "dense_sigma100"])
    assert wig == pytest.approx(sum(score - 0.1 for score in seven[:5]) / 5, rel=1e-12)
    assert sigma == pytest.approx(population_std(seven), rel=1e-12)
    scores = list(np.linspace(0.9, 0.1, 120))
    assert values(dense(scores, centroid_cosine=0.5), ["dense_nqc"]) == [
        pytest.approx(population_std(scores[:100]) / 0.5, rel=1e-12)
    ]


def test_dense_corpus_score_signs():
    # A negative centroid cosine: NQC and SMV divide by |s(C)|, WIG subtracts it with its sign.
    nqc, wig, smv = values(dense([0.9, 0.7, 0.5], centroid_cosine=-0.2), DENSE[:3])
    assert nqc == pytest.approx(math.sqrt(0.08 / 3) / 0.2) and wig == pytest.approx(0.7 + 0.2)
    assert smv == pytest.approx((0.9 * abs(math.log(0.9 / 0.7)) + 0.5 * abs(math.log(0.5 / 0.7))) / 3 / 0.2)
    # s(C) = 0: NQC and SMV are NaN, WIG is the mean; no diagnostics at all: all three NaN, σ still computed.
    nqc, wig, smv, sigma, _ = values(dense([0.9, 0.7, 0.5], centroid_cosine=0.0), DENSE)
    assert math.isnan(nqc) and math.isnan(smv) and wig == pytest.approx(0.7)
    nqc, wig, smv, sigma, share = values(dense([0.9, 0.7, 0.5]), DENSE)
    assert math.isnan(nqc) and math.isnan(wig) and math.isnan(smv)
    assert sigma == pytest.approx(math.sqrt(0.08 / 3)) and share == pytest.approx(math.sqrt(0.08 / 3))


def test_dense_edge_cases():
    assert all(math.isnan(value) for value in values(dense([], centroid_cosine=0.2), DENSE))  # empty: NaN
    # One hit, or all scores equal: standard deviations 0, SMV 0 (ln 1 = 0), WIG still the mean gain.
    nqc, wig, smv, sigma, share = values(dense([0.6], centroid_cosine=0.2), DENSE)
    assert (nqc, smv, sigma, share) == (0.0, 0.0, 0.0, 0.0) and wig == pytest.approx(0.4)
    nqc, wig, smv, sigma, share = values(dense([0.5, 0.5, 0.5], centroid_cosine=0.25), DENSE)
    assert (nqc, smv, sigma, share) == (0.0, 0.0, 0.0, 0.0) and wig == pytest.approx(0.25)
    # Ties with the 50% bar are kept (>=).
    assert values(dense([0.6, 0.6, 0.3], centroid_cosine=0.1), ["dense_sigma50pct"]) == [
        pytest.approx(population_std([0.6, 0.6, 0.3]))
    ]
    # Scores of both signs: SMV's logarithm is undefined (NaN); a top cosine <= 0: no 50% bar (NaN).
    assert math.isnan(values(dense([0.3, -0.1], centroid_cosine=0.1), ["dense_smv"])[0])
    assert math.isnan(values(dense([-0.1, -0.2], centroid_cosine=0.1), ["dense_sigma50pct"])[0])
    assert math.isnan(values(dense([0.0, 0.0], centroid_cosine=0.1), ["dense_sigma50pct"])[0])
    # A NaN score propagates.
    assert all(math.isnan(value) for value in values(dense([0.7, np.nan, 0.2], centroid_cosine=0.1), DENSE))


def test_bm25_formulas_by_hand():
    info = {"corpus_score": 2.0, "query_terms": 4.0}
    nqc, wig, smv, sigma, share = values(lexical([9.0, 8.0, 7.0], **info), LEXICAL)
    assert nqc == pytest.approx(math.sqrt(2 / 3) / 2.0, rel=1e-12)  # std of 9, 8, 7 over s(C) = 2
    assert wig == pytest.approx(((9 - 2) + (8 - 2) + (7 - 2)) / 3 / math.sqrt(4), rel=1e-12)
    assert smv == pytest.approx((9 * abs(math.log(9 / 8)) + 0 + 7 * abs(math.log(7 / 8))) / 3 / 2.0, rel=1e-12)
    assert sigma == pytest.approx(math.sqrt(2 / 3), rel=1e-12)
    assert share == pytest.approx(math.sqrt(2 / 3) / math.sqrt(4), rel=1e-12)  # all >= 4.5, over sqrt(|q|)
    # A negative corpus score (IDF floors below 0): NQC and SMV by |s(C)|, WIG minus s(C).
    nqc, wig, smv = values(lexical([9.0, 8.0, 7.0], corpus_score=-1.0, query_terms=1.0), LEXICAL[:3])
    assert nqc == pytest.approx(math.sqrt(2 / 3)) and wig == pytest.approx(9.0)
    assert smv == pytest.approx((9 * abs(math.log(9 / 8)) + 7 * abs(math.log(7 / 8))) / 3)
    # A zero score contributes 0 to SMV (s ln s -> 0).
    assert values(lexical([2.0, 0.0], **info), ["bm25_smv_stopwords"]) == [
        pytest.approx((2 * abs(math.log(2 / 1)) + 0) / 2 / 2.0)
    ]


def test_bm25_edge_cases():
    # Nothing matched (the query had tokens): 0, like bm25_top1; also when s(C) is 0 then.
    assert values(lexical([], corpus_score=0.0, query_terms=0.0), LEXICAL) == [0.0] * 5
    # A query with no token (NaN diagnostics): NaN for those that read them, 0 for σ_100 (no list, no spread).
    nqc, wig, smv, sigma, share = values(lexical([], corpus_score=np.nan, query_terms=np.nan), LEXICAL)
    assert all(math.isnan(value) for value in (nqc, wig, smv, share)) and sigma == 0.0
    # A list but no diagnostics (a user's own retriever): NaN for those that read them.
    nqc, wig, smv, sigma, share = values(lexical([3.0, 1.0]), LEXICAL)
    assert all(math.isnan(value) for value in (nqc, wig, smv, share)) and sigma == 1.0
    # s(C) = 0 with a list: NaN for NQC and SMV.
    nqc, _, smv, _, _ = values(lexical([3.0, 1.0], corpus_score=0.0, query_terms=1.0), LEXICAL)
    assert math.isnan(nqc) and math.isnan(smv)


# --------------------------------------------------------------------------- BM25 diagnostics: s(C), |q|, clarity

IDS = ["a.md#0", "b.md#0", "c.md#0"]
TEXTS = ["apple banana", "apple apple cherry", "cherry date elder"]


@pytest.mark.parametrize("backend", ["sparse", "rank_bm25"])
def test_corpus_score_and_clarity_by_hand(backend):
    retriever = BM25Retriever(IDS, TEXTS, variant="stopwords", backend=backend)
    result = retriever.search_one("apple")
    info = bm25_info(retriever, "apple", result)
    # s(C): "apple" in the collection as one document: cf = 3, length N * avgdl, so |C| / avgdl = N = 3.
    k1, b, idf = 1.5, 0.75, float(retriever.idf(["apple"])[0])
    assert info["corpus_score"] == pytest.approx(idf * 3 * (k1 + 1) / (3 + k1 * (1 - b + b * 3)), rel=1e-12)
    assert info["query_terms"] == 1.0
    # Clarity. |D| = 2, 3, 3; |C| = 8; P_coll: apple 3/8, banana 1/8, cherry 2/8. Matched: a (1 apple), b (2).
    lam = CLARITY_LAMBDA
    likelihood = {"a": lam * 1 / 2 + (1 - lam) * 3 / 8, "b": lam * 2 / 3 + (1 - lam) * 3 / 8}  # 0.45, 0.55
    weight = {doc: value / sum(likelihood.values()) for doc, value in likelihood.items()}
    own = {"a": {"apple": 1 / 2, "banana": 1 / 2}, "b": {"apple": 2 / 3, "cherry": 1 / 3}}
    collection = {"apple": 3 / 8, "banana": 1 / 8, "cherry": 2 / 8}
    query_model = {
        term: sum(weight[doc] * (lam * own[doc].get(term, 0.0) + (1 - lam) * p_coll) for doc in weight)
        for term, p_coll in collection.items()
    }
    assert query_model == pytest.approx({"apple": 0.505, "banana": 0.185, "cherry": 0.21})
    expected = sum(p * math.log2(p / collection[term]) for term, p in query_model.items())
    assert info["clarity"] == pytest.approx(expected, rel=1e-12)
    # The raw variant has no clarity (stop words would dominate both models); its s(C) is there.
    raw = BM25Retriever(IDS, TEXTS, variant="raw", backend=backend)
    raw_info = bm25_info(raw, "apple", raw.search_one("apple"))
    assert math.isnan(raw_info["clarity"]) and raw_info["corpus_score"] == pytest.approx(info["corpus_score"])


def test_clarity_counts_repeated_query_terms_and_reads_the_top_chunks_only():
    retriever = BM25Retriever(IDS, TEXTS, variant="stopwords")
    query = "apple apple banana"
    info = bm25_info(retriever, query, retriever.search_one(query))
    k1, b = 1.5, 0.75
    idf_apple, idf_banana = retriever.idf(["apple", "banana"]).tolist()
    per_term = {"apple": idf_apple * 3 * (k1 + 1) / (3 + k1 * (1 - b + b * 3)),
                "banana": idf_banana * 1 * (k1 + 1) / (1 + k1 * (1 - b + b * 3))}
    assert info["corpus_score"] == pytest.approx(2 * per_term["apple"] + per_term["banana"], rel=1e-12)
    assert info["query_terms"] == 3.0
    lam = CLARITY_LAMBDA
    p_apple = {"a": lam / 2 + (1 - lam) * 3 / 8, "b": lam * 2 / 3 + (1 - lam) * 3 / 8}
    p_banana = {"a": lam / 2 + (1 - lam) / 8, "b": (1 - lam) / 8}
    likelihood = {doc: p_apple[doc] ** 2 * p_banana[doc] for doc in ("a", "b")}  # P(Q|D), apple twice
    weight = {doc: value / sum(likelihood.values()) for doc, value in likelihood.items()}
    own = {"a": {"apple": 1 / 2, "banana": 1 / 2}, "b": {"apple": 2 / 3, "cherry": 1 / 3}}
    collection = {"apple": 3 / 8, "banana": 1 / 8, "cherry": 2 / 8}
    expected = 0.0
    for term, p_coll in collection.items():
        p = sum(weight[doc] * (lam * own[doc].get(term, 0.0) + (1 - lam) * p_coll) for doc in weight)
        expected += p * math.log2(p / p_coll)
    assert info["clarity"] == pytest.approx(expected, rel=1e-12)
    # The model of the top chunk alone (depth 1): one document, weight 1.
    from ragcal.retrieval.diagnostics import RetrieverBatch
    from ragcal.retrieval.diagnostics.clarity import clarity_column

    result = retriever.search_one("cherry")  # one distinct term, "cherry", once
    one = clarity_column(RetrieverBatch(retriever, ["cherry"], [result]), depth=1)
    top = result.chunk_ids[0]
    words = {"b.md#0": {"apple": 2 / 3, "cherry": 1 / 3}, "c.md#0": {"cherry": 1 / 3, "date": 1 / 3, "elder": 1 / 3}}
    background = {"apple": 3 / 8, "cherry": 2 / 8, "date": 1 / 8, "elder": 1 / 8}
    by_hand = sum(
        (lam * share + (1 - lam) * background[word]) * math.log2((lam * share + (1 - lam) * background[word])
                                                                   / background[word])
        for word, share in words[top].items()
    )
    assert one[0] == pytest.approx(by_hand, rel=1e-12)


def test_clarity_edge_cases():
    retriever = BM25Retriever(IDS, TEXTS, variant="stopwords")
    assert bm25_info(retriever, "zebra", retriever.search_one("zebra"))["clarity"] == 0.0  # nothing matched
    assert math.isnan(bm25_info(retriever, "the of", retriever.search_one("the of"))["clarity"])  # no token
    # Every chunk the same text: the top chunks' model, smoothed, is the collection's plus a share of itself.
    same = BM25Retriever(["a.md#0", "b.md#0"], ["apple banana", "apple banana"], variant="stopwords")
    info = bm25_info(same, "apple", same.search_one("apple"))
    # P(w|Q) = 0.6 * 1/2 + 0.4 * 1/2 = 1/2 = P_coll(w) for both words: clarity 0.
    assert info["clarity"] == pytest.approx(0.0, abs=1e-15)
    compute = compute_signals({"bm25_stopwords": same.search_one("apple")._with_info(info)}, ["bm25_clarity_stopwords"])
    assert compute["bm25_clarity_stopwords"] == info["clarity"]


# --------------------------------------------------------------------------- dense perturbation stability


def unit(rows):
    rows = np.asarray(rows, dtype=np.float64)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def crowded_retriever(n_chunks=40, dimension=16, seed=5):
    rng = np.random.default_rng(seed)
    vectors = unit(rng.standard_normal((n_chunks, dimension))).astype(np.float32)
    return DenseRetriever([f"p{n}.md#0" for n in range(n_chunks)], vectors)


def perturbed_jaccard_by_hand(retriever, query, result):
    """The documented computation, spelled out: shared Gaussian noise, rank the candidates, Jaccard of the top 10."""
    dimension = retriever.index.d
    noise = np.random.default_rng(PERTURBATION_SEED).standard_normal((PERTURBATIONS, dimension))
    noise *= PERTURBATION_NOISE / math.sqrt(dimension)
    vectors = retriever.index.reconstruct_batch(result.positions.astype(np.int64)).astype(np.float64)
    original = set(result.chunk_ids[:10])
    overlaps = []
    for vector in noise:
        scores = result.scores + vectors @ vector  # (q + e).v: the result's own q.v plus e.v
        order = np.argsort(-scores, kind="stable")[:10]
        perturbed = {result.chunk_ids[i] for i in order}
        overlaps.append(len(original & perturbed) / len(original | perturbed))
    return sum(overlaps) / len(overlaps)


def test_perturbation_jaccard_by_hand():
    retriever = crowded_retriever()
    queries = unit(np.random.default_rng(9).standard_normal((6, 16)))
    results = retriever.search_vectors(queries, k=100)
    columns = dense_diagnostics(retriever, queries, results=results)
    by_hand = [perturbed_jaccard_by_hand(retriever, query, result) for query, result in zip(queries, results)]
    np.testing.assert_allclose(columns["perturbation_jaccard"], by_hand, rtol=1e-12)
    assert (columns["perturbation_jaccard"] < 1).any()  # 40 random chunks in 16 dimensions: crowded lists move
    # Alone, in another batch, or searched by the diagnostics themselves: the same value (the noise is shared).
    for position in (0, 3):
        alone = dense_info(retriever, queries[position])[0]["perturbation_jaccard"]
        assert alone == columns["perturbation_jaccard"][position]
    shuffled = dense_diagnostics(retriever, queries[::-1], results=results[::-1])["perturbation_jaccard"]
    np.testing.assert_array_equal(shuffled, columns["perturbation_jaccard"][::-1])


def test_perturbation_jaccard_of_a_clear_winner_is_one_and_edge_cases():
    # Ten chunks at cosine ~0.99 and thirty far away: no small perturbation changes the top 10.
    dimension = 16
    query = np.zeros(dimension)
    query[0] = 1.0
    rng = np.random.default_rng(1)
    near = unit(np.hstack([np.ones((10, 1)) * 10, rng.standard_normal((10, dimension - 1)) * 0.1]))
    far = unit(np.hstack([np.zeros((30, 1)), rng.standard_normal((30, dimension - 1))]))
    retriever = DenseRetriever([f"p{n}.md#0" for n in range(40)], np.vstack([near, far]).astype(np.float32))
    assert dense_info(retriever, query)[0]["perturbation_jaccard"] == 1.0
    # At most ten chunks: nothing can move in or out; no chunk at all: NaN.
    small = DenseRetriever([f"p{n}.md#0" for n in range(8)], near[:8].astype(np.float32))
    assert dense_info(small, query)[0]["perturbation_jaccard"] == 1.0
    empty = DenseRetriever([], np.zeros((0, dimension), np.float32))
    assert math.isnan(dense_info(empty, query)[0]["perturbation_jaccard"])
    # An empty result (e.g. depth 0) has NaN; qpp=False leaves the key out.
    blank = RetrievalResult("dense", (), np.empty(0))
    assert math.isnan(dense_diagnostics(retriever, query, results=[blank])["perturbation_jaccard"][0])
    assert list(dense_diagnostics(retriever, query, qpp=False)) == ["centroid_cosine", "page_knn_cosine"]
    # The signal reads the diagnostic.
    result = retriever.search_vectors(query, k=100)[0]
    stamped = result._with_info(dense_info(retriever, query, results=[result])[0])
    assert compute_signals({"dense": stamped}, ["dense_perturbation_jaccard"]) == {"dense_perturbation_jaccard": 1.0}


def test_kept_share_breaks_ties_like_a_stable_sort():
    rng = np.random.default_rng(4)
    perturbed = rng.integers(0, 6, size=(50, 30, 4)).astype(float)  # many ties, also at the bar
    expected = np.empty((50, 4))
    for query in range(50):
        for p in range(4):
            order = np.argsort(-perturbed[query, :, p], kind="stable")[:10]
            kept = int((order < 10).sum())
            expected[query, p] = kept / (20 - kept)
    np.testing.assert_array_equal(_kept_share(perturbed, 10), expected.mean(axis=1))


def test_qpp_signals_in_a_batch_are_those_of_each_query():
    # A hand-made batch with every edge case: its batch values are the per-query values bit for bit.
    batch = {
        "dense": [dense(scores, **info)["dense"] for scores, info in (
            ([0.9, 0.7, 0.5], {"centroid_cosine": 0.2, "perturbation_jaccard": 0.8}), ([], {}),
            ([0.6], {"centroid_cosine": -0.1}), (list(np.linspace(0.9, 0.1, 120)), {"centroid_cosine": 0.3}),
            ([0.7, np.nan], {"centroid_cosine": 0.1}),
        )],
        "bm25_stopwords": [lexical(scores, **info)["bm25_stopwords"] for scores, info in (
            ([9.0, 8.0, 7.0], {"corpus_score": 2.0, "query_terms": 4.0, "clarity": 1.5}),
            ([], {"corpus_score": 0.0, "query_terms": 0.0, "clarity": 0.0}),
            ([], {"corpus_score": np.nan, "query_terms": np.nan, "clarity": np.nan}),
            (list(np.linspace(12, 1, 130)), {"corpus_score": 0.5, "query_terms": 2.0}), ([3.0], {}),
        )],
    }
    columns = compute_signals_batch(batch, QPP_SIGNALS)
    for name in QPP_SIGNALS:
        one_by_one = [get_signal(name)({key: lists[p] for key, lists in batch.items()}) for p in range(5)]
        np.testing.assert_array_equal(columns[name], one_by_one, err_msg=name)
    assert columns["bm25_clarity_stopwords"].tolist()[:2] == [1.5, 0.0]
    assert columns["dense_perturbation_jaccard"][0] == 0.8 and math.isnan(columns["dense_perturbation_jaccard"][1])
