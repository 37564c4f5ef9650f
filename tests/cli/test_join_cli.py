"""``ragcal join``, ``ragcal score --extra-signals`` and ``ragcal calibrate`` on a joined table, in process."""

import json

import numpy as np
import pandas as pd
import pytest
from conftest import write
from labeled_queries import QUERIES

from ragcal.cli import main
from ragcal.score_tables import read_provenance


def scores_csv(path, n=20):
    answerable = np.arange(n) % 2 == 0
    pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(n)],
            "query": [f"question {i}" for i in range(n)],
            "answerable": answerable,
            "slice": np.where(answerable, "answerable", "near-domain"),
            "dense_top1": np.linspace(0.2, 0.8, n),
        }
    ).to_csv(path, index=False)
    return path


def logged_csv(path, n=20):
    # A reranker distance (low for answerable) and an LLM verdict; q3 (unanswerable) fooled the LLM.
    rows = ["id,name,value"]
    for i in range(n):
        rows.append(f"q{i},rerank_distance,{(0.1 if i % 2 == 0 else 0.9) + i / 1000}")
        rows.append(f"q{i},llm_found,{'yes' if i % 2 == 0 or i == 3 else 'no'}")
    return write(path, "\n".join(rows) + "\n")


def test_join_writes_the_table_and_records_directions_then_calibrate_uses_them(tmp_path, capsys):
    scores = scores_csv(tmp_path / "scores.csv")
    logged = logged_csv(tmp_path / "logged.csv")
    out = tmp_path / "joined.csv"
    code = main(["join", str(scores), str(logged), "--out", str(out), "--direction", "rerank_distance=lower"])
    assert code == 0
    captured = capsys.readouterr()
    assert "joined 2 logged signal(s) from" in captured.out
    assert "rerank_distance: lower means answerable (declared); continuous; 20 values" in captured.out
    assert "llm_found: higher means answerable (inferred from labels); binary" in captured.out
    assert "llm_found: direction 'higher' inferred from this table's labels" in captured.err
    joined = pd.read_csv(out)
    assert joined["llm_found"].tolist() == [1.0 if i % 2 == 0 or i == 3 else 0.0 for i in range(20)]
    provenance = read_provenance(out)
    assert provenance["directions"] == {"rerank_distance": "lower", "llm_found": "higher"}
    assert provenance["logged_signals"][0]["file"] == str(logged)

    assert main(["calibrate", str(out), "--signal", "rerank_distance", "--rule", "keep@1.0"]) == 0
    printed = capsys.readouterr().out
    assert "signal rerank_distance (lower means answerable: recorded (declared))" in printed
    # Every answerable distance is below every unanswerable one: keep@1.0 answers when <= the largest answerable.
    assert "answer when rerank_distance <= 0.5095" in printed  # midway between 0.118 (answerable) and 0.901
    assert "AUC (answerable vs all unanswerable): 1.0000" in printed

    # Without the recorded direction the same column would be read as higher-is-answerable.
    (tmp_path / "joined.meta.json").unlink()
    assert main(["calibrate", str(out), "--signal", "rerank_distance", "--rule", "keep@1.0"]) == 0
    assert "(higher means answerable: default)" in capsys.readouterr().out


def test_fit_gate_refuses_an_unregistered_logged_signal_with_its_recorded_direction(tmp_path, capsys):
    scores = scores_csv(tmp_path / "scores.csv")
    out = tmp_path / "joined.csv"
    main(
        [
            "join",
            str(scores),
            str(logged_csv(tmp_path / "logged.csv")),
            "--out",
            str(out),
            "--direction",
            "rerank_distance=lower",
        ]
    )
    capsys.readouterr()
    gate = tmp_path / "gate.json"
    assert main(["fit-gate", str(out), "--signal", "rerank_distance", "--out", str(gate)]) == 2
    err = capsys.readouterr().err
    assert "rerank_distance is a logged signal (lower means answerable, recorded (declared))" in err
    assert "--signals-module" in err and "higher_is_answerable=False" in err
    assert not gate.exists()


