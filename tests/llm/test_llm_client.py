"""The chat client, the verdicts and their files against a tiny real HTTP server written here (http.server).

The server answers ``POST /<mode>/v1/chat/completions`` the way the mode says: a valid verdict, HTTP 500, a body
that is not JSON, a message that is not JSON (cut off), or a message that breaks the schema. Nothing is mocked:
every request crosses a real socket.
"""

import json
import math
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pandas as pd
import pytest
from scipy.stats import beta

from ragcal.importers.candidates import read_candidates_jsonl
from ragcal.llm import (
    SYSTEM_PROMPT,
    ChatEndpoint,
    LLMEndpointError,
    LLMReplyError,
    chat_json,
    llm_verdicts,
    sample_questions,
    verdict_schema,
    verdict_summary,
    write_llm_signals,
    write_verdicts,
)
from ragcal.llm.abstention import verdict_messages
from ragcal.llm.client import schema_problem
from ragcal.llm.contexts import candidate_contexts


def _completion(content: str, finish_reason: str = "stop") -> bytes:
    return json.dumps(
        {
            "choices": [
                {"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", "content": content}}
            ],
            "usage": {"prompt_tokens": 40, "completion_tokens": 12},
        }
    ).encode()


class _Handler(BaseHTTPRequestHandler):
    requests: ClassVar[list] = []

    def log_message(self, *args):  # keep pytest's output clean
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append((self.path, body))
        mode = self.path.strip("/").split("/")[0]
        question = body["messages"][-1]["content"]
        if mode == "ok":
            found = "capital" in question
            payload = _completion(
                json.dumps(
                    {"found_answer": found, "answer": "Paris" if found else "", "citations": [1] if found else []}
                )
            )
        elif mode == "500":
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b"model exploded")
            return
        elif mode == "notjson":
            payload = b"<html>gateway</html>"
        elif mode == "cut":
            payload = _completion('{"found_answer": true, "answer": "Par', finish_reason="length")
        elif mode == "schema":
            payload = _completion(json.dumps({"found_answer": "yes", "answer": "", "citations": []}))
        else:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture(scope="module")
def tiny_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture()
def requests_seen():
    _Handler.requests.clear()
    return _Handler.requests


MESSAGES = verdict_messages("What is the capital of France?", ["Paris is the capital of France."])


def test_a_valid_reply_is_parsed_and_the_request_is_what_the_seeds_ask(tiny_server, requests_seen):
    reply = chat_json(
        ChatEndpoint(f"{tiny_server}/ok", "tiny"), MESSAGES, schema=verdict_schema(1), seed=7, max_tokens=50
    )
    assert reply.message == {"found_answer": True, "answer": "Paris", "citations": [1]}
    assert (reply.prompt_tokens, reply.completion_tokens) == (40, 12)
    path, body = requests_seen[0]
    assert path == "/ok/v1/chat/completions"
    assert body["model"] == "tiny" and body["temperature"] == 0 and body["seed"] == 7 and body["max_tokens"] == 50
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == verdict_schema(1)
    assert body["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert body["messages"][1]["content"] == (
        "Context:\n[1] Paris is the capital of France.\n\nQuestion: What is the capital of France?"
    )


def test_a_trailing_v1_is_not_doubled():
    assert ChatEndpoint("http://h:1/v1/", "m").chat_url == "http://h:1/v1/chat/completions"
    assert ChatEndpoint("http://h:1", "m").chat_url == "http://h:1/v1/chat/completions"
    with pytest.raises(ValueError, match="expected an http"):
        ChatEndpoint("h:1", "m")
    with pytest.raises(ValueError, match="model name is empty"):
        ChatEndpoint("http://h:1", " ")


def test_several_passages_are_numbered_and_separated_as_in_the_seeds():
    messages = verdict_messages("Q?", ["first", "second"])
    assert messages[1]["content"] == "Context:\n[1] first\n---\n[2] second\n\nQuestion: Q?"


