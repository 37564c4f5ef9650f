"""The cross-model study: paired AUC and AURC differences, thresholds per model, and copying one across."""

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from ragcal.calibration import fit_threshold, midway_threshold, split_by_slice
from ragcal.study.cross_model import cross_model_report, timing_report
from ragcal.study.cross_model_stats import (
    auc_by_model,
    aurc_by_model,
    model_dependent_signals,
    summarize_copy,
    threshold_copy,
    thresholds_by_model,
)

RULES = ("keep@1.0", "keep@0.95")


def pair():
    """The same 40 questions under two 'models': B's cosines are A's squeezed (0.5 x + 0.1), then noised."""
    rng = np.random.default_rng(0)
    slices = np.array(["answerable"] * 20 + ["near-domain"] * 10 + ["off-topic"] * 10)
    answerable = slices == "answerable"
    top1 = np.where(answerable, rng.normal(0.7, 0.08, 40), rng.normal(0.45, 0.1, 40))
    base = pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(40)],
            "query": "q",
            "answerable": answerable,
            "slice": slices,
            "dense_top1": top1,
        }
    )
    base["dense_gap"] = rng.random(40) * 0.1
    squeezed = base.assign(dense_top1=0.5 * top1 + 0.1)
    noisy = squeezed.assign(dense_top1=squeezed["dense_top1"] + rng.normal(0, 0.04, 40))
    return base, squeezed, noisy


def test_model_dependent_signals_leave_bm25_only_signals_out():
    base, _, _ = pair()
    table = base.assign(bm25_top1_raw=1.0, rrf_top1=0.1)
    assert model_dependent_signals(table) == ["dense_top1", "dense_gap", "rrf_top1"]


def test_paired_auc_difference():
    base, squeezed, noisy = pair()
    same = auc_by_model({"A": base, "B": squeezed}, ["dense_top1"], n_resamples=200)
    overall = same[same["comparison"] == "all unanswerable"].iloc[0]
    # A monotone rescaling ranks every question the same: equal AUCs, and every paired resample differs by 0.
    assert overall["A_auc"] == overall["B_auc"] and overall["difference"] == 0
    assert overall["difference_low"] == overall["difference_high"] == 0
    assert set(same["comparison"]) == {"all unanswerable", "near-domain", "off-topic"}
    moved = auc_by_model({"A": base, "B": noisy}, ["dense_top1"], n_resamples=200).set_index("comparison")
    truth = base["answerable"].to_numpy()
    expected = roc_auc_score(truth, noisy["dense_top1"]) - roc_auc_score(truth, base["dense_top1"])
    assert moved.loc["all unanswerable", "difference"] == pytest.approx(expected)
    assert (
        moved.loc["all unanswerable", "difference_low"] <= expected <= moved.loc["all unanswerable", "difference_high"]
    )
    near = (base["slice"] == "near-domain") | truth
    assert moved.loc["near-domain", "n_unanswerable"] == 10 and moved.loc["near-domain", "n_answerable"] == 20
    assert moved.loc["near-domain", "A_auc"] == pytest.approx(roc_auc_score(truth[near], base["dense_top1"][near]))
    with pytest.raises(ValueError, match="'id'"):
        auc_by_model({"A": base, "B": noisy.assign(id="x")}, ["dense_top1"])
    with pytest.raises(ValueError, match="two models"):
        auc_by_model({"A": base}, ["dense_top1"])


def test_paired_aurc_difference_of_identical_runs_is_zero():
    base, squeezed, _ = pair()
    support = {"dense_top1": base["dense_top1"].where(base["answerable"], -np.inf).to_numpy()}
    # The same ordering and the same support under both: the same curve.
    rescaled = {"dense_top1": np.where(base["answerable"], 0.5 * base["dense_top1"] + 0.1, -np.inf)}
    areas = aurc_by_model({"A": base, "B": squeezed}, {"A": support, "B": rescaled}, ["dense_top1"], n_resamples=100)
    row = areas.iloc[0]
    assert row["A_aurc"] == pytest.approx(row["B_aurc"]) and row["difference"] == pytest.approx(0)
    assert (
        0 < row["A_aurc"] < 1
        and row["difference_low"] == pytest.approx(0)
        and row["difference_high"] == pytest.approx(0)
    )


