"""One calibrated gate behind a small HTTP API (the optional ``serve`` extra: FastAPI and uvicorn).

::

    from ragcal.gates import load_gate, read_gate_file
    from ragcal.retrieval.index import build_index
    from ragcal.serve import create_app

    index = build_index("docs", access=policy, allowed_levels=["public", "internal"])
    gate = load_gate("gate.json", index=index)
    app = create_app(gate, index, gate_document=read_gate_file("gate.json"))
    # uvicorn.run(app, host="127.0.0.1", port=8000), or `ragcal serve --gate gate.json`

Endpoints:

- ``POST /decide`` with ``{"query": "...", "allowed_levels": ["public"]}``
  (``allowed_levels`` optional) returns the object ``ragcal ask --json``
  prints for that question: ``{"query": ..., **decision.to_dict()}``;
- ``GET /healthz``: status, chunks and levels served, gate kind, model;
- ``GET /gate``: the gate file (kind, gate, rule, fitted numbers, provenance).

Bad input gets a 422 whose ``message`` names the field, never a 500 (see
:data:`MAX_QUERY_CHARS` and :func:`create_app`). FastAPI, pydantic and
uvicorn are imported inside the functions that need them, so
``import ragcal`` and ``ragcal --help`` never load them; without them
:func:`require_serve_dependencies` names the install command.
"""

# No ``from __future__ import annotations`` here: the request model is built inside create_app, and FastAPI and
# pydantic read its annotations (and the endpoints') as objects, which they cannot resolve from strings naming
# locals of a function.

import copy
import dataclasses
import json

from ._params import check_int, parameter_error

__all__ = ["MAX_QUERY_CHARS", "INSTALL_HINT", "require_serve_dependencies", "create_app"]

#: Longest question ``POST /decide`` accepts, in characters (Python ``len``). MiniLM reads only its first
#: 256 word pieces (about 1,000 characters of English) and BM25 reads all of it, so a question ten times longer
#: than that is no question; refusing it keeps one request from holding the worker (and memory) for long.
MAX_QUERY_CHARS = 10_000
INSTALL_HINT = "pip install 'ragcal[serve]'"
#: Asked once at start-up, before the first request, so that no caller pays torch's first-call overhead.
WARM_UP_QUESTION = "warm-up question: how do I start?"


def require_serve_dependencies() -> None:
    """Raise ``ImportError`` with the install command unless FastAPI, pydantic and uvicorn can be imported."""
    missing = []
    for name in ("fastapi", "pydantic", "uvicorn"):
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise ImportError(f"ragcal serve needs {', '.join(missing)}, which {verb} not installed: {INSTALL_HINT}")


def _question_index(index):
    """A copy of ``index`` whose embedder, reranker and readers (a judge) use no on-disk cache; ``index`` is unchanged.

    Served questions are encoded fresh and never written to the embedding
    (or rerank, or judge) cache: users' questions do not end up in a file on disk, the
    cache does not grow with traffic, and the cache's SQLite connection,
    opened by the thread that built the index, is never used from the
    worker thread (SQLite connections refuse other threads). Nothing is
    lost: a text's vector is the same bits alone or in any batch, so a
    question's vector is the same cached or not (:class:`ragcal.embedding.Embedder`).
    Repeating a question costs one more encode (a few ms).
    """
    from .retrieval.index import RetrievalIndex

    if not isinstance(index, RetrievalIndex):
        raise TypeError(f"create_app needs a RetrievalIndex (from build_index). Got {type(index).__name__} instead.")
    if index.dense.embedder is None:
        raise ValueError("create_app: the index's dense retriever has no embedder, so it cannot encode questions")
    embedder = copy.copy(index.dense.embedder)
    embedder.use_cache = False
    embedder.stats = dict(embedder.stats)
    dense = copy.copy(index.dense)
    dense.embedder = embedder
    reranker = index.reranker
    if reranker is not None:
        reranker = copy.copy(reranker)
        reranker.use_cache = False
    readers = tuple(_without_cache(reader) for reader in index.readers)
    return dataclasses.replace(index, dense=dense, reranker=reranker, readers=readers, _views={}, _description=None)


