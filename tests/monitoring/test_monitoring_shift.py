"""The monitor (ragcal.monitoring): shift checks on unlabeled score logs, their false-alarm rate and their power."""

from functools import lru_cache

import numpy as np
import pandas as pd
import pytest
from scipy.stats import beta, binom

from ragcal.cli import main
from ragcal.datasets import DATA_DIR
from ragcal.gates import read_gate_file
from ragcal.monitoring import monitor, read_score_log
from ragcal.monitoring.sequential import CALIBRATORS, conformal_p_values, jumper_martingale, sequential_test
from ragcal.monitoring.shift_tests import share_tests

ROOT = DATA_DIR.parent
SCORES = ROOT / "results" / "fastapi" / "scores.csv"
GATES = ROOT / "results" / "fastapi" / "gates"
THRESHOLD_GATE = GATES / "threshold_keep095.json"
CHAIN_GATE = GATES / "chain_keep095.json"


@lru_cache(maxsize=None)
def _scores() -> pd.DataFrame:
    return pd.read_csv(SCORES)


def scores() -> pd.DataFrame:
    return _scores().copy()


@lru_cache(maxsize=None)
def gate(path):
    return read_gate_file(path)["gate"]


def halves(seed):
    """A random split of the labeled set: (calibration half, live half)."""
    table = _scores()
    order = np.random.default_rng(seed).permutation(len(table))
    return table.iloc[order[: len(table) // 2]], table.iloc[order[len(table) // 2:]]


# ------------------------------------------------------------------------------------------- hand-computed pieces


def test_share_tests_by_hand():
    shares = share_tests(["answer"] * 3 + ["refuse"], ["answer"] + ["refuse"] * 3).set_index("action")
    # Fisher on [[3, 1], [1, 3]]: hypergeometric(N=8, K=4, n=4) probabilities (1, 16, 36, 16, 1) / 70;
    # the two-sided p-value sums those no larger than P(X=3) = 16/70.
    assert shares.loc["answer", "p_value"] == pytest.approx((1 + 16 + 16 + 1) / 70)
    assert shares.loc["answer", "live_share"] == 3 / 4 and shares.loc["answer", "calibration_share"] == 1 / 4
    assert shares.loc["answer", "live_low"] == pytest.approx(beta.ppf(0.025, 3, 4 - 3 + 1))
    assert shares.loc["answer", "live_high"] == pytest.approx(beta.ppf(0.975, 3 + 1, 4 - 3))
    assert shares.loc["answer", "difference"] == pytest.approx(3 / 4 - 1 / 4)
    # Two actions occur: answer and refuse are one test, counted once; hedge never occurs.
    assert shares["tested"].tolist() == [True, False, False]
    assert shares.loc["refuse", "p_value"] == shares.loc["answer", "p_value"]
    assert shares.loc["hedge", "p_value"] == 1 and shares.loc["hedge", "live_low"] == 0


def test_share_tests_three_actions_and_bad_action():
    shares = share_tests(["answer", "hedge", "refuse"], ["answer", "hedge", "refuse"])
    assert shares["tested"].all() and np.allclose(shares["p_value"], 1)
    with pytest.raises(ValueError, match="among"):
        share_tests(["answer", "maybe"], ["answer"])


def test_conformal_p_values_by_hand():
    theta = np.random.default_rng(7).random(4)
    expected = [theta[0] / 1, theta[1] / 2, (1 + theta[2]) / 3, (1 + 2 * theta[3]) / 4]
    assert np.allclose(conformal_p_values([1.0, 3.0, 2.0, 2.0], random_state=7), expected)
    values = np.random.default_rng(1).normal(size=50).round(1)  # ties across block boundaries
    assert np.allclose(conformal_p_values(values, block=7), conformal_p_values(values, block=512))
    with pytest.raises(ValueError, match="NaN"):
        conformal_p_values([1.0, np.nan])


def test_calibrators_integrate_to_one_and_jumper_by_hand():
    grid = (np.arange(100_000) + 0.5) / 100_000
    for name, calibrator in CALIBRATORS.items():
        assert calibrator(grid).mean() == pytest.approx(1, abs=1e-6), name
        assert calibrator(grid).min() >= 0, name
    jump = 0.1
    # p = 1/2 twice: factors none 1, low 1, high 1, middle 2, tails 0.
    first = (3 + 2) / 5
    shares = np.array([1, 1, 1, 2, 0]) / 5 / first
    second = ((1 - jump) * shares + jump / 5) @ np.array([1, 1, 1, 2, 0])
    assert np.allclose(jumper_martingale([0.5, 0.5], jump=jump), [first, first * second])
    assert jumper_martingale([], jump=jump).size == 0
    with pytest.raises(ValueError, match="jump"):
        jumper_martingale([0.5], jump=2)


def test_sequential_test_sorts_by_time_drops_nan_and_reports_crossing():
    times = pd.to_datetime(["2024-01-03", "2024-01-01", "2024-01-02", "2024-01-04"], utc=True)
    result = sequential_test([3.0, 1.0, np.nan, 2.0], times, alpha=0.5, random_state=7)
    assert result.n == 3 and result.dropped_nan == 1
    expected = jumper_martingale(conformal_p_values([1.0, 3.0, 2.0], random_state=7))
    assert np.allclose(result.martingale, expected)
    assert result.p_value == pytest.approx(min(1, 1 / expected.max()))
    assert result.bar == 2 and result.crossed_row is None and result.crossed_at is None


# ------------------------------------------------------------------------------------------- false alarms


@pytest.mark.parametrize("gate_path", [THRESHOLD_GATE, CHAIN_GATE], ids=["threshold", "chain"])
def test_false_alarm_rate_over_random_halves(gate_path):
    """A random split of one exchangeable set is exchangeable: every test of the family is valid for it
    (Fisher's is exact given the pooled counts, KS's exact p-value is the permutation one), so false alarms
    over random halves, with random-order timestamps, follow a binomial of rate at most alpha."""
    splits, alpha = 200, 0.05
    alarms = 0
    for seed in range(splits):
        calibration, live = halves(seed)
        live = live.copy()
        order = np.random.default_rng(10_000 + seed).permutation(len(live))
        live["timestamp"] = pd.Timestamp("2024-01-01", tz="UTC") + pd.to_timedelta(order, unit="h")
        alarms += monitor(gate(gate_path), live, calibration, alpha=alpha, n_resamples=0, random_state=seed).shift_detected
    # Fails wrongly with probability at most 0.1% when the rate is alpha.
    margin = binom.ppf(0.999, splits, alpha)
    assert alarms <= margin, f"{alarms} false alarms in {splits} splits, more than {margin:.0f}"


# ------------------------------------------------------------------------------------------- power


@pytest.fixture(scope="module")
def rust_questions_on_fastapi(fastapi_index):
    """The Rust book's questions asked of the FastAPI index: a live log of traffic the corpus does not cover."""
    from ragcal.queries import load_queries
    from ragcal.scoring import score_table

    queries = load_queries(DATA_DIR / "queries" / "rust-book.csv")
    retrieved = fastapi_index.retrieve(queries["query"], diagnostics=False)
    table = score_table(queries, retrieved, signals=sorted(set(gate(THRESHOLD_GATE).columns + gate(CHAIN_GATE).columns)))
    return table.drop(columns=["answerable", "slice"])


@pytest.mark.parametrize("gate_path", [THRESHOLD_GATE, CHAIN_GATE], ids=["threshold", "chain"])
def test_fires_on_the_other_corpus_questions(rust_questions_on_fastapi, gate_path):
    report = monitor(gate(gate_path), rust_questions_on_fastapi, scores(), n_resamples=200)
    assert report.shift_detected
    assert report.verdict.startswith("Shift detected at alpha=0.05") and "ragcal review" in report.verdict
    dense = report.signals.set_index("signal").loc["dense_top1"]
    assert dense["median_shift"] < 0 and dense["shift_high"] < 0  # the Rust questions find weaker FastAPI matches


@pytest.mark.parametrize("gate_path", [THRESHOLD_GATE, CHAIN_GATE], ids=["threshold", "chain"])
def test_fires_on_near_domain_questions_only(gate_path):
    for seed in range(5):
        calibration, live = halves(seed)
        near_domain = live[live["slice"] == "near-domain"]
        report = monitor(gate(gate_path), near_domain, calibration, n_resamples=0, random_state=seed)
        assert report.shift_detected, (seed, report.tests)


def test_martingale_fires_when_the_log_drifts():
    """First half calibration-like (a random half, random order), then near-domain questions only."""
    table = _scores()
    fired = 0
    for seed in range(10):
        _, live = halves(seed)
        near_domain = table[table["slice"] == "near-domain"].sample(frac=1, random_state=seed)
        log = pd.concat([live, near_domain], ignore_index=True)
        log["timestamp"] = pd.date_range("2024-01-01", periods=len(log), freq="h", tz="UTC")
        report = monitor(gate(THRESHOLD_GATE), log, table, n_resamples=0, random_state=seed)
        sequential = report.tests.set_index("test").loc["exchangeability over time (martingale)"]
        fired += bool(sequential["fired"])
        if sequential["fired"]:
            assert report.sequential.crossed_row >= len(live) - 5  # not before the drift starts (give or take)
    assert fired >= 7, f"the martingale fired on {fired} of 10 drifting logs"


# ------------------------------------------------------------------------------------------- reading logs, bad input


def test_read_score_log_csv_gz_parquet_and_timestamps(tmp_path):
    log = scores().drop(columns=["answerable", "slice"]).head(5)
    log["timestamp"] = ["2024-05-01T12:00:00Z", "2024-05-01T13:00:00+02:00", "2024-05-01", "2024-05-02T00:00:00",
                        "2024-05-03T01:02:03.5Z"]
    log.to_csv(tmp_path / "log.csv.gz", index=False)
    log.to_parquet(tmp_path / "log.parquet", index=False)
    from_gz = read_score_log(tmp_path / "log.csv.gz", ["dense_top1"])
    from_parquet = read_score_log(tmp_path / "log.parquet", ["dense_top1"])
    assert list(from_gz.columns) == ["id", "query", "timestamp", "dense_top1"]
    pd.testing.assert_frame_equal(from_gz, from_parquet)
    assert np.allclose(from_gz["dense_top1"], log["dense_top1"])
    assert from_gz["timestamp"].iloc[1] == pd.Timestamp("2024-05-01T11:00:00Z")
    assert from_gz["timestamp"].iloc[2] == pd.Timestamp("2024-05-01T00:00:00Z")


def test_bad_logs_are_named(tmp_path):
    log = scores()[["id", "query", "dense_top1"]].head(4)
    path = tmp_path / "log.csv"
    log.drop(columns=["dense_top1"]).to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"log\.csv: missing column\(s\) 'dense_top1'"):
        read_score_log(path, ["dense_top1"])
    bad = log.astype({"dense_top1": object})
    bad.loc[2, "dense_top1"] = "high"
    bad.to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"log\.csv, line 4, column 'dense_top1': not numeric, got 'high'"):
        read_score_log(path, ["dense_top1"])
    log.assign(timestamp=["2024-01-01", "yesterday", "2024-01-02", "2024-01-03"]).to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"log\.csv, line 3, column 'timestamp': expected an ISO 8601"):
        read_score_log(path, ["dense_top1"])
    log.head(0).to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"log\.csv: no rows"):
        monitor(THRESHOLD_GATE, path, SCORES)
    with pytest.raises(ValueError, match="not found"):
        read_score_log(tmp_path / "none.csv", ["dense_top1"])
    with pytest.raises(ValueError, match="'alpha' parameter of monitor"):
        monitor(gate(THRESHOLD_GATE), log, scores(), alpha=1.5)
    with pytest.raises(ValueError, match=r"calibration table: missing column\(s\) 'bm25_top1_stopwords'"):
        monitor(gate(CHAIN_GATE), scores(), scores().drop(columns=["bm25_top1_stopwords"]))


