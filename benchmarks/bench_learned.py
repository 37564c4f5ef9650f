"""Learned-gate study benchmark: the code of a commit against this checkout (or another tree), side by side.

Run with ``.venv/bin/python benchmarks/bench_learned.py --splits 50``. For
each bundled corpus it runs :func:`ragcal.study.learned.evaluate_learned_gates`
(the call of ``make reproduce``: every candidate signal set, ``--splits``
nested half splits, ``LEARNED_SPLITS`` by default, support from the TREC runs)
on the score table and runs under ``results/<corpus>/``, once with the code of
``--base`` (default 12c75d8, the last commit whose default logistic regression
drove scipy's private L-BFGS-B routine and scikit-learn's private loss by
hand; checked out into a throw-away git worktree under /tmp, removed at the
end) and once with the code of ``--after`` (default: this checkout as it
is), alternating between the two so that both see the same load on a shared
machine. Each run is a subprocess with ``PYTHONPATH`` set to its tree; it
writes its CSVs under ``--out``. The script prints the seconds of each run,
the ratio of the best (after / before), and whether the per-split tables and
CSVs are equal, to each other and (with the full ``LEARNED_SPLITS``) to the
``results/<corpus>/learned_*.csv`` that ``make reproduce`` wrote.
``--transfer`` also times :func:`ragcal.study.learned.learned_transfer` on the
two tables (``results/learned_transfer.csv``). Nothing is asserted; the
numbers are the output (``benchmarks/README.md`` records them).

One run of one version on one corpus (prints its seconds)::

    PYTHONPATH=/tmp/some_tree .venv/bin/python benchmarks/bench_learned.py --run fastapi --out /tmp/learned_new
"""

from __future__ import annotations

import argparse
import filecmp
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
from worktree import worktree

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ("fastapi", "rust-book")
OUTPUTS = ("learned_auc.csv", "learned_gate.csv", "learned_coefficients.csv")


def read_table(corpus: str) -> pd.DataFrame:
    """The committed score table with every column, as ``make reproduce`` holds it in memory."""
    return pd.read_csv(ROOT / "results" / corpus / "scores.csv")


def run_one(corpus: str, out: Path, n_splits: int | None) -> float:
    """Run the learned study of ``corpus`` with the ``ragcal`` on the path; write its CSVs to ``out``; seconds."""
    import ragcal
    from ragcal.gates.support import gold_pages, results_from_runs
    from ragcal.queries import load_queries
    from ragcal.study.learned import LEARNED_SPLITS, evaluate_learned_gates

    results_dir = ROOT / "results" / corpus
    table = read_table(corpus)
    queries = load_queries(ROOT / "data" / "queries" / f"{corpus}.csv").set_index("id")
    ordered = queries.loc[list(table["id"])].reset_index()
    results, gold = results_from_runs(results_dir / "runs", table["id"]), gold_pages(ordered)
    out.mkdir(parents=True, exist_ok=True)
    print(f"ragcal from {Path(ragcal.__file__).parent}", file=sys.stderr)
    start = time.perf_counter()
    learned = evaluate_learned_gates(
        table, out, n_splits=n_splits or LEARNED_SPLITS, results=results, gold=gold, log=lambda message: None
    )
    seconds = time.perf_counter() - start
    pd.to_pickle(learned["heldout"], out / "heldout.pkl")  # the per-split tables, compared exactly
    return seconds


def run_transfer(out: Path) -> float:
    """Run :func:`learned_transfer` on the committed tables; write ``learned_transfer.csv`` to ``out``; seconds."""
    from ragcal.study.learned import learned_transfer

    tables = {corpus: read_table(corpus) for corpus in CORPORA}
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    transfer = learned_transfer(tables)
    seconds = time.perf_counter() - start
    (out / "learned_transfer.csv").write_text(transfer.to_csv(index=False, float_format="%.4f"))
    return seconds