def _without_cache(reader):
    """A reader whose judge (or the reader itself) reads and writes no score cache: a served question stays private."""
    judge = getattr(reader, "judge", None)
    if judge is not None and hasattr(judge, "use_cache"):
        judge = copy.copy(judge)
        judge.use_cache = False
        return dataclasses.replace(reader, judge=judge) if dataclasses.is_dataclass(reader) else reader
    if hasattr(reader, "use_cache"):
        reader = copy.copy(reader)
        reader.use_cache = False
    return reader


class _LevelsUnavailable(ValueError):
    """The levels asked for are served, but no chunk of the corpus sits at them."""


class _SerialDecider:
    """Retrieval and decision for one question at a time, on one worker thread, in the order requests came.

    Why one thread: a decision is CPU work (torch encodes the question with
    every core, faiss and BM25 search) that gains nothing from running two at
    once on a small machine, and the state it touches is not made for
    threads: :meth:`~ragcal.retrieval.index.RetrievalIndex.restrict` fills a
    dict of views on first use of a set of levels, the embedder and reranker
    keep counters, and torch's intra-op pool is shared. A
    ``ThreadPoolExecutor(max_workers=1)`` serialises all of it (so requests
    with different levels never see each other's state) and, unlike a lock
    around FastAPI's thread pool, it is fair: its queue is first in, first
    out, so no request waits behind later ones, and with C callers every
    request waits about C service times (``benchmarks/bench_serve.py``:
    p99/p50 under 2 with 8 clients). The event loop stays free meanwhile,
    so ``/healthz`` answers while decisions queue.
    """

    def __init__(self, gate, index):
        self.gate = gate
        self.index = index
        self._executor = None

    def decide(self, query: str, levels: tuple) -> dict:
        """The ``ragcal ask --json`` object for ``query`` as a caller at ``levels`` sees it (runs in the worker)."""
        from .gates import ask

        try:
            view = self.index.restrict(levels)
        except ValueError:
            # Not restrict's own message, which lists the corpus's other levels: a caller learns nothing of those.
            raise _LevelsUnavailable(f"no page of the corpus is at access level(s) {', '.join(levels)}") from None
        decisions, _ = ask(self.gate, view, [query])
        return {"query": query, **decisions[0].to_dict()}

    async def run(self, query: str, levels: tuple) -> dict:
        import asyncio

        if self._executor is None:  # only the event loop's thread gets here: no race
            from concurrent.futures import ThreadPoolExecutor

            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragcal-decide")
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.decide, query, levels)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None


def _served_levels(index, allowed_levels) -> tuple:
    from .access import parse_levels

    if allowed_levels is None:
        allowed_levels = index.config.get("allowed_levels") or sorted(set(index.levels))
    try:
        return parse_levels(allowed_levels)
    except (TypeError, ValueError) as error:
        raise ValueError(f"The 'allowed_levels' parameter of create_app is invalid: {error}") from None


def check_query(query: str, max_query_chars: int) -> str:
    """``query`` if it is a question ``POST /decide`` accepts, else a ``ValueError`` saying what is wrong with it."""
    if not query.strip():
        raise ValueError("must not be empty or only whitespace")
    if len(query) > max_query_chars:
        raise ValueError(f"at most {max_query_chars:,} characters are accepted; got {len(query):,}")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (it holds a lone surrogate, e.g. \\ud800)") from None
    return query


def gate_info(gate, document: dict) -> dict:
    """What ``GET /gate`` shows: kind, gate, rule, fitted numbers and provenance of the gate file ``document``."""
    return {
        "kind": gate.type,
        "format": document.get("format"),
        "gate": gate.to_dict(),
        "rule": document.get("rule"),
        "fitted": document.get("fitted", {}),
        "provenance": document.get("provenance", {}),
    }


