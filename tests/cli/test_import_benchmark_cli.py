"""``ragcal import-benchmark``: run in-process, its printed summary and its errors (exit code 2, one line)."""

import json
import os

import pytest

from ragcal.cli import main

SQUAD = {
    "version": "v2.0",
    "data": [
        {
            "title": "Tea",
            "paragraphs": [
                {
                    "context": "Tea is a drink.",
                    "qas": [
                        {"id": "a1", "question": "What is tea?", "is_impossible": False, "answers": []},
                        {"id": "u1", "question": "Who drank the first tea?", "is_impossible": True, "answers": []},
                    ],
                }
            ],
        },
        {
            "title": "Coffee",
            "paragraphs": [
                {
                    "context": "Coffee is a drink too.",
                    "qas": [
                        {"id": "a2", "question": "What is coffee?", "is_impossible": False, "answers": []},
                    ],
                }
            ],
        },
    ],
}


@pytest.fixture
def squad_file(tmp_path):
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(SQUAD), encoding="utf-8")
    return path


def test_import_prints_what_it_wrote(tmp_path, squad_file, capsys):
    out = tmp_path / "bench"
    assert main(["import-benchmark", "squad2", str(squad_file), "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"imported squad2 {squad_file} -> {out}",
        f"  {out / 'corpus'}: 2 pages",
        f"  {out / 'queries.csv'}: 3 questions, 2 answerable, 1 unanswerable (1 near-domain)",
        "  group column: 2 groups; keep each group on one side of any split",
        "  2 articles",
    ]
    assert (out / "corpus" / "Tea" / "p00.md").is_file()


def test_articles_repeatable_and_force_replaces(tmp_path, squad_file, capsys):
    out = tmp_path / "bench"
    assert main(["import-benchmark", "squad2", str(squad_file), "--out", str(out)]) == 0
    assert main(["import-benchmark", "squad2", str(squad_file), "--out", str(out), "--articles", "Coffee"]) == 2
    assert "folder exists and is not empty" in capsys.readouterr().err
    arguments = ["import-benchmark", "squad2", str(squad_file), "--out", str(out), "--articles", "Coffee", "--force"]
    assert main(arguments) == 0
    assert "1 of 2 articles: Coffee" in capsys.readouterr().out
    assert os.listdir(out / "corpus") == ["Coffee"]
    assert main([*arguments, "--articles", "Tea"]) == 0
    assert sorted(os.listdir(out / "corpus")) == ["Coffee", "Tea"]


def test_beir_summary_names_the_slice_and_the_left_out_queries(tmp_path, capsys):
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "x"}\n', encoding="utf-8")
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "a"}\n{"_id": "q2", "text": "b"}\n', encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    out = tmp_path / "out"
    arguments = ["import-benchmark", "beir", str(folder), "--out", str(out), "--unanswerable-slice", "unjudged"]
    assert main([*arguments, "--queries", "qrels"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[2].endswith("1 questions, 1 answerable, 0 unanswerable (none)")
    assert printed[3:] == [
        "  group column: empty (every question stands alone)",
        "  split 'test', queries 'qrels'",
        "  1 of the 2 queries in queries.jsonl left out: the split's qrels do not name them",
    ]
    assert main([*arguments, "--force"]) == 0
    assert "2 questions, 1 answerable, 1 unanswerable (1 unjudged)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--split", "dev"], "ragcal: error: --split is an option of beir, not of squad2"),
        (
            ["--queries", "all", "--unanswerable-slice", "x"],
            "ragcal: error: --unanswerable-slice is an option of beir, not of squad2; "
            "--queries is an option of beir, not of squad2",
        ),
        (
            ["--articles", "Milk"],
            "ragcal: error: {source}: unknown article(s) 'Milk'; the file's articles are Tea, Coffee",
        ),
    ],
)
def test_errors_exit_2_with_one_line_and_write_nothing(tmp_path, squad_file, capsys, extra, message):
    assert main(["import-benchmark", "squad2", str(squad_file), "--out", str(tmp_path / "bench"), *extra]) == 2
    captured = capsys.readouterr()
    assert captured.err == message.format(source=squad_file) + "\n" and captured.out == ""
    assert sorted(os.listdir(tmp_path)) == ["squad.json"]


def test_malformed_source_exits_2_naming_the_json_path(tmp_path, capsys):
    broken = json.loads(json.dumps(SQUAD))
    del broken["data"][1]["paragraphs"][0]["qas"][0]["question"]
    source = tmp_path / "broken.json"
    source.write_text(json.dumps(broken), encoding="utf-8")
    assert main(["import-benchmark", "squad2", str(source), "--out", str(tmp_path / "bench")]) == 2
    assert (
        capsys.readouterr().err == f"ragcal: error: {source}: data[1].paragraphs[0].qas[0]: missing field 'question'\n"
    )
    assert sorted(os.listdir(tmp_path)) == ["broken.json"]


def test_unknown_format_is_refused_by_the_parser_with_the_registry_names(tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["import-benchmark", "squad1", "x.json", "--out", str(tmp_path / "bench")])
    assert exited.value.code == 2
    assert "invalid choice: 'squad1' (choose from 'squad2', 'beir', 'candidates')" in capsys.readouterr().err
