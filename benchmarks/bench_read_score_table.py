"""Reading a large score log, before and after the reader moved from pyarrow to DuckDB (pyarrow left the core).

    .venv/bin/python benchmarks/bench_read_score_table.py [--before 4418176] [--rows 1000000] [--repeats 3]

What ``ragcal calibrate LOG`` (pandas engine), ``review`` and ``monitor`` do first:
``ragcal.score_tables.read_score_table`` of a CSV and of a Parquet file with
``rows`` questions and eight signals, keeping two of them. The old code is
checked out into a throw-away git worktree (removed at the end); each read is a
fresh subprocess with ``PYTHONPATH`` set to its tree, old and new alternating so
that a burst of load on the shared machine hits both alike. Prints the seconds
of each read, the median ratio per format, and whether old and new read the
same table: the same columns, types and every value's bits (a SHA-256 of each).
Asserts nothing: a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from worktree import worktree

ROOT = Path(__file__).resolve().parent.parent
SIGNALS = [f"signal_{number}" for number in range(8)]
READ = """
import hashlib, sys, time
start = time.perf_counter()
from ragcal.score_tables import read_score_table
table = read_score_table(sys.argv[1], ["signal_0", "signal_5"])
seconds = time.perf_counter() - start
digest = hashlib.sha256()
for column in table.columns:
    values = table[column]
    digest.update(f"{column}:{values.dtype}".encode())
    if isinstance(values.dtype, type(table["slice"].dtype)):
        values = values.astype(str)
    digest.update(values.to_numpy().tobytes() if values.dtype.kind in "fib" else "\\x00".join(map(str, values)).encode())
print(seconds)
print(digest.hexdigest())
"""


def write_log(folder: Path, rows: int) -> dict[str, Path]:
    """A score log of ``rows`` questions: id, query, answerable, slice and eight signals of full float64 precision."""
    generator = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "id": [f"q{number:07d}" for number in range(rows)],
            "query": [f"question number {number}, with a comma" for number in range(rows)],
            "answerable": generator.random(rows) < 0.7,
            "slice": generator.choice(["answerable", "unrelated", "near-miss"], rows),
            **{name: generator.random(rows) for name in SIGNALS},
        }
    )
    paths = {"csv": folder / "log.csv", "parquet": folder / "log.parquet"}
    frame.to_csv(paths["csv"], index=False)
    frame.to_parquet(paths["parquet"], index=False)
    return paths


def read(tree: Path, path: Path) -> tuple[float, str]:
    done = subprocess.run([sys.executable, "-c", READ, str(path)], env={**os.environ, "PYTHONPATH": str(tree)},
                          cwd=tree, capture_output=True, text=True, check=True)  # fmt: skip
    seconds, digest = done.stdout.split()
    return float(seconds), digest


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="4418176", help="the commit whose reader is pyarrow's")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-read-") as folder, worktree(options.before) as before:
        paths = write_log(Path(folder), options.rows)
        print(f"{options.rows:,} rows, 12 columns; CSV {paths['csv'].stat().st_size / 1e6:.0f} MB, "
              f"Parquet {paths['parquet'].stat().st_size / 1e6:.0f} MB; two signals read")  # fmt: skip
        for kind, path in paths.items():
            times = {"pyarrow (before)": [], "DuckDB (now)": []}
            digests = {name: set() for name in times}
            for _ in range(options.repeats):
                for name, tree in (("pyarrow (before)", before), ("DuckDB (now)", ROOT)):
                    seconds, digest = read(tree, path)
                    times[name].append(seconds)
                    digests[name].add(digest)
            for name, values in times.items():
                print(f"  {kind:8} {name:17} " + "  ".join(f"{value:6.2f} s" for value in values))
            ratio = statistics.median(times["DuckDB (now)"]) / statistics.median(times["pyarrow (before)"])
            same = digests["pyarrow (before)"] == digests["DuckDB (now)"] and len(digests["DuckDB (now)"]) == 1
            print(f"  {kind:8} median ratio now / before: {ratio:.2f}; the same table, bit for bit: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
