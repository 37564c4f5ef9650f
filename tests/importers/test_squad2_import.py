"""SQuAD 2.0 JSON -> one page per paragraph and ragcal's query file; byte for byte the shared squad2-A copy."""

import copy
import csv
import io
import json
import os
from pathlib import Path

import pytest

from ragcal.importers import BenchmarkFileError, import_benchmark
from ragcal.corpus import load_corpus
from ragcal.queries import load_queries

#: The shared SQuAD 2.0 half (see its SOURCE.md): beside the repository, ``<root>/main`` and ``<root>/shared``.
SHARED_SQUAD = Path(__file__).resolve().parents[2].parent / "shared" / "benchmarks" / "squad2-A"


def question(question_id, text, impossible):
    answers = [] if impossible else [{"text": "x", "answer_start": 0}]
    return {"id": question_id, "question": text, "is_impossible": impossible, "answers": answers}


TINY = {
    "version": "v2.0",
    "data": [
        {
            "title": "Pole_vault",
            "paragraphs": [
                {
                    "context": " Pole vaulting is a track and field event. ",
                    "qas": [
                        question("a1", "What kind of event is pole vaulting? ", False),
                        question("u1", " Who invented the pole?", True),
                    ],
                },
                {
                    "context": "Poles were once made of bamboo.",
                    "qas": [question("a2", "What were poles made of?", False)],
                },
            ],
        },
        {
            "title": "Tea",
            "paragraphs": [{"context": "Tea is a drink.", "qas": [question("u2", "Who drank the first tea?", True)]}],
        },
    ],
}


def write_json(tmp_path, document, name="squad.json"):
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def read_rows(path):
    with open(path, newline="", encoding="utf-8") as stream:
        return list(csv.reader(stream))


def test_tiny_file_pages_rows_and_groups(tmp_path):
    summary = import_benchmark("squad2", write_json(tmp_path, TINY), tmp_path / "out")
    corpus = tmp_path / "out" / "corpus"
    assert (corpus / "Pole_vault" / "p00.md").read_text(encoding="utf-8") == (
        "# Pole vault\n\nPole vaulting is a track and field event.\n"
    )
    assert (corpus / "Pole_vault" / "p01.md").read_text(
        encoding="utf-8"
    ) == "# Pole vault\n\nPoles were once made of bamboo.\n"
    assert (corpus / "Tea" / "p00.md").read_text(encoding="utf-8") == "# Tea\n\nTea is a drink.\n"
    assert read_rows(tmp_path / "out" / "queries.csv") == [
        ["id", "query", "answerable", "slice", "gold", "group"],
        ["a1", "What kind of event is pole vaulting?", "true", "answerable", "Pole_vault/p00.md", "Pole_vault"],
        ["u1", "Who invented the pole?", "false", "near-domain", "", "Pole_vault"],
        ["a2", "What were poles made of?", "true", "answerable", "Pole_vault/p01.md", "Pole_vault"],
        ["u2", "Who drank the first tea?", "false", "near-domain", "", "Tea"],
    ]
    assert (summary.pages, summary.questions, summary.answerable, summary.unanswerable, summary.groups) == (
        3,
        4,
        2,
        (("near-domain", 2),),
        2,
    )
    documents = load_corpus(corpus)
    queries = load_queries(tmp_path / "out" / "queries.csv", corpus_paths={document.path for document in documents})
    assert dict(zip(queries["id"], queries["gold"])) == {
        "a1": ("Pole_vault/p00.md",),
        "u1": (),
        "a2": ("Pole_vault/p01.md",),
        "u2": (),
    }


