"""Options shared by several commands, and the small helpers that turn them into library arguments.

Nothing here imports pandas, torch or faiss at module level: ``ragcal --help``
stays fast.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..datasets import FASTAPI_CORPUS

#: What ``--model`` means when it is not given (``ragcal.embedding.DEFAULT_MODEL``, named without importing numpy).
DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
#: Help of every ``--model`` option (what :func:`ragcal.embedding.load_embedder` reads).
MODEL_HELP = (
    "embedding model: a sentence-transformers name or folder (default: the packaged MiniLM), or "
    "wordllama:NAME[:DIM], e.g. wordllama:l2_supercat_256 (its first 64 or 128 dimensions: wordllama:l2_supercat_256:64)"
)


#: ``ragcal.logs.engines.ENGINES``, and the bins of ``ragcal.logs.counts``, written out so that building the parser
#: imports no pandas (a test checks they agree).
ENGINES = ("auto", "pandas", "duckdb", "spark")
MAX_DISTINCT, DEFAULT_BINS = 200_000, 10_000


def add_engine_options(parser, *, bins: bool = True) -> None:
    """``--engine``, ``--since``, ``--until`` and (with ``bins``) ``--bins``: for commands that read a log of any size."""
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="auto",
        help="what reads the log: pandas (in memory), duckdb (out of core, memory bounded) or spark (the optional "
        "pyspark extra; the active Spark session, else a local one); auto (default) picks DuckDB for a folder, a "
        "glob or a file above 256 MB. DuckDB and Spark work from counts per slice, label and score bin",
    )
    parser.add_argument("--since", default=None, metavar="TIME",
                        help="keep rows whose 'timestamp' is at or after TIME (ISO 8601; UTC unless it has a zone)")
    parser.add_argument("--until", default=None, metavar="TIME", help="keep rows whose 'timestamp' is before TIME")
    if not bins:
        return
    parser.add_argument(
        "--bins",
        type=int,
        default=DEFAULT_BINS,
        help=f"grid cells over a score's range when the log has more than {MAX_DISTINCT:,} distinct scores "
        f"(default {DEFAULT_BINS:,}: a threshold moves by at most 1e-4 of the range); with fewer, one bin per "
        "distinct score and counts are exact",
    )  # fmt: skip


class LazyHelp(str):
    """A help text computed only when argparse prints it, so building the parser imports no library module.

    ``make`` returns the text, which may name options taken from a registry
    (the rules, the gate kinds).
    """

    def __new__(cls, make):
        text = super().__new__(cls, "(computed when shown)")
        text.make = make
        return text

    def __mod__(self, params):
        return self.make() % params


class LazyChoices:
    """``choices=`` for argparse that asks a registry only when an option is parsed or its help is shown."""

    def __init__(self, make):
        self.make = make

    def __iter__(self):
        return iter(self.make())

    def __contains__(self, value):
        return value in self.make()


def warn(message) -> None:
    print(f"warning: {message}", file=sys.stderr)


def add_chunking_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chunker", choices=("headings", "fixed"), default="headings")
    parser.add_argument("--max-tokens", type=int, default=256, help="heading chunker limit (default 256)")
    parser.add_argument("--window", type=int, default=500, help="fixed chunker window (default 500)")
    parser.add_argument(
        "--no-includes",
        action="store_true",
        help="do not expand include directives ({* ... *}, {{#include ...}}, {{#rustdoc_include ...}})",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=None,
        metavar="PATH",
        help="leave a page out (repeatable); default: none, or the bundled corpus's non-doc pages",
    )


def add_index_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--corpus", type=Path, default=FASTAPI_CORPUS, help="Markdown folder (default: the bundled FastAPI docs)"
    )
    parser.add_argument("--model", default=DEFAULT_MODEL_NAME, help=MODEL_HELP)
    add_chunking_options(parser)
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="embedding cache folder (default: $RAGCAL_CACHE_DIR or the user cache dir)",
    )
    parser.add_argument("--no-cache", action="store_true", help="embed everything, read and write no cache")
    parser.add_argument(
        "--dense-index",
        choices=("flat", "hnsw", "ivf"),
        default="flat",
        help="faiss index for dense search: flat (exact, default), hnsw or ivf (approximate: fit thresholds on the "
        "index you serve, see docs/approximate_search.md)",
    )


def exclude_option(args) -> tuple:
    """``--exclude`` as given, else the bundled corpus's non-doc pages when ``--corpus`` is a bundled corpus."""
    from ..datasets import default_exclude

    return default_exclude(args.corpus) if args.exclude is None else tuple(args.exclude)


def add_rerank_options(parser: argparse.ArgumentParser, *, depth: bool = True) -> None:
    parser.add_argument(
        "--reranker",
        default=None,
        metavar="PATH_OR_NAME",
        help="cross-encoder (folder or Hugging Face Hub name) that re-scores the fused candidates",
    )
    if depth:
        parser.add_argument(
            "--rerank-depth", type=int, default=None, help="fused candidates the reranker re-scores (default 50)"
        )


def add_judge_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--judge",
        default=None,
        metavar="PATH_OR_NAME",
        help="a judge that reads the top dense passages (judge_* signals): a folder from `ragcal train-judge`, or "
        "any cross-encoder folder or Hugging Face Hub name",
    )
    parser.add_argument(
        "--judge-depth", type=int, default=None, metavar="K", help="dense passages the judge reads (default 10)"
    )


def check_judge_depth(args, provenance=None) -> None:
    if args.judge_depth is not None and args.judge is None and not (provenance or {}).get("judge"):
        raise ValueError("--judge-depth needs a judge: pass --judge PATH_OR_NAME")


