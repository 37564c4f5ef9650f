"""``ragcal fit-gate`` and ``ragcal ask`` on the bundled FastAPI docs with the real model."""

import json
import math

import numpy as np
import pytest

from ragcal.cli import main
from ragcal.datasets import FASTAPI_QUERIES
from ragcal.gates import fit_floor_gap_gate, fit_threshold_gate
from ragcal.gates.chain import fit_default_chain
from ragcal.gates.fit import retriever_features
from ragcal.queries import load_queries
from ragcal.score_tables import write_score_table
from ragcal.scoring import score_table

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def labeled(fastapi_index):
    queries = load_queries(FASTAPI_QUERIES, corpus_paths=fastapi_index.doc_paths)
    retrieved = fastapi_index.retrieve(queries["query"])
    return queries, retrieved, score_table(queries, retrieved)


@pytest.fixture(scope="module")
def scores_csv(labeled, fastapi_index, tmp_path_factory):
    path = tmp_path_factory.mktemp("gate") / "scores.csv"
    return write_score_table(path, labeled[2], config=fastapi_index.config)


def ask(capsys, *arguments):
    code = main(["ask", *arguments])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_decide_and_decide_table_agree_on_the_bundled_set(labeled):
    queries, retrieved, table = labeled
    features = retriever_features(retrieved)
    table = table.assign(**{column: features[column] for column in features if column not in table})
    gates = [
        fit_threshold_gate(table, "dense_top1", "keep@0.95", hedge_rule="keep@0.8"),
        fit_floor_gap_gate(table),
        fit_floor_gap_gate(table, retriever="bm25_stopwords"),
        fit_default_chain(table),
    ]
    for gate in gates:
        decided = gate.decide_table(table)
        for position in range(len(queries)):
            results = {name: per_query[position] for name, per_query in retrieved.items()}
            decision = gate.decide(results)
            assert decision.action == decided["action"][position]
            assert decision.stage == decided["stage"][position]
            assert math.isclose(decision.score, decided["score"][position]) or np.isnan(decision.score)
            # Answers pass on only what clears the bar; refusals pass on nothing.
            assert bool(decision.passages) == decision.answered


def test_fit_gate_then_ask_json(scores_csv, fastapi_index, capsys, tmp_path):
    gate_path = tmp_path / "gate.json"
    assert main(["fit-gate", str(scores_csv), "--gate", "chain", "--out", str(gate_path)]) == 0
    fitted = json.loads(gate_path.read_text())
    assert fitted["provenance"]["model_fingerprint"] == fastapi_index.config["model_fingerprint"]
    assert fitted["rule"] == "keep@0.95" and fitted["gate"]["type"] == "chain"
    capsys.readouterr()
    code, out, _ = ask(
        capsys,
        "--gate",
        str(gate_path),
        "--json",
        "How do I set a cookie on the response?",
        "What is a good recipe for banana bread?",
    )
    assert code == 0
    cookie, bread = [json.loads(line) for line in out.strip().splitlines()]
    keys = {"query", "action", "score", "stage", "tier", "passages", "message"}
    assert keys <= set(cookie) and keys <= set(bread)
    assert cookie["action"] == "answer" and cookie["tier"] == "confident" and cookie["stage"] == "hybrid"
    assert cookie["message"] is None
    assert any(passage["chunk_id"].startswith("advanced/response-cookies.md#") for passage in cookie["passages"])
    assert bread["action"] == "refuse" and bread["stage"] is None and bread["passages"] == []
    assert "searched the fastapi documentation" in bread["message"] and "Related, but not an answer" in bread["message"]


def test_ask_from_a_query_file_keeps_ids(scores_csv, capsys, tmp_path):
    gate_path = tmp_path / "gate.json"
    assert (
        main(["fit-gate", str(scores_csv), "--signal", "dense_top1", "--rule", "keep@1.0", "--out", str(gate_path)])
        == 0
    )
    questions = tmp_path / "questions.csv"
    questions.write_text(
        "id,query\nx1,How do I allow requests from my React app on another port?\nx2,How many players are on a cricket team?\n"
    )
    capsys.readouterr()
    code, out, _ = ask(capsys, "--gate", str(gate_path), "--queries", str(questions), "--json")
    assert code == 0
    first, second = [json.loads(line) for line in out.strip().splitlines()]
    assert (first["id"], first["action"]) == ("x1", "answer")
    assert any(passage["chunk_id"].startswith("tutorial/cors.md#") for passage in first["passages"])
    assert (second["id"], second["action"]) == ("x2", "refuse")
    code, out, _ = ask(capsys, "--gate", str(gate_path), "How do I add a background task?")
    assert code == 0 and out.startswith("? How do I add a background task?\n  ANSWER") and "passages:" in out


