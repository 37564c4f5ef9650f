"""pytest-xdist workers with their default thread pools (before) and with one share of the cores each (now).

    python benchmarks/bench_worker_threads.py [--repeats 2] [TEST PATH ...]

``make test`` runs two xdist workers on this project's 2-core machines. tests/conftest.py now gives each worker, and
every process it starts (notebook kernels, CLI runs), ``cores // workers`` threads for torch, MKL and OpenBLAS
(``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``); before, each took a pool as wide as the
machine, and two workers' pools took the cores from each other (OpenBLAS's idle threads spin on ``sched_yield``).

Each run is ``pytest -n 2`` on the same tests in a fresh process, the two settings alternating; "before" sets the
three variables to the number of cores, which is what the pools took by default. Prints each run's wall-clock
seconds and the CPU seconds of pytest and everything it waited for (user + system), then the medians' ratios
(now / before). Nothing is asserted: the machines are shared, and only a side-by-side ratio means anything.
The default tests are those that run models through torch (MiniLM, the cross-encoders, the judges, the model step
under other kernels); pass others as arguments.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ragcal.numerics import PINNED_ENVIRONMENT
from ragcal.study.parallel import THREAD_VARIABLES as VARIABLES
from ragcal.study.parallel import default_jobs

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TESTS = ("tests/embedding", "tests/judges", "tests/retrieval/test_rerank.py", "tests/study/test_kernels.py")


def run(tests, threads: int | None) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one ``pytest -n 2`` over ``tests``; ``threads=None``: as tests/conftest.py sets."""
    env = {key: value for key, value in os.environ.items() if key not in VARIABLES}
    env.update(PINNED_ENVIRONMENT, OMP_WAIT_POLICY="PASSIVE")
    if threads is not None:  # set before pytest starts: the conftest's setdefault keeps them
        env.update({name: str(threads) for name in VARIABLES})
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", *tests],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"pytest failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tests", nargs="*", default=list(DEFAULT_TESTS))
    parser.add_argument("--repeats", type=int, default=2)
    options = parser.parse_args(argv)
    cores = default_jobs()
    print(f"{cores} cores; pytest -n 2 on {' '.join(options.tests)}")
    measured = {"before": [], "now": []}
    for repeat in range(options.repeats):
        order = (("before", cores), ("now", None))
        for name, threads in order if repeat % 2 == 0 else order[::-1]:
            wall, cpu = run(options.tests, threads)
            measured[name].append((wall, cpu))
            pools = "default pools" if threads else "one share each"
            print(f"  {name:6s} ({pools}): {wall:6.1f} s wall, {cpu:6.1f} s CPU")
    for position, what in enumerate(("wall", "CPU")):
        before = statistics.median(run[position] for run in measured["before"])
        now = statistics.median(run[position] for run in measured["now"])
        print(f"median {what}: before {before:.1f} s, now {now:.1f} s, ratio now/before {now / before:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