def timed_subprocess(code_root: Path, what: str, out: Path, n_splits: int | None) -> float:
    command = [sys.executable, str(Path(__file__).resolve()), "--run", what, "--out", str(out)]
    if n_splits:
        command += ["--splits", str(n_splits)]
    environment = {**os.environ, "PYTHONPATH": str(code_root)}
    finished = subprocess.run(command, check=False, env=environment, capture_output=True, text=True, cwd=code_root)
    if finished.returncode != 0:
        raise RuntimeError(f"{what} with {code_root} failed:\n{finished.stderr}")
    return float(finished.stdout.strip().splitlines()[-1])


def same(first: Path, second: Path) -> str:
    if not (first.exists() and second.exists()):
        return "missing"
    return "equal" if filecmp.cmp(first, second, shallow=False) else "DIFFERENT"


def same_frames(first: Path, second: Path) -> str:
    """Whether two pickled ``{name: DataFrame}`` are equal to the last bit (``check_exact``)."""
    if not (first.exists() and second.exists()):
        return "missing"
    before, after = pd.read_pickle(first), pd.read_pickle(second)
    if set(before) != set(after):
        return f"DIFFERENT tables: {sorted(before)} vs {sorted(after)}"
    for name in before:
        try:
            pd.testing.assert_frame_equal(before[name], after[name], check_exact=True)
        except AssertionError as error:
            return f"DIFFERENT {name}: {error}"
    return f"equal ({', '.join(f'{name} {len(frame):,} rows' for name, frame in before.items())})"


def compare(corpora, base_root: Path, after_root: Path, out: Path, n_splits, repeats: int, transfer: bool) -> None:
    jobs = [(corpus, OUTPUTS) for corpus in corpora] + ([("transfer", ("learned_transfer.csv",))] if transfer else [])
    for what, outputs in jobs:
        seconds = {"before": [], "after": []}
        for repeat in range(repeats):
            order = [("before", base_root), ("after", after_root)]
            for label, code_root in order if repeat % 2 == 0 else order[::-1]:
                seconds[label].append(timed_subprocess(code_root, what, out / label / what, n_splits))
        best_before, best_after = min(seconds["before"]), min(seconds["after"])
        print(
            f"{what}: before {', '.join(f'{value:.1f}' for value in seconds['before'])} s, "
            f"after {', '.join(f'{value:.1f}' for value in seconds['after'])} s; "
            f"best of {repeats}: {best_before:.1f} s -> {best_after:.1f} s, "
            f"after / before = {best_after / best_before:.2f}"
        )
        before, after = out / "before" / what, out / "after" / what
        if what != "transfer":
            print(f"  per-split tables (check_exact): {same_frames(before / 'heldout.pkl', after / 'heldout.pkl')}")
        for name in outputs:
            line = f"  {name}: before vs after {same(before / name, after / name)}"
            committed = ROOT / "results" / ("" if what == "transfer" else what) / name
            if committed.exists() and not n_splits:
                line += f"; after vs {committed.relative_to(ROOT)} {same(after / name, committed)}"
            print(line)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="12c75d8", help="commit of the 'before' code (default: 12c75d8)")
    parser.add_argument(
        "--after", type=Path, default=ROOT, help="code of the 'after' runs (default: this checkout, as it is)"
    )
    parser.add_argument("--corpus", action="append", choices=CORPORA, help="default: both")
    parser.add_argument("--splits", type=int, default=None, help="default: LEARNED_SPLITS (as make reproduce)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each version, alternating")
    parser.add_argument("--transfer", action="store_true", help="also time learned_transfer")
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_learned"))
    parser.add_argument("--run", help=argparse.SUPPRESS)  # one corpus (or 'transfer') in this process
    args = parser.parse_args(argv)
    if args.run == "transfer":
        print(run_transfer(args.out))
    elif args.run:
        print(run_one(args.run, args.out, args.splits))
    else:
        commit = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", args.base], check=True, capture_output=True, text=True
        ).stdout.strip()
        print(f"splits: {args.splits or 'LEARNED_SPLITS'}, load average before: {os.getloadavg()[0]:.2f}")
        with worktree(commit) as base:
            print(f"before: {commit[:12]} (worktree {base}); after: {args.after}")
            compare(args.corpus or CORPORA, base, args.after, args.out, args.splits, args.repeats, args.transfer)
        print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
