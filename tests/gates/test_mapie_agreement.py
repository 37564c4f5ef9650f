"""ragcal's Learn-then-Test certification agrees with MAPIE's ``BinaryClassificationController`` (MAPIE 1.6).

The problem maps onto MAPIE as binary classification: ``y_true`` = answerable, the "classifier"'s positive-class
probability is ``dense_top1``, a threshold predicts 1 (answer) when the score is >= it, exactly as ragcal's
threshold gate answers. The risks that compute the same thing:

================================  ====================================================  ======================
ragcal rule                       loss / trials                                         MAPIE risk, target
================================  ====================================================  ======================
``recall_guarantee@0.9``          answerable refused / answerable                       ``recall``, 0.9
``false_answer_guarantee@0.2``    unanswerable answered / unanswerable                  ``false_positive_rate``
``risk_guarantee@0.2``            answered unanswerable / answered (selective risk,     ``precision``, 0.8
                                  with supported = answered & answerable)
================================  ====================================================  ======================

MAPIE's p-value (``compute_hoeffding_bentkus_p_value`` with ``binary=True``, which its controller always passes)
is min(Hoeffding, Bentkus) where the binary Bentkus term is the exact binomial tail
``binom.cdf(ceil(n * r_hat), n, alpha)``. The Hoeffding (Chernoff) term is never below the exact tail, so the
p-value is the binomial tail ragcal uses, with one floating-point wrinkle: MAPIE recovers the loss count as
``ceil(n * r_hat)`` from the risk *rate* (``1 - recall`` for the recall risk), and where ``n * r_hat`` lands one
ulp above the integer k it counts k + 1 losses, a slightly larger (more conservative) p-value. The tests check
the p-values are equal everywhere else and that is the only difference. The corrections compared are those both
implement: fixed sequence (one start; MAPIE orders it by the risk's monotone direction, ragcal from where the
bound is safest: the same order), Bonferroni and Holm (MAPIE's ``bonferroni_holm``).

MAPIE picks among the certified thresholds by a secondary risk; to compare picks, it is given the secondary risk
that encodes ragcal's rule (recall: fewest answered, ``predicted_positive_fraction``; the others: most answered,
the share refused).
"""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

mapie = pytest.importorskip("mapie")

from mapie.risk_control import (
    BinaryClassificationController,
    BinaryRisk,
    control_fwer,
    false_positive_rate,
    precision,
    predicted_positive_fraction,
    recall,
)

from ragcal.calibration import certify_candidates
from ragcal.gates import certify_threshold_gate

SCORES = Path(__file__).resolve().parents[2] / "results" / "fastapi" / "scores.csv"
DELTA = 0.1

#: ragcal's choice among the certified for non-recall bounds (most answered), as a MAPIE risk to minimise.
REFUSED_SHARE = BinaryRisk(
    risk_occurrence=lambda y_true, y_pred: y_pred == 0,
    risk_condition=lambda y_true, y_pred: np.repeat(True, len(y_true)),
    higher_is_better=False,
)
#: rule -> (MAPIE risk, MAPIE target_level, MAPIE alpha (the bound), secondary risk encoding ragcal's pick)
MAPPING = {
    "recall_guarantee@0.9": (recall, 0.9, 1 - 0.9, predicted_positive_fraction),
    "false_answer_guarantee@0.2": (false_positive_rate, 0.2, 0.2, REFUSED_SHARE),
    "risk_guarantee@0.2": (precision, 0.8, 1 - 0.8, REFUSED_SHARE),
}
MAPIE_METHOD = {"fixed_sequence": "fixed_sequence", "bonferroni": "bonferroni", "holm": "bonferroni_holm"}


@pytest.fixture(scope="module")
def table():
    if not SCORES.exists():
        pytest.skip(f"{SCORES} is not there")
    frame = pd.read_csv(SCORES)
    assert frame["answerable"].dtype == bool
    assert frame["dense_top1"].notna().all()
    return frame


