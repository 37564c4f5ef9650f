"""Corpus signals (register_corpus_signal): one function of the retriever object, computed at retrieval time."""

import hashlib
import math

import numpy as np
import pandas as pd
import pytest

from ragcal.embedding import ModelSpec
from ragcal.retrieval import BM25Retriever, DenseRetriever, retrieve_with, tokenize
from ragcal.retrieval.diagnostics import DIAGNOSTICS, RetrieverBatch, attach_diagnostics
from ragcal.retrieval.index import IndexOptions
from ragcal.scoring import score_table
from ragcal.signals import (
    SIGNALS,
    CorpusBatch,
    compute_signals,
    compute_signals_batch,
    get_signal,
    register_corpus_signal,
    register_signal,
    unregister_signal,
)

TEXTS = ["apple banana apple", "banana cherry", "cherry date", "date elder"]
IDS = [f"p{n}.md#0" for n in range(len(TEXTS))]
QUERIES = ["apple zebra", "cherry", "zebra", "", "banana date elder"]


def unknown_words(batch):
    """How many of the query's tokens occur in no chunk of the retriever that searched it."""
    return [np.isnan(batch.retriever.idf(tokenize(query))).sum() for query in batch.queries]


@pytest.fixture
def unknown_words_signal():
    register_corpus_signal("bm25_unknown_words_test", retriever="bm25_raw", higher_is_answerable=False)(unknown_words)
    yield "bm25_unknown_words_test"
    if "bm25_unknown_words_test" in SIGNALS:
        unregister_signal("bm25_unknown_words_test")


def test_a_corpus_signal_is_one_function_and_one_registry_line(unknown_words_signal):
    retriever = BM25Retriever(IDS, TEXTS)
    retrieved = retrieve_with({"bm25_raw": retriever}, QUERIES)
    # Computed at retrieval time, stored in the info of the named retriever's results under the signal's name.
    expected = [1.0, 0.0, 1.0, 0.0, 0.0]
    assert [result.info[unknown_words_signal] for result in retrieved["bm25_raw"]] == expected
    signal = get_signal(unknown_words_signal)
    assert signal.retrievers == ("bm25_raw",) and not signal.higher_is_answerable and signal.corpus is unknown_words
    assert signal.description == "How many of the query's tokens occur in no chunk of the retriever that searched it."
    # Every table picks it up; the per-query form (what a gate calls) gives the same values.
    queries = pd.DataFrame({"id": list("abcde"), "query": QUERIES, "answerable": [True] * 5, "slice": ["x"] * 5})
    table = score_table(queries, retrieved)
    assert table[unknown_words_signal].tolist() == expected
    for position in range(len(QUERIES)):
        one = {"bm25_raw": retrieved["bm25_raw"][position]}
        assert signal(one) == expected[position] == compute_signals(one)[unknown_words_signal]


def test_a_corpus_signal_reads_only_the_retriever_that_searched(unknown_words_signal):
    # A caller who may not see the "zebra" page gets a retriever without it; the restricted page must not count.
    allowed = BM25Retriever(IDS, TEXTS)
    everything = BM25Retriever([*IDS, "secret.md#0"], [*TEXTS, "zebra stripes"])
    retrieved = {"bm25_raw": allowed.search(["apple zebra"])}
    restricted = attach_diagnostics(retrieved, ["apple zebra"], {"bm25_raw": allowed})
    leaked = attach_diagnostics(retrieved, ["apple zebra"], {"bm25_raw": everything})
    assert restricted["bm25_raw"][0].info[unknown_words_signal] == 1.0
    assert leaked["bm25_raw"][0].info[unknown_words_signal] == 0.0
    # Another retriever name does not run it; results retrieved without it give NaN.
    other = attach_diagnostics({"bm25_stopwords": retrieved["bm25_raw"]}, ["apple zebra"], {"bm25_stopwords": allowed})
    assert unknown_words_signal not in other["bm25_stopwords"][0].info
    assert math.isnan(compute_signals_batch(retrieved, [unknown_words_signal])[unknown_words_signal][0])


