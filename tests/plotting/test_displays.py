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
    AucComparisonDisplay,
    ChunkingSweepDisplay,
    HeldoutDisplay,
    RocDisplay,
    ScoreDistributionDisplay,
    TradeoffDisplay,
    save_figure,
)
from ragcal.plotting._style import slice_colours  # noqa: E402


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
    lowest = table.loc[table["answerable"], "dense_top1"].min()  # keep every answerable question: midway below it
    threshold = display.thresholds["keep@1.0"]
    scores = table["dense_top1"].dropna()
    # Below the lowest answerable score, above every score below it: every answerable question is kept, between scores.
    assert scores[scores < lowest].max() < threshold < lowest
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
    counts = explorer.counts_at(0.5)
    kept = int((table.loc[table["answerable"], "dense_top1"] >= 0.5).sum())
    assert counts.loc["answerable kept", "count"] == f"{kept}/30"
    assert counts.loc["answerable kept", "share"] == f"{kept / 30:.1%}"  # a percentage, not 0.966667
    assert list(counts.index)[0] == "answerable kept"  # groups label the rows, no 0..n index
    figure = explorer.figure_at(0.5)
    assert len(figure.axes) == 2
    widget = explorer.widget()
    slider = widget.children[0]
    assert slider.min <= slider.value <= slider.max
    slider.value = 0.55  # triggers a redraw without error


def test_threshold_slider_starts_at_the_rule_and_spans_answer_all_to_refuse_all(table):
    explorer = ThresholdExplorer(table)
    slider = explorer.widget().children[0]
    threshold = explorer.distribution.thresholds["keep@1.0"]
    # The exact threshold, not a rounded one: the live counts equal the rule's outcome.
    assert slider.value == threshold
    assert explorer.counts_at(slider.value).loc["answerable kept", "count"] == "30/30"
    answer_all = explorer.counts_at(slider.min)
    refuse_all = explorer.counts_at(slider.max)
    assert answer_all.loc["answerable kept", "count"] == "30/30"
    assert answer_all.loc["unanswerable refused", "count"].startswith("0/")
    assert refuse_all.loc["answerable kept", "count"] == "0/30"
    n_unanswerable = int((~table["answerable"]).sum())
    assert refuse_all.loc["unanswerable refused", "count"] == f"{n_unanswerable}/{n_unanswerable}"
    # The browser's slider takes min + k * step only: the grid must pass through the starting threshold.
    steps = (slider.value - slider.min) / slider.step
    assert abs(steps - round(steps)) < 1e-6


# --------------------------------------------------------------------------- several corpora


def auc_table(shift=0.0, n_answerable=30, n_unanswerable=(30, 15, 15)):
    """A small ``auc.csv``-shaped frame: three signals, the last one constant (NaN) everywhere."""
    rows = []
    for signal, centre in (("dense_top1", 0.95), ("bm25_top1_raw", 0.85), ("bm25_empty_raw", np.nan)):
        for comparison, n_negative, offset in zip(
            ("all unanswerable", "near-domain", "unrelated"), n_unanswerable, (0, -0.05, 0.03)
        ):
            auc = centre + offset + shift
            rows.append(
                {
                    "signal": signal,
                    "comparison": comparison,
                    "auc": auc,
                    "ci_low": auc - 0.04,
                    "ci_high": auc + 0.02,
                    "n_answerable": n_answerable,
                    "n_unanswerable": n_negative,
                }
            )
    return pd.DataFrame(rows)


@pytest.fixture
def auc_tables():
    return {"fastapi": auc_table(), "rust-book": auc_table(shift=-0.1, n_answerable=20, n_unanswerable=(24, 12, 12))}


