"""The counts layer against the in-memory statistics, and the DuckDB engine against the pandas one."""

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from ragcal.calibration.rules import fit_threshold, threshold_keep_share
from ragcal.logs.counts import Binning, choose_binning, count_log, grid_index
from ragcal.logs.duckdb_counts import count_log_duckdb
from ragcal.logs.sources import log_files


def synthetic_log(n, *, seed=0, distinct=None, nan_share=0.01):
    """A labeled log with three slices; ``distinct`` rounds the scores to that many levels (ties)."""
    rng = np.random.default_rng(seed)
    slices = rng.choice(["answerable", "near-domain", "unrelated"], size=n, p=[0.5, 0.3, 0.2])
    answerable = slices == "answerable"
    scores = np.where(answerable, rng.normal(0.6, 0.1, n), rng.normal(0.4, 0.12, n))
    if distinct:
        scores = np.round(scores * distinct) / distinct
    scores[rng.random(n) < nan_share] = np.nan
    return pd.DataFrame({"id": [f"q{i}" for i in range(n)], "answerable": answerable, "slice": slices, "s": scores})


def test_exact_counts_give_the_in_memory_auc_threshold_and_shares():
    log = synthetic_log(5_000, distinct=200)  # many ties
    counts = count_log(log, "s")
    assert counts.binning.kind == "distinct" and counts.n_rows == 5_000
    present = log["s"].notna()
    assert counts.n_nan == int((~present).sum()) and counts.frame["n"].sum() == int(present.sum())
    labeled = log[present]
    assert counts.auc() == pytest.approx(roc_auc_score(labeled["answerable"], labeled["s"]), abs=1e-12)
    for keep in (1.0, 0.95, 0.5, 0.01):
        expected = fit_threshold(f"keep@{keep}", labeled["s"], labeled["answerable"])  # placed midway, as in memory
        assert counts.keep_threshold(keep) == expected
    threshold = counts.keep_threshold(0.95)
    shares = counts.answered(threshold).set_index("slice")
    for name, group in labeled.groupby("slice"):
        assert shares.loc[name, "k"] == int((group["s"] >= threshold).sum())
        assert shares.loc[name, "n"] == len(group)
        assert shares.loc[name, "low"] <= shares.loc[name, "share"] <= shares.loc[name, "high"]


def test_a_hand_computed_case_with_ties_and_one_class():
    log = pd.DataFrame(
        {
            "answerable": [True, True, False, False, False],
            "slice": ["a", "a", "u", "u", "u"],
            "s": [0.9, 0.5, 0.5, 0.2, np.nan],
        }
    )
    counts = count_log(log, "s")
    # Pairs (pos, neg): (0.9, 0.5) 1, (0.9, 0.2) 1, (0.5, 0.5) 1/2, (0.5, 0.2) 1 -> 3.5 / 4.
    assert counts.auc() == 0.875
    # boundaries 0.5 and 0.9, each midway to the next labeled score below (0.2 and 0.5)
    assert counts.keep_threshold(1.0) == pytest.approx((0.5 + 0.2) / 2)
    assert counts.keep_threshold(0.5) == pytest.approx((0.9 + 0.5) / 2)
    assert counts.n_nan == 1
    assert math.isnan(count_log(log[log["answerable"]], "s").auc())  # one class: no AUC
    with pytest.raises(ValueError, match="needs at least one answerable row"):
        count_log(log[~log["answerable"]], "s").keep_threshold(0.9)
    with pytest.raises(ValueError, match="no column 'missing'"):
        count_log(log, "missing")


def test_the_grid_moves_a_threshold_by_less_than_one_cell():
    log = synthetic_log(20_000, seed=1, nan_share=0)
    exact = threshold_keep_share(log.loc[log["answerable"], "s"], keep=0.95)
    counts = count_log(log, "s", max_distinct=1_000, bins=1_000)
    binning = counts.binning
    assert binning.kind == "grid" and "binned: 1,000 cells" in binning.exactness
    threshold = counts.keep_threshold(0.95)
    assert exact - binning.width <= threshold <= exact
    assert counts.auc() == pytest.approx(roc_auc_score(log["answerable"], log["s"]), abs=2e-3)
    top = grid_index([binning.high], binning)
    assert top[0] == binning.bins - 1  # the maximum falls in the last cell
    assert choose_binning(5, 0.0, 1.0, max_distinct=10).kind == "distinct"
    assert choose_binning(50, 0.2, 0.2, max_distinct=10).kind == "distinct"  # one value: nothing to grid
    assert Binning("distinct").width == 0.0


@pytest.mark.parametrize("kind", ["csv", "csv.gz", "parquet", "folder", "glob"])
@pytest.mark.parametrize("grid", [False, True])
def test_duckdb_counts_equal_pandas_counts(tmp_path, kind, grid):
    log = synthetic_log(6_000, seed=2, distinct=None if grid else 300)
    options = {"max_distinct": 500, "bins": 250} if grid else {}
    if kind in ("folder", "glob"):
        for part, start in enumerate(range(0, len(log), 2_000)):
            log.iloc[start : start + 2_000].to_parquet(tmp_path / f"part{part}.parquet", index=False)
        source = tmp_path if kind == "folder" else tmp_path / "part*.parquet"
    else:
        source = tmp_path / f"log.{kind}"
        log.to_parquet(source, index=False) if kind == "parquet" else log.to_csv(source, index=False)
    expected = count_log(log, "s", **options)
    counted = count_log_duckdb(source, "s", **options)
    assert counted.binning == expected.binning
    assert (counted.n_rows, counted.n_nan) == (expected.n_rows, expected.n_nan)
    pd.testing.assert_frame_equal(counted.frame, expected.frame)
    assert counted.auc() == expected.auc() and counted.keep_threshold(0.95) == expected.keep_threshold(0.95)


def test_duckdb_reads_labels_as_written_and_names_what_is_wrong(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("answerable,slice,s\nyes,a,0.9\nno,u,0.1\nTRUE,a,0.7\n0,u,\n", encoding="utf-8")
    counted = count_log_duckdb(path, "s")
    assert counted.frame["answerable"].tolist() == [True, True, False]
    assert counted.n_nan == 1 and counted.auc() == 1.0
    unlabeled = tmp_path / "live.csv"
    unlabeled.write_text("id,s\na,0.5\nb,0.7\n", encoding="utf-8")
    live = count_log_duckdb(unlabeled, "s")
    assert live.frame["answerable"].tolist() == [None, None] and live.frame["slice"].tolist() == ["all", "all"]
    with pytest.raises(ValueError, match="no column 'missing'"):
        count_log_duckdb(path, "missing")
    with pytest.raises(FileNotFoundError, match="score log not found"):
        log_files(tmp_path / "nothing.csv")
    with pytest.raises(FileNotFoundError, match="no Parquet files"):
        log_files(tmp_path / "*.parquet")
