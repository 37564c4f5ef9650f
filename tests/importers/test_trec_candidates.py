"""Reading an exported top-k: a TREC run, BEIR passages and ragcal's labeled query file, into a CandidateSet."""

import json

import pytest
from conftest import write

from ragcal.importers.candidates import CandidateFileError
from ragcal.importers.trec import read_trec_candidates, read_trec_lines
from ragcal.queries import QueryFileError

PASSAGES = [
    {"_id": "p1", "title": "Cats", "text": "Cats purr when they are content."},
    {"_id": "p2", "title": "Dogs", "text": "Dogs bark at strangers."},
    {"_id": "p3", "title": "", "text": "The Eiffel Tower stands in Paris."},
    {"_id": "p4", "title": "Never listed", "text": "A passage the run does not name."},
]
QUERIES = """id,query,answerable,slice,gold
q1,Why do cats purr?,true,answerable,p1
q2,Where is the Eiffel Tower?,true,answerable,p3.md
q3,Who painted the ceiling?,false,near-domain,
q4,What do dogs eat?,true,answerable,p4
"""
RUN = """q1 Q0 p2 5 7.5 mysys
q1 Q0 p1 2 12.5 mysys
q2 Q0 p3 1 3.0 mysys

q2 Q0 p1 3 1.0 mysys
q4 Q0 p2 1 0.5 mysys
"""


def passages_file(folder, passages=PASSAGES):
    return write(folder / "passages.jsonl", "".join(json.dumps(passage) + "\n" for passage in passages))


@pytest.fixture
def files(tmp_path):
    return write(tmp_path / "run.trec", RUN), passages_file(tmp_path), write(tmp_path / "queries.csv", QUERIES)


def test_the_run_is_read_in_rank_order_with_labels_from_the_query_file(files):
    run, passages, queries = files
    candidates = read_trec_candidates(run, passages, queries=queries)
    by_id = {question.id: question for question in candidates.questions}
    assert [question.id for question in candidates.questions] == ["q1", "q2", "q3", "q4"]  # the query file's order
    assert by_id["q1"].passage_ids == ("p1", "p2")  # rank 2 before rank 5, whatever the file order
    assert by_id["q1"].scores == (12.5, 7.5)
    assert by_id["q1"].query == "Why do cats purr?" and by_id["q1"].answerable and by_id["q1"].slice == "answerable"
    assert by_id["q3"].passage_ids == () and by_id["q3"].scores is None  # no line in the run: nothing retrieved
    assert by_id["q3"].answerable is False and by_id["q3"].slice == "near-domain"
    assert set(candidates.passages) == {"p1", "p2", "p3", "p4"}  # p4: q4's gold, which the run missed
    assert candidates.passages["p1"].title == "Cats" and candidates.passages["p3"].title == ""
    assert candidates.has_scores


def test_gold_may_name_passage_ids_or_their_pages(files):
    run, passages, queries = files
    by_id = {question.id: question for question in read_trec_candidates(run, passages, queries=queries).questions}
    assert by_id["q1"].answers == (True, False) and by_id["q1"].gold == ("p1",)  # a passage id
    assert by_id["q2"].answers == (True, False) and by_id["q2"].gold == ("p3",)  # p3.md, the page of p3
    assert by_id["q3"].answers == ()
    assert by_id["q4"].answers == (False,) and by_id["q4"].unlisted_gold == ("p4",) and by_id["q4"].gold == ("p4",)


def test_a_gold_entry_that_names_no_passage_is_an_error(tmp_path, files):
    run, passages, _ = files
    queries = write(tmp_path / "bad_gold.csv", QUERIES.replace("p3.md", "p9"))
    with pytest.raises(CandidateFileError, match=r"bad_gold.csv, column 'gold': 1 entr.*'p9'"):
        read_trec_candidates(run, passages, queries=queries)


def test_a_run_qid_missing_from_the_query_file_is_listed(tmp_path, files):
    _, passages, queries = files
    run = write(tmp_path / "unknown.trec", RUN + "".join(f"x{n} Q0 p1 1 1.0 mysys\n" for n in range(12)))
    with pytest.raises(CandidateFileError) as caught:
        read_trec_candidates(run, passages, queries=queries)
    message = str(caught.value)
    assert "unknown.trec: 12 question id(s) not in the query file" in message and "queries.csv" in message
    assert "'x0'" in message and "'x9'" in message and "and 2 more" in message and "'x10'" not in message


def test_a_docid_missing_from_the_passages_file_is_listed(tmp_path, files):
    _, passages, queries = files
    run = write(tmp_path / "run.trec", RUN + "q2 Q0 p7 4 0.5 mysys\n")
    with pytest.raises(CandidateFileError, match=r"1 docid\(s\) not in the passages file .*passages.jsonl: 'p7'"):
        read_trec_candidates(run, passages, queries=queries)