def _request_model(served: tuple, max_query_chars: int):
    """The pydantic model of ``POST /decide``'s body: every check of the input is declared here."""
    from pydantic import BaseModel, ConfigDict, Field, field_validator

    from .access import parse_levels

    class DecideRequest(BaseModel):
        """A question, and optionally the access levels of the caller who asks it."""

        model_config = ConfigDict(extra="forbid", strict=True)

        query: str = Field(description=f"the question, 1 to {max_query_chars:,} characters, not only whitespace")
        allowed_levels: list[str] | None = Field(
            default=None,
            description=f"levels the caller may see, a subset of {', '.join(served)} (default: all of them)",
        )

        @field_validator("query")
        @classmethod
        def _check_query(cls, query: str) -> str:
            return check_query(query, max_query_chars)

        @field_validator("allowed_levels")
        @classmethod
        def _check_levels(cls, levels):
            if levels is None:
                return None
            try:
                parsed = parse_levels(levels)
            except ValueError as error:
                raise ValueError(str(error).removeprefix("allowed levels: ")) from None
            unknown = [level for level in parsed if level not in served]
            if unknown:
                raise ValueError(
                    f"level(s) {', '.join(unknown)} not served here; this server serves {', '.join(served)}"
                )
            return list(parsed)

    return DecideRequest


def _field_name(location) -> str:
    """``("body", "allowed_levels", 0)`` -> ``"allowed_levels[0]"``; the body itself -> ``"body"``."""
    parts = list(location)
    if parts and parts[0] == "body":
        parts = parts[1:]
    name = ""
    for part in parts:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or "body"


#: What a body must look like, for the messages about the body as a whole.
_BODY_SHAPE = 'a JSON object such as {"query": "How do I ...?"}, sent as Content-Type: application/json'


def _error_message(error: dict, fields: tuple) -> str:
    """A short message for one validation error; it never repeats the input (which may be 100,000 characters)."""
    kind = error.get("type", "")
    location = tuple(error.get("loc", ()))
    context = error.get("ctx") or {}
    if kind == "json_invalid":
        where = f" at character {location[1]}" if len(location) > 1 and isinstance(location[1], int) else ""
        return f"malformed JSON{where} ({str(context.get('error', 'cannot be parsed'))[:120]})"
    if location == ("body",) and kind == "missing":
        return f"no body: send {_BODY_SHAPE}"
    if location == ("body",):
        return f"must be {_BODY_SHAPE}"
    if kind == "extra_forbidden":
        return f"unknown field; the fields are {', '.join(fields)}"
    if kind == "value_error" and "error" in context:
        return str(context["error"])[:300]
    return str(error.get("msg", "invalid"))[:300]


def _validation_response(errors, fields: tuple):
    """422 ``{"message": "field: what is wrong; ...", "detail": [{"field", "message"}, ...]}``."""
    from fastapi.responses import JSONResponse

    detail = [
        {
            "field": "body" if error.get("type") == "json_invalid" else _field_name(error.get("loc", ())),
            "message": _error_message(error, fields),
        }
        for error in errors
    ]
    message = "; ".join(f"{item['field']}: {item['message']}" for item in detail) or "invalid request"
    return JSONResponse(status_code=422, content={"message": message, "detail": detail})