def test_nan_scores_are_counted_and_a_short_log_says_so():
    calibration, live = halves(0)
    live = live.head(12).copy()
    live.iloc[:3, live.columns.get_loc("dense_top1")] = np.nan
    live["timestamp"] = pd.date_range("2024-01-01", periods=len(live), freq="h", tz="UTC")
    report = monitor(gate(THRESHOLD_GATE), live, calibration, n_resamples=0)
    dense = report.signals.set_index("signal").loc["dense_top1"]
    assert dense["live_nan"] == 3 and dense["live_n"] == 9
    assert report.sequential.dropped_nan == 3 and report.sequential.n == 9
    assert report.shares.set_index("action").loc["refuse", "live_n"] == 12  # NaN rows are refused, and counted
    assert not report.shift_detected
    assert report.verdict.startswith("No shift detected") and "only 12 rows (fewer than 30), too few" in report.verdict


def test_cli_monitor(tmp_path, capsys):
    calibration, live = halves(3)
    calibration.to_csv(tmp_path / "calibration.csv", index=False)
    live.drop(columns=["answerable", "slice"]).to_csv(tmp_path / "live.csv", index=False)
    live[live["slice"] == "near-domain"].to_csv(tmp_path / "near.csv", index=False)
    gate_option = ["monitor", "--gate", str(THRESHOLD_GATE), "--calibration", str(tmp_path / "calibration.csv")]
    assert main([*gate_option, str(tmp_path / "live.csv")]) == 0
    assert capsys.readouterr().out.startswith("No shift detected at alpha=0.05")
    assert main([*gate_option, str(tmp_path / "near.csv"), "--alpha", "0.01"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("Shift detected at alpha=0.01") and "`ragcal review`" in out
    assert main(["monitor", "--gate", str(THRESHOLD_GATE), str(tmp_path / "live.csv")]) == 2
    assert "--calibration" in capsys.readouterr().err