def test_thresholds_move_with_the_scale():
    base, squeezed, _ = pair()
    thresholds = thresholds_by_model({"A": base, "B": squeezed}, RULES).set_index(["model", "rule"])["threshold"]
    lowest = base.loc[base["answerable"], "dense_top1"].min()
    # keep every answerable question: midway between the lowest answerable score and the next score below it
    assert thresholds["A", "keep@1.0"] == midway_threshold(lowest, base["dense_top1"])
    assert thresholds["B", "keep@1.0"] == pytest.approx(0.5 * thresholds["A", "keep@1.0"] + 0.1)  # midpoints move with the scale


def test_copying_a_threshold_by_hand_on_one_split():
    base, squeezed, _ = pair()
    copies = threshold_copy({"A": base, "B": squeezed}, ["keep@1.0"], n_splits=3)
    assert len(copies) == 3 * 1 * 4  # splits x rules x (fitted on, applied to)
    calibration = split_by_slice(base["slice"].to_numpy(), random_state=1)
    answerable = base["answerable"].to_numpy()
    fitted = fit_threshold("keep@1.0", base["dense_top1"][calibration], answerable[calibration])
    held = ~calibration & answerable
    row = copies[(copies["split"] == 1) & (copies["fitted_on"] == "A") & (copies["applied_to"] == "B")].iloc[0]
    # A's threshold sits on A's scale; B's scores are lower (0.5 x + 0.1 < x above 0.2), so it refuses more of them.
    assert row["threshold"] == fitted
    assert row["answerable_kept"] == pytest.approx((squeezed["dense_top1"][held] >= fitted).mean())
    own = copies[(copies["split"] == 1) & (copies["fitted_on"] == "B") & (copies["applied_to"] == "B")].iloc[0]
    assert own["threshold"] == pytest.approx(0.5 * fitted + 0.1)
    assert own["answerable_kept"] == pytest.approx((base["dense_top1"][held] >= fitted).mean())
    summary = summarize_copy(copies).set_index(["applied_to", "outcome"])
    kept = summary.loc[("B", "answerable_kept")]
    assert kept["fitted_on"] == "A" and kept["copied"] < kept["own"] and kept["difference"] < 0
    by_split = copies[copies["applied_to"] == "B"].pivot(index="split", columns="fitted_on", values="answerable_kept")
    assert kept["difference"] == pytest.approx((by_split["A"] - by_split["B"]).median())


def test_report_renders_every_part():
    base, _, noisy = pair()
    tables = {"A": base, "B": noisy}
    support = {
        label: {
            "dense_top1": t["dense_top1"].where(t["answerable"], -np.inf).to_numpy(),
            "dense_gap": np.where(t["answerable"], np.inf, -np.inf),
        }
        for label, t in tables.items()
    }
    corpus = {
        "auc": auc_by_model(tables, ["dense_top1", "dense_gap"], n_resamples=50),
        "aurc": aurc_by_model(tables, support, ["dense_top1", "dense_gap"], n_resamples=50),
        "thresholds": thresholds_by_model(tables, RULES),
        "copy": summarize_copy(threshold_copy(tables, RULES, n_splits=5)),
        "n_questions": 40,
        "n_splits": 5,
    }
    text = cross_model_report({"Toy docs": corpus}, labels=["A", "B"], fingerprints={"A": "a@1", "B": "b@2"}, timed=True)
    untimed = cross_model_report({"Toy docs": corpus}, labels=["A", "B"], fingerprints={"A": "a@1", "B": "b@2"})
    assert "Cost in time" not in untimed and untimed == text[: len(untimed)]
    for part in (
        "## Toy docs",
        "AUC difference",
        "AURC B",
        "thresholds per rule",
        "Copying a threshold",
        "keep@0.95",
        "Cost in time",
        "cross_model_timing.md",
        "`a@1`",
    ):
        assert part in text
    assert "333.30" not in text  # the times themselves are run-dependent: kept in their own file
    timings = pd.DataFrame({"model": ["A", "B"], "texts": ["questions"] * 2, "n": [3, 3], "ms_per_text": [333.3, 3.3]})
    timing = timing_report(timings, labels=["A", "B"])
    assert "333.30" in timing and "| questions" not in timing and "3 questions" in timing
    assert "101.00" in timing  # the ratio: 333.3 / 3.3


