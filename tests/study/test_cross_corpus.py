"""Cross-corpus comparisons: AUC side by side, threshold transfer and the chunking verdict, on hand-made tables."""

import numpy as np
import pandas as pd
import pytest

from ragcal.calibration import fit_threshold
from ragcal.chunk_sweep import MEASURES, chunking_verdict
from ragcal.metrics import auc_table
from ragcal.study.cross_corpus import auc_side_by_side, paired_signal_difference, threshold_transfer


def scores(seed, separation, n=60):
    rng = np.random.default_rng(seed)
    answerable = np.repeat([True, False, False], [n, n // 2, n // 2])
    slices = np.repeat(["answerable", "near-domain", "unrelated"], [n, n // 2, n // 2])
    top1 = np.where(answerable, rng.normal(0.6, 0.08, 2 * n), rng.normal(0.6 - separation, 0.08, 2 * n))
    return pd.DataFrame(
        {"id": range(2 * n), "query": "q", "answerable": answerable, "slice": slices, "dense_top1": top1}
    )


def test_auc_side_by_side_and_difference():
    tables = {"easy": scores(0, 0.3), "hard": scores(1, 0.05)}
    aucs = {name: auc_table(table, ["dense_top1"], n_resamples=300) for name, table in tables.items()}
    merged = auc_side_by_side(tables, aucs, n_resamples=300).set_index("comparison")
    row = merged.loc["all unanswerable"]
    assert row["easy_auc"] > 0.95 and row["hard_auc"] < 0.75
    assert row["difference"] == pytest.approx(row["easy_auc"] - row["hard_auc"])
    assert 0 < row["difference_low"] < row["difference"] < row["difference_high"]


def test_threshold_transfer_applies_each_threshold_to_each_corpus():
    tables = {"a": scores(0, 0.3), "b": scores(1, 0.3).assign(dense_top1=lambda t: t["dense_top1"] - 0.2)}
    transfer = threshold_transfer(tables).set_index(["fitted_on", "applied_to"])
    assert len(transfer) == 4
    own = fit_threshold("keep@0.95", tables["a"]["dense_top1"], tables["a"]["answerable"])
    assert transfer.loc[("a", "a"), "threshold"] == own == transfer.loc[("a", "b"), "threshold"]
    assert transfer.loc[("a", "a"), "answerable_kept"] >= 0.95
    # b's scores sit 0.2 lower: a's threshold refuses most of b's answerable questions.
    assert transfer.loc[("a", "b"), "answerable_kept"] < 0.3
    assert transfer.loc[("a", "b"), "answerable_kept_low"] <= transfer.loc[("a", "b"), "answerable_kept"]


def sweep_table(diffs: dict):
    rows = []
    for variant, (low, high) in diffs.items():
        row = {"variant": variant, "chunks": 10}
        for measure in MEASURES:
            row.update(
                {
                    measure: 0.9,
                    f"{measure}_diff": (low + high) / 2,
                    f"{measure}_diff_low": low,
                    f"{measure}_diff_high": high,
                }
            )
        rows.append(row)
    return pd.DataFrame(rows)


def test_chunking_verdict():
    better = {"headings-256": (0, 0), "headings-512": (0.01, 0.05), "fixed-500": (-0.05, -0.01)}
    mixed = {"headings-256": (0, 0), "headings-512": (-0.02, 0.03), "fixed-500": (-0.05, -0.01)}
    best, text = chunking_verdict({"one": sweep_table(better), "two": sweep_table(better)})
    assert best == "headings-512" and text.startswith("`headings-512` beats `headings-256` on every corpus")
    best, text = chunking_verdict({"one": sweep_table(better), "two": sweep_table(mixed)})
    assert best is None and "stays" in text and "sweep-chunking" in text
    assert "fixed-500` against `headings-256`: one: better on nothing, worse on Recall@5" in text
    neutral = {"headings-256": (0, 0), "headings-512": (-0.02, 0.03), "fixed-500": (-0.05, 0.01)}
    best, text = chunking_verdict({"one": sweep_table(better), "two": sweep_table(neutral)})
    assert best is None and "`headings-512` is never worse and is better on one; on two the data cannot tell" in text


def test_paired_signal_difference():
    table = scores(0, 0.3)
    noise = np.random.default_rng(5).normal(0, 0.3, len(table))
    table["noisy"] = table["dense_top1"] + noise
    diff, low, high = paired_signal_difference(table, "dense_top1", "noisy", n_resamples=300)
    assert 0 < low < diff < high
    same = paired_signal_difference(table, "dense_top1", "dense_top1", n_resamples=300)
    assert same == (0.0, 0.0, 0.0)
