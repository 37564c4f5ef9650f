"""``ragcal score``, ``ragcal chunks`` and ``ragcal evaluate``: from a corpus and labeled questions to tables."""

from __future__ import annotations

import sys
from pathlib import Path

from ._options import (
    access_options,
    add_access_options,
    add_chunking_options,
    add_index_options,
    add_rerank_options,
    add_signals_module,
    check_rerank_depth,
    exclude_option,
    print_slice_summary,
    report_visibility,
)
from .join import add_extra_signals_options, apply_extra_signals, read_extra_signals


def add_parsers(commands) -> None:
    score = commands.add_parser("score", help="write the per-query score table (and TREC runs)")
    score.add_argument("queries", type=Path, help="labeled query CSV: id,query,answerable,slice,gold")
    score.add_argument("--out", type=Path, required=True, help="score table CSV to write")
    score.add_argument("--runs", type=Path, default=None, help="folder for TREC run files, one per retriever")
    add_index_options(score)
    add_rerank_options(score)
    add_access_options(score)
    add_signals_module(score)
    add_extra_signals_options(score)
    score.set_defaults(run=run_score)

    chunks = commands.add_parser(
        "chunks",
        help="write what would be indexed, one JSON object per chunk (no model needed)",
        description="Load and chunk a Markdown folder as 'ragcal score' does and write one JSON object per line: "
        "chunk_id, path, heading_path, text (the indexed text), n_tokens, oversized, access_level.",
    )
    chunks.add_argument("corpus", type=Path, help="Markdown folder")
    chunks.add_argument("--out", type=Path, required=True, help="JSON-lines file to write")
    add_chunking_options(chunks)
    chunks.add_argument(
        "--access-map", type=Path, default=None, metavar="FILE", help="CSV path_glob,level for pages without front matter"
    )
    chunks.add_argument("--default-access", default="public", metavar="LEVEL", help="level of unplaced pages")
    chunks.set_defaults(run=run_chunks)

    evaluate = commands.add_parser("evaluate", help="retrieval metrics (page level, with intervals) from TREC runs")
    evaluate.add_argument("queries", type=Path, help="labeled query CSV with gold pages")
    evaluate.add_argument("--runs", type=Path, required=True, help="folder of *.run files (from ragcal score --runs)")
    evaluate.add_argument("--out", type=Path, required=True, help="CSV to write")
    evaluate.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.set_defaults(run=run_evaluate)


def run_score(args) -> None:
    from ..runs import write_trec_runs
    from ..score_tables import write_score_table
    from ..scoring import score_query_file

    check_rerank_depth(args)
    logged = read_extra_signals(args)  # a bad --extra-signals file fails before the index is built
    # score_query_file validates the query file against the corpus before any expensive work or any write.
    table, index, retrieved = score_query_file(
        args.queries,
        args.corpus,
        model=args.model,
        chunker=args.chunker,
        max_tokens=args.max_tokens,
        window=args.window,
        expand_includes=not args.no_includes,
        exclude=exclude_option(args),
        cache_dir=args.cache_dir,
        use_cache=not args.no_cache,
        reranker=args.reranker,
        rerank_depth=args.rerank_depth if args.rerank_depth is not None else 50,
        **access_options(args),
        dense_index=args.dense_index,
    )
    report_visibility(index, args.queries)
    stats = getattr(index.dense.embedder, "stats", None)
    if stats:
        print(
            f"ragcal score: {stats['cached']:,} embeddings read from the cache, {stats['encoded']:,} encoded",
            file=sys.stderr,
        )
    config = {**index.config, "queries": str(args.queries)}
    table, config = apply_extra_signals(table, config, logged, args)
    write_score_table(args.out, table, config=config)
    if args.runs is not None:
        write_trec_runs(args.runs, table["id"], retrieved, config=config)
    print(f"wrote {args.out} ({len(table)} queries, {table.shape[1] - 4} signals)")
    print_slice_summary(table)


def run_chunks(args) -> None:
    """Write the chunks of ``args.corpus`` as JSON lines and print a one-line summary; no model is loaded."""
    import json

    from .._io import atomic_write_text
    from ..access import AccessPolicy
    from ..chunking import chunk_size_summary
    from ..retrieval.index import chunk_corpus

    policy = AccessPolicy.from_options(access_map=args.access_map, default=args.default_access)
    documents, chunks, _ = chunk_corpus(
        args.corpus,
        chunker=args.chunker,
        max_tokens=args.max_tokens,
        window=args.window,
        expand_includes=not args.no_includes,
        exclude=exclude_option(args),
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
                "access_level": level,
            },
            ensure_ascii=False,
        )
        for chunk, level in zip(chunks, policy.levels(chunks))
    ]
    atomic_write_text(args.out, "".join(line + "\n" for line in lines))
    median = chunk_size_summary(chunks).iloc[0]["tokens_median"] if chunks else 0
    oversized = sum(chunk.oversized for chunk in chunks)
    print(
        f"wrote {args.out}: {len(documents)} pages, {len(chunks)} chunks, "
        f"median {median:g} tokens, {oversized} oversized"
    )


def run_evaluate(args) -> None:
    from .._io import atomic_write_text
    from ..queries import load_queries
    from ..runs import evaluate_runs

    table = evaluate_runs(
        args.runs,
        load_queries(args.queries),
        source=str(args.queries),
        n_resamples=args.resamples,
        random_state=args.seed,
    )
    atomic_write_text(args.out, table.to_csv(index=False, float_format="%.4f"))
    print(table.to_string(index=False, float_format=lambda value: f"{value:.3f}"))
