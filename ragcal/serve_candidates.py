"""One calibrated gate behind HTTP, deciding on the candidates each request brings: no index, no corpus.

For a RAG system that retrieves on its own (its own store and scores) and fitted a gate on
``ragcal score --candidates`` (a gate on its scores, ``run_*``, or on BM25 needs no model stack)::

    from ragcal.gates import read_gate_file
    from ragcal.serve_candidates import create_candidates_app

    app = create_candidates_app(read_gate_file("gate.json"))
    # uvicorn.run(app, host="127.0.0.1", port=8000), or `ragcal serve --gate gate.json --candidates`

``POST /decide`` takes ``{"query": "...", "candidates": [{"id": "p7", "text": "...", "score": 12.5}, ...]}``, the
candidates best first (``title`` optional; ``score`` is the system's own, needed by a gate on ``run_*``), and
returns the object ``ragcal ask --gate gate.json --candidates FILE --json`` prints for that question, without its
``id``. ``GET /healthz`` and ``GET /gate`` are those of :func:`ragcal.serve.create_app`. Bad input gets a 422 whose
``message`` names the field.
"""

# No ``from __future__ import annotations``: FastAPI and pydantic read the request models' annotations as objects.

import json
import threading

from ._params import check_int
from .serve import MAX_QUERY_CHARS, _validation_response, check_query, gate_info, require_serve_dependencies

__all__ = ["MAX_CANDIDATES", "create_candidates_app"]

#: Most candidates one request may carry: a top-k, not a corpus.
MAX_CANDIDATES = 1_000


def _request_model(max_query_chars: int, max_candidates: int):
    """The pydantic models of ``POST /decide``'s body: every check of the input is declared here."""
    from pydantic import BaseModel, ConfigDict, Field, field_validator

    class Candidate(BaseModel):
        """One passage the system retrieved, with its own score."""

        model_config = ConfigDict(extra="forbid", strict=True)

        id: str = Field(min_length=1, description="the passage's id, unique within the request")
        text: str = Field(description="the passage's text")
        title: str = Field(default="", description="its title (optional)")
        score: float | None = Field(default=None, description="the system's own score (higher is better)")

        @field_validator("score", mode="before")
        @classmethod
        def _number(cls, score):
            if isinstance(score, int) and not isinstance(score, bool):
                return float(score)  # JSON has one number type: 12 is a score as 12.0 is
            return score

    class DecideCandidatesRequest(BaseModel):
        """A question and the candidates the system retrieved for it, best first."""

        model_config = ConfigDict(extra="forbid", strict=True)

        query: str = Field(description=f"the question, 1 to {max_query_chars:,} characters, not only whitespace")
        candidates: list[Candidate] = Field(
            description=f"the passages retrieved for it, best first, at most {max_candidates:,} (may be empty)"
        )

        @field_validator("query")
        @classmethod
        def _check_query(cls, query: str) -> str:
            return check_query(query, max_query_chars)

        @field_validator("candidates")
        @classmethod
        def _check_candidates(cls, candidates):
            if len(candidates) > max_candidates:
                raise ValueError(f"at most {max_candidates:,} candidates are accepted; got {len(candidates):,}")
            ids = [candidate.id for candidate in candidates]
            if len(set(ids)) != len(ids):
                repeated = sorted({identifier for identifier in ids if ids.count(identifier) > 1})
                raise ValueError(f"passage id(s) listed twice: {', '.join(repeated[:5])}")
            scored = [candidate.score is not None for candidate in candidates]
            if any(scored) and not all(scored):
                raise ValueError("give every candidate a score, or none")
            scores = [candidate.score for candidate in candidates if candidate.score is not None]
            if any(later > earlier for earlier, later in zip(scores, scores[1:])):
                raise ValueError("scores must not increase down the list (best first; a distance must be negated)")
            return candidates

    return DecideCandidatesRequest