def test_page_names_widen_past_99_paragraphs_and_unsafe_titles_are_cleaned(tmp_path):
    paragraphs = [{"context": f"Paragraph {index}.", "qas": []} for index in range(101)]
    paragraphs[100]["qas"] = [question("last", "Which is last?", False)]
    document = {"data": [{"title": "AC/DC: songs?", "paragraphs": paragraphs}]}
    import_benchmark("squad2", write_json(tmp_path, document), tmp_path / "out")
    folder = tmp_path / "out" / "corpus" / "AC_DC_songs"
    assert sorted(os.listdir(folder))[:2] == ["p000.md", "p001.md"] and len(os.listdir(folder)) == 101
    assert (folder / "p100.md").read_text(encoding="utf-8") == "# AC/DC: songs?\n\nParagraph 100.\n"
    assert read_rows(tmp_path / "out" / "queries.csv")[1] == [
        "last",
        "Which is last?",
        "true",
        "answerable",
        "AC_DC_songs/p100.md",
        "AC/DC: songs?",
    ]


@pytest.mark.parametrize("articles", ["Tea", ["Tea"], "Tea,", ["Tea", "Tea"]])
def test_articles_select_by_title(tmp_path, articles):
    summary = import_benchmark("squad2", write_json(tmp_path, TINY), tmp_path / "out", articles=articles)
    assert summary.pages == 1 and summary.questions == 1
    assert summary.notes == ("1 of 2 articles: Tea",)
    assert os.listdir(tmp_path / "out" / "corpus") == ["Tea"]


def test_articles_accept_spaces_commas_and_repeats_and_keep_file_order(tmp_path):
    summary = import_benchmark("squad2", write_json(tmp_path, TINY), tmp_path / "out", articles=["Tea", "Pole vault"])
    assert summary.notes == ("2 articles",)
    assert [row[0] for row in read_rows(tmp_path / "out" / "queries.csv")[1:]] == ["a1", "u1", "a2", "u2"]
    document = copy.deepcopy(TINY)
    document["data"][1]["title"] = "Tea, hot"  # a title with a comma is matched whole
    source = write_json(tmp_path, document, "comma.json")
    summary = import_benchmark("squad2", source, tmp_path / "comma", articles="Tea, hot")
    assert summary.questions == 1


def test_unknown_article_lists_the_known_ones_and_leaves_nothing(tmp_path):
    source = write_json(tmp_path, TINY)
    with pytest.raises(
        BenchmarkFileError, match=r"unknown article\(s\) 'Coffee'; the file's articles are Pole_vault, Tea"
    ):
        import_benchmark("squad2", source, tmp_path / "out", articles="Tea,Coffee")
    with pytest.raises(BenchmarkFileError, match="no article selected"):
        import_benchmark("squad2", source, tmp_path / "out", articles=",")
    assert sorted(os.listdir(tmp_path)) == ["squad.json"]


