"""Large logged score tables: reading CSV and Parquet, exact sweeps, subsampled bootstrap intervals.

These are options of the same functions small labeled sets use (auc_interval / auc_table with
bootstrap_rows, sweep with every_score_limit, calibrate), so each test also checks that the small-table
path is unchanged.
"""

import warnings

import numpy as np
import pandas as pd
import pytest

from ragcal.calibration import calibrate, fit_threshold
from ragcal.cli import main
from ragcal.metrics import DegenerateInputWarning, auc_interval, group_stats, outcome_table, sweep
from ragcal.metrics.auc import auc_interval
from ragcal.score_tables import read_score_table, unanswerable_slices

RULES = ["keep@0.95", "recall_guarantee@0.9", "false_answer_guarantee@0.2", "min_cost@5"]


def auc_ci(*args, **kwargs):
    """(auc, low, high) of auc_interval over every row (no subsample)."""
    result = auc_interval(*args, bootstrap_rows=None, **kwargs)
    return result.auc, result.low, result.high


def logged_table(n, random_state=0, decimals=None):
    rng = np.random.default_rng(random_state)
    slices = rng.choice(["answerable", "near-domain", "unrelated"], size=n, p=[0.5, 0.25, 0.25])
    centre = np.select([slices == "answerable", slices == "near-domain"], [0.6, 0.45], 0.25)
    scores = rng.normal(centre, 0.1)
    if decimals is not None:
        scores = np.round(scores, decimals)
    return pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(n)],
            "query": "logged question",
            "answerable": np.where(slices == "answerable", "yes", "no"),
            "slice": slices,
            "my_score": scores,
        }
    )


@pytest.fixture(scope="module")
def frame():
    return logged_table(3000, decimals=3)


def test_csv_and_parquet_read_the_same(tmp_path, frame):
    frame.to_csv(tmp_path / "log.csv", index=False)
    frame.to_parquet(tmp_path / "log.parquet")
    from_csv = read_score_table(tmp_path / "log.csv", ["my_score"])
    from_parquet = read_score_table(tmp_path / "log.parquet", ["my_score"])
    assert list(from_csv.columns) == ["id", "answerable", "slice", "my_score"]  # "query" is not needed, not read
    for table in (from_csv, from_parquet):
        assert table["answerable"].dtype == bool
        assert table["answerable"].tolist() == (frame["answerable"] == "yes").tolist()
        assert isinstance(table["slice"].dtype, pd.CategoricalDtype)
        np.testing.assert_array_equal(table["my_score"].to_numpy(), frame["my_score"].to_numpy())
    frame.to_csv(tmp_path / "log.csv.gz", index=False)
    np.testing.assert_array_equal(read_score_table(tmp_path / "log.csv.gz", ["my_score"])["my_score"], frame["my_score"])


def test_errors_name_the_file_the_line_and_the_column(tmp_path, frame):
    with pytest.raises(ValueError, match=r"log.csv: score table not found"):
        read_score_table(tmp_path / "log.csv", ["my_score"])
    frame.to_csv(tmp_path / "log.csv", index=False)
    with pytest.raises(ValueError, match=r"log.csv: missing column\(s\) 'nope'; have id, query, answerable"):
        read_score_table(tmp_path / "log.csv", ["nope"])
    broken = frame.astype({"answerable": object, "my_score": object})
    broken.loc[7, "answerable"] = "maybe"
    broken.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match=r"bad.csv, line 9, column 'answerable': .*got 'maybe'"):
        read_score_table(tmp_path / "bad.csv", ["my_score"])
    broken.loc[7, "answerable"] = "no"
    broken.loc[11, "my_score"] = "high"
    broken.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match=r"bad.csv, line 13, column 'my_score': not numeric, got 'high'"):
        read_score_table(tmp_path / "bad.csv", ["my_score"])
    frame.to_csv(tmp_path / "semi.csv", index=False, sep=";")
    with pytest.raises(ValueError, match=r"semi.csv: .*;"):
        read_score_table(tmp_path / "semi.csv", ["my_score"])
    frame.to_csv(tmp_path / "semi.csv.gz", index=False, sep=";")
    with pytest.raises(ValueError, match=r"semi.csv.gz: .*;"):
        read_score_table(tmp_path / "semi.csv.gz", ["my_score"])
    (tmp_path / "fake.parquet").write_text("not parquet")
    with pytest.raises(ValueError, match=r"fake.parquet: cannot be read as Parquet"):
        read_score_table(tmp_path / "fake.parquet", ["my_score"])


def test_small_tables_get_the_plain_bootstrap_unchanged(frame):
    labels, scores = (frame["answerable"] == "yes").to_numpy(), frame["my_score"].to_numpy()
    result = auc_interval(labels, scores, bootstrap_rows=5000, n_resamples=500)
    assert result.interval == "bootstrap" and result.bootstrap_rows == len(frame)
    assert (result.auc, result.low, result.high) == auc_ci(labels, scores, n_resamples=500)