def _candidate_set(query: str, candidates):
    """One request as a :class:`~ragcal.importers.candidates.CandidateSet` of one unlabeled question."""
    from .importers.candidates import CandidateQuestion, CandidateSet, Passage

    scores = tuple(candidate.score for candidate in candidates)
    question = CandidateQuestion(
        id="request",
        query=query,
        passage_ids=tuple(candidate.id for candidate in candidates),
        scores=scores if candidates and all(score is not None for score in scores) else None,
    )
    passages = {candidate.id: Passage(candidate.id, candidate.title, candidate.text) for candidate in candidates}
    return CandidateSet(questions=(question,), passages=passages, source="POST /decide")


def create_candidates_app(
    gate_document: dict,
    *,
    embedder=None,
    max_query_chars: int = MAX_QUERY_CHARS,
    max_candidates: int = MAX_CANDIDATES,
):
    """A FastAPI app whose ``POST /decide`` lets a gate decide on the candidates each request carries.

    Parameters
    ----------
    gate_document : dict
        The gate file as :func:`ragcal.gates.read_gate_file` returns it; the gate must have been fitted on a
        table of ``ragcal score --candidates`` (:func:`ragcal.gates.ask_candidates` checks it per request).
    embedder : EmbedderProtocol, default=None
        For a gate that reads ``dense`` or ``rrf``: loaded once here from the gate's recorded model when None.
    max_query_chars : int, default=MAX_QUERY_CHARS
    max_candidates : int, default=MAX_CANDIDATES
        Longer questions and longer lists get a 422.

    Returns
    -------
    fastapi.FastAPI

    Notes
    -----
    Each request's candidates form their own pool: BM25's statistics are those of that one list, so the gates to
    serve this way read list-only signals (``run_*``, ``dense_top1``, ``dense_gap``). Decisions run one at a time.
    """
    require_serve_dependencies()
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response

    from . import __version__
    from .embedding.loading import load_embedder
    from .gates import ask_candidates

    check_int(max_query_chars, "max_query_chars", "create_candidates_app", low=1)
    check_int(max_candidates, "max_candidates", "create_candidates_app", low=1)
    gate, provenance = gate_document["gate"], dict(gate_document.get("provenance") or {})
    if provenance.get("scoring") != "candidates":
        raise ValueError(
            "the gate was not fitted on candidates scored by `ragcal score --candidates`; serve it on its corpus "
            "with `ragcal serve --gate FILE` instead"
        )
    if embedder is None and set(gate.retrievers) & {"dense", "rrf"}:
        embedder = load_embedder(provenance.get("model"))
    request_model = _request_model(max_query_chars, max_candidates)
    fields = tuple(request_model.model_fields)
    lock = threading.Lock()
    shown = gate_info(gate, {**gate_document, "provenance": provenance})
    health = {
        "status": "ok",
        "gate": gate.type,
        "reads": list(gate.retrievers),
        "candidates": "each request brings its own",
        "model": provenance.get("model") if embedder is not None else None,
        "max_query_chars": max_query_chars,
        "max_candidates": max_candidates,
        "ragcal_version": __version__,
    }
    app = FastAPI(
        title="ragcal serve --candidates",
        version=__version__,
        description="Answer, hedge or refuse a question from the candidates it brings (see docs/serving.md).",
    )

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError):
        return _validation_response(error.errors(), fields)

    @app.post("/decide", summary="answer, hedge or refuse one question from its own candidates")
    def decide(body: request_model):
        candidates = _candidate_set(body.query, body.candidates)
        try:
            with lock:
                decisions, _ = ask_candidates(gate, candidates, provenance=provenance, embedder=embedder)
        except ValueError as error:  # e.g. a gate on run_* and candidates without scores
            return _validation_response(
                [{"loc": ("body", "candidates"), "type": "value_error", "ctx": {"error": str(error)}}], fields
            )
        record = {"query": body.query, **decisions[0].to_dict()}
        return Response(json.dumps(record, ensure_ascii=False), media_type="application/json")

    @app.get("/healthz", summary="status, gate kind and the views it reads")
    def healthz():
        return JSONResponse(health)

    @app.get("/gate", summary="the gate file: kind, gate, rule, fitted numbers, provenance")
    def gate_file():
        return JSONResponse(shown)

    return app
