"""label_curve: how the threshold and its held-out outcome settle as the labeled set grows."""

import importlib
import math
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from scipy.stats import beta  # noqa: E402

from ragcal.calibration import kept_share_interval, label_curve  # noqa: E402
from ragcal.calibration.rules import fit_rule, threshold_keep_share  # noqa: E402
from ragcal.datasets import DATA_DIR  # noqa: E402
from ragcal.metrics import DegenerateInputWarning  # noqa: E402
from ragcal.plotting import LabelCurveDisplay  # noqa: E402
from ragcal.score_tables import read_score_table  # noqa: E402

RESULTS = DATA_DIR.parent / "results"

# Ten questions. Answerable scores are ranks 1..5; two near-domain and both unrelated questions sit below every
# answerable one, one near-domain question (0.55) sits between the 2nd and 3rd answerable scores.
ANSWERABLE = [0.4, 0.5, 0.6, 0.7, 0.8]
NEAR = [0.1, 0.2, 0.55]
UNRELATED = [0.05, 0.3]


@pytest.fixture
def ten():
    return pd.DataFrame(
        {
            "id": [f"q{n}" for n in range(10)],
            "answerable": [True] * 5 + [False] * 5,
            "slice": ["answerable"] * 5 + ["near-domain"] * 3 + ["unrelated"] * 2,
            "dense_top1": ANSWERABLE + NEAR + UNRELATED,
        }
    )


@pytest.fixture(scope="module")
def fastapi():
    return read_score_table(RESULTS / "fastapi" / "scores.csv", ["dense_top1"])


