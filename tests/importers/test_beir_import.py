"""A BEIR folder -> one page per document and a labeled query file; which queries, which slice, which errors."""

import csv
import json
import os

import pytest

from ragcal.importers import BenchmarkFileError, CandidateFileError, import_benchmark
from ragcal.corpus import load_corpus
from ragcal.queries import load_queries

CORPUS = [
    {"_id": "d1", "title": "Aspirin", "text": "Aspirin thins the blood."},
    {"_id": "d/2", "title": "", "text": "Untitled note on ibuprofen."},
    {"_id": "d3", "title": "Only a title", "text": ""},
]
QUERIES = [
    {"_id": "q1", "text": "What does aspirin do?"},
    {"_id": "q2", "text": "Is ibuprofen like aspirin?"},
    {"_id": "q3", "text": "Judged, nothing relevant"},
    {"_id": "q4", "text": "A training query"},
    {"_id": "q5", "text": "In no qrels file at all"},
]
TEST_QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td/2\t2\nq2\td1\t1\nq2\td3\t0\nq3\td3\t0\n"
TRAIN_QRELS = "query-id\tcorpus-id\tscore\nq4\td1\t1\nq1\td1\t1\n"


def jsonl(records):
    return "".join(json.dumps(record) + "\n" for record in records)


