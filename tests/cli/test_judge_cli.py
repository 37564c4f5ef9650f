"""End to end: ``ragcal train-judge``, ``score --judge``, ``fit-gate`` on a judge signal, ``ask`` with and without it.

The judges are fine-tuned from a tiny random cross-encoder (``--base-model``), so
training takes seconds; their scores say nothing about relevance, but every
file, provenance record and refusal is the real one.
"""

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import write
from labeled_queries import QUERIES

from ragcal.cli import main
from ragcal.gates import GateFileError, load_gate
from ragcal.judges import JUDGE, TrainedJudge, corpus_judge_pairs, question_key
from ragcal.retrieval.index import build_index, chunk_corpus
from ragcal.retrieval.rerank import build_tiny_cross_encoder
from ragcal.signals.judge import ANSWERS_AT

#: Questions the judges are trained on: none of them is in QUERIES, which the judges then score.
TRAINING = """id,query,answerable,slice,gold
t1,How do I set a cookie on a response?,true,answerable,advanced/response-cookies.md
t2,How do I allow cross-origin requests from a frontend?,true,answerable,tutorial/cors.md
t3,How do I run a task after returning a response?,true,answerable,tutorial/background-tasks.md
t4,How do I receive uploaded files?,true,answerable,tutorial/request-files.md
t5,How do I build a Docker image for my app?,true,answerable,deployment/docker.md
t6,How do I read the current user from a token?,true,answerable,tutorial/security/get-current-user.md
t7,How long should I boil an egg?,false,unrelated,
t8,Who won the 1998 football world cup?,false,unrelated,
t9,How do I configure a GraphQL subscription server?,false,near-domain,
"""
JUDGE_COLUMNS = ["judge_top1", "judge_mass", "judge_at_dense_top1", "judge_gap"]


def train_judge_command(workspace, out, seed, *extra) -> list:
    """``ragcal train-judge`` on the training questions, from the tiny base model."""
    return ["train-judge", str(workspace.root / "train.csv"), "--corpus", str(workspace.corpus), "--out", str(out),
            "--base-model", str(workspace.root / "tiny"), "--cache-dir", str(workspace.cache), "--epochs", "2",
            "--batch-size", "4", "--seed", str(seed), *extra]


def train(workspace, out, seed, capsys, *extra):
    code = main(train_judge_command(workspace, out, seed, *extra))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured


@pytest.fixture(scope="module")
def workspace(fastapi_slice, tmp_path_factory, embedder):
    """A folder with the labeled sets and the tiny base model; the corpus and the embedding cache of the run."""
    root = tmp_path_factory.mktemp("judge_cli")
    write(root / "train.csv", TRAINING)
    write(root / "queries.csv", QUERIES)
    build_tiny_cross_encoder(root / "tiny")
    return SimpleNamespace(root=root, corpus=fastapi_slice, cache=embedder.cache_dir)


@pytest.fixture(scope="module")
def trained(workspace):
    """Two judges (seeds 0 and 1), a score table with the first, and a gate on its judge_top1."""
    root = workspace.root
    for name, seed in (("judge", 0), ("other", 1)):
        assert main(train_judge_command(workspace, root / name, seed)) == 0
    code = main(
        ["score", str(root / "queries.csv"), "--corpus", str(workspace.corpus), "--out", str(root / "scores.csv"),
         "--runs", str(root / "runs"), "--cache-dir", str(workspace.cache), "--judge", str(root / "judge")]
    )
    assert code == 0
    code = main(
        ["fit-gate", str(root / "scores.csv"), "--signal", "judge_top1", "--rule", "keep@0.5", "--out",
         str(root / "gate.json")]
    )
    assert code == 0
    return workspace


