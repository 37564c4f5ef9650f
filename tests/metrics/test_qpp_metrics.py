"""The QPP evaluation protocol: Kendall's tau, Pearson's r and sMARE against hand-computed cases."""

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau, pearsonr

from ragcal.metrics import DegenerateInputWarning
from ragcal.metrics.qpp import _resampled_measures, qpp_correlations, qpp_measures, qpp_table, smare, smare_chance


def test_smare_by_hand():
    assert smare([3, 2, 1], [0.9, 0.5, 0.1]) == 0.0
    # Ranks 1, 2, 3 against 3, 2, 1: |1 - 3| + 0 + |3 - 1| = 4, over n * n = 9.
    assert smare([1, 2, 3], [0.9, 0.5, 0.1]) == pytest.approx(4 / 9)
    # Ties take average ranks: predicted 1.5, 1.5, 3 against actual 1, 2.5, 2.5 -> 0.5 + 1 + 0.5 = 2, over 9.
    assert smare([1, 1, 2], [0, 1, 1]) == pytest.approx(2 / 9)
    assert np.isnan(smare([], []))


def test_smare_chance_is_the_mean_over_every_order():
    from itertools import permutations

    assert smare_chance([0.1, 0.5, 1.0]) == pytest.approx(8 / 27)
    for actual in ([0.1, 0.5, 1.0, 0.2], [1.0, 1.0, 0.5, 0.0, 1.0]):  # without and with ties
        orders = list(permutations(range(len(actual))))
        assert smare_chance(actual) == pytest.approx(np.mean([smare(order, actual) for order in orders]))


def test_measures_by_hand():
    # Pairs: 5 concordant, 1 discordant (the last two) -> tau = 4 / 6. Pearson: deviations (-1.5, -0.5, 0.5, 1.5)
    # and (-0.15, -0.05, 0.15, 0.05): 0.4 / sqrt(5 * 0.05) = 0.8. sMARE: ranks differ by 1 twice -> 2 / 16.
    measures = qpp_measures([1, 2, 3, 4], [0.1, 0.2, 0.4, 0.3])
    assert measures["kendall_tau"] == pytest.approx(2 / 3)
    assert measures["pearson_r"] == pytest.approx(0.8)
    assert measures["smare"] == pytest.approx(0.125)


def test_degenerate_inputs():
    with pytest.warns(DegenerateInputWarning, match="constant quality"):
        measures = qpp_measures([1, 2, 3], [1.0, 1.0, 1.0])
    assert all(np.isnan(value) for value in measures.values())
    with pytest.warns(DegenerateInputWarning, match="constant prediction"):
        measures = qpp_measures([5, 5, 5], [0.1, 0.5, 1.0])
    # sMARE too: all ranks tied at 2 against 1, 2, 3 would give (1 + 0 + 1) / 9 = 0.222, below chance (8 / 27).
    assert all(np.isnan(value) for value in measures.values())
    assert all(np.isnan(value) for value in qpp_measures([1.0], [1.0]).values())
    with pytest.raises(ValueError, match="NaN"):
        qpp_measures([1, np.nan], [1, 2])
    with pytest.raises(ValueError, match="2 predictions but 3"):
        qpp_measures([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="n_resamples"):
        qpp_correlations([1, 2], [1, 2], n_resamples=0)


def test_resampled_measures_are_scipys_resample_by_resample():
    rng = np.random.default_rng(3)
    predicted = np.round(rng.normal(size=30), 1)  # ties on the predicted side
    actual = np.round(rng.random(30), 1)  # many ties, like a reciprocal rank
    draws = rng.integers(0, 30, size=(300, 30))  # questions drawn twice or more, as a bootstrap draws them
    draws[0] = 7  # one question only: both sides constant
    predicted[6], actual[5:7] = predicted[5], [0.2, 0.9]
    draws[1] = np.resize([5, 6], 30)  # a constant prediction against two quality values
    draws[2, :15] = draws[2, 15:]  # every question of the resample drawn at least twice
    measures = _resampled_measures(predicted, actual, draws)
    for row in range(2, 300):
        p, a = predicted[draws[row]], actual[draws[row]]
        assert measures["kendall_tau"][row] == kendalltau(p, a).statistic  # to the bit
        assert measures["pearson_r"][row] == pytest.approx(pearsonr(p, a).statistic, abs=1e-12)
        assert measures["smare"][row] == pytest.approx(smare(p, a), abs=1e-15)
    assert np.isnan([measures[name][0] for name in measures]).all()
    assert np.isnan([measures[name][1] for name in measures]).all()


def test_correlations_have_seeded_intervals_around_the_estimate():
    rng = np.random.default_rng(0)
    quality = rng.random(80)
    predicted = quality + rng.normal(scale=0.3, size=80)
    row = qpp_correlations(predicted, quality, n_resamples=500, random_state=1)
    assert row["n"] == 80
    for measure in ("kendall_tau", "pearson_r", "smare"):
        assert row[f"{measure}_low"] < row[measure] < row[f"{measure}_high"]
    assert row["kendall_tau_low"] > 0 and row["pearson_r"] > row["kendall_tau"]
    assert qpp_correlations(predicted, quality, n_resamples=500, random_state=1) == row


def test_qpp_table_orients_signals_and_keeps_answerable_questions_only():
    table = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d", "e", "u"],
            "answerable": [True, True, True, True, True, False],
            "up": [1.0, 2.0, 3.0, 4.0, np.nan, 9.0],
            "down": [4.0, 3.0, 2.0, 1.0, 0.0, 9.0],
        }
    )
    quality = pd.DataFrame({"dense": [0.1, 0.2, 0.4, 0.3, 1.0]}, index=pd.Index(list("abcde"), name="qid"))
    result = qpp_table(table, quality, ["up", "down"], directions={"down": False}, n_resamples=50).set_index("signal")
    assert result.loc["up", "n"] == 4  # "e" has no signal value, "u" is unanswerable
    assert result.loc["up", "kendall_tau"] == pytest.approx(2 / 3)
    # "down" is "up" reversed, plus "e" (0.0 -> quality 1.0, the best): negated, it predicts as well as "up" and more.
    assert result.loc["down", "n"] == 5 and result.loc["down", "target"] == "dense"
    assert result.loc["up", "smare_chance"] == pytest.approx(smare_chance([0.1, 0.2, 0.4, 0.3]))
    assert result.loc["down", "kendall_tau"] == pytest.approx(
        kendalltau([-4, -3, -2, -1, 0], [0.1, 0.2, 0.4, 0.3, 1.0]).statistic
    )
    two = quality.assign(bm25=quality["dense"])
    with pytest.raises(KeyError, match="'up'"):
        qpp_table(table, two, ["up"], n_resamples=10)
    with pytest.raises(KeyError, match="'rrf'"):
        qpp_table(table, two, ["up"], targets={"up": "rrf"}, n_resamples=10)
