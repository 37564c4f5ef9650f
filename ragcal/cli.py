"""The ``ragcal`` command.

- ``ragcal score QUERIES.csv [--corpus DIR] --out scores.csv [--runs DIR]``
- ``ragcal evaluate QUERIES.csv --runs DIR --out retrieval.csv``: retrieval
  metrics with intervals from TREC run files
- ``ragcal reproduce [--results DIR]``: the main job of the README.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .corpus import CorpusError
from .datasets import FASTAPI_CORPUS
from .embedding import DEFAULT_MODEL
from .queries import QueryFileError

__all__ = ["main"]


def _add_index_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", type=Path, default=FASTAPI_CORPUS,
                        help="Markdown folder (default: the bundled FastAPI docs)")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="embedding model name or folder")
    parser.add_argument("--chunker", choices=("headings", "fixed"), default="headings")
    parser.add_argument("--max-tokens", type=int, default=256, help="heading chunker limit (default 256)")
    parser.add_argument("--window", type=int, default=500, help="fixed chunker window (default 500)")
    parser.add_argument("--no-includes", action="store_true", help="do not expand {* ... *} include directives")
    parser.add_argument("--exclude", action="append", default=None, metavar="PATH",
                        help="leave a page out (repeatable); default: none, or the bundled corpus's non-doc pages")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="embedding cache folder (default: $RAGCAL_CACHE_DIR or the user cache dir)")
    parser.add_argument("--no-cache", action="store_true", help="embed everything, read and write no cache")


def _build_index(args):
    from .scoring import build_index

    return build_index(
        args.corpus, model=args.model, chunker=args.chunker, max_tokens=args.max_tokens, window=args.window,
        expand_includes=not args.no_includes, exclude=args.exclude, cache_dir=args.cache_dir,
        use_cache=not args.no_cache,
    )


def _score(queries_path, out, runs, args) -> "object":
    from .queries import load_queries
    from .scoring import score_table, write_score_table, write_trec_runs
    from .corpus import load_corpus
    from .datasets import default_exclude

    # Validate the query file against the corpus before any expensive work or any write.
    exclude = default_exclude(args.corpus) if args.exclude is None else tuple(args.exclude)
    documents = load_corpus(args.corpus, expand_includes=False, exclude=exclude)
    queries = load_queries(queries_path, corpus_paths={document.path for document in documents})
    index = _build_index(args)
    retrieved = index.retrieve(queries["query"])
    table = score_table(queries, retrieved)
    config = {**index.config, "queries": str(queries_path)}
    write_score_table(out, table, config=config)
    if runs is not None:
        write_trec_runs(runs, queries["id"], retrieved, config=config)
    return table


def _print_slice_summary(table, signal="dense_top1") -> None:
    summary = table.groupby("slice", sort=False)[signal].describe()[["count", "50%", "min", "max"]]
    print(f"\n{signal} by slice:")
    print(summary.rename(columns={"50%": "median"}).round(3).to_string())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="ragcal", description="Calibrate when a RAG system should abstain.")
    commands = parser.add_subparsers(dest="command", required=True)

    score = commands.add_parser("score", help="write the per-query score table (and TREC runs)")
    score.add_argument("queries", type=Path, help="labeled query CSV: id,query,answerable,slice,gold")
    score.add_argument("--out", type=Path, required=True, help="score table CSV to write")
    score.add_argument("--runs", type=Path, default=None, help="folder for TREC run files, one per retriever")
    _add_index_options(score)

    evaluate = commands.add_parser("evaluate", help="retrieval metrics (page level, with intervals) from TREC runs")
    evaluate.add_argument("queries", type=Path, help="labeled query CSV with gold pages")
    evaluate.add_argument("--runs", type=Path, required=True, help="folder of *.run files (from ragcal score --runs)")
    evaluate.add_argument("--out", type=Path, required=True, help="CSV to write")
    evaluate.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    evaluate.add_argument("--seed", type=int, default=0)

    reproduce = commands.add_parser("reproduce", help="the main job: rebuild results/ for the bundled data")
    reproduce.add_argument("--results", type=Path, default=Path("results"), help="output folder (default results/)")
    reproduce.add_argument("--cache-dir", type=Path, default=None, help="embedding cache folder")

    args = parser.parse_args(argv)
    try:
        if args.command == "score":
            table = _score(args.queries, args.out, args.runs, args)
            print(f"wrote {args.out} ({len(table)} queries, {table.shape[1] - 4} signals)")
            _print_slice_summary(table)
        elif args.command == "evaluate":
            from ._io import atomic_write_text
            from .queries import load_queries
            from .reproduce import evaluate_runs

            table = evaluate_runs(args.runs, load_queries(args.queries), n_resamples=args.resamples,
                                  random_state=args.seed)
            atomic_write_text(args.out, table.to_csv(index=False, float_format="%.4f"))
            print(table.to_string(index=False, float_format=lambda value: f"{value:.3f}"))
        elif args.command == "reproduce":
            from .embedding import Embedder
            from .reproduce import reproduce

            tables = reproduce(args.results, embedder=Embedder(cache_dir=args.cache_dir))
            _print_slice_summary(tables["scores"])
    except (QueryFileError, CorpusError, ValueError) as error:
        print(f"ragcal: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
