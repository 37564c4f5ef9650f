"""The QPP section of the summaries: qpp.csv from runs and a score table, and the table beside the AUC."""

import numpy as np
import pandas as pd

from ragcal.metrics import auc_table
from ragcal.study.qpp import evaluate_qpp, qpp_section, retrieval_quality


def labeled():
    queries = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d", "u1", "u2"],
            "query": ["qa", "qb", "qc", "qd", "qu1", "qu2"],
            "answerable": [True, True, True, True, False, False],
            "slice": ["answerable"] * 4 + ["off-topic"] * 2,
            "gold": [["p1.md"], ["p2.md"], ["p3.md"], ["p4.md"], [], []],
        }
    )
    # dense finds a's gold page first, b's second, c's third, d's not at all; bm25_raw the reverse order for a..c.
    dense = {"a": ["p1.md", "x.md"], "b": ["x.md", "p2.md"], "c": ["x.md", "y.md", "p3.md"], "d": ["x.md"]}
    lexical = {"a": ["x.md", "y.md", "p1.md"], "b": ["x.md", "p2.md"], "c": ["p3.md"], "d": ["p4.md"]}

    def run(pages):
        return pd.DataFrame(
            [(qid, f"{page}#0", rank) for qid, ranked in pages.items() for rank, page in enumerate(ranked, 1)],
            columns=["qid", "docid", "rank"],
        )

    table = queries[["id", "query", "answerable", "slice"]].assign(
        dense_top1=[0.9, 0.8, 0.7, 0.6, 0.3, 0.2],
        bm25_top1_raw=[1.0, 2.0, 3.0, 4.0, 0.5, 0.1],
        bm25_empty_raw=[0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
    )
    return queries, {"dense": run(dense), "bm25_raw": run(lexical)}, table


def test_quality_is_the_reciprocal_rank_of_the_first_gold_page():
    queries, runs, _ = labeled()
    quality = retrieval_quality(runs, queries)
    assert quality.loc[["a", "b", "c", "d"], "dense"].tolist() == [1.0, 0.5, 1 / 3, 0.0]
    assert quality.loc[["a", "b", "c", "d"], "bm25_raw"].tolist() == [1 / 3, 0.5, 1.0, 1.0]


def test_qpp_csv_and_section(tmp_path):
    queries, runs, table = labeled()
    qpp = evaluate_qpp(table, runs, queries, tmp_path, log=lambda *_: None)
    assert (tmp_path / "qpp.csv").is_file()
    rows = qpp.set_index("signal")
    # dense_top1 falls with the dense quality (1, 1/2, 1/3, 0): a perfect ranking, tau 1 and sMARE 0.
    assert rows.loc["dense_top1", "target"] == "dense" and rows.loc["dense_top1", "kendall_tau"] == 1.0
    assert rows.loc["dense_top1", "smare"] == 0.0
    # bm25_top1_raw rises with the BM25 quality (1/3, 1/2, 1, 1; ties at the top): tau-b = 5 / sqrt(6 * 5).
    assert np.isclose(rows.loc["bm25_top1_raw", "kendall_tau"], 5 / np.sqrt(30))
    assert np.isnan(rows.loc["bm25_empty_raw", "kendall_tau"])  # constant on the answerable questions
    aucs = auc_table(
        table, ["dense_top1", "bm25_top1_raw", "bm25_empty_raw"], directions={"bm25_empty_raw": False}, n_resamples=50
    )
    text = qpp_section(qpp, aucs)
    assert "## Signals as query performance predictors" in text
    assert "| dense_top1 " in text and "dense mrr@10" in text and "n/a" in text
    assert "Neither:" in text
