"""QPP study benchmark: the code of a commit against this checkout, side by side, and the bytes they write.

Run with ``.venv/bin/python benchmarks/bench_qpp.py --repeats 3``. For each
bundled corpus it runs :func:`ragcal.study.qpp.evaluate_qpp` (the ``QPP
signals`` stage of ``make reproduce``: every signal against its retriever's
MRR@10, 2,000 bootstrap resamples each) on the committed
``results/<corpus>/scores.csv`` and runs, once with the code of ``--base``
(default 82fbfc8, the last commit whose Kendall's tau-b compared every pair of
positions of every resample; checked out into a throw-away git worktree under
/tmp, removed at the end) and once with this checkout, alternating between the
two so that both see the same load. Each run is a subprocess with
``PYTHONPATH`` set to its tree; the seconds count only the stage, not the
imports. It prints the seconds, the ratio of the best (after / before) and
whether the two ``qpp.csv`` are equal byte for byte, and to the committed one.
Nothing is asserted.

One run of one version on one corpus (prints its seconds)::

    PYTHONPATH=/tmp/some_tree .venv/bin/python benchmarks/bench_qpp.py --run fastapi --out /tmp/qpp_new
"""

from __future__ import annotations

import argparse
import filecmp
import os
import subprocess
import sys
import time
from pathlib import Path

from worktree import worktree

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ("fastapi", "rust-book")


def run_one(corpus: str, out: Path) -> float:
    """The QPP stage of ``corpus`` with the ``ragcal`` on the path; ``qpp.csv`` under ``out``; its seconds."""
    import pandas as pd

    from ragcal.queries import load_queries
    from ragcal.runs import read_trec_run
    from ragcal.study.qpp import evaluate_qpp

    results = ROOT / "results" / corpus
    table = pd.read_csv(results / "scores.csv")
    queries = load_queries(ROOT / "data" / "queries" / f"{corpus}.csv")
    runs = {path.stem: read_trec_run(path) for path in sorted((results / "runs").glob("*.run"))}
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    evaluate_qpp(table, runs, queries, out, log=lambda message: None)
    return time.perf_counter() - start


def timed_subprocess(code_root: Path, corpus: str, out: Path) -> float:
    command = [sys.executable, str(Path(__file__).resolve()), "--run", corpus, "--out", str(out)]
    finished = subprocess.run(command, check=False, env={**os.environ, "PYTHONPATH": str(code_root)},
                              capture_output=True, text=True, cwd=code_root)  # fmt: skip
    if finished.returncode != 0:
        raise RuntimeError(f"{corpus} with {code_root} failed:\n{finished.stderr}")
    return float(finished.stdout.strip().splitlines()[-1])


def same(first: Path, second: Path) -> str:
    return "equal" if filecmp.cmp(first, second, shallow=False) else "DIFFERENT"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="82fbfc8", help="commit of the 'before' code (default: 82fbfc8)")
    parser.add_argument("--corpus", action="append", choices=CORPORA, help="default: both")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each version, alternating")
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_qpp"))
    parser.add_argument("--run", help=argparse.SUPPRESS)  # one corpus in this process
    args = parser.parse_args(argv)
    if args.run:
        print(run_one(args.run, args.out))
        return
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", args.base], check=True, capture_output=True, text=True
    ).stdout.strip()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with worktree(commit) as base:
        print(f"before: {commit[:12]} (worktree {base}); after: {ROOT}")
        for corpus in args.corpus or CORPORA:
            seconds = {"before": [], "after": []}
            for repeat in range(args.repeats):
                order = [("before", base), ("after", ROOT)]
                for label, code_root in order if repeat % 2 == 0 else order[::-1]:
                    seconds[label].append(timed_subprocess(code_root, corpus, args.out / label / corpus))
            best = {label: min(values) for label, values in seconds.items()}
            shown = {label: ", ".join(f"{value:.2f}" for value in values) for label, values in seconds.items()}
            written = {label: args.out / label / corpus / "qpp.csv" for label in seconds}
            print(
                f"{corpus} QPP signals: before {shown['before']} s, after {shown['after']} s; best of {args.repeats}: "
                f"{best['before']:.2f} s -> {best['after']:.2f} s, "
                f"after / before = {best['after'] / best['before']:.3f}"
            )
            print(f"  qpp.csv: before and after {same(written['before'], written['after'])}; after and committed "
                  f"{same(written['after'], ROOT / 'results' / corpus / 'qpp.csv')}")  # fmt: skip
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
