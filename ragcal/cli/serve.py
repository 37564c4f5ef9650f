"""``ragcal serve``: one saved gate behind an HTTP API (``POST /decide``, ``GET /healthz``, ``GET /gate``).

The index and the gate are loaded once, exactly as ``ragcal ask`` loads them
(:func:`ragcal.cli.gates.load_gate_and_index`); the app is
:func:`ragcal.serve.create_app`. See docs/serving.md.
"""

from __future__ import annotations

import ipaddress
import os
import sys

from ..extras import require_extra
from .gates import add_gate_index_options

#: Where ``ragcal serve`` listens unless told otherwise: this machine only.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
#: OpenMP threads that wait for work sleep instead of spinning. With spinning (the default), torch's second thread
#: made one encode 5-20x slower on this 2-core machine whenever anything else wanted a core (the event loop, the
#: clients, other processes); it changes no number (docs/serving.md). A value the user set is kept.
OMP_WAIT_POLICY = "PASSIVE"


def add_parsers(commands) -> None:
    from ..serve import MAX_QUERY_CHARS  # ragcal.serve imports FastAPI only inside its functions

    serve = commands.add_parser(
        "serve",
        help="serve a saved gate over HTTP: POST /decide, GET /healthz, GET /gate (needs ragcal[serve])",
        description="Builds the index with the gate's model and chunking, as `ragcal ask` does, once, then answers "
        "POST /decide {\"query\": ..., \"allowed_levels\": [...]} with the object `ragcal ask --json` prints. "
        "Requests may ask for any subset of the --access levels. Needs FastAPI and uvicorn: "
        "pip install 'ragcal[serve]'. See docs/serving.md.",
    )
    add_gate_index_options(serve)
    serve.add_argument(
        "--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST}: this machine only)"
    )
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    serve.add_argument(
        "--max-query-chars",
        type=int,
        default=MAX_QUERY_CHARS,
        metavar="N",
        help=f"longer questions get a 422 (default {MAX_QUERY_CHARS:,})",
    )
    serve.add_argument(
        "--torch-threads",
        type=int,
        default=None,
        metavar="N",
        help="threads torch uses to encode one question (default: torch's, as `ragcal ask`; another count may "
        "change the last bits of scores, see docs/serving.md)",
    )
    serve.add_argument("--access-log", action="store_true", help="log one line per request (method, path, status)")
    serve.add_argument(
        "--candidates",
        action="store_true",
        help="no index: each POST /decide brings its question's candidates, best first, with your scores "
        "({\"query\": ..., \"candidates\": [{\"id\", \"text\", \"score\"}, ...]}), for a gate fitted on "
        "`ragcal score --candidates`; a gate on your scores (run_*) or BM25 needs no model stack",
    )
    serve.set_defaults(run=run_serve)


def _check_address(host: str, port: int) -> None:
    if not 1 <= port <= 65535:
        raise ValueError(f"--port must be in 1..65535. Got {port} instead.")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        print(
            f"ragcal serve: warning: listening on {host}, not on this machine only: anyone who can reach port {port} "
            "can ask questions, at any of the served access levels (ragcal serve has no authentication; put it "
            "behind a proxy that authenticates callers and sets allowed_levels)",
            file=sys.stderr,
        )


def _serve_candidates(args) -> int:
    """``ragcal serve --candidates``: no index; each request brings its candidates (ragcal.serve_candidates)."""
    from ..gates import read_gate_file
    from ..serve_candidates import create_candidates_app
    from .gates import INDEX_ONLY

    given = [option for dest, option in INDEX_ONLY.items() if getattr(args, dest) is not None]
    if args.torch_threads is not None:
        given.append("--torch-threads")
    if given:
        raise ValueError(f"{', '.join(given)} cannot be used with --candidates: each request brings its passages")
    document = read_gate_file(args.gate)
    gate = document["gate"]
    if set(gate.retrievers) & {"dense", "rrf"}:
        require_extra("retrieval", f"ragcal serve --candidates with a gate on {', '.join(gate.retrievers)} scores")
    app = create_candidates_app(document, max_query_chars=args.max_query_chars)
    print(f"ragcal serve: {gate.type} gate {args.gate} on the candidates each request brings; "
          f"http://{args.host}:{args.port}", file=sys.stderr)  # fmt: skip
    import uvicorn

    uvicorn.run(app, host=args.host, port=args.port, log_level="info", access_log=args.access_log)
    return 0


def run_serve(args) -> int:
    from ..serve import create_app, require_serve_dependencies

    try:
        require_serve_dependencies()  # before the model loads: a missing extra is a one-line error at once
    except ImportError as error:
        print(f"ragcal: error: {error}", file=sys.stderr)
        return 2
    _check_address(args.host, args.port)
    if args.max_query_chars < 1:
        raise ValueError(f"--max-query-chars must be a positive number. Got {args.max_query_chars} instead.")
    if args.candidates:
        return _serve_candidates(args)
    require_extra("retrieval", "ragcal serve (without --candidates)")
    if args.torch_threads is not None and args.torch_threads < 1:
        raise ValueError(f"--torch-threads must be a positive number. Got {args.torch_threads} instead.")
    # This process is the server's own, so these process-wide settings are ours to make. OpenMP reads its
    # environment once, when torch loads it: before anything imports torch.
    os.environ.setdefault("OMP_WAIT_POLICY", OMP_WAIT_POLICY)
    if args.torch_threads is not None:
        import torch

        torch.set_num_threads(args.torch_threads)
    from .gates import load_gate_and_index

    document, gate, index = load_gate_and_index(args, command="serve")
    app = create_app(gate, index, max_query_chars=args.max_query_chars, gate_document=document)
    levels = ", ".join(app.state.served_levels)
    print(
        f"ragcal serve: {gate.type} gate {args.gate}, access level(s) {levels}; http://{args.host}:{args.port}",
        file=sys.stderr,
    )
    import uvicorn

    uvicorn.run(app, host=args.host, port=args.port, log_level="info", access_log=args.access_log)
    return 0