def predict_proba(X):
    """The "classifier": X is the dense_top1 column; the positive-class probability is the score itself."""
    score = np.asarray(X, dtype=float)[:, 0]
    return np.column_stack([1 - score, score])


def mapie_controller(table, rule, thresholds, method, choice="ragcal"):
    risk, target, _, secondary = MAPPING[rule]
    controller = BinaryClassificationController(
        predict_function=predict_proba,
        risk=risk,
        target_level=target,
        confidence_level=1 - DELTA,
        best_predict_param_choice=secondary if choice == "ragcal" else choice,
        list_predict_params=np.asarray(thresholds, dtype=float),
        fwer_method=MAPIE_METHOD[method],
    )
    return controller.calibrate(table[["dense_top1"]].to_numpy(), table["answerable"].to_numpy().astype(int))


def certified_mask(thresholds, controller):
    mask = np.isin(thresholds, controller.valid_predict_params)
    assert mask.sum() == len(controller.valid_predict_params)  # distinct thresholds, every valid one found
    return mask


def answered_set(table, threshold):
    return table["dense_top1"].to_numpy() >= threshold


def ragcal_certificate(table, rule, method):
    """ragcal on the grid of observed scores; returns (thresholds in ragcal's row order, certificate)."""
    scores = table["dense_top1"].to_numpy(dtype=float)
    observed = np.unique(scores)
    if rule.startswith("risk_guarantee"):
        # Selective risk with "supported" = answerable, through the engine. ragcal's threshold gate always adds
        # "refuse all" (+inf); MAPIE gives that candidate (no positive prediction, no precision) a NaN p-value,
        # which its Holm takes as the smallest and stops on, certifying nothing, so both sides test the observed
        # scores only here.
        thresholds = observed[::-1]
        answered = scores[None, :] >= thresholds[:, None]
        certificate = certify_candidates(
            answered, answered & table["answerable"].to_numpy()[None, :], table["answerable"], rule, delta=DELTA,
            method=method, parameters=pd.DataFrame({"threshold": thresholds}),
        )
    else:
        # End to end through the threshold gate: candidates +inf (refuse all), then the observed scores descending.
        _, certificate = certify_threshold_gate(table, "dense_top1", rule, grid=observed, delta=DELTA, method=method)
        thresholds = certificate.candidates["threshold"].to_numpy()
        assert thresholds[0] == np.inf and np.array_equal(np.sort(thresholds[1:]), observed)
    assert certificate.method == method
    return thresholds, certificate


CASES = [
    ("recall_guarantee@0.9", "fixed_sequence"),
    ("recall_guarantee@0.9", "bonferroni"),
    ("recall_guarantee@0.9", "holm"),
    ("false_answer_guarantee@0.2", "fixed_sequence"),
    ("false_answer_guarantee@0.2", "bonferroni"),
    ("false_answer_guarantee@0.2", "holm"),
    # precision is not monotone in the threshold, so no fixed sequence (MAPIE warns; ragcal's auto takes Holm)
    ("risk_guarantee@0.2", "bonferroni"),
    ("risk_guarantee@0.2", "holm"),
]


