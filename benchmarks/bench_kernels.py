"""MiniLM under MKL's former and current pinned branch, side by side: how fast, and whether a batch changes a vector.

    python benchmarks/bench_kernels.py [--chunks 300] [--repeats 3]

Two settings of ``MKL_CBWR`` (torch's kernels and NumPy's loops pinned as in :data:`ragcal.numerics.PINNED_ENVIRONMENT`
for both):

- ``AVX2,STRICT``: the branch ``ragcal`` pinned until December 2026;
- ``AUTO,STRICT``: the branch it pins now (:mod:`ragcal.numerics`), MKL's own choice for the processor.

Each run is a fresh process (MKL reads the variable when it loads) that encodes the first ``--chunks`` chunks of the
bundled FastAPI docs with no cache, the two settings alternating so that the machine's load falls on both alike.
Timed: the encoding alone, after the model has loaded and encoded 8 texts. Then, in the same process, some of those
texts are encoded again in 5 random batches of 1 to 40 and one at a time: the rows whose bits differ from the first
encoding are counted (0 is what :class:`ragcal.embedding.Embedder` promises). Prints the seconds of each run, the
medians, their ratio (former / current), the batch check, the largest difference between the two settings' vectors,
and the branch of MKL_CBWR with ``STRICT`` left out, to show what it holds. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from ragcal.numerics import PINNED_ENVIRONMENT

SETTINGS = {"former": "AVX2,STRICT", "current": "AUTO,STRICT"}

RUN = """
import json, sys, time
import numpy as np
from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE
from ragcal.embedding import Embedder
from ragcal.retrieval.index import chunk_corpus

count, out = int(sys.argv[1]), sys.argv[2]
_, chunks, _ = chunk_corpus(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE)
texts = [chunk.text for chunk in chunks][:count]
embedder = Embedder(use_cache=False)
embedder.encode(texts[:8], show_progress_bar=False)
started = time.perf_counter()
vectors = embedder.encode(texts, show_progress_bar=False)
seconds = time.perf_counter() - started
rng = np.random.default_rng(1)
differing = checked = 0
for _ in range(5):
    rows = rng.choice(len(texts), size=int(rng.integers(1, 41)), replace=False)
    again = embedder.encode([texts[row] for row in rows], show_progress_bar=False)
    differing += int((again != vectors[rows]).any(axis=1).sum())
    checked += len(rows)
for row in range(0, len(texts), max(1, len(texts) // 8)):
    differing += int((embedder.encode([texts[row]], show_progress_bar=False) != vectors[row]).any())
    checked += 1
np.save(out, vectors)
import torch
print(json.dumps({"seconds": seconds, "differing": differing, "checked": checked,
                  "torch": str(torch.backends.cpu.get_cpu_capability())}))
"""


def run_once(mkl: str, chunks: int, folder: Path) -> dict:
    """One fresh process under ``MKL_CBWR=mkl``: its timing, its batch check and its vectors."""
    out = folder / f"{mkl.replace(',', '-')}.npy"
    environment = {**os.environ, **PINNED_ENVIRONMENT, "MKL_CBWR": mkl}
    printed = subprocess.run(
        [sys.executable, "-c", RUN, str(chunks), str(out)], check=True, capture_output=True, text=True, env=environment
    ).stdout
    return {**json.loads(printed.strip().splitlines()[-1]), "vectors": np.load(out)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args(argv)
    seconds = {name: [] for name in SETTINGS}
    vectors = {}
    with tempfile.TemporaryDirectory(prefix="ragcal-bench-kernels-") as folder:
        for repeat in range(options.repeats):
            for name in SETTINGS if repeat % 2 == 0 else reversed(SETTINGS):
                result = run_once(SETTINGS[name], options.chunks, Path(folder))
                seconds[name].append(result["seconds"])
                vectors.setdefault(name, result["vectors"])
                print(
                    f"{name:>8} MKL_CBWR={SETTINGS[name]:<12} torch {result['torch']}: {result['seconds']:6.2f} s;"
                    f" {result['differing']} of {result['checked']} rows differ when batched otherwise",
                    flush=True,
                )
        loose = run_once("AUTO", options.chunks, Path(folder))
    former, current = (statistics.median(seconds[name]) for name in SETTINGS)
    print(f"median over {options.chunks} chunks: former {former:.2f} s, current {current:.2f} s, "
          f"ratio {former / current:.2f}")  # fmt: skip
    difference = np.abs(vectors["former"].astype(np.float64) - vectors["current"])
    print(f"components differing between the two settings: {int((difference > 0).sum())} of {difference.size}, "
          f"largest {difference.max():.2e}")  # fmt: skip
    print(f"MKL_CBWR=AUTO (no STRICT): {loose['differing']} of {loose['checked']} rows differ when batched otherwise")
    return 0


if __name__ == "__main__":
    sys.exit(main())
