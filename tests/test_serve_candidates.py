"""``ragcal serve --candidates``: a gate fitted on ``score --candidates`` behind HTTP, each request bringing its list.

A real ``ragcal serve --candidates`` process on a loopback port must answer each question as
``ragcal ask --candidates --json`` does; the request checks run through FastAPI's TestClient on the same app.
"""

import json
import subprocess
import sys
import time

import pytest
from test_serve import free_port, request

from ragcal.cli import main
from ragcal.gates import read_gate_file

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

from ragcal.serve_candidates import create_candidates_app  # noqa: E402

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent / "cli"))
from test_ask_candidates import candidate_lines, write_lines  # noqa: E402


@pytest.fixture(scope="module")
def run_gate(tmp_path_factory):
    """A gate on the system's own top score (``run_top1``), fitted on the labeled candidates."""
    folder = tmp_path_factory.mktemp("serve_candidates")
    run = write_lines(folder / "run.jsonl", candidate_lines())
    scores = folder / "scores.csv"
    assert main(["score", "--candidates", str(run), "--out", str(scores)]) == 0
    gate = folder / "gate.json"
    assert main(["fit-gate", str(scores), "--out", str(gate), "--signal", "run_top1", "--rule", "keep@1.0"]) == 0
    return gate


def body_of(line: dict) -> dict:
    return {"query": line["query"], "candidates": line["passages"]}


def test_a_real_server_decides_as_ask_candidates(run_gate, tmp_path, capsys):
    lines = candidate_lines(labels=False)
    capsys.readouterr()
    assert (
        main(["ask", "--gate", str(run_gate), "--candidates", str(write_lines(tmp_path / "q.jsonl", lines)), "--json"])
        == 0
    )
    expected = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    port = free_port()
    command = [sys.executable, "-m", "ragcal", "serve", "--gate", str(run_gate), "--candidates", "--port", str(port)]
    with open(tmp_path / "server.log", "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                pytest.fail(f"ragcal serve exited {process.returncode}:\n{(tmp_path / 'server.log').read_text()}")
            try:
                if request(f"{base}/healthz", timeout=2.0)[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()
            time.sleep(0.2)
        for line, wanted in zip(lines[:3] + lines[-3:], expected[:3] + expected[-3:]):
            status, text = request(f"{base}/decide", body_of(line))
            assert status == 200, text
            assert json.loads(text) == {key: value for key, value in wanted.items() if key != "id"}
        status, text = request(f"{base}/healthz")
        assert json.loads(text)["reads"] == ["run"] and json.loads(text)["model"] is None
    finally:
        process.terminate()
        process.wait(timeout=20)
    assert "on the candidates each request brings" in (tmp_path / "server.log").read_text()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"query": " ", "candidates": []}, "query: must not be empty or only whitespace"),
        ({"query": "Why?"}, "candidates: Field required"),
        (
            {
                "query": "Why?",
                "candidates": [{"id": "a", "text": "x", "score": 1.0}, {"id": "a", "text": "y", "score": 0.5}],
            },
            "candidates: passage id(s) listed twice: a",
        ),
        (
            {
                "query": "Why?",
                "candidates": [{"id": "a", "text": "x", "score": 1.0}, {"id": "b", "text": "y", "score": 2}],
            },
            "candidates: scores must not increase down the list (best first; a distance must be negated)",
        ),
        (
            {"query": "Why?", "candidates": [{"id": "a", "text": "x", "score": 1.0}, {"id": "b", "text": "y"}]},
            "candidates: give every candidate a score, or none",
        ),
        ({"query": "Why?", "candidates": [{"id": "a", "text": "x", "rank": 1}]}, "candidates[0].rank: unknown field"),
    ],
)
def test_a_bad_request_is_a_422_that_names_the_field(run_gate, body, message):
    with TestClient(create_candidates_app(read_gate_file(run_gate))) as client:
        response = client.post("/decide", json=body)
    assert response.status_code == 422
    assert response.json()["message"].startswith(message)


def test_no_scores_for_a_gate_on_the_run_score_is_a_422_and_no_candidates_a_refusal(run_gate):
    with TestClient(create_candidates_app(read_gate_file(run_gate))) as client:
        unscored = client.post("/decide", json={"query": "Why?", "candidates": [{"id": "a", "text": "x"}]})
        nothing = client.post("/decide", json={"query": "Why?", "candidates": []})
    assert unscored.status_code == 422 and "no scores" in unscored.json()["message"]
    assert nothing.status_code == 200 and nothing.json()["action"] == "refuse"


def test_a_gate_fitted_on_an_index_is_refused(run_gate):
    document = read_gate_file(run_gate)
    with pytest.raises(ValueError, match="not fitted on candidates scored by `ragcal score --candidates`"):
        create_candidates_app({**document, "provenance": {**document["provenance"], "scoring": None}})