@pytest.mark.parametrize(
    ("mode", "error", "words"),
    [
        ("500", LLMEndpointError, "HTTP 500 Internal Server Error: model exploded"),
        ("notjson", LLMReplyError, "the reply is not JSON"),
        ("cut", LLMReplyError, "the message is not JSON (cut off at max_tokens)"),
        ("schema", LLMReplyError, "does not match the schema: reply['found_answer']: expected boolean, got \"yes\""),
    ],
)
def test_each_failure_is_one_line_that_names_the_endpoint(tiny_server, mode, error, words):
    endpoint = ChatEndpoint(f"{tiny_server}/{mode}", "tiny")
    with pytest.raises(error) as raised:
        chat_json(endpoint, MESSAGES, schema=verdict_schema(1))
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"LLM endpoint {tiny_server}/{mode}/v1/chat/completions: ")
    assert words in message


def test_a_refused_connection_is_an_oserror_naming_the_endpoint():
    with socket.socket() as probe:  # a port that was free a moment ago and has no listener now
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(OSError, match=rf"LLM endpoint http://127.0.0.1:{port}/v1/chat/completions: cannot be reached"):
        chat_json(ChatEndpoint(f"http://127.0.0.1:{port}", "m", timeout=5), MESSAGES, schema=verdict_schema(1))


def test_schema_problems_are_named_by_their_place():
    schema = verdict_schema(2)
    assert schema_problem({"found_answer": False, "answer": "", "citations": [1, 2]}, schema) is None
    assert schema_problem({"found_answer": False, "answer": ""}, schema) == "reply: missing 'citations'"
    assert schema_problem({"found_answer": 1, "answer": "", "citations": []}, schema).startswith(
        "reply['found_answer']: expected boolean"
    )
    assert schema_problem({"found_answer": True, "answer": "", "citations": [3]}, schema) == (
        "reply['citations'][0]: 3 is outside [1, 2]"
    )
    assert schema_problem({"found_answer": True, "answer": "", "citations": [True]}, schema).startswith(
        "reply['citations'][0]: expected integer"
    )
    assert schema_problem({"found_answer": True, "answer": "x" * 301, "citations": []}, schema) == (
        "reply['answer']: longer than 300 characters"
    )
    assert schema_problem({"found_answer": True, "answer": "", "citations": [], "note": 1}, schema) == (
        "reply: unexpected 'note'"
    )
    assert schema_problem([], schema) == "reply: expected object, got []"


QUESTIONS = pd.DataFrame(
    {
        "id": ["q1", "q2", "q3"],
        "query": ["What is the capital of France?", "Who wrote Hamlet?", "What is the capital of Peru?"],
        "answerable": [True, False, True],
        "slice": ["answerable", "near-domain", "answerable"],
    }
)
CONTEXTS = [["Paris is the capital of France."], ["France is in Europe.", "unused"], ["Lima is in Peru."]]


def test_verdicts_are_one_row_per_question_and_the_second_call_is_served_from_the_cache(
    tiny_server, requests_seen, tmp_path
):
    cache = tmp_path / "cache"
    first = llm_verdicts(QUESTIONS, CONTEXTS, endpoint=f"{tiny_server}/ok", model="tiny", cache_dir=cache)
    assert (cache / "llm_verdicts.sqlite").is_file()
    assert len(requests_seen) == 3
    assert first["id"].tolist() == ["q1", "q2", "q3"]
    assert first["found_answer"].tolist() == [1.0, 0.0, 1.0]
    assert first["citations"].tolist() == [(1,), (), (1,)]
    assert first["prompt_tokens"].tolist() == [40.0, 40.0, 40.0]
    assert not first["cached"].any()
    # k=1: the second passage of q2 is not shown
    assert "unused" not in requests_seen[1][1]["messages"][1]["content"]
    second = llm_verdicts(QUESTIONS, CONTEXTS, endpoint=f"{tiny_server}/ok", model="tiny", cache_dir=cache)
    assert len(requests_seen) == 3  # no new request
    assert second["cached"].all()
    columns = ["id", "found_answer", "answer", "citations", "seconds"]
    pd.testing.assert_frame_equal(first[columns], second[columns])
    # another k is another request (another prompt and schema), so the model is asked again
    llm_verdicts(QUESTIONS, CONTEXTS, endpoint=f"{tiny_server}/ok", model="tiny", cache_dir=cache, k=2)
    assert len(requests_seen) == 6
    assert "[2] unused" in requests_seen[4][1]["messages"][1]["content"]
    # the endpoint's address is not part of the key: the same model behind another port hits the cache
    moved = ChatEndpoint(f"{tiny_server.replace('127.0.0.1', 'localhost')}/ok", "tiny")
    assert llm_verdicts(QUESTIONS, CONTEXTS, endpoint=moved, cache_dir=cache)["cached"].all()
    # another model file under the same name is not
    other_file = ChatEndpoint(f"{tiny_server}/ok", "tiny", model_sha256="ab" * 32)
    assert not llm_verdicts(QUESTIONS, CONTEXTS, endpoint=other_file, cache_dir=cache)["cached"].any()


