"""Load on ``ragcal serve``: throughput and latency of ``POST /decide`` on the bundled FastAPI docs, over loopback.

    python benchmarks/bench_serve.py [--requests 2000] [--clients 8] [--gate results/fastapi/gates/chain_keep095.json]

Starts ``ragcal serve`` as a subprocess on a free loopback port, waits for
``/healthz``, sends ``--warm-up`` requests that are not counted, then a solo
phase (one client, for the service time of one decision) and the measured
phase: ``--requests`` requests from ``--clients`` concurrent clients, each on
its own keep-alive connection. Questions are the bundled labeled set's
(``data/queries/fastapi.csv``), cycled, each with a counter suffix so that
every request is a new question. Prints throughput, p50/p90/p99/max latency,
the p99/p50 ratio and the share of failed requests (a status other than 200,
or a connection error), then the goals: no failure, p99 at most 3x p50.
Nothing is asserted: shared machines are noisy, only the reading means
anything. The server is stopped by its process id at the end.
"""

from __future__ import annotations

import argparse
import csv
import http.client
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_GATE = ROOT / "results" / "fastapi" / "gates" / "chain_keep095.json"
DEFAULT_QUERIES = ROOT / "data" / "queries" / "fastapi.csv"
START_TIMEOUT = 300.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def load_questions(path: Path) -> list[str]:
    with open(path, newline="", encoding="utf-8") as handle:
        return [row["query"] for row in csv.DictReader(handle)]


def start_server(gate: Path, port: int, log_path: Path, extra: list[str]) -> subprocess.Popen:
    command = [sys.executable, "-m", "ragcal", "serve", "--gate", str(gate), "--port", str(port), *extra]
    with open(log_path, "wb") as log:
        return subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)


def wait_for_health(process: subprocess.Popen, base: str, log_path: Path) -> dict:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"ragcal serve exited with {process.returncode}:\n{log_path.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2.0) as response:
                return json.loads(response.read())
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"ragcal serve did not answer /healthz in {START_TIMEOUT:.0f} s:\n{log_path.read_text()[-3000:]}")


class Client:
    """One keep-alive HTTP connection; a connection error counts as a failure and opens a new connection."""

    def __init__(self, port: int):
        self.port = port
        self.connection = None

    def decide(self, question: str) -> tuple[float, bool]:
        """``(seconds, ok)`` of one ``POST /decide``."""
        body = json.dumps({"query": question}).encode()
        start = time.perf_counter()
        try:
            if self.connection is None:
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            self.connection.request("POST", "/decide", body=body, headers={"Content-Type": "application/json"})
            response = self.connection.getresponse()
            response.read()
            ok = response.status == 200
        except (OSError, http.client.HTTPException):
            if self.connection is not None:
                self.connection.close()
            self.connection = None
            ok = False
        return time.perf_counter() - start, ok

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()


def run_phase(port: int, questions: list[str], *, n_requests: int, n_clients: int, label: str):
    """Send ``n_requests`` from ``n_clients`` threads; returns (latencies in s, ok flags, wall seconds)."""
    counter = itertools.count()
    lock = threading.Lock()
    latencies, oks = [], []

    def work() -> None:
        client = Client(port)
        try:
            while True:
                with lock:
                    number = next(counter)
                if number >= n_requests:
                    return
                question = f"{questions[number % len(questions)]} ({label} {number})"
                seconds, ok = client.decide(question)
                with lock:
                    latencies.append(seconds)
                    oks.append(ok)
        finally:
            client.close()

    threads = [threading.Thread(target=work) for _ in range(n_clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return np.array(latencies), np.array(oks, dtype=bool), time.perf_counter() - start


def report(name: str, latencies, oks, wall: float, n_clients: int) -> dict:
    p50, p90, p99 = np.percentile(latencies * 1000, [50, 90, 99])
    failed = 1.0 - oks.mean() if len(oks) else float("nan")
    print(
        f"{name}: {len(latencies):,} requests, {n_clients} client(s), {wall:.1f} s\n"
        f"  throughput   {len(latencies) / wall:8.1f} req/s\n"
        f"  latency ms   p50 {p50:7.1f}   p90 {p90:7.1f}   p99 {p99:7.1f}   max {latencies.max() * 1000:7.1f}\n"
        f"  p99/p50      {p99 / p50:8.2f}\n"
        f"  failed       {failed:8.2%}  ({int((~oks).sum())} of {len(oks)})"
    )
    return {"p50": p50, "p99": p99, "failed": failed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="measured requests (default 2000)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (default 8)")
    parser.add_argument("--gate", type=Path, default=DEFAULT_GATE, help=f"gate file (default {DEFAULT_GATE.name})")
    parser.add_argument("--queries", type=Path, default=DEFAULT_QUERIES, help="CSV with a 'query' column")
    parser.add_argument("--warm-up", type=int, default=50, help="requests sent first and not counted (default 50)")
    parser.add_argument("--solo", type=int, default=100, help="requests from one client, for the service time")
    parser.add_argument("--cache-dir", type=Path, default=None, help="embedding cache folder for the server")
    parser.add_argument("--torch-threads", type=int, default=None, help="passed to ragcal serve (default: its own)")
    args = parser.parse_args()
    if args.requests < 1 or args.clients < 1:
        parser.error("--requests and --clients must be positive")
    questions = load_questions(args.queries)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = Path(tempfile.mkdtemp(prefix="bench_serve_")) / "server.log"
    extra = ["--cache-dir", str(args.cache_dir)] if args.cache_dir else []
    if args.torch_threads is not None:
        extra += ["--torch-threads", str(args.torch_threads)]
    started = time.perf_counter()
    process = start_server(args.gate, port, log_path, extra)
    try:
        health = wait_for_health(process, base, log_path)
        threads = args.torch_threads if args.torch_threads is not None else "torch's default"
        print(
            f"ragcal serve up in {time.perf_counter() - started:.1f} s: {health['gate']} gate {args.gate.name}, "
            f"{health['n_chunks']:,} chunks, level(s) {', '.join(health['levels'])}, torch threads {threads}; "
            f"log {log_path}"
        )
        print(f"load average (1, 5, 15 min) before the run: {', '.join(f'{x:.2f}' for x in os.getloadavg())} "
              f"on {os.cpu_count()} cores (other processes make the numbers noisy)")
        if args.warm_up:
            run_phase(port, questions, n_requests=args.warm_up, n_clients=args.clients, label="warm-up")
        if args.solo:
            latencies, oks, wall = run_phase(port, questions, n_requests=args.solo, n_clients=1, label="solo")
            report("solo (service time of one decision)", latencies, oks, wall, 1)
        latencies, oks, wall = run_phase(
            port, questions, n_requests=args.requests, n_clients=args.clients, label="load"
        )
        numbers = report("load", latencies, oks, wall, args.clients)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    ratio = numbers["p99"] / numbers["p50"]
    print(f"load average after the run: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("goals:")
    print(f"  zero failed requests: {'met' if numbers['failed'] == 0 else 'NOT met'} ({numbers['failed']:.2%})")
    print(f"  p99 <= 3 x p50:       {'met' if ratio <= 3 else 'NOT met'} (p99/p50 = {ratio:.2f})")


if __name__ == "__main__":
    main()
