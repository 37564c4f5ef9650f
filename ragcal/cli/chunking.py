"""``ragcal sweep-chunking``: compare chunkings on your own corpus, with paired intervals against the default."""

from __future__ import annotations

import sys
from pathlib import Path

from ..datasets import FASTAPI_CORPUS
from ._options import DEFAULT_MODEL_NAME, MODEL_HELP, exclude_option


def add_parsers(commands) -> None:
    sweep_chunks = commands.add_parser(
        "sweep-chunking",
        help="compare chunkings on your corpus: retrieval and AUCs with paired intervals against the default",
        description="Builds the index once per chunking variant (embeddings are cached, so unchanged chunks are "
        "embedded once) and compares Recall@5, MRR@10, dense_top1 AUC and bm25_top1_raw AUC with paired bootstrap "
        "intervals against the baseline.",
    )
    sweep_chunks.add_argument("queries", type=Path, help="labeled query CSV: id,query,answerable,slice,gold")
    sweep_chunks.add_argument(
        "--corpus", type=Path, default=FASTAPI_CORPUS, help="Markdown folder (default: the bundled FastAPI docs)"
    )
    sweep_chunks.add_argument("--out", type=Path, default=None, help="CSV to write (default: print only)")
    sweep_chunks.add_argument(
        "--max-tokens",
        default="128,256,512,whole",
        help="heading-aware limits, comma-separated (default 128,256,512,whole)",
    )
    sweep_chunks.add_argument("--windows", default="500", help="fixed-size windows, comma-separated (default 500)")
    sweep_chunks.add_argument(
        "--baseline", default="headings-256", help="variant to compare against (default headings-256)"
    )
    sweep_chunks.add_argument("--model", default=DEFAULT_MODEL_NAME, help=MODEL_HELP)
    sweep_chunks.add_argument("--exclude", action="append", default=None, metavar="PATH", help="leave a page out")
    sweep_chunks.add_argument("--cache-dir", type=Path, default=None, help="embedding cache folder")
    sweep_chunks.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    sweep_chunks.set_defaults(run=run_sweep_chunking)


def run_sweep_chunking(args) -> None:
    from .._io import atomic_write_text
    from ..chunk_sweep import chunking_verdict, format_sweep, parse_variants, sweep_chunking
    from ..corpus import load_corpus
    from ..embedding import load_embedder
    from ..queries import load_queries

    variants = parse_variants(args.max_tokens, args.windows)
    if args.baseline not in variants:
        raise ValueError(f"--baseline {args.baseline!r} is not among the variants: {', '.join(variants)}")
    exclude = exclude_option(args)
    documents = load_corpus(args.corpus, expand_includes=False, exclude=exclude)  # validates queries before embedding
    queries = load_queries(args.queries, corpus_paths={document.path for document in documents})
    table = sweep_chunking(
        queries,
        corpus_dir=args.corpus,
        embedder=load_embedder(args.model, cache_dir=args.cache_dir),
        variants=variants,
        baseline=args.baseline,
        exclude=exclude,
        n_resamples=args.resamples,
        log=lambda message: print(message, file=sys.stderr),
    )
    if args.out is not None:
        atomic_write_text(args.out, table.to_csv(index=False, float_format="%.4f"))
        print(f"wrote {args.out}")
    print(format_sweep(table, default=args.baseline))
    print()
    print(chunking_verdict({str(args.corpus): table}, default=args.baseline)[1])
