"""Risk-coverage curves and their areas, against hand-computed cases; ties, NaN, one class, bootstrap, pairing."""

import math

import numpy as np
import pytest

from ragcal.metrics.selective import (
    paired_selective_difference,
    risk_coverage,
    selective_areas,
    selective_comparison,
    selective_summary,
)


def test_curve_and_areas_by_hand():
    curve = risk_coverage([0.9, 0.8, 0.7, 0.6], [True, False, True, False])
    assert curve["answered"].tolist() == [1, 2, 3, 4]
    assert curve["unsupported"].tolist() == [0, 1, 1, 2]
    areas = selective_areas([0.9, 0.8, 0.7, 0.6], [True, False, True, False])
    assert areas["aurc"] == pytest.approx((0 + 1 / 2 + 1 / 3 + 2 / 4) / 4)
    # Oracle: both supported first, risks 0, 0, 1/3, 2/4.
    assert areas["e_aurc"] == pytest.approx(areas["aurc"] - (1 / 3 + 2 / 4) / 4)
    assert areas["augrc"] == pytest.approx((0 + 1 + 1 + 2) / 4 / 4)


def test_ties_answer_together_and_weigh_by_the_coverage_they_add():
    curve = risk_coverage([0.9, 0.5, 0.5, 0.5], [True, True, False, False])
    assert curve["threshold"].tolist() == [0.9, 0.5]
    assert curve["answered"].tolist() == [1, 4]
    assert selective_areas([0.9, 0.5, 0.5, 0.5], [True, True, False, False])["aurc"] == pytest.approx(0.5 * 3 / 4)


def test_support_levels_depend_on_the_threshold():
    # Question 2 is answered from 0.8 down, but its gold passage (0.6) is passed on only from a bar of 0.6 down.
    curve = risk_coverage([0.9, 0.8, 0.6], [0.9, 0.6, -math.inf])
    assert curve["supported"].tolist() == [1, 1, 2]
    assert curve["risk"].tolist() == pytest.approx([0.0, 0.5, 1 / 3])


def test_nan_is_never_answered_and_counts_in_n():
    curve = risk_coverage([0.9, np.nan], [True, True])
    assert curve["coverage"].tolist() == [0.5]
    areas = selective_areas([np.nan, np.nan], [True, True])
    assert all(math.isnan(value) for value in areas.values())
    assert risk_coverage([], []).empty


def test_one_class_and_the_other_orientation():
    assert selective_areas([0.3, 0.2], [True, True])["aurc"] == 0.0
    assert selective_areas([0.3, 0.2], [False, False])["e_aurc"] == 0.0  # nothing to reorder
    low_first = risk_coverage([0.1, 0.9], [True, False], higher_is_answerable=False)
    assert low_first["threshold"].tolist() == [0.1, 0.9] and low_first["risk"].tolist() == [0.0, 0.5]
    with pytest.raises(ValueError, match="boolean support"):
        risk_coverage([0.1], [0.5], higher_is_answerable=False)
    with pytest.raises(ValueError, match="NaN"):
        risk_coverage([0.1], [np.nan])


def test_bootstrap_interval_holds_the_value_and_pairs_cancel():
    rng = np.random.default_rng(0)
    scores = rng.random(120)
    support = rng.random(120) < scores
    strata = np.where(rng.random(120) < 0.5, "a", "b")
    summary = selective_summary(scores, support, strata=strata, n_resamples=300)
    assert (summary["low"] <= summary["value"]).all() and (summary["value"] <= summary["high"]).all()
    same = paired_selective_difference((scores, support), (scores, support), strata=strata, n_resamples=100)
    assert np.allclose(same[["difference", "low", "high"]], 0.0)
    worse = paired_selective_difference((-scores, support), (scores, support), strata=strata, n_resamples=200)
    assert (worse["difference"] > 0).all() and (worse["low"] > 0).all()


def test_the_comparison_is_the_summary_and_the_paired_difference_of_each_input():
    rng = np.random.default_rng(11)
    n = 60
    strata = rng.choice(["answerable", "near-domain", "unrelated"], size=n)
    levels = np.where(rng.random(n) < 0.6, rng.random(n), -np.inf)
    inputs = {
        "base": (rng.random(n), levels),
        "tied": (np.round(rng.random(n), 1), levels > 0.3),
        "lower_is_answerable": (rng.random(n), rng.random(n) < 0.5, False),
        "with_nan": (np.where(rng.random(n) < 0.2, np.nan, rng.random(n)), levels),
    }
    table = selective_comparison(inputs, baseline="base", strata=strata, n_resamples=300, random_state=4)
    assert list(table["name"]) == [name for name in inputs for _ in range(3)]
    for name, entry in inputs.items():
        higher = entry[2] if len(entry) == 3 else True
        summary = selective_summary(
            entry[0], entry[1], strata=strata, higher_is_answerable=higher, n_resamples=300, random_state=4
        )
        paired = paired_selective_difference(
            (entry[0], entry[1], higher), inputs["base"], strata=strata, n_resamples=300, random_state=4
        )
        rows = table[table["name"] == name].reset_index(drop=True)
        for column in ("value", "low", "high"):
            np.testing.assert_array_equal(rows[column], summary[column], err_msg=f"{name} {column}")
        for ours, theirs in (("difference", "difference"), ("difference_low", "low"), ("difference_high", "high"),
                             ("lower", "lower")):
            np.testing.assert_array_equal(rows[ours], paired[theirs], err_msg=f"{name} {ours}")
    base = table[table["name"] == "base"]
    assert (base[["difference", "difference_low", "difference_high", "lower"]] == 0).all().all()
    with pytest.raises(ValueError, match="the baseline 'nope' is not one of the inputs"):
        selective_comparison(inputs, baseline="nope")
    with pytest.raises(ValueError, match=r"different numbers of questions: \[3, 60\]"):
        selective_comparison({**inputs, "short": ([0.1, 0.2, 0.3], [True, False, True])}, baseline="base")
    empty = selective_comparison(inputs, baseline="base", n_resamples=0)
    assert empty["low"].isna().all() and empty["lower"].isna().all() and empty["value"].notna().all()
