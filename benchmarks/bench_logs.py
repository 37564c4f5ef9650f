"""Score logs larger than memory: ``ragcal calibrate`` and ``ragcal monitor`` on DuckDB, beside the pandas path.

Run with ``.venv/bin/python benchmarks/bench_logs.py [--rows 10M 100M] [--only calibrate monitor review]
[--folder DIR [--keep-logs]] [--json OUT]``. For each size a labeled synthetic score log (id, query, answerable,
slice, ``dense_top1``, ``timestamp``; the query text dictionary-encoded, as a lake stores repeated text) is written
as one Parquet file in row groups of 5 M rows (never whole in memory); ``--keep-logs`` leaves it in ``--folder``
and reuses it next time. Then, each in a fresh process so that the peak memory
(RSS, from ``wait4``) is its own, the commands a user runs:

- ``ragcal calibrate LOG --engine duckdb`` (three rules, AUC intervals), and ``--engine pandas`` up to
  ``--pandas-max`` rows (default 10 M): wall time, per 100 M rows, peak RSS, and the ratio pandas / DuckDB;
- ``ragcal monitor LOG --engine duckdb`` against a 5,000-row calibration table and a threshold gate, up to
  ``--monitor-max`` rows (default 100 M): the gate's decisions run in Python on every batch of rows;
- the review sample of ``ragcal review LOG --engine duckdb`` (``review_sample_log``, 60 rows; the command's
  passage retrieval needs a corpus), up to ``--review-max`` rows (default 100 M);

and checks that both paths print the same thresholds. Every comparison runs side by side in one run; nothing is
asserted. Disk: about 13 bytes a row (10 M rows: 130 MB; 1 B rows: 13 GB, opt-in with ``--rows 1B``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CHUNK = 5_000_000
SIZES = {"1M": 1_000_000, "10M": 10_000_000, "100M": 100_000_000, "1B": 1_000_000_000}
COMMANDS = ("calibrate", "monitor", "review")
#: Distinct question texts in a synthetic log.
QUERIES = 1_000
RULES = ["--rule", "keep@0.95", "--rule", "recall_guarantee@0.9", "--rule", "false_answer_guarantee@0.2"]


def scores(rng, n):
    slices = rng.choice(3, size=n, p=[0.5, 0.3, 0.2])
    answerable = slices == 0
    values = np.round(np.where(answerable, rng.normal(0.6, 0.1, n), rng.normal(0.4, 0.12, n)), 6)
    return slices, answerable, values.astype(np.float32)


def write_log(path: Path, rows: int, *, seed: int = 0) -> None:
    """``rows`` labeled rows as one Parquet file in row groups of at most :data:`CHUNK` rows; scores on a 1e-6 grid."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    names = pa.array(["answerable", "near-domain", "unrelated"])
    texts = pa.array([f"synthetic question {number}" for number in range(QUERIES)])
    start_time = np.datetime64("2026-01-01T00:00:00", "ms")
    writer = None
    try:
        for start in range(0, rows, CHUNK):
            n = min(CHUNK, rows - start)
            slices, answerable, values = scores(rng, n)
            table = pa.table({
                "id": pa.array(np.arange(start, start + n, dtype=np.int64)),
                "query": pa.DictionaryArray.from_arrays(pa.array(rng.integers(0, QUERIES, n, dtype=np.int32)), texts),
                "answerable": pa.array(answerable),
                "slice": pa.DictionaryArray.from_arrays(pa.array(slices.astype(np.int32)), names),
                "dense_top1": pa.array(values),
                "timestamp": pa.array(start_time + np.arange(start, start + n) * 30, pa.timestamp("ms", tz="UTC")),
            })  # fmt: skip
            writer = writer or pq.ParquetWriter(path, table.schema)
            writer.write_table(table, row_group_size=CHUNK)
    finally:
        if writer is not None:
            writer.close()