def test_auc_comparison_display_collects_one_comparison(auc_tables):
    display = AucComparisonDisplay.from_auc_tables(auc_tables, comparison="near-domain")
    assert display.corpora == ["fastapi", "rust-book"]
    assert display.signals == ["dense_top1", "bm25_top1_raw"] and display.dropped == ["bm25_empty_raw"]
    np.testing.assert_allclose(display.auc, [[0.95 - 0.05, 0.95 - 0.05 - 0.1], [0.85 - 0.05, 0.85 - 0.05 - 0.1]])
    np.testing.assert_allclose(display.ci_low, display.auc - 0.04)
    np.testing.assert_allclose(display.ci_high, display.auc + 0.02)
    assert display.counts == {"fastapi": (30, 15), "rust-book": (20, 12)}
    chosen = AucComparisonDisplay.from_auc_tables(auc_tables, signals=["bm25_top1_raw", "dense_top1"])
    assert chosen.signals == ["bm25_top1_raw", "dense_top1"]
    assert chosen.auc[1, 0] == pytest.approx(0.95)


def test_auc_comparison_display_keeps_a_signal_constant_on_one_corpus(auc_tables):
    auc_tables["rust-book"].loc[auc_tables["rust-book"]["signal"] == "dense_top1", ["auc", "ci_low", "ci_high"]] = (
        np.nan
    )
    display = AucComparisonDisplay.from_auc_tables(auc_tables)
    assert display.signals == ["dense_top1", "bm25_top1_raw"]
    assert np.isnan(display.auc[0, 1]) and display.auc[0, 0] == pytest.approx(0.95)
    display.plot()
    # The fastapi series has both points; the rust-book series only one, and a note where the other would be.
    assert len(display.errorbars_["fastapi"][0].get_xdata()) == 2
    assert len(display.errorbars_["rust-book"][0].get_xdata()) == 1
    assert len(display.missing_["rust-book"]) == 1 and "constant" in display.missing_["rust-book"][0].get_text()


def test_auc_comparison_display_draws_on_the_given_axes_without_computing(auc_tables):
    display = AucComparisonDisplay.from_auc_tables(auc_tables)
    stored = [array.copy() for array in (display.auc, display.ci_low, display.ci_high)]
    _, ax = plt.subplots()
    assert display.plot(ax=ax) is display
    assert display.ax_ is ax and display.figure_ is ax.figure
    for array, before in zip((display.auc, display.ci_low, display.ci_high), stored):
        np.testing.assert_array_equal(array, before)
    assert set(display.errorbars_) == {"fastapi", "rust-book"}
    fastapi, rust = display.errorbars_["fastapi"], display.errorbars_["rust-book"]
    np.testing.assert_allclose(fastapi[0].get_xdata(), display.auc[:, 0])
    # One row per signal; the corpora sit at different heights within a row, with different markers and colours.
    assert len(set(fastapi[0].get_ydata()) | set(rust[0].get_ydata())) == 4
    assert fastapi[0].get_marker() != rust[0].get_marker() and fastapi[0].get_color() != rust[0].get_color()
    # One horizontal interval per point, from ci_low to ci_high.
    segments = fastapi[2][0].get_segments()
    assert len(segments) == 2
    np.testing.assert_allclose(
        [segment[:, 0] for segment in segments], np.c_[display.ci_low[:, 0], display.ci_high[:, 0]]
    )
    assert display.chance_line_.get_xdata()[0] == 0.5 and display.chance_line_.get_linestyle() == "--"
    assert [text.get_text().split(" ")[0] for text in ax.get_legend().get_texts()] == ["fastapi", "rust-book"]
    assert "all unanswerable" in ax.get_title(loc="left")
    assert ax.get_xlim()[0] <= 0.5 and ax.get_xlim()[1] >= 1.0


def test_auc_comparison_display_checks_its_input(auc_tables):
    with pytest.raises(ValueError, match=r"'rust-book' is missing column\(s\) \['ci_high'\]"):
        AucComparisonDisplay.from_auc_tables(
            {**auc_tables, "rust-book": auc_tables["rust-book"].drop(columns="ci_high")}
        )
    with pytest.raises(ValueError, match="no 'paraphrase' rows"):
        AucComparisonDisplay.from_auc_tables(auc_tables, comparison="paraphrase")
    with pytest.raises(ValueError, match="'signals' parameter"):
        AucComparisonDisplay.from_auc_tables(auc_tables, signals=["dense_top9"])
    with pytest.raises(TypeError, match="'tables' parameter"):
        AucComparisonDisplay.from_auc_tables([auc_tables["fastapi"]])