def test_cache_path_is_the_deprecated_file_form_of_cache_dir(tiny_server, tmp_path):
    with pytest.warns(DeprecationWarning, match=r"llm_verdicts\(cache_path=\) is deprecated: pass cache_dir="):
        llm_verdicts(QUESTIONS, CONTEXTS, endpoint=f"{tiny_server}/ok", model="tiny", cache_path=tmp_path / "v.sqlite")
    assert (tmp_path / "v.sqlite").is_file()
    assert llm_verdicts(QUESTIONS, CONTEXTS, endpoint=f"{tiny_server}/ok", model="tiny", cache_dir=tmp_path)[
        "cached"
    ].tolist() == [False] * 3  # the folder's own file, not the one passed as cache_path


def test_an_unparseable_reply_is_a_nan_verdict_with_its_reason_not_a_crash(tiny_server, tmp_path):
    verdicts = llm_verdicts(QUESTIONS, CONTEXTS, endpoint=f"{tiny_server}/schema", model="tiny", use_cache=False)
    assert verdicts["found_answer"].isna().all()
    assert verdicts["error"].str.contains("does not match the schema").all()
    summary = verdict_summary(verdicts, QUESTIONS)
    assert summary.set_index("group").loc["all", "unparseable"] == 3
    assert math.isnan(summary.set_index("group").loc["all", "found_rate"])


def test_an_endpoint_that_fails_stops_the_run_with_its_error(tiny_server):
    with pytest.raises(LLMEndpointError, match="HTTP 500"):
        llm_verdicts(QUESTIONS, CONTEXTS, endpoint=f"{tiny_server}/500", model="tiny", use_cache=False)


def test_bad_arguments_get_clear_errors(tiny_server):
    with pytest.raises(ValueError, match="give the model name"):
        llm_verdicts(QUESTIONS, CONTEXTS, endpoint=tiny_server)
    with pytest.raises(ValueError, match="2 contexts for 3 questions"):
        llm_verdicts(QUESTIONS, CONTEXTS[:2], endpoint=tiny_server, model="m")
    with pytest.raises(ValueError, match="duplicate ids 'q1'"):
        llm_verdicts(pd.concat([QUESTIONS, QUESTIONS]), CONTEXTS * 2, endpoint=tiny_server, model="m")
    with pytest.raises(ValueError, match="The 'k' parameter of llm_verdicts must be"):
        llm_verdicts(QUESTIONS, CONTEXTS, endpoint=tiny_server, model="m", k=0)


def test_the_summary_counts_per_slice_with_exact_intervals():
    verdicts = pd.DataFrame(
        {
            "id": ["q1", "q2", "q3", "q4"],
            "found_answer": [1.0, 0.0, math.nan, 1.0],
            "seconds": [1.0, 2.0, 3.0, 6.0],
            "cached": [False, True, False, False],
        }
    )
    questions = pd.DataFrame(
        {"id": ["q1", "q2", "q3", "q4"], "slice": ["a", "a", "a", "b"], "answerable": [1, 1, 1, 0]}
    )
    summary = verdict_summary(verdicts, questions).set_index("group")
    assert summary.index.tolist() == ["a", "b", "all"]
    assert summary.loc["a", ["questions", "found", "not_found", "unparseable", "cached"]].tolist() == [3, 1, 1, 1, 1]
    assert summary.loc["a", "found_rate"] == 1 / 2  # over the two parseable replies
    assert summary.loc["a", "found_rate_low"] == pytest.approx(beta.ppf(0.025, 1, 2))
    assert summary.loc["a", "found_rate_high"] == pytest.approx(beta.ppf(0.975, 2, 1))
    assert summary.loc["b", ["found_rate", "found_rate_low"]].tolist() == [1.0, pytest.approx(beta.ppf(0.025, 1, 1))]
    assert summary.loc["b", "found_rate_high"] == 1.0
    assert summary.loc["all", "seconds_mean"] == 3.0
    by_label = verdict_summary(verdicts, questions, by="answerable").set_index("group")
    assert by_label.loc["1", "questions"] == 3
    with pytest.raises(ValueError, match="not among the questions, e.g. 'q4'"):
        verdict_summary(verdicts, questions.iloc[:3])