def test_train_judge_writes_the_folder_and_prints_its_summary(workspace, capsys):
    out = workspace.root / "summary_judge"
    captured = train(workspace, out, 0, capsys)
    assert {"judge.json", "training.csv", "model.safetensors", "config.json"} <= {path.name for path in out.iterdir()}
    description = json.loads((out / "judge.json").read_text())
    pairs = corpus_judge_pairs(workspace.root / "train.csv", workspace.corpus, cache_dir=workspace.cache)
    # Every pair built from the dense lists is either trained on or held out for the validation loss.
    assert description["n_pairs"] + description["n_validation_pairs"] == len(pairs)
    assert set(pairs["label"]) == {0, 1} and set(pairs["id"]) == {f"t{n}" for n in range(1, 10)}
    training_keys = {question_key(query) for query in pd.read_csv(workspace.root / "train.csv")["query"]}
    assert set(description["trained_on"]) < training_keys  # the validation questions are not trained on
    assert description["n_questions"] == len(description["trained_on"])
    curve = pd.read_csv(out / "training.csv")
    validation = curve["validation_loss"].dropna()
    assert len(validation) == 3  # before training and after each of the two epochs
    lines = captured.out.splitlines()
    assert lines[0].startswith(
        f"trained a judge on {description['n_pairs']} pairs ({description['n_positive']} answering) of "
        f"{description['n_questions']} questions in "
    )
    assert f"validation loss {validation.iloc[0]:.3f} -> {validation.iloc[-1]:.3f}" in lines[1]
    assert lines[2].startswith("validation AUC ") and lines[2].endswith(f": {description['verdict']}")
    # Nine questions, a tenth held out: too few validation pairs to calibrate, and it says so.
    assert description["calibration"] is None
    assert lines[3] == "not calibrated (fewer than 10 validation pairs of a class): its scores are the raw sigmoid"
    assert lines[4].startswith(f"wrote {out} (judge.json, training.csv, weights); fingerprint ")
    assert TrainedJudge(out, use_cache=False).fingerprint in lines[4]
    assert "train-judge" in captured.err  # the progress bar


def test_train_judge_replaces_a_judge_folder(workspace, capsys):
    out = workspace.root / "replaced"
    train(workspace, out, 0, capsys)
    first = TrainedJudge(out, use_cache=False).fingerprint
    train(workspace, out, 1, capsys, "--epochs", "1")
    assert TrainedJudge(out, use_cache=False).fingerprint != first
    assert json.loads((out / "judge.json").read_text())["training"]["epochs"] == 1
    assert sorted(path.name for path in workspace.root.iterdir() if path.name.startswith(".")) == []


def test_score_with_a_judge_adds_its_signals_and_records_it(trained):
    table = pd.read_csv(trained.root / "scores.csv")
    assert list(table.columns[-4:]) == JUDGE_COLUMNS
    meta = json.loads((trained.root / "scores.meta.json").read_text())
    judge = TrainedJudge(trained.root / "judge", use_cache=False)
    assert meta["judge"] == str(trained.root / "judge")
    assert meta["judge_fingerprint"] == judge.fingerprint and meta["judge_depth"] == 10
    # The formulas, from the dense run and the chunk texts, with the judge scored here afresh.
    run = pd.read_csv(trained.root / "runs" / "dense.run", sep=" ", header=None,
                      names=["qid", "q0", "docid", "rank", "score", "tag"])
    texts = {chunk.chunk_id: chunk.text for chunk in chunk_corpus(trained.corpus)[1]}
    for row in table.itertuples():
        top = run[run["qid"] == row.id].sort_values("rank")["docid"].head(10).tolist()
        probabilities = judge.score([row.query] * len(top), [texts[chunk_id] for chunk_id in top])
        ordered = np.sort(probabilities)[::-1]
        assert row.judge_top1 == pytest.approx(ordered[0], abs=1e-6)
        assert row.judge_gap == pytest.approx(ordered[0] - ordered[1], abs=1e-6)
        assert row.judge_at_dense_top1 == pytest.approx(probabilities[0], abs=1e-6)
        assert row.judge_mass == pytest.approx(np.mean(probabilities >= ANSWERS_AT), abs=1e-9)


def test_scoring_the_questions_a_judge_was_trained_on_is_refused(trained, tmp_path, capsys):
    out = tmp_path / "out" / "scores.csv"
    code = main(["score", str(trained.root / "train.csv"), "--corpus", str(trained.corpus), "--out", str(out),
                 "--cache-dir", str(trained.cache), "--judge", str(trained.root / "judge")])
    assert code == 2
    error = capsys.readouterr().err
    assert error.startswith("ragcal: error: judge 'judge' was trained on ") and "of the questions" in error
    assert not (tmp_path / "out").exists()


