import numpy as np
import pytest

from ragcal.retrieval import RetrievalResult, reciprocal_rank_fusion


def result(name, ids):
    return RetrievalResult(name, tuple(ids), np.linspace(1, 0, len(ids)) if ids else np.empty(0))


def test_scores_follow_the_formula():
    dense = result("dense", ["a", "b", "c"])
    bm25 = result("bm25", ["c", "a", "d"])
    fused = reciprocal_rank_fusion([dense, bm25], k=60)
    expected = {
        "a": 1 / (60 + 1) + 1 / (60 + 2),
        "c": 1 / (60 + 3) + 1 / (60 + 1),
        "b": 1 / (60 + 2),
        "d": 1 / (60 + 3),
    }
    assert fused.chunk_ids == ("a", "c", "b", "d")
    np.testing.assert_allclose(fused.scores, [expected[chunk_id] for chunk_id in fused.chunk_ids])
    assert fused.retriever == "rrf"


def test_depth_and_top_cut_the_lists():
    dense = result("dense", ["a", "b", "c"])
    bm25 = result("bm25", ["c", "b", "a"])
    fused = reciprocal_rank_fusion([dense, bm25], k=0, depth=1, top=5)
    # Only rank 1 of each list counts: a and c get 1/(0+1) each.
    assert set(fused.chunk_ids) == {"a", "c"}
    np.testing.assert_allclose(fused.scores, [1.0, 1.0])
    assert len(reciprocal_rank_fusion([dense, bm25], top=2)) == 2


def test_ties_are_broken_by_best_rank_then_id():
    fused = reciprocal_rank_fusion([result("x", ["b", "a"]), result("y", ["a", "b"])])
    # Both have 1/61 + 1/62; both best rank 1; so by id.
    assert fused.chunk_ids == ("a", "b")
    assert fused.scores[0] == fused.scores[1]
    uneven = reciprocal_rank_fusion([result("x", ["p", "q", "r"]), result("y", ["q"])], k=1)
    # q: 1/3 + 1/2; p: 1/2; tie-free order q, p, r.
    assert uneven.chunk_ids == ("q", "p", "r")


def test_empty_inputs_give_an_empty_result():
    assert reciprocal_rank_fusion([]).is_empty
    fused = reciprocal_rank_fusion([result("x", []), result("y", ["a"])])
    assert fused.chunk_ids == ("a",)


@pytest.mark.parametrize("options, parameter", [({"k": -1}, "'k'"), ({"depth": 0}, "'depth'"), ({"top": 0}, "'top'")])
def test_bad_parameters_are_named(options, parameter):
    with pytest.raises(ValueError, match=parameter):
        reciprocal_rank_fusion([result("x", ["a"])], **options)