def test_hand_computed_ten_questions(ten):
    """Size 4 takes 2 of the 5 answerable, 1 of 3 near-domain, 1 of 2 unrelated (largest remainder: 2, 1.2, 0.8).

    The 10 * 3 * 2 = 60 subsamples are equally likely. keep@1.0's boundary is the lower answerable pick s, of
    rank i with probability C(5 - i, 1) / C(5, 2): 4/10, 3/10, 2/10, 1/10 for s = 0.4, 0.5, 0.6, 0.7. The
    threshold sits midway between s and b, the highest subsample score below s (fit_threshold's placement). The
    other answerable pick is above s, so b is an unanswerable pick: the unrelated one u (0.05 or 0.3, both below
    every answerable score) or the near-domain one n when u < n < s (0.1 and 0.2 always; 0.55 only for s >= 0.6).
    So t = (s + b) / 2, and P(t), in sixtieths (each of u, n fixed has probability 1/2 * 1/3 = 1/6):

        t = (0.4 + 0.05) / 2 = 0.225   s = 0.4, u = 0.05, n = 0.55                         4
        t = (0.4 + 0.1) / 2 = 0.25     s = 0.4, u = 0.05, n = 0.1                          4
        t = (0.5 + 0.05) / 2 = 0.275   s = 0.5, u = 0.05, n = 0.55                         3
        t = 0.3                        s = 0.4, n = 0.2 | s = 0.5, n = 0.1 (u = 0.05)      4 + 3
        t = 0.35                       s = 0.4, u = 0.3 | s = 0.5, n = 0.2 | s = 0.6, n = 0.1  12 + 3 + 2
        t = 0.4                        s = 0.5, u = 0.3 | s = 0.6, n = 0.2 | s = 0.7, n = 0.1  9 + 2 + 1
        t = 0.45                       s = 0.6, u = 0.3, n < 0.3 | s = 0.7, u = 0.05, n = 0.2  4 + 1
        t = (0.7 + 0.3) / 2 = 0.5      s = 0.7, u = 0.3, n < 0.3                           2
        t = (0.6 + 0.55) / 2 = 0.575   s = 0.6, n = 0.55                                   4
        t = (0.7 + 0.55) / 2 = 0.625   s = 0.7, n = 0.55                                   2

    CDF: 4, 8, 11, 18, 35, 47, 52, 54, 58, 60 sixtieths. Held-out answerable questions below s are now answered
    when they clear t, so the kept share depends on t as well as on s.
    """
    # confidence 0.7: the 15th, 50th and 85th percentiles. 16000 repeats: the closest CDF step is 1/60 from a
    # percentile, about 6 standard errors of the empirical CDF.
    curve = label_curve(ten, "dense_top1", "keep@1.0", sizes=[4], n_repeats=16000, confidence=0.7)
    row = curve.iloc[0]
    assert (row["size"], row["n_answerable"], row["n_unanswerable"], row["n_heldout"]) == (4, 2, 2, 6)
    # Threshold: CDF 8/60 < 0.15 < 11/60 at 0.275; 18/60 < 0.5 < 35/60 at 0.35; 47/60 < 0.85 < 52/60 at 0.45.
    # None of them is a calibration score of the subsample it came from (0.35 is (0.4 + 0.3) / 2, and also
    # (0.5 + 0.2) / 2 and (0.6 + 0.1) / 2). The old placement gave (0.4, 0.5, 0.6), the boundary scores.
    assert (row["threshold_low"], row["threshold"], row["threshold_high"]) == pytest.approx(
        ((0.5 + 0.05) / 2, (0.4 + 0.3) / 2, (0.6 + 0.3) / 2)
    )
    # Kept share (3 held-out answerable): 0 held out below t is kept 1. Kept 0: s = 0.7 and t = 0.625 > 0.6
    # (2/60). Kept 1/3: 0.4 and 0.5 held out below t = 0.575 (s = 0.6, n = 0.55; 4/60). Kept 2/3: 0.4 held out
    # below t in {0.45, 0.5} (s = 0.6, t = 0.45: 4/60; s = 0.7, t = 0.45 or 0.5: 1/60 + 2/60). Otherwise kept 1
    # (47/60): every held-out answerable score below s clears t. CDF 2/60, 6/60, 13/60, 1, so the 15th
    # percentile is 2/3 and the median and 85th are 1 (the old placement had median 2/3, 15th percentile 1/3).
    # Held-out 0.4 (t = 0.4) and 0.5 (t = 0.5) sit on t in exact arithmetic; counting them as refused instead
    # would move 12/60 from 1 to 2/3 and 2/60 from 2/3 to 1/3 (CDF 2/60, 8/60, 25/60): the same three
    # percentiles, so these assertions do not hang on floating-point rounding.
    assert row["answerable_kept"] == 1.0
    assert row["answerable_kept_low"] == pytest.approx(2 / 3)
    assert row["answerable_kept_high"] == 1.0
    # Near-domain: two of {0.1, 0.2, 0.55} held out. 0.1 and 0.2 are below every t (>= 0.225): refused. Held-out
    # 0.55 (n = 0.1 or 0.2, p = 2/3) is answered, since then t <= (0.7 + 0.3) / 2 = 0.5 < 0.55. So refused 1/2
    # with p = 2/3 and 1 with p = 1/3: percentiles 1/2, 1/2, 1 (the old placement refused 0.55 under
    # thresholds 0.6 and 0.7 and had median 1).
    assert (row["near_domain_refused_low"], row["near_domain_refused"], row["near_domain_refused_high"]) == (
        0.5,
        0.5,
        1.0,
    )
    # Unrelated: held-out 0.05 (u = 0.3) is always refused. Held-out 0.3 (u = 0.05) is answered when t <= 0.3:
    # t in {0.225, 0.25, 0.275} (11/60), plus t = 0.3 if (0.4 + 0.2) / 2 and (0.5 + 0.1) / 2 came out exactly
    # 0.3 (7/60; in floating point they land a hair above). P(refused 0) is 11/60 or 18/60, above 0.15 either
    # way: percentiles 0, 1, 1. The old placement never answered an unrelated question.
    assert (row["unrelated_refused_low"], row["unrelated_refused"], row["unrelated_refused_high"]) == (0.0, 1.0, 1.0)
    # All three held-out unanswerable: (2 * near-domain refused + unrelated refused) / 3. Refused 1 needs n = 0.55
    # and the unrelated one refused (u = 0.3, or u = 0.05 with s >= 0.6 so that t >= 0.575: 10/60 + 3/60 = 13/60);
    # refused 1/3 needs n < 0.55 and held-out 0.3 answered (t = 0.25: 4/60, or 11/60 if the 7/60 at t = 0.3
    # counted as answered). Median 2/3, 85th percentile 1
    # (CDF at 2/3 is 47/60 < 0.85) whatever that tie does; the 15th percentile (2/3, or 1/3 if the tie went the
    # other way: 11/60 > 0.15) rests on it and is not asserted.
    assert row["unanswerable_refused"] == pytest.approx(2 / 3)
    assert row["unanswerable_refused_high"] == 1.0
    assert row["fallback"] == 0.0
    assert curve.attrs == {"signal": "dense_top1", "rule": "keep@1.0", "n_repeats": 16000, "confidence": 0.7}


