"""The ``ragcal`` command.

- ``ragcal score QUERIES.csv [--corpus DIR] --out scores.csv [--runs DIR]``
- ``ragcal chunks CORPUS --out chunks.jsonl``: what would be indexed, one
  JSON object per chunk, with the same chunking options as ``score``
- ``ragcal evaluate QUERIES.csv --runs DIR --out retrieval.csv``: retrieval
  metrics with intervals from TREC run files
- ``ragcal calibrate SCORES.csv --signal NAME --rule keep@1.0 [--heldout N]``:
  threshold and per-slice outcome with intervals, for any score table
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


def _add_chunking_options(parser: argparse.ArgumentParser) -> None:
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


def _add_index_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--corpus", type=Path, default=FASTAPI_CORPUS, help="Markdown folder (default: the bundled FastAPI docs)"
    )
    parser.add_argument("--model", default=DEFAULT_MODEL, help="embedding model name or folder")
    _add_chunking_options(parser)
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="embedding cache folder (default: $RAGCAL_CACHE_DIR or the user cache dir)",
    )
    parser.add_argument("--no-cache", action="store_true", help="embed everything, read and write no cache")


def _score(queries_path, out, runs, args):
    from .scoring import score_query_file, write_score_table, write_trec_runs

    # score_query_file validates the query file against the corpus before any expensive work or any write.
    table, index, retrieved = score_query_file(
        queries_path,
        args.corpus,
        model=args.model,
        chunker=args.chunker,
        max_tokens=args.max_tokens,
        window=args.window,
        expand_includes=not args.no_includes,
        exclude=args.exclude,
        cache_dir=args.cache_dir,
        use_cache=not args.no_cache,
    )
    config = {**index.config, "queries": str(queries_path)}
    write_score_table(out, table, config=config)
    if runs is not None:
        write_trec_runs(runs, table["id"], retrieved, config=config)
    return table


def _chunks(args) -> None:
    """Write the chunks of ``args.corpus`` as JSON lines and print a one-line summary; no model is loaded."""
    import json

    from ._io import atomic_write_text
    from .chunking import chunk_size_summary
    from .scoring import chunk_corpus

    documents, chunks, _ = chunk_corpus(
        args.corpus,
        chunker=args.chunker,
        max_tokens=args.max_tokens,
        window=args.window,
        expand_includes=not args.no_includes,
        exclude=args.exclude,
    )
    lines = [
        json.dumps(
            {
                "chunk_id": chunk.chunk_id,
                "path": chunk.doc_path,
                "heading_path": list(chunk.heading_path),
                "text": chunk.text,
                "n_tokens": chunk.n_tokens,
                "oversized": chunk.oversized,
            },
            ensure_ascii=False,
        )
        for chunk in chunks
    ]
    atomic_write_text(args.out, "".join(line + "\n" for line in lines))
    median = chunk_size_summary(chunks).iloc[0]["tokens_median"] if chunks else 0
    oversized = sum(chunk.oversized for chunk in chunks)
    print(
        f"wrote {args.out}: {len(documents)} pages, {len(chunks)} chunks, "
        f"median {median:g} tokens, {oversized} oversized"
    )


def _print_slice_summary(table, signal="dense_top1") -> None:
    summary = table.groupby("slice", sort=False)[signal].describe()[["count", "50%", "min", "max"]]
    print(f"\n{signal} by slice:")
    print(summary.rename(columns={"50%": "median"}).round(3).to_string())


def _rules() -> dict:
    from .calibration import RULES

    return RULES


def _calibrate(args) -> None:
    import pandas as pd

    from .calibration import fit_threshold, heldout_outcomes, parse_rule
    from .metrics import check_score_table, outcome_table
    from .signals import SIGNALS

    rules = args.rule or ["keep@1.0"]
    for rule in rules:
        parse_rule(rule)
    if not args.scores.is_file():
        raise ValueError(f"{args.scores}: score table not found")
    table = check_score_table(pd.read_csv(args.scores), [args.signal], source=str(args.scores))
    higher = not args.lower_is_answerable
    if not args.lower_is_answerable and args.signal in SIGNALS:
        higher = SIGNALS[args.signal].higher_is_answerable
    print(
        f"{args.scores}: {len(table)} queries; signal {args.signal} "
        f"({'higher' if higher else 'lower'} means answerable); intervals: exact 95% binomial"
    )
    for rule in rules:
        threshold = fit_threshold(
            rule, table[args.signal], table["answerable"], higher_is_answerable=higher, delta=args.delta
        )
        outcome = outcome_table(table, args.signal, [threshold], higher_is_answerable=higher).iloc[0]
        print(f"\n{rule}: answer when {args.signal} {'>=' if higher else '<='} {threshold:.4f}")
        print("  (fitted and scored on the same queries: an in-sample view; use --heldout for honest estimates)")
        groups = ["answerable_kept"] + [
            column[:-2]
            for column in outcome.index
            if column.endswith("_refused_k") and column != "unanswerable_refused_k"
        ]
        groups.append("unanswerable_refused")
        for group in groups:
            size = outcome[group.rsplit("_", 1)[0] + "_n"]
            print(
                f"  {group:<28} {outcome[group]:6.1%}  ({int(outcome[group + '_k'])}/{int(size)})  "
                f"[{outcome[group + '_low']:.1%}, {outcome[group + '_high']:.1%}]"
            )
    if args.heldout:
        repeated = heldout_outcomes(
            table,
            args.signal,
            rules,
            n_splits=args.heldout,
            random_state=args.seed,
            higher_is_answerable=higher,
            delta=args.delta,
        )
        columns = [
            column
            for column in repeated.columns
            if column in ("threshold", "answerable_kept") or column.endswith("_refused")
        ]
        summary = repeated.groupby("rule", sort=False)[columns].quantile([0.05, 0.5, 0.95]).unstack()
        print(f"\nheld out over {args.heldout} stratified half splits (5th / 50th / 95th percentile):")
        with pd.option_context("display.width", 200, "display.max_columns", 50):
            print(summary.round(3).to_string())


def _golden(args) -> int:
    import json

    from .datasets import FASTAPI_QUERIES
    from .embedding import Embedder
    from .golden import GOLDEN_FILE, compare_golden, golden_snapshot, write_golden
    from .queries import load_queries
    from .scoring import build_index

    index = build_index(FASTAPI_CORPUS, embedder=Embedder(cache_dir=args.cache_dir))
    snapshot = golden_snapshot(index, load_queries(FASTAPI_QUERIES, corpus_paths=index.doc_paths))
    if args.write is not None:
        write_golden(args.write, snapshot)
        print(f"wrote {args.write}; review its diff and commit it with the regenerated results/")
        return 0
    problems = compare_golden(snapshot, json.loads(GOLDEN_FILE.read_text()))
    for problem in problems:
        print(f"golden: {problem}", file=sys.stderr)
    print("golden set holds" if not problems else f"golden set broken: {len(problems)} problem(s)")
    return 1 if problems else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="ragcal", description="Calibrate when a RAG system should abstain.")
    commands = parser.add_subparsers(dest="command", required=True)

    score = commands.add_parser("score", help="write the per-query score table (and TREC runs)")
    score.add_argument("queries", type=Path, help="labeled query CSV: id,query,answerable,slice,gold")
    score.add_argument("--out", type=Path, required=True, help="score table CSV to write")
    score.add_argument("--runs", type=Path, default=None, help="folder for TREC run files, one per retriever")
    _add_index_options(score)

    chunks = commands.add_parser(
        "chunks",
        help="write what would be indexed, one JSON object per chunk (no model needed)",
        description="Load and chunk a Markdown folder as 'ragcal score' does and write one JSON object per line: "
        "chunk_id, path, heading_path, text (the indexed text), n_tokens, oversized.",
    )
    chunks.add_argument("corpus", type=Path, help="Markdown folder")
    chunks.add_argument("--out", type=Path, required=True, help="JSON-lines file to write")
    _add_chunking_options(chunks)

    evaluate = commands.add_parser("evaluate", help="retrieval metrics (page level, with intervals) from TREC runs")
    evaluate.add_argument("queries", type=Path, help="labeled query CSV with gold pages")
    evaluate.add_argument("--runs", type=Path, required=True, help="folder of *.run files (from ragcal score --runs)")
    evaluate.add_argument("--out", type=Path, required=True, help="CSV to write")
    evaluate.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    evaluate.add_argument("--seed", type=int, default=0)

    calibrate = commands.add_parser(
        "calibrate",
        help="fit a threshold on a score table and show the per-slice outcome",
        description="Works on any CSV with 'answerable' (true/false), 'slice' and a numeric signal column, "
        "for instance scores logged by a production system.",
    )
    calibrate.add_argument("scores", type=Path, help="score table CSV")
    calibrate.add_argument("--signal", default="dense_top1", help="signal column (default dense_top1)")
    calibrate.add_argument(
        "--rule",
        action="append",
        default=None,
        help="threshold rule, repeatable (default keep@1.0); one of: "
        + "; ".join(f"{name}@X: {meaning}" for name, meaning in _rules().items()),
    )
    calibrate.add_argument(
        "--delta", type=float, default=0.1, help="1 - confidence of the guarantee rules (default 0.1)"
    )
    calibrate.add_argument(
        "--lower-is-answerable",
        action="store_true",
        help="the signal is low for answerable queries (default: registry direction, else high)",
    )
    calibrate.add_argument(
        "--heldout",
        type=int,
        default=0,
        metavar="N",
        help="also fit on half of each slice and score the other half, over N random splits",
    )
    calibrate.add_argument("--seed", type=int, default=0)

    golden = commands.add_parser("golden", help="check (or re-baseline) the pinned golden-set scores")
    golden.add_argument(
        "--write",
        type=Path,
        default=None,
        metavar="FILE",
        help="write a new baseline to FILE instead of checking tests/golden/fastapi_minilm.json",
    )
    golden.add_argument("--cache-dir", type=Path, default=None, help="embedding cache folder")

    reproduce = commands.add_parser("reproduce", help="the main job: rebuild results/ for the bundled data")
    reproduce.add_argument("--results", type=Path, default=Path("results"), help="output folder (default results/)")
    reproduce.add_argument("--cache-dir", type=Path, default=None, help="embedding cache folder")
    reproduce.add_argument(
        "--skip-notebooks",
        action="store_true",
        help="write results/ only; do not execute the notebooks (which write figures/)",
    )

    args = parser.parse_args(argv)
    try:
        if args.command == "score":
            table = _score(args.queries, args.out, args.runs, args)
            print(f"wrote {args.out} ({len(table)} queries, {table.shape[1] - 4} signals)")
            _print_slice_summary(table)
        elif args.command == "chunks":
            _chunks(args)
        elif args.command == "evaluate":
            from ._io import atomic_write_text
            from .queries import load_queries
            from .reproduce import evaluate_runs

            table = evaluate_runs(
                args.runs, load_queries(args.queries), n_resamples=args.resamples, random_state=args.seed
            )
            atomic_write_text(args.out, table.to_csv(index=False, float_format="%.4f"))
            print(table.to_string(index=False, float_format=lambda value: f"{value:.3f}"))
        elif args.command == "calibrate":
            _calibrate(args)
        elif args.command == "golden":
            return _golden(args)
        elif args.command == "reproduce":
            from .embedding import Embedder
            from .reproduce import reproduce

            tables = reproduce(args.results, embedder=Embedder(cache_dir=args.cache_dir))
            _print_slice_summary(tables["scores"])
            if not args.skip_notebooks:
                from .notebooks import execute_notebooks

                execute_notebooks()
                print("figures written to figures/ (PNG and SVG); executed notebooks in notebooks/*.ipynb")
    except (QueryFileError, CorpusError, ValueError) as error:
        print(f"ragcal: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