def log_rows(path: Path) -> int:
    """Rows in the Parquet file at ``path`` (from its footer)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows


def write_gate(folder: Path) -> tuple[Path, Path]:
    """A threshold gate on ``dense_top1`` and the 5,000-row calibration table it stands for."""
    import pandas as pd

    from ragcal.gates.files import save_gate
    from ragcal.gates.threshold import ThresholdGate

    rng = np.random.default_rng(1)
    slices, answerable, values = scores(rng, 5_000)
    names = np.array(["answerable", "near-domain", "unrelated"])
    calibration = folder / "calibration.csv"
    pd.DataFrame({"answerable": answerable, "slice": names[slices], "dense_top1": values}).to_csv(calibration)
    return save_gate(folder / "gate.json", ThresholdGate("dense_top1", 0.45)), calibration


#: The sampling step of ``ragcal review LOG --engine duckdb`` (the command then retrieves passages for the 60 rows
#: drawn, from the gate's corpus, which a synthetic log has not).
REVIEW = """
import sys
from ragcal.gates import read_gate_file
from ragcal.logs.review_draw import review_sample_log
sample = review_sample_log(read_gate_file(sys.argv[1])["gate"], sys.argv[2], engine="duckdb", size=60)
print(len(sample), "rows drawn from", sample.groupby("stratum")["stratum_size"].first().sum(), "rows")
"""


def run(arguments) -> dict:
    """One command in a fresh process: wall seconds, peak RSS (MB), exit status and what it printed."""
    started = time.perf_counter()
    command = ["-c", REVIEW, *arguments[1:]] if arguments[0] == "review" else ["-m", "ragcal", *arguments]
    with tempfile.TemporaryFile("w+") as errors:
        process = subprocess.Popen([sys.executable, *map(str, command)], stdout=subprocess.PIPE, stderr=errors,
                                   text=True)  # fmt: skip
        output = process.stdout.read()
        _, status, usage = os.wait4(process.pid, 0)
        errors.seek(0)
        error = errors.read()
    return {"seconds": time.perf_counter() - started, "peak_rss_mb": usage.ru_maxrss / 1024,
            "status": os.waitstatus_to_exitcode(status), "output": output, "error": error}  # fmt: skip


def thresholds(output: str) -> list[str]:
    return [line for line in output.splitlines() if ": answer when" in line]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", nargs="+", default=["10M", "100M"], choices=list(SIZES))
    parser.add_argument("--pandas-max", default="10M", choices=list(SIZES), help="largest size the pandas path reads")
    parser.add_argument("--monitor-max", default="100M", choices=list(SIZES), help="largest size monitor runs on")
    parser.add_argument("--review-max", default="100M", choices=list(SIZES), help="largest size review samples")
    parser.add_argument("--only", nargs="+", default=list(COMMANDS), choices=COMMANDS, help="commands to run")
    parser.add_argument("--folder", type=Path, default=None, help="where the logs go (default: a temporary folder)")
    parser.add_argument("--keep-logs", action="store_true", help="leave the logs in --folder; reuse those there")
    parser.add_argument("--json", type=Path, default=None, help="write the rows as JSON too")
    options = parser.parse_args(argv)
    if options.keep_logs and options.folder is None:
        parser.error("--keep-logs needs --folder (a temporary folder is removed at the end)")
    root = options.folder or Path(tempfile.mkdtemp(prefix="ragcal-bench-logs-"))
    root.mkdir(parents=True, exist_ok=True)
    rows_out = []
    gate, calibration = write_gate(root)
    try:
        for size in options.rows:
            rows = SIZES[size]
            log = root / f"{size}.parquet"
            started = time.perf_counter()
            if options.keep_logs and log.exists() and log_rows(log) == rows:
                print(f"{size}: reusing {log}", end="; ")
            else:
                write_log(log, rows)
                print(f"{size}: {rows:,} rows written in {time.perf_counter() - started:.1f} s", end=", ")
            print(f"{log.stat().st_size / 2**20:,.0f} MB of Parquet", flush=True)
            commands = {}
            if "calibrate" in options.only:
                commands["calibrate duckdb"] = ["calibrate", log, "--engine", "duckdb", *RULES]
            if "calibrate" in options.only and rows <= SIZES[options.pandas_max]:
                commands["calibrate pandas"] = ["calibrate", log, "--engine", "pandas", *RULES]
            if "monitor" in options.only and rows <= SIZES[options.monitor_max]:
                commands["monitor duckdb"] = ["monitor", log, "--gate", gate, "--calibration", calibration,
                                              "--engine", "duckdb", "--json"]  # fmt: skip
            if "review" in options.only and rows <= SIZES[options.review_max]:
                commands["review duckdb"] = ["review", gate, log]
            results = {}
            for name, arguments in commands.items():
                result = results[name] = run(arguments)
                result.update(command=name, size=size, rows=rows, per_100m=result["seconds"] * 1e8 / rows)
                print(f"  {name:<17} {result['seconds']:7.1f} s ({result['per_100m']:.1f} s per 100 M rows), peak "
                      f"{result['peak_rss_mb']:,.0f} MB, exit {result['status']}", flush=True)  # fmt: skip
                if result["status"] != 0:  # what the command said on stderr, its last lines
                    print("    " + "\n    ".join(result["error"].strip().splitlines()[-5:]), flush=True)
            if "review duckdb" in results:
                print(f"    review: {results['review duckdb']['output'].strip()}")
            for name in ("calibrate duckdb", "calibrate pandas"):
                for line in thresholds(results.get(name, {"output": ""})["output"]):
                    print(f"    {name.split()[1]}: {line}")
            if "calibrate duckdb" in results:
                bins = [line for line in results["calibrate duckdb"]["output"].splitlines() if line.startswith("bins:")]
                print(f"    duckdb {bins[0] if bins else 'printed no bins line'}")
            if "calibrate pandas" in results:
                duck, pandas = results["calibrate duckdb"], results["calibrate pandas"]
                print(
                    f"  pandas / DuckDB (calibrate): time x{pandas['seconds'] / duck['seconds']:.2f}, peak memory "
                    f"x{pandas['peak_rss_mb'] / duck['peak_rss_mb']:.2f}; identical thresholds: "
                    f"{thresholds(duck['output']) == thresholds(pandas['output'])} (binned ones differ by less "
                    "than a cell)",
                    flush=True,
                )
            rows_out += [
                {key: value for key, value in result.items() if key not in ("output", "error")}
                for result in results.values()
            ]
            if not options.keep_logs:
                log.unlink()
    finally:
        if options.folder is None:
            shutil.rmtree(root, ignore_errors=True)
    if options.json:
        options.json.write_text(json.dumps(rows_out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