def test_every_subsample_threshold_lies_midway_between_two_subsample_scores(ten, monkeypatch):
    """Each subsample's keep@1.0 threshold is strictly between its boundary score and the next one below.

    The boundary s is the subsample's lowest answerable score; b is the highest subsample score (of either
    class) below it. The threshold is (s + b) / 2: it equals no subsample score, and it answers exactly the
    subsample questions that s would (s and above), so the calibration outcomes are those of the boundary.
    """
    fits = []
    module = importlib.import_module("ragcal.calibration.label_curve")

    def recording_fit_rule(rule, scores, answerable, **kwargs):
        result = fit_rule(rule, scores, answerable, **kwargs)
        fits.append((np.asarray(scores, dtype=float), np.asarray(answerable, dtype=bool), result[0]))
        return result

    monkeypatch.setattr(module, "fit_rule", recording_fit_rule)
    curve = label_curve(ten, "dense_top1", "keep@1.0", sizes=[4, 6, 7], n_repeats=50)
    assert len(fits) == 3 * 50
    for scores, answerable, threshold in fits:
        boundary = scores[answerable].min()
        below = scores[scores < boundary]
        assert below.size  # an unrelated question (0.05 or 0.3) is always below every answerable score
        neighbour = below.max()
        assert threshold == pytest.approx((boundary + neighbour) / 2)
        assert neighbour < threshold < boundary
        assert not np.any(scores == threshold)
        np.testing.assert_array_equal(scores >= threshold, scores >= boundary)
        assert (scores[answerable] >= threshold).all()  # keep@1.0 answers every calibration answerable question
    # The reported median and band are percentiles over those thresholds (interpolated), so within their range.
    for size, start in zip([4, 6, 7], [0, 50, 100]):
        fitted = [threshold for _, _, threshold in fits[start : start + 50]]
        row = curve.set_index("size").loc[size]
        for column in ["threshold_low", "threshold", "threshold_high"]:
            assert min(fitted) <= row[column] <= max(fitted)
    # Largest remainder over (5, 3, 2): size 6 is 3, 1.8, 1.2 -> 3, 2, 1; size 7 is 3.5, 2.1, 1.4 -> 4, 2, 1.
    assert list(curve["n_answerable"]) == [2, 3, 4]
    assert list(curve["n_unanswerable"]) == [2, 3, 3]


