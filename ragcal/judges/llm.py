"""A judge from any OpenAI-compatible chat endpoint: the LLM is asked whether passages answer the question.

Two ways to ask, each with a JSON-schema-constrained reply
(:func:`ragcal.llm.client.chat_json`):

- ``mode="passage"``: one request per (question, passage) pair, "does this
  passage answer the question?", reply ``{"answers": true|false}``;
- ``mode="list"``: one request per question, its passages numbered
  ``[1]``, ``[2]``, ...; reply ``{"answering": [numbers]}``. Consecutive pairs
  with the same question form one list, in order.

From reply to ``P(passage answers question)``:

- a "yes" (``true``, or the passage's number listed) is 1.0, a "no" 0.0;
- in passage mode with ``graded=True``, when the server returns token
  log-probabilities (llama.cpp's server, OpenAI's API), P is instead the
  model's probability mass on ``true`` over ``true`` plus ``false`` at the
  token where the verdict starts, among the ``top_logprobs`` alternatives
  (leading spaces ignored; the distribution before the schema's grammar). It
  is above 0.5 when the model leans to "yes", whatever the grammar forced;
  a reply without them falls back to 1.0 / 0.0;
- a reply that cannot be read (not JSON, wrong fields, cut off at
  ``max_tokens``, a passage number out of range) is NaN for every pair it
  covers, and counted in ``last_stats["unreadable"]``, never guessed. The
  judge signals then treat NaN as no verdict: :func:`judge_results` sorts it
  after every judged passage, so ``judge_top1`` ignores it unless nothing
  was judged, ``judge_mass`` counts it as not answering, and ``judge_at_dense_top1``
  and ``judge_gap`` are NaN where they read it.

Replies are cached in ragcal's LLM verdict cache
(:class:`ragcal.llm.VerdictCache`), keyed by the endpoint's model
fingerprint, the judge's fingerprint and the exact request, so a rerun asks
the server nothing it asked before.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from pathlib import Path

import numpy as np

from .._params import check_choice, check_int
from ..llm.client import ChatEndpoint, LLMReplyError, chat_json, schema_problem
from ..llm.verdict_cache import VERDICT_CACHE_FILE, VerdictCache, request_key
from .protocol import check_pairs

__all__ = [
    "LIST_PROMPT",
    "PASSAGE_PROMPT",
    "LLMJudge",
    "graded_probability",
    "judge_messages",
    "judge_schema",
    "reply_probabilities",
]

#: The instruction of ``mode="passage"``.
PASSAGE_PROMPT = (
    'You check whether a passage answers a question. Reply {"answers": true} only if the passage states the '
    'answer to the question; otherwise reply {"answers": false}.'
)
#: The instruction of ``mode="list"``.
LIST_PROMPT = (
    "You check which passages answer a question. The passages are numbered [1], [2], and so on. Reply "
    '{"answering": [...]} with the numbers of the passages that state the answer to the question, and '
    '{"answering": []} if none does.'
)
MODES = ("passage", "list")
#: Alternatives asked for at each generated token when grading.
TOP_LOGPROBS = 10
_VERDICT = re.compile(r'"answers"\s*:\s*(true|false)')


def judge_schema(mode: str, n_passages: int = 1) -> dict:
    """The reply's JSON schema: ``{"answers": bool}``, or ``{"answering": [int in 1..n_passages]}``."""
    check_choice(mode, "mode", "judge_schema", MODES)
    n_passages = check_int(n_passages, "n_passages", "judge_schema", low=1)
    if mode == "passage":
        properties = {"answers": {"type": "boolean"}}
    else:
        numbers = {"type": "integer", "minimum": 1, "maximum": n_passages}
        properties = {"answering": {"type": "array", "items": numbers, "maxItems": n_passages}}
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def judge_messages(question: str, passages, *, mode: str, instructions: str) -> list[dict]:
    """The chat messages for one question and its passages (one in passage mode, numbered in list mode)."""
    passages = list(passages)
    if mode == "passage":
        (passage,) = passages
        user = f"Passage:\n{passage}\n\nQuestion: {question}\n\nDoes the passage answer the question?"
    else:
        numbered = "\n---\n".join(f"[{number}] {passage}" for number, passage in enumerate(passages, start=1))
        user = f"Passages:\n{numbered}\n\nQuestion: {question}\n\nWhich passages answer the question?"
    return [{"role": "system", "content": instructions}, {"role": "user", "content": user}]


