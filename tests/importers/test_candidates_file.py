"""The candidates JSONL reader and the passage page names (ragcal.importers.candidates)."""

import json

import pytest

from ragcal.importers import CandidateFileError, passage_pages, read_candidates_jsonl


def write_lines(path, records):
    path.write_text("".join((record if isinstance(record, str) else json.dumps(record)) + "\n" for record in records))
    return path


def question(question_id="q1", **fields):
    record = {
        "id": question_id,
        "query": "How do I set a timeout?",
        "answerable": True,
        "passages": [{"id": "p1", "title": "Timeouts", "text": "Use timeout=5.", "answers": True, "score": 2.0}],
    }
    record.update(fields)
    return record


def test_reads_questions_passages_scores_and_labels(tmp_path):
    path = write_lines(
        tmp_path / "c.jsonl",
        [
            question(),
            "",
            question(
                "q2",
                answerable=False,
                slice="near-domain",
                passages=[
                    {"id": "p2", "text": "Retries.", "score": 1.5},
                    {"id": "p1", "title": "Timeouts", "text": "Use timeout=5.", "score": 0.5},
                ],
            ),
            question("q3", passages=[]),
        ],
    )
    candidates = read_candidates_jsonl(path)
    assert [q.id for q in candidates.questions] == ["q1", "q2", "q3"]
    first, second, third = candidates.questions
    assert first.slice == "answerable" and first.gold == ("p1",) and first.scores == (2.0,)
    assert second.answerable is False and second.slice == "near-domain"
    assert second.passage_ids == ("p2", "p1") and second.scores == (1.5, 0.5) and second.gold == ()
    assert second.answers == (None, None)
    assert third.passage_ids == () and third.scores is None
    # p1 appears under two questions and is one passage; a missing title is empty.
    assert sorted(candidates.passages) == ["p1", "p2"]
    assert candidates.passages["p2"].title == ""
    assert candidates.has_scores


def test_scores_are_optional_but_all_or_none(tmp_path):
    no_scores = question(passages=[{"id": "p1", "text": "a"}, {"id": "p2", "text": "b"}])
    candidates = read_candidates_jsonl(write_lines(tmp_path / "a.jsonl", [no_scores]))
    assert candidates.questions[0].scores is None and not candidates.has_scores
    mixed = question(passages=[{"id": "p1", "text": "a", "score": 1}, {"id": "p2", "text": "b"}])
    with pytest.raises(CandidateFileError, match=r"b\.jsonl, line 1, passages\[1\]: no 'score'"):
        read_candidates_jsonl(write_lines(tmp_path / "b.jsonl", [mixed]))


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", r"line 2: not valid JSON"),
        ("[1, 2]", r"line 2: expected a JSON object, found list"),
        (json.dumps({"id": "q2", "answerable": True, "passages": []}), r"line 2: missing field 'query'"),
        (json.dumps(question("q1")), r"line 2, field 'id': duplicate question id 'q1' \(first on line 1\)"),
        (json.dumps(question("q2", answerable="yes")), r"line 2, field 'answerable': expected true or false"),
        (json.dumps(question("q2", passages={"id": "p"})), r"line 2, field 'passages': expected a list"),
        (json.dumps(question("q2", passages=[{"id": "p9"}])), r"line 2, passages\[0\]: missing field 'text'"),
        (
            json.dumps(question("q2", passages=[{"id": "p1", "title": "Timeouts", "text": "other"}])),
            r"line 2, passages\[0\]: passage 'p1' has another text than at .*line 1, passages\[0\]",
        ),
        (
            json.dumps(question("q2", passages=[{"id": "p9", "text": "a"}, {"id": "p9", "text": "a"}])),
            r"passages\[1\], field 'id': passage 'p9' listed twice",
        ),
        (
            json.dumps(question("q2", passages=[{"id": "p9", "text": "a", "score": "high"}])),
            r"passages\[0\], field 'score': expected a finite number",
        ),
        (
            json.dumps(question("q2", answerable=False)),
            r"line 2: an unanswerable question cannot have a passage with \"answers\": true",
        ),
    ],
)
def test_errors_name_file_line_and_field(tmp_path, line, message):
    path = write_lines(tmp_path / "bad.jsonl", [question("q1"), line])
    with pytest.raises(CandidateFileError, match=message) as raised:
        read_candidates_jsonl(path)
    assert str(path) in str(raised.value)


def test_missing_empty_and_unlabeled_files(tmp_path):
    with pytest.raises(CandidateFileError, match="candidates file not found"):
        read_candidates_jsonl(tmp_path / "absent.jsonl")
    with pytest.raises(CandidateFileError, match="no questions"):
        read_candidates_jsonl(write_lines(tmp_path / "empty.jsonl", ["", "  "]))
    unlabeled = {key: value for key, value in question().items() if key != "answerable"}
    path = write_lines(tmp_path / "unlabeled.jsonl", [unlabeled])
    with pytest.raises(CandidateFileError, match="missing field 'answerable'"):
        read_candidates_jsonl(path)
    candidates = read_candidates_jsonl(path, require_labels=False)
    assert candidates.questions[0].answerable is None and candidates.questions[0].slice == ""


def test_passage_pages_are_safe_distinct_and_stable():
    pages = passage_pages(["MED-10", "doc 7", "a/b", "a_b", "..", "MED-10"])
    assert pages["MED-10"] == "MED-10.md"
    assert pages["doc 7"] == "doc_7.md"
    # "a/b" and "a_b" would share a name: both get their id's hash, so neither depends on the order.
    assert pages["a/b"] != pages["a_b"] and pages["a/b"].startswith("a_b-") and pages["a_b"].startswith("a_b-")
    assert passage_pages(["a_b", "a/b"]) == {"a_b": pages["a_b"], "a/b": pages["a/b"]}
    assert not pages[".."].startswith(".") and pages[".."].endswith(".md")
    assert len(set(pages.values())) == len(pages)
