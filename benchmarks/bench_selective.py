"""Held-out gates and selective-risk study benchmark: the code of a commit against this checkout, side by side.

Run with ``.venv/bin/python benchmarks/bench_selective.py --splits 100``. For
each bundled corpus it runs, on the score table and TREC runs under
``results/<corpus>/``, the two stages of ``make reproduce`` that fit gates on
a thousand calibration halves: :func:`ragcal.study.gates.evaluate_gates`
(``gates (held-out splits)``) and :func:`ragcal.study.selective.evaluate_selective`
(``selective risk and certificates``: risk-coverage bootstrap, certified
gates held out, the population check). It runs them once with the code of
``--base`` (default b0c1ba4, the last commit before the chain's stage cuts
were read once per study and held-out support was remembered; checked out
into a throw-away git worktree under /tmp, removed at the end) and once with
the code of ``--after`` (default: this checkout as it is), alternating
between the two so that both see the same load on a shared machine. Each run
is a subprocess with ``PYTHONPATH`` set to its tree; it writes its CSVs and
the pickled per-split tables under ``--out``. The script prints the seconds
of each stage, the ratio (after / before), and whether every file written is
equal, byte for byte. Nothing is asserted; the numbers are the output
(``benchmarks/README.md`` records them).

One run of one version on one corpus (prints its seconds)::

    PYTHONPATH=/tmp/some_tree .venv/bin/python benchmarks/bench_selective.py --run fastapi --out /tmp/selective_new
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
from worktree import worktree

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ("fastapi", "rust-book")
STAGES = ("gates", "selective")


def study_inputs(corpus: str):
    """Score table, queries (in the table's order) and ``{retriever: [RetrievalResult per row]}`` from results/."""
    from ragcal.gates.support import results_from_runs
    from ragcal.queries import load_queries

    results_dir = ROOT / "results" / corpus
    table = pd.read_csv(results_dir / "scores.csv")
    queries = load_queries(ROOT / "data" / "queries" / f"{corpus}.csv").set_index("id")
    queries = queries.loc[list(table["id"])].reset_index()
    per_row = results_from_runs(results_dir / "runs", table["id"])
    retrieved = {name: [row[name] for row in per_row] for name in per_row[0]}
    return table, queries, retrieved


def run_one(corpus: str, out: Path, n_splits: int) -> dict:
    """Both stages on ``corpus`` with the ``ragcal`` on the path; files under ``out``; seconds of each stage."""
    import ragcal
    from ragcal.study.gates import evaluate_gates
    from ragcal.study.reproduce import HELDOUT_RULES
    from ragcal.study.selective import evaluate_selective

    table, queries, retrieved = study_inputs(corpus)
    out.mkdir(parents=True, exist_ok=True)
    print(f"ragcal from {Path(ragcal.__file__).parent}", file=sys.stderr)
    quiet = lambda message: None  # noqa: E731
    start = time.perf_counter()
    gates = evaluate_gates(
        table, queries, retrieved, out, rules=HELDOUT_RULES, provenance={}, n_splits=n_splits, log=quiet
    )
    middle = time.perf_counter()
    selective = evaluate_selective(
        table, queries, retrieved, out, gate_heldout=gates["heldout_gates"], provenance={}, n_splits=n_splits,
        log=quiet,
    )
    end = time.perf_counter()
    pd.to_pickle(gates["heldout_gates"], out / "heldout_gates.pkl")
    pd.to_pickle(selective["certified_heldout"], out / "certified_heldout.pkl")
    return {"gates": middle - start, "selective": end - middle}


def timed_subprocess(code_root: Path, corpus: str, out: Path, n_splits: int) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--run", corpus, "--out", str(out),
               "--splits", str(n_splits)]
    environment = {**os.environ, "PYTHONPATH": str(code_root), "TQDM_DISABLE": "1"}
    finished = subprocess.run(command, check=False, env=environment, capture_output=True, text=True, cwd=code_root)
    if finished.returncode != 0:
        raise RuntimeError(f"{corpus} with {code_root} failed:\n{finished.stderr}")
    return json.loads(finished.stdout.strip().splitlines()[-1])


def compare_files(before: Path, after: Path) -> str:
    """``equal (n files)`` when both folders hold the same files with the same bytes, else what differs."""
    names = sorted(str(path.relative_to(before)) for path in before.rglob("*") if path.is_file())
    others = sorted(str(path.relative_to(after)) for path in after.rglob("*") if path.is_file())
    if names != others:
        return f"DIFFERENT file lists: {sorted(set(names) ^ set(others))}"
    different = [name for name in names if not filecmp.cmp(before / name, after / name, shallow=False)]
    return f"DIFFERENT: {different}" if different else f"equal ({len(names)} files, byte for byte)"


def compare(corpora, base_root: Path, after_root: Path, out: Path, n_splits: int, repeats: int) -> None:
    for corpus in corpora:
        seconds = {"before": [], "after": []}
        for repeat in range(repeats):
            order = [("before", base_root), ("after", after_root)]
            for label, code_root in order if repeat % 2 == 0 else order[::-1]:
                seconds[label].append(timed_subprocess(code_root, corpus, out / label / corpus, n_splits))
        for stage in STAGES:
            best_before = min(run[stage] for run in seconds["before"])
            best_after = min(run[stage] for run in seconds["after"])
            print(
                f"{corpus} {stage}: before {', '.join(f'{run[stage]:.1f}' for run in seconds['before'])} s, "
                f"after {', '.join(f'{run[stage]:.1f}' for run in seconds['after'])} s; best of {repeats}: "
                f"{best_before:.1f} s -> {best_after:.1f} s, after / before = {best_after / best_before:.2f}"
            )
        print(f"  files written: {compare_files(out / 'before' / corpus, out / 'after' / corpus)}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="b0c1ba4", help="commit of the 'before' code (default: b0c1ba4)")
    parser.add_argument(
        "--after", type=Path, default=ROOT, help="code of the 'after' runs (default: this checkout, as it is)"
    )
    parser.add_argument("--corpus", action="append", choices=CORPORA, help="default: both")
    parser.add_argument("--splits", type=int, default=100, help="held-out splits and population draws (default 100)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each version, alternating")
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_selective"))
    parser.add_argument("--run", help=argparse.SUPPRESS)  # one corpus in this process
    args = parser.parse_args(argv)
    if args.run:
        print(json.dumps(run_one(args.run, args.out, args.splits)))
        return
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", args.base], check=True, capture_output=True, text=True
    ).stdout.strip()
    print(f"splits: {args.splits}, load average before: {os.getloadavg()[0]:.2f}")
    with worktree(commit) as base:
        print(f"before: {commit[:12]} (worktree {base}); after: {args.after}")
        compare(args.corpus or CORPORA, base, args.after, args.out, args.splits, args.repeats)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
