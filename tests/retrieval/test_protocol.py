"""The retriever protocol and retrieve_with, on ragcal's own retrievers and on made-up engines."""

import numpy as np
import pytest

from ragcal.retrieval import BM25Retriever, DenseRetriever, RetrievalResult, reciprocal_rank_fusion
from ragcal.retrieval.protocol import Retriever, retrieve_with

TEXTS = ["set a cookie on the response", "allow cross origin requests", "upload a file", "background tasks"]
IDS = [f"doc{n}.md#0" for n in range(len(TEXTS))]


class FixedEngine:
    """Returns the same ranking for every query."""

    def __init__(self, name, ids, scores):
        self.name, self.ids, self.scores = name, ids, scores

    def search(self, queries, *, k):
        return [RetrievalResult(self.name, self.ids[:k], self.scores[:k]) for _ in queries]


def test_ragcal_retrievers_meet_the_protocol():
    assert isinstance(BM25Retriever(IDS, TEXTS), Retriever)
    assert isinstance(DenseRetriever(IDS, np.eye(4, dtype=np.float32)), Retriever)
    assert not isinstance(object(), Retriever)


def test_results_are_keyed_by_name_and_fused_like_the_index():
    dense = FixedEngine("dense", ["doc2.md#0", "doc0.md#0"], [0.8, 0.5])
    bm25 = BM25Retriever(IDS, TEXTS, variant="stopwords")
    retrieved = retrieve_with({"dense": dense, "bm25_stopwords": bm25}, ["cookie response", "upload"], k=10)
    assert set(retrieved) == {"dense", "bm25_stopwords", "rrf"}
    for position, query in enumerate(["cookie response", "upload"]):
        expected = reciprocal_rank_fusion(
            [dense.search([query], k=10)[0], bm25.search_one(query, k=10)], k=60, depth=10, top=50
        )
        assert retrieved["rrf"][position].chunk_ids == expected.chunk_ids
        np.testing.assert_array_equal(retrieved["rrf"][position].scores, expected.scores)
    # A sequence is keyed by each retriever's own name; without both fused names there is no "rrf".
    assert set(retrieve_with([dense], ["q"])) == {"dense"}


def test_unconverted_distances_are_refused():
    distances = FixedEngine("dense", ["a#0", "b#0"], [0.1, 0.4])  # ascending: distances, not similarities
    with pytest.raises(ValueError, match=r"query 0: scores increase down the ranking.*1 - cosine distance"):
        retrieve_with({"dense": distances}, ["q"])


def test_broken_engines_are_named():
    with pytest.raises(TypeError, match="object is not a ragcal retriever"):
        retrieve_with({"dense": object()}, ["q"])

    class TooFew(FixedEngine):
        def search(self, queries, *, k):
            return []

    with pytest.raises(ValueError, match="retriever 'dense' returned 0 results for 2 queries"):
        retrieve_with({"dense": TooFew("dense", [], [])}, ["q1", "q2"])

    class Tuples(FixedEngine):
        def search(self, queries, *, k):
            return [("a#0", 0.5) for _ in queries]

    with pytest.raises(TypeError, match="query 0: expected a RetrievalResult, got tuple"):
        retrieve_with({"dense": Tuples("dense", [], [])}, ["q"])


def test_ragcal_retrievers_bring_their_diagnostics_through_retrieve_with():
    """A brought-in dense engine plus ragcal's BM25: the lexical signals work; only the engine's own are missing."""
    from ragcal.signals import compute_signals

    engine = FixedEngine("dense", ["doc2.md#0", "doc0.md#0"], [0.8, 0.5])
    raw, stop = BM25Retriever(IDS, TEXTS), BM25Retriever(IDS, TEXTS, variant="stopwords")
    retrieved = retrieve_with({"dense": engine, "bm25_raw": raw, "bm25_stopwords": stop}, ["cookie response zebra"])
    from ragcal.retrieval.diagnostics import BM25_KEYS

    assert list(retrieved["bm25_raw"][0].info) == list(BM25_KEYS)
    assert retrieved["dense"][0].info == {}
    values = compute_signals({name: lists[0] for name, lists in retrieved.items()})
    assert 0 < values["bm25_coverage_corpus"] < 1  # "zebra" is not in the corpus
    assert np.isnan(values["dense_centroid_cosine"])  # the engine brings no chunk vectors
    assert np.isnan(values["dense_nqc"]) and np.isnan(values["dense_perturbation_jaccard"])  # nor a corpus score
    assert values["bm25_clarity_stopwords"] > 0 and values["dense_sigma100"] == np.std([0.8, 0.5])
    bare = retrieve_with({"bm25_raw": raw}, ["cookie"], diagnostics=False)
    assert bare["bm25_raw"][0].info == {}
