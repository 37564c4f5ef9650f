"""Exact by construction or anchored: what each costs, and how far other kernels move MiniLM, side by side.

    python benchmarks/bench_anchoring.py [--passages 300] [--repeats 2]

Embeds the same FastAPI chunks four ways, each in its own process (the kernels are chosen when torch loads), the
four interleaved so that the machine's load falls on all of them alike:

- float32 with the pinned kernels (``ragcal.numerics``: torch AVX2, MKL's strict AVX2 path): what the study runs;
- float32 with other kernels of this machine (torch's generic ones, MKL's SSE2 path): another processor;
- float64 (the model cast to double, vectors rounded to float32 at the end) with each of the two.

Prints each one's time, the ratio float64 / float32 (the price of exactness by construction), how many components
differ between the two kernel sets in float32 and in float64, and the time anchoring takes on the committed FastAPI
study (``ragcal.study.anchoring``: a score table and a dense run compared with the committed ones).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ragcal.numerics import PINNED_ENVIRONMENT  # noqa: E402

KERNELS = {
    "pinned": dict(PINNED_ENVIRONMENT),
    "other": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4"},
}

WORKER = r"""
import sys, time
import numpy as np
import torch
from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE
from ragcal.embedding import Embedder
from ragcal.retrieval.index import chunk_corpus

precision, count, output = sys.argv[1], int(sys.argv[2]), sys.argv[3]
_, chunks, _ = chunk_corpus(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE)
texts = list(dict.fromkeys(chunk.text for chunk in chunks))[:count]
embedder = Embedder(use_cache=False)
if precision == "float64":
    embedder.model.double()  # every weight and activation in float64; the vectors are rounded to float32 at the end
embedder.encode(texts[:2], show_progress_bar=False)  # load and warm up outside the timing
start = time.perf_counter()
vectors = embedder.encode(texts, show_progress_bar=False)
seconds = time.perf_counter() - start
np.save(output, vectors)
print(f"{seconds:.3f} {torch.backends.cpu.get_cpu_capability()}")
"""


def embed(kernels: str, precision: str, count: int, folder: Path) -> tuple[float, np.ndarray, str]:
    output = folder / f"{kernels}-{precision}.npy"
    environment = {**os.environ, **KERNELS[kernels]}
    result = subprocess.run(
        [sys.executable, "-c", WORKER, precision, str(count), str(output)],
        capture_output=True,
        text=True,
        env=environment,
        check=True,
    )
    seconds, capability = result.stdout.split()[-2:]
    return float(seconds), np.load(output), capability


def anchoring_seconds() -> tuple[float, int]:
    """Anchor the committed FastAPI score table and dense run to themselves, moved by 1e-7: seconds, values compared."""
    from ragcal.retrieval.base import RetrievalResult
    from ragcal.runs import read_trec_run
    from ragcal.score_tables import read_csv_table as read_score_table_text
    from ragcal.study.anchoring import Anchor
    from ragcal.study.notebooks import RESULTS_DIR

    committed = RESULTS_DIR / "fastapi"
    table = read_score_table_text(committed / "scores.csv")
    moved = table.copy()
    dense = [column for column in table.columns if column.startswith("dense_") and table[column].dtype.kind == "f"]
    moved[dense] = moved[dense] + 1e-7
    run = read_trec_run(committed / "runs" / "dense.run")
    retrieved = {
        "dense": [
            RetrievalResult("dense", tuple(group["docid"]), group["score"].to_numpy(dtype=float) + 1e-7)
            for _, group in run.groupby("qid", sort=False)
        ]
    }
    ids = list(run["qid"].drop_duplicates())
    start = time.perf_counter()
    anchor = Anchor(committed, label="fastapi")
    anchor.retrieved(retrieved, ids)
    anchor.table(moved, decisions=True)
    seconds = time.perf_counter() - start
    assert all(record.status != "beyond tolerance" for record in anchor.records), anchor.records
    return seconds, sum(record.n_values for record in anchor.records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=2, help="interleaved repetitions; the best time counts")
    args = parser.parse_args()

    runs = [(kernels, precision) for precision in ("float32", "float64") for kernels in KERNELS]
    best, vectors, capability = {}, {}, {}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.repeats):
            for kernels, precision in runs:
                seconds, found, capability[kernels] = embed(kernels, precision, args.passages, Path(folder))
                best[kernels, precision] = min(best.get((kernels, precision), float("inf")), seconds)
                vectors[kernels, precision] = found
    print(f"{args.passages} FastAPI chunks, best of {args.repeats} interleaved runs, one process each:")
    for kernels, precision in runs:
        print(f"  {kernels:6} kernels (torch {capability[kernels]}), {precision}: {best[kernels, precision]:7.2f} s")
    for kernels in KERNELS:
        ratio = best[kernels, "float64"] / best[kernels, "float32"]
        print(f"float64 / float32 time, {kernels} kernels: {ratio:.2f}x (the price of exactness by construction)")
    for precision in ("float32", "float64"):
        difference = np.abs(vectors["pinned", precision] - vectors["other", precision])
        print(
            f"{precision}: components that differ between the two kernel sets: {int((difference > 0).sum()):,} of "
            f"{difference.size:,}, largest {difference.max():.2e}"
        )
    seconds, values = anchoring_seconds()
    per_text = best["pinned", "float32"] / args.passages
    print(
        f"anchoring the committed FastAPI study ({values:,} values, decisions of 4 gates): {seconds * 1000:.0f} ms, "
        f"the time of embedding {seconds / per_text:.1f} chunks in float32"
    )
    print(json.dumps({f"{k}-{p}": round(v, 3) for (k, p), v in best.items()}))


if __name__ == "__main__":
    main()