def test_ask_refuses_a_gate_from_another_model(scores_csv, tmp_path, capsys):
    gate_path = tmp_path / "gate.json"
    assert main(["fit-gate", str(scores_csv), "--out", str(gate_path)]) == 0
    document = json.loads(gate_path.read_text())
    document["provenance"]["model_fingerprint"] = "someone/else@0123456789ab/max512"
    gate_path.write_text(json.dumps(document))
    capsys.readouterr()
    code, out, err = ask(capsys, "--gate", str(gate_path), "--json", "How do I set a cookie?")
    assert code == 2 and out == ""
    assert "someone/else@0123456789ab/max512" in err and "another model's scale is wrong" in err


def test_fit_gate_errors_name_the_problem(tmp_path, capsys):
    scores = tmp_path / "scores.csv"
    scores.write_text("id,query,answerable,slice,dense_top1\nq1,a,true,answerable,0.5\nq2,b,false,unrelated,0.2\n")
    code = main(["fit-gate", str(scores), "--gate", "floor-gap", "--out", str(tmp_path / "gate.json")])
    assert code == 2 and "missing column(s) 'dense_top2'" in capsys.readouterr().err
    assert not (tmp_path / "gate.json").exists()
    code = main(["fit-gate", str(scores), "--rule", "keep@x", "--out", str(tmp_path / "gate.json")])
    assert code == 2 and "unknown threshold rule" in capsys.readouterr().err
    # Without a .meta.json the gate is written, with a warning that ask will refuse it.
    assert main(["fit-gate", str(scores), "--out", str(tmp_path / "gate.json")]) == 0
    assert "records no model" in capsys.readouterr().err


def test_ask_finds_the_gates_corpus_or_says_what_to_pass(scores_csv, tmp_path, capsys):
    gate_path = tmp_path / "gate.json"
    assert main(["fit-gate", str(scores_csv), "--out", str(gate_path)]) == 0
    capsys.readouterr()
    # No --corpus: the corpus recorded in the gate's provenance (the bundled docs here).
    code, out, err = ask(capsys, "--gate", str(gate_path), "--json", "How do I set a cookie on the response?")
    assert code == 0 and json.loads(out)["action"] == "answer" and "ragcal ask: corpus" in err
    document = json.loads(gate_path.read_text())
    document["provenance"]["corpus"] = str(tmp_path / "moved-away")
    gate_path.write_text(json.dumps(document))
    code, out, err = ask(capsys, "--gate", str(gate_path), "How do I set a cookie?")
    assert code == 2 and out == "" and "moved-away" in err and "--corpus DIR" in err


def test_load_gate_index_rebuilds_the_index_the_gate_was_fitted_on(scores_csv, fastapi_index, tmp_path):
    from ragcal import load_gate_index
    from ragcal.gates import ask as ask_gate
    from ragcal.gates import load_gate

    gate_path = tmp_path / "gate.json"
    assert main(["fit-gate", str(scores_csv), "--out", str(gate_path)]) == 0
    index = load_gate_index(gate_path)  # what ragcal ask builds, for a notebook user
    for key in ("chunks_sha256", "model_fingerprint", "chunker", "max_tokens", "excluded", "dense_index"):
        assert index.config[key] == fastapi_index.config[key], key
    gate = load_gate(gate_path, index=index)  # its provenance checks pass on the rebuilt index
    decision = ask_gate(gate, index, ["How do I set a cookie on the response?"])[0][0]
    assert decision.action == "answer"
    document = json.loads(gate_path.read_text())
    corpus = document["provenance"]["corpus"]
    document["provenance"]["corpus"] = str(tmp_path / "moved-away")
    gate_path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match=r"moved-away.*corpus="):
        load_gate_index(gate_path)
    assert load_gate_index(gate_path, corpus=corpus).config["chunks_sha256"] == fastapi_index.config["chunks_sha256"]


def test_ask_warns_when_the_corpus_changed(scores_csv, fastapi_slice, embedder, tmp_path, capsys):
    gate_path = tmp_path / "gate.json"
    assert main(["fit-gate", str(scores_csv), "--out", str(gate_path)]) == 0
    capsys.readouterr()
    with pytest.warns(UserWarning, match="corpus changed since the gate was fitted"):
        code, out, _ = ask(
            capsys,
            "--gate",
            str(gate_path),
            "--corpus",
            str(fastapi_slice),
            "--exclude",
            "none.md",
            "--cache-dir",
            str(embedder.cache_dir),
            "--json",
            "How do I set a cookie on the response?",
        )
    assert code == 0 and json.loads(out)["action"] == "answer"


