"""midway_threshold and fit_threshold's placement: hand-computed values (expected values written as formulas)."""

import math

import numpy as np
import pytest

from ragcal.calibration import THRESHOLD_PLACEMENT, fit_threshold, midway_threshold
from ragcal.calibration.midway import EDGE_MARGIN
from ragcal.calibration.rules import place_threshold

SCORES = [0.4, 0.5, 0.6, 0.7]


def test_midway_between_boundary_and_next_score_below():
    assert midway_threshold(0.6, SCORES) == pytest.approx((0.6 + 0.5) / 2)
    assert midway_threshold(0.7, SCORES) == pytest.approx((0.7 + 0.6) / 2)


def test_ties_count_once():
    scores = [0.5, 0.5, 0.5, 0.9, 0.9, 0.2]
    assert midway_threshold(0.9, scores) == pytest.approx((0.9 + 0.5) / 2)
    assert midway_threshold(0.5, scores) == pytest.approx((0.5 + 0.2) / 2)


def test_other_orientation_is_mirrored():
    # answer when score <= t: the refusing side is above
    assert midway_threshold(0.5, SCORES, higher_is_answerable=False) == pytest.approx((0.5 + 0.6) / 2)
    # nothing above 0.7: half the gap to 0.6, mirrored upwards
    assert midway_threshold(0.7, SCORES, higher_is_answerable=False) == pytest.approx(0.7 + (0.7 - 0.6) / 2)


def test_threshold_on_the_lowest_score_borrows_the_next_gap():
    assert midway_threshold(0.4, SCORES) == pytest.approx(0.4 - (0.5 - 0.4) / 2)


def test_single_distinct_score_moves_by_the_margin():
    assert midway_threshold(0.8, [0.8, 0.8]) == pytest.approx(0.8 - EDGE_MARGIN * 1.0)
    assert midway_threshold(20.0, [20.0]) == pytest.approx(20.0 - EDGE_MARGIN * 20.0)
    assert midway_threshold(0.8, [0.8], higher_is_answerable=False) == pytest.approx(0.8 + EDGE_MARGIN)


def test_unchanged_cases():
    assert midway_threshold(math.inf, SCORES) == math.inf
    assert midway_threshold(-math.inf, SCORES) == -math.inf
    assert math.isnan(midway_threshold(math.nan, SCORES))
    assert midway_threshold(0.45, SCORES) == 0.45  # not on a score
    assert midway_threshold(0.1, SCORES) == 0.1  # below every score, not on one
    assert midway_threshold(0.5, []) == 0.5  # empty input
    assert midway_threshold(0.5, [math.nan, math.nan]) == 0.5
    lower = 0.5
    assert midway_threshold(np.nextafter(lower, 1.0), [lower, np.nextafter(lower, 1.0)]) == np.nextafter(lower, 1.0)


def test_nan_scores_are_ignored():
    assert midway_threshold(0.6, [0.4, math.nan, 0.6, 0.5]) == pytest.approx((0.6 + 0.5) / 2)


def test_decisions_on_calibration_scores_unchanged():
    rng = np.random.default_rng(0)
    scores = np.round(rng.uniform(size=200), 2)  # many ties
    for threshold in np.unique(scores):
        placed = midway_threshold(threshold, scores)
        assert placed != threshold and not np.any(scores == placed)
        np.testing.assert_array_equal(scores >= placed, scores >= threshold)
        placed = midway_threshold(threshold, scores, higher_is_answerable=False)
        np.testing.assert_array_equal(scores <= placed, scores <= threshold)


def test_fit_threshold_places_every_rule_midway():
    scores = np.array([0.4, 0.5, 0.6, 0.7, 0.2, 0.3, 0.55])
    answerable = np.array([True, True, True, True, False, False, False])
    # keep@0.75 keeps 0.5 and up among the answerable; the next calibration score below 0.5 is 0.4
    assert fit_threshold("keep@0.75", scores, answerable) == pytest.approx((0.5 + 0.4) / 2)
    # keep@0.5: boundary 0.6; next score below is the unanswerable 0.55
    assert fit_threshold("keep@0.5", scores, answerable) == pytest.approx((0.6 + 0.55) / 2)
    # keep@1.0: boundary 0.4, next below 0.3
    assert fit_threshold("keep@1.0", scores, answerable) == pytest.approx((0.4 + 0.3) / 2)
    # min_cost@5: answering from 0.6 refuses 0.4 and 0.5 (cost 2) and answers nothing unanswerable
    assert fit_threshold("min_cost@5", scores, answerable) == pytest.approx((0.6 + 0.55) / 2)


def test_fit_threshold_other_orientation():
    scores = np.array([0.4, 0.5, 0.6, 0.7])
    answerable = np.array([True, True, False, False])
    # low is answerable: keep@1.0 answers score <= 0.5; next score above is 0.6
    assert fit_threshold("keep@1.0", scores, answerable, higher_is_answerable=False) == pytest.approx((0.5 + 0.6) / 2)


def test_fit_threshold_one_class():
    # only answerable questions: keep@1.0 is on the lowest score, which has nothing below
    assert fit_threshold("keep@1.0", [0.4, 0.5, 0.7], [True] * 3) == pytest.approx(0.4 - (0.5 - 0.4) / 2)


def test_false_answer_guarantee_midway_above_the_boundary():
    unanswerable = np.linspace(0, 1, 100)
    scores = np.concatenate([unanswerable, [0.955]])
    answerable = np.concatenate([np.zeros(100, dtype=bool), [True]])
    threshold = fit_threshold("false_answer_guarantee@0.2", scores, answerable, delta=0.1)
    boundary = unanswerable[unanswerable < threshold].max()
    above = scores[scores > boundary].min()
    assert threshold == pytest.approx((boundary + above) / 2)


def test_place_threshold_above_every_score():
    # refuses every calibration score: half the gap between the two highest, above the highest
    assert place_threshold(np.nextafter(0.7, 1.0), SCORES) == pytest.approx(0.7 + (0.7 - 0.6) / 2)
    assert place_threshold(math.inf, SCORES) == math.inf
    assert place_threshold(0.45, SCORES) == pytest.approx((0.5 + 0.4) / 2)  # same decisions as 0.5


def test_placement_sentence():
    assert "midway" in THRESHOLD_PLACEMENT and "open interval" in THRESHOLD_PLACEMENT
