"""Binary signals: what the curve functions return for them, and their operating point."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score, roc_curve

from ragcal.metrics.binary import is_binary_signal, risk_coverage_operating_point, roc_operating_point
from ragcal.metrics.selective import risk_coverage

# 4 answerable (3 said "found"), 6 unanswerable (2 said "found"), one verdict missing.
ANSWERABLE = np.array([True, True, True, True, False, False, False, False, False, False])
VERDICT = np.array([1, 1, 1, 0, 1, 1, 0, 0, 0, np.nan])


def test_is_binary_signal():
    assert is_binary_signal(VERDICT)
    assert is_binary_signal([True, False])
    assert is_binary_signal([1.0, 1.0])  # constant, still 0/1
    assert not is_binary_signal([0.0, 0.5])
    assert not is_binary_signal([0, 2])
    assert not is_binary_signal([np.nan, np.nan])
    assert not is_binary_signal([])


def test_roc_operating_point_is_the_middle_point_of_roc_curve_and_auc_is_balanced_accuracy():
    fpr, tpr = roc_operating_point(ANSWERABLE, VERDICT)
    assert (fpr, tpr) == (2 / 6, 3 / 4)  # NaN is never answered
    finite = ~np.isnan(VERDICT)
    curve_fpr, curve_tpr, _ = roc_curve(ANSWERABLE[finite], VERDICT[finite])
    assert curve_fpr.tolist() == [0.0, 2 / 5, 1.0] and curve_tpr.tolist() == [0.0, 3 / 4, 1.0]
    assert roc_auc_score(ANSWERABLE[finite], VERDICT[finite]) == pytest.approx((3 / 4 + 1 - 2 / 5) / 2)
    # Lower is answerable: answer when the verdict is 0.
    assert roc_operating_point(ANSWERABLE, VERDICT, higher_is_answerable=False) == (3 / 6, 1 / 4)
    assert np.isnan(roc_operating_point([True, True], [1, 0])[0])  # no unanswerable question
    with pytest.raises(ValueError, match="not binary"):
        roc_operating_point(ANSWERABLE, np.linspace(0, 1, 10))


def test_risk_coverage_of_a_binary_signal_has_two_rows_the_operating_point_first():
    supported = ANSWERABLE  # supported exactly when answerable
    curve = risk_coverage(VERDICT, supported)
    assert curve["threshold"].tolist() == [1.0, 0.0]
    assert curve["coverage"].tolist() == [5 / 10, 9 / 10]
    assert curve["risk"].tolist() == [2 / 5, 5 / 9]
    assert risk_coverage_operating_point(VERDICT, supported) == (5 / 10, 2 / 5)
    assert risk_coverage_operating_point(VERDICT, supported, higher_is_answerable=False) == (4 / 10, 3 / 4)
    assert len(risk_coverage([1.0, 1.0, 1.0], [True, False, True])) == 1  # constant: one row
    coverage, risk = risk_coverage_operating_point([0.0, 0.0], [True, False])
    assert coverage == 0.0 and np.isnan(risk)  # never says answerable: nothing answered
    # Support levels: supported when the level reaches the bar 1.
    assert risk_coverage_operating_point([1, 1, 0], [2.0, 0.5, 3.0]) == (2 / 3, 1 / 2)
    with pytest.raises(ValueError, match="finite support levels need higher_is_answerable=True"):
        risk_coverage_operating_point([1, 0], [2.0, 0.5], higher_is_answerable=False)


def test_operating_point_masks_count_each_axis_by_hand():
    from ragcal.metrics.binary import operating_point_masks

    answered = [True, True, False, True, False]
    answerable = [True, True, True, False, False]
    support = [True, False, False, False, False]
    masks = operating_point_masks(answered, answerable, support)

    def counts(axis):
        hits, rows = axis
        return int((hits & rows).sum()), int(rows.sum())

    (x, y) = masks["roc"]
    assert counts(x) == (1, 2) and counts(y) == (2, 3)  # FPR 1/2, TPR 2/3
    (x, y) = masks["risk-coverage"]
    assert counts(x) == (3, 5) and counts(y) == (2, 3)  # coverage 3/5; 2 of the 3 answers unsupported
    assert set(operating_point_masks(answered, answerable)) == {"roc"}  # no support: no risk-coverage point
    with pytest.raises(ValueError, match="operating_point_masks: 2 decisions for 5 questions"):
        operating_point_masks([True, False], answerable)
