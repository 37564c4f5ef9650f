"""label_curve: how the threshold and its held-out outcome settle as the labeled set grows."""

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
from ragcal.calibration.rules import threshold_keep_share  # noqa: E402
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

    keep@1.0 puts the threshold at the lowest answerable score of the subsample. Drawing 2 of 5, the lowest is
    rank i with probability C(5 - i, 1) / C(5, 2): 4/10, 3/10, 2/10, 1/10 for i = 1..4. Then ranks 1..i-1 are
    held out below the threshold and 4 - i of the 3 held-out answerable questions are kept: 1, 2/3, 1/3, 0.
    """
    curve = label_curve(ten, "dense_top1", "keep@1.0", sizes=[4], n_repeats=4000, confidence=0.7)
    row = curve.iloc[0]
    assert (row["size"], row["n_answerable"], row["n_unanswerable"], row["n_heldout"]) == (4, 2, 2, 6)
    # Threshold: P(rank 1) = 0.4, P(rank <= 2) = 0.7, P(rank <= 3) = 0.9, so the 15th, 50th and 85th percentiles
    # are ranks 1, 2 and 3.
    assert (row["threshold_low"], row["threshold"], row["threshold_high"]) == (0.4, 0.5, 0.6)
    # Kept share: CDF 1/10 at 0, 3/10 at 1/3, 6/10 at 2/3, 1 at 1.
    assert row["answerable_kept"] == pytest.approx(2 / 3)
    assert row["answerable_kept_low"] == pytest.approx(1 / 3)
    assert row["answerable_kept_high"] == 1.0
    # Near-domain: 0.1 and 0.2 are always refused; 0.55 is refused when the threshold is 0.6 or 0.7 (p = 3/10).
    # Held out: {0.1, 0.2} (p = 1/3, refused 1) or 0.55 and one low one (refused 1/2 or 1).
    p_half = (2 / 3) * (7 / 10)
    assert p_half < 0.5  # so the median is 1, the 15th percentile 1/2
    assert row["near_domain_refused"] == 1.0
    assert row["near_domain_refused_low"] == 0.5
    assert (row["unrelated_refused_low"], row["unrelated_refused_high"]) == (1.0, 1.0)
    # All three held-out unanswerable: (near-domain refused + 1) / 3, so (2 * 1/2 + 1) / 3 at the 15th percentile.
    assert row["unanswerable_refused_low"] == pytest.approx((2 * 0.5 + 1) / 3)
    assert row["fallback"] == 0.0
    assert curve.attrs == {"signal": "dense_top1", "rule": "keep@1.0", "n_repeats": 4000, "confidence": 0.7}


def test_every_subsample_threshold_is_a_subsample_answerable_score(ten):
    curve = label_curve(ten, "dense_top1", "keep@1.0", sizes=[4, 6, 7], n_repeats=50)
    values = curve[["threshold", "threshold_low", "threshold_high"]].to_numpy().ravel()
    assert set(values) <= set(ANSWERABLE)
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
    # Ties: every answerable score equal, so every subsample's threshold is that score and everything is kept.
    tied = ten.assign(dense_top1=[0.5] * 5 + NEAR + UNRELATED)
    row = label_curve(tied, "dense_top1", "keep@0.95", sizes=[4], n_repeats=20).iloc[0]
    assert (row["threshold_low"], row["threshold_high"]) == (0.5, 0.5)
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
    """On the bundled FastAPI table: 9 labels leave the threshold and the kept share wide open, 95 pin them down."""
    curve = label_curve(fastapi, "dense_top1", "keep@0.95", sizes=[9, 30, 95], n_repeats=200).set_index("size")
    threshold_width = curve["threshold_high"] - curve["threshold_low"]
    kept_width = curve["answerable_kept_high"] - curve["answerable_kept_low"]
    near_width = curve["near_domain_refused_high"] - curve["near_domain_refused_low"]
    assert threshold_width[95] < 0.5 * threshold_width[9]
    assert kept_width[95] < 0.5 * kept_width[9]
    assert kept_width[95] < kept_width[30] < kept_width[9]
    assert near_width[95] < near_width[9]
    # And the median settles near the rule's target: small sets keep every answerable question (keep@0.95 of 5
    # questions is keep@1.0), so they put the threshold high and keep fewer held-out ones.
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
