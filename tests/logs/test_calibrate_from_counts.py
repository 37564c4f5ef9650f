"""``calibrate`` from a log's counts against the in-memory ``calibrate``, and ``ragcal calibrate --engine``."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from test_log_counts import synthetic_log

from ragcal.calibration import calibrate
from ragcal.calibration.rules import fit_rule
from ragcal.cli import main
from ragcal.logs.calibration_counts import calibrate_counts, fit_rule_counts
from ragcal.logs.counts import count_log
from ragcal.logs.engines import choose_engine, count_signal
from ragcal.metrics import outcome_table

RULES = ["keep@1.0", "keep@0.95", "recall_guarantee@0.9", "false_answer_guarantee@0.2", "min_cost@5"]


def in_memory(table, signal, rules, *, higher, bootstrap_rows=20_000):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return calibrate(table, signal, rules, higher_is_answerable=higher, bootstrap_rows=bootstrap_rows)


def by_comparison(frame):
    return frame.sort_values("comparison").reset_index(drop=True)


@pytest.mark.parametrize("higher", [True, False])
@pytest.mark.parametrize("bootstrap_rows", [1_000, 20_000])  # m-out-of-n, then every row
def test_counts_give_the_in_memory_calibration(higher, bootstrap_rows):
    log = synthetic_log(6_000, seed=3, distinct=300)  # ties and missing scores
    expected = in_memory(log, "s", RULES, higher=higher, bootstrap_rows=bootstrap_rows)
    result = calibrate_counts(count_log(log, "s", higher_is_answerable=higher), RULES, bootstrap_rows=bootstrap_rows)
    thresholds = result.thresholds[expected.thresholds.columns]
    pd.testing.assert_frame_equal(thresholds, expected.thresholds, check_exact=True, check_dtype=False)
    pd.testing.assert_frame_equal(result.sweep[expected.sweep.columns], expected.sweep, check_exact=True,
                                  check_dtype=False)  # fmt: skip
    assert result.sweep_scheme == expected.sweep_scheme
    aucs, expected_aucs = by_comparison(result.auc), by_comparison(expected.auc)
    pd.testing.assert_frame_equal(aucs, expected_aucs, check_exact=False, rtol=0, atol=1e-12)
    assert set(aucs["interval"]) == {"bootstrap" if bootstrap_rows == 20_000 else "m-out-of-n bootstrap"}
    stats = expected.group_stats.sort_values("slice").reset_index(drop=True)
    pd.testing.assert_frame_equal(result.group_stats, stats, check_exact=False, rtol=0, atol=1e-12, check_dtype=False)


def test_a_hand_computed_case_and_the_fallbacks():
    # Answerable 0.5, 0.7, 0.9, 0.9; unanswerable 0.2, 0.5, 0.8.
    log = pd.DataFrame({"answerable": [True] * 4 + [False] * 3, "slice": ["a"] * 4 + ["u"] * 3,
                        "s": [0.9, 0.5, 0.9, 0.7, 0.2, 0.8, 0.5]})  # fmt: skip
    counts = count_log(log, "s")
    # Boundaries 0.5 and 0.9, placed midway to the next labeled score below (0.2 and 0.8).
    assert fit_rule_counts("keep@1.0", counts) == ((0.5 + 0.2) / 2, False, [])
    assert fit_rule_counts("keep@0.5", counts) == ((0.9 + 0.8) / 2, False, [])
    # min_cost@5: candidates -inf, .2, .5, .7, .8, .9, inf cost 15, 10, 5, 6, 2, 2, 4: the highest of the ties, 0.9,
    # placed midway to 0.8.
    assert fit_rule_counts("min_cost@5", counts) == ((0.9 + 0.8) / 2, False, [])
    # Four answerable scores cannot guarantee recall 0.9 at 90% confidence (0.9 ** 4 > 0.1): answer everything.
    threshold, fallback, messages = fit_rule_counts("recall_guarantee@0.9", counts)
    assert (threshold, fallback) == (-math.inf, True)
    assert messages == fit_rule("recall_guarantee@0.9", log["s"], log["answerable"])[2]
    threshold, fallback, messages = fit_rule_counts("false_answer_guarantee@0.1", counts)
    assert (threshold, fallback) == (math.inf, True) and "refuse everything" in messages[0]
    result = calibrate_counts(counts, ["keep@1.0"])
    row = result.thresholds.iloc[0]
    assert (row["answerable_kept_k"], row["u_refused_k"], row["unanswerable_refused"]) == (4, 1, pytest.approx(1 / 3))


def test_one_class_no_labels_and_rules_that_need_support():
    log = synthetic_log(500, seed=1)
    only_answerable = count_log(log[log["answerable"]], "s")
    result = calibrate_counts(only_answerable, ["keep@0.9"])
    assert result.auc["auc"].isna().all() and not math.isnan(result.thresholds["threshold"].iloc[0])
    assert math.isnan(fit_rule_counts("keep@0.9", count_log(log[~log["answerable"]], "s"))[0])
    with pytest.raises(ValueError, match="no row has both a score and an answerable label"):
        calibrate_counts(count_log(log.drop(columns="answerable"), "s"))
    with pytest.raises(ValueError, match="support level"):
        fit_rule_counts("risk_guarantee@0.2", count_log(log, "s"))


@pytest.mark.parametrize("higher", [True, False])
def test_on_a_grid_thresholds_move_by_less_than_a_cell_and_keep_their_promise(higher):
    log = synthetic_log(20_000, seed=5, nan_share=0)  # continuous scores: no row on a cell edge
    counts = count_log(log, "s", max_distinct=1_000, bins=500, higher_is_answerable=higher)
    assert counts.binning.kind == "grid"
    width = counts.binning.width
    rules = ["keep@0.95", "recall_guarantee@0.9", "false_answer_guarantee@0.2"]
    exact = in_memory(log, "s", rules, higher=higher).thresholds.set_index("rule")
    binned = calibrate_counts(counts, rules).thresholds.set_index("rule")
    sign = 1 if higher else -1
    for rule in rules:
        moved = sign * (binned.loc[rule, "threshold"] - exact.loc[rule, "threshold"])
        assert abs(moved) < width
        # The conservative side: keep and recall rules answer at least as much, the false-answer rule no more.
        assert moved <= 0 if rule != "false_answer_guarantee@0.2" else moved >= 0
    # What a binned threshold answers is counted exactly: the same counts as its outcome on the rows.
    on_rows = outcome_table(log, "s", binned["threshold"], higher_is_answerable=higher)
    for column in ("answerable_kept_k", "unanswerable_refused_k", "near_domain_refused_k"):
        assert list(binned[column]) == list(on_rows[column])
    # Pairs within one cell count as ties: the AUC moves little.
    exact_auc = in_memory(log, "s", rules, higher=higher).auc["auc"].iloc[0]
    assert calibrate_counts(counts, rules).auc["auc"].iloc[0] == pytest.approx(exact_auc, abs=2e-3)


def write_log(path, n=3_000, seed=2):
    log = synthetic_log(n, seed=seed, distinct=400).rename(columns={"s": "dense_top1"})
    log["timestamp"] = pd.date_range("2026-01-01", periods=n, freq="h", tz="UTC")
    log.to_parquet(path)
    return log


def body(text, header_lines):
    """The lines after the header, sorted: slices come sorted from counts, in order of appearance from rows."""
    return sorted(text.splitlines()[header_lines:])


def calibrate_output(capsys, *arguments):
    code = main(["calibrate", *map(str, arguments), "--rule", "keep@0.95", "--rule", "recall_guarantee@0.9",
                 "--rule", "false_answer_guarantee@0.2"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def test_the_duckdb_command_prints_what_the_in_memory_one_prints(tmp_path, capsys):
    write_log(tmp_path / "log.parquet")
    in_memory_text = calibrate_output(capsys, tmp_path / "log.parquet", "--engine", "pandas")
    duckdb_text = calibrate_output(capsys, tmp_path / "log.parquet", "--engine", "duckdb")
    assert "3,000 rows read by duckdb" in duckdb_text and "bins: exact" in duckdb_text
    # Everything after the header lines is the same text: statistics, AUCs with intervals, thresholds, outcomes.
    assert body(duckdb_text, 2) == body(in_memory_text, 1)


def test_a_window_and_a_folder_give_what_the_rows_in_the_window_give(tmp_path, capsys):
    log = write_log(tmp_path / "log.parquet")
    folder = tmp_path / "lake"
    folder.mkdir()
    for part, rows in enumerate(np.array_split(np.arange(len(log)), 3)):  # the same rows in three files
        log.iloc[rows].to_parquet(folder / f"part-{part}.parquet")
    inside = log[(log["timestamp"] >= "2026-01-20") & (log["timestamp"] < "2026-02-10")]
    inside.drop(columns="timestamp").to_parquet(tmp_path / "inside.parquet")
    expected = calibrate_output(capsys, tmp_path / "inside.parquet", "--engine", "pandas")
    window = ("--since", "2026-01-20", "--until", "2026-02-10T00:00:00Z")
    for source, engine in [(folder, "auto"), (tmp_path / "log.parquet", "pandas")]:
        text = calibrate_output(capsys, source, "--engine", engine, *window)
        assert f"{len(inside):,} rows read by {'duckdb' if engine == 'auto' else 'pandas'}" in text
        assert body(text, 2) == body(expected, 1)
    assert choose_engine("auto", folder) == "duckdb" and choose_engine("auto", tmp_path / "log.parquet") == "pandas"


def test_bad_input_is_named(tmp_path, capsys):
    write_log(tmp_path / "log.parquet")
    pd.DataFrame({"answerable": [True], "slice": ["a"], "dense_top1": [0.5]}).to_csv(tmp_path / "no_time.csv")
    assert main(["calibrate", str(tmp_path / "no_time.csv"), "--engine", "duckdb", "--since", "2026-01-01"]) == 2
    assert "no_time.csv: --since/--until need a 'timestamp' column" in capsys.readouterr().err
    assert main(["calibrate", str(tmp_path / "log.parquet"), "--engine", "duckdb", "--heldout", "5"]) == 2
    assert "--heldout draws random halves of the rows" in capsys.readouterr().err
    assert main(["calibrate", str(tmp_path / "log.parquet"), "--engine", "duckdb", "--since", "yesterday"]) == 2
    assert "--since: expected an ISO 8601 date" in capsys.readouterr().err
    assert main(["calibrate", str(tmp_path / "nothing" / "*.parquet"), "--engine", "duckdb"]) == 2
    assert "no Parquet files there" in capsys.readouterr().err
    bad_time = pd.DataFrame({"answerable": [True, False], "slice": ["a", "b"], "dense_top1": [0.5, 0.4],
                             "timestamp": ["2026-01-02T10:00Z", "last Tuesday"]})  # fmt: skip
    bad_time.to_csv(tmp_path / "bad_time.csv", index=False)
    assert main(["calibrate", str(tmp_path / "bad_time.csv"), "--engine", "duckdb", "--since", "2026-01-01"]) == 2
    assert "bad_time.csv, column 'timestamp': 1 values are not ISO 8601" in capsys.readouterr().err
    with pytest.raises(ValueError, match="no column 'missing'"):
        count_signal(tmp_path / "log.parquet", "missing", engine="duckdb")
