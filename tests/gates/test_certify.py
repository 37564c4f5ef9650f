"""Certified gates: agreement with the closed-form rules, and simulations showing each certified bound holds at
least at its nominal rate on fresh draws (p-values and corrections by hand: tests/calibration/test_ltt.py)."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import beta as beta_distribution

from ragcal.calibration import CalibrationWarning, fit_threshold
from ragcal.gates import FloorGapGate, ThresholdGate, certify_floor_gap_gate, certify_threshold_gate
from ragcal.gates.floor_gap import floor_gap_answers


def score_table(scores, answerable, slices=None, column="dense_top1", **extra):
    answerable = np.asarray(answerable, dtype=bool)
    if slices is None:
        slices = np.where(answerable, "answerable", "unrelated")
    frame = pd.DataFrame(
        {"id": [f"q{i}" for i in range(len(scores))], "query": "q", "answerable": answerable, "slice": slices}
    )
    frame[column] = np.asarray(scores, dtype=float)
    for name, values in extra.items():
        frame[name] = values
    return frame


def test_closed_form_rules_are_the_fixed_sequence_certificates():
    rng = np.random.default_rng(3)
    for _ in range(20):
        answerable = rng.random(120) < 0.5
        scores = np.where(answerable, rng.beta(5, 2, 120), rng.beta(2, 4, 120)).round(2)  # ties on purpose
        table = score_table(scores, answerable)
        for rule in ("recall_guarantee@0.9", "false_answer_guarantee@0.2"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", CalibrationWarning)
                expected = fit_threshold(rule, scores, answerable)
            gate, certificate = certify_threshold_gate(table, "dense_top1", rule)
            assert certificate.method == "fixed_sequence"
            assert gate.threshold == expected, rule


def test_nothing_certified_refuses_everything_and_says_so():
    table = score_table([0.9, 0.8, 0.3], [True, True, False])
    gate, certificate = certify_threshold_gate(table, "dense_top1", "false_answer_guarantee@0.1")
    assert gate.threshold == math.inf and not certificate.certified
    assert gate.decide_table(table)["action"].eq("refuse").all()
    with pytest.warns(CalibrationWarning, match="refuse everything"):
        assert fit_threshold("risk_guarantee@0.1", [0.9, 0.8], [True, True], support=[0.9, 0.8]) == math.inf


def test_risk_rules_need_support():
    with pytest.raises(ValueError, match="supported"):
        fit_threshold("risk_guarantee@0.2", [0.5, 0.6], [True, False])
    with pytest.raises(ValueError, match="supported"):
        certify_threshold_gate(score_table([0.5, 0.6], [True, False]), "dense_top1", "unsupported_guarantee@0.2")


def test_nan_scores_are_never_answered():
    scores = np.array([np.nan] * 5 + list(np.linspace(0.5, 1, 60)))
    answerable = np.array([True] * 65)
    gate, certificate = certify_threshold_gate(
        score_table(scores, answerable), "dense_top1", "risk_guarantee@0.2", support=np.full(65, math.inf)
    )
    assert certificate.certified and certificate.candidates["answered"].max() == 60


# ------------------------------------------------------------------ simulations

def draw(rng, n, answerable_share=0.5):
    """Synthetic labeled questions: answerable scores ~ Beta(5, 2), unanswerable ~ Beta(2, 4). For 80% of answerable
    questions the top passage is gold (level = top score); for 15% the best gold passage scores top - Exp(0.05)
    (supported at a bar t when that is >= t); 5% have no gold passage in the list at all."""
    answerable = rng.random(n) < answerable_share
    scores = np.where(answerable, rng.beta(5, 2, n), rng.beta(2, 4, n))
    kind = rng.random(n)
    levels = np.where(kind < 0.8, scores, scores - rng.exponential(0.05, n))
    levels = np.where(answerable & (kind < 0.95), levels, -math.inf)
    second = scores - rng.exponential(0.05, n)
    return scores, answerable, levels, second


POPULATION = draw(np.random.default_rng(12345), 400_000)


def true_selective_risk(answered, levels_ok):
    answered_count = answered.sum()
    return ((answered & ~levels_ok).sum() / answered_count) if answered_count else 0.0


def test_risk_guarantee_holds_in_simulation():
    rng = np.random.default_rng(7)
    alpha, delta = 0.3, 0.1
    scores, answerable, levels, _ = POPULATION
    order = np.sort(scores)
    reach = np.sort(np.minimum(scores, levels))
    held, certified = [], 0
    for _ in range(400):
        table_scores, table_answerable, table_levels, _ = draw(rng, 200)
        gate, certificate = certify_threshold_gate(
            score_table(table_scores, table_answerable), "dense_top1", f"risk_guarantee@{alpha}", support=table_levels
        )
        t = gate.threshold
        answered = order.size - np.searchsorted(order, t, side="left")
        supported = reach.size - np.searchsorted(reach, t, side="left")
        held.append(answered == 0 or (answered - supported) / answered <= alpha)
        certified += certificate.certified
    assert np.mean(held) >= 1 - delta - 0.02  # Monte Carlo slack of ~ 3 standard errors over 400 draws
    assert certified >= 300  # the bound is within reach: it is not met by refusing everything


def test_joint_recall_and_false_answer_hold_in_simulation():
    rng = np.random.default_rng(8)
    delta = 0.1
    held = []
    for _ in range(600):
        scores, answerable, _, _ = draw(rng, 160)
        gate, certificate = certify_threshold_gate(
            score_table(scores, answerable), "dense_top1", ["recall_guarantee@0.8", "false_answer_guarantee@0.25"]
        )
        t = min(gate.threshold, 1.0)
        recall = beta_distribution.sf(t, 5, 2)
        false_answers = beta_distribution.sf(t, 2, 4)
        held.append(certificate.certified and recall >= 0.8 and false_answers <= 0.25 or not certificate.certified)
        if not certificate.certified:
            assert gate.threshold == math.inf
    assert np.mean(held) >= 1 - delta - 0.015


def test_floor_gap_risk_guarantee_holds_in_simulation():
    rng = np.random.default_rng(9)
    alpha, delta = 0.3, 0.1
    scores, answerable, levels, second = (values[:100_000] for values in POPULATION)
    held, certified = [], 0
    for _ in range(200):
        t_scores, t_answerable, t_levels, t_second = draw(rng, 200)
        table = score_table(t_scores, t_answerable, dense_top2=t_second)
        gate, certificate = certify_floor_gap_gate(table, [f"risk_guarantee@{alpha}"], support=t_levels)
        assert isinstance(gate, FloorGapGate)
        answered = floor_gap_answers(scores, second, gate.floor, gate.min_gap)
        held.append(true_selective_risk(answered, levels >= gate.floor) <= alpha)
        certified += certificate.certified
    assert np.mean(held) >= 1 - delta - 0.03
    assert certified >= 150


def test_certified_threshold_gate_decides_as_certified():
    rng = np.random.default_rng(10)
    scores, answerable, levels, _ = draw(rng, 200)
    table = score_table(scores, answerable)
    gate, certificate = certify_threshold_gate(table, "dense_top1", "unsupported_guarantee@0.1", support=levels)
    assert isinstance(gate, ThresholdGate)
    row = certificate.candidates.iloc[certificate.chosen]
    answered = gate.decide_table(table)["action"].ne("refuse")
    assert answered.sum() == row["answered"]
    unsupported = (answered & ~(levels >= gate.threshold)).sum()
    assert unsupported == row["unsupported_guarantee@0.1_k"] and unsupported / 150 <= 0.1


# ------------------------------------------------------------------ the fallback chain's three bars

def draw_chain(rng, n):
    """Synthetic questions for the default chain: dense scores as in :func:`draw`, a second dense passage a little
    below the top, BM25 top scores on their own scale. For answerable questions the gold page is the top dense
    passage (85%), the second one (10%) or neither (5%), and the top BM25 passage is gold 70% of the time."""
    answerable = rng.random(n) < 0.5
    top = np.where(answerable, rng.beta(5, 2, n), rng.beta(2, 4, n))
    second = top - rng.exponential(0.05, n)
    bm25 = 20 * np.where(answerable, rng.beta(4, 2, n), rng.beta(2, 3, n))
    kind = rng.random(n)
    first_gold = answerable & (kind < 0.85)
    second_gold = answerable & (kind >= 0.85) & (kind < 0.95)
    bm25_gold = answerable & (rng.random(n) < 0.7)
    return answerable, top, second, bm25, first_gold, second_gold, bm25_gold


def chain_outcome(drawn, high, keyword, low):
    """Answered and supported under :func:`ragcal.gates.chain.default_chain` with these bars, in closed form."""
    answerable, top, second, bm25, first_gold, second_gold, bm25_gold = drawn
    hybrid = top >= high
    by_keyword = ~hybrid & (bm25 >= keyword)
    broad = ~hybrid & ~by_keyword & (top >= low)
    supported = (
        (hybrid & (first_gold | (second_gold & (second >= high))))
        | (by_keyword & bm25_gold)
        | (broad & (first_gold | (second_gold & (second >= low))))
    )
    return hybrid | by_keyword | broad, supported


def chain_inputs(drawn):
    from ragcal.retrieval import RetrievalResult

    answerable, top, second, bm25, first_gold, second_gold, bm25_gold = drawn
    table = score_table(top, answerable, dense_top2=second, bm25_top1_stopwords=bm25)
    results, gold = [], []
    for i in range(len(top)):
        ids = ("gold.md#0" if first_gold[i] else "a.md#0", "gold.md#1" if second_gold[i] else "b.md#0")
        dense = RetrievalResult("dense", ids, np.array([top[i], second[i]]))
        keyword = RetrievalResult("bm25_stopwords", ("gold.md#2" if bm25_gold[i] else "c.md#0",), np.array([bm25[i]]))
        results.append({"dense": dense, "rrf": RetrievalResult("rrf", ids, np.array([0.5, 0.4])),
                        "bm25_stopwords": keyword})
        gold.append(frozenset({"gold.md"}) if answerable[i] else frozenset())
    return table, results, gold


def test_chain_candidates_count_what_the_chain_decides():
    from ragcal.gates import certify_chain, supported_answers, table_support
    from ragcal.gates.chain import default_chain

    drawn = draw_chain(np.random.default_rng(20), 120)
    table, results, gold = chain_inputs(drawn)
    _, certificate = certify_chain(table, "risk_guarantee@0.3", results=results, gold=gold)
    candidates = certificate.candidates
    assert len(candidates) > 50 and np.isinf(candidates.loc[0, ["high", "keyword", "low"]].astype(float)).all()
    unsupported = candidates["risk_guarantee@0.3_k"]
    for row in candidates.itertuples():
        chain = default_chain(row.high, row.keyword, row.low)
        decisions = [chain.decide(one) for one in results]
        answered = np.array([decision.answered for decision in decisions])
        supported = supported_answers(decisions, gold)
        assert answered.sum() == row.answered
        assert (answered & ~supported).sum() == unsupported[row.Index]
        assert np.array_equal(table_support(chain, table, results, gold), supported)
        closed_answered, closed_supported = chain_outcome(drawn, row.high, row.keyword, row.low)
        assert np.array_equal(closed_answered, answered) and np.array_equal(closed_supported, supported)


def test_chain_risk_and_joint_guarantees_hold_in_simulation():
    from ragcal.gates import FallbackChain, certify_chain

    rng = np.random.default_rng(21)
    delta = 0.1
    population = draw_chain(np.random.default_rng(54321), 200_000)
    answerable = population[0]
    held_risk, held_joint, certified = [], [], 0
    for _ in range(150):
        table, results, gold = chain_inputs(draw_chain(rng, 200))
        gate, certificate = certify_chain(table, "risk_guarantee@0.3", results=results, gold=gold)
        assert isinstance(gate, FallbackChain)
        answered, supported = chain_outcome(population, *(stage.gate.threshold for stage in gate.stages))
        held_risk.append(true_selective_risk(answered, supported) <= 0.3)
        certified += certificate.certified
        gate, certificate = certify_chain(table, ["recall_guarantee@0.8", "false_answer_guarantee@0.3"])
        answered, _ = chain_outcome(population, *(stage.gate.threshold for stage in gate.stages))
        recall = answered[answerable].mean()
        false_answers = answered[~answerable].mean()
        held_joint.append(not certificate.certified or (recall >= 0.8 and false_answers <= 0.3))
    assert np.mean(held_risk) >= 1 - delta - 0.035  # ~ 3 standard errors over 150 draws
    assert np.mean(held_joint) >= 1 - delta - 0.035
    assert certified >= 75  # within reach: most draws certify something (90 of 150 when written)


def test_floor_gap_order_is_the_floor_family_at_a_fixed_gap():
    from ragcal.gates.floor_gap import floor_gap_order

    rng = np.random.default_rng(30)
    top = rng.random(300)
    second = top - rng.exponential(0.05, 300)
    second[:10] = np.nan  # single hits
    top[10:15] = np.nan  # no hits
    second[10:15] = np.nan
    second[20] = top[20]  # a tie between the two best
    for gap in (0.0, 0.03, 0.1):
        order = floor_gap_order(top, second, gap)
        for floor in np.concatenate([np.quantile(top[15:], [0, 0.3, 0.6, 0.9]), [top[20], second[30]]]):
            with np.errstate(invalid="ignore"):
                assert np.array_equal(floor_gap_answers(top, second, floor, gap), order >= floor)
    # by hand: gap 0.2 > 0.1 answers from the top; gap 0.05 needs the second; one hit answers from the top
    assert floor_gap_order([0.8, 0.8, 0.7], [0.6, 0.75, np.nan], 0.1).tolist() == [0.8, 0.75, 0.7]
