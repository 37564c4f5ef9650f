"""Start-up time of the ``ragcal`` command beside a bare Python, measured side by side in one run.

    python benchmarks/bench_startup.py [--repeats 15]

Prints the median wall time of ``python -c pass``, ``python -c "import ragcal"``
and ``ragcal --help`` (as ``python -m ragcal --help``, so that the console
script's own start-up does not blur the comparison), the difference to bare
Python, and which heavy modules ``ragcal --help`` imported (none expected).
The goal on this 2-core machine: ``ragcal --help`` under 0.5 s. Not a test:
shared machines are noisy, so only this side-by-side reading means anything.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import ragcal": [sys.executable, "-c", "import ragcal"],
    "ragcal --help": [sys.executable, "-m", "ragcal", "--help"],
}
HEAVY = ("torch", "sentence_transformers", "faiss", "sklearn", "scipy", "pandas", "matplotlib")


def wall_time(command) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    for command in COMMANDS.values():  # warm the file cache
        wall_time(command)
    # Interleaved, so that a burst of load on the shared machine hits every command alike.
    times = {name: [] for name in COMMANDS}
    for _ in range(args.repeats):
        for name, command in COMMANDS.items():
            times[name].append(wall_time(command))
    bare = statistics.median(times["python -c pass"])
    print(f"median of {args.repeats} interleaved runs:")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:<16} {median:6.3f} s   (+{median - bare:5.3f} s over bare Python, x{median / bare:4.1f})")
    probe = (
        "import sys, contextlib, io\n"
        "from ragcal.cli import build_parser\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        build_parser().parse_args(['--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    print(f"heavy modules imported by ragcal --help: {loaded or 'none'}")
    goal = statistics.median(times["ragcal --help"])
    print(f"goal ragcal --help < 0.5 s: {'met' if goal < 0.5 else 'NOT met'} ({goal:.3f} s)")


if __name__ == "__main__":
    main()
