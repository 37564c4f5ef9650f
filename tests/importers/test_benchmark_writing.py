"""The benchmark folder writer: pages and queries.csv, whole or not at all, never over an existing folder unasked."""

import csv
import os

import pytest

from ragcal.importers import BenchmarkWriter, import_benchmark
from ragcal.importers.writing import QUERY_FILE_COLUMNS, page_markdown
from ragcal.corpus import load_corpus
from ragcal.queries import load_queries


def write_tiny(out, **kwargs):
    with BenchmarkWriter(out, **kwargs) as writer:
        writer.add_page("a/one.md", "First page", "It rains in Paris.\n", page_id="one")
        writer.add_page("two.md", "", "Untitled text.", page_id="doc 2")
        writer.add_question(
            "q1", "Does it rain in Paris?", answerable=True, slice="answerable", gold=["a/one.md"], group="g1"
        )
        writer.add_question("q2", 'Who, "exactly", wrote it?', answerable=False, slice="near-domain", group="g1")
        writer.add_question("q3", "Both?", answerable=True, slice="answerable", gold=["a/one.md", "two.md", "a/one.md"])
        writer.add_question("q4", "Nothing", answerable=True, slice="answerable")
    return writer


def test_page_markdown_heading_blank_line_text():
    assert page_markdown("Paris", "  Text.  ", page_id="p") == "# Paris\n\nText.\n"
    assert page_markdown("", "Text.", page_id="doc-7") == "# doc-7\n\nText.\n"
    assert page_markdown("Two\nlines  title", "Text.", page_id="p") == "# Two lines title\n\nText.\n"
    assert page_markdown("Only a title", "   ", page_id="p") == "# Only a title\n"


def test_writer_writes_pages_and_queries_with_group_column(tmp_path):
    out = tmp_path / "bench"
    writer = write_tiny(out)
    assert (out / "corpus" / "a" / "one.md").read_text(encoding="utf-8") == "# First page\n\nIt rains in Paris.\n"
    assert (out / "corpus" / "two.md").read_text(encoding="utf-8") == "# doc 2\n\nUntitled text.\n"
    with open(out / "queries.csv", newline="", encoding="utf-8") as stream:
        rows = list(csv.reader(stream))
    assert tuple(rows[0]) == QUERY_FILE_COLUMNS
    assert rows[1:] == [
        ["q1", "Does it rain in Paris?", "true", "answerable", "a/one.md", "g1"],
        ["q2", 'Who, "exactly", wrote it?', "false", "near-domain", "", "g1"],
        ["q3", "Both?", "true", "answerable", "a/one.md;two.md", ""],  # a gold page named twice is written once
        ["q4", "Nothing", "true", "answerable", "", ""],
    ]
    summary = writer.summary("candidates", "source.jsonl", notes=("a note",))
    assert (summary.pages, summary.questions, summary.answerable) == (2, 4, 3)
    assert summary.unanswerable == (("near-domain", 1),) and summary.unanswerable_total == 1
    assert summary.answerable_without_gold == 1 and summary.groups == 1 and summary.notes == ("a note",)
    assert summary.corpus == out / "corpus" and summary.queries == out / "queries.csv"
    # ragcal's own readers accept the folder and find every gold page.
    documents = load_corpus(out / "corpus")
    queries = load_queries(out / "queries.csv", corpus_paths={document.path for document in documents})
    assert list(queries["gold"]) == [("a/one.md",), (), ("a/one.md", "two.md"), ()]
    assert list(queries["group"]) == ["g1", "g1", "", ""]
    assert sorted(os.listdir(tmp_path)) == ["bench"]  # no temporary folder left


def test_written_folder_has_ordinary_permissions(tmp_path):
    write_tiny(tmp_path / "bench")
    mask = os.umask(0o022)
    os.umask(mask)
    assert (tmp_path / "bench").stat().st_mode & 0o777 == 0o777 & ~mask