def test_m_out_of_n_interval_matches_the_full_bootstrap_width():
    table = logged_table(60_000, random_state=4)
    labels, scores = (table["answerable"] == "yes").to_numpy(), table["my_score"].to_numpy()
    full = auc_ci(labels, scores, n_resamples=1000)
    scaled = auc_interval(labels, scores, bootstrap_rows=6000, n_resamples=1000)
    assert scaled.interval == "m-out-of-n bootstrap" and scaled.bootstrap_rows == 6000
    assert scaled.auc == full[0]  # the point estimate uses every row
    width_full, width_scaled = full[2] - full[1], scaled.high - scaled.low
    assert width_scaled == pytest.approx(width_full, rel=0.2)
    assert abs((scaled.low + scaled.high) / 2 - (full[1] + full[2]) / 2) < 0.25 * width_full
    # Not the unscaled subsample interval, which would be sqrt(10) times wider.
    assert width_scaled < 0.5 * np.sqrt(10) * width_full


def test_auc_interval_degenerate_input_is_nan_with_a_warning():
    with pytest.warns(DegenerateInputWarning, match="only one class"):
        result = auc_interval(np.ones(10, dtype=bool), np.arange(10.0))
    assert np.isnan(result.auc) and np.isnan(result.low)
    with pytest.warns(DegenerateInputWarning, match="constant"):
        assert np.isnan(auc_interval([True, False, True], [0.5, 0.5, 0.5]).auc)
    with pytest.raises(ValueError, match="'bootstrap_rows' parameter of auc_interval must be an int >= 2"):
        auc_interval([True, False], [1.0, 0.0], bootstrap_rows=1)


def test_sweep_with_fitted_thresholds_adds_them_as_rule_rows(frame, tmp_path):
    frame.to_csv(tmp_path / "log.csv", index=False)
    table = read_score_table(tmp_path / "log.csv", ["my_score"])
    swept = sweep(table, "my_score", thresholds=[0.123456], every_score_limit=20_000)
    full = sweep(table, "my_score")
    assert swept.attrs["scheme"] == "every distinct score"
    assert len(swept) == len(full) + 1
    pd.testing.assert_frame_equal(swept[swept["source"] != "rule"].reset_index(drop=True), full)
    assert swept.loc[swept["source"] == "rule", "threshold"].tolist() == [0.123456]


def test_sweep_of_many_distinct_scores_is_a_grid_with_exact_counts():
    table = logged_table(5000, random_state=2)  # full-precision scores: 5000 distinct
    table["answerable"] = table["answerable"] == "yes"
    swept = sweep(table, "my_score", thresholds=[0.5], grid_points=101, every_score_limit=1000)
    assert swept.attrs["scheme"].startswith("grid of 101 + rule thresholds (5000 distinct scores")
    assert len(swept) == 102 and swept["source"].value_counts().to_dict() == {"grid": 101, "rule": 1}
    expected = outcome_table(table, "my_score", swept["threshold"])
    pd.testing.assert_frame_equal(swept.drop(columns=["signal", "source"]), expected)


def test_calibrate_fits_every_rule_on_every_row():
    table = logged_table(4000, random_state=5)
    table["answerable"] = table["answerable"] == "yes"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = calibrate(table, "my_score", RULES, bootstrap_rows=1000, n_resamples=200, every_score_limit=100)
    expected = [fit_threshold(rule, table["my_score"], table["answerable"]) for rule in RULES]
    assert result.thresholds["threshold"].tolist() == expected
    assert result.thresholds["rule"].tolist() == RULES and not result.thresholds["fallback"].any()
    assert result.thresholds["messages"].map(len).sum() == 0 and result.heldout is None
    pd.testing.assert_frame_equal(
        result.thresholds.drop(columns=["rule", "fallback", "messages"]), outcome_table(table, "my_score", expected)
    )
    pd.testing.assert_frame_equal(result.group_stats, group_stats(table, ["my_score"]))
    assert result.auc["comparison"].tolist() == ["all unanswerable", *unanswerable_slices(table)]
    assert set(result.auc["interval"]) == {"m-out-of-n bootstrap"}
    assert result.sweep_scheme.startswith("grid of 1001") and result.n_rows == 4000


def test_calibrate_cli_reads_parquet_and_writes_the_sweep(tmp_path, capsys, frame):
    frame.to_parquet(tmp_path / "log.parquet")
    code = main(
        [
            "calibrate",
            str(tmp_path / "log.parquet"),
            "--signal",
            "my_score",
            "--rule",
            "keep@0.95",
            "--sweep",
            str(tmp_path / "sweep.csv"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "3000 queries" in out and "keep@0.95: answer when my_score >=" in out
    assert "AUC (answerable vs all unanswerable)" in out and "bootstrap" in out
    swept = pd.read_csv(tmp_path / "sweep.csv")
    table = read_score_table(tmp_path / "log.parquet", ["my_score"])
    threshold = fit_threshold("keep@0.95", table["my_score"], table["answerable"])
    assert threshold in swept["threshold"].tolist()
