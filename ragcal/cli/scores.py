"""``ragcal score``, ``ragcal chunks`` and ``ragcal evaluate``: from a corpus and labeled questions to tables."""

from __future__ import annotations

import sys
from pathlib import Path

from ..extras import missing_modules, require_extra
from ._options import (
    add_access_options,
    add_chunking_options,
    add_index_options,
    add_judge_options,
    add_rerank_options,
    add_signals_module,
    check_judge_depth,
    check_rerank_depth,
    exclude_option,
    index_arguments_from,
    judge_readers,
    print_slice_summary,
    report_visibility,
)
from .join import add_extra_signals_options, apply_extra_signals, read_extra_signals


def add_parsers(commands) -> None:
    score = commands.add_parser(
        "score",
        help="write the per-query score table (and TREC runs)",
        description="Score a labeled query file against a Markdown corpus (--corpus), or score your own system's "
        "exported candidates without building an index: --candidates run.trec --passages passages.jsonl with the "
        "query file, or --candidates FILE.jsonl (a candidates JSONL carries its own labels).",
    )
    score.add_argument(
        "queries", type=Path, nargs="?", default=None, help="labeled query CSV: id,query,answerable,slice,gold"
    )
    score.add_argument("--out", type=Path, required=True, help="score table CSV to write")
    score.add_argument("--runs", type=Path, default=None, help="folder for TREC run files, one per retriever")
    add_index_options(score)
    add_rerank_options(score)
    add_judge_options(score)
    add_access_options(score)
    add_signals_module(score)
    add_extra_signals_options(score)
    add_candidate_options(score)
    add_store_options(score)
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


def add_candidate_options(score) -> None:
    """``--candidates``, ``--passages``, ``--run-tag``; and the index options they exclude (with their defaults)."""
    score.add_argument(
        "--candidates",
        type=Path,
        default=None,
        metavar="FILE",
        help="your system's own candidates instead of a corpus: a TREC run (qid Q0 docid rank score tag, with "
        "--passages and the query file) or a candidates JSONL (its own labels); re-scored by dense and BM25 over "
        "the pool of candidates, plus your scores as run_* signals",
    )
    score.add_argument(
        "--passages", type=Path, default=None, metavar="FILE", help="the run's passages: BEIR corpus.jsonl"
    )
    score.add_argument("--run-tag", default=None, metavar="TAG", help="the run to read from a TREC file with several")
    excluded = ("corpus", "chunker", "max_tokens", "window", "no_includes", "exclude", "dense_index")
    excluded += ("reranker", "rerank_depth", "access", "access_map", "default_access")
    options = {dest: ("--" + dest.replace("_", "-"), score.get_default(dest)) for dest in excluded}
    score.set_defaults(corpus_only=options)


FRAMEWORKS = ("langchain", "llamaindex", "haystack")


def add_store_options(score) -> None:
    """``--langchain``, ``--llamaindex``, ``--haystack`` ``module:function``: score through a framework's own store."""
    for framework in FRAMEWORKS:
        score.add_argument(
            f"--{framework}",
            default=None,
            metavar="MODULE:FUNCTION",
            help=f"score through your {framework} store instead of a corpus: MODULE:FUNCTION returns the store (or "
            f"retriever), or ragcal's adapter around it (ragcal.integrations.{framework}); needs ragcal[{framework}]",
        )
    score.add_argument(
        "--store-depth", type=int, default=100, metavar="K", help="documents per question from the store (default 100)"
    )


def run_score(args) -> None:
    from ..runs import write_trec_runs
    from ..score_tables import write_score_table
    from ..scoring import score_query_file

    if any(getattr(args, framework) for framework in FRAMEWORKS):
        return run_score_store(args)
    if args.candidates is not None or args.passages is not None or args.run_tag is not None:
        return run_score_candidates(args)
    require_extra("retrieval", "ragcal score --corpus")
    if args.queries is None:
        raise ValueError("score needs a labeled query file (or --candidates FILE.jsonl, which carries its labels)")
    check_rerank_depth(args)
    check_judge_depth(args)
    logged = read_extra_signals(args)  # a bad --extra-signals file fails before the index is built
    # score_query_file validates the query file against the corpus before any expensive work or any write.
    table, index, retrieved = score_query_file(args.queries, args.corpus, **index_arguments_from(args, args.corpus))
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
    print_judge(config)
    print_slice_summary(table)


