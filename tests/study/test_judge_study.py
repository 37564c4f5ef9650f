"""The judge study end to end on the bundled FastAPI docs, with tiny judges (the plumbing, not the numbers)."""

import numpy as np
import pandas as pd
import pytest

from ragcal.datasets import BUNDLED
from ragcal.judges import JudgeTraining, TrainedJudge, question_key
from ragcal.retrieval.rerank import build_tiny_cross_encoder
from ragcal.study.judge import JudgeCorpus, certified_heldout, judge_study, read_judge_results
from ragcal.study.judge_report import LEARNED_RETRIEVAL, LEARNED_WITH_JUDGE, judge_findings, judge_overview


@pytest.fixture(scope="module")
def study(tmp_path_factory, fastapi_index):
    # fastapi_index: the full corpus indexed once with the default cache, which the study's own index reuses.
    root = tmp_path_factory.mktemp("judge_study")
    base = build_tiny_cross_encoder(root / "tiny", random_state=1)
    spec = JudgeCorpus("fastapi", "FastAPI docs", BUNDLED["fastapi"].corpus, BUNDLED["fastapi"].queries,
                       exclude=BUNDLED["fastapi"].exclude, n_folds=3)
    training = JudgeTraining(base_model=str(base), epochs=1, batch_size=8, max_length=64, validation_fraction=0.25)
    options = dict(judge_dir=root / "judges", training=training, depth=3, n_splits=6, n_resamples=100,
                   cost_sample=5, log=None)
    tables = judge_study(spec, root / "results", **options)
    return root, spec, options, tables


def test_no_question_is_scored_by_a_judge_trained_on_it(study):
    root, _, _, tables = study
    scores, folds = tables["scores"], tables["folds"]
    assert sorted(folds["fold"]) == [0, 1, 2] and folds["n_questions"].sum() == len(scores)
    keys = np.array([question_key(question) for question in scores["query"]])
    for row in folds.itertuples():
        judge = TrainedJudge(root / "judges" / row.folder, use_cache=False)
        assert judge.trained_on.isdisjoint(keys[scores["judge_fold"] == row.fold])
        assert judge.trained_on <= set(keys[scores["judge_fold"] != row.fold])
    for column in ("judge_top1", "judge_mass", "judge_at_dense_top1", "judge_gap"):
        values = scores[column].dropna()
        assert len(values) > 0.9 * len(scores)
        assert values.between(-1, 1).all()
    assert scores["judge_top1"].between(0, 1).all()


def test_every_table_compares_judge_and_retrieval_gates_held_out(study):
    _, _, _, tables = study
    compared = tables["auc_compared"].set_index("signal")
    for signal in ("dense_top1", LEARNED_RETRIEVAL, "judge_top1", "judge_at_dense_top1", LEARNED_WITH_JUDGE):
        assert signal in compared.index
    known = compared["auc"].dropna()
    assert known.between(0, 1).all() and compared.loc["dense_top1", "auc"] > 0.9  # the published signal still works
    gates = set(tables["heldout_summary"]["gate"])
    assert {"dense_top1", "judge_top1", LEARNED_RETRIEVAL, LEARNED_WITH_JUDGE} <= gates
    measures = set(tables["heldout_summary"]["measure"])
    assert {"answerable_kept", "near_domain_refused", "unrelated_refused", "unanswerable_refused"} <= measures
    assert (tables["heldout_summary"]["n_splits"] == 6).all()
    risk = tables["certified"]["selective_risk"].dropna()
    assert risk.between(0, 1).all()
    assert set(tables["risk_coverage_summary"]["name"]) >= {"dense_top1", "judge_top1", LEARNED_WITH_JUDGE}
    curves = tables["risk_coverage"]
    assert {"kind", "name", "coverage", "risk"} <= set(curves.columns)
    assert set(curves["name"]) == set(tables["risk_coverage_summary"]["name"])
    cost = tables["cost"].set_index("step")
    assert (cost["seconds_per_question"].dropna() > 0).all()
    assert set(tables["failures"]["kind"]) == {"unanswerable, judged answered", "answerable, judged not answered"}
    curves = tables["training_curves"]
    assert sorted(curves["fold"].unique()) == [0, 1, 2] and curves["validation_loss"].notna().any()


def test_written_tables_read_back_and_a_second_run_reuses_the_judges(study):
    root, spec, options, tables = study
    summary = (root / "results" / "summary.md").read_text(encoding="utf-8")
    for heading in ("## What this says", "## Judges", "## Separation", "## Held out", "## Certified", "## Risk",
                    "## Cost", "## What fails"):
        assert heading in summary
    # Every fold judge was calibrated on its validation pairs (a quarter of its ~126 questions).
    folds = tables["folds"]
    assert (folds["calibration_pairs"] >= 20).all() and (folds["calibration_slope"] >= 0).all()
    assert all(f"{slope:.3f}" in summary for slope in folds["calibration_slope"])
    # Fold-level numbers beside the pooled ones: each fold's AUC and medians of every judge signal.
    fold_auc = tables["fold_auc"]
    assert {"median_answerable", "median_unanswerable"} <= set(fold_auc.columns)
    assert "judge_top1 median (answerable / unanswerable)" in summary
    read = read_judge_results(root / "results")
    pd.testing.assert_frame_equal(read["auc_compared"], tables["auc_compared"], check_exact=False, atol=1e-4)
    assert LEARNED_WITH_JUDGE in read["scores"].columns
    again = judge_study(spec, root / "again", **options)
    assert again["folds"]["reused"].all()
    pd.testing.assert_series_equal(again["scores"]["judge_top1"], tables["scores"]["judge_top1"])
    overview = judge_overview(root, ["results"], titles={"results": "FastAPI docs"})
    assert "FastAPI docs" in overview and "judge_top1" in overview