def reply_probabilities(reply, *, mode: str, n_passages: int = 1) -> np.ndarray:
    """P(answers) for each passage a reply covers: 1.0 yes, 0.0 no, NaN for every passage when unreadable.

    Parameters
    ----------
    reply : str or dict or None
        The reply's message: its JSON text, or the parsed object.
    mode : {"passage", "list"}
    n_passages : int, default=1
        Passages the request showed (1 in passage mode).

    Returns
    -------
    ndarray of float64, shape (n_passages,)

    Examples
    --------
    >>> reply_probabilities('{"answering": [2]}', mode="list", n_passages=3)
    array([0., 1., 0.])
    >>> reply_probabilities('{"answering": [4]}', mode="list", n_passages=3)
    array([nan, nan, nan])
    """
    schema = judge_schema(mode, n_passages)
    unreadable = np.full(n_passages, np.nan)
    if isinstance(reply, (str, bytes)):
        try:
            reply = json.loads(reply)
        except ValueError:
            return unreadable
    if reply is None or schema_problem(reply, schema) is not None:
        return unreadable
    if mode == "passage":
        return np.full(n_passages, 1.0 if reply["answers"] else 0.0)
    answering = np.zeros(n_passages)
    answering[[number - 1 for number in reply["answering"]]] = 1.0
    return answering


def graded_probability(token_logprobs) -> float | None:
    """P(true) at the token where the passage verdict starts, from its top alternatives; None when not found.

    ``token_logprobs`` is the server's ``logprobs.content`` for the reply:
    one ``{"token", "logprob", "top_logprobs"}`` per generated token. The
    verdict starts where the text the tokens spell has ``"answers":`` then
    ``true`` or ``false``. Alternatives at that token are read after the part
    of the chosen token that precedes the verdict, leading spaces ignored: one
    that begins ``true`` (or is a beginning of it) counts as yes, ``false`` as
    no, any other is left out. P = yes mass / (yes + no mass).

    Examples
    --------
    >>> import math
    >>> tokens = [{"token": '{"answers":', "top_logprobs": []},
    ...           {"token": "true", "top_logprobs": [{"token": "true", "logprob": math.log(0.6)},
    ...                                              {"token": " false", "logprob": math.log(0.2)}]},
    ...           {"token": "}", "top_logprobs": []}]
    >>> round(graded_probability(tokens), 6)
    0.75
    """
    if not isinstance(token_logprobs, list) or not all(
        isinstance(entry, dict) and isinstance(entry.get("token"), str) for entry in token_logprobs
    ):
        return None
    content = "".join(entry["token"] for entry in token_logprobs)
    found = _VERDICT.search(content)
    if not found:
        return None
    start, offset = found.start(1), 0
    for entry in token_logprobs:
        token = entry["token"]
        if offset + len(token) > start:
            prefix = token[: start - offset]
            masses = {"true": 0.0, "false": 0.0}
            for alternative in entry.get("top_logprobs") or ():
                text = alternative.get("token") if isinstance(alternative, dict) else None
                logprob = alternative.get("logprob") if isinstance(alternative, dict) else None
                if not isinstance(text, str) or not text.startswith(prefix) or not isinstance(logprob, (int, float)):
                    continue
                rest = text[len(prefix) :].lstrip()
                for literal in masses:
                    if rest and (literal.startswith(rest) or rest.startswith(literal)):
                        masses[literal] += math.exp(logprob)
            total = masses["true"] + masses["false"]
            return masses["true"] / total if total > 0 else None
        offset += len(token)
    return None


