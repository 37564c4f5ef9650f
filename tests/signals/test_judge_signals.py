"""The judge signals against hand-computed values, on "judge" views built by judge_results with a small judge of our own."""

import math

import numpy as np
import pandas as pd
import pytest

from ragcal.judges import JUDGE, Judge, judge_results
from ragcal.retrieval import RetrievalResult
from ragcal.scoring import score_table
from ragcal.signals import compute_signals_batch, get_signal, signals_for
from ragcal.signals.judge import JUDGE_SIGNALS


class PassageTableJudge:
    """A deterministic judge of our own: a fixed probability per passage text (the protocol allows any object)."""

    name = "table"
    fingerprint = "table@1"
    trained_on = frozenset()

    def __init__(self, probabilities):
        self.probabilities = probabilities
        self.calls = []

    def score(self, questions, passages):
        self.calls.append((list(questions), list(passages)))
        return np.array([self.probabilities[passage] for passage in passages], dtype=np.float64)


# Chunk id -> passage text, and the judge's probability for each text.
TEXTS = {f"p{n}.md#0": f"passage {n}" for n in range(10)}
P = {
    "passage 0": 0.2,
    "passage 1": 0.9,
    "passage 2": 0.5,  # exactly 0.5 counts as answering
    "passage 3": 0.7,
    "passage 4": 0.4,
    "passage 5": 0.6,
    "passage 6": 0.8,
    "passage 7": 0.8,  # ties passage 6
    "passage 8": 0.49,
    "passage 9": 1.0,
}


def dense(*numbers):
    return RetrievalResult("dense", tuple(f"p{n}.md#0" for n in numbers), np.linspace(0.9, 0.4, len(numbers)))


LISTS = {
    "reordered": dense(0, 1, 2, 3),  # judge order 1, 3, 2, 0
    "one passage": dense(4),
    "nothing retrieved": dense(),
    "tie": dense(5, 7, 6),  # 7 and 6 tie at 0.8: dense order, 7 before 6
    "none answers": dense(8, 4),
}


@pytest.fixture
def judged():
    judge = PassageTableJudge(P)
    assert isinstance(judge, Judge)
    queries = [f"question {name}?" for name in LISTS]
    return judge_results(judge, queries, list(LISTS.values()), TEXTS)


def test_the_judge_view_orders_by_probability_and_keeps_the_dense_order_on_ties(judged):
    by_name = dict(zip(LISTS, judged))
    assert all(result.retriever == JUDGE for result in judged)
    assert by_name["reordered"].chunk_ids == ("p1.md#0", "p3.md#0", "p2.md#0", "p0.md#0")
    np.testing.assert_array_equal(by_name["reordered"].scores, [0.9, 0.7, 0.5, 0.2])
    assert by_name["tie"].chunk_ids == ("p7.md#0", "p6.md#0", "p5.md#0")
    assert by_name["nothing retrieved"].is_empty and math.isnan(by_name["nothing retrieved"].info["judge_at_first"])
    assert by_name["reordered"].info["judge_at_first"] == 0.2


def test_the_four_signals_against_hand_computed_values(judged):
    values = compute_signals_batch({JUDGE: judged}, JUDGE_SIGNALS)
    nan = math.nan
    expected = {
        # reordered, one passage, nothing retrieved, tie, none answers
        "judge_top1": [max(0.2, 0.9, 0.5, 0.7), 0.4, nan, 0.8, 0.49],
        "judge_mass": [3 / 4, 0 / 1, nan, 3 / 3, 0 / 2],
        "judge_at_dense_top1": [0.2, 0.4, nan, 0.6, 0.49],
        "judge_gap": [0.9 - 0.7, nan, nan, 0.8 - 0.8, 0.49 - 0.4],
    }
    for name in JUDGE_SIGNALS:
        np.testing.assert_allclose(values[name], expected[name], rtol=0, atol=1e-12, err_msg=name)
        # One query at a time (what a gate computes) gives the batch's numbers.
        alone = [get_signal(name)({JUDGE: result}) for result in judged]
        np.testing.assert_allclose(alone, expected[name], rtol=0, atol=1e-12, err_msg=name)
    assert get_signal("judge_top1").passage_scale