def broken(path_and_change):
    document = copy.deepcopy(TINY)
    path_and_change(document)
    return document


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.pop("data"), r"field 'data': expected a list of articles, missing"),
        (lambda d: d.update(data={"x": 1}), r"field 'data': expected a list of articles, got"),
        (lambda d: d["data"][1].pop("title"), r"data\[1\]: missing field 'title'"),
        (
            lambda d: d["data"].append({"title": "Tea", "paragraphs": []}),
            r"data\[2\], field 'title': duplicate article title 'Tea' \(first at data\[1\]\)",
        ),
        (lambda d: d["data"][0].pop("paragraphs"), r"data\[0\]: missing field 'paragraphs'"),
        (lambda d: d["data"][0]["paragraphs"].append("text"), r"data\[0\]\.paragraphs\[2\]: expected a JSON object"),
        (
            lambda d: d["data"][0]["paragraphs"][1].update(context="  "),
            r"data\[0\]\.paragraphs\[1\], field 'context': empty",
        ),
        (lambda d: d["data"][1]["paragraphs"][0].update(qas=None), r"data\[1\]\.paragraphs\[0\]: missing field 'qas'"),
        (
            lambda d: d["data"][0]["paragraphs"][0]["qas"][1].pop("question"),
            r"data\[0\]\.paragraphs\[0\]\.qas\[1\]: missing field 'question'",
        ),
        (
            lambda d: d["data"][0]["paragraphs"][0]["qas"][1].update(question=7.5),
            r"qas\[1\], field 'question': expected a string, got 7.5",
        ),
        (
            lambda d: d["data"][0]["paragraphs"][0]["qas"][0].pop("is_impossible"),
            r"qas\[0\]: missing field 'is_impossible'",
        ),
        (
            lambda d: d["data"][0]["paragraphs"][0]["qas"][0].update(is_impossible="no"),
            r"qas\[0\], field 'is_impossible': expected true or false, got \"no\"",
        ),
        (
            lambda d: d["data"][1]["paragraphs"][0]["qas"][0].update(id="a1"),
            r"data\[1\]\.paragraphs\[0\]\.qas\[0\], field 'id': duplicate question id 'a1' "
            r"\(first at data\[0\]\.paragraphs\[0\]\.qas\[0\]\)",
        ),
    ],
)
def test_malformed_file_names_the_file_and_the_json_path(tmp_path, change, message):
    source = write_json(tmp_path, broken(change))
    with pytest.raises(BenchmarkFileError, match=message) as raised:
        import_benchmark("squad2", source, tmp_path / "out")
    assert str(raised.value).startswith(str(source))
    assert sorted(os.listdir(tmp_path)) == ["squad.json"]  # neither the folder nor its temporary twin


def test_invalid_json_missing_file_and_non_object(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"data": [\n  {"title": "x",}\n]}', encoding="utf-8")
    with pytest.raises(BenchmarkFileError, match=r"bad\.json, line 2, column 17: not valid JSON"):
        import_benchmark("squad2", bad, tmp_path / "out")
    with pytest.raises(BenchmarkFileError, match="SQuAD JSON file not found"):
        import_benchmark("squad2", tmp_path / "nope.json", tmp_path / "out")
    listed = write_json(tmp_path, [1, 2], "list.json")
    with pytest.raises(BenchmarkFileError, match="expected a JSON object with 'data', found list"):
        import_benchmark("squad2", listed, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_import_reproduces_the_shared_squad2_A_copy_byte_for_byte(tmp_path):
    """The shared folder was converted from the same JSON by hand; the importer writes exactly its files."""
    summary = import_benchmark("squad2", SHARED_SQUAD / "dev-v2.0-half-A.json", tmp_path / "out")
    assert (summary.pages, summary.questions, summary.answerable, summary.unanswerable, summary.groups) == (
        301,
        2828,
        1299,
        (("near-domain", 1529),),
        8,  # as SOURCE.md states
    )
    shared_pages = sorted(path.relative_to(SHARED_SQUAD / "corpus") for path in (SHARED_SQUAD / "corpus").rglob("*.md"))
    written_pages = sorted(path.relative_to(summary.corpus) for path in summary.corpus.rglob("*.md"))
    assert written_pages == shared_pages and len(shared_pages) == 301
    for page in shared_pages:
        assert (summary.corpus / page).read_bytes() == (SHARED_SQUAD / "corpus" / page).read_bytes(), page
    rows = read_rows(summary.queries)
    assert rows[0][-1] == "group" and all(len(row) == 6 for row in rows)
    without_group = io.StringIO(newline="")
    csv.writer(without_group).writerows(row[:5] for row in rows)
    assert without_group.getvalue().encode("utf-8") == (SHARED_SQUAD / "queries.csv").read_bytes()
    # The group column is the article, the folder of every answerable question's gold page.
    assert {row[5] for row in rows[1:]} == {path.parts[0] for path in shared_pages}
    assert all(row[4].split("/")[0] == row[5] for row in rows[1:] if row[2] == "true")
    documents = load_corpus(summary.corpus)
    queries = load_queries(summary.queries, corpus_paths={document.path for document in documents})
    assert len(queries) == 2828 and sum(len(gold) for gold in queries["gold"]) == 1299
