"""The review (ragcal.monitoring): the design, the stratified estimates and intervals, the CSV, the refit, the CLI."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import hypergeom

from ragcal.datasets import DATA_DIR
from ragcal.gates import FallbackChain, ThresholdGate, fit_threshold_gate, read_gate_file
from ragcal.monitoring import (
    read_review_labels,
    refit_with_labels,
    review_estimates,
    review_sample,
    stratified_share,
    write_review_csv,
)
from ragcal.monitoring.review_files import REVIEW_COLUMNS
from ragcal.monitoring.sample import bar_distances

RESULTS = DATA_DIR.parent / "results"
GATES = RESULTS / "fastapi" / "gates"


def live_log(scores, *, ids=True):
    frame = pd.DataFrame({"query": [f"question {n}" for n in range(len(scores))], "dense_top1": scores})
    if ids:
        frame.insert(0, "id", [f"q{n}" for n in range(len(scores))])
    return frame


GATE = ThresholdGate("dense_top1", 0.5)


# ----------------------------------------------------------------------------------------------- the design


def test_strata_split_each_decision_by_distance_to_the_bar():
    scores = np.round(np.linspace(0.1, 0.9, 81), 6)  # 40 refusals (< 0.5), 41 answers
    sample = review_sample(GATE, live_log(scores), size=20, random_state=0)
    sizes = sample.groupby("stratum")["stratum_size"].first().to_dict()
    # near = the ceil(25%) closest to 0.5 on each side: 10 of the 40 refusals, 11 of the 41 answers
    assert sizes == {"refuse/near": math.ceil(0.25 * 40), "refuse/far": 30, "answer/near": math.ceil(0.25 * 41),
                     "answer/far": 30}
    near_refusals = sample.loc[sample["stratum"] == "refuse/near", "score"]
    assert near_refusals.between(0.4, 0.5, inclusive="left").all()
    # 10 per decision, half of it near the bar: 5 per stratum; near rows are drawn at 5/10 vs 5/30
    assert sample.groupby("stratum")["stratum_sampled"].first().to_dict() == dict.fromkeys(sizes, 5)
    assert (sample.groupby("stratum").size() == sample.groupby("stratum")["stratum_sampled"].first()).all()
    assert list(sample.columns[: len(REVIEW_COLUMNS)]) == list(REVIEW_COLUMNS)
    assert (sample[["answerable", "slice", "gold"]] == "").all().all()
    assert sample["log_row"].is_monotonic_increasing


def test_the_draw_is_deterministic_for_a_seed():
    live = live_log(np.random.default_rng(5).uniform(0.2, 0.8, 300))
    first = review_sample(GATE, live, size=40, random_state=7)
    pd.testing.assert_frame_equal(first, review_sample(GATE, live, size=40, random_state=7))
    assert set(first["id"]) != set(review_sample(GATE, live, size=40, random_state=8)["id"])


def test_ties_at_the_near_cutoff_all_go_near():
    scores = [0.45] * 6 + [0.2, 0.1] + [0.55, 0.7, 0.8, 0.9]  # six refusals tied at the same distance
    sample = review_sample(GATE, live_log(scores), size=12, random_state=0)
    sizes = sample.groupby("stratum")["stratum_size"].first().to_dict()
    assert sizes["refuse/near"] == 6 and sizes["refuse/far"] == 2
    assert len(sample) == 12  # a log smaller than the sample is taken whole


def test_a_small_stratum_is_taken_whole_and_the_rest_redistributed():
    scores = [0.49, 0.1, 0.12, 0.15] + list(np.linspace(0.51, 0.99, 40))  # 4 refusals, 1 of them near
    sample = review_sample(GATE, live_log(scores), size=20, random_state=0)
    drawn = sample.groupby("stratum").size().to_dict()
    assert drawn["refuse/near"] == 1 and drawn["refuse/far"] == 3  # all the refusals
    assert len(sample) == 20 and drawn["answer/near"] + drawn["answer/far"] == 16


def test_empty_decisions_have_no_strata_and_nan_scores_count_as_far():
    scores = [np.nan, 0.1, 0.2, 0.3, 0.4, 0.45]  # no answers at all; NaN is refused
    sample = review_sample(GATE, live_log(scores, ids=False), size=6, min_per_stratum=1)
    assert set(sample["stratum"]) == {"refuse/near", "refuse/far"}
    assert sample.loc[sample["log_row"] == 0, "stratum"].item() == "refuse/far"
    assert sample["id"].tolist() == [f"live-{n}" for n in range(1, 7)]


def test_design_errors_name_the_problem():
    with pytest.raises(ValueError, match=r"live\.csv: missing column\(s\) 'dense_top1'"):
        review_sample(GATE, pd.DataFrame({"query": ["a"]}), source="live.csv")
    with pytest.raises(ValueError, match="line 3, column 'id': duplicate id 'q'"):
        review_sample(GATE, pd.DataFrame({"id": ["q", "q"], "query": ["a", "b"], "dense_top1": [0.1, 0.9]}))
    with pytest.raises(ValueError, match="at least the number of non-empty strata"):
        review_sample(GATE, live_log(np.linspace(0.1, 0.9, 40)), size=3)
    with pytest.raises(ValueError, match="'near_share' parameter of review_sample"):
        review_sample(GATE, live_log([0.2]), near_share=1.5)
    with pytest.raises(ValueError, match="no rows"):
        review_sample(GATE, live_log([]))


def test_bar_distances_of_the_committed_chain_floor_gap_and_a_hedge_band():
    table = pd.read_csv(RESULTS / "fastapi" / "scores.csv")
    chain = read_gate_file(GATES / "chain_keep095.json")["gate"]
    assert isinstance(chain, FallbackChain)
    decisions = chain.decide_table(table)
    distance, group = bar_distances(chain, table, decisions)
    refused = (decisions["action"] == "refuse").to_numpy()
    broad = chain.stages[-1].gate
    assert (group[refused] == "broad").all()
    np.testing.assert_allclose(distance[refused], np.abs(table["dense_top1"][refused] - broad.threshold))
    keyword = (decisions["stage"] == "keyword").to_numpy()
    np.testing.assert_allclose(
        distance[keyword], np.abs(table["bm25_top1_stopwords"][keyword] - chain.stages[1].gate.threshold)
    )
    floor_gap = read_gate_file(GATES / "floor-gap_keep095.json")["gate"]
    distance, _ = bar_distances(floor_gap, table)
    assert np.all(distance[np.isfinite(distance)] >= 0)
    hedged = ThresholdGate("dense_top1", 0.4, hedge_below=0.6)
    distance, _ = bar_distances(hedged, live_log([0.3, 0.45, 0.58, 0.9]))
    np.testing.assert_allclose(distance, [0.1, 0.05, 0.02, 0.3])


# ----------------------------------------------------------------------------------------------- the estimator


def test_stratified_share_by_hand():
    # stratum 1: 4 rows, all labeled, 1 positive (known exactly); stratum 2: 6 rows, 3 labeled, 1 positive
    estimate, low, high = stratified_share([4, 6], [4, 3], [1, 1])
    assert estimate == pytest.approx((4 * 1 / 4 + 6 * 1 / 3) / 10)
    # stratum 2 alone is uncertain (H = 1), so each tail is 0.025. Lower: the smallest K with P(X >= 1 | K) > 0.025
    # is K = 1 (P = 1 - C(5,3)/C(6,3) = 0.5). Upper: K = 5 leaves X >= 2, so the largest is K = 4 (P(X <= 1) = 4/20).
    assert hypergeom.sf(0, 6, 1, 3) == pytest.approx(1 - 10 / 20) and hypergeom.cdf(1, 6, 4, 3) == pytest.approx(4 / 20)
    assert (low, high) == (pytest.approx((1 + 1) / 10), pytest.approx((1 + 4) / 10))


def test_stratified_share_edge_cases():
    estimate, low, high = stratified_share([10, 30], [10, 0], [4, 0])  # an unlabeled stratum: no estimate yet
    assert math.isnan(estimate) and (low, high) == (pytest.approx(4 / 40), pytest.approx((4 + 30) / 40))
    assert stratified_share([5], [5], [0]) == (0.0, 0.0, 0.0)  # a fully labeled population is known exactly
    assert all(math.isnan(value) for value in stratified_share([], [], []))
    with pytest.raises(ValueError, match="positives <= labeled <= sizes"):
        stratified_share([3], [4], [1])


def test_one_stratum_interval_is_exact_and_not_trivially_wide():
    """Coverage computed exactly from the hypergeometric law, for every possible count in the stratum."""
    size, labeled, confidence = 40, 10, 0.9
    coverage = []
    for count in range(size + 1):
        draws = np.arange(labeled + 1)
        chance = hypergeom.pmf(draws, size, count, labeled)
        inside = [low <= count / size <= high for _, low, high in
                  (stratified_share([size], [labeled], [x], confidence=confidence) for x in draws)]
        coverage.append(chance[inside].sum())
    assert min(coverage) >= confidence
    assert min(coverage) < 0.95  # exact, not a wide interval that covers by luck


@pytest.mark.parametrize(
    "sizes, positives, drawn",
    [([30, 90, 12], [9, 5, 6], [10, 12, 4]),  # three partly labeled strata (Bonferroni over 3)
     ([30, 90], [9, 20], [30, 12])],  # a fully labeled stratum spends no alpha
)
def test_interval_coverage_reaches_the_nominal_level_by_simulation(sizes, positives, drawn):
    """Seeded simulation: stratified samples without replacement from a fixed finite population."""
    rng = np.random.default_rng(20240522)
    sizes, positives, drawn = np.array(sizes), np.array(positives), np.array(drawn)
    truth = positives.sum() / sizes.sum()
    populations = [np.r_[np.ones(k, dtype=int), np.zeros(n - k, dtype=int)] for n, k in zip(sizes, positives)]
    covered, estimates = [], []
    for _ in range(400):
        counts = [int(rng.choice(population, size=m, replace=False).sum()) for population, m in zip(populations, drawn)]
        estimate, low, high = stratified_share(sizes, drawn, counts, confidence=0.9)
        covered.append(low <= truth <= high)
        estimates.append(estimate)
    assert np.mean(covered) >= 0.9
    assert np.mean(estimates) == pytest.approx(truth, abs=0.02)  # the stratified estimator is unbiased


# ----------------------------------------------------------------------------------------------- the CSV


def labeled_sample(tmp_path, answerable, *, gold=None, passed=None):
    """A review CSV of the committed threshold gate on 8 drawn rows, labeled as given ('' = not yet)."""
    sample = review_sample(GATE, live_log(np.linspace(0.1, 0.9, 16)), size=8, random_state=1)
    sample["page_1"], sample["heading_1"], sample["text_1"] = "a.md", "A", "text"
    sample["passed_pages"] = passed if passed is not None else np.where(sample["decision"] == "refuse", "", "a.md")
    path = write_review_csv(tmp_path / "review.csv", sample)
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame["answerable"] = answerable
    frame["gold"] = gold if gold is not None else ""
    frame.to_csv(path, index=False)
    return path, frame


def test_csv_round_trip_keeps_columns_and_counts_unlabeled_rows(tmp_path):
    path, written = labeled_sample(tmp_path, ["true", "", "false", "", "no", "1", "", "0"],
                                   gold=["a.md", "", "", "", "", "", "", ""])
    labels = read_review_labels(path)
    assert list(labels.columns[:-1]) == list(written.columns) and labels.columns[-1] == "labeled"
    assert labels["labeled"].tolist() == [True, False, True, False, True, True, False, True]
    assert labels["gold"].iloc[0] == ("a.md",)
    assert labels["stratum_size"].dtype.kind == "i"
    assert written.columns.get_loc("page_1") == len(REVIEW_COLUMNS)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda f: f.assign(answerable=["maybe"] + [""] * 7), r"review\.csv, line 2, column 'answerable'.*'maybe'"),
        (lambda f: f.assign(gold=["", "", "a.md"] + [""] * 5, answerable=[""] * 2 + ["false"] + [""] * 5),
         r"line 4, column 'gold': gold pages .* on a row not answerable"),
        (lambda f: f.assign(decision=["keep"] + list(f["decision"][1:])), r"line 2, column 'decision'"),
        (lambda f: f.iloc[1:], r"has \d+ row\(s\) but stratum_sampled says"),
        (lambda f: f.assign(stratum_size=["x"] + list(f["stratum_size"][1:])), r"line 2, column 'stratum_size'"),
        (lambda f: f.drop(columns=["stratum"]), r"missing column\(s\) 'stratum'"),
    ],
)
def test_label_errors_name_file_line_and_column(tmp_path, change, message):
    path, frame = labeled_sample(tmp_path, [""] * 8)
    change(frame).to_csv(path, index=False)
    with pytest.raises(ValueError, match=message):
        read_review_labels(path)


# ----------------------------------------------------------------------------------------------- estimates


def test_review_estimates_weights_strata_and_states_the_20_percent_rule(tmp_path):
    path, frame = labeled_sample(tmp_path, [""] * 8)
    refused = (frame["decision"] == "refuse").to_numpy()
    answerable = np.where(refused, "true", "false")  # every refusal was wrong, every answer unanswerable
    path.write_text(frame.assign(answerable=answerable, gold=np.where(refused, "a.md", "")).to_csv(index=False))
    estimates = review_estimates(read_review_labels(path))
    row = estimates.table.set_index("estimand").loc["refusals_answerable"]
    assert row.estimate == 1.0 and row.population == 8 and row.labeled == refused.sum()
    assert row.low > 0.2 and "too high" in estimates.refusal_verdict
    assert estimates.table.set_index("estimand").loc["answers_unanswerable", "estimate"] == 1.0
    assert "refuse/near" in estimates.to_markdown()

    path.write_text(frame.assign(answerable="false").to_csv(index=False))
    estimates = review_estimates(read_review_labels(path))
    row = estimates.table.set_index("estimand").loc["refusals_answerable"]
    assert row.estimate == 0.0 and row.high > 0.2 and "undecided" in estimates.refusal_verdict


def test_unsupported_answers_use_the_passed_pages(tmp_path):
    path, frame = labeled_sample(tmp_path, [""] * 8)
    answered = (frame["decision"] == "answer").to_numpy()
    gold = np.where(answered, "a.md", "")
    passed = np.where(answered, ["a.md", "b.md"] * 4, "")  # half the answers pass on a page other than the gold one
    labeled = frame.assign(answerable=np.where(answered, "true", "false"), gold=gold, passed_pages=passed)
    path.write_text(labeled.to_csv(index=False))
    table = review_estimates(read_review_labels(path)).table.set_index("estimand")
    labels = labeled[answered]
    expected = (labels["passed_pages"] != labels["gold"]).groupby(labels["stratum"]).mean()
    sizes = labels.groupby("stratum")["stratum_size"].first().astype(int)
    assert table.loc["answers_unsupported", "estimate"] == pytest.approx((expected * sizes).sum() / sizes.sum())
    assert table.loc["answers_unanswerable", "estimate"] == 0.0


# ----------------------------------------------------------------------------------------------- refit


def test_refit_adds_the_labeled_rows_to_the_calibration_table(tmp_path):
    calibration = pd.DataFrame({
        "id": [f"c{n}" for n in range(20)], "query": "q", "answerable": [True] * 10 + [False] * 10,
        "slice": ["answerable"] * 10 + ["unrelated"] * 10,
        "dense_top1": list(np.linspace(0.6, 0.9, 10)) + list(np.linspace(0.1, 0.4, 10)),
    })
    gate = fit_threshold_gate(calibration, "dense_top1", "keep@0.9")
    path, frame = labeled_sample(tmp_path, [""] * 8)
    refused = (frame["decision"] == "refuse").to_numpy()
    # refusals that were answerable after all (live scores 0.1-0.45): the refit must lower the bar
    path.write_text(frame.assign(answerable=np.where(refused, "true", ""), slice="").to_csv(index=False))
    labels = read_review_labels(path)
    new_gate, comparison = refit_with_labels(gate, calibration, labels, rule="keep@0.9")
    live = labels[labels["labeled"]]
    combined = pd.concat([calibration, pd.DataFrame({"answerable": True, "slice": "answerable",
                                                     "dense_top1": live["dense_top1"].astype(float)})])
    assert new_gate.threshold == fit_threshold_gate(combined, "dense_top1", "keep@0.9").threshold < gate.threshold
    rows = comparison.set_index("quantity")
    assert rows.loc["dense_top1 threshold", "old"] == gate.threshold
    assert rows.loc["review labels: answerable kept", "old"] == 0.0
    assert rows.loc["review labels: answerable kept", "new"] > 0
    with pytest.raises(ValueError, match="needs the rule"):
        refit_with_labels(gate, calibration, labels)
    with pytest.raises(ValueError, match="no column"):
        refit_with_labels(gate, calibration, labels.drop(columns=["dense_top1"]), rule="keep@0.9")


# ----------------------------------------------------------------------------------------------- the command


def test_cli_draws_a_sample_and_estimates_from_its_labels(tmp_path, capsys):
    from ragcal.cli import main

    live = pd.read_csv(RESULTS / "rust-book" / "scores.csv").drop(columns=["answerable", "slice"]).head(24)
    live.to_csv(tmp_path / "live.csv", index=False)
    gate = GATES / "threshold_keep095.json"
    out = tmp_path / "sample.csv"
    assert main(["review", "--gate", str(gate), str(tmp_path / "live.csv"), "--out", str(out), "--size", "10"]) == 0
    assert "wrote" in capsys.readouterr().out
    sample = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert len(sample) == 10 and sample["page_1"].str.endswith(".md").all()
    assert [c for c in sample.columns if c.startswith("page_")] == ["page_1", "page_2", "page_3"]
    assert sample["text_1"].str.len().max() <= 600
    sample.assign(answerable="false", slice="unrelated").to_csv(out, index=False)
    refit = tmp_path / "refit.json"
    code = main(["review", "--gate", str(gate), "--labels", str(out), "--calibration",
                 str(RESULTS / "fastapi" / "scores.csv"), "--refit", str(refit)])
    printed = capsys.readouterr().out
    assert code == 0 and "refusals_answerable" in printed and "Seed 003's rule" in printed
    assert read_gate_file(refit)["fitted"]["n_review_labels"] == 10
    assert main(["review", "--gate", str(gate)]) == 2
    assert "either LIVE_LOG" in capsys.readouterr().err


def test_cli_draws_without_passages_and_without_an_index(tmp_path, capsys, monkeypatch):
    import sys

    from ragcal.cli import main

    live = pd.read_csv(RESULTS / "rust-book" / "scores.csv").drop(columns=["answerable", "slice"]).head(24)
    live.to_csv(tmp_path / "live.csv", index=False)
    monkeypatch.setitem(sys.modules, "faiss", None)  # as without the retrieval extra: no index can be built
    out = tmp_path / "sample.csv"
    arguments = ["review", "--gate", str(GATES / "threshold_keep095.json"), str(tmp_path / "live.csv"), "--size", "10"]
    assert main([*arguments, "--out", str(out), "--passages", "0"]) == 0
    sample = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert len(sample) == 10 and list(sample.columns[: len(REVIEW_COLUMNS)]) == list(REVIEW_COLUMNS)
    assert not [column for column in sample.columns if column.startswith(("page_", "heading_", "text_"))]
    capsys.readouterr()
    assert main([*arguments, "--out", str(tmp_path / "other.csv")]) == 2
    assert "--passages 0 draws without them) needs the retrieval extra" in capsys.readouterr().err
    assert not (tmp_path / "other.csv").exists()
    assert main([*arguments, "--out", str(tmp_path / "other.csv"), "--passages", "-1"]) == 2
    assert "--passages must be 0 or more. Got -1 instead." in capsys.readouterr().err
