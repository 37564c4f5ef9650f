"""Threshold rules: hand cases, orientation, parsing, the registry, and simulations showing each guarantee holds."""

import math

import numpy as np
import pytest

from ragcal.calibration.rules import (
    RULES,
    CalibrationWarning,
    fit_threshold,
    get_rule,
    keep_share,
    parse_rule,
    register_rule,
    threshold_false_answer_guarantee,
    threshold_keep_share,
    threshold_min_cost,
    threshold_recall_guarantee,
)


def test_keep_share_hand_cases():
    scores = [0.4, 0.5, 0.6, 0.7]
    assert threshold_keep_share(scores, keep=1.0) == 0.4
    assert threshold_keep_share(scores, keep=0.75) == 0.5
    assert threshold_keep_share(scores, keep=0.74) == 0.5
    assert threshold_keep_share(scores, keep=0.5) == 0.6
    assert threshold_keep_share([0.5, 0.5, 0.5, 0.9], keep=0.9) == 0.5  # ties keep more than asked, never fewer
    with pytest.raises(ValueError, match=r"'keep' parameter of threshold_keep_share must be a float in \(0, 1\]"):
        threshold_keep_share(scores, keep=1.5)


def test_recall_guarantee_hand_case():
    # n = 50, target 0.9, delta 0.1: P(Bin(50, 0.1) <= 1) = 0.034 <= 0.1 but P(<= 2) = 0.112 > 0.1, so k = 2.
    p_le_1 = 0.9**50 + 50 * 0.1 * 0.9**49
    p_le_2 = p_le_1 + 1225 * 0.1**2 * 0.9**48
    assert p_le_1 <= 0.1 < p_le_2
    assert threshold_recall_guarantee(np.arange(50.0), target=0.9, delta=0.1) == 1.0


def test_recall_guarantee_falls_back_when_n_is_too_small():
    # Even k = 1 needs n >= log(delta) / log(target) = 21.85 for target 0.9, delta 0.1.
    assert math.log(0.1) / math.log(0.9) == pytest.approx(21.85, abs=0.01)
    assert threshold_recall_guarantee(np.arange(22.0), target=0.9, delta=0.1) == 0.0
    with pytest.warns(CalibrationWarning, match="cannot guarantee recall"):
        assert threshold_recall_guarantee(np.arange(21.0), target=0.9, delta=0.1) == -math.inf


def test_recall_guarantee_holds_in_simulation():
    # Future answerable scores ~ U(0, 1): the recall of threshold t is 1 - t.
    rng = np.random.default_rng(0)
    target, delta = 0.9, 0.1
    recalls = np.array(
        [1 - threshold_recall_guarantee(rng.uniform(size=60), target=target, delta=delta) for _ in range(3000)]
    )
    coverage = (recalls >= target).mean()
    assert coverage >= 1 - delta - 0.015  # Monte Carlo slack of ~3 standard errors
    assert coverage < 0.999  # and it is not trivially conservative


def test_false_answer_guarantee_holds_in_simulation():
    rng = np.random.default_rng(1)
    alpha, delta = 0.2, 0.1
    rates = []
    for _ in range(3000):
        threshold = threshold_false_answer_guarantee(rng.uniform(size=40), alpha=alpha, delta=delta)
        rates.append(1 - min(threshold, 1.0))  # share of U(0, 1) unanswerable scores at or above the threshold
    coverage = (np.array(rates) <= alpha).mean()
    assert coverage >= 1 - delta - 0.015
    with pytest.warns(CalibrationWarning, match="refuse everything"):
        assert threshold_false_answer_guarantee([0.1, 0.2], alpha=0.1, delta=0.1) == math.inf


def test_false_answer_threshold_sits_just_above_a_score():
    threshold = threshold_false_answer_guarantee(np.linspace(0, 1, 100), alpha=0.2, delta=0.1)
    assert threshold in set(np.nextafter(np.linspace(0, 1, 100), np.inf))