def test_a_dense_corpus_signal_sees_the_query_vectors_and_keeps_corpus_numbers_per_retriever():
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((12, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    dense = DenseRetriever([f"p{n % 4}.md#{n}" for n in range(12)], vectors)
    queries = rng.standard_normal((5, 8))
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    builds = []

    def centroid(retriever):
        builds.append(retriever)
        mean = np.asarray(retriever.chunk_vectors(), dtype=np.float64).mean(axis=0)
        return mean / np.linalg.norm(mean)

    @register_corpus_signal("dense_top1_over_centroid_test", retriever="dense")
    def dense_top1_over_centroid_test(batch):
        """Best cosine minus the query's cosine to the unit mean chunk embedding."""
        assert isinstance(batch, CorpusBatch) and batch.name == "dense" and batch.retriever is dense
        return batch.top_scores("dense", 1)[:, 0] - batch.query_vectors @ batch.per_retriever("centroid", centroid)

    try:
        texts = [f"q{n}" for n in range(5)]
        retrieved = {"dense": dense.search_vectors(queries, k=5)}
        first = attach_diagnostics(retrieved, texts, {"dense": dense}, query_vectors=queries)
        two = {"dense": retrieved["dense"][:2]}
        again = attach_diagnostics(two, texts[:2], {"dense": dense}, query_vectors=queries[:2])
        assert len(builds) == 1  # the corpus-level number is computed once per retriever object
        mean = vectors.astype(np.float64).mean(axis=0)
        expected = [result.scores[0] for result in retrieved["dense"]] - queries @ (mean / np.linalg.norm(mean))
        values = [result.info["dense_top1_over_centroid_test"] for result in first["dense"]]
        np.testing.assert_allclose(values, expected, rtol=0, atol=1e-12)
        np.testing.assert_allclose(  # another batch: BLAS may round the last bit apart
            [result.info["dense_top1_over_centroid_test"] for result in again["dense"]], values[:2], rtol=0, atol=1e-14
        )
        # Beside the built-in dense diagnostics, after them.
        assert list(first["dense"][0].info)[-1] == "dense_top1_over_centroid_test"
    finally:
        unregister_signal("dense_top1_over_centroid_test")


def test_registering_and_unregistering_keep_the_two_registries_together(unknown_words_signal):
    assert DIAGNOSTICS[unknown_words_signal].retriever == "bm25_raw"
    # The same place again replaces both silently; another place is refused, unless replace=True.
    register_corpus_signal(unknown_words_signal, retriever="bm25_raw")(unknown_words)

    def elsewhere(batch):
        return np.zeros(len(batch))

    with pytest.raises(ValueError, match="already registered by test_corpus_signals.unknown_words"):
        register_corpus_signal(unknown_words_signal, retriever="bm25_raw")(elsewhere)
    assert DIAGNOSTICS[unknown_words_signal].function.__wrapped__ is unknown_words
    # A plain signal that replaces a corpus signal takes the diagnostic away with it.
    register_signal(unknown_words_signal, retrievers=("bm25_raw",), replace=True)(lambda results: 0.0)
    assert unknown_words_signal not in DIAGNOSTICS
    register_corpus_signal(unknown_words_signal, retriever="bm25_raw", replace=True)(unknown_words)
    unregister_signal(unknown_words_signal)
    assert unknown_words_signal not in DIAGNOSTICS and unknown_words_signal not in SIGNALS


def test_a_corpus_signal_may_not_take_an_info_key_a_diagnostic_writes():
    with pytest.raises(ValueError, match="would write the info keys \\['clarity'\\], which diagnostic 'bm25 clarity'"):
        register_corpus_signal("clarity", retriever="bm25_stopwords")(unknown_words)
    assert "clarity" not in SIGNALS
    with pytest.raises(ValueError, match="The 'retriever' parameter of register_corpus_signal must be a retriever name"):
        register_corpus_signal("no_retriever_test", retriever=("dense",))(unknown_words)


def test_a_corpus_signal_returns_one_value_per_query():
    @register_corpus_signal("wrong_shape_test", retriever="bm25_raw")
    def wrong_shape_test(batch):
        return np.zeros(len(batch) + 1)

    try:
        retriever = BM25Retriever(IDS, TEXTS)
        with pytest.raises(ValueError, match="diagnostic 'wrong_shape_test' must return one value per query"):
            retrieve_with({"bm25_raw": retriever}, QUERIES)
    finally:
        unregister_signal("wrong_shape_test")


def test_a_retriever_batch_checks_its_input():
    retriever = BM25Retriever(IDS, TEXTS)
    with pytest.raises(ValueError, match="2 queries but 1 results"):
        RetrieverBatch(retriever, ["apple", "date"], retriever.search(["apple"]))
    with pytest.raises(ValueError, match="1 queries but 2 query vectors"):
        RetrieverBatch(retriever, ["apple"], retriever.search(["apple"]), query_vectors=np.zeros((2, 3)))
    batch = CorpusBatch(RetrieverBatch(retriever, ["apple"], retriever.search(["apple"]), name="bm25_raw"))
    assert batch.queries == ["apple"] and batch.query_vectors is None and batch.positions()[0].tolist() == [0]


class WordHashEmbedder:
    """A deterministic bag-of-hashed-words embedder (no model), with the interface build_index needs."""

    dimension = 32
    spec = ModelSpec("word-hash-32", "word-hash-32", None)
    fingerprint = "word-hash-32@test"

    def encode(self, texts, *, show_progress_bar=None):
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        vectors[:, 0] = 0.5  # never the zero vector
        for row, text in enumerate(texts):
            for word in str(text).lower().split():
                vectors[row, int(hashlib.sha256(word.encode()).hexdigest()[:8], 16) % self.dimension] += 1.0
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_a_corpus_signal_through_an_index_and_an_access_view(fastapi_slice, tmp_path):
    from ragcal.access import AccessPolicy
    from ragcal.retrieval.index import build_index

    @register_corpus_signal("dense_centroid_gap_test", retriever="dense")
    def dense_centroid_gap_test(batch):
        """Best cosine minus the query's cosine to the unit mean chunk embedding of the retriever that searched."""
        mean = batch.per_retriever("mean", lambda dense: np.asarray(dense.chunk_vectors(), np.float64).mean(axis=0))
        return batch.top_scores("dense", 1)[:, 0] - batch.query_vectors @ (mean / np.linalg.norm(mean))

    try:
        access_map = tmp_path / "access.csv"
        access_map.write_text("path_glob,level\nadvanced/response-cookies.md,internal\n")
        policy = AccessPolicy.from_options(access_map=access_map)
        index = build_index(fastapi_slice, embedder=WordHashEmbedder(), options=IndexOptions(access=policy))
        view = index.restrict(["public"])
        texts = ["How do I set a cookie on the response?", "CORS middleware origins"]
        through_view = index.retrieve(texts, allowed_levels=["public"])
        everything = index.retrieve(texts)
        vectors = view.dense.encode_queries(texts).astype(np.float64)
        mean = np.asarray(view.dense.chunk_vectors(), np.float64).mean(axis=0)
        expected = [result.scores[0] for result in through_view["dense"]] - vectors @ (mean / np.linalg.norm(mean))
        table = score_table(
            pd.DataFrame({"id": ["a", "b"], "query": texts, "answerable": True, "slice": "s"}), through_view
        )
        np.testing.assert_allclose(table["dense_centroid_gap_test"], expected, rtol=0, atol=1e-12)
        # The hidden page moves the full index's value, never the view's.
        assert everything["dense"][0].info["dense_centroid_gap_test"] != table["dense_centroid_gap_test"][0]
    finally:
        unregister_signal("dense_centroid_gap_test")
