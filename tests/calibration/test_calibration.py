"""Calibrating a score table end to end: outcomes and sweeps, held-out splits, and `ragcal calibrate`."""

import re

import numpy as np
import pandas as pd
import pytest
from conftest import write
from scipy.stats import binomtest

from ragcal.calibration import fit_threshold, heldout_outcomes, split_by_slice
from ragcal.calibration.rules import threshold_keep_share
from ragcal.cli import main
from ragcal.metrics import (
    DegenerateInputWarning,
    auc_table,
    clopper_pearson,
    group_stats,
    outcome_table,
    sweep,
)
from ragcal.study.published import published_split


@pytest.fixture
def table():
    return pd.DataFrame(
        {
            "id": [f"q{n}" for n in range(10)],
            "answerable": [True] * 4 + [False] * 6,
            "slice": ["answerable"] * 4 + ["near-domain"] * 3 + ["unrelated"] * 3,
            "score": [0.4, 0.5, 0.6, 0.7, 0.45, 0.35, 0.4, 0.1, 0.2, 0.3],
            "constant": [1.0] * 10,
        }
    )


def test_outcome_table_counts_ties_as_answered(table):
    outcome = outcome_table(table, "score", [0.4]).iloc[0]
    assert outcome["answerable_kept_k"] == 4 and outcome["answerable_kept"] == 1.0
    assert outcome["near_domain_refused_k"] == 1  # 0.45 and 0.4 are answered, 0.35 refused
    assert outcome["unrelated_refused"] == 1.0
    assert outcome["unanswerable_refused"] == pytest.approx(4 / 6)
    assert outcome["unanswerable_n"] == 6
    low, high = binomtest(4, 6).proportion_ci(confidence_level=0.95, method="exact")
    assert outcome["unanswerable_refused_low"] == pytest.approx(low)
    assert outcome["unanswerable_refused_high"] == pytest.approx(high)
    lower = outcome_table(table, "score", [0.4], higher_is_answerable=False).iloc[0]
    assert lower["answerable_kept_k"] == 1  # only 0.4 <= 0.4


def test_clopper_pearson_edges():
    low, high = clopper_pearson([0, 5, 3], [5, 5, 0])
    assert low[0] == 0 and high[1] == 1 and np.isnan(low[2])
    assert high[0] == pytest.approx(binomtest(0, 5).proportion_ci(method="exact").high)


def test_sweep_covers_grid_and_every_score(table):
    result = sweep(table, "score", grid=[0.0, 0.25, 0.4])
    assert set(np.unique(table["score"])) <= set(result["threshold"])
    assert {0.0, 0.25} <= set(result["threshold"])
    assert result.loc[result["threshold"] == 0.4, "source"].item() == "grid+score"
    assert result["threshold"].is_monotonic_increasing
    assert result["answerable_kept"].is_monotonic_decreasing
    assert result["unanswerable_refused"].is_monotonic_increasing


def test_nan_scores_are_left_out_with_a_warning(table):
    table.loc[0, "score"] = np.nan
    with pytest.warns(DegenerateInputWarning, match="1 queries with a NaN score"):
        outcome = outcome_table(table, "score", [0.0]).iloc[0]
    assert outcome["answerable_n"] == 3


def test_group_stats_and_degenerate_auc(table):
    stats = group_stats(table, ["score"]).set_index("slice")
    assert stats.loc["answerable", "median"] == pytest.approx(0.55)
    assert stats.loc["near-domain", "max"] == 0.45 and stats.loc["unrelated", "n"] == 3
    with pytest.warns(DegenerateInputWarning, match=r"constant \(answerable vs all unanswerable\)"):
        aucs = auc_table(table, ["score", "constant"])
    constant = aucs[aucs["signal"] == "constant"]
    assert constant["auc"].isna().all()
    score = aucs[(aucs["signal"] == "score") & (aucs["comparison"] == "unrelated")].iloc[0]
    assert score["auc"] == 1.0
    # answerable vs near-domain: 4 x 3 pairs; 0.45 beats 0.4 (loss), 0.4 ties 0.4 (half) -> (12 - 2 - 0.5 - 1) / 12
    near = aucs[(aucs["signal"] == "score") & (aucs["comparison"] == "near-domain")].iloc[0]
    wins = sum((a > b) + 0.5 * (a == b) for a in [0.4, 0.5, 0.6, 0.7] for b in [0.45, 0.35, 0.4])
    assert near["auc"] == pytest.approx(wins / 12)


def test_split_by_slice_halves_every_slice():
    slices = np.array(["a"] * 5 + ["b"] * 4 + ["c"] * 1)
    calibration = split_by_slice(slices, random_state=3)
    assert [calibration[slices == name].sum() for name in "abc"] == [3, 2, 1]
    np.testing.assert_array_equal(calibration, split_by_slice(slices, random_state=3))
    assert not np.array_equal(calibration, split_by_slice(slices, random_state=4))


def test_heldout_scores_only_the_evaluation_half(table):
    repeated = heldout_outcomes(table, "score", ["keep@1.0", "min_cost@5"], n_splits=20)
    assert len(repeated) == 40
    assert (repeated["answerable_n"] == 2).all() and (repeated["near_domain_n"] == 1).all()
    for split, group in repeated.groupby("split"):
        calibration = split_by_slice(table["slice"].to_numpy(), random_state=split)
        half = table[calibration]
        expected = fit_threshold("keep@1.0", half["score"], half["answerable"])  # placed midway on the half
        assert threshold_keep_share(half.loc[half["answerable"], "score"], keep=1.0) > expected
        assert group.loc[group["rule"] == "keep@1.0", "threshold"].item() == expected
    single = published_split(table, "score")
    assert single["threshold"] == repeated.iloc[0]["threshold"]
    assert single["answerable_kept"] == repeated.iloc[0]["answerable_kept"]