class LLMJudge:
    """A judge that asks an OpenAI-compatible chat endpoint whether passages answer the question.

    Parameters
    ----------
    endpoint : ChatEndpoint or str
        The endpoint (e.g. ``LocalLLMServer().start()``), or its base URL
        with ``model``.
    model : str, default=None
        The model name, when ``endpoint`` is a URL.
    mode : {"passage", "list"}, default="passage"
        One request per pair, or one per run of consecutive pairs with the
        same question (its passages numbered in order). A list must fit the
        model's context: about ``n_passages * max_passage_chars / 4`` tokens.
    graded : bool, default=True
        In passage mode, P from the verdict token's log-probabilities when
        the server gives them (see the module); 1.0 / 0.0 otherwise. List
        mode is always 1.0 / 0.0.
    instructions : str, default=None
        The system prompt; :data:`PASSAGE_PROMPT` or :data:`LIST_PROMPT` when
        None. Part of the fingerprint.
    seed : int, default=0
        Sent with every request, at temperature 0.
    max_tokens : int, default=96
        Longest reply; one cut off is unreadable (NaN).
    max_passage_chars : int, default=1500
        Passages are cut to this many characters before they are shown.
    use_cache : bool, default=True
    cache_dir : str or Path, default=None
        Folder of the verdict cache (``llm_verdicts.sqlite``); ragcal's cache
        folder when None.
    name : str, default=None
        Label in tables; ``llm-<mode>:<model>`` when None.

    Attributes
    ----------
    fingerprint : str
        ``llm:<model>@<model sha256, 12 hex>/<mode>/prompt-<sha256 of the
        instructions, message template and schema, 12 hex>/<decoding>``:
        changes with the model, the prompt, the mode and the decoding
        options (seed, max_tokens, max_passage_chars, graded).
    trained_on : frozenset of str
        Empty: ragcal does not know what the model was trained on.
    last_stats : dict
        Of the last :meth:`score`: ``requests`` (lists or pairs asked about),
        ``asked`` (sent to the server), ``cached`` (answered by the cache or an
        identical request of the same call), ``unreadable`` (pairs scored NaN),
        ``graded`` (pairs scored from log-probabilities), ``seconds`` (of the
        server's replies to the requests sent).

    Notes
    -----
    P is 1.0 for a "yes" and 0.0 for a "no" (in passage mode with
    ``graded``, the verdict token's true mass instead); a reply that cannot
    be read (not JSON, wrong fields, a number out of range) is NaN for every
    pair it covers and counted in ``last_stats["unreadable"]``. Judge signals
    treat NaN as no verdict: ``judge_top1`` sorts it last, ``judge_mass``
    counts it as not answering.

    Examples
    --------
    >>> from ragcal.llm import LocalLLMServer                                    # doctest: +SKIP
    >>> with LocalLLMServer() as server:                                         # doctest: +SKIP
    ...     judge = LLMJudge(server.endpoint)
    ...     judge.score(["What is the capital of France?"], ["Paris is the capital of France."])
    array([0.71])
    """

    trained_on: frozenset = frozenset()

    def __init__(
        self,
        endpoint,
        *,
        model: str | None = None,
        mode: str = "passage",
        graded: bool = True,
        instructions: str | None = None,
        seed: int = 0,
        max_tokens: int = 96,
        max_passage_chars: int = 1500,
        use_cache: bool = True,
        cache_dir=None,
        name: str | None = None,
    ):
        owner = type(self).__name__
        if isinstance(endpoint, str):
            if not model:
                raise ValueError(f"LLM endpoint {endpoint}: give the model name (model=...)")
            endpoint = ChatEndpoint(endpoint, model)
        elif not isinstance(endpoint, ChatEndpoint):
            raise TypeError(f"{owner}: endpoint must be a ChatEndpoint or a URL, got {type(endpoint).__name__}")
        self.endpoint = endpoint
        self.mode = check_choice(mode, "mode", owner, MODES)
        self.graded = bool(graded) and self.mode == "passage"
        if instructions is not None and (not isinstance(instructions, str) or not instructions.strip()):
            raise ValueError(f"{owner}: instructions must be a non-empty str (the system prompt)")
        self.instructions = instructions or (PASSAGE_PROMPT if self.mode == "passage" else LIST_PROMPT)
        self.seed = check_int(seed, "seed", owner)
        self.max_tokens = check_int(max_tokens, "max_tokens", owner, low=1)
        self.max_passage_chars = check_int(max_passage_chars, "max_passage_chars", owner, low=1)
        self.use_cache = bool(use_cache)
        from ..embedding.cache import default_cache_dir

        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.name = name or f"llm-{self.mode}:{endpoint.model}"
        model_digest = endpoint.model_sha256[:12] or "unknown"
        decoding = f"t0-seed{self.seed}-max{self.max_tokens}-chars{self.max_passage_chars}" + "-graded" * self.graded
        self.fingerprint = (
            f"llm:{endpoint.model}@{model_digest}/{self.mode}/prompt-{self.prompt_sha256()[:12]}/{decoding}"
        )
        self.last_stats = _stats()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.fingerprint!r})"

    def prompt_sha256(self) -> str:
        """sha256 of the prompt template: the instructions, the user message around its `{question}` and `{passage}` slots, the schema."""
        template = {
            "messages": judge_messages("{question}", ["{passage}"], mode=self.mode, instructions=self.instructions),
            "schema": judge_schema(self.mode, 1),
        }
        return hashlib.sha256(json.dumps(template, sort_keys=True).encode("utf-8")).hexdigest()

    def score(self, questions, passages) -> np.ndarray:
        """P(passage answers question) for each pair, through the cache: float64, shape (n_pairs,), NaN if unreadable.

        Raises
        ------
        LLMEndpointError
            The endpoint is unreachable or answers with an HTTP error (the
            message names its URL); replies received so far are cached.
        """
        questions, passages = check_pairs(questions, passages, f"{type(self).__name__}.score")
        stats = _stats()
        probabilities = np.full(len(questions), np.nan)
        cache = VerdictCache(self.cache_dir / VERDICT_CACHE_FILE) if self.use_cache and questions else None
        this_call: dict = {}
        try:
            for start, stop in self._requests(questions):
                shown = [passage[: self.max_passage_chars] for passage in passages[start:stop]]
                messages = judge_messages(questions[start], shown, mode=self.mode, instructions=self.instructions)
                schema = judge_schema(self.mode, len(shown))
                key = request_key(
                    self.endpoint.fingerprint(), {"judge": self.fingerprint, "messages": messages, "schema": schema}
                )
                record = this_call.get(key) or (cache.get(key) if cache is not None else None)
                if record is None:
                    record = self._ask(messages, schema)
                    stats["asked"] += 1
                    stats["seconds"] += record["seconds"]
                    if cache is not None:
                        cache.put(key, record)
                else:
                    stats["cached"] += 1
                this_call[key] = record
                row = reply_probabilities(record.get("message"), mode=self.mode, n_passages=len(shown))
                graded = record.get("graded")
                if self.graded and isinstance(graded, float) and not np.isnan(row).any():
                    row[:] = graded
                    stats["graded"] += len(shown)
                stats["unreadable"] += int(np.isnan(row).sum())
                probabilities[start:stop] = row
                stats["requests"] += 1
        finally:
            if cache is not None:
                cache.close()
            self.last_stats = stats
        return probabilities

    def _requests(self, questions: list[str]) -> list[tuple[int, int]]:
        """``(start, stop)`` of each request: every pair alone, or each run of consecutive equal questions."""
        if self.mode == "passage":
            return [(index, index + 1) for index in range(len(questions))]
        bounds = [0] + [index for index in range(1, len(questions)) if questions[index] != questions[index - 1]]
        return list(zip(bounds, bounds[1:] + [len(questions)]))

    def _ask(self, messages: list[dict], schema: dict) -> dict:
        started = time.perf_counter()
        try:
            reply = chat_json(
                self.endpoint,
                messages,
                schema=schema,
                schema_name="judge",
                temperature=0.0,
                seed=self.seed,
                max_tokens=self.max_tokens,
                top_logprobs=TOP_LOGPROBS if self.graded else 0,
            )
        except LLMReplyError as error:  # the model's answer to this request: NaN, not fatal
            return {"message": None, "graded": None, "error": str(error), "seconds": time.perf_counter() - started}
        graded = None
        if self.graded:
            graded = graded_probability(reply.token_logprobs)
        return {
            "message": reply.message,
            "graded": graded,
            "error": "",
            "seconds": time.perf_counter() - started,
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
        }

    def to_dict(self) -> dict:
        """Provenance: which judge, which endpoint, which mode."""
        return {
            "judge": self.name,
            "judge_fingerprint": self.fingerprint,
            "judge_endpoint": self.endpoint.url,
            "judge_mode": self.mode,
        }


def _stats() -> dict:
    return {"requests": 0, "asked": 0, "cached": 0, "unreadable": 0, "graded": 0, "seconds": 0.0}
