"""Signal benchmark: what the issue-11 signals add to retrieval plus the score table, for 1,000 queries.

Run with ``.venv/bin/python benchmarks/bench_signals.py``. Both versions run side by side in one process on the
bundled FastAPI index; the ratio is the number to read (the goal: the new signals add at most 10%). Nothing is
asserted.

- before: ``index.retrieve(queries, diagnostics=False)`` and ``score_table`` with the built-in signals only;
- after: ``index.retrieve(queries)`` (which attaches each retriever's per-query diagnostics) and ``score_table``
  with every registered signal.

The 1,000 queries are the two bundled labeled sets, repeated. The script measures twice: with their embeddings
from the embedding cache (retrieval as cheap as it gets, so the ratio is the least flattering one), then as new
questions that retrieval must embed, which is what a deployed gate sees.
"""

import time

import pandas as pd

from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE, FASTAPI_QUERIES, RUST_BOOK_QUERIES
from ragcal.retrieval.index import build_index
from ragcal.scoring import score_table
from ragcal.signals import NEW_SIGNALS, SIGNALS

N_QUERIES = 1000
REPEATS = 5
FRESH_REPEATS = 3


def queries_table(n):
    texts = pd.concat([pd.read_csv(path)["query"] for path in (FASTAPI_QUERIES, RUST_BOOK_QUERIES)], ignore_index=True)
    texts = pd.concat([texts] * (n // len(texts) + 1), ignore_index=True)[:n]
    return pd.DataFrame({"id": [f"q{i}" for i in range(n)], "query": texts, "answerable": True, "slice": "answerable"})


def timed(function):
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def main():
    index = build_index(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE)
    queries = queries_table(N_QUERIES)
    # The reranker's signals need a reranker, which this benchmark does not run.
    builtin = [name for name in SIGNALS if name not in NEW_SIGNALS and not name.startswith("rerank_")]
    index.retrieve(queries["query"])  # warm-up: query embeddings into the cache, centroids computed once

    def before():
        score_table(queries, index.retrieve(queries["query"], diagnostics=False), signals=builtin)

    def after():
        score_table(queries, index.retrieve(queries["query"]))

    times = {"before": [], "after": []}
    for _ in range(REPEATS):  # interleaved, so that load from other processes hits both alike
        times["before"].append(timed(before))
        times["after"].append(timed(after))
    best = {name: min(values) for name, values in times.items()}
    print(f"{N_QUERIES} queries on the FastAPI docs ({len(index.chunks)} chunks), best of {REPEATS}")
    print("cached query embeddings (retrieval as cheap as it gets, the least flattering ratio):")
    print(f"  retrieval + built-in signals ({len(builtin)}):          {best['before']:7.3f} s")
    print(f"  retrieval + diagnostics + all signals ({len(SIGNALS)}):  {best['after']:7.3f} s")
    print(f"  added by the new signals: {best['after'] / best['before'] - 1:+.1%}  (goal: at most +10%)")

    # New questions are not in the embedding cache: retrieval then includes embedding them, as in use.
    index.dense.embedder.use_cache = False
    fresh = {"before": [], "after": []}
    for _ in range(FRESH_REPEATS):
        fresh["before"].append(timed(before))
        fresh["after"].append(timed(after))
    best = {name: min(values) for name, values in fresh.items()}
    print(f"new questions (embedded at retrieval time), best of {FRESH_REPEATS}:")
    print(f"  retrieval + built-in signals:                {best['before']:7.3f} s")
    print(f"  retrieval + diagnostics + all signals:       {best['after']:7.3f} s")
    print(f"  added by the new signals: {best['after'] / best['before'] - 1:+.1%}  (goal: at most +10%)")


if __name__ == "__main__":
    main()