def test_min_cost_hand_case():
    scores = [0.2, 0.4, 0.5, 0.6]
    answerable = [False, True, False, True]
    # t=0.2: 2 answered unanswerable -> cost 2c; t=0.4: 1 -> c; t=0.5: refuse 0.4 (1) + answer 0.5 (c); t=0.6: 1.
    assert threshold_min_cost(scores, answerable, cost_answer_unanswerable=5) == 0.6
    assert threshold_min_cost(scores, answerable, cost_answer_unanswerable=0.5) == 0.4
    assert threshold_min_cost(scores, answerable, cost_answer_unanswerable=0.0) == 0.4  # ties: highest threshold


def test_fit_threshold_orientation_and_parsing():
    scores = np.array([0.1, 0.2, 0.8, 0.9])
    answerable = np.array([True, True, False, False])  # low means answerable
    # boundary 0.2, placed midway to the next score on the refusing side (above): 0.8
    assert fit_threshold("keep@1.0", scores, answerable, higher_is_answerable=False) == pytest.approx((0.2 + 0.8) / 2)
    assert parse_rule("recall_guarantee@0.95") == ("recall_guarantee", 0.95)
    with pytest.raises(ValueError, match="unknown threshold rule 'keep'.*keep@0.95"):
        parse_rule("keep")


def test_min_cost_can_refuse_everything():
    # No answerable question: answering anything only costs, so the cheapest threshold refuses all.
    assert threshold_min_cost([0.2, 0.5, 0.9], [False, False, False]) == math.inf
    # Only answerable questions: refusing anything only costs, so it answers all (the highest such threshold, 0.2).
    assert threshold_min_cost([0.2, 0.5, 0.9], [True, True, True]) == 0.2
    # Hand case, cost 5 per wrong answer and 1 per refused answerable question. The one unanswerable question has the
    # top score, so every finite threshold answers it: answer all 0 + 5 = 5, >= 0.1 0 + 5, >= 0.6 1 + 5, >= 0.7 2 + 5,
    # >= 0.9 3 + 5; refusing all costs 3 + 0 = 3, the minimum.
    assert threshold_min_cost([0.1, 0.6, 0.7, 0.9], [True, True, True, False]) == math.inf


def test_every_rule_is_one_registry_entry():
    assert list(RULES) == [
        "keep", "recall_guarantee", "false_answer_guarantee", "min_cost", "risk_guarantee", "unsupported_guarantee"
    ]
    assert all(rule.name == name and rule.description and callable(rule.fit) for name, rule in RULES.items())
    assert [name for name, rule in RULES.items() if rule.needs_support] == ["risk_guarantee", "unsupported_guarantee"]
    certifiable = [name for name, rule in RULES.items() if rule.loss is not None]
    assert certifiable == ["recall_guarantee", "false_answer_guarantee", "risk_guarantee", "unsupported_guarantee"]
    assert all(RULES[name].risk for name in certifiable)
    assert get_rule("risk_guarantee@0.2") is RULES["risk_guarantee"]


def test_unknown_rules_list_the_registry():
    with pytest.raises(ValueError, match="unknown threshold rule 'nope@1'") as error:
        parse_rule("nope@1")
    assert all(f"{name}: {rule.description}" in str(error.value) for name, rule in RULES.items())
    with pytest.raises(ValueError, match="already registered"):
        register_rule(RULES["keep"])


def test_keep_share_takes_keep_rules_only():
    assert keep_share("keep@0.9", "fit_floor_gap_gate") == 0.9
    with pytest.raises(ValueError, match=r"fit_floor_gap_gate fits by the keep@p rule only .* Got 'min_cost@5' instead"):
        keep_share("min_cost@5", "fit_floor_gap_gate")


def test_min_cost_checks_its_costs():
    with pytest.raises(ValueError, match=r"'cost_answer_unanswerable' parameter of threshold_min_cost .* \[0, inf\)"):
        threshold_min_cost([0.2, 0.5], [True, False], cost_answer_unanswerable=-1)
