"""The monitor through an engine (ragcal.logs.monitor_counts): pandas, DuckDB and Spark give the same report."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import ks_2samp

from ragcal.cli import main
from ragcal.cli._options import DEFAULT_BINS as CLI_BINS
from ragcal.cli._options import ENGINES as CLI_ENGINES
from ragcal.cli._options import MAX_DISTINCT as CLI_MAX_DISTINCT
from ragcal.gates.files import save_gate
from ragcal.gates.threshold import ThresholdGate
from ragcal.logs.counts import DEFAULT_BINS, MAX_DISTINCT
from ragcal.logs.engines import ENGINES
from ragcal.logs.monitor_counts import (
    KS_EXACT_ROWS,
    bootstrap_median_shift,
    ks_from_counts,
    median_from_counts,
    monitor_log,
)
from ragcal.logs.spark_counts import local_spark_session
from ragcal.monitoring import monitor
from ragcal.monitoring.shift_tests import share_tests, share_tests_from_counts

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")

GATE = ThresholdGate("dense_top1", 0.5, hedge_below=0.55)
START = pd.Timestamp("2026-01-01", tz="UTC")


def live_log(n=3_000, *, seed=0, distinct=1_000, shift=0.05):
    """An unlabeled log of dense_top1 scores, one per minute, a few NaN; ``distinct`` rounds the scores (ties)."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(0.5 + shift, 0.1, n)
    if distinct:
        scores = np.round(scores * distinct) / distinct
    scores[rng.random(n) < 0.01] = np.nan
    return pd.DataFrame(
        {"id": [f"q{i}" for i in range(n)], "dense_top1": scores,
         "timestamp": START + pd.to_timedelta(np.arange(n), unit="min")}
    )  # fmt: skip


def calibration_table(n=1_000, *, seed=1):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {"id": [f"c{i}" for i in range(n)], "answerable": rng.random(n) < 0.6, "slice": "answerable",
         "dense_top1": np.round(rng.normal(0.5, 0.1, n), 3)}
    )  # fmt: skip


@pytest.fixture(scope="module")
def spark():
    session = local_spark_session(cores=2)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("monitor_engines")
    log = live_log()
    log.to_parquet(folder / "live.parquet", index=False)
    log.to_csv(folder / "live.csv", index=False)
    (folder / "lake").mkdir()
    for part, start in enumerate(range(0, len(log), 1_000)):  # a folder of Parquet parts
        log.iloc[start : start + 1_000].to_parquet(folder / "lake" / f"part-{part}.parquet", index=False)
    calibration_table().to_csv(folder / "calibration.csv", index=False)
    return folder


def assert_same_tests(report, expected, *, medians=True):
    """Shares, KS statistics and p-values, (medians), the family and the verdict equal."""
    pd.testing.assert_frame_equal(report.shares, expected.shares)
    columns = ["signal", "live_n", "live_nan", "calibration_n", "calibration_nan", "ks_statistic", "p_value"]
    columns += ["live_median", "calibration_median", "median_shift"] if medians else []
    pd.testing.assert_frame_equal(report.signals[columns], expected.signals[columns], check_dtype=False)
    assert (report.n_live, report.n_calibration) == (expected.n_live, expected.n_calibration)
    pd.testing.assert_frame_equal(report.tests, expected.tests)
    assert report.verdict == expected.verdict and report.shift_detected == expected.shift_detected


# ------------------------------------------------------------------------------------------- the counts forms


def test_share_tests_from_counts_is_what_share_tests_computes():
    live = ["answer"] * 7 + ["hedge"] * 2 + ["refuse"] * 5
    calibration = ["answer"] * 3 + ["refuse"] * 9
    expected = share_tests(live, calibration)
    pd.testing.assert_frame_equal(share_tests_from_counts([7, 2, 5], 14, [3, 0, 9], 12), expected)
    with pytest.raises(ValueError, match="summing to live_n=15"):
        share_tests_from_counts([7, 2, 5], 15, [3, 0, 9], 12)


@pytest.mark.parametrize("sizes", [(40, 25), (3_000, 1_000), (KS_EXACT_ROWS + 2_000, 900)])
def test_ks_from_counts_equals_scipy_on_the_rows(sizes):
    rng = np.random.default_rng(sum(sizes))
    live = np.round(rng.normal(0.1, 1, sizes[0]), 1)  # ties within and across the samples
    calibration = np.round(rng.normal(0, 1, sizes[1]), 1)
    expected = ks_2samp(live, calibration)
    statistic, p_value = ks_from_counts(
        *np.unique(live, return_counts=True), *np.unique(calibration, return_counts=True)
    )
    assert statistic == expected.statistic  # to the bit, exact or asymptotic branch
    assert p_value == pytest.approx(expected.pvalue, rel=1e-12, abs=1e-300)
    assert np.isnan(ks_from_counts([], [], [1.0], [3])).all()


def test_median_from_counts_and_the_bootstrap_of_order_statistics():
    assert median_from_counts([1.0, 2.0, 5.0], [1, 1, 1]) == 2.0
    assert median_from_counts([1.0, 2.0, 5.0], [1, 1, 2]) == 3.5  # rows 1, 2, 5, 5
    assert median_from_counts([0.5], [4]) == 0.5 and np.isnan(median_from_counts([], []))
    rng = np.random.default_rng(3)
    for n in (101, 100):  # odd and even: the order-statistic draws have the distribution of resampled medians
        rows = np.round(rng.exponential(1, n), 2)
        values, counts = np.unique(rows, return_counts=True)
        resampled = np.median(rng.choice(rows, size=(20_000, n)), axis=1)
        low, high = bootstrap_median_shift(values, counts, [0.0], [5], n_resamples=20_000, random_state=4)
        assert low == pytest.approx(np.quantile(resampled, 0.025), abs=0.02)
        assert high == pytest.approx(np.quantile(resampled, 0.975), abs=0.02)
    assert np.isnan(bootstrap_median_shift([1.0], [1], [1.0], [5])).all()  # one live row: no interval


