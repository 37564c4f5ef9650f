"""Scale benchmark: BM25 and dense search on large synthetic corpora, large score logs, and pgvector.

Run with ``.venv/bin/python benchmarks/bench_scale.py [--quick] [--json OUT]``. Every
comparison runs side by side in one process and prints a ratio; nothing is asserted.

1. BM25: the sparse backend against rank-bm25 (the reference). A synthetic corpus is drawn
   from the bundled FastAPI docs (seeded): chunk lengths from its chunks, words from its
   vocabulary with their frequencies; queries from the words of the bundled labeled
   questions. The sparse backend indexes and searches the whole corpus; rank-bm25 a subset
   it can finish, where both run and their scores are compared.
2. Dense: exact faiss on the large synthetic vector corpus (``ragcal.retrieval.approximate``),
   then the gating-flip study: HNSW and IVF against exact search at a ``keep@0.95``
   threshold fitted on exact scores, on that corpus and on the bundled labeled sets.
3. Score logs: ``read_score_table`` + ``calibrate`` (every rule, AUC intervals, sweep)
   on 1,000,000 rows, and 10,000,000 without ``--quick``; the ``ragcal calibrate`` command
   on the same file, in a fresh process.
4. pgvector: a throw-away PostgreSQL (pgserver), the FastAPI chunks with their MiniLM
   embeddings, HNSW, every labeled question: top-10 overlap with faiss exact, decisions.

``--quick`` (under 2 minutes): 50,000 BM25 chunks and 200 queries (rank-bm25 on 5,000
and 50), 20,000 vectors for the dense study, 1,000,000 log rows, FastAPI only. The full
run: 200,000 chunks and 1,000 queries (rank-bm25 on 20,000 and 100), 200,000 vectors,
10,000,000 log rows too, both bundled corpora.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import psutil

from ragcal.calibration import fit_threshold
from ragcal.retrieval import BM25Retriever, DenseRetriever
from ragcal.retrieval.ann import DenseIndexSpec
from ragcal.retrieval.approximate import decision_flips, synthetic_corpus, top1_comparison, topk_overlap
from ragcal.retrieval.bm25 import tokenize

RULES = ["keep@0.95", "recall_guarantee@0.95", "false_answer_guarantee@0.1", "min_cost@5"]


def timed(function):
    start = time.perf_counter()
    value = function()
    return time.perf_counter() - start, value


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def measured_build(function):
    """Seconds and resident-memory growth of one build (RSS after minus before; a rough size of what it keeps)."""
    before = rss_mb()
    seconds, value = timed(function)
    return seconds, rss_mb() - before, value


# --------------------------------------------------------------------------- 1. BM25


def synthetic_bm25_corpus(n_chunks, n_queries, random_state=0):
    from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE, FASTAPI_QUERIES, RUST_BOOK_QUERIES
    from ragcal.retrieval.index import chunk_corpus

    rng = np.random.default_rng(random_state)
    chunks = chunk_corpus(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE)[1]
    lengths = np.array([len(tokenize(chunk.text)) for chunk in chunks])
    frequencies = Counter(token for chunk in chunks for token in tokenize(chunk.text))
    words = list(frequencies)
    counts = np.array([frequencies[word] for word in words], dtype=float)
    drawn_lengths = np.maximum(rng.choice(lengths, size=n_chunks), 1)
    drawn = rng.choice(len(words), size=int(drawn_lengths.sum()), p=counts / counts.sum())
    bounds = np.concatenate([[0], np.cumsum(drawn_lengths)])
    texts = [" ".join([words[w] for w in drawn[bounds[i] : bounds[i + 1]].tolist()]) for i in range(n_chunks)]
    query_words = [
        token
        for path in (FASTAPI_QUERIES, RUST_BOOK_QUERIES)
        for text in pd.read_csv(path)["query"]
        for token in tokenize(text)
    ]
    queries = [
        " ".join(query_words[w] for w in rng.integers(0, len(query_words), size=rng.integers(3, 11)).tolist())
        for _ in range(n_queries)
    ]
    return [f"synthetic/page{i // 8}.md#{i % 8}" for i in range(n_chunks)], texts, queries


def bench_bm25(n_chunks, n_queries, subset_chunks, subset_queries):
    print(f"\n== BM25: {n_chunks:,} synthetic chunks, {n_queries:,} queries (raw tokenizer, top 100)")
    seconds, (ids, texts, queries) = timed(lambda: synthetic_bm25_corpus(n_chunks, n_queries))
    print(
        f"  corpus drawn in {seconds:.1f} s; mean chunk length {np.mean([t.count(' ') + 1 for t in texts]):.0f} tokens"
    )
    index_s, index_mb, sparse = measured_build(lambda: BM25Retriever(ids, texts, backend="sparse"))
    query_s, _ = timed(lambda: sparse.search(queries, k=100))
    matrix = sparse.bm25.weights
    matrix_mb = (matrix.data.nbytes + matrix.indices.nbytes + matrix.indptr.nbytes) / 2**20
    print(
        f"  sparse: index {index_s:6.1f} s, {n_queries} queries {query_s:6.2f} s ({1000 * query_s / n_queries:.1f} ms/query)"
    )
    print(
        f"          memory: +{index_mb:.0f} MB resident, of which the CSC matrix {matrix_mb:.0f} MB ({matrix.nnz:,} postings)"
    )

    print(f"  side by side on a subset rank-bm25 can finish: {subset_chunks:,} chunks, {subset_queries} queries")
    sub_ids, sub_texts, sub_queries = ids[:subset_chunks], texts[:subset_chunks], queries[:subset_queries]
    sparse_index_s, sparse_mb, sub_sparse = measured_build(lambda: BM25Retriever(sub_ids, sub_texts, backend="sparse"))
    reference_index_s, reference_mb, reference = measured_build(
        lambda: BM25Retriever(sub_ids, sub_texts, backend="rank_bm25")
    )
    sparse_query_s, ours = timed(lambda: sub_sparse.search(sub_queries, k=100))
    reference_query_s, theirs = timed(lambda: reference.search(sub_queries, k=100))
    same_ranking = all(a.chunk_ids == b.chunk_ids for a, b in zip(ours, theirs))
    max_diff = max((float(np.max(np.abs(a.scores - b.scores))) for a, b in zip(ours, theirs) if len(a)), default=0.0)
    print(f"  rank-bm25: index {reference_index_s:6.1f} s (+{reference_mb:.0f} MB), queries {reference_query_s:6.2f} s")
    print(f"  sparse:    index {sparse_index_s:6.1f} s (+{sparse_mb:.0f} MB), queries {sparse_query_s:6.2f} s")
    speedup = reference_query_s / sparse_query_s
    print(
        f"  query speed-up: {speedup:.0f}x; index time ratio rank-bm25/sparse {reference_index_s / sparse_index_s:.2f}; "
        f"same top-100 rankings: {same_ranking}; max |score difference| {max_diff:.3g}"
    )
    bundled_diff = bundled_bm25_difference()
    print(f"  bundled FastAPI corpus, both tokenizers, every labeled query: max |score difference| {bundled_diff:.3g}")
    return {
        "bm25_chunks": n_chunks,
        "bm25_queries": n_queries,
        "bm25_index_s": index_s,
        "bm25_query_s": query_s,
        "bm25_index_rss_mb": index_mb,
        "bm25_matrix_mb": matrix_mb,
        "bm25_subset_chunks": subset_chunks,
        "bm25_subset_queries": subset_queries,
        "bm25_speedup_vs_rank_bm25": speedup,
        "bm25_index_ratio_rank_bm25_over_sparse": reference_index_s / sparse_index_s,
        "bm25_same_rankings": same_ranking,
        "bm25_max_abs_score_diff": max(max_diff, bundled_diff),
    }


def bundled_bm25_difference() -> float:
    from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE, FASTAPI_QUERIES
    from ragcal.retrieval.index import chunk_corpus

    chunks = chunk_corpus(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE)[1]
    queries = pd.read_csv(FASTAPI_QUERIES)["query"].tolist()
    worst = 0.0
    for variant in ("raw", "stopwords"):
        ours = BM25Retriever.from_chunks(chunks, variant=variant).search(queries, k=100)
        theirs = BM25Retriever.from_chunks(chunks, variant=variant, backend="rank_bm25").search(queries, k=100)
        for a, b in zip(ours, theirs):
            if a.chunk_ids != b.chunk_ids:
                return float("inf")
            if len(a):
                worst = max(worst, float(np.max(np.abs(a.scores - b.scores))))
    return worst


# --------------------------------------------------------------------------- 2. dense


APPROXIMATE = {
    "hnsw M=32 ef=64 (default)": DenseIndexSpec("hnsw"),
    "hnsw M=32 ef=16": DenseIndexSpec("hnsw", ef_search=16),
    "ivf nprobe=8 (default)": DenseIndexSpec("ivf"),
    "ivf nprobe=1": DenseIndexSpec("ivf", nprobe=1),
}


def flip_rows(label, exact, approximate_results, threshold, answerable, **extra):
    comparison = top1_comparison(exact, approximate_results)
    flips = decision_flips(comparison["exact_top1"], comparison["approximate_top1"], {"keep@0.95": threshold}).iloc[0]
    answerable = np.asarray(answerable, dtype=bool)
    return {
        "corpus": label,
        **extra,
        "queries": len(exact),
        "top1_differs": float((~comparison["same_top1"]).mean()),
        "top1_max_abs_error": float(comparison["top1_error"].abs().max()),
        "top1_mean_error": float(comparison["top1_error"].mean()),
        "threshold": threshold,
        "flips": int(flips["flips"]),
        "flip_rate": float(flips["flip_rate"]),
        "flip_rate_high": float(flips["flip_rate_high"]),
        "answer_to_refuse": int(flips["answer_to_refuse"]),
        "refuse_to_answer": int(flips["refuse_to_answer"]),
        "answerable_flipped": int(
            ((comparison["exact_top1"] >= threshold) != (comparison["approximate_top1"] >= threshold))[answerable].sum()
        ),
    }


def bench_dense(n_vectors, n_queries, corpora):
    print(f"\n== Dense: {n_vectors:,} synthetic unit vectors (dim 384), {n_queries:,} queries, top 10")
    corpus = synthetic_corpus(n_vectors, n_queries, random_state=0)
    flat_s, flat_mb, flat = measured_build(lambda: DenseRetriever(corpus.chunk_ids, corpus.embeddings))
    search_s, exact = timed(lambda: flat.search_vectors(corpus.queries, k=10))
    print(f"  flat (exact): index {flat_s:.1f} s (+{flat_mb:.0f} MB), {n_queries} queries {search_s:.2f} s")
    exact_top1 = np.array([result.score_at(1) for result in exact])
    threshold = fit_threshold("keep@0.95", exact_top1, corpus.answerable)
    rows, timings = [], {"dense_chunks": n_vectors, "dense_flat_index_s": flat_s, "dense_flat_query_s": search_s}
    built = {}
    for name, spec in APPROXIMATE.items():
        # ef_search and nprobe are query-time parameters: one build per index kind, searched with each setting.
        if spec.kind not in built:
            built[spec.kind] = measured_build(
                lambda spec=spec: DenseRetriever(corpus.chunk_ids, corpus.embeddings, index=spec)
            )
        build_s, build_mb, retriever = built[spec.kind]
        retriever.index_spec = spec
        query_s, approximate = timed(lambda retriever=retriever: retriever.search_vectors(corpus.queries, k=10))
        row = flip_rows("synthetic", exact, approximate, threshold, corpus.answerable, index=name)
        row.update({"build_s": build_s, "query_s": query_s, "build_rss_mb": build_mb})
        rows.append(row)
        print(
            f"  {name:<26} build {build_s:6.1f} s, queries {query_s:5.2f} s; top-1 differs {row['top1_differs']:.1%}, "
            f"max error {row['top1_max_abs_error']:.4f}; flips at keep@0.95 ({threshold:.3f}): {row['flips']} "
            f"({row['flip_rate']:.2%}, 95% upper {row['flip_rate_high']:.2%})"
        )
    for corpus_name in corpora:
        rows.extend(bundled_flip_study(corpus_name))
    return rows, timings


_BUNDLED_CACHE = {}


def bundled_index(corpus_name):
    from ragcal import build_index, load_queries
    from ragcal.datasets import BUNDLED

    if corpus_name not in _BUNDLED_CACHE:
        bundled = BUNDLED[corpus_name]
        index = build_index(bundled.corpus, exclude=bundled.exclude)
        queries = load_queries(bundled.queries, corpus_paths=index.doc_paths)
        query_vectors = index.dense.embedder.encode(queries["query"].tolist(), show_progress_bar=False)
        _BUNDLED_CACHE[corpus_name] = (index, queries, query_vectors)
    return _BUNDLED_CACHE[corpus_name]


def bundled_flip_study(corpus_name):
    index, queries, query_vectors = bundled_index(corpus_name)
    embeddings = index.dense.index.reconstruct_n(0, index.dense.index.ntotal)
    exact = index.dense.search_vectors(query_vectors, k=10)
    exact_top1 = np.array([result.score_at(1) for result in exact])
    threshold = fit_threshold("keep@0.95", exact_top1, queries["answerable"])
    rows, built = [], {}
    for name, spec in APPROXIMATE.items():
        if spec.kind not in built:
            built[spec.kind] = DenseRetriever(index.dense.chunk_ids, embeddings, index=spec)
        retriever = built[spec.kind]
        retriever.index_spec = spec
        row = flip_rows(
            corpus_name,
            exact,
            retriever.search_vectors(query_vectors, k=10),
            threshold,
            queries["answerable"],
            index=name,
        )
        rows.append(row)
        print(
            f"  {corpus_name} ({len(embeddings)} chunks, {len(queries)} labeled) {name:<26} top-1 differs "
            f"{row['top1_differs']:.1%}, max error {row['top1_max_abs_error']:.4f}, flips {row['flips']} "
            f"(95% upper {row['flip_rate_high']:.1%})"
        )
    return rows


# --------------------------------------------------------------------------- 3. score logs


def write_log(path, n_rows, random_state=0):
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    rng = np.random.default_rng(random_state)
    slices = rng.choice(np.array(["answerable", "near-domain", "unrelated"]), size=n_rows, p=[0.5, 0.25, 0.25])
    centre = np.select([slices == "answerable", slices == "near-domain"], [0.62, 0.43], 0.22)
    table = pa.table(
        {
            "id": pa.array(np.char.add("q", np.arange(n_rows).astype(str))),
            "answerable": slices == "answerable",
            "slice": slices,
            "dense_top1": rng.normal(centre, 0.08),  # full precision: every score distinct
        }
    )
    pa_csv.write_csv(table, path)


def run_with_peak_memory(command):
    """Run a command; return its exit code, its stderr and its peak resident memory in MB (polled every 20 ms)."""
    with tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, env=os.environ)
        watched, peak = psutil.Process(process.pid), 0
        while process.poll() is None:
            try:
                peak = max(peak, watched.memory_info().rss)
            except psutil.NoSuchProcess:
                break
            time.sleep(0.02)
        stderr.seek(0)
        return process.wait(), stderr.read().decode(errors="replace"), peak / 2**20


def bench_calibrate(row_counts):
    results = {}
    for n_rows in row_counts:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "log.csv"
            write_s, _ = timed(lambda: write_log(path, n_rows))
            size_mb = path.stat().st_size / 2**20
            print(f"\n== Score log: {n_rows:,} rows, {size_mb:.0f} MB CSV (written in {write_s:.1f} s)")
            from ragcal.calibration import calibrate
            from ragcal.score_tables import read_score_table

            read_s, table = timed(lambda: read_score_table(path, ["dense_top1"]))
            calibrate_s, result = timed(lambda: calibrate(table, "dense_top1", RULES))
            print(f"  in process: read {read_s:.1f} s + calibrate {calibrate_s:.1f} s = {read_s + calibrate_s:.1f} s")
            print(f"  sweep: {result.sweep_scheme}; AUC interval: {result.auc['interval'].iloc[0]}")
            command = [sys.executable, "-m", "ragcal", "calibrate", str(path), "--signal", "dense_top1"]
            command += [part for rule in RULES for part in ("--rule", rule)] + [
                "--sweep",
                str(Path(folder) / "sweep.csv"),
            ]
            cli_s, (returncode, stderr, peak_mb) = timed(lambda command=command: run_with_peak_memory(command))
            status = "ok" if returncode == 0 else f"exit {returncode}: {stderr[-300:]}"
            print(
                f"  ragcal calibrate (fresh process, 4 rules, AUC intervals, --sweep): {cli_s:.1f} s, {status}; "
                f"peak resident memory {peak_mb:.0f} MB"
            )
            key = "1m" if n_rows == 1_000_000 else f"{n_rows // 1_000_000}m"
            results.update(
                {
                    f"calibrate_{key}_rows_s": read_s + calibrate_s,
                    f"calibrate_{key}_rows_cli_s": cli_s,
                    f"calibrate_{key}_rows_cli_peak_mb": peak_mb,
                }
            )
    return results


# --------------------------------------------------------------------------- 4. pgvector


def bench_pgvector():
    import pgserver

    from ragcal.retrieval.pgvector import PgvectorRetriever

    index, queries, query_vectors = bundled_index("fastapi")
    embeddings = index.dense.index.reconstruct_n(0, index.dense.index.ntotal)
    exact = index.dense.search_vectors(query_vectors, k=10)
    exact_top1 = np.array([result.score_at(1) for result in exact])
    threshold = fit_threshold("keep@0.95", exact_top1, queries["answerable"])
    print(
        f"\n== pgvector: FastAPI, {len(embeddings)} chunks, {len(queries)} labeled questions, HNSW (m=16, ef_construction=64)"
    )
    data_dir = tempfile.mkdtemp(prefix="ragcal-pg-")
    server = None
    try:
        start_s, server = timed(lambda: pgserver.get_server(data_dir, cleanup_mode="delete"))
        with PgvectorRetriever(server.get_uri(), table="fastapi_chunks") as retriever:
            load_s, _ = timed(lambda: retriever.load(index.dense.chunk_ids, embeddings))
            query_s, through_pg = timed(lambda: retriever.search_vectors(query_vectors, k=10))
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(data_dir, ignore_errors=True)
    overlap = float(np.nanmean(topk_overlap(exact, through_pg, k=10)))
    row = flip_rows("fastapi", exact, through_pg, threshold, queries["answerable"], index="pgvector hnsw ef_search=100")
    print(f"  server start {start_s:.1f} s, load + HNSW build {load_s:.1f} s, {len(queries)} queries {query_s:.2f} s")
    print(
        f"  top-10 overlap with faiss exact {overlap:.4f}; top-1 differs {row['top1_differs']:.1%}, max |top-1 "
        f"difference| {row['top1_max_abs_error']:.2g}; decision flips at keep@0.95 ({threshold:.4f}): {row['flips']}"
    )
    return {
        "pgvector_top10_overlap_vs_faiss": overlap,
        "pgvector_top1_max_abs_diff": row["top1_max_abs_error"],
        "pgvector_decision_flips": row["flips"],
        "pgvector_load_and_index_s": load_s,
    }, row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes; about 2 minutes")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT", help="write the numbers as JSON")
    parser.add_argument("--skip", action="append", default=[], choices=("bm25", "dense", "calibrate", "pgvector"))
    args = parser.parse_args(argv)
    print(
        f"bench_scale ({'quick' if args.quick else 'full'}), {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GB"
    )
    numbers = {"mode": "quick" if args.quick else "full"}
    total_s = time.perf_counter()
    if "bm25" not in args.skip:
        sizes = (50_000, 200, 5_000, 50) if args.quick else (200_000, 1_000, 20_000, 100)
        numbers.update(bench_bm25(*sizes))
    flip_table = []
    if "dense" not in args.skip:
        rows, timings = bench_dense(
            20_000 if args.quick else 200_000, 1_000, ["fastapi"] if args.quick else ["fastapi", "rust-book"]
        )
        flip_table.extend(rows)
        numbers.update(timings)
        default = [row for row in rows if row["corpus"] == "synthetic" and row["index"].startswith("hnsw M=32 ef=64")][
            0
        ]
        numbers["hnsw_top1_max_abs_error"] = default["top1_max_abs_error"]
        numbers["hnsw_decision_flip_rate"] = default["flip_rate"]
        numbers["hnsw_build_s"] = default["build_s"]
        bundled = [row for row in rows if row["corpus"] != "synthetic" and row["index"].startswith("hnsw M=32 ef=64")]
        numbers["hnsw_bundled_decision_flips"] = sum(row["flips"] for row in bundled)
    if "calibrate" not in args.skip:
        numbers.update(bench_calibrate([1_000_000] if args.quick else [1_000_000, 10_000_000]))
    if "pgvector" not in args.skip:
        pg_numbers, pg_row = bench_pgvector()
        numbers.update(pg_numbers)
        flip_table.append(pg_row)
    if flip_table:
        print("\n== Gating-flip study (top 10; keep@0.95 fitted on exact scores)")
        with pd.option_context("display.width", 250, "display.max_columns", 30):
            columns = [
                "corpus",
                "index",
                "queries",
                "top1_differs",
                "top1_max_abs_error",
                "flips",
                "flip_rate",
                "flip_rate_high",
                "answer_to_refuse",
                "refuse_to_answer",
                "answerable_flipped",
            ]
            print(pd.DataFrame(flip_table)[columns].round(4).to_string(index=False))
        numbers["flip_study"] = flip_table
    numbers["total_s"] = time.perf_counter() - total_s
    print(f"\ntotal {numbers['total_s']:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(numbers, indent=2, default=float) + "\n")
        print(f"numbers written to {args.json}")


if __name__ == "__main__":
    main()
