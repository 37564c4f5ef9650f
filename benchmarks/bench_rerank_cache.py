"""The study's reranker stage on a warm run, uncached (as before) and through the score cache (now), side by side.

    python benchmarks/bench_rerank_cache.py [--corpus fastapi] [--repeats 3]

``make reproduce`` re-scores the fused top 50 of every labeled question with the tiny random cross-encoder
(:func:`ragcal.study.rerank.rerank_aucs`). It used to score every pair on every run (``use_cache=False``); now its
scores go through the reranker's score cache, keyed by the model's fingerprint, which hashes weights that are the same
bytes on every run. Each measurement is a fresh process on the bundled corpus's saved index (built first, with the
embedding cache of ``RAGCAL_CACHE_DIR``), the two ways alternating:

- ``uncached``: the tiny model built in a temporary folder and every pair scored (the former code);
- ``cached``: ``rerank_aucs`` with a score cache that an earlier call filled (a warm ``make reproduce``).

Prints the seconds of each (the stage alone: model built, questions retrieved and re-scored, AUC table), the medians'
ratio, and whether the two AUC tables are the same bytes. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile

RUN = """
import dataclasses, sys, tempfile, time
from pathlib import Path
from ragcal.datasets import BUNDLED
from ragcal.queries import load_queries
from ragcal.retrieval.index import build_index

way, corpus, cache = sys.argv[1:]
spec = BUNDLED[corpus]
index = build_index(spec.corpus, exclude=spec.exclude)
queries = load_queries(spec.queries, corpus_paths=index.doc_paths)
started = time.perf_counter()
if way == "uncached":
    from ragcal.metrics import auc_table
    from ragcal.retrieval.rerank import CrossEncoderReranker, build_tiny_cross_encoder
    from ragcal.scoring import score_table
    from ragcal.study.rerank import RERANK_SIGNALS

    with tempfile.TemporaryDirectory() as folder:
        model = build_tiny_cross_encoder(Path(folder) / "tiny-random-cross-encoder")
        ranker = CrossEncoderReranker(str(model), depth=50, use_cache=False)
        reranked = dataclasses.replace(index, reranker=ranker, _views={})
        table = score_table(queries, reranked.retrieve(queries["query"]), signals=list(RERANK_SIGNALS))
    aucs = auc_table(table, list(RERANK_SIGNALS))
else:
    from ragcal.study.rerank import rerank_aucs

    aucs, _ = rerank_aucs(index, queries, cache_dir=cache)
seconds = time.perf_counter() - started
print(seconds)
print(aucs.to_csv(index=False, float_format="%.4f"))
"""


def run_once(way: str, corpus: str, cache: str) -> tuple[float, str]:
    printed = subprocess.run(
        [sys.executable, "-c", RUN, way, corpus, cache], check=True, capture_output=True, text=True
    ).stdout
    seconds, _, table = printed.partition("\n")
    return float(seconds), table


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="fastapi")
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args(argv)
    seconds = {"uncached": [], "cached": []}
    tables = set()
    with tempfile.TemporaryDirectory(prefix="ragcal-bench-rerank-") as cache:
        filling, table = run_once("cached", options.corpus, cache)
        tables.add(table)
        print(f"filling the score cache: {filling:6.1f} s", flush=True)
        for repeat in range(options.repeats):
            for way in ("uncached", "cached") if repeat % 2 == 0 else ("cached", "uncached"):
                elapsed, table = run_once(way, options.corpus, cache)
                seconds[way].append(elapsed)
                tables.add(table)
                print(f"{way:>9}: {elapsed:6.1f} s", flush=True)
    uncached, cached = (statistics.median(seconds[way]) for way in ("uncached", "cached"))
    print(f"median: uncached {uncached:.1f} s, cached {cached:.1f} s, ratio {uncached / cached:.2f}")
    print(f"AUC tables the same bytes across ways and runs: {len(tables) == 1}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