def test_the_certified_threshold_is_fitted_on_the_calibration_half_only():
    # Hand-made: calibration rows 0-5, held out 6-9. Moving a held-out score cannot move the threshold.
    table = pd.DataFrame({
        "judge_top1": [0.9, 0.8, 0.7, 0.2, 0.1, 0.05, 0.95, 0.6, 0.3, 0.01],
        "answerable": [True, True, True, False, False, False, True, True, False, False],
    })
    levels = np.where(table["answerable"], table["judge_top1"], -np.inf)  # every answerable answer is supported
    split = np.array([True] * 6 + [False] * 4)
    first = certified_heldout(table, "judge_top1", levels, [split], rule="risk_guarantee@0.5")
    moved = table.assign(judge_top1=table["judge_top1"].where(split, 0.99))
    second = certified_heldout(moved, "judge_top1", levels, [split], rule="risk_guarantee@0.5")
    assert first["threshold"].iloc[0] == second["threshold"].iloc[0]
    row = first.iloc[0]
    answered = table["judge_top1"][~split] >= row["threshold"]
    assert row["answered"] == answered.sum()
    assert row["coverage"] == answered.mean()


def test_the_findings_say_what_the_numbers_say():
    def row(signal, auc, low, high):
        return {"signal": signal, "auc": auc, "question_low": low, "question_high": high, "group_low": low,
                "group_high": high, "n_questions": 100, "n_groups": 8}

    tables = {
        "auc_compared": pd.DataFrame([
            row("dense_top1", 0.58, 0.54, 0.61), row(LEARNED_RETRIEVAL, 0.56, 0.52, 0.60),
            row("judge_top1", 0.44, 0.40, 0.495), row(LEARNED_WITH_JUDGE, 0.57, 0.49, 0.61),
        ]),
        "folds": pd.DataFrame({"fold": [0, 1], "verdict": ["no better than chance",
                                                           "better than chance and than the dense cosine"]}),
        "fold_auc": pd.DataFrame({"fold": [0, 0, 1, 1], "signal": ["dense_top1", "judge_top1"] * 2,
                                  "auc": [0.6, 0.47, 0.57, 0.52]}),
        "heldout_summary": pd.DataFrame({"gate": ["dense_top1", "judge_top1"], "measure": ["unanswerable_refused"] * 2,
                                         "mean": [0.088, 0.108]}),
    }
    lines = judge_findings(tables)
    assert lines[0] == "`dense_top1`: AUC 0.580 [0.540, 0.610] pooled; better than chance."
    assert lines[1] == ("`judge_top1`: AUC 0.440 [0.400, 0.495] pooled; below chance (its interval lies under 0.5), "
                        "below `dense_top1`.")
    assert lines[2].startswith("`learned retrieval-only`: AUC 0.560 [0.520, 0.600] pooled; better than chance, below")
    assert lines[3].endswith("no better than chance (its interval reaches 0.5), below `dense_top1`.")
    assert lines[4] == ("1 of 2 fold judges beat chance and the dense cosine on their own validation pairs at the end "
                        "of training (the others: no better than chance).")
    assert lines[5] == "Within single folds, `judge_top1` reaches AUC 0.470 to 0.520."
    assert lines[6] == "Adding the judge signals to the learned gate moves its AUC by +0.010 (0.560 to 0.570)."
    assert lines[7] == "Held out at `keep@0.95`, `judge_top1` refuses 10.8% of unanswerable questions, `dense_top1` 8.8%."
    # With each fold's medians: within 0.02 of each other is one scale; further apart, the pooled numbers mix folds.
    tables["fold_auc"] = tables["fold_auc"].assign(median_answerable=[0.6, 0.352, 0.6, 0.261],
                                                   median_unanswerable=[0.4, 0.353, 0.4, 0.261])  # fmt: skip
    spread = judge_findings(tables)[6]
    assert spread.startswith("The fold judges' calibrated `judge_top1` medians lie between 0.261 and 0.353: calibration "
                             "did not put them on one scale")  # fmt: skip
    tables["fold_auc"]["median_answerable"] = [0.6, 0.352, 0.6, 0.340]
    tables["fold_auc"]["median_unanswerable"] = [0.4, 0.353, 0.4, 0.345]
    assert judge_findings(tables)[6].endswith("medians lie between 0.340 and 0.353: on one scale.")
    # A constant signal has no AUC: said so, not compared.
    tables["auc_compared"].loc[2, "auc"] = float("nan")
    assert judge_findings(tables)[1].endswith("constant: it orders nothing.")
    tables["folds"]["verdict"] = ["no better than chance", "no better than the dense cosine"]
    assert judge_findings(tables)[4] == (
        "None of the 2 fold judges beat both chance and the dense cosine on their own validation pairs at the end of "
        "training (the verdicts: no better than chance, no better than the dense cosine)."
    )


def test_a_failing_passage_is_shown_as_text_not_as_links_or_html():
    from ragcal.study.judge_report import _plain_links

    text = 'See [CORS](../tutorial/cors.md) and <img src="/img/a.png"> & more'
    assert _plain_links(text) == 'See CORS and &lt;img src="/img/a.png"&gt; &amp; more'