@pytest.mark.parametrize("rule, method", CASES)
def test_same_grid_same_risk_same_procedure_same_certificate(table, rule, method):
    thresholds, certificate = ragcal_certificate(table, rule, method)
    rows = certificate.candidates
    controller = mapie_controller(table, rule, thresholds, method)
    risk, _, alpha, _ = MAPPING[rule]
    y_true = table["answerable"].to_numpy().astype(int)
    scores = table["dense_top1"].to_numpy()
    k, n, p = (rows[f"{rule}_{column}"].to_numpy() for column in ("k", "n", "p"))

    # Counts: MAPIE's risk value and effective sample size per threshold are ragcal's k / n and n.
    mapie_rate, mapie_n = np.array(
        [risk.get_value_and_effective_sample_size(y_true, (scores >= t).astype(int)) for t in thresholds]
    ).T
    assert np.array_equal(np.where(n > 0, n, -1), mapie_n)  # MAPIE: -1 when nothing is in the denominator
    defined = n > 0
    np.testing.assert_allclose(mapie_rate[defined] * n[defined], k[defined], rtol=0, atol=1e-9)

    # p-values: MAPIE's binary Hoeffding-Bentkus p-value is ragcal's binomial tail, except where its float
    # ceil(n * r_hat) counts one loss too many (and there it is the tail at k + 1, no other difference).
    mapie_p = controller.p_values[:, 0]
    mapie_k = np.ceil(mapie_n * mapie_rate)
    exact = defined & (mapie_k == k)
    rounded_up = defined & ~exact
    assert exact.mean() > 0.5  # recall: 15 of 190 rounded up, false answers: 8 of 190, precision: 39 of 189
    np.testing.assert_allclose(mapie_p[exact], p[exact], rtol=1e-12, atol=0)
    assert np.array_equal(mapie_k[rounded_up], k[rounded_up] + 1)
    assert (mapie_n * mapie_rate - k)[rounded_up].max(initial=0) < 1e-9
    # there MAPIE's p is min(Hoeffding, tail at k + 1); the Hoeffding (Chernoff) bound exp(-n KL(k/n || alpha)),
    # never below the exact tail at k, sometimes undercuts the tail at k + 1
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.minimum(k / n, alpha)
        kl = np.where(k > 0, rate * np.log(rate / alpha), 0) + (1 - rate) * np.log((1 - rate) / (1 - alpha))
    hoeffding = np.exp(-n * kl)
    assert (hoeffding[defined] >= p[defined] * (1 - 1e-12)).all()
    np.testing.assert_allclose(
        mapie_p[rounded_up], np.minimum(hoeffding, binom.cdf(k + 1, n, alpha))[rounded_up], rtol=1e-9
    )
    assert (mapie_p[rounded_up] >= p[rounded_up]).all()
    assert (p[~defined] == 1).all() and np.isnan(mapie_p[~defined]).all()

    # The correction on its own: MAPIE's control_fwer fed ragcal's p-values certifies what ragcal does
    # (fixed sequence from where the bound is safest: recall from the most lenient threshold, the rest from the
    # strictest, which is ragcal's row order).
    certified = rows["certified"].to_numpy()
    sequence = np.arange(len(rows))[::-1] if rule.startswith("recall") else np.arange(len(rows))
    by_mapie = np.zeros(len(rows), dtype=bool)
    by_mapie[sequence[control_fwer(p[sequence], DELTA, fwer_method=MAPIE_METHOD[method])]] = True
    assert np.array_equal(by_mapie, certified)

    # End to end: the same thresholds certified, not none and not all, and the same pick.
    assert np.array_equal(certified_mask(thresholds, controller), certified)
    assert 0 < certified.sum() < len(rows)
    assert controller.best_predict_param == rows["threshold"][certificate.chosen]


def test_ragcal_p_values_are_mapies_p_value_function_on_ragcals_counts(table):
    """MAPIE's p-value function itself, given ragcal's counts as rates k / n, returns ragcal's p-values.

    Where float rounding puts n * (k / n) above k, MAPIE's ceil adds a loss; there the rate is nudged down one
    ulp, which changes nothing else (the Hoeffding term moves by ~1e-16 and is never the smaller one).
    """
    from mapie.risk_control.methods import compute_hoeffding_bentkus_p_value

    for rule in MAPPING:
        _, certificate = ragcal_certificate(table, rule, "bonferroni")
        rows = certificate.candidates
        k, n, p = (rows[f"{rule}_{column}"].to_numpy() for column in ("k", "n", "p"))
        alpha = MAPPING[rule][2]
        defined = n > 0
        rate = k[defined] / n[defined]
        rate = np.where(np.ceil(n[defined] * rate) > k[defined], np.nextafter(rate, 0), rate)
        mapie_p = compute_hoeffding_bentkus_p_value(rate, n[defined].astype(float), alpha, binary=True)[:, 0]
        np.testing.assert_allclose(mapie_p, p[defined], rtol=1e-12, atol=0)
        assert (p[~defined] == 1).all()


