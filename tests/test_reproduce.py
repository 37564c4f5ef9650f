import numpy as np
import pandas as pd
import pytest

from ragcal.cli import main
from ragcal.queries import load_queries
from ragcal.reproduce import chunking_paragraph, compare_chunking, hardest_queries

from conftest import write
from test_cli import QUERIES


@pytest.fixture(scope="module")
def queries(tmp_path_factory):
    return load_queries(write(tmp_path_factory.mktemp("q") / "queries.csv", QUERIES))


def test_compare_chunking_on_a_slice(fastapi_slice, embedder, queries):
    table = compare_chunking(queries, corpus_dir=fastapi_slice, embedder=embedder)
    assert list(table["variant"]) == ["headings+includes", "headings", "fixed-500"]
    assert (
        table.set_index("variant").loc["headings+includes", "chunks"]
        > table.set_index("variant").loc["fixed-500", "chunks"]
    )
    baseline = table.set_index("variant").loc["fixed-500"]
    for metric in ("recall@5", "mrr@10", "dense_top1_auc"):
        assert baseline[f"{metric}_diff"] == 0 and baseline[f"{metric}_diff_low"] == 0
        assert (table[f"{metric}_low"] <= table[metric]).all() and (table[metric] <= table[f"{metric}_high"]).all()
    assert table["recall@5"].between(0, 1).all()
    assert "chunking" in chunking_paragraph(table)


def test_chunking_paragraph_verdicts():
    def table(diff_low, diff_high):
        row = {"variant": "headings+includes"}
        base = {"variant": "fixed-500"}
        for metric in ("recall@5", "mrr@10", "dense_top1_auc"):
            row.update(
                {
                    metric: 0.9,
                    f"{metric}_low": 0.8,
                    f"{metric}_high": 1.0,
                    f"{metric}_diff": 0.05,
                    f"{metric}_diff_low": diff_low,
                    f"{metric}_diff_high": diff_high,
                }
            )
            base.update(
                {
                    metric: 0.85,
                    f"{metric}_low": 0.7,
                    f"{metric}_high": 0.95,
                    f"{metric}_diff": 0,
                    f"{metric}_diff_low": 0,
                    f"{metric}_diff_high": 0,
                }
            )
        return pd.DataFrame([row, base])

    assert chunking_paragraph(table(0.01, 0.1)).startswith("The published claim holds here")
    assert chunking_paragraph(table(-0.01, 0.1)).startswith("With this many queries the data cannot tell")
    assert chunking_paragraph(table(-0.1, -0.01)).startswith("The published claim does not hold")


def test_hardest_queries_orders_misses_first(queries):
    def run(rankings):
        return pd.DataFrame(
            [(qid, docid, rank) for qid, docids in rankings.items() for rank, docid in enumerate(docids, start=1)],
            columns=["qid", "docid", "rank"],
        )

    dense = run(
        {
            "q1": ["advanced/response-cookies.md#0"],
            "q2": ["x.md#0", "tutorial/cors.md#1"],
            "q3": ["x.md#0"],
            "q4": ["a.md#0", "b.md#0", "tutorial/security/get-current-user.md#2"],
        }
    )
    table = hardest_queries(queries, {"dense": dense}, n=4)
    assert list(table["id"]) == ["q3", "q4", "q2", "q1"]
    assert np.isnan(table.iloc[0]["dense_gold_rank"]) and list(table["dense_gold_rank"])[1:] == [3, 2, 1]
    assert table.iloc[0]["dense_top_page"] == "x.md"


def test_evaluate_cli(fastapi_slice, embedder, tmp_path, capsys):
    queries = write(tmp_path / "queries.csv", QUERIES)
    assert (
        main(
            [
                "score",
                str(queries),
                "--corpus",
                str(fastapi_slice),
                "--out",
                str(tmp_path / "s.csv"),
                "--runs",
                str(tmp_path / "runs"),
                "--cache-dir",
                str(embedder.cache_dir),
            ]
        )
        == 0
    )
    assert main(["evaluate", str(queries), "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "r.csv")]) == 0
    table = pd.read_csv(tmp_path / "r.csv")
    assert set(table["retriever"]) == {"dense", "bm25_raw", "bm25_stopwords", "rrf"}
    assert (table["n_queries"] == 4).all()
    dense_recall = table[(table["retriever"] == "dense") & (table["metric"] == "recall@5")].iloc[0]
    assert dense_recall["value"] == 1.0
    assert main(["evaluate", str(queries), "--runs", str(tmp_path / "nothing"), "--out", str(tmp_path / "x.csv")]) == 2
    assert "no *.run files" in capsys.readouterr().err