def create_app(
    gate,
    index,
    *,
    allowed_levels=None,
    max_query_chars: int = MAX_QUERY_CHARS,
    gate_document=None,
    warm_up: bool = True,
):
    """A FastAPI app that decides on questions with ``gate`` over ``index``.

    Parameters
    ----------
    gate : Gate
        Loaded for this index (:func:`ragcal.gates.load_gate` with
        ``index=``, which checks the model and chunking).
    index : RetrievalIndex
        The index (or access view) to serve. It is not modified: questions
        are encoded through a copy of its embedder that uses no on-disk
        cache (see Notes).
    allowed_levels : str or sequence of str, default=None
        The access levels this server serves: a request may ask for any
        subset of them and gets all of them when it names none. None serves
        the index's levels (``index.config["allowed_levels"]`` for a view,
        else every level of its chunks).
    max_query_chars : int, default=MAX_QUERY_CHARS
        Longer questions get a 422.
    gate_document : dict, default=None
        The gate file as :func:`ragcal.gates.read_gate_file` returns it;
        ``GET /gate`` shows its rule, fitted numbers and provenance (without
        it, only the gate).
    warm_up : bool, default=True
        Decide on :data:`WARM_UP_QUESTION` at start-up (when the app's
        lifespan starts, before uvicorn accepts connections), so that the
        first caller does not pay torch's first-call overhead.

    Returns
    -------
    fastapi.FastAPI
        ``app.state.served_levels`` holds the levels served.

    Raises
    ------
    ImportError
        FastAPI or pydantic is missing (the message says ``pip install 'ragcal[serve]'``).
    TypeError, ValueError
        An argument is of the wrong kind or out of range.

    Notes
    -----
    Every request is validated by a pydantic model (strict types, no
    unknown fields); any invalid body, malformed JSON or no body included,
    gets a 422 with ``{"message": "field: what is wrong", "detail": [...]}``.
    Levels are enforced per request on
    :meth:`~ragcal.retrieval.index.RetrievalIndex.restrict`'s views, the
    ones ``ragcal ask --access`` searches. Decisions run one at a time on a
    single worker thread, first come first served (see ``_SerialDecider``).
    Questions are never written to the embedding cache.

    Examples
    --------
    >>> from fastapi.testclient import TestClient                                     # doctest: +SKIP
    >>> client = TestClient(create_app(gate, index))                                   # doctest: +SKIP
    >>> client.post("/decide", json={"query": "How do I set a cookie?"}).json()["action"]  # doctest: +SKIP
    'answer'
    """
    require_serve_dependencies()
    import contextlib

    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response

    from . import __version__
    from .gates import Gate

    if not isinstance(gate, Gate):
        raise parameter_error("gate", "create_app", "a Gate", type(gate).__name__, error=TypeError)
    check_int(max_query_chars, "max_query_chars", "create_app", low=1)
    missing = [name for name in gate.retrievers if name not in index.retriever_names]
    if missing:
        raise ValueError(f"the gate reads retriever view(s) {missing}, which the index does not offer")
    served = _served_levels(index, allowed_levels)
    decider = _SerialDecider(gate, _question_index(index))
    request_model = _request_model(served, max_query_chars)
    fields = tuple(request_model.model_fields)
    shown = gate_info(gate, dict(gate_document or {}))
    config = index.config
    health = {
        "status": "ok",
        "gate": gate.type,
        "n_chunks": sum(level in served for level in index.levels),
        "levels": list(served),
        "model": config.get("model"),
        "model_fingerprint": config.get("model_fingerprint"),
        "corpus": config.get("corpus"),
        "max_query_chars": max_query_chars,
        "ragcal_version": __version__,
    }

    @contextlib.asynccontextmanager
    async def lifespan(app):
        if warm_up:
            await decider.run(WARM_UP_QUESTION, served)
        yield
        decider.close()

    app = FastAPI(
        title="ragcal serve",
        version=__version__,
        description="Answer, hedge or refuse a question with one calibrated gate (see docs/serving.md).",
        lifespan=lifespan,
    )
    app.state.served_levels = served
    app.state.decider = decider

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError):
        return _validation_response(error.errors(), fields)

    @app.post("/decide", summary="answer, hedge or refuse one question, as `ragcal ask --json` prints it")
    async def decide(body: request_model):
        levels = tuple(body.allowed_levels) if body.allowed_levels is not None else served
        try:
            record = await decider.run(body.query, levels)
        except _LevelsUnavailable as error:
            return _validation_response(
                [{"loc": ("body", "allowed_levels"), "type": "value_error", "ctx": {"error": str(error)}}], fields
            )
        # The very bytes `ragcal ask --json` prints for this question (json.dumps, ensure_ascii=False).
        return Response(json.dumps(record, ensure_ascii=False), media_type="application/json")

    @app.get("/healthz", summary="status, chunks and levels served, gate kind")
    async def healthz():
        return JSONResponse(health)

    @app.get("/gate", summary="the gate file: kind, gate, rule, fitted numbers, provenance")
    async def gate_file():
        return JSONResponse(shown)

    return app
