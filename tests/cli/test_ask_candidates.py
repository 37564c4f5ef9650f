"""``ragcal ask --candidates``: a gate fitted on ``score --candidates`` decides on a system's own candidates.

The gate decides each question from the views it reads, built over the file's candidates: a gate on the system's
own scores (``run_top1``) or on BM25 needs no embedding model, one on ``dense_top1`` embeds the pool with the
gate's model. Each decision must be the one the gate makes on the score table's row for that question.
"""

import json
import sys

import pandas as pd
import pytest
from test_benchmark_to_gate import ANSWERABLE, TOPICS, UNANSWERABLE

from ragcal.cli import main
from ragcal.gates import ask_candidates, load_gate, read_gate_file
from ragcal.gates.files import GateFileError
from ragcal.importers.candidates import read_candidates_jsonl


def candidate_lines(*, labels: bool = True) -> list[dict]:
    """The twelve answerable and six unrelated questions, each with two passages and the system's own scores."""
    lines = []
    for n, (text, doc) in enumerate(ANSWERABLE):
        other = "db" if doc != "db" else "cors"
        passages = [
            {"id": doc, "text": TOPICS[doc], "score": 20.0 - n % 3},
            {"id": other, "text": TOPICS[other], "score": 3.0},
        ]
        lines.append({"id": f"a{n}", "query": text, "answerable": True, "passages": passages})
    for n, text in enumerate(UNANSWERABLE):
        passages = [
            {"id": "files", "text": TOPICS["files"], "score": 5.0 + n % 2},
            {"id": "tests", "text": TOPICS["tests"], "score": 1.0},
        ]
        lines.append({"id": f"u{n}", "query": text, "answerable": False, "slice": "unrelated", "passages": passages})
    if not labels:
        for line in lines:
            line.pop("answerable"), line.pop("slice", None)
    return lines


def write_lines(path, lines):
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.fixture
def scored(tmp_path, capsys):
    """The labeled candidates scored by ``score --candidates`` (every view, MiniLM included)."""
    scores = tmp_path / "scores.csv"
    assert (
        main(
            ["score", "--candidates", str(write_lines(tmp_path / "run.jsonl", candidate_lines())), "--out", str(scores)]
        )
        == 0
    )
    capsys.readouterr()
    return scores


def decisions_printed(capsys) -> list[dict]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("signal", ["run_top1", "dense_top1", "bm25_top1_raw"])
def test_ask_candidates_decides_as_the_gate_does_on_the_table(signal, scored, tmp_path, capsys):
    gate_path = tmp_path / f"{signal}.json"
    assert main(["fit-gate", str(scored), "--out", str(gate_path), "--signal", signal, "--rule", "keep@0.9"]) == 0
    new = write_lines(tmp_path / "new.jsonl", candidate_lines(labels=False))  # no labels: deciding, not measuring
    capsys.readouterr()
    assert main(["ask", "--gate", str(gate_path), "--candidates", str(new), "--json"]) == 0
    printed = decisions_printed(capsys)
    table = pd.read_csv(scored)
    expected = load_gate(gate_path).decide_table(table)
    assert [record["id"] for record in printed] == list(table["id"])
    assert [record["action"] for record in printed] == list(expected["action"])
    assert [record["score"] for record in printed] == pytest.approx(list(table[signal]), abs=1e-12)
    if signal == "run_top1":  # the system's own score separates the two kinds here: every answerable top score >= 18
        assert [record["action"] for record in printed] == ["answer"] * len(ANSWERABLE) + ["refuse"] * len(UNANSWERABLE)


def test_a_gate_on_the_run_score_needs_no_model(scored, tmp_path, capsys, monkeypatch):
    gate_path = tmp_path / "gate.json"
    assert main(["fit-gate", str(scored), "--out", str(gate_path), "--signal", "run_top1", "--rule", "keep@1.0"]) == 0
    monkeypatch.setitem(sys.modules, "faiss", None)  # the retrieval extra, as if not installed
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    capsys.readouterr()
    new = write_lines(tmp_path / "new.jsonl", candidate_lines(labels=False)[:2])
    assert main(["ask", "--gate", str(gate_path), "--candidates", str(new), "--json"]) == 0
    assert [record["action"] for record in decisions_printed(capsys)] == ["answer", "answer"]
    dense_gate = tmp_path / "dense.json"
    monkeypatch.undo()
    assert main(["fit-gate", str(scored), "--out", str(dense_gate), "--signal", "dense_top1"]) == 0
    monkeypatch.setitem(sys.modules, "faiss", None)
    capsys.readouterr()
    assert main(["ask", "--gate", str(dense_gate), "--candidates", str(new)]) == 2
    assert capsys.readouterr().err == (
        "ragcal: error: ragcal ask --candidates with a gate on dense scores needs the retrieval extra: "
        "pip install 'ragcal[retrieval]' (faiss is not installed)\n"
    )


def test_score_candidates_without_the_model_stack_leaves_dense_out(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "faiss", None)
    scores = tmp_path / "scores.csv"
    run = write_lines(tmp_path / "run.jsonl", candidate_lines())
    assert main(["score", "--candidates", str(run), "--out", str(scores)]) == 0
    printed = capsys.readouterr().out
    table = pd.read_csv(scores)
    assert {"run_top1", "bm25_top1_raw"} <= set(table.columns)
    assert not any(column.startswith(("dense_", "rrf_")) for column in table.columns)
    assert "left out dense_top1: needs the candidates embedded (dense re-scoring), which was left out" in printed
    assert "left out rrf_top1: needs the dense and bm25_stopwords lists fused, and one of them was left out" in printed


def test_ask_candidates_refuses_a_gate_fitted_on_an_index_and_options_of_an_index(tmp_path, scored, capsys):
    gate_path = tmp_path / "gate.json"
    assert main(["fit-gate", str(scored), "--out", str(gate_path), "--signal", "run_top1"]) == 0
    document = read_gate_file(gate_path)
    candidates = read_candidates_jsonl(
        write_lines(tmp_path / "new.jsonl", candidate_lines(labels=False)), require_labels=False
    )
    with pytest.raises(GateFileError, match="not on candidates scored by `ragcal score --candidates`"):
        ask_candidates(document["gate"], candidates, provenance={**document["provenance"], "scoring": None})
    capsys.readouterr()
    code = main(
        ["ask", "--gate", str(gate_path), "--candidates", str(tmp_path / "new.jsonl"), "--corpus", "docs", "Why?"]
    )
    assert code == 2
    assert capsys.readouterr().err == (
        "ragcal: error: QUESTION, --corpus cannot be used with --candidates: the file holds the questions and their "
        "passages\n"
    )