def test_a_gate_on_judge_top1_answers_with_the_passages_the_judge_accepts(trained, capsys):
    gate = json.loads((trained.root / "gate.json").read_text())
    assert gate["gate"]["signal"] == "judge_top1"
    assert gate["provenance"]["judge_fingerprint"] == TrainedJudge(trained.root / "judge", use_cache=False).fingerprint
    threshold = gate["gate"]["threshold"]
    code = main(["ask", "--gate", str(trained.root / "gate.json"), "--queries", str(trained.root / "queries.csv"),
                 "--json",
                 "--cache-dir", str(trained.cache)])
    assert code == 0
    decisions = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    table = pd.read_csv(trained.root / "scores.csv").set_index("id")
    assert [decision["id"] for decision in decisions] == list(table.index)
    for decision in decisions:
        assert decision["score"] == pytest.approx(table.loc[decision["id"], "judge_top1"], abs=1e-6)
        if decision["score"] >= threshold:
            assert decision["action"] == "answer"
            scores = [passage["score"] for passage in decision["passages"]]
            assert scores and min(scores) >= threshold and scores == sorted(scores, reverse=True)
        else:
            assert decision["action"] == "refuse" and decision["passages"] == []
    assert {decision["action"] for decision in decisions} == {"answer", "refuse"}


@pytest.mark.parametrize(
    "options, message",
    [
        (["--judge", "other"], "a threshold on another judge's scale is wrong: pass the gate's --judge, or fit again"),
        (["--judge-depth", "5"], "fitted over the top 10 passages but the index's judge reads 5"),
    ],
)
def test_ask_with_another_judge_is_refused(trained, capsys, options, message):
    options = [str(trained.root / option) if option == "other" else option for option in options]
    code = main(["ask", "How do I set a cookie?", "--gate", str(trained.root / "gate.json"),
                 "--cache-dir", str(trained.cache), *options])
    assert code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines()[-1].startswith(f"ragcal: error: {trained.root / 'gate.json'}: ")
    assert message in captured.err


def test_a_judge_gate_on_an_index_without_a_judge_is_refused(trained):
    index = build_index(trained.corpus, cache_dir=trained.cache)
    assert JUDGE not in index.retriever_names
    with pytest.raises(GateFileError, match="but the index uses no judge; a threshold on another judge's scale"):
        load_gate(trained.root / "gate.json", index=index)


def test_a_missing_query_file_is_named_and_nothing_is_written(workspace, tmp_path, capsys):
    out = tmp_path / "judge"
    code = main(["train-judge", str(tmp_path / "missing.csv"), "--corpus", str(workspace.corpus), "--out", str(out),
                 "--base-model", str(workspace.root / "tiny"), "--cache-dir", str(workspace.cache)])
    assert code == 2
    assert capsys.readouterr().err == f"ragcal: error: {tmp_path / 'missing.csv'}: query file not found\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_an_out_that_is_not_a_judge_folder_is_refused_and_kept(workspace, tmp_path, capsys, kind):
    out = tmp_path / "results"
    if kind == "file":
        write(out, "mine\n")
    else:
        write(out / "notes.txt", "mine\n")
    before = sorted(path.relative_to(tmp_path) for path in tmp_path.rglob("*"))
    code = main(["train-judge", str(workspace.root / "train.csv"), "--corpus", str(workspace.corpus), "--out", str(out),
                 "--base-model", str(workspace.root / "tiny"), "--cache-dir", str(workspace.cache)])
    assert code == 2
    assert capsys.readouterr().err == (
        f"ragcal: error: {out}: exists and is not a judge folder; choose another --out\n"
    )
    assert sorted(path.relative_to(tmp_path) for path in tmp_path.rglob("*")) == before
    assert (out if kind == "file" else out / "notes.txt").read_text() == "mine\n"


def test_judge_depth_without_a_judge_is_refused(workspace, tmp_path, capsys):
    code = main(["score", str(workspace.root / "queries.csv"), "--corpus", str(workspace.corpus), "--out",
                 str(tmp_path / "scores.csv"), "--judge-depth", "5"])
    assert code == 2
    assert capsys.readouterr().err == "ragcal: error: --judge-depth needs a judge: pass --judge PATH_OR_NAME\n"
    assert list(tmp_path.iterdir()) == []


