"""A candidates JSONL -> one page per passage (shared passages once) and a labeled query file."""

import csv
import json
import os

import pytest

from ragcal.importers import CandidateFileError, import_benchmark
from ragcal.corpus import load_corpus
from ragcal.queries import load_queries

QUESTIONS = [
    {
        "id": "q1",
        "query": "Where is the Louvre?",
        "answerable": True,
        "passages": [
            {
                "id": "wiki:Louvre#1",
                "title": "Louvre",
                "text": "The Louvre is in Paris.",
                "answers": True,
                "score": 3.0,
            },
            {"id": "p2", "title": "", "text": "Paris has museums.", "answers": False, "score": 1.0},
        ],
    },
    {
        "id": "q2",
        "query": "Who painted the ceiling of the Louvre?",
        "answerable": False,
        "slice": "near-domain",
        "passages": [
            {"id": "p2", "text": "Paris has museums."},
        ],
    },
    {
        "id": "q3",
        "query": "Is Paris big?",
        "answerable": True,
        "passages": [
            {"id": "p3", "title": "Paris", "text": "Paris is large."},
        ],
    },
    {"id": "q4", "query": "Capital of Mars?", "answerable": False, "passages": []},
]


def write_candidates(tmp_path, questions):
    path = tmp_path / "candidates.jsonl"
    path.write_text("".join(json.dumps(question) + "\n" for question in questions), encoding="utf-8")
    return path


def test_candidates_become_pages_and_labeled_rows(tmp_path):
    summary = import_benchmark("candidates", write_candidates(tmp_path, QUESTIONS), tmp_path / "out")
    with open(summary.queries, newline="", encoding="utf-8") as stream:
        assert list(csv.reader(stream))[1:] == [
            ["q1", "Where is the Louvre?", "true", "answerable", "wiki_Louvre_1.md", ""],
            ["q2", "Who painted the ceiling of the Louvre?", "false", "near-domain", "", ""],
            ["q3", "Is Paris big?", "true", "answerable", "", ""],  # no passage marked as answering
            ["q4", "Capital of Mars?", "false", "unanswerable", "", ""],
        ]
    assert sorted(os.listdir(summary.corpus)) == ["p2.md", "p3.md", "wiki_Louvre_1.md"]  # p2 once
    assert (summary.corpus / "wiki_Louvre_1.md").read_text(encoding="utf-8") == "# Louvre\n\nThe Louvre is in Paris.\n"
    assert (summary.corpus / "p2.md").read_text(encoding="utf-8") == "# p2\n\nParis has museums.\n"
    assert (summary.pages, summary.questions, summary.answerable, summary.answerable_without_gold) == (3, 4, 2, 1)
    assert summary.unanswerable == (("near-domain", 1), ("unanswerable", 1)) and summary.groups == 0
    documents = load_corpus(summary.corpus)
    queries = load_queries(summary.queries, corpus_paths={document.path for document in documents})
    assert list(queries["gold"]) == [("wiki_Louvre_1.md",), (), (), ()]


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"id": "q1", "query": "Q?", "answerable": true, "passages": [}', r"line 2: not valid JSON"),
        (
            '{"id": "q1", "query": "Q?", "answerable": true, "passages": []}',
            r"line 2, field 'id': duplicate question id 'q1' \(first on line 1\)",
        ),
        ('{"id": "q2", "query": "Q?", "passages": []}', r"line 2: missing field 'answerable'"),
        (
            '{"id": "q2", "query": "Q?", "answerable": true, "passages": [{"id": "p1", "text": "other"}]}',
            r"line 2, passages\[0\]: passage 'p1' has another text",
        ),
    ],
)
def test_bad_candidates_file_names_line_and_field_and_leaves_nothing(tmp_path, line, message):
    first = '{"id": "q1", "query": "Q?", "answerable": true, "passages": [{"id": "p1", "text": "T."}]}'
    source = tmp_path / "candidates.jsonl"
    source.write_text(first + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(CandidateFileError, match=message):
        import_benchmark("candidates", source, tmp_path / "out")
    assert sorted(os.listdir(tmp_path)) == ["candidates.jsonl"]


def test_candidates_without_any_passage_is_an_error(tmp_path):
    source = write_candidates(tmp_path, [QUESTIONS[3]])
    with pytest.raises(ValueError, match="holds no passages"):
        import_benchmark("candidates", source, tmp_path / "out")
    assert sorted(os.listdir(tmp_path)) == ["candidates.jsonl"]
