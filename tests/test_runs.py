"""``ragcal evaluate`` checks query ids and gold paths against the runs before computing anything."""

import json

import pandas as pd
import pytest
from conftest import write

from ragcal.cli import main

DOCUMENTS = ["index.md", "service/x.md", "tutorial/cors.md", "tutorial/index.md"]
QUERIES = """id,query,answerable,slice,gold
q1,How do I call my API from a browser?,true,answerable,tutorial/cors.md
q2,What does the service do?,true,answerable,service/x.md
q3,How do I bake bread?,false,unrelated,
"""


def _runs(folder, *, meta=True):
    lines = {
        "dense": [
            "q1 Q0 tutorial/cors.md#0 1 0.9 dense",
            "q1 Q0 index.md#0 2 0.5 dense",
            "q2 Q0 service/x.md#1 1 0.8 dense",
            "q3 Q0 index.md#0 1 0.2 dense",
        ],
        "bm25_raw": ["q1 Q0 tutorial/index.md#0 1 3.0 bm25_raw", "q2 Q0 service/x.md#0 1 2.0 bm25_raw"],
    }
    for name, rows in lines.items():
        write(folder / f"{name}.run", "\n".join(rows) + "\n")
    if meta:
        write(folder / "meta.json", json.dumps({"corpus": "data/fastapi/docs", "documents": DOCUMENTS}))
    return folder


def _evaluate(tmp_path, queries_text, *, meta=True):
    queries = write(tmp_path / "queries.csv", queries_text)
    runs = _runs(tmp_path / "runs", meta=meta)
    out = tmp_path / "out" / "retrieval.csv"
    code = main(["evaluate", str(queries), "--runs", str(runs), "--out", str(out), "--resamples", "50"])
    return code, out, queries, runs


def test_evaluate_matching_queries_and_runs(tmp_path):
    code, out, _, _ = _evaluate(tmp_path, QUERIES)
    assert code == 0
    table = pd.read_csv(out)
    dense = table[(table["retriever"] == "dense") & (table["metric"] == "recall@1")].iloc[0]
    assert dense["value"] == 1.0 and dense["n_queries"] == 2


def test_query_ids_missing_from_every_run_stop_with_their_names(tmp_path, capsys):
    code, out, queries, runs = _evaluate(tmp_path, QUERIES.replace("q1,", "Q-1,").replace("q2,", "Q-2,"))
    assert code == 2
    error = capsys.readouterr().err
    assert str(queries) in error and str(runs) in error
    assert "Q-1, Q-2" in error and "not in any run file" in error
    assert "ragcal score" in error  # what to do
    assert not out.parent.exists()


@pytest.mark.parametrize(
    "gold, suggestion",
    [("./service/x.md", "service/x.md"), ("docs/tutorial/cors.md", "tutorial/cors.md")],
)
def test_gold_paths_outside_the_runs_corpus_stop_with_the_close_match(tmp_path, capsys, gold, suggestion):
    body = QUERIES.replace("answerable,service/x.md", f"answerable,{gold}").replace(
        "answerable,tutorial/cors.md", f"answerable,{gold}"
    )
    code, out, queries, runs = _evaluate(tmp_path, body)
    assert code == 2
    error = capsys.readouterr().err
    assert str(queries) in error and str(runs / "meta.json") in error
    assert f"{gold} not in the corpus" in error and f"did you mean {suggestion}?" in error
    assert not out.parent.exists()


def test_without_meta_json_a_gold_path_close_to_a_retrieved_page_stops(tmp_path, capsys):
    code, out, _, _ = _evaluate(
        tmp_path, QUERIES.replace("answerable,service/x.md", "answerable,./service/x.md"), meta=False
    )
    assert code == 2
    error = capsys.readouterr().err
    assert "./service/x.md" in error and "did you mean service/x.md?" in error
    assert not out.parent.exists()