def test_calibrate_cli_on_a_table_without_corpus(tmp_path, capsys):
    path = write(
        tmp_path / "logged.csv",
        "id,answerable,slice,my_score\n"
        + "".join(
            f"r{n},{'true' if n < 6 else 'false'},{'answerable' if n < 6 else 'off-topic'},{score}\n"
            for n, score in enumerate([0.9, 0.8, 0.85, 0.7, 0.75, 0.95, 0.3, 0.5, 0.2, 0.1])
        ),
    )
    assert main(["calibrate", str(path), "--signal", "my_score", "--rule", "keep@1.0", "--heldout", "5"]) == 0
    out = capsys.readouterr().out
    # lowest answerable 0.7, placed midway to the next score below, 0.5
    assert f"keep@1.0: answer when my_score >= {(0.7 + 0.5) / 2:.4f}" in out
    assert "off_topic_refused" in out and "100.0%  (4/4)" in out
    assert "held out over 5 stratified half splits" in out
    assert main(["calibrate", str(path), "--signal", "nope"]) == 2
    assert "logged.csv: missing column(s) 'nope'" in capsys.readouterr().err
    bad = write(tmp_path / "bad.csv", "id,answerable,slice,my_score\nr1,maybe,answerable,0.5\n")
    assert main(["calibrate", str(bad), "--signal", "my_score"]) == 2
    assert "bad.csv, line 2, column 'answerable'" in capsys.readouterr().err


def test_calibrate_cli_names_a_semicolon_table_even_when_commas_break_the_parse(tmp_path, capsys):
    path = write(
        tmp_path / "excel.csv",
        "id;answerable;slice;my_score\nr1;true;answerable;0,9\nr2;false;off, topic;0,2\n",
    )
    assert main(["calibrate", str(path), "--signal", "my_score"]) == 2
    error = capsys.readouterr().err
    assert f"{path}: looks semicolon-delimited; ragcal reads comma-separated CSV" in error
    assert "Error tokenizing" not in error and "missing column" not in error


def _one_class_table(tmp_path, answerable: bool, n: int = 9):
    slice_name = "answerable" if answerable else "off-topic"
    return write(
        tmp_path / "one_class.csv",
        "id,answerable,slice,my_score\n"
        + "".join(f"r{k},{str(answerable).lower()},{slice_name},{0.5 + k / 100}\n" for k in range(n)),
    )


def test_calibrate_cli_without_unanswerable_questions_says_refusal_is_undefined(tmp_path, capsys):
    path = _one_class_table(tmp_path, answerable=True)
    assert main(["calibrate", str(path), "--signal", "my_score", "--heldout", "3"]) == 0
    captured = capsys.readouterr()
    assert not re.search(r"\bnan\b", captured.out, flags=re.IGNORECASE)
    assert "unanswerable_refused" in captured.out and "n/a (no unanswerable questions)" in captured.out
    assert "answerable_kept" in captured.out and "100.0%  (9/9)" in captured.out
    assert f"warning: {path}: no unanswerable questions; refusal rates are undefined" in captured.err


def test_calibrate_cli_without_answerable_questions_says_keeping_is_undefined(tmp_path, capsys):
    path = _one_class_table(tmp_path, answerable=False, n=30)
    args = [
        "calibrate",
        str(path),
        "--signal",
        "my_score",
        "--rule",
        "false_answer_guarantee@0.2",
        "--rule",
        "keep@1.0",
    ]
    assert main(args + ["--heldout", "3"]) == 0
    captured = capsys.readouterr()
    assert not re.search(r"\bnan\b", captured.out, flags=re.IGNORECASE)
    assert "n/a (no answerable questions)" in captured.out
    assert "keep@1.0: no threshold" in captured.out
    assert (
        f"warning: {path}: no answerable questions; the share of answerable questions kept is undefined" in captured.err
    )
    assert "off_topic_refused" in captured.out


def test_calibrate_cli_explains_a_rule_that_falls_back_in_heldout_splits(tmp_path, capsys):
    path = write(
        tmp_path / "small.csv",
        "id,answerable,slice,my_score\n"
        + "".join(f"a{k},true,answerable,{0.6 + k / 100}\n" for k in range(18))
        + "".join(f"u{k},false,off-topic,{0.2 + k / 100}\n" for k in range(10)),
    )
    assert (
        main(["calibrate", str(path), "--signal", "my_score", "--rule", "recall_guarantee@0.9", "--heldout", "4"]) == 0
    )
    captured = capsys.readouterr()
    assert (
        "recall_guarantee@0.9: too few answerable calibration questions for the guarantee in 4 of 4 splits, "
        "the rule answers everything there (threshold -inf)"
    ) in captured.out
    # The in-sample fit (18 answerable questions, 22 needed) falls back too, and says so on one plain line.
    assert "warning: threshold_recall_guarantee: 18 answerable calibration scores cannot guarantee" in captured.err
    assert "CalibrationWarning" not in captured.err


def test_heldout_outcomes_marks_the_splits_where_a_rule_fell_back(table):
    repeated = heldout_outcomes(table, "score", ["recall_guarantee@0.9", "keep@1.0"], n_splits=3)
    assert repeated.loc[repeated["rule"] == "recall_guarantee@0.9", "fallback"].all()
    assert not repeated.loc[repeated["rule"] == "keep@1.0", "fallback"].any()
    no_answerable = table[~table["answerable"]]
    repeated = heldout_outcomes(no_answerable, "score", ["keep@1.0"], n_splits=2)
    assert repeated["fallback"].all() and repeated["threshold"].isna().all()
