"""The Rust book's golden set two ways, each on a cold embedding cache, side by side: same snapshot, how much faster.

    python benchmarks/bench_golden.py [--corpus rust-book] [--repeats 2]

- ``whole``: :func:`ragcal.study.golden.golden_snapshot` over an index of the whole corpus (what ``make test`` did
  until it embedded only the FastAPI docs);
- ``candidates``: :func:`ragcal.study.golden.candidate_golden_snapshot`, the questions it needs searched over their
  top-10 chunks of the committed dense run (what ``tests/study/test_golden.py`` does now).

Each run is a fresh process with an empty embedding cache (model loading included, as in a test), the two
alternating so that the machine's load falls on both alike. Prints the seconds of each, the ratio of the medians
(whole / candidates), and whether the two snapshots are equal. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

RUN = """
import json, sys
from ragcal.datasets import BUNDLED
from ragcal.embedding import Embedder
from ragcal.queries import load_queries
from ragcal.study.golden import GOLDEN_IDS, candidate_golden_snapshot, golden_snapshot

way, corpus, cache, run_path = sys.argv[1:]
spec = BUNDLED[corpus]
embedder = Embedder(cache_dir=cache)
if way == "whole":
    from ragcal.retrieval.index import build_index

    index = build_index(spec.corpus, exclude=spec.exclude, embedder=embedder)
    snapshot = golden_snapshot(index, load_queries(spec.queries, corpus_paths=index.doc_paths), ids=GOLDEN_IDS[corpus])
else:
    from ragcal.retrieval.index import chunk_corpus
    from ragcal.runs import read_trec_run

    _, chunks, chunking = chunk_corpus(spec.corpus, exclude=spec.exclude)
    snapshot = candidate_golden_snapshot(
        chunks, chunking, embedder, load_queries(spec.queries), read_trec_run(run_path), ids=GOLDEN_IDS[corpus]
    )
print(json.dumps(snapshot, sort_keys=True))
"""


def run_once(way: str, corpus: str) -> tuple[float, str]:
    """Seconds of one fresh process computing the snapshot ``way`` on an empty cache, and the snapshot it printed."""
    with tempfile.TemporaryDirectory(prefix="ragcal-bench-golden-") as cache:
        run_path = ROOT / "results" / corpus / "runs" / "dense.run"
        started = time.perf_counter()
        printed = subprocess.run(
            [sys.executable, "-c", RUN, way, corpus, cache, str(run_path)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return time.perf_counter() - started, printed.strip().splitlines()[-1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="rust-book")
    parser.add_argument("--repeats", type=int, default=2)
    options = parser.parse_args(argv)
    seconds = {"whole": [], "candidates": []}
    snapshots = {}
    for repeat in range(options.repeats):
        for way in ("whole", "candidates") if repeat % 2 == 0 else ("candidates", "whole"):
            elapsed, snapshot = run_once(way, options.corpus)
            seconds[way].append(elapsed)
            snapshots.setdefault(way, set()).add(snapshot)
            print(f"{way:>10}: {elapsed:6.1f} s", flush=True)
    whole, candidates = (statistics.median(seconds[way]) for way in ("whole", "candidates"))
    print(f"median: whole {whole:.1f} s, candidates {candidates:.1f} s, ratio {whole / candidates:.2f}")
    same = len(snapshots["whole"] | snapshots["candidates"]) == 1
    print(f"snapshots equal across ways and repeats: {same}")
    if not same:
        for way, found in snapshots.items():
            for snapshot in found:
                print(way, json.dumps(json.loads(snapshot))[:400])
    return 0


if __name__ == "__main__":
    sys.exit(main())