def beir_folder(tmp_path, *, corpus=None, queries=None, test=TEST_QRELS, train=TRAIN_QRELS):
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(corpus if corpus is not None else jsonl(CORPUS), encoding="utf-8")
    (folder / "queries.jsonl").write_text(queries if queries is not None else jsonl(QUERIES), encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text(test, encoding="utf-8")
    if train is not None:
        (folder / "qrels" / "train.tsv").write_text(train, encoding="utf-8")
    return folder


def rows(summary):
    with open(summary.queries, newline="", encoding="utf-8") as stream:
        return list(csv.reader(stream))[1:]


def test_default_imports_the_split_and_unclaimed_queries(tmp_path):
    summary = import_benchmark("beir", beir_folder(tmp_path), tmp_path / "out")
    assert rows(summary) == [
        ["q1", "What does aspirin do?", "true", "answerable", "d1.md", ""],
        ["q2", "Is ibuprofen like aspirin?", "true", "answerable", "d_2.md;d1.md", ""],  # qrels order; score 0 left out
        ["q3", "Judged, nothing relevant", "false", "no-relevant-document", "", ""],
        ["q5", "In no qrels file at all", "false", "no-relevant-document", "", ""],
    ]  # q4 is train's only: left out
    assert summary.notes == (
        "split 'test', queries 'split'",
        "1 of the 5 queries in queries.jsonl left out: only other splits' qrels name them",
    )
    assert (summary.pages, summary.questions, summary.answerable, summary.groups) == (3, 4, 2, 0)
    assert summary.unanswerable == (("no-relevant-document", 2),)
    corpus = summary.corpus
    assert (corpus / "d1.md").read_text(encoding="utf-8") == "# Aspirin\n\nAspirin thins the blood.\n"
    assert (corpus / "d_2.md").read_text(encoding="utf-8") == "# d/2\n\nUntitled note on ibuprofen.\n"
    assert (corpus / "d3.md").read_text(encoding="utf-8") == "# Only a title\n"
    documents = load_corpus(corpus)
    queries = load_queries(summary.queries, corpus_paths={document.path for document in documents})
    assert list(queries["gold"]) == [("d1.md",), ("d_2.md", "d1.md"), (), ()]


def test_query_selections_all_and_qrels(tmp_path):
    folder = beir_folder(tmp_path)
    every = import_benchmark("beir", folder, tmp_path / "all", queries="all")
    assert [(row[0], row[2]) for row in rows(every)] == [
        ("q1", "true"),
        ("q2", "true"),
        ("q3", "false"),
        ("q4", "false"),
        ("q5", "false"),
    ]
    judged = import_benchmark("beir", folder, tmp_path / "qrels", queries="qrels")
    assert [(row[0], row[2]) for row in rows(judged)] == [("q1", "true"), ("q2", "true"), ("q3", "false")]
    assert judged.notes[1] == "2 of the 5 queries in queries.jsonl left out: the split's qrels do not name them"


def test_other_split_and_unanswerable_slice(tmp_path):
    summary = import_benchmark(
        "beir", beir_folder(tmp_path), tmp_path / "out", split="train", unanswerable_slice="unjudged"
    )
    assert [(row[0], row[2], row[3], row[4]) for row in rows(summary)] == [
        ("q1", "true", "answerable", "d1.md"),
        ("q4", "true", "answerable", "d1.md"),
        ("q5", "false", "unjudged", ""),
    ]  # q2 and q3 belong to test


def test_qrels_without_header_and_with_crlf(tmp_path):
    folder = beir_folder(tmp_path, test="q1\td1\t1\r\n\r\nq3\td3\t0\r\n", train=None)
    summary = import_benchmark("beir", folder, tmp_path / "out")
    assert [(row[0], row[2]) for row in rows(summary)] == [
        ("q1", "true"),
        ("q2", "false"),
        ("q3", "false"),
        ("q4", "false"),
        ("q5", "false"),
    ]


@pytest.mark.parametrize(
    "files, message",
    [
        ({"corpus": '{"_id": "d1", "text": "x"}\n{"_id": "d2", "text": \n'}, r"corpus\.jsonl, line 2: not valid JSON"),
        (
            {"corpus": '{"_id": "d1", "text": "x"}\n{"title": "t", "text": "y"}\n'},
            r"corpus\.jsonl, line 2: missing field '_id'",
        ),
        ({"corpus": '{"_id": "d1", "title": "t"}\n'}, r"corpus\.jsonl, line 1: missing field 'text'"),
        (
            {"corpus": '{"_id": "d1", "text": "x"}\n\n{"_id": "d1", "text": "y"}\n'},
            r"corpus\.jsonl, line 3, field '_id': duplicate document id 'd1' \(first on line 1\)",
        ),
        ({"corpus": "\n"}, r"corpus\.jsonl: no documents"),
        (
            {"queries": '{"_id": "q1", "text": "a"}\n{"_id": "q1", "text": "b"}\n'},
            r"queries\.jsonl, line 2, field '_id': duplicate query id 'q1' \(first on line 1\)",
        ),
        ({"queries": '{"_id": "q1"}\n'}, r"queries\.jsonl, line 1: missing field 'text'"),
        ({"queries": '["q1", "text"]\n'}, r"queries\.jsonl, line 1: expected a JSON object, found list"),
        (
            {"test": "query-id\tcorpus-id\tscore\nq1\td1\t1\nq9\td1\t1\n"},
            r"test\.tsv, line 3, field 'query-id': unknown query 'q9'",
        ),
        (
            {"test": "query-id\tcorpus-id\tscore\nq1\td9\t1\n"},
            r"test\.tsv, line 2, field 'corpus-id': unknown document 'd9'",
        ),
        (
            {"test": "query-id\tcorpus-id\tscore\nq1\td1\thigh\n"},
            r"test\.tsv, line 2, field 'score': expected a number, got 'high'",
        ),
        (
            {"test": "query-id\tcorpus-id\tscore\nq1 0 d1 1\n"},
            r"test\.tsv, line 2: expected 3 tab-separated fields \(query-id, corpus-id, score\), found 1",
        ),
        (
            {"test": "q1\td1\t1\nq1\td1\t0\n"},
            r"test\.tsv, line 2: query 'q1' and document 'd1' judged twice \(first on line 1\)",
        ),
        ({"test": "query-id\tcorpus-id\tscore\n"}, r"test\.tsv: no judgements"),
    ],
)
def test_bad_files_name_file_line_and_field_and_leave_nothing(tmp_path, files, message):
    folder = beir_folder(tmp_path, **files)
    with pytest.raises(CandidateFileError, match=message):  # JSON lines are read as candidates files are
        import_benchmark("beir", folder, tmp_path / "out")
    assert sorted(os.listdir(tmp_path)) == ["beir"]


def test_missing_folder_split_and_bad_options(tmp_path):
    with pytest.raises(BenchmarkFileError, match="BEIR folder not found"):
        import_benchmark("beir", tmp_path / "nope", tmp_path / "out")
    folder = beir_folder(tmp_path)
    with pytest.raises(
        BenchmarkFileError, match=r"dev\.tsv: qrels file not found; the folder's splits are test, train"
    ):
        import_benchmark("beir", folder, tmp_path / "out", split="dev")
    with pytest.raises(ValueError, match="'split' parameter of write_beir must be a file name under qrels/"):
        import_benchmark("beir", folder, tmp_path / "out", split="../test")
    for bad_slice in ("answerable", "", " padded"):
        with pytest.raises(ValueError, match="'unanswerable_slice' parameter of write_beir"):
            import_benchmark("beir", folder, tmp_path / "out", unanswerable_slice=bad_slice)
    with pytest.raises(ValueError, match="'queries' parameter of write_beir must be one of 'split', 'qrels', 'all'"):
        import_benchmark("beir", folder, tmp_path / "out", queries="some")
    (folder / "corpus.jsonl").unlink()
    with pytest.raises(CandidateFileError, match=r"corpus\.jsonl: BEIR corpus not found"):
        import_benchmark("beir", folder, tmp_path / "out")
    assert sorted(os.listdir(tmp_path)) == ["beir"]


def test_ids_that_clash_as_file_names_get_distinct_pages(tmp_path):
    corpus = jsonl([{"_id": "a/b", "text": "one"}, {"_id": "a_b", "text": "two"}, {"_id": "A_B", "text": "three"}])
    folder = beir_folder(
        tmp_path, corpus=corpus, queries=jsonl([{"_id": "q", "text": "which?"}]), test="q\ta_b\t1\n", train=None
    )
    summary = import_benchmark("beir", folder, tmp_path / "out")
    documents = load_corpus(summary.corpus)
    assert len(documents) == 3
    queries = load_queries(summary.queries, corpus_paths={document.path for document in documents})
    (gold,) = queries["gold"][0]
    assert (summary.corpus / gold).read_text(encoding="utf-8") == "# a_b\n\ntwo\n"