def test_judge_at_dense_top1_reads_the_dense_first_passage_even_when_the_judge_reorders():
    judge = PassageTableJudge(P)
    [result] = judge_results(judge, ["q?"], [dense(8, 9)], TEXTS)
    assert result.chunk_ids[0] == "p9.md#0"
    values = compute_signals_batch({JUDGE: [result]}, JUDGE_SIGNALS)
    assert values["judge_at_dense_top1"][0] == 0.49 and values["judge_top1"][0] == 1.0
    assert values["judge_gap"][0] == pytest.approx(1.0 - 0.49, abs=1e-12)


def test_depth_limits_what_the_judge_reads():
    judge = PassageTableJudge(P)
    [result] = judge_results(judge, ["q?"], [dense(0, 2, 1, 9)], TEXTS, depth=2)
    assert judge.calls == [(["q?", "q?"], ["passage 0", "passage 2"])]
    assert result.chunk_ids == ("p2.md#0", "p0.md#0")
    values = compute_signals_batch({JUDGE: [result]}, JUDGE_SIGNALS)
    assert values["judge_top1"][0] == 0.5 and values["judge_mass"][0] == 0.5


@pytest.mark.parametrize("bad", [1.5, -0.1, math.inf])
def test_a_judge_that_returns_no_probability_is_refused(bad):
    judge = PassageTableJudge({**P, "passage 3": bad})
    with pytest.raises(ValueError, match="judge 'table' must return one probability in \\[0, 1\\] per pair"):
        judge_results(judge, ["q?"], [dense(0, 3)], TEXTS)


def test_a_judge_that_returns_the_wrong_number_of_scores_is_refused():
    class Short(PassageTableJudge):
        def score(self, questions, passages):
            return super().score(questions, passages)[:-1]

    with pytest.raises(ValueError, match="one probability in \\[0, 1\\] per pair"):
        judge_results(Short(P), ["q?"], [dense(0, 3)], TEXTS)


def test_bad_input_to_judge_results():
    judge = PassageTableJudge(P)
    with pytest.raises(ValueError, match="2 queries but 1 retrieved lists"):
        judge_results(judge, ["a?", "b?"], [dense(0)], TEXTS)
    with pytest.raises(KeyError, match="no text for 1 retrieved chunk"):
        judge_results(judge, ["a?"], [RetrievalResult("dense", ("missing.md#0",), np.ones(1))], TEXTS)
    assert judge.calls == []


def test_tables_pick_the_judge_signals_up_only_where_a_judge_view_is_present(judged):
    dense_lists = list(LISTS.values())
    assert not set(JUDGE_SIGNALS) & set(signals_for({"dense": dense_lists}))
    assert not set(JUDGE_SIGNALS) & set(compute_signals_batch({"dense": dense_lists}))
    assert set(JUDGE_SIGNALS) <= set(signals_for({"dense": dense_lists, JUDGE: judged}))
    queries = pd.DataFrame(
        {
            "id": [f"q{n}" for n in range(len(LISTS))],
            "query": [f"question {name}?" for name in LISTS],
            "answerable": [True, False, False, True, False],
            "slice": ["in_domain"] * len(LISTS),
        }
    )
    without = score_table(queries, {"dense": dense_lists})
    assert not set(JUDGE_SIGNALS) & set(without.columns) and "dense_top1" in without.columns
    with_judge = score_table(queries, {"dense": dense_lists, JUDGE: judged})
    assert list(with_judge.columns) == list(without.columns) + list(JUDGE_SIGNALS)
    pd.testing.assert_frame_equal(with_judge[without.columns], without)
    expected = compute_signals_batch({JUDGE: judged}, JUDGE_SIGNALS)
    for name in JUDGE_SIGNALS:
        np.testing.assert_array_equal(with_judge[name].to_numpy(), expected[name])
