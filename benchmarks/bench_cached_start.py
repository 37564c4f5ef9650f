"""A fully cached run's start, before and after the embedding cache's key was read from the model's folder.

    .venv/bin/python benchmarks/bench_cached_start.py [--before 3b194e2] [--repeats 5]

What every notebook kernel of ``make reproduce`` and of the tests does first:
``ragcal.study.notebooks.notebook_score_table()``, the bundled FastAPI study's
score table recomputed through the saved index and the embedding cache (warm:
nothing is embedded). Before eea98c6 the cache's key loaded MiniLM, importing
sentence-transformers and transformers, although no text was encoded.

The old code is checked out into a throw-away git worktree under /tmp (removed
at the end); each run is a fresh subprocess with ``PYTHONPATH`` set to its
tree, old and new alternating so that a burst of load on the shared machine
hits both alike. Prints the seconds of each run, the median ratio, whether
sentence-transformers and torch were imported, and whether the two tables are the
same bytes. Asserts nothing: a benchmark, not a test. Run it once beforehand (or
after ``make reproduce``) so that the cache is warm for both.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from worktree import worktree

ROOT = Path(__file__).resolve().parent.parent
RUN = """
import sys, time
start = time.perf_counter()
import ragcal
from ragcal.study.notebooks import notebook_score_table
table = notebook_score_table()
seconds = time.perf_counter() - start
table.to_csv(sys.argv[1], index=False)
print(ragcal.__file__)
print(int("sentence_transformers" in sys.modules))
print(int("torch" in sys.modules))
print(seconds)
"""


def run(tree: Path, out: Path) -> tuple[float, bool, bool]:
    environment = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", RUN, str(out)], env=environment, cwd=tree, capture_output=True,
                          text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{tree}: {done.stderr[-3000:]}")
    imported_from, loaded, torch, seconds = done.stdout.strip().splitlines()[-4:]
    if not Path(imported_from).resolve().is_relative_to(tree.resolve()):
        raise RuntimeError(f"{tree}: ragcal was imported from {imported_from}, not from this tree")
    return float(seconds), loaded == "1", torch == "1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="3b194e2", help="the commit before the change (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with worktree(args.before) as old, tempfile.TemporaryDirectory() as scratch:
        trees = {"before": old, "after": ROOT}
        outputs = {label: Path(scratch) / f"{label}.csv" for label in trees}
        for label, tree in trees.items():  # warm the file cache and the embedding cache
            run(tree, outputs[label])
        seconds = {label: [] for label in trees}
        loaded, torch = {}, {}
        for _ in range(args.repeats):
            for label, tree in trees.items():
                took, loaded[label], torch[label] = run(tree, outputs[label])
                seconds[label].append(took)
        print(f"notebook_score_table() in a fresh process, cache warm, {args.repeats} alternating runs each:")
        for label, values in seconds.items():
            print(f"  {label:<6} ({trees[label]}): " + ", ".join(f"{value:.2f}" for value in values)
                  + f" s; median {statistics.median(values):.2f} s; sentence-transformers imported: {loaded[label]}, "
                  f"torch: {torch[label]}")  # fmt: skip
        ratio = statistics.median(seconds["after"]) / statistics.median(seconds["before"])
        print(f"  after / before (medians): {ratio:.2f}")
        same = outputs["before"].read_bytes() == outputs["after"].read_bytes()
        print(f"  the two score tables are the same bytes: {same}")


if __name__ == "__main__":
    main()