def test_the_finer_grid_issue_numbers(table):
    """Default grids: ragcal's fixed sequence adds the value just above each score; MAPIE gets the observed scores.

    recall_guarantee@0.9: both pick 0.479. false_answer_guarantee@0.2: ragcal 0.436, MAPIE 0.449. Both certified at
    delta = 0.1. The lower threshold is the value just above the observed score 0.43621..., which answers the same
    113 calibration questions as MAPIE's 0.449 (12 of 86 unanswerable, p 0.099): the finer grid moves the bar to the
    most lenient value with that calibration record, so the gate also answers future scores in (0.4362, 0.4487).
    These are the candidates the certificates choose; the gates place them midway between the boundary calibration
    score and the next one (same calibration decisions, so the same certificate).
    """
    observed = np.unique(table["dense_top1"])

    # recall: ragcal takes the strictest certified threshold (fewest answered); MAPIE's default pick (most precise).
    gate, certificate = certify_threshold_gate(table, "dense_top1", "recall_guarantee@0.9", delta=DELTA)
    controller = mapie_controller(table, "recall_guarantee@0.9", observed, "fixed_sequence", choice="auto")
    assert certificate.method == "fixed_sequence"
    picked = certificate.candidates["threshold"][certificate.chosen]
    assert round(picked, 3) == 0.479 and controller.best_predict_param == picked
    assert certificate.candidates["certified"][certificate.chosen]
    assert picked in controller.valid_predict_params
    assert gate.threshold == pytest.approx((picked + observed[observed < picked].max()) / 2)
    assert np.array_equal(answered_set(table, gate.threshold), answered_set(table, picked))
    assert answered_set(table, gate.threshold).sum() <= answered_set(table, controller.best_predict_param).sum()

    # false answers: ragcal takes the most lenient certified threshold (most answered).
    gate, certificate = certify_threshold_gate(table, "dense_top1", "false_answer_guarantee@0.2", delta=DELTA)
    controller = mapie_controller(table, "false_answer_guarantee@0.2", observed, "fixed_sequence", choice="auto")
    chosen = certificate.candidates.loc[certificate.chosen]
    assert certificate.method == "fixed_sequence" and chosen["certified"] and chosen["p"] <= DELTA
    picked = chosen["threshold"]
    assert round(picked, 3) == 0.436 and round(controller.best_predict_param, 3) == 0.449
    assert picked < controller.best_predict_param
    assert picked not in observed and np.nextafter(picked, 0) in observed
    # the gate: midway between that score and the next one up, MAPIE's 0.449
    boundary = np.nextafter(picked, 0)
    assert gate.threshold == pytest.approx((boundary + observed[observed > boundary].min()) / 2)
    assert gate.threshold not in observed
    ours, theirs = answered_set(table, gate.threshold), answered_set(table, controller.best_predict_param)
    assert (ours >= theirs).all() and ours.sum() == theirs.sum() == 113
    assert chosen["false_answer_guarantee@0.2_k"] == 12 and chosen["false_answer_guarantee@0.2_n"] == 86

    # Given ragcal's finer grid, MAPIE certifies exactly ragcal's candidates: the difference is the grid alone.
    for rule in ("recall_guarantee@0.9", "false_answer_guarantee@0.2"):
        gate, certificate = certify_threshold_gate(table, "dense_top1", rule, delta=DELTA)
        thresholds = certificate.candidates["threshold"].to_numpy()
        assert len(thresholds) == 2 * len(observed) + 1
        controller = mapie_controller(table, rule, thresholds, "fixed_sequence")
        assert np.array_equal(certified_mask(thresholds, controller), certificate.candidates["certified"].to_numpy())
        # same calibration decisions as ragcal's pick (on this grid v+ and the next score up answer the same set)
        assert np.array_equal(answered_set(table, controller.best_predict_param), answered_set(table, gate.threshold))
