import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from sklearn.metrics import roc_curve  # noqa: E402

from ragcal.calibration import heldout_outcomes  # noqa: E402
from ragcal.interactive import ThresholdExplorer  # noqa: E402
from ragcal.metrics import sweep  # noqa: E402
from ragcal.plotting import (  # noqa: E402
    HeldoutDisplay,
    RocDisplay,
    ScoreDistributionDisplay,
    TradeoffDisplay,
    save_figure,
    slice_colours,
)


@pytest.fixture
def table():
    rng = np.random.default_rng(0)
    slices = np.array(["answerable"] * 30 + ["near-domain"] * 15 + ["unrelated"] * 15)
    centre = np.select([slices == "answerable", slices == "near-domain"], [0.65, 0.42], 0.22)
    return pd.DataFrame(
        {
            "id": [f"q{n}" for n in range(60)],
            "answerable": slices == "answerable",
            "slice": slices,
            "dense_top1": rng.normal(centre, 0.07),
            "other": rng.normal(centre, 0.2),
        }
    )


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("kind", ["hist", "ecdf", "strip"])
def test_distribution_display_draws_on_the_given_axes(table, kind):
    display = ScoreDistributionDisplay.from_score_table(table, "dense_top1", rules=("keep@1.0",))
    assert display.thresholds["keep@1.0"] == pytest.approx(table.loc[table["answerable"], "dense_top1"].min())
    np.testing.assert_array_equal(display.scores["near-domain"], np.sort(table.loc[30:44, "dense_top1"]))
    _, ax = plt.subplots()
    assert display.plot(ax=ax, kind=kind) is display
    assert display.ax_ is ax and display.figure_ is ax.figure
    assert set(display.artists_) == {"answerable", "near-domain", "unrelated"}
    assert display.threshold_lines_["keep@1.0"].get_xdata()[0] == pytest.approx(display.thresholds["keep@1.0"])
    with pytest.raises(ValueError, match="'kind' parameter"):
        display.plot(kind="violin")


def test_roc_display_matches_sklearn(table):
    display = RocDisplay.from_score_table(table, ["dense_top1", "other"], n_resamples=200, n_band_resamples=50)
    fpr, tpr, _ = roc_curve(table["answerable"], table["dense_top1"])
    np.testing.assert_array_equal(display.curves["dense_top1"][0], fpr)
    np.testing.assert_array_equal(display.curves["dense_top1"][1], tpr)
    grid, low, high = display.bands["other"]
    assert grid.shape == low.shape == high.shape and np.all(low <= high + 1e-12)
    display.plot()
    assert set(display.lines_) == {"dense_top1", "other"}
    assert "dense_top1: " in display.lines_["dense_top1"].get_label()
    near = RocDisplay.from_score_table(
        table, ["dense_top1"], comparison="near-domain", n_resamples=100, n_band_resamples=20
    )
    assert near.comparison == "near-domain"


def test_roc_display_flips_low_is_answerable_signals(table):
    flipped = table.assign(distance=-table["dense_top1"])
    display = RocDisplay.from_score_table(
        flipped, ["distance"], directions={"distance": False}, n_resamples=100, n_band_resamples=10
    )
    assert display.aucs["distance"][0] > 0.9


def test_tradeoff_display_uses_the_sweep(table):
    display = TradeoffDisplay.from_score_table(table, "dense_top1", grid_size=50)
    assert list(display.groups) == ["answerable_kept", "near_domain_refused", "unrelated_refused"]
    reference = sweep(table, "dense_top1", grid=display.curves["threshold"].to_numpy())
    reference = reference[reference["source"] != "score"].reset_index(drop=True)
    pd.testing.assert_frame_equal(display.curves, reference)
    display.plot()
    assert set(display.lines_) == set(display.groups) and set(display.threshold_lines_) == {"keep@1.0", "keep@0.95"}


def test_heldout_display(table):
    outcomes = heldout_outcomes(table, "dense_top1", ["keep@1.0", "min_cost@5"], n_splits=10)
    display = HeldoutDisplay.from_heldout(outcomes).plot()
    assert display.rules == ["keep@1.0", "min_cost@5"]
    assert list(display.measures) == ["answerable_kept", "near_domain_refused", "unrelated_refused"]
    with pytest.raises(ValueError, match="missing column"):
        HeldoutDisplay.from_heldout(outcomes.drop(columns="answerable_kept"))


def test_save_figure_writes_png_and_svg(table, tmp_path):
    display = ScoreDistributionDisplay.from_score_table(table).plot()
    paths = save_figure(display.figure_, tmp_path / "deep" / "figure")
    assert [path.suffix for path in paths] == [".png", ".svg"] and all(path.stat().st_size > 5000 for path in paths)
    again = ScoreDistributionDisplay.from_score_table(table).plot()
    save_figure(again.figure_, tmp_path / "again")
    # No date in the SVG: regenerating an unchanged figure leaves the file unchanged.
    assert (tmp_path / "again.svg").read_text() == (tmp_path / "deep" / "figure.svg").read_text()


def test_slice_colours_are_stable_and_distinct():
    colours = slice_colours(["answerable", "near-domain", "unrelated", "other", "more"])
    assert colours["answerable"] == "#0072B2" and len(set(colours.values())) == 5


def test_threshold_explorer(table):
    explorer = ThresholdExplorer(table)
    counts = explorer.counts_at(0.5).set_index("group")
    kept = int((table.loc[table["answerable"], "dense_top1"] >= 0.5).sum())
    assert counts.loc["answerable kept", "count"] == f"{kept}/30"
    figure = explorer.figure_at(0.5)
    assert len(figure.axes) == 2
    widget = explorer.widget()
    slider = widget.children[0]
    assert slider.min <= slider.value <= slider.max
    slider.value = 0.55  # triggers a redraw without error