def test_fit_learned_gate_then_ask_json_scores_with_the_saved_model(scores_csv, fastapi_index, capsys, tmp_path):
    from ragcal.gates import LearnedGate, load_gate

    gate_path = tmp_path / "learned.json"
    assert main(["fit-gate", str(scores_csv), "--learned", "--out", str(gate_path), "--heldout", "5"]) == 0
    assert "using the default set" in capsys.readouterr().out
    gate = load_gate(gate_path, index=fastapi_index)
    assert isinstance(gate, LearnedGate)
    questions = ["How do I set a cookie on the response?", "What is a good recipe for banana bread?"]
    code, out, _ = ask(capsys, "--gate", str(gate_path), "--json", *questions)
    assert code == 0
    answers = [json.loads(line) for line in out.strip().splitlines()]
    retrieved = fastapi_index.retrieve(questions)
    for position, answer in enumerate(answers):
        results = {name: per_query[position] for name, per_query in retrieved.items()}
        assert answer["score"] == pytest.approx(gate.score(results), abs=1e-12)
        assert 0.0 <= answer["score"] <= 1.0
    assert answers[1]["action"] == "refuse" and answers[1]["score"] < gate.threshold


def test_support_levels_agree_with_the_passages_decide_passes_on(labeled):
    from ragcal.gates import FloorGapGate, ThresholdGate, support_levels, supported_answers
    from ragcal.gates.support import gold_pages, signal_support

    queries, retrieved, table = labeled
    results = [{name: listed[row] for name, listed in retrieved.items()} for row in range(len(queries))]
    gold = gold_pages(queries)
    checked = 0
    for signal in ("dense_top1", "dense_top2", "bm25_top1_stopwords", "rrf_top1", "dense_gap"):
        levels = signal_support(results, gold, signal)
        for threshold in np.nanquantile(table[signal], [0.2, 0.5, 0.8]):
            gate = ThresholdGate(signal, float(threshold))
            answered = gate.decide_table(table)["action"].ne("refuse").to_numpy()
            expected = supported_answers([gate.decide(row) for row in results], gold)
            assert np.array_equal(answered & (levels >= threshold), expected), (signal, threshold)
            checked += int(expected.sum())
    dense = support_levels(results, gold, "dense")
    for floor, gap in ((0.4, 0.02), (0.5, 0.0), (0.45, 0.1)):
        gate = FloorGapGate(floor, gap)
        answered = gate.decide_table(table)["action"].ne("refuse").to_numpy()
        expected = supported_answers([gate.decide(row) for row in results], gold)
        assert np.array_equal(answered & (dense >= floor), expected)
    assert checked > 0  # some answers were supported, so the comparison was not vacuous


