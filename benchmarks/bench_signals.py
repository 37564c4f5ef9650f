"""Signal benchmark: what the per-query diagnostics and every signal add to retrieval, for 1,000 queries.

Run with ``.venv/bin/python benchmarks/bench_signals.py``. Both sides run interleaved in one process on the
bundled FastAPI index, best of several repeats; the ratio is the number to read (issue 20, item 4: at most +10%
over retrieval). Nothing is asserted.

- retrieval: ``index.retrieve(queries, diagnostics=False)``, no score table;
- retrieval + signals: ``index.retrieve(queries)`` (which attaches each retriever's diagnostics, computed for the
  whole batch) and ``score_table`` with every registered signal (but ``rerank_*``: no reranker runs here).

The 1,000 queries are the two bundled labeled sets, repeated. The script measures twice: with their embeddings
from the embedding cache (retrieval as cheap as it gets, so the ratio is the least flattering one), then as new
questions that retrieval must embed, which is what a deployed gate sees. With the cache it also times the two
parts of the difference on the same retrieved lists, ``diagnostic_rows`` (the diagnostics ``retrieve`` stamps on its
results) and ``score_table``: on two shared cores retrieval's own time varies by more than the difference, so that
sum is the steadier estimate of what is added.

Issue 21 added the query-performance predictors (:mod:`ragcal.signals.qpp`) and the diagnostics they read. Every line is
printed twice: for the 19 older signals with the older diagnostics (``qpp=False``, issue 20's measurement, kept
reproducible) and for all signals with all diagnostics.
"""

import functools
import time

import pandas as pd

import ragcal.retrieval.index as index_module

from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE, FASTAPI_QUERIES, RUST_BOOK_QUERIES
from ragcal.retrieval.diagnostics.registry import diagnostic_rows
from ragcal.retrieval.index import build_index
from ragcal.scoring import score_table
from ragcal.signals import QPP_SIGNALS, SIGNALS

N_QUERIES = 1000
REPEATS = 10
FRESH_REPEATS = 3
GOAL = 0.10


def queries_table(n):
    texts = pd.concat([pd.read_csv(path)["query"] for path in (FASTAPI_QUERIES, RUST_BOOK_QUERIES)], ignore_index=True)
    texts = pd.concat([texts] * (n // len(texts) + 1), ignore_index=True)[:n]
    return pd.DataFrame({"id": [f"q{i}" for i in range(n)], "query": texts, "answerable": True, "slice": "answerable"})


def timed(function):
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def best_of(functions, repeats):
    """Best time of each function, the functions run in turn ``repeats`` times (interleaved: load hits all alike)."""
    times = {name: [] for name in functions}
    for _ in range(repeats):
        for name, function in functions.items():
            times[name].append(timed(function))
    return {name: min(values) for name, values in times.items()}


def report(best, goal=GOAL):
    print(f"  retrieval (diagnostics=False, no score table):      {best['retrieval']:7.3f} s")
    for which in ("older", "all"):
        added = best[which] / best["retrieval"] - 1
        verdict = "met" if added <= goal else "NOT met"
        label = "19 older signals, qpp=False" if which == "older" else "all signals"
        print(f"  retrieval + diagnostics + score table, {label + ':':28s} {best[which]:7.3f} s  "
              f"added {added:+.1%} ({best[which] - best['retrieval']:+.3f} s), goal at most {goal:+.0%}: {verdict}")


def without_qpp(function):
    """``function`` run with ``RetrievalIndex.retrieve`` attaching the diagnostics as before issue 21 (``qpp=False``)."""

    def run():
        attach = index_module.diagnostic_rows
        index_module.diagnostic_rows = functools.partial(attach, qpp=False)
        try:
            function()
        finally:
            index_module.diagnostic_rows = attach

    return run


def main():
    index = build_index(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE)
    queries = queries_table(N_QUERIES)
    texts = list(queries["query"])
    # The reranker's signals need a reranker, which this benchmark does not run.
    names = [name for name in SIGNALS if not name.startswith("rerank_")]
    older = [name for name in names if name not in QPP_SIGNALS]
    index.retrieve(texts)  # warm-up: query embeddings into the cache, per-retriever diagnostic tables built once

    def retrieval():
        index.retrieve(texts, diagnostics=False)

    sides = {
        "retrieval": retrieval,
        "older": without_qpp(lambda: score_table(queries, index.retrieve(texts), signals=older)),
        "all": lambda: score_table(queries, index.retrieve(texts), signals=names),
    }
    print(f"{N_QUERIES} queries on the FastAPI docs ({len(index.chunks)} chunks), {len(older)} older signals, "
          f"{len(names)} in all")
    print(f"cached query embeddings (retrieval as cheap as it gets, the least flattering ratio), best of {REPEATS}:")
    best = best_of(sides, REPEATS)
    report(best)

    plain = index.retrieve(texts, diagnostics=False)
    attached = index.retrieve(texts)
    vectors = index.dense.encode_queries(texts)
    retrievers = {"dense": index.dense, **index.bm25}
    parts = best_of(
        {
            "older diagnostics": lambda: diagnostic_rows(plain, texts, retrievers, query_vectors=vectors, qpp=False),
            "older table": lambda: score_table(queries, attached, signals=older),
            "all diagnostics": lambda: diagnostic_rows(plain, texts, retrievers, query_vectors=vectors),
            "all table": lambda: score_table(queries, attached, signals=names),
        },
        REPEATS,
    )
    for which in ("older", "all"):
        both = parts[f"{which} diagnostics"] + parts[f"{which} table"]
        print(f"  the difference on the same lists, {which}: diagnostic_rows {parts[f'{which} diagnostics']:.3f} s "
              f"+ score_table {parts[f'{which} table']:.3f} s = {both:.3f} s, {both / best['retrieval']:+.1%} "
              "of retrieval")

    # New questions are not in the embedding cache: retrieval then includes embedding them, as in use.
    index.dense.embedder.use_cache = False
    print(f"new questions (embedded at retrieval time), best of {FRESH_REPEATS}:")
    report(best_of(sides, FRESH_REPEATS))


if __name__ == "__main__":
    main()
