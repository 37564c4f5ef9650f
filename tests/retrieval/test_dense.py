import numpy as np
import pytest

from ragcal.retrieval import DenseRetriever


def unit(vector):
    vector = np.asarray(vector, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def test_exact_cosine_ranking():
    vectors = np.stack([unit([1, 0, 0]), unit([1, 1, 0]), unit([0, 0, 1])])
    retriever = DenseRetriever(["x#0", "y#0", "z#0"], vectors)
    [result] = retriever.search_vectors(unit([1, 0.2, 0]), k=3)
    assert result.chunk_ids == ("x#0", "y#0", "z#0")
    expected = vectors @ unit([1, 0.2, 0])
    np.testing.assert_allclose(result.scores, np.sort(expected)[::-1], rtol=1e-6)


def test_k_larger_than_corpus_and_many_queries():
    retriever = DenseRetriever(["a#0", "b#0"], np.stack([unit([1, 0]), unit([0, 1])]))
    results = retriever.search_vectors(np.stack([unit([1, 0]), unit([0, 1])]), k=10)
    assert [result.chunk_ids[0] for result in results] == ["a#0", "b#0"]
    assert all(len(result) == 2 for result in results)
    assert retriever.search_vectors(np.zeros((0, 2)), k=3) == []


def test_search_without_embedder_is_an_error():
    retriever = DenseRetriever(["a#0"], np.stack([unit([1, 0])]))
    with pytest.raises(ValueError, match="needs an embedder"):
        retriever.search(["question"])


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="shape"):
        DenseRetriever(["a#0", "b#0"], np.ones((3, 2)))
