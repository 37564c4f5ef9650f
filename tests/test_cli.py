"""End to end: ``ragcal score`` on a small slice of the FastAPI docs with the real model."""

import json

import pandas as pd
import pytest

from ragcal.cli import main

from conftest import write

QUERIES = """id,query,answerable,slice,gold
q1,How can I put a cookie in the response?,true,answerable,advanced/response-cookies.md
q2,How do I let a browser frontend on another domain call my API?,true,answerable,tutorial/cors.md
q3,How can I send an email after the request has finished?,true,answerable,tutorial/background-tasks.md
q4,How do I get the user that is logged in from the token?,true,answerable,tutorial/security/get-current-user.md
q5,What is the best way to caramelise onions?,false,unrelated,
q6,How many players are on a cricket team?,false,unrelated,
q7,Which wine goes with roast lamb?,false,unrelated,
"""


@pytest.fixture(scope="module")
def scored(fastapi_slice, tmp_path_factory, embedder):
    folder = tmp_path_factory.mktemp("cli")
    queries = write(folder / "queries.csv", QUERIES)
    code = main(
        [
            "score",
            str(queries),
            "--corpus",
            str(fastapi_slice),
            "--out",
            str(folder / "scores.csv"),
            "--runs",
            str(folder / "runs"),
            "--cache-dir",
            str(embedder.cache_dir),
        ]
    )
    assert code == 0
    return folder


def test_score_table_separates_fastapi_from_cooking(scored):
    table = pd.read_csv(scored / "scores.csv")
    assert list(table.columns[:4]) == ["id", "query", "answerable", "slice"]
    for column in (
        "dense_top1",
        "dense_top2",
        "dense_gap",
        "bm25_top1_raw",
        "bm25_top1_stopwords",
        "bm25_empty_stopwords",
        "rrf_top1",
    ):
        assert column in table.columns
    answerable = table.loc[table["answerable"], "dense_top1"]
    unrelated = table.loc[~table["answerable"], "dense_top1"]
    assert answerable.min() > unrelated.max() + 0.1
    assert (table["dense_gap"] >= 0).all()


def test_trec_runs_and_provenance(scored, fastapi_slice):
    runs = {path.stem for path in (scored / "runs").glob("*.run")}
    assert runs == {"dense", "bm25_raw", "bm25_stopwords", "rrf"}
    run = pd.read_csv(
        scored / "runs" / "dense.run", sep=" ", header=None, names=["qid", "q0", "docid", "rank", "score", "tag"]
    )
    assert (run["q0"] == "Q0").all() and (run["tag"] == "dense").all()
    assert run.groupby("qid")["rank"].min().eq(1).all()
    first = run[(run["qid"] == "q1") & (run["rank"] == 1)].iloc[0]
    assert first["docid"].startswith("advanced/response-cookies.md#")
    meta = json.loads((scored / "scores.meta.json").read_text())
    assert meta["model_fingerprint"].startswith("sentence-transformers/all-MiniLM-L6-v2@53aa51172d14")
    assert meta["chunker"] == "headings" and meta["n_chunks"] > 0


@pytest.mark.parametrize(
    "body, message",
    [
        ("id,query,answerable,slice\nq1,How?,true,answerable\n", "missing column"),
        (
            "id,query,answerable,slice,gold\nq1,How?,true,answerable,tutorial/cors.md\nq1,How?,true,answerable,tutorial/cors.md\n",
            "line 3, column 'id': duplicate",
        ),
        ("id,query,answerable,slice,gold\nq1,How?,maybe,answerable,tutorial/cors.md\n", "column 'answerable'"),
        (
            "id,query,answerable,slice,gold\nq1,How?,true,answerable,tutorial/nope.md\n",
            "tutorial/nope.md not in the corpus",
        ),
    ],
)
def test_bad_query_file_writes_nothing(fastapi_slice, tmp_path, capsys, body, message):
    queries = write(tmp_path / "bad.csv", body)
    code = main(
        [
            "score",
            str(queries),
            "--corpus",
            str(fastapi_slice),
            "--out",
            str(tmp_path / "out" / "scores.csv"),
            "--runs",
            str(tmp_path / "out" / "runs"),
        ]
    )
    assert code == 2
    error = capsys.readouterr().err
    assert "bad.csv" in error and message in error
    assert not (tmp_path / "out").exists()


def test_bad_corpus_is_named(tmp_path, capsys):
    queries = write(tmp_path / "q.csv", "id,query,answerable,slice,gold\nq1,How?,false,unrelated,\n")
    (tmp_path / "empty").mkdir()
    assert main(["score", str(queries), "--corpus", str(tmp_path / "empty"), "--out", str(tmp_path / "s.csv")]) == 2
    assert "empty" in capsys.readouterr().err
    assert not (tmp_path / "s.csv").exists()
