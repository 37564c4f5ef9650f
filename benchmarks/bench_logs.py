"""Score logs larger than memory: counting a synthetic Parquet log with DuckDB, beside the pandas path.

Run with ``.venv/bin/python benchmarks/bench_logs.py [--rows 10M 100M] [--folder DIR] [--keep]``. For each size a
labeled synthetic log (id, answerable, slice, one score) is written as Parquet in chunks of 5 M rows (never whole
in memory), then counted in a fresh process each, so that the peak memory of each path is its own:

- DuckDB (``count_log_duckdb``, memory_limit 1 GB): wall time, wall time per 100 M rows, peak RSS;
- pandas (``pd.read_parquet`` + ``count_log``), only up to ``--pandas-max`` rows (default 10 M): the same;

and prints the ratio pandas / DuckDB where both ran. Every comparison runs side by side in one run; nothing is
asserted. Disk: about 11 bytes a row (10 M rows: 110 MB; 1 B rows: 11 GB, opt-in with ``--rows 1B``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CHUNK = 5_000_000
SIZES = {"1M": 1_000_000, "10M": 10_000_000, "100M": 100_000_000, "1B": 1_000_000_000}
# One counting run in a fresh process: prints seconds and the counts' size; the parent reads peak RSS from wait4.
CHILD = """
import sys, time
from pathlib import Path
engine, folder = sys.argv[1], Path(sys.argv[2])
started = time.perf_counter()
if engine == "duckdb":
    from ragcal.logs.duckdb_counts import count_log_duckdb
    counts = count_log_duckdb(folder, "score", memory_limit="1GB")
else:
    import pandas as pd
    from ragcal.logs.counts import count_log
    counts = count_log(pd.read_parquet(folder), "score")
print(time.perf_counter() - started, len(counts.frame), counts.binning.kind, counts.auc(), counts.keep_threshold(0.95))
"""


def write_log(folder: Path, rows: int, *, seed: int = 0) -> None:
    """``rows`` labeled rows as Parquet files of at most :data:`CHUNK` rows each; scores on a 1e-6 grid."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    names = np.array(["answerable", "near-domain", "unrelated"])
    for part, start in enumerate(range(0, rows, CHUNK)):
        n = min(CHUNK, rows - start)
        slices = rng.choice(3, size=n, p=[0.5, 0.3, 0.2])
        answerable = slices == 0
        scores = np.round(np.where(answerable, rng.normal(0.6, 0.1, n), rng.normal(0.4, 0.12, n)), 6)
        table = pa.table({
            "id": pa.array(np.arange(start, start + n, dtype=np.int64)),
            "answerable": pa.array(answerable),
            "slice": pa.DictionaryArray.from_arrays(pa.array(slices.astype(np.int32)), pa.array(names)),
            "score": pa.array(scores.astype(np.float32)),
        })  # fmt: skip
        pq.write_table(table, folder / f"part{part:05d}.parquet")


def count_in_child(engine: str, folder: Path) -> dict:
    """One counting run in a fresh process: wall seconds, peak RSS (MB) and what it found."""
    import os

    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", CHILD, engine, str(folder)], stdout=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(process.pid, 0)
    output = process.stdout.read().split()
    if status != 0 or len(output) != 5:
        raise RuntimeError(f"{engine} failed on {folder} (status {status}): {output}")
    return {
        "engine": engine,
        "seconds_in_process": float(output[0]),
        "seconds_with_start": time.perf_counter() - started,
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "bins": int(output[1]),
        "binning": output[2],
        "auc": float(output[3]),
        "keep095": float(output[4]),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", nargs="+", default=["10M", "100M"], choices=list(SIZES))
    parser.add_argument("--pandas-max", default="10M", choices=list(SIZES), help="largest size the pandas path reads")
    parser.add_argument("--folder", type=Path, default=None, help="where the logs go (default: a temporary folder)")
    parser.add_argument("--json", type=Path, default=None, help="write the rows as JSON too")
    options = parser.parse_args(argv)
    root = options.folder or Path(tempfile.mkdtemp(prefix="ragcal-bench-logs-"))
    rows_out = []
    try:
        for size in options.rows:
            rows = SIZES[size]
            folder = root / size
            started = time.perf_counter()
            write_log(folder, rows)
            written = time.perf_counter() - started
            disk = sum(path.stat().st_size for path in folder.glob("*.parquet")) / 2**20
            print(f"{size}: {rows:,} rows written in {written:.1f} s, {disk:,.0f} MB of Parquet", flush=True)
            results = [count_in_child("duckdb", folder)]
            if rows <= SIZES[options.pandas_max]:
                results.append(count_in_child("pandas", folder))
            for result in results:
                result.update(size=size, rows=rows, per_100m=result["seconds_in_process"] * 1e8 / rows)
                print(
                    f"  {result['engine']:<7} {result['seconds_in_process']:7.1f} s ({result['per_100m']:.1f} s per "
                    f"100 M rows), peak {result['peak_rss_mb']:,.0f} MB, {result['bins']:,} count rows "
                    f"({result['binning']}), AUC {result['auc']:.6f}, keep@0.95 {result['keep095']:.6f}",
                    flush=True,
                )
            if len(results) == 2:
                duck, pandas = results
                print(
                    f"  pandas / DuckDB: time x{pandas['seconds_in_process'] / duck['seconds_in_process']:.2f}, "
                    f"peak memory x{pandas['peak_rss_mb'] / duck['peak_rss_mb']:.2f}; same AUC and threshold: "
                    f"{duck['auc'] == pandas['auc'] and duck['keep095'] == pandas['keep095']}",
                    flush=True,
                )
            rows_out += results
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        if options.folder is None:
            shutil.rmtree(root, ignore_errors=True)
    if options.json:
        options.json.write_text(json.dumps(rows_out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