def run_score_candidates(args) -> None:
    """``ragcal score --candidates``: re-score exported candidates, write the table, say what was left out."""
    from .._io import sha256_file
    from ..candidate_scoring import score_candidates
    from ..embedding.models import DEFAULT_MODEL
    from ..importers.candidates import read_candidates_jsonl
    from ..importers.trec import read_trec_candidates
    from ..runs import write_trec_runs
    from ..score_tables import write_score_table

    if args.candidates is None:
        raise ValueError("--passages and --run-tag go with --candidates run.trec")
    check_judge_depth(args)
    # Without the retrieval extra, the candidates are re-scored by BM25 and their own scores only (no embedding).
    views = None if not missing_modules("retrieval") else ("bm25_raw", "bm25_stopwords", "run")
    if views is not None and (args.judge is not None or args.model != DEFAULT_MODEL):
        require_extra("retrieval", f"ragcal score --candidates {'--judge' if args.judge is not None else '--model'}")
    given = [option for dest, (option, default) in args.corpus_only.items() if getattr(args, dest) != default]
    if given:
        raise ValueError(
            f"{', '.join(given)} cannot be used with --candidates: candidates are scored without an index of a corpus"
        )
    files = {"candidates": args.candidates}
    if args.passages is not None:
        if args.queries is None:
            raise ValueError("a TREC run carries no question text or labels: give the labeled query CSV too")
        logged = read_extra_signals(args)  # a bad --extra-signals file fails before anything is embedded
        candidates = read_trec_candidates(args.candidates, args.passages, queries=args.queries, tag=args.run_tag)
        files.update(passages=args.passages, queries=args.queries)
    else:
        if args.run_tag is not None or args.queries is not None:
            raise ValueError(
                "--candidates without --passages reads a candidates JSONL, which carries its own labels and scores: "
                "drop the query file and --run-tag, or give the run's --passages"
            )
        if args.extra_signals is not None:
            raise ValueError(
                "--extra-signals needs the labeled query file of a TREC run; for a candidates JSONL, join the logged "
                "signals to the written table with `ragcal join scores.csv FILE --out joined.csv`"
            )
        logged = read_extra_signals(args)  # None; refuses --direction or --allow-missing without a file
        candidates = read_candidates_jsonl(args.candidates)
    readers = judge_readers(args)  # loaded before anything is embedded, so a bad judge fails early
    scores = score_candidates(
        candidates,
        model=args.model,
        cache_dir=args.cache_dir,
        use_cache=not args.no_cache,
        readers=readers,
        views=views if views is None or candidates.has_scores else views[:2],
    )
    config = {**scores.config, "run_tag": args.run_tag}
    config.update({name: str(path) for name, path in files.items()})
    config.update({f"{name}_sha256": sha256_file(path) for name, path in files.items()})
    table, config = apply_extra_signals(scores.table, config, logged, args)
    write_score_table(args.out, table, config=config)
    if args.runs is not None:
        write_trec_runs(args.runs, table["id"], scores.retrieved, config=config)
    computed = list(scores.table.columns[4:])
    print(
        f"wrote {args.out} ({len(table)} queries, {table.shape[1] - 4} signals) from {config['n_pool_passages']:,} candidate "
        f"passages, at most {config['candidate_depth']} per question"
    )
    print(f"computed: {', '.join(computed)}")
    print_judge(config)
    print("corpus-level statistics (BM25 IDF, dense centroids) are those of the candidate pool, not of your corpus")
    for name, reason in scores.left_out.items():
        print(f"left out {name}: {reason}")
    print_slice_summary(table)


def run_score_store(args) -> None:
    """``ragcal score --langchain|--llamaindex|--haystack module:function``: the store's own scores, as a table."""
    from .._io import sha256_file
    from .._params import check_int
    from ..integrations.common import load_factory, score_store, store_retriever
    from ..queries import load_queries
    from ..runs import write_trec_runs
    from ..score_tables import write_score_table

    given = [framework for framework in FRAMEWORKS if getattr(args, framework)]
    if len(given) > 1:
        raise ValueError(f"--{' and --'.join(given)}: score through one store at a time")
    if args.queries is None:
        raise ValueError(f"--{given[0]} needs the labeled query file")
    excluded = {**args.corpus_only, "candidates": ("--candidates", None), "judge": ("--judge", None)}
    others = [option for dest, (option, default) in excluded.items() if getattr(args, dest, default) != default]
    if others:
        raise ValueError(f"{', '.join(others)} cannot be used with --{given[0]}: the store is the corpus and the index")
    framework = given[0]
    depth = check_int(args.store_depth, "--store-depth", "ragcal score", low=1)
    queries = load_queries(args.queries)  # a bad query file fails before the user's store is built
    spec = getattr(args, framework)
    try:
        retriever = store_retriever(framework, load_factory(spec, option=f"--{framework}"))
    except TypeError as error:  # the function returned something the adapter cannot read
        raise ValueError(f"--{framework} {spec}: {error}") from None
    table, config, retrieved = score_store(queries, retriever, k=depth)
    config.update(queries=str(args.queries), queries_sha256=sha256_file(args.queries), factory=getattr(args, framework))
    write_score_table(args.out, table, config=config)
    if args.runs is not None:
        write_trec_runs(args.runs, table["id"], retrieved, config=config)
    print(f"wrote {args.out} ({len(table)} queries, {table.shape[1] - 4} signals) through {config['store']}")
    print(f"score scale: {config['score_scale']} (a gate fitted on this table is refused on any other)")
    print_slice_summary(table)


def print_judge(config: dict) -> None:
    """One line on the judge behind the judge_* columns, when there is one."""
    if config.get("judge_fingerprint"):
        print(
            f"judge {config['judge_fingerprint']}: read the top {config['judge_depth']} dense passages of each "
            "question (judge_* signals; a gate on them needs this very judge)"
        )


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