def test_scores_that_increase_down_the_ranking_are_refused_as_distances(tmp_path):
    run = write(tmp_path / "distances.trec", "q1 Q0 p1 1 0.10 pg\nq1 Q0 p2 2 0.35 pg\n")
    with pytest.raises(
        CandidateFileError,
        match=r"distances.trec, line 2: the scores of question 'q1' increase.*"
        r"similarity = 1 - cosine distance",
    ):
        read_trec_lines(run)


def test_a_file_with_two_tags_needs_the_tag_named(tmp_path):
    run = write(tmp_path / "two.trec", "q1 Q0 p1 1 2.0 bm25\nq1 Q0 p2 1 0.9 dense\nq1 Q0 p3 2 0.8 dense\n")
    with pytest.raises(CandidateFileError, match=r"two.trec: holds 2 runs \(tags 'bm25', 'dense'\)"):
        read_trec_lines(run)
    assert [docid for _, _, docid, _ in read_trec_lines(run, tag="dense")["q1"]] == ["p2", "p3"]
    with pytest.raises(CandidateFileError, match=r"no line has the tag 'colbert'; its tags are 'bm25', 'dense'"):
        read_trec_lines(run, tag="colbert")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("q1 Q0 p2 2 high mysys", r"line 2, field 'score': expected a finite number, got 'high'"),
        ("q1 Q0 p2 2 nan mysys", r"line 2, field 'score': expected a finite number, got 'nan'"),
        ("q1 Q0 p2 two 1.0 mysys", r"line 2, field 'rank': expected an integer, got 'two'"),
        ("q1 Q0 p2 2 1.0", r"line 2: expected 6 fields 'qid Q0 docid rank score tag', got 5"),
        ("q1 Q0 p1 2 1.0 mysys", r"line 2, field 'docid': 'p1' listed twice for question 'q1' \(first on line 1\)"),
    ],
)
def test_a_bad_line_is_named_with_its_number_and_field(tmp_path, line, expected):
    run = write(tmp_path / "bad.trec", f"q1 Q0 p1 1 2.0 mysys\n{line}\n")
    with pytest.raises(CandidateFileError, match=r"bad.trec, " + expected):
        read_trec_lines(run)


def test_empty_files_and_missing_files_are_named(tmp_path, files):
    _, passages, queries = files
    with pytest.raises(CandidateFileError, match=r"empty.trec: no run lines"):
        read_trec_lines(write(tmp_path / "empty.trec", "\n\n"))
    with pytest.raises(CandidateFileError, match=r"absent.trec: run file not found"):
        read_trec_lines(tmp_path / "absent.trec")
    with pytest.raises(CandidateFileError, match=r"carries no question text"):
        read_trec_candidates(write(tmp_path / "run.trec", RUN), passages)
    with pytest.raises(QueryFileError, match=r"nope.csv: query file not found"):
        read_trec_candidates(write(tmp_path / "run.trec", RUN), passages, queries=tmp_path / "nope.csv")


def test_a_bad_passages_file_is_named_with_line_and_field(tmp_path, files):
    run, _, queries = files
    broken = [*PASSAGES[:2], {"_id": "p3", "title": "", "text": ""}]
    with pytest.raises(CandidateFileError, match=r"passages.jsonl, line 3, field 'text': expected a non-empty string"):
        read_trec_candidates(run, passages_file(tmp_path, broken), queries=queries)
    clash = [*PASSAGES, {"_id": "p1", "title": "Cats", "text": "Another text."}]
    with pytest.raises(CandidateFileError, match=r"line 5: passage 'p1' has another text than at .*line 1"):
        read_trec_candidates(run, passages_file(tmp_path, clash), queries=queries)
    write(tmp_path / "passages.jsonl", json.dumps(PASSAGES[0]) + "\n{not json\n")
    with pytest.raises(CandidateFileError, match=r"passages.jsonl, line 2: not valid JSON"):
        read_trec_candidates(run, tmp_path / "passages.jsonl", queries=queries)


def test_passages_the_run_does_not_name_are_not_checked_or_kept(tmp_path):
    run = write(tmp_path / "run.trec", "q1 Q0 p1 1 2.0 mysys\n")
    queries = write(tmp_path / "queries.csv", "id,query,answerable,slice,gold\nq1,Why do cats purr?,true,answerable,\n")
    passages = passages_file(tmp_path, [PASSAGES[0], {"_id": "other", "text": 42}])  # a bad passage nobody asked for
    candidates = read_trec_candidates(run, passages, queries=queries)
    assert set(candidates.passages) == {"p1"}
    assert candidates.questions[0].answers == (None,)  # an answerable question without gold: not assessed
