import numpy as np
import pandas as pd
import pytest

from ragcal.retrieval import RetrievalResult
from ragcal.retrieval.approximate import decision_flips, synthetic_corpus, top1_comparison, topk_overlap


def result(ids, scores):
    return RetrievalResult("dense", tuple(ids), np.asarray(scores, dtype=float))


def test_top1_comparison_by_hand():
    exact = [result(["a", "b"], [0.9, 0.5]), result(["c"], [0.4]), result([], [])]
    approximate = [result(["b", "a"], [0.5, 0.4]), result(["c"], [0.4]), result([], [])]
    table = top1_comparison(exact, approximate)
    np.testing.assert_allclose(table["top1_error"].to_numpy()[:2], [0.9 - 0.5, 0.0])
    assert table["same_top1"].tolist() == [False, True, False]
    assert np.isnan(table["approximate_top1"].iloc[2])
    with pytest.raises(ValueError, match="2 exact results but 1 approximate"):
        top1_comparison(exact[:2], approximate[:1])


def test_decision_flips_counts_both_directions():
    exact = np.array([0.50, 0.48, 0.47, 0.60, np.nan])
    approximate = np.array([0.47, 0.48, 0.49, 0.60, 0.55])
    row = decision_flips(exact, approximate, {"keep@0.95": 0.48}).iloc[0]
    # 0.50 -> 0.47 refused now; 0.47 -> 0.49 answered now; NaN (nothing retrieved) -> 0.55 answered now.
    assert (row["answer_to_refuse"], row["refuse_to_answer"], row["flips"]) == (1, 2, 3)
    assert row["flip_rate"] == pytest.approx(3 / 5)
    assert row["flip_rate_low"] < 3 / 5 < row["flip_rate_high"]
    assert row["exact_answered"] == 3
    lower = decision_flips(exact, approximate, [0.48], higher_is_answerable=False).iloc[0]
    # Lower is answerable: 0.50 -> 0.47 now answered, 0.47 -> 0.49 now refused; NaN stays refused.
    assert lower["flips"] == 2 and lower["threshold_name"] == "0.48"


def test_no_flips_when_scores_agree():
    scores = np.linspace(0, 1, 11)
    table = decision_flips(scores, scores, {"a": 0.3, "b": 0.7})
    assert table["flips"].tolist() == [0, 0] and table["flip_rate_low"].tolist() == [0, 0]


def test_topk_overlap_by_hand():
    reference = [result(["a", "b", "c"], [3, 2, 1]), result([], [])]
    candidate = [result(["a", "c", "d"], [3, 1, 0]), result(["x"], [1])]
    overlap = topk_overlap(reference, candidate, k=3)
    assert overlap[0] == pytest.approx(2 / 3) and np.isnan(overlap[1])
    assert topk_overlap(reference, candidate, k=1)[0] == 1.0


def test_synthetic_corpus_is_seeded_and_labeled():
    first, second = synthetic_corpus(500, 40, dim=16, random_state=7), synthetic_corpus(500, 40, dim=16, random_state=7)
    np.testing.assert_array_equal(first.embeddings, second.embeddings)
    np.testing.assert_array_equal(first.queries, second.queries)
    np.testing.assert_allclose(np.linalg.norm(first.embeddings, axis=1), 1, atol=1e-5)
    assert first.answerable.tolist() == (first.slices == "answerable").tolist()
    assert set(pd.unique(first.slices)) <= {"answerable", "near-domain", "unrelated"}
    assert not np.array_equal(synthetic_corpus(500, 40, dim=16, random_state=8).embeddings, first.embeddings)
    with pytest.raises(ValueError, match="'n_chunks' parameter of synthetic_corpus must be an int >= 1"):
        synthetic_corpus(0, 5)