def test_the_signal_file_is_wide_or_long_with_an_empty_cell_for_unparseable(tmp_path):
    verdicts = pd.DataFrame(
        {
            "id": ["q1", "q2", "q3"],
            "found_answer": [1.0, 0.0, math.nan],
            "answer": ["a, b", "", ""],
            "citations": [(1, 2), (), ()],
            "seconds": [0.5, 0.25, 1.0],
        }
    )
    wide = write_llm_signals(verdicts, tmp_path / "wide.csv")
    assert wide.read_text() == "id,llm_found_answer\nq1,1\nq2,0\nq3,\n"
    long = write_llm_signals(verdicts, tmp_path / "long.csv", layout="long")
    assert long.read_text() == (
        "id,name,value,direction\nq1,llm_found_answer,1,higher\nq2,llm_found_answer,0,higher\n"
        "q3,llm_found_answer,,higher\n"
    )
    # The long file declares its direction: joining it infers nothing from labels, even for a useless verdict.
    from ragcal.signals.logged import read_logged_signals

    assert read_logged_signals(long).directions == {"llm_found_answer": "higher"}
    details = pd.read_csv(write_verdicts(verdicts, tmp_path / "details.csv"), keep_default_na=False)
    assert details["citations"].tolist() == ["1;2", "", ""]
    assert details["answer"].tolist() == ["a, b", "", ""]
    with pytest.raises(ValueError, match="'layout' parameter of write_llm_signals"):
        write_llm_signals(verdicts, tmp_path / "x.csv", layout="tall")
    assert not (tmp_path / "x.csv").exists()


def test_a_stratified_sample_keeps_each_slice_in_proportion_and_file_order():
    questions = pd.DataFrame({"id": [f"q{n}" for n in range(100)], "slice": ["a"] * 60 + ["b"] * 30 + ["c"] * 10})
    sample = sample_questions(questions, 10, random_state=3)
    assert sample["slice"].value_counts().to_dict() == {"a": 6, "b": 3, "c": 1}
    assert sample.index.is_monotonic_increasing
    assert sample.equals(sample_questions(questions, 10, random_state=3))
    assert sample_questions(questions, 500) is questions
    tiny = pd.DataFrame({"id": ["x", "y", "z"], "slice": ["a", "a", "rare"]})
    assert "rare" in set(sample_questions(tiny, 1)["slice"])  # every slice keeps at least one question


def test_candidate_contexts_are_the_first_k_passages_with_their_titles(tmp_path):
    path = tmp_path / "candidates.jsonl"
    lines = [
        {
            "id": "q1",
            "query": "Q1?",
            "answerable": True,
            "passages": [{"id": "p1", "title": "Paris", "text": "Paris is in France."}, {"id": "p2", "text": "Other."}],
        },
        {"id": "q2", "query": "Q2?", "answerable": False, "passages": []},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    candidates = read_candidates_jsonl(path)
    questions = pd.DataFrame({"id": ["q2", "q1"], "query": ["Q2?", "Q1?"]})
    assert candidate_contexts(questions, candidates, k=1) == [[], ["Paris\n\nParis is in France."]]
    assert candidate_contexts(questions, candidates, k=5)[1] == ["Paris\n\nParis is in France.", "Other."]
    with pytest.raises(ValueError, match=r"candidates.jsonl: 1 question ids are not in the candidates file, e.g. 'q9'"):
        candidate_contexts(pd.DataFrame({"id": ["q9"], "query": ["?"]}), candidates)