def test_encoding_times_switch_the_cache_off_and_back():
    from ragcal.study.cross_model import encoding_times

    class Counting:
        use_cache = True

        def __init__(self):
            self.seen = []

        def encode(self, texts, show_progress_bar=None):
            self.seen.append((self.use_cache, len(texts)))
            return np.zeros((len(texts), 2), dtype=np.float32)

    embedder = Counting()
    times = encoding_times({"toy": embedder}, {"questions": ["a", "b", "c"]}, repeats=2)
    assert embedder.use_cache is True and embedder.seen == [(False, 1), (False, 3), (False, 3)]
    assert times.columns.tolist() == ["model", "texts", "n", "ms_per_text"] and times["n"].tolist() == [3]


def test_write_cross_model_end_to_end_on_the_fastapi_docs(tmp_path):
    # Two fast models (WordLlama at 256 and at 64 dimensions) through the whole study, with few splits and resamples.
    from ragcal.datasets import bundled
    from ragcal.embedding import load_embedder
    from ragcal.study.cross_model import write_cross_model

    embedders = {
        "WL256": load_embedder("wordllama:l2_supercat_256", cache_dir=tmp_path / "cache"),
        "WL64": load_embedder("wordllama:l2_supercat_256:64", cache_dir=tmp_path / "cache"),
    }
    spec = bundled("fastapi")
    tables = write_cross_model(
        [spec],
        embedders,
        tmp_path,
        rules=RULES,
        n_splits=3,
        n_resamples=20,
        timing_chunks=5,
        log=lambda *_: None,
    )
    for name in (
        "cross_model.md",
        "cross_model_auc.csv",
        "cross_model_aurc.csv",
        "cross_model_thresholds.csv",
        "cross_model_transfer.csv",
        "fastapi/scores_wl64.csv",
    ):
        assert (tmp_path / name).is_file(), name
    meta = (tmp_path / "fastapi" / "scores_wl64.meta.json").read_text()
    assert "wordllama:l2_supercat_256@64b47a2dc493/dim64" in meta
    auc = pd.read_csv(tmp_path / "cross_model_auc.csv")
    assert set(auc["corpus"]) == {"fastapi"} and "bm25_top1_raw" not in set(auc["signal"])
    assert (auc["WL256_auc"].dropna() > 0.5).mean() > 0.5  # a real model: most signals better than chance
    text = (tmp_path / "cross_model.md").read_text()
    assert "## FastAPI" in text and "WL64 (ms per text)" not in text
    assert "WL64 (ms per text)" in (tmp_path / "cross_model_timing.md").read_text()
    assert set(tables["fastapi"]["thresholds"]["model"]) == {"WL256", "WL64"}

    # ragcal reproduce's way: the study without the timing (in a process beside others), then the timing alone.
    from ragcal.study.cross_model import write_cross_model_timing

    apart = tmp_path / "apart"
    write_cross_model([spec], embedders, apart, rules=RULES, n_splits=3, n_resamples=20, timing_chunks=5,
                      measure_timing=False, log=lambda *_: None)  # fmt: skip
    assert (apart / "cross_model.md").read_bytes() == (tmp_path / "cross_model.md").read_bytes()
    assert (apart / "cross_model_auc.csv").read_bytes() == (tmp_path / "cross_model_auc.csv").read_bytes()
    assert not (apart / "cross_model_timing.md").exists()
    write_cross_model_timing(spec, embedders, apart, timing_chunks=5, log=lambda *_: None)
    timing_rows = [line.split("|")[1].strip() for line in (apart / "cross_model_timing.md").read_text().splitlines()
                   if line.startswith("| ") and "ms per text" not in line]  # fmt: skip
    first = [line.split("|")[1].strip() for line in (tmp_path / "cross_model_timing.md").read_text().splitlines()
             if line.startswith("| ") and "ms per text" not in line]  # fmt: skip
    assert timing_rows == first == ["189 questions", "5 chunks"]