def judge_readers(args) -> tuple:
    """``--judge`` (read ``--judge-depth`` passages deep) as readers after retrieval: empty without one."""
    from ..scoring import index_arguments

    settings = {"judge": args.judge, "judge_depth": args.judge_depth}
    return index_arguments(settings, cache_dir=args.cache_dir, use_cache=not args.no_cache)["readers"]


def index_arguments_from(args, corpus, *, recorded=None, access: bool = True) -> dict:
    """The one place the command line builds an index: ``build_index`` arguments from its options.

    ``recorded`` is a gate's provenance: its settings (:func:`ragcal.gates.files.index_options`)
    apply where the command line gives none. Pages left out: ``--exclude``,
    else the gate's, else a bundled corpus's non-doc pages. With ``access``,
    the access options (and a gate's recorded policy) decide which levels
    the index shows.
    """
    from ..datasets import default_exclude
    from ..gates.files import index_options
    from ..scoring import index_arguments

    settings = index_options(recorded) if recorded else {}
    given = {
        "model": getattr(args, "model", None),
        "chunker": getattr(args, "chunker", None),
        "max_tokens": getattr(args, "max_tokens", None),
        "window": getattr(args, "window", None),
        "expand_includes": False if getattr(args, "no_includes", False) else None,
        "exclude": None if getattr(args, "exclude", None) is None else tuple(args.exclude),
        "dense_index": getattr(args, "dense_index", None),
        "reranker": getattr(args, "reranker", None),
        "rerank_depth": getattr(args, "rerank_depth", None),
        "judge": getattr(args, "judge", None),
        "judge_depth": getattr(args, "judge_depth", None),
    }
    settings.update({key: value for key, value in given.items() if value is not None})
    settings.setdefault("exclude", default_exclude(corpus))
    levels = access_options(args, recorded) if access else {}
    return index_arguments(
        settings,
        cache_dir=getattr(args, "cache_dir", None),
        use_cache=not getattr(args, "no_cache", False),
        access=levels.get("access"),
        allowed_levels=levels.get("allowed_levels"),
    )


def add_access_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--access",
        default=None,
        metavar="LEVELS",
        help="access levels the caller may see, comma-separated (default: the default level only)",
    )
    parser.add_argument(
        "--access-map", type=Path, default=None, metavar="FILE", help="CSV path_glob,level for pages without front matter"
    )
    parser.add_argument(
        "--default-access", default=None, metavar="LEVEL", help="level of a page nothing else places (default public)"
    )


def access_options(args, provenance=None) -> dict:
    """build_index options for access control; a gate's provenance supplies what the command line leaves out."""
    from ..access import DEFAULT_ACCESS, AccessPolicy

    provenance = provenance or {}
    access_map = args.access_map
    if access_map is None and provenance.get("access_map"):
        access_map = Path(provenance["access_map"])
    default = args.default_access or provenance.get("default_access") or DEFAULT_ACCESS
    policy = AccessPolicy.from_options(access_map=access_map, default=default)
    recorded = provenance.get("access_map_sha256")
    if args.access_map is None and recorded and policy.to_dict()["access_map_sha256"] != recorded:
        print(
            f"ragcal: warning: the access map {access_map} changed since the gate was fitted (sha256 differs); "
            "pages may sit at other levels now: re-check the gate on a labeled set",
            file=sys.stderr,
        )
    return {"access": policy, "allowed_levels": args.access if args.access is not None else default}


def check_rerank_depth(args, provenance=None) -> None:
    if args.rerank_depth is not None and args.reranker is None and not (provenance or {}).get("reranker"):
        raise ValueError("--rerank-depth needs a reranker: pass --reranker PATH_OR_NAME")


def report_visibility(index, queries_path=None) -> None:
    """Say what the caller sees; with a labeled set, name the answerable questions whose gold pages are all hidden."""
    if "n_visible" not in index.config:
        return
    levels = ", ".join(index.config["allowed_levels"])
    print(
        f"ragcal: access level(s) {levels} see {index.config['n_visible']:,} of {index.config['n_chunks']:,} chunks; "
        "the others take no part in any score",
        file=sys.stderr,
    )
    if queries_path is None:
        return
    from ..queries import load_queries

    hidden = index.hidden_gold_questions(load_queries(queries_path))
    if hidden:
        from ..formatting import listing

        shown = listing(hidden)
        print(
            f"ragcal: warning: {len(hidden)} answerable question(s) have no gold page visible at level(s) {levels} "
            f"({shown}). For this caller they are unanswerable: relabel them (answerable=false) in a labeled set "
            "for this level before fitting a gate on it.",
            file=sys.stderr,
        )


def add_signals_module(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--signals-module",
        action="append",
        type=Path,
        default=None,
        metavar="FILE.py",
        help="a Python file that registers signals with ragcal.signals.register_signal (repeatable)",
    )


def load_signals_modules(args) -> None:
    paths = getattr(args, "signals_module", None) or ()
    if not paths:
        return
    from ..signals import load_signals_module

    for path in paths:
        names = load_signals_module(path)
        print(f"{path}: registered {', '.join(names) if names else 'no signal'}", file=sys.stderr)


def print_slice_summary(table, signal="dense_top1") -> None:
    """``signal`` by slice; the table's first signal when it has no ``signal`` (candidates scored without dense)."""
    from ..metrics.outcomes import slice_summary

    if signal not in table.columns and table.shape[1] > 4:
        signal = table.columns[4]
    print(f"\n{signal} by slice:")
    print(slice_summary(table, signal).to_string())