def test_ties_with_lower_is_answerable_and_orientation(ten):
    """A signal where low means answerable: negate the scores, the thresholds flip sign, the outcomes stay."""
    flipped = ten.assign(dense_top1=-ten["dense_top1"])
    upward = label_curve(ten, "dense_top1", "keep@1.0", sizes=[4], n_repeats=300)
    downward = label_curve(flipped, "dense_top1", "keep@1.0", sizes=[4], n_repeats=300, higher_is_answerable=False)
    assert downward["threshold"].iloc[0] == -upward["threshold"].iloc[0]
    shares = [column for column in upward.columns if column.startswith(("answerable_kept", "near_domain_refused"))]
    pd.testing.assert_frame_equal(upward[shares], downward[shares])
    # Ties: every answerable score is 0.5, so every subsample's boundary is 0.5 and the threshold is midway to the
    # highest unanswerable pick below 0.5: the unrelated pick u, or the near-domain pick n when u < n < 0.5
    # (0.55 is above). u = 0.3: (0.5 + 0.3) / 2 = 0.4 (p = 1/2). u = 0.05: (0.5 + 0.1) / 2, (0.5 + 0.2) / 2 or,
    # with n = 0.55, (0.5 + 0.05) / 2 = 0.275 (p = 1/6 each). 5th percentile 0.275 (CDF 1/6 > 0.05), 95th 0.4
    # (CDF 1/2 < 0.95); 400 repeats put many draws on both. Every tied held-out answerable question clears it.
    tied = ten.assign(dense_top1=[0.5] * 5 + NEAR + UNRELATED)
    row = label_curve(tied, "dense_top1", "keep@0.95", sizes=[4], n_repeats=400).iloc[0]
    assert (row["threshold_low"], row["threshold_high"]) == pytest.approx(((0.5 + 0.05) / 2, (0.5 + 0.3) / 2))
    assert (row["answerable_kept_low"], row["answerable_kept_high"]) == (1.0, 1.0)


def test_seeded_and_independent_of_the_other_sizes(fastapi):
    first = label_curve(fastapi, "dense_top1", "keep@0.95", sizes=[20, 60], n_repeats=100)
    again = label_curve(fastapi, "dense_top1", "keep@0.95", sizes=[60, 20, 20], n_repeats=100)
    pd.testing.assert_frame_equal(first, again)
    alone = label_curve(fastapi, "dense_top1", "keep@0.95", sizes=[60], n_repeats=100)
    pd.testing.assert_frame_equal(first.iloc[[1]].reset_index(drop=True), alone)
    other_seed = label_curve(fastapi, "dense_top1", "keep@0.95", sizes=[20, 60], n_repeats=100, random_state=1)
    assert not first.equals(other_seed)


def test_subsamples_keep_the_slice_mix(fastapi):
    curve = label_curve(fastapi, "dense_top1", "keep@0.95", n_repeats=20)
    counts = fastapi["slice"].value_counts()
    share_answerable = counts["answerable"] / counts.sum()
    assert (curve["n_answerable"] + curve["n_unanswerable"] == curve["size"]).all()
    assert (curve["n_heldout"] == len(fastapi) - curve["size"]).all()
    assert (abs(curve["n_answerable"] - curve["size"] * share_answerable) < 1).all()
    # Default grid: from the smallest size that gives every slice a question (one answerable, one near-domain,
    # one unrelated) to the published half split, where the subsample takes the larger half of every slice.
    half = sum(math.ceil(count / 2) for count in counts)
    assert curve["size"].iloc[0] == 3 and curve["size"].iloc[-1] == half
    assert curve["size"].is_monotonic_increasing and len(curve) >= 8