def test_fit_gate_reports_support_and_fits_a_risk_guarantee_from_runs(labeled, scores_csv, capsys, tmp_path):
    from ragcal.runs import write_trec_runs

    queries, retrieved, _ = labeled
    runs = tmp_path / "runs"
    write_trec_runs(runs, queries["id"], retrieved)
    out = tmp_path / "gate.json"
    code = main(["fit-gate", str(scores_csv), "--out", str(out), "--rule", "risk_guarantee@0.3",
                 "--runs", str(runs), "--queries", str(FASTAPI_QUERIES)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "supported answers and selective risk" in captured.out
    line = next(line for line in captured.out.splitlines() if "all questions" in line and "selective_risk" in line)
    answered, total = (int(value) for value in line.split("(")[1].split(")")[0].split("/"))
    assert total > 0 and answered <= total
    assert json.loads(out.read_text())["gate"]["type"] == "threshold"
    code = main(["fit-gate", str(scores_csv), "--out", str(tmp_path / "x.json"), "--rule", "risk_guarantee@0.3"])
    assert code != 0 and "--runs and --queries" in capsys.readouterr().err


def test_fit_gate_joint_prints_and_saves_the_certificate(scores_csv, capsys, tmp_path):
    out = tmp_path / "joint.json"
    code = main(["fit-gate", str(scores_csv), "--out", str(out), "--rule", "recall_guarantee@0.8",
                 "--rule", "false_answer_guarantee@0.3", "--joint"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "recall_guarantee@0.8 and false_answer_guarantee@0.3" in captured.out
    saved = json.loads(out.read_text())
    assert "Learn-then-Test" in saved["fitted"]["certificate"]
    code = main(["fit-gate", str(scores_csv), "--out", str(out), "--rule", "keep@0.9", "--rule", "keep@0.8"])
    assert code != 0 and "--joint" in capsys.readouterr().err


def test_table_support_is_what_decide_passes_on_for_every_gate_kind(labeled):
    from ragcal.gates import ThresholdGate, fit_learned_gate, support_levels, supported_answers, table_support
    from ragcal.gates.support import cut_support, gold_pages, support_inputs

    queries, retrieved, table = labeled
    features = retriever_features(retrieved)
    table = table.assign(**{column: features[column] for column in features if column not in table})
    results, gold = support_inputs(queries, retrieved)
    gates = [
        fit_threshold_gate(table, "dense_top1", "keep@0.9"),
        fit_threshold_gate(table, "dense_gap", "keep@0.9"),
        fit_floor_gap_gate(table),
        fit_default_chain(table),
        fit_learned_gate(table, "keep@0.9"),
    ]
    for gate in gates:
        expected = supported_answers([gate.decide(row) for row in results], gold)
        assert np.array_equal(table_support(gate, table, results, gold), expected), gate.type
        assert expected.any() and not expected.all()
    # where a dense gate answers, cut_support at many thresholds is the support level cleared
    thresholds = np.nanquantile(table["dense_top1"], np.linspace(0.05, 0.95, 7))
    passes = cut_support(ThresholdGate("dense_top1", 0.0), results, gold, thresholds)
    answers = table["dense_top1"].to_numpy()[None, :] >= thresholds[:, None]
    levels = support_levels(results, gold, "dense")
    assert np.array_equal(passes & answers, levels[None, :] >= thresholds[:, None])
    assert gold_pages(queries) == gold


def test_trec_runs_read_back_the_scores_exactly(labeled, tmp_path):
    from ragcal.gates.support import results_from_runs
    from ragcal.runs import write_trec_runs

    queries, retrieved, _ = labeled
    write_trec_runs(tmp_path / "runs", queries["id"], retrieved)
    back = results_from_runs(tmp_path / "runs", queries["id"])
    for row in (0, 7, len(queries) - 1):
        for name, listed in retrieved.items():
            assert back[row][name].chunk_ids == tuple(listed[row].chunk_ids)
            assert np.array_equal(back[row][name].scores, np.asarray(listed[row].scores, dtype=float))


@pytest.fixture(scope="module")
def runs_dir(labeled, tmp_path_factory):
    from ragcal.runs import write_trec_runs

    queries, retrieved, _ = labeled
    path = tmp_path_factory.mktemp("runs") / "runs"
    write_trec_runs(path, queries["id"], retrieved)
    return path


@pytest.mark.parametrize(
    "kind, rules",
    [
        ("chain", ["risk_guarantee@0.3"]),
        ("floor-gap", ["recall_guarantee@0.8", "false_answer_guarantee@0.3"]),
        ("learned", ["risk_guarantee@0.3"]),
    ],
)
def test_fit_gate_certifies_every_gate_kind(kind, rules, labeled, scores_csv, runs_dir, capsys, tmp_path):
    from ragcal.gates import load_gate

    queries, retrieved, _ = labeled
    out = tmp_path / "certified.json"
    arguments = ["fit-gate", str(scores_csv), "--out", str(out), "--gate", kind, "--runs", str(runs_dir),
                 "--queries", str(FASTAPI_QUERIES), "--heldout", "3"]
    for rule in rules:
        arguments += ["--rule", rule]
    if len(rules) > 1:
        arguments.append("--joint")
    if kind == "floor-gap":  # floor-gap's columns come from retriever_features, not the score table
        features = retriever_features(retrieved)
        table = labeled[2].assign(**{c: features[c] for c in features if c not in labeled[2]})
        arguments[1] = str(write_score_table(tmp_path / "scores.csv", table))
    code = main(arguments)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Learn-then-Test: " + " and ".join(rules) in captured.out
    assert "candidates certified; chosen:" in captured.out  # these bounds are within reach on the bundled set
    assert "held out over 3 stratified half splits" in captured.out
    line = next(line for line in captured.out.splitlines() if "all questions" in line and "selective_risk" in line)
    unsupported, answered = (int(value) for value in line.split("(")[1].split(")")[0].split("/"))
    if rules == ["risk_guarantee@0.3"]:
        assert answered > 0 and unsupported / answered <= 0.3  # the in-sample rate of the certified candidate
    saved = json.loads(out.read_text())
    assert "Learn-then-Test" in saved["fitted"]["certificate"]
    assert load_gate(out).type == kind.replace("-", "_")
    code = main(["fit-gate", str(scores_csv), "--out", str(out), "--gate", "chain", "--rule", "risk_guarantee@0.3",
                 "--hedge-rule", "keep@0.8", "--runs", str(runs_dir), "--queries", str(FASTAPI_QUERIES)])
    assert code != 0 and "--hedge-rule" in capsys.readouterr().err