# ------------------------------------------------------------------------------------------- the engines agree


def test_cli_engines_are_the_library_engines():
    assert CLI_ENGINES == ENGINES
    assert (CLI_BINS, CLI_MAX_DISTINCT) == (DEFAULT_BINS, MAX_DISTINCT)


@pytest.mark.parametrize("name", ["live.parquet", "live.csv", "lake"])
def test_duckdb_and_spark_reports_equal_the_in_memory_report(files, spark, name):
    expected = monitor(GATE, live_log(), calibration_table(), n_resamples=0)  # rng untouched: same martingale
    assert expected.sequential is not None and expected.shift_detected
    engines = ["duckdb", "spark"] + (["pandas"] if name != "lake" else [])
    for engine in engines:
        report = monitor_log(GATE, files / name, files / "calibration.csv", engine=engine, n_resamples=0)
        assert_same_tests(report, expected)
        assert report.sequential.p_value == expected.sequential.p_value
        assert report.sequential.n == expected.sequential.n and report.sequential.dropped_nan > 0
        if engine != "pandas":
            assert any("exact" in note for note in report.notes) and (report.signals["ks_error"] == 0).all()
            assert any("(all of them)" in note for note in report.notes)
    bootstrapped = monitor_log(GATE, files / name, files / "calibration.csv", engine="duckdb")
    low, high = bootstrapped.signals.loc[0, ["shift_low", "shift_high"]]
    assert low < bootstrapped.signals.loc[0, "median_shift"] < high


def test_a_grid_gives_the_binned_ks_within_its_stated_error(tmp_path):
    log = live_log(4_000, seed=5, distinct=None)
    log.to_parquet(tmp_path / "live.parquet", index=False)
    calibration = calibration_table()
    report = monitor_log(GATE, tmp_path / "live.parquet", calibration, engine="duckdb", max_distinct=500, bins=200,
                         n_resamples=0)  # fmt: skip
    expected = monitor(GATE, log, calibration, n_resamples=0)
    pd.testing.assert_frame_equal(report.shares, expected.shares)  # decisions are on the rows, never binned
    row, exact = report.signals.iloc[0], expected.signals.iloc[0]
    assert 0 < row["ks_error"] < 0.05 and any("binned" in note for note in report.notes)
    assert exact["ks_statistic"] - row["ks_error"] <= row["ks_statistic"] <= exact["ks_statistic"]
    width = (np.nanmax(log["dense_top1"]) - np.nanmin(log["dense_top1"])) / 200
    assert 0 <= exact["live_median"] - row["live_median"] < width


def test_the_window_and_the_first_rows_of_the_test_over_time(files, spark):
    since, until = "2026-01-01T10:00:00Z", "2026-01-02T00:00:00"
    log = live_log()
    inside = log[(log["timestamp"] >= pd.Timestamp(since)) & (log["timestamp"] < pd.Timestamp(until, tz="UTC"))]
    expected = monitor(GATE, inside, calibration_table(), n_resamples=0)
    for engine in ("pandas", "duckdb", "spark"):
        source = files / ("live.csv" if engine == "pandas" else "lake")
        report = monitor_log(GATE, source, files / "calibration.csv", engine=engine, since=since, until=until,
                             n_resamples=0)  # fmt: skip
        assert report.n_live == len(inside) == 840
        assert_same_tests(report, expected)
    short = monitor_log(GATE, files / "lake", files / "calibration.csv", engine="duckdb", sequential_rows=500,
                        n_resamples=0)  # fmt: skip
    first = log.iloc[:500]
    assert short.sequential.n == int(first["dense_top1"].notna().sum())
    assert any("500 earliest rows in time order of 3,000" in note for note in short.notes)


def test_bad_input_names_the_log(files, tmp_path):
    no_time = tmp_path / "no_time.parquet"
    live_log().drop(columns="timestamp").to_parquet(no_time, index=False)
    with pytest.raises(ValueError, match="no_time.parquet: --since/--until need a 'timestamp' column"):
        monitor_log(GATE, no_time, calibration_table(), engine="duckdb", since="2026-01-01")
    other = tmp_path / "other.parquet"
    live_log().rename(columns={"dense_top1": "bm25_top1"}).to_parquet(other, index=False)
    with pytest.raises(ValueError, match="other.parquet: no column 'dense_top1'"):
        monitor_log(GATE, other, calibration_table(), engine="duckdb")
    with pytest.raises(ValueError, match="no rows in the window"):
        monitor_log(GATE, files / "lake", calibration_table(), engine="duckdb", since="2030-01-01")


def test_the_cli_with_duckdb_on_a_glob(files, tmp_path, capsys):
    gate_path = save_gate(tmp_path / "gate.json", GATE)
    code = main(["monitor", str(files / "lake" / "part-*.parquet"), "--gate", str(gate_path), "--calibration",
                 str(files / "calibration.csv"), "--engine", "duckdb", "--since", "2026-01-01T10:00",
                 "--json"])  # fmt: skip
    printed = json.loads(capsys.readouterr().out)
    assert code == 1 and printed["shift_detected"] and printed["n_live"] == 3_000 - 600
    assert any("Engine duckdb" in note for note in printed["notes"])
    code = main(["monitor", str(files / "lake"), "--gate", str(gate_path), "--calibration",
                 str(files / "calibration.csv"), "--engine", "pandas"])  # fmt: skip
    assert code == 2 and "use --engine duckdb for a folder or a glob" in capsys.readouterr().err