def test_the_band_narrows_as_the_labeled_set_grows(fastapi):
    """On the bundled FastAPI table: 9 labels leave the threshold wide open, 95 pin it down; the bands narrow."""
    curve = label_curve(fastapi, "dense_top1", "keep@0.95", sizes=[9, 30, 95], n_repeats=200).set_index("size")
    threshold_width = curve["threshold_high"] - curve["threshold_low"]
    kept_width = curve["answerable_kept_high"] - curve["answerable_kept_low"]
    near_width = curve["near_domain_refused_high"] - curve["near_domain_refused_low"]
    assert threshold_width[95] < 0.5 * threshold_width[9]
    assert kept_width[95] < kept_width[30] < kept_width[9]
    assert near_width[95] < near_width[9]
    # 9 labels hold 5 answerable questions, and keep@0.95 of 5 is keep@1.0: the boundary is the lowest answerable
    # score, whose held-out kept share would spread like Beta(5, 1) (kept_share_interval: 5th percentile
    # 0.05 ** (1 / 5) = 0.55; the boundary placement measured 0.51). The threshold now sits midway to the next
    # subsample score below, and among 9 scores that gap is wide, so the gate keeps more held-out answerable
    # questions than the boundary would: the low end of the band is well above 0.55 (about 0.80). This is also
    # why the kept band at 9 is now narrower (about 0.20, against 0.49 with the threshold on the boundary) and no
    # longer twice the band at 95 (about 0.12): the small-sample band is squeezed against 1 from below.
    assert curve.loc[9, "answerable_kept_low"] > kept_share_interval(5, keep=0.95, confidence=0.9)[0] + 0.1
    # And the median settles near the rule's target: small sets keep every answerable question of the subsample,
    # so they put the threshold high; with 95 labels the gaps between scores are small and the placed gate keeps
    # close to the 95% the rule asks for.
    assert curve.loc[9, "threshold"] > curve.loc[95, "threshold"]
    assert abs(curve.loc[95, "answerable_kept"] - 0.95) < 0.03


def test_nan_scores_are_left_out_with_a_warning(ten):
    with_nan = pd.concat(
        [ten, pd.DataFrame({"id": ["n1", "n2"], "answerable": [True, False], "slice": ["answerable", "unrelated"]})],
        ignore_index=True,
    )
    with pytest.warns(DegenerateInputWarning, match="2 queries with a NaN score"):
        curve = label_curve(with_nan, "dense_top1", "keep@1.0", sizes=[4], n_repeats=50)
    pd.testing.assert_frame_equal(curve, label_curve(ten, "dense_top1", "keep@1.0", sizes=[4], n_repeats=50))


@pytest.mark.parametrize(
    "sizes, message",
    [
        ([2], r"size 2 gives the slice 'unrelated' \(unanswerable\) questions none in the subsample; .*\[3, 7\]"),
        ([8], r"size 8 leaves none of the slice 'unrelated' \(unanswerable\) questions held out; .*\[3, 7\]"),
        ([0], r"size 0 .*\[3, 7\]"),
        ([4.5], "'sizes' parameter of label_curve must be a non-empty list of integers. Got \\[4.5\\]"),
        ([], "non-empty list of integers"),
    ],
)
def test_sizes_are_checked(ten, sizes, message):
    with pytest.raises(ValueError, match=message):
        label_curve(ten, "dense_top1", "keep@1.0", sizes=sizes)


def test_bad_input_is_named(ten):
    with pytest.raises(ValueError, match="every one of the 5 questions .* is answerable"):
        label_curve(ten[ten["answerable"]], "dense_top1", "keep@1.0")
    with pytest.raises(ValueError, match="every one of the 5 questions .* is unanswerable"):
        label_curve(ten[~ten["answerable"]], "dense_top1", "keep@1.0")
    with pytest.raises(ValueError, match="label_curve's table: missing column\\(s\\) 'dense_top2'"):
        label_curve(ten, "dense_top2", "keep@1.0")
    with pytest.raises(ValueError, match="unknown threshold rule 'keep@'"):
        label_curve(ten, "dense_top1", "keep@")
    with pytest.raises(ValueError, match="risk_guarantee@0.1 needs support levels"):
        label_curve(ten, "dense_top1", "risk_guarantee@0.1")
    with pytest.raises(ValueError, match="'n_repeats' parameter of label_curve must be an int >= 2. Got 1"):
        label_curve(ten, "dense_top1", "keep@1.0", n_repeats=1)
    with pytest.raises(ValueError, match="'confidence' parameter of label_curve must be a float in \\(0, 1\\)"):
        label_curve(ten, "dense_top1", "keep@1.0", confidence=1.0)
    too_few = ten.iloc[[0, 5, 8]]  # one question per group: nothing can be held out
    with pytest.raises(ValueError, match="no subsample size keeps a question of every slice"):
        label_curve(too_few, "dense_top1", "keep@1.0")