CHUNKING_METRICS = ("recall@5", "mrr@10", "dense_top1_auc", "bm25_top1_raw_auc")
CHUNKING_VARIANTS = ("headings-128", "headings-256", "headings-512", "fixed-500")


def chunking_table(shift=0.0):
    """A small ``chunking.csv``-shaped frame: value = base + shift - 0.02 * variant position, interval +-0.05."""
    rows = []
    for position, variant in enumerate(CHUNKING_VARIANTS):
        row = {"variant": variant, "chunks": 1000 // (position + 1)}
        for number, metric in enumerate(CHUNKING_METRICS):
            value = 0.9 - 0.05 * number + shift - 0.02 * position
            baseline = 0.9 - 0.05 * number + shift - 0.02 * 1
            difference = value - baseline
            row.update(
                {
                    metric: value,
                    f"{metric}_low": value - 0.05,
                    f"{metric}_high": value + 0.05,
                    f"{metric}_diff": difference,
                    # Only fixed-500 differs clearly from headings-256.
                    f"{metric}_diff_low": difference - (0.01 if variant == "fixed-500" else 0.03),
                    f"{metric}_diff_high": difference + (0.01 if variant == "fixed-500" else 0.03),
                }
            )
        rows.append(row)
    return pd.DataFrame(rows)


@pytest.fixture
def chunking_tables():
    return {"fastapi": chunking_table(), "rust-book": chunking_table(shift=-0.1)}


def test_chunking_sweep_display_collects_the_tables(chunking_tables):
    display = ChunkingSweepDisplay.from_chunking_tables(chunking_tables)
    assert display.corpora == ["fastapi", "rust-book"] and display.variants == list(CHUNKING_VARIANTS)
    assert display.metrics == list(CHUNKING_METRICS) and display.baseline == "headings-256"
    positions = np.arange(len(CHUNKING_VARIANTS))
    expected = np.c_[0.9 - 0.05 - 0.02 * positions, 0.9 - 0.05 - 0.1 - 0.02 * positions]
    np.testing.assert_allclose(display.values["mrr@10"], expected)
    np.testing.assert_allclose(display.lows["mrr@10"], expected - 0.05)
    np.testing.assert_allclose(display.highs["mrr@10"], expected + 0.05)
    np.testing.assert_array_equal(display.differs["recall@5"][:, 0], [False, False, False, True])
    np.testing.assert_array_equal(display.chunks[:, 1], [1000 // (position + 1) for position in positions])
    # A variant missing from one corpus stays, NaN for that corpus; the order follows the first table.
    chunking_tables["rust-book"] = chunking_tables["rust-book"][chunking_tables["rust-book"]["variant"] != "fixed-500"]
    partial = ChunkingSweepDisplay.from_chunking_tables(chunking_tables, metrics=["recall@5"])
    assert partial.variants == list(CHUNKING_VARIANTS) and np.isnan(partial.values["recall@5"][3, 1])
    partial.plot()
    assert len(partial.markers_[("recall@5", "rust-book")].get_offsets()) == 3


def test_chunking_sweep_display_draws_on_the_given_axes_without_computing(chunking_tables):
    display = ChunkingSweepDisplay.from_chunking_tables(chunking_tables)
    stored = {metric: display.values[metric].copy() for metric in display.metrics}
    figure, axes = plt.subplots(1, 4)
    assert display.plot(ax=axes) is display
    assert list(display.axes_) == list(axes) and display.figure_ is figure
    for metric in display.metrics:
        np.testing.assert_array_equal(display.values[metric], stored[metric])
    # One marker set and one set of intervals per (metric, corpus), one point per variant.
    assert len(display.markers_) == len(display.errorbars_) == 4 * 2
    markers = display.markers_[("dense_top1_auc", "rust-book")]
    offsets = markers.get_offsets()
    np.testing.assert_allclose(offsets[:, 1], display.values["dense_top1_auc"][:, 1])
    fastapi_x = display.markers_[("dense_top1_auc", "fastapi")].get_offsets()[:, 0]
    assert np.all(offsets[:, 0] > fastapi_x) and np.all(offsets[:, 0] - fastapi_x < 0.5)
    segments = display.errorbars_[("dense_top1_auc", "rust-book")][2][0].get_segments()
    np.testing.assert_allclose(
        [segment[:, 1] for segment in segments],
        np.c_[display.lows["dense_top1_auc"][:, 1], display.highs["dense_top1_auc"][:, 1]],
    )
    # Filled where the paired difference is clear, and for the baseline; hollow (white) otherwise.
    faces = markers.get_facecolors()
    assert [tuple(face[:3]) == (1.0, 1.0, 1.0) for face in faces] == [True, False, True, False]
    ax = axes[2]
    assert ax.get_title(loc="left") == "dense_top1_auc"
    assert [label.get_text() for label in ax.get_xticklabels()] == list(CHUNKING_VARIANTS)
    assert ax.xaxis.get_major_ticks()[1].label1.get_fontweight() == "bold"
    band = display.baseline_bands_["dense_top1_auc"].get_extents()
    assert band.width > 0
    assert [text.get_text() for text in display.legend_.get_texts()] == ["fastapi", "rust-book"]


def test_chunking_sweep_display_lays_out_a_grid_and_hides_spare_axes(chunking_tables):
    display = ChunkingSweepDisplay.from_chunking_tables(
        chunking_tables, metrics=("recall@5", "mrr@10", "dense_top1_auc")
    )
    display.plot()
    assert display.axes_.size == 4 and not display.axes_[3].get_visible()
    with pytest.raises(ValueError, match="'ax' parameter"):
        display.plot(ax=plt.subplots(1, 2)[1])


def test_chunking_sweep_display_checks_its_input(chunking_tables):
    broken = {**chunking_tables, "rust-book": chunking_tables["rust-book"].drop(columns="mrr@10_diff_high")}
    with pytest.raises(ValueError, match=r"'rust-book' is missing column\(s\) \['mrr@10_diff_high'\]"):
        ChunkingSweepDisplay.from_chunking_tables(broken)
    with pytest.raises(ValueError, match=r"missing column\(s\) \['ndcg@10'"):
        ChunkingSweepDisplay.from_chunking_tables(chunking_tables, metrics=["ndcg@10"])
    with pytest.raises(ValueError, match="'baseline' parameter"):
        ChunkingSweepDisplay.from_chunking_tables(chunking_tables, baseline="headings-1024")


def test_coefficient_display_orders_by_the_first_gate_and_draws_on_the_given_axes():
    from ragcal.plotting import CoefficientDisplay

    coefficients = pd.DataFrame(
        {
            "gate": ["small", "small", "small", "big", "big"],
            "signal": ["dense_top1", "bm25_top1_raw", "(intercept)", "dense_top1", "bm25_top1_raw"],
            "mean": [0.5, -2.0, 3.0, 1.0, 0.2],
            "low": [0.1, -2.5, 2.0, 0.5, -0.1],
            "high": [0.9, -1.5, 4.0, 1.5, 0.4],
        }
    )
    display = CoefficientDisplay.from_coefficients(coefficients)
    assert display.gates == ["small", "big"]
    assert list(pd.unique(display.coefficients["signal"])) == ["bm25_top1_raw", "dense_top1"]  # |-2.0| first
    _, ax = plt.subplots()
    assert display.plot(ax=ax) is display and display.ax_ is ax
    assert set(display.points_) == {"small", "big"}
    x, _ = display.points_["small"].get_data()
    np.testing.assert_allclose(x, [-2.0, 0.5])
    plt.close("all")
    with pytest.raises(ValueError, match="missing column"):
        CoefficientDisplay.from_coefficients(coefficients.drop(columns="low"))
    with pytest.raises(ValueError, match="no coefficients for gate"):
        CoefficientDisplay.from_coefficients(coefficients, gates=["nope"])


def test_roc_display_draws_more_signals_than_the_palette_has_colours(table):
    wide = table.assign(**{f"copy{n}": table["dense_top1"] + 0.001 * n for n in range(15)})
    display = RocDisplay.from_score_table(wide, [f"copy{n}" for n in range(15)], n_resamples=50, n_band_resamples=5)
    display.plot(bands=False)
    assert len(display.lines_) == 15
    plt.close("all")


def test_every_display_takes_ax_name_and_matplotlib_kwargs(table, chunking_tables):
    """One plot contract, as scikit-learn's Displays: ``plot(ax=None, *, name=None, **kwargs)``."""
    import inspect

    from ragcal import plotting

    for name in plotting.__all__:
        display = getattr(plotting, name)
        if name.endswith("Display"):
            parameters = inspect.signature(display.plot).parameters
            assert list(parameters)[1] == "ax", name
            assert "name" in parameters and any(p.kind is p.VAR_KEYWORD for p in parameters.values()), name
    roc = RocDisplay.from_score_table(table, ["dense_top1", "other"], n_resamples=50, n_band_resamples=20)
    figure, ax = plt.subplots()
    roc.plot(ax=ax, name="two signals", linewidth=3.5, alpha=0.6)
    assert ax.get_title(loc="left") == "two signals"
    assert {line.get_linewidth() for line in roc.lines_.values()} == {3.5}
    assert {line.get_alpha() for line in roc.lines_.values()} == {0.6}
    sweep_display = ChunkingSweepDisplay.from_chunking_tables(chunking_tables)
    figure, axes = plt.subplots(1, 4)
    sweep_display.plot(ax=axes, name="chunkings", alpha=0.5)
    assert list(sweep_display.axes_) == list(axes) and figure._suptitle.get_text() == "chunkings"
    assert {markers.get_alpha() for markers in sweep_display.markers_.values()} == {0.5}


def test_risk_coverage_display_draws_curves_and_gate_points():
    from ragcal.metrics.selective import risk_coverage
    from ragcal.plotting import RiskCoverageDisplay

    scores = {"a": np.array([0.9, 0.8, 0.7, 0.6]), "b": np.array([0.6, 0.7, 0.8, 0.9])}
    support = {"a": np.array([True, False, True, False]), "b": np.array([True, False, True, False])}
    display = RiskCoverageDisplay.from_scores(scores, support).plot()
    assert display.aurc["a"][0] == pytest.approx((0 + 1 / 2 + 1 / 3 + 2 / 4) / 4)
    assert list(display.lines_["a"].get_ydata()) == pytest.approx([0.0, 0.5, 1 / 3, 0.5])
    curves = pd.concat(
        [risk_coverage(scores["a"], support["a"]).assign(kind="signal", name="a"),
         pd.DataFrame([{"kind": "gate", "name": "g", "coverage": 0.5, "coverage_low": 0.4, "coverage_high": 0.6,
                        "risk": 0.2, "risk_low": 0.1, "risk_high": 0.3}])],
        ignore_index=True,
    )
    summary = pd.DataFrame([{"name": "a", "measure": "aurc", "value": 0.33, "low": 0.2, "high": 0.4}])
    display = RiskCoverageDisplay.from_results(curves, summary).plot(name="corpus")
    assert list(display.points_) == ["g"] and display.aurc["a"] == (0.33, 0.2, 0.4)
    assert display.ax_.get_title(loc="left") == "corpus"
    with pytest.raises(ValueError, match="no curve"):
        RiskCoverageDisplay.from_results(curves, summary, signals=["missing"])
    plt.close("all")