def test_candidates_train_a_judge_and_score_with_it(workspace, tmp_path, capsys):
    """``--candidates FILE.jsonl``: pairs from the candidates' dense list; ``score --candidates --judge`` too."""

    def record(query_id, query, answerable, passages):
        listed = [{"id": pid, "text": text, **({} if answers is None else {"answers": answers})}
                  for pid, text, answers in passages]
        return json.dumps({"id": query_id, "query": query, "answerable": answerable, "passages": listed})

    cookie = ("p1", "Set a cookie with response.set_cookie(key, value) on the Response.")
    cors = ("p2", "CORSMiddleware allows browser frontends on other origins to call the API.")
    docker = ("p3", "Build a Docker image with a Dockerfile that copies the app and runs uvicorn.")
    training = [
        record("a1", "How do I set a cookie?", True, [(*cookie, True), (*docker, False)]),
        record("a2", "How do I allow other origins?", True, [(*docker, False), (*cors, True)]),
        record("a3", "How do I ship my app in a container?", True, [(*cookie, False), (*docker, True)]),
        record("u1", "How long do I boil an egg?", False, [(*cookie, False), (*docker, False)]),
        record("u2", "Who won the world cup?", False, [(*cors, False)]),
        record("a4", "How do I log requests?", True, [(*cors, None)]),  # answerable, nothing marked: left out
    ]
    write(tmp_path / "train.jsonl", "\n".join(training) + "\n")
    scored = [record("s1", "Which call puts a cookie in the response?", True, [(*cookie, True), (*cors, False)]),
              record("s2", "What is the capital of Peru?", False, [(*docker, False)])]
    write(tmp_path / "score.jsonl", "\n".join(scored) + "\n")
    code = main(["train-judge", "--candidates", str(tmp_path / "train.jsonl"), "--out", str(tmp_path / "judge"),
                 "--base-model", str(workspace.root / "tiny"), "--cache-dir", str(workspace.cache), "--epochs", "1"])
    assert code == 0, capsys.readouterr().err
    description = json.loads((tmp_path / "judge" / "judge.json").read_text())
    # a1, a2, a3: their gold passage and the other one; u1: its 2 passages; u2: its one; a4: none.
    assert description["n_pairs"] + description["n_validation_pairs"] == 2 + 2 + 2 + 2 + 1
    code = main(["score", "--candidates", str(tmp_path / "score.jsonl"), "--out", str(tmp_path / "scores.csv"),
                 "--cache-dir", str(workspace.cache), "--judge", str(tmp_path / "judge")])
    assert code == 0, capsys.readouterr().err
    table = pd.read_csv(tmp_path / "scores.csv")
    assert list(table.columns[-4:]) == JUDGE_COLUMNS
    assert table[JUDGE_COLUMNS[:3]].notna().all().all()
    assert table["judge_gap"].notna().tolist() == [True, False]  # s2 has one passage: no second best
    assert (table["judge_top1"] == table["judge_at_dense_top1"]).iloc[1]
    meta = json.loads((tmp_path / "scores.meta.json").read_text())
    assert meta["judge_fingerprint"] == TrainedJudge(tmp_path / "judge", use_cache=False).fingerprint
    assert not any(name.startswith("judge_") for name in meta["signals_left_out"])


def test_ask_decides_on_a_question_the_judge_was_trained_on_while_score_refuses_to_measure_it(trained, capsys):
    """Deciding is not measuring: a deployed gate may meet a training question; a score table may not hold one."""
    code = main(["ask", "How do I set a cookie on a response?", "--gate", str(trained.root / "gate.json"), "--json",
                 "--cache-dir", str(trained.cache)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    [decision] = [json.loads(line) for line in captured.out.splitlines()]
    assert decision["action"] in ("answer", "refuse")
    code = main(["score", str(trained.root / "train.csv"), "--corpus", str(trained.corpus), "--out",
                 str(trained.root / "leak.csv"), "--cache-dir", str(trained.cache), "--judge", str(trained.root / "judge")])
    assert code == 2
    assert "was trained on" in capsys.readouterr().err
    assert not (trained.root / "leak.csv").exists()