@pytest.mark.parametrize(
    "logged_text, options, message",
    [
        ("id,judge\nq1,1\nnope,0\n", [], "1 id(s) are not questions of"),
        ("id,judge\nq1,1\nq2,0\n", [], "no value for some questions of"),
        ("id,judge\n" + "".join(f"q{i},maybe\n" for i in range(20)), [], "line 2 (id 'q0', 'judge'): 'maybe'"),
        ("id,dense_top1\n" + "".join(f"q{i},1\n" for i in range(20)), [], "already columns of"),
        ("id,judge\n" + "".join(f"q{i},1\n" for i in range(20)), ["--direction", "judge=up"], "expected NAME=higher"),
        ("id,name,value\nq1,a,1\nq1,a,0\n", [], "repeat an (id, name) pair"),
    ],
)
def test_join_errors_exit_2_and_write_nothing(tmp_path, capsys, logged_text, options, message):
    scores = scores_csv(tmp_path / "scores.csv")
    logged = write(tmp_path / "logged.csv", logged_text)
    out = tmp_path / "joined.csv"
    assert main(["join", str(scores), str(logged), "--out", str(out), *options]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragcal: error: ") and message in err
    assert not out.exists() and not (tmp_path / "joined.meta.json").exists()


def test_join_allow_missing_and_replace(tmp_path, capsys):
    scores = scores_csv(tmp_path / "scores.csv")
    logged = write(tmp_path / "logged.csv", "id,dense_top1,judge\nq0,0.5,1\nq1,0.4,\n")
    out = tmp_path / "joined.csv"
    assert main(["join", str(scores), str(logged), "--out", str(out), "--allow-missing", "--replace"]) == 0
    assert "18 missing (NaN)" in capsys.readouterr().out
    joined = pd.read_csv(out)
    assert joined["dense_top1"].iloc[:2].tolist() == [0.5, 0.4] and joined["dense_top1"].iloc[2:].isna().all()
    assert joined["judge"].iloc[0] == 1.0 and joined["judge"].iloc[1:].isna().all()  # an empty cell is missing


def test_score_extra_signals_fail_fast_before_any_index(tmp_path, capsys):
    queries = write(tmp_path / "queries.csv", QUERIES)
    out = tmp_path / "scores.csv"
    empty_corpus = tmp_path / "no-such-corpus"  # never reached: the logged file fails first
    for text, message in (
        ("id,judge\nq1,1\nq99,0\n", "1 id(s) are not questions of"),
        ("id,judge\nq1,perhaps\n", "line 2 (id 'q1', 'judge'): 'perhaps'"),
        ("id,dense_top1\nq1,1\n", "are signals ragcal computes"),
    ):
        logged = write(tmp_path / "logged.csv", text)
        arguments = ["score", str(queries), "--corpus", str(empty_corpus), "--out", str(out)]
        assert main([*arguments, "--extra-signals", str(logged)]) == 2
        assert message in capsys.readouterr().err
        assert not out.exists()
    assert (
        main(["score", str(queries), "--corpus", str(empty_corpus), "--out", str(out), "--direction", "a=lower"]) == 2
    )
    assert "--direction and --allow-missing go with --extra-signals" in capsys.readouterr().err


def test_score_with_extra_signals_joins_them_after_scoring(fastapi_slice, tmp_path, embedder, capsys):
    queries = write(tmp_path / "queries.csv", QUERIES)
    verdicts = "".join(f"q{i},{'true' if i <= 4 else 'false'}\n" for i in range(1, 8))
    logged = write(tmp_path / "verdicts.csv", "id,llm_found\n" + verdicts)
    out = tmp_path / "scores.csv"
    arguments = ["score", str(queries), "--corpus", str(fastapi_slice), "--out", str(out)]
    arguments += ["--cache-dir", str(embedder.cache_dir), "--extra-signals", str(logged)]
    assert main([*arguments, "--direction", "llm_found=higher"]) == 0
    assert "llm_found: higher means answerable (declared); binary" in capsys.readouterr().out
    table = pd.read_csv(out)
    assert table["llm_found"].tolist() == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert "dense_top1" in table.columns
    meta = json.loads((tmp_path / "scores.meta.json").read_text())
    assert meta["directions"] == {"llm_found": "higher"} and meta["model"]
