"""LLMJudge: reply parsing on hand-written replies, and the judge against the real local server (SmolLM2, xllamacpp).

SmolLM2-135M is weak: the server tests check that what the judge returns is well formed, in order, cached and
grouped as documented, not that it is right. They make six requests in all (about 2 to 15 s each on two shared
cores).
"""

import math
import socket

import numpy as np
import pytest

from ragcal.judges import Judge, LLMJudge, judge_results
from ragcal.judges.llm import LIST_PROMPT, PASSAGE_PROMPT, graded_probability, judge_messages, reply_probabilities
from ragcal.llm import ChatEndpoint, LLMEndpointError, LocalLLMServer, VerdictCache
from ragcal.retrieval.base import RetrievalResult

FRANCE = "What is the capital of France?"
HAMLET = "Who wrote Hamlet?"
PARIS = "Paris is the capital and largest city of France."
DENMARK = "Denmark is a Nordic country in Northern Europe."
SHAKESPEARE = "Hamlet is a tragedy written by William Shakespeare."
MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _closed_port() -> int:
    """A loopback port nothing listens on: bound by the system, then released."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _dead_endpoint(like: ChatEndpoint | None = None) -> ChatEndpoint:
    """An endpoint on a closed port; with ``like``, the same model fingerprint (so the same cache keys)."""
    url = f"http://127.0.0.1:{_closed_port()}"
    if like is None:
        return ChatEndpoint(url, MODEL, timeout=5)
    return ChatEndpoint(url, like.model, model_sha256=like.model_sha256, settings=like.settings, timeout=5)


# --- reply parsing, no server -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"answers": true}', [1.0]),
        ('{"answers":false}', [0.0]),
        ({"answers": True}, [1.0]),
        ('{"answers": "yes"}', [math.nan]),  # a string, not a boolean
        ('{"answers": 1}', [math.nan]),
        ('{"answer": true}', [math.nan]),  # wrong field
        ('{"answers": true, "why": "it says so"}', [math.nan]),  # an extra field
        ('{"answers": tr', [math.nan]),  # cut off at max_tokens
        ("Yes, the passage answers it.", [math.nan]),  # not JSON
        ("[true]", [math.nan]),
        (None, [math.nan]),
    ],
)
def test_a_passage_reply_is_one_zero_or_nan(reply, expected):
    probabilities = reply_probabilities(reply, mode="passage")
    assert probabilities.dtype == np.float64
    np.testing.assert_array_equal(probabilities, expected)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"answering": [2]}', [0.0, 1.0, 0.0]),
        ('{"answering": [3, 1]}', [1.0, 0.0, 1.0]),
        ('{"answering": []}', [0.0, 0.0, 0.0]),
        ('{"answering": [1, 2, 3]}', [1.0, 1.0, 1.0]),
        ('{"answering": [4]}', [math.nan] * 3),  # out of range: the model misnumbered, nothing is trusted
        ('{"answering": [0]}', [math.nan] * 3),
        ('{"answering": [1, 2, 3, 1]}', [math.nan] * 3),  # more numbers than passages
        ('{"answering": [true]}', [math.nan] * 3),  # a boolean is no number
        ('{"answering": [1.5]}', [math.nan] * 3),
        ('{"answering": 2}', [math.nan] * 3),
        ('{"answers": true}', [math.nan] * 3),
        ("passages 1 and 2", [math.nan] * 3),
    ],
)
def test_a_list_reply_marks_the_listed_numbers_and_nothing_out_of_range(reply, expected):
    np.testing.assert_array_equal(reply_probabilities(reply, mode="list", n_passages=3), expected)


def _token(text, alternatives=()):
    return {
        "token": text,
        "logprob": 0.0,
        "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in alternatives],
    }


def test_graded_probability_is_the_true_mass_over_true_plus_false_at_the_verdict_token():
    # The alternatives as llama.cpp gives them at the verdict: with and without a leading space; others ignored.
    verdict = _token("false", [("false", 0.5), ("true", 0.25), (" false", 0.15), (" true", 0.05), ("[", 0.05)])
    tokens = [_token('{"'), _token("answers"), _token('":'), verdict, _token("}"), _token("\n")]
    assert graded_probability(tokens) == pytest.approx((0.25 + 0.05) / (0.5 + 0.25 + 0.15 + 0.05))
    # The verdict inside a longer token: alternatives are read after the same prefix (': ').
    merged = [_token('{"answers"'), _token(": true", [(": true", 0.3), (": false", 0.1), ("}", 0.6)]), _token("}")]
    assert graded_probability(merged) == pytest.approx(0.3 / 0.4)
    # A space token first: the verdict starts at the next token.
    spaced = [_token('{"answers":'), _token(" "), _token("true", [("true", 0.2), ("false", 0.2)]), _token("}")]
    assert graded_probability(spaced) == pytest.approx(0.5)


def test_graded_probability_is_none_without_a_verdict_or_its_alternatives():
    assert graded_probability(None) is None
    assert graded_probability([_token('{"answering": [1]}')]) is None
    assert graded_probability([_token('{"answers":'), _token("true", [("yes", 0.9)]), _token("}")]) is None
    assert graded_probability([_token('{"answers":'), {"logprob": 0.0}]) is None


def test_messages_number_the_passages_in_list_mode():
    messages = judge_messages("Q?", ["first", "second"], mode="list", instructions=LIST_PROMPT)
    assert messages[0] == {"role": "system", "content": LIST_PROMPT}
    assert "[1] first\n---\n[2] second" in messages[1]["content"] and messages[1]["content"].count("Q?") == 1
    single = judge_messages("Q?", ["only"], mode="passage", instructions=PASSAGE_PROMPT)
    assert "Passage:\nonly" in single[1]["content"]


# --- the judge object, no server ----------------------------------------------------------------------------------


def test_the_fingerprint_changes_with_model_prompt_mode_and_decoding_but_not_the_address():
    endpoint = ChatEndpoint("http://127.0.0.1:1", MODEL, model_sha256="ab" * 32)
    base = LLMJudge(endpoint)
    assert isinstance(base, Judge) and base.trained_on == frozenset()
    assert base.fingerprint.startswith(f"llm:{MODEL}@{'ab' * 6}/passage/prompt-")
    assert LLMJudge(ChatEndpoint("http://10.0.0.1:9", MODEL, model_sha256="ab" * 32)).fingerprint == base.fingerprint
    others = [
        LLMJudge(endpoint, mode="list"),
        LLMJudge(endpoint, instructions=PASSAGE_PROMPT + " Be strict."),
        LLMJudge(endpoint, seed=1),
        LLMJudge(endpoint, max_tokens=50),
        LLMJudge(endpoint, max_passage_chars=400),
        LLMJudge(endpoint, graded=False),
        LLMJudge(ChatEndpoint("http://127.0.0.1:1", "other.gguf", model_sha256="ab" * 32)),
        LLMJudge(ChatEndpoint("http://127.0.0.1:1", MODEL, model_sha256="cd" * 32)),
    ]
    fingerprints = [judge.fingerprint for judge in others]
    assert base.fingerprint not in fingerprints and len(set(fingerprints)) == len(fingerprints)
    assert LLMJudge(endpoint, mode="list").prompt_sha256() != base.prompt_sha256()
    # graded means nothing in list mode: not in its fingerprint
    assert LLMJudge(endpoint, mode="list", graded=False).fingerprint == others[0].fingerprint
    assert base.to_dict() == {
        "judge": f"llm-passage:{MODEL}",
        "judge_fingerprint": base.fingerprint,
        "judge_endpoint": "http://127.0.0.1:1",
        "judge_mode": "passage",
    }


def test_bad_construction_is_one_clear_error():
    with pytest.raises(ValueError, match="give the model name"):
        LLMJudge("http://127.0.0.1:1")
    with pytest.raises(TypeError, match="ChatEndpoint or a URL"):
        LLMJudge(42)
    with pytest.raises(ValueError, match="'mode' parameter of LLMJudge"):
        LLMJudge("http://127.0.0.1:1", model=MODEL, mode="pairs")
    with pytest.raises(ValueError, match="'max_passage_chars' parameter of LLMJudge"):
        LLMJudge("http://127.0.0.1:1", model=MODEL, max_passage_chars=0)
    with pytest.raises(ValueError, match="instructions"):
        LLMJudge("http://127.0.0.1:1", model=MODEL, instructions=" ")
    assert LLMJudge("http://127.0.0.1:1", model=MODEL).endpoint == ChatEndpoint("http://127.0.0.1:1", MODEL)


def test_bad_pairs_are_refused_before_any_request(tmp_path):
    judge = LLMJudge(_dead_endpoint(), cache_dir=tmp_path)
    with pytest.raises(ValueError, match="2 questions but 1 passages"):
        judge.score([FRANCE, HAMLET], [PARIS])
    with pytest.raises(TypeError, match="not one str"):
        judge.score(FRANCE, [PARIS])
    with pytest.raises(TypeError, match="not one str"):
        judge.score([FRANCE], PARIS)
    empty = judge.score([], [])
    assert empty.shape == (0,) and empty.dtype == np.float64 and judge.last_stats["requests"] == 0


def test_an_unreachable_endpoint_is_one_error_naming_its_url_and_caches_nothing(tmp_path):
    endpoint = _dead_endpoint()
    judge = LLMJudge(endpoint, cache_dir=tmp_path)
    with pytest.raises(LLMEndpointError, match=f"{endpoint.chat_url}: cannot be reached"):
        judge.score([FRANCE], [PARIS])
    with pytest.raises(LLMEndpointError, match=f"{endpoint.chat_url}: cannot be reached"):
        LLMJudge(endpoint, mode="list", use_cache=False).score([FRANCE, FRANCE], [PARIS, DENMARK])
    assert judge.last_stats["asked"] == 0
    with VerdictCache(tmp_path / "llm_verdicts.sqlite") as cache:
        assert len(cache) == 0


class _FixedJudge:
    """A judge whose probabilities are given: what judge_results does with an unreadable (NaN) verdict."""

    name, fingerprint, trained_on = "fixed", "fixed", frozenset()

    def __init__(self, probabilities):
        self.probabilities = np.asarray(probabilities, dtype=np.float64)

    def score(self, questions, passages):
        return self.probabilities


def test_judge_results_sort_an_unreadable_verdict_after_every_judged_passage():
    listed = RetrievalResult("dense", ("a", "b", "c"), np.array([0.9, 0.8, 0.7]))
    texts = {"a": "A", "b": "B", "c": "C"}
    (result,) = judge_results(_FixedJudge([math.nan, 0.2, 0.6]), [FRANCE], [listed], texts)
    assert result.chunk_ids == ("c", "b", "a")
    np.testing.assert_array_equal(result.scores, [0.6, 0.2, math.nan])
    assert math.isnan(result.info["judge_at_first"])


# --- against the real local server --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local_server():
    server = LocalLLMServer(threads=2, seed=0)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("llm_judge_cache")


def _well_formed(probabilities, n_pairs):
    assert probabilities.dtype == np.float64 and probabilities.shape == (n_pairs,)
    finite = probabilities[~np.isnan(probabilities)]
    assert ((finite >= 0.0) & (finite <= 1.0)).all()


def test_passage_mode_grades_each_pair_then_the_cache_answers_without_the_server(local_server, cache_dir):
    judge = LLMJudge(local_server.endpoint, cache_dir=cache_dir, max_passage_chars=len(PARIS))
    first = judge.score([FRANCE, HAMLET], [PARIS, DENMARK])  # two requests
    _well_formed(first, 2)
    stats = judge.last_stats
    assert (stats["requests"], stats["asked"], stats["cached"]) == (2, 2, 0)
    assert stats["unreadable"] == int(np.isnan(first).sum())
    # The local server returns token logprobs: every readable verdict is graded, strictly between 0 and 1.
    assert stats["graded"] == 2 - stats["unreadable"]
    graded = first[~np.isnan(first)]
    assert ((graded > 0.0) & (graded < 1.0)).all()
    assert stats["seconds"] > 0
    # Same pairs, in the other order, and a passage longer than max_passage_chars but equal up to it: all cached.
    again = judge.score([HAMLET, FRANCE, FRANCE], [DENMARK, PARIS, PARIS + " It lies on the Seine."])
    np.testing.assert_array_equal(again, [first[1], first[0], first[0]])
    assert (judge.last_stats["asked"], judge.last_stats["cached"]) == (0, 3)
    # A judge on a dead address with the same model fingerprint needs no server at all.
    offline = LLMJudge(_dead_endpoint(local_server.endpoint), cache_dir=cache_dir, max_passage_chars=len(PARIS))
    assert offline.fingerprint == judge.fingerprint
    np.testing.assert_array_equal(offline.score([FRANCE, HAMLET], [PARIS, DENMARK]), first)
    assert offline.last_stats["asked"] == 0


def test_passage_mode_without_grading_is_zero_or_one(local_server, cache_dir):
    judge = LLMJudge(local_server.endpoint, cache_dir=cache_dir, graded=False)
    verdict = judge.score([HAMLET], [SHAKESPEARE])  # one request
    _well_formed(verdict, 1)
    assert np.isnan(verdict[0]) or verdict[0] in (0.0, 1.0)
    assert judge.last_stats["graded"] == 0 and judge.last_stats["asked"] == 1


def test_list_mode_asks_once_per_run_of_the_same_question_in_order(local_server, cache_dir):
    judge = LLMJudge(local_server.endpoint, mode="list", cache_dir=cache_dir)
    questions = [FRANCE, FRANCE, HAMLET, HAMLET, FRANCE]
    passages = [PARIS, DENMARK, DENMARK, SHAKESPEARE, PARIS]
    probabilities = judge.score(questions, passages)  # three requests: France x2, Hamlet x2, France x1
    _well_formed(probabilities, 5)
    assert set(probabilities[~np.isnan(probabilities)]) <= {0.0, 1.0}
    stats = judge.last_stats
    assert (stats["requests"], stats["asked"], stats["graded"]) == (3, 3, 0)
    for start, stop in [(0, 2), (2, 4)]:  # a list is read whole or not at all
        assert np.isnan(probabilities[start:stop]).all() or not np.isnan(probabilities[start:stop]).any()
    # Each list asked on its own is the same request: cached, with the same probabilities in the same order.
    for start, stop in [(0, 2), (2, 4), (4, 5)]:
        alone = judge.score(questions[start:stop], passages[start:stop])
        np.testing.assert_array_equal(alone, probabilities[start:stop])
        assert judge.last_stats["asked"] == 0