def test_an_error_inside_the_block_leaves_nothing(tmp_path):
    out = tmp_path / "bench"
    with pytest.raises(RuntimeError, match="boom"):
        with BenchmarkWriter(out) as writer:
            writer.add_page("one.md", "One", "Text.", page_id="one")
            raise RuntimeError("boom")
    assert not out.exists() and os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "bad, message",
    [
        (lambda writer: writer.add_page("one.md", "Again", "x", page_id="one"), "written twice"),
        (lambda writer: writer.add_page("ONE.md", "Case", "x", page_id="one"), "written twice"),
        (lambda writer: writer.add_page("../up.md", "Up", "x", page_id="up"), "not a relative path"),
        (lambda writer: writer.add_page("notes.txt", "Text", "x", page_id="t"), "not a relative path"),
        (
            lambda writer: writer.add_question("q", "Q?", answerable=True, slice="answerable", gold=["zz.md"]),
            "zz.md not written",
        ),
        (
            lambda writer: writer.add_question("q", "Q?", answerable=False, slice="near", gold=["one.md"]),
            "cannot have gold",
        ),
    ],
)
def test_writer_refuses_inconsistent_content(tmp_path, bad, message):
    with pytest.raises(ValueError, match=message):
        with BenchmarkWriter(tmp_path / "bench") as writer:
            writer.add_page("one.md", "One", "Text.", page_id="one")
            bad(writer)
    assert os.listdir(tmp_path) == []


def test_duplicate_question_id_and_no_questions_are_errors(tmp_path):
    with pytest.raises(ValueError, match="'q1' would be written twice"):
        with BenchmarkWriter(tmp_path / "bench") as writer:
            writer.add_page("one.md", "One", "Text.", page_id="one")
            writer.add_question("q1", "Q?", answerable=False, slice="unrelated")
            writer.add_question("q1", "Q again?", answerable=False, slice="unrelated")
    with pytest.raises(ValueError, match="holds no questions"):
        with BenchmarkWriter(tmp_path / "bench") as writer:
            writer.add_page("one.md", "One", "Text.", page_id="one")
    assert os.listdir(tmp_path) == []


def test_existing_folder_is_refused_unless_overwrite_and_replaced_only_when_complete(tmp_path):
    out = tmp_path / "bench"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not empty"):
        write_tiny(out)
    assert sorted(os.listdir(out)) == ["keep.txt"] and sorted(os.listdir(tmp_path)) == ["bench"]
    # With overwrite, a failing import still leaves the old folder as it was.
    with pytest.raises(RuntimeError):
        with BenchmarkWriter(out, overwrite=True) as writer:
            writer.add_page("one.md", "One", "Text.", page_id="one")
            raise RuntimeError("source broke")
    assert sorted(os.listdir(out)) == ["keep.txt"] and sorted(os.listdir(tmp_path)) == ["bench"]
    write_tiny(out, overwrite=True)
    assert sorted(os.listdir(out)) == ["corpus", "queries.csv"] and sorted(os.listdir(tmp_path)) == ["bench"]


def test_empty_existing_folder_is_used_and_a_file_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    write_tiny(tmp_path / "empty")
    assert (tmp_path / "empty" / "queries.csv").is_file()
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match="not a folder"):
        write_tiny(tmp_path / "file", overwrite=True)


def test_parent_folders_are_created(tmp_path):
    write_tiny(tmp_path / "a" / "b" / "bench")
    assert (tmp_path / "a" / "b" / "bench" / "corpus" / "two.md").is_file()


def test_import_benchmark_checks_format_and_options(tmp_path):
    source = tmp_path / "c.jsonl"
    source.write_text('{"id": "q", "query": "Q?", "answerable": false, "passages": []}\n')
    with pytest.raises(
        ValueError, match="'format' parameter of import_benchmark must be one of 'squad2', 'beir', 'candidates'"
    ):
        import_benchmark("squad", source, tmp_path / "out")
    with pytest.raises(ValueError, match="'articles' is not an option of format 'candidates', which takes no options"):
        import_benchmark("candidates", source, tmp_path / "out", articles="x")
    with pytest.raises(ValueError, match="'split' is not an option of format 'squad2', which takes articles"):
        import_benchmark("squad2", source, tmp_path / "out", split="test")
    assert sorted(os.listdir(tmp_path)) == ["c.jsonl"]


def test_overwrite_refuses_a_source_inside_the_folder(tmp_path):
    out = tmp_path / "bench"
    out.mkdir()
    source = out / "c.jsonl"
    source.write_text('{"id": "q", "query": "Q?", "answerable": false, "passages": []}\n')
    with pytest.raises(ValueError, match="would delete the source"):
        import_benchmark("candidates", source, out, overwrite=True)
    assert source.is_file()


def test_no_pages_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="holds no passages"):
        with BenchmarkWriter(tmp_path / "bench") as writer:
            writer.add_question("q1", "Q?", answerable=False, slice="unrelated")
    assert os.listdir(tmp_path) == []