def test_a_guarantee_rule_that_cannot_be_met_counts_as_fallback(ten):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # fit_rule records the CalibrationWarning instead of raising it
        row = label_curve(ten, "dense_top1", "recall_guarantee@0.9", sizes=[4], n_repeats=20).iloc[0]
    # Two answerable calibration questions cannot guarantee recall 0.9: the rule answers everything.
    assert row["fallback"] == 1.0 and row["threshold"] == -math.inf
    assert row["answerable_kept"] == 1.0 and row["unanswerable_refused"] == 0.0


def test_kept_share_interval_is_the_beta_of_the_order_statistic():
    # keep@1.0 on n questions: the threshold is the lowest score, the kept share is Beta(n, 1), whose quantile
    # function is q ** (1 / n).
    low, high = kept_share_interval(19, keep=1.0, confidence=0.9)
    assert (low, high) == pytest.approx((0.05 ** (1 / 19), 0.95 ** (1 / 19)))
    # keep@0.95 on 103: the threshold is the 6th lowest (103 - ceil(97.85) + 1), kept ~ Beta(98, 6).
    assert kept_share_interval(103) == pytest.approx(tuple(beta(98, 6).ppf([0.05, 0.95])))
    with pytest.raises(ValueError, match="'n_answerable' parameter of kept_share_interval must be an int >= 1"):
        kept_share_interval(0)


def test_kept_share_interval_covers_fresh_draws():
    """Fit keep@0.95 on 40 uniform scores 4000 times: the true kept share 1 - t falls in the 90% interval 90%."""
    rng = np.random.default_rng(0)
    draws = rng.random((4000, 40))
    kept = np.array([1 - threshold_keep_share(row, keep=0.95) for row in draws])
    low, high = kept_share_interval(40, keep=0.95, confidence=0.9)
    covered = np.mean((kept >= low) & (kept <= high))
    assert 0.88 < covered < 0.92


def test_display_draws_the_curve_without_computing(fastapi):
    curve = label_curve(fastapi, "dense_top1", "keep@0.95", sizes=[10, 40, 95], n_repeats=50)
    display = LabelCurveDisplay.from_curve(curve)
    assert display.signal == "dense_top1" and display.rule == "keep@0.95"
    assert list(display.measures) == ["answerable_kept", "near_domain_refused", "unrelated_refused"]
    figure, axes = plt.subplots(1, 2)
    assert display.plot(ax=axes, name="FastAPI", linewidth=3) is display
    assert list(display.axes_) == list(axes) and display.figure_ is figure
    assert figure._suptitle.get_text() == "FastAPI"
    np.testing.assert_array_equal(display.lines_["answerable_kept"].get_ydata(), curve["answerable_kept"])
    assert {line.get_linewidth() for line in display.lines_.values()} == {3}
    assert "90% band" in axes[0].get_title(loc="left") and "50 subsamples" in axes[1].get_title(loc="left")
    # A curve read back from its CSV has lost attrs: signal and rule are then given.
    plain = pd.DataFrame(curve.to_dict("list"))
    assert LabelCurveDisplay.from_curve(plain, signal="s", rule="r").rule == "r"
    with pytest.raises(ValueError, match="missing column\\(s\\) \\['threshold_low'\\]"):
        LabelCurveDisplay.from_curve(curve.drop(columns="threshold_low"))
    with pytest.raises(ValueError, match="ax must be two Axes"):
        display.plot(ax=axes[0])
    plt.close("all")


def test_display_from_score_table(ten):
    display = LabelCurveDisplay.from_score_table(ten, rule="keep@1.0", sizes=[4, 6], n_repeats=20).plot()
    assert list(display.curve["size"]) == [4, 6] and display.n_repeats == 20
    plt.close("all")
