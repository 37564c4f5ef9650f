"""A small client for any OpenAI-compatible chat endpoint, with JSON-schema-constrained replies.

One request is ``POST {url}/v1/chat/completions`` with ``model``, ``messages``,
``temperature``, ``seed``, ``max_tokens`` and ``response_format`` (a JSON
schema), which llama.cpp's server, vLLM and hosted OpenAI-compatible APIs all
accept. The standard library is enough (``urllib.request`` and ``json``), so
talking to an endpoint needs no extra package.

Two kinds of failure, each a one-line message that names the endpoint:

- :class:`LLMEndpointError` (an ``OSError``): nothing usable came back at all:
  connection refused, timeout, an HTTP error status. A run cannot go on.
- :class:`LLMReplyError` (a ``ValueError``): the server answered, but the body
  is not JSON, not a chat completion, or its message does not match the
  schema. That is the model's answer to one question; callers such as
  :func:`ragcal.llm.llm_verdicts` record it (a NaN verdict) and go on.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field

from .._params import check_float, check_int

__all__ = ["ChatEndpoint", "ChatReply", "LLMEndpointError", "LLMReplyError", "chat_json", "schema_problem"]


class LLMEndpointError(OSError):
    """The endpoint could not be reached or answered with an HTTP error; the message names it."""


class LLMReplyError(ValueError):
    """The endpoint answered, but not with a chat completion whose message matches the schema."""


@dataclass(frozen=True)
class ChatEndpoint:
    """An OpenAI-compatible chat endpoint and the model it serves.

    Attributes
    ----------
    url : str
        Base URL, e.g. ``http://127.0.0.1:8080``; a trailing ``/v1`` is
        accepted (``/v1/chat/completions`` is appended either way).
    model : str
        The ``model`` field of every request.
    model_sha256 : str, default=""
        sha256 of the model file when it is known (a local GGUF); part of every
        cache key, so that another file under the same name is never mixed up.
    settings : mapping, default={}
        Server-side settings that can change a reply (threads, context size);
        part of every cache key.
    timeout : float, default=300
        Seconds to wait for one reply.
    """

    url: str
    model: str
    model_sha256: str = ""
    settings: Mapping = field(default_factory=dict)
    timeout: float = 300.0

    def __post_init__(self):
        if not isinstance(self.url, str) or not self.url.startswith(("http://", "https://")):
            raise ValueError(f"LLM endpoint {self.url!r}: expected an http:// or https:// URL")
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError(f"LLM endpoint {self.url}: the model name is empty")
        check_float(self.timeout, "timeout", "ChatEndpoint", low=0)

    @property
    def chat_url(self) -> str:
        """``{url}/v1/chat/completions``."""
        base = self.url.rstrip("/")
        return (base if base.endswith("/v1") else base + "/v1") + "/chat/completions"

    def fingerprint(self) -> dict:
        """What identifies the model behind the endpoint (not its address): name, file sha256, settings."""
        return {"model": self.model, "model_sha256": self.model_sha256, "settings": dict(self.settings)}


@dataclass(frozen=True)
class ChatReply:
    """One schema-matching reply: the parsed message, the token counts and token logprobs the server reported.

    ``token_logprobs`` is the reply's ``choices[0].logprobs.content`` (one
    ``{"token", "logprob", "top_logprobs"}`` per generated token) when
    :func:`chat_json` asked for ``top_logprobs`` and the server gave them;
    None otherwise.
    """

    message: dict
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    token_logprobs: list | None = None


_JSON_TYPES = {
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "string": lambda value: isinstance(value, str),
    "boolean": lambda value: isinstance(value, bool),
    "integer": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "number": lambda value: isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value),
    "null": lambda value: value is None,
}


def schema_problem(value, schema: Mapping, *, where: str = "reply") -> str | None:
    """What in ``value`` breaks ``schema``, or None when it matches.

    Checks the part of JSON Schema that structured replies use: ``type``,
    ``properties``, ``required``, ``additionalProperties: false``, ``items``,
    ``maxItems``, ``maxLength``, ``minimum`` and ``maximum``. Other keywords
    are not checked.

    Examples
    --------
    >>> schema_problem({"ok": 1}, {"type": "object", "properties": {"ok": {"type": "boolean"}}})
    "reply['ok']: expected boolean, got 1"
    """
    expected = schema.get("type")
    if expected is not None and not _JSON_TYPES[expected](value):
        return f"{where}: expected {expected}, got {json.dumps(value)[:60]}"
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                return f"{where}: missing {name!r}"
        if schema.get("additionalProperties") is False:
            extra = sorted(set(value) - set(properties))
            if extra:
                return f"{where}: unexpected {', '.join(map(repr, extra))}"
        for name, item in value.items():
            if name in properties:
                problem = schema_problem(item, properties[name], where=f"{where}[{name!r}]")
                if problem:
                    return problem
    if isinstance(value, str) and len(value) > schema.get("maxLength", math.inf):
        return f"{where}: longer than {schema['maxLength']} characters"
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and not schema.get("minimum", -math.inf) <= value <= schema.get("maximum", math.inf):
        return f"{where}: {value} is outside [{schema.get('minimum', '-inf')}, {schema.get('maximum', 'inf')}]"
    if isinstance(value, list) and len(value) > schema.get("maxItems", math.inf):
        return f"{where}: more than {schema['maxItems']} items"
    if isinstance(value, list) and "items" in schema:
        for position, item in enumerate(value):
            problem = schema_problem(item, schema["items"], where=f"{where}[{position}]")
            if problem:
                return problem
    return None


def chat_json(
    endpoint: ChatEndpoint,
    messages,
    *,
    schema: Mapping,
    schema_name: str = "reply",
    temperature: float = 0.0,
    seed: int = 0,
    max_tokens: int = 128,
    top_logprobs: int = 0,
) -> ChatReply:
    """Ask ``endpoint`` one chat completion constrained to ``schema``; return the parsed message.

    Parameters
    ----------
    endpoint : ChatEndpoint
    messages : list of dict
        ``[{"role": "system", "content": ...}, {"role": "user", "content": ...}]``.
    schema : mapping
        JSON schema of the reply, sent as ``response_format``
        ``{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}``
        and checked on the way back (:func:`schema_problem`).
    schema_name : str, default="reply"
    temperature : float, default=0.0
    seed : int, default=0
    max_tokens : int, default=128
        A reply cut off at this length is not valid JSON: an
        :class:`LLMReplyError` that says so.
    top_logprobs : int, default=0
        When positive, ask for each generated token's log-probability and its
        ``top_logprobs`` most likely alternatives (OpenAI's ``logprobs``;
        llama.cpp's server gives them before the schema's grammar is applied).

    Returns
    -------
    ChatReply
        The message content, parsed, matching ``schema``, and the reply's
        ``usage`` token counts when the server gives them.

    Raises
    ------
    LLMEndpointError
        Connection refused, timeout, HTTP error status.
    LLMReplyError
        Body not JSON, not a chat completion, content not JSON or not matching
        ``schema``.
    """
    temperature = check_float(temperature, "temperature", "chat_json", low=0, low_open=False)
    seed = check_int(seed, "seed", "chat_json")
    max_tokens = check_int(max_tokens, "max_tokens", "chat_json", low=1)
    top_logprobs = check_int(top_logprobs, "top_logprobs", "chat_json", low=0, high=20)
    body = {
        "model": endpoint.model,
        "messages": list(messages),
        "temperature": temperature,
        "seed": seed,
        "max_tokens": max_tokens,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": schema_name, "schema": dict(schema), "strict": True},
        },
    }
    if top_logprobs:
        body.update(logprobs=True, top_logprobs=top_logprobs)
    where = f"LLM endpoint {endpoint.chat_url}"
    request = urllib.request.Request(
        endpoint.chat_url,
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=endpoint.timeout) as response:
            raw = response.read()
    except urllib.error.HTTPError as error:
        detail = " ".join(error.read(300).decode("utf-8", "replace").split())
        raise LLMEndpointError(
            f"{where}: HTTP {error.code} {error.reason}" + (f": {detail}" if detail else "")
        ) from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise LLMEndpointError(f"{where}: cannot be reached ({reason})") from None
    try:
        completion = json.loads(raw)
        choice = completion["choices"][0]
        content = choice["message"]["content"]
    except (ValueError, UnicodeDecodeError) as error:
        raise LLMReplyError(f"{where}: the reply is not JSON ({error}): {raw[:80]!r}") from None
    except (KeyError, IndexError, TypeError):
        raise LLMReplyError(f"{where}: the reply is not a chat completion: {raw[:80]!r}") from None
    if not isinstance(content, str):
        raise LLMReplyError(f"{where}: the reply's message content is not text: {json.dumps(content)[:80]}")
    try:
        reply = json.loads(content)
    except ValueError:
        cut = " (cut off at max_tokens)" if choice.get("finish_reason") == "length" else ""
        raise LLMReplyError(f"{where}: the message is not JSON{cut}: {' '.join(content.split())[:80]!r}") from None
    problem = schema_problem(reply, schema)
    if problem:
        raise LLMReplyError(f"{where}: the message does not match the schema: {problem}")
    usage = completion.get("usage") if isinstance(completion.get("usage"), dict) else {}
    logprobs = choice.get("logprobs") if isinstance(choice.get("logprobs"), dict) else {}
    tokens = logprobs.get("content") if top_logprobs and isinstance(logprobs.get("content"), list) else None
    return ChatReply(reply, _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")), tokens)


def _count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
