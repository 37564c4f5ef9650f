"""End to end: ``ragcal score --candidates`` on a TREC run with passages, and on a candidates JSONL."""

import json

import pandas as pd
import pytest
from conftest import write

from ragcal._io import sha256_file
from ragcal.cli import main
from ragcal.score_tables import read_provenance

PASSAGES = [
    {"_id": "p1", "title": "Cats", "text": "Cats purr when they are content."},
    {"_id": "p2", "title": "Dogs", "text": "Dogs bark at strangers."},
    {"_id": "p3", "title": "", "text": "The Eiffel Tower stands in Paris."},
]
QUERIES = """id,query,answerable,slice,gold
q1,Why do cats purr?,true,answerable,p1
q2,Where is the Eiffel Tower?,true,answerable,p3
q3,Who won the 1950 final?,false,unrelated,
"""
RUN = "q1 Q0 p1 1 12.5 mysys\nq1 Q0 p2 2 10.0 mysys\nq2 Q0 p3 1 3.0 mysys\nq2 Q0 p1 2 1.0 mysys\nq3 Q0 p2 1 0.2 mysys\n"


@pytest.fixture
def files(tmp_path):
    passages = write(tmp_path / "passages.jsonl", "".join(json.dumps(passage) + "\n" for passage in PASSAGES))
    return write(tmp_path / "queries.csv", QUERIES), write(tmp_path / "run.trec", RUN), passages


def test_score_a_trec_run_with_its_passages(tmp_path, files, embedder, capsys):
    queries, run, passages = files
    out = tmp_path / "out" / "scores.csv"
    arguments = ["score", str(queries), "--candidates", str(run), "--passages", str(passages), "--out", str(out)]
    code = main([*arguments, "--runs", str(tmp_path / "runs"), "--cache-dir", str(embedder.cache_dir)])
    assert code == 0
    printed = capsys.readouterr().out
    table = pd.read_csv(out)
    assert list(table["id"]) == ["q1", "q2", "q3"]
    assert table.loc[0, "run_top1"] == 12.5 and table.loc[0, "run_gap"] == 2.5 and table.loc[1, "run_gap"] == 2.0
    assert {"dense_top1", "bm25_top1_stopwords", "rrf_top1", "dense_nqc"} <= set(table.columns)
    assert "rerank_top1" not in table.columns
    assert f"wrote {out} (3 queries, {table.shape[1] - 4} signals) from 3 candidate passages, at most 2" in printed
    assert "computed: dense_top1, dense_top2" in printed
    assert "left out rerank_top1: needs a cross-encoder reranker's scores" in printed
    assert "dense_top1 by slice:" in printed
    provenance = read_provenance(out)
    assert provenance["candidates_sha256"] == sha256_file(run) and provenance["passages_sha256"] == sha256_file(
        passages
    )
    assert provenance["queries_sha256"] == sha256_file(queries) and provenance["candidate_depth"] == 2
    assert provenance["model_fingerprint"].startswith("sentence-transformers/all-MiniLM-L6-v2@")
    assert (tmp_path / "runs" / "run.run").read_text().splitlines()[0] == "q1 Q0 p1.md#0 1 12.5 run"


def test_score_a_candidates_jsonl_alone(tmp_path, embedder, capsys):
    lines = [
        {
            "id": "a",
            "query": "Why do cats purr?",
            "answerable": True,
            "passages": [
                {"id": "p1", "title": "Cats", "text": "Cats purr when they are content."},
                {"id": "p2", "text": "Dogs bark at strangers."},
            ],
        },
        {
            "id": "b",
            "query": "Who won the 1950 final?",
            "answerable": False,
            "slice": "unrelated",
            "passages": [{"id": "p2", "text": "Dogs bark at strangers."}],
        },
    ]
    path = write(tmp_path / "candidates.jsonl", "".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "scores.csv"
    assert main(["score", "--candidates", str(path), "--out", str(out), "--cache-dir", str(embedder.cache_dir)]) == 0
    printed = capsys.readouterr().out
    table = pd.read_csv(out)
    assert list(table["slice"]) == ["answerable", "unrelated"] and not any(c.startswith("run_") for c in table.columns)
    assert "left out run_top1: needs the exporting system's own scores" in printed
    assert read_provenance(out)["candidates_sha256"] == sha256_file(path)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--corpus", "docs"], "--corpus cannot be used with --candidates"),
        (["--chunker", "fixed", "--access", "internal"], "--chunker, --access cannot be used with --candidates"),
        (["--run-tag", "other"], "no line has the tag 'other'"),
    ],
)
def test_options_that_need_a_corpus_or_a_wrong_tag_exit_2_and_write_nothing(tmp_path, files, extra, expected, capsys):
    queries, run, passages = files
    out = tmp_path / "out" / "scores.csv"
    code = main(
        ["score", str(queries), "--candidates", str(run), "--passages", str(passages), "--out", str(out), *extra]
    )
    assert code == 2 and expected in capsys.readouterr().err
    assert not out.parent.exists()


def test_bad_candidate_input_exits_2_and_writes_nothing(tmp_path, files, capsys):
    queries, run, passages = files
    out = tmp_path / "out" / "scores.csv"
    unknown = write(tmp_path / "unknown.trec", RUN + "q9 Q0 p1 1 1.0 mysys\n")
    cases = [
        (
            ["score", str(queries), "--candidates", str(unknown), "--passages", str(passages)],
            "unknown.trec: 1 question id(s) not in the query file",
        ),
        (["score", "--candidates", str(run), "--passages", str(passages)], "a TREC run carries no question text"),
        (["score", str(queries), "--candidates", str(tmp_path / "c.jsonl")], "drop the query file"),
        (["score", "--passages", str(passages)], "--passages and --run-tag go with --candidates"),
        (["score"], "score needs a labeled query file"),
        (["score", "--candidates", str(tmp_path / "c.jsonl"), "--extra-signals", str(queries)], "ragcal join"),
        (
            [
                "score",
                str(queries),
                "--candidates",
                str(write(tmp_path / "bad.trec", "q1 Q0 p1 1 x mysys\n")),
                "--passages",
                str(passages),
            ],
            "bad.trec, line 1, field 'score': expected a finite number, got 'x'",
        ),
    ]
    for arguments, expected in cases:
        assert main([*arguments, "--out", str(out)]) == 2
        error = capsys.readouterr().err
        assert error.startswith("ragcal: error: ") and expected in error, error
    assert not out.parent.exists()
