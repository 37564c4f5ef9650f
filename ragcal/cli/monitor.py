"""``ragcal monitor``: does an unlabeled live score log still look like the gate's calibration set?"""

from __future__ import annotations

from pathlib import Path

from ._options import add_engine_options

#: Exit codes, as ``--help`` states them.
NO_SHIFT, SHIFT, ERROR = 0, 1, 2


def add_parsers(commands) -> None:
    monitor = commands.add_parser(
        "monitor",
        help="check an unlabeled live score log against the gate's calibration set (shift, drift over time)",
        description="Compares the gate's answer/hedge/refuse shares on the live log with those on the calibration "
        "score table (Fisher exact tests), each signal the gate reads (Kolmogorov-Smirnov, median shift with a "
        "bootstrap interval) and, when the log has a 'timestamp' column, tests exchangeability over time (a conformal "
        "test martingale). The chance of any false alarm is at most --alpha (Bonferroni over all the tests).",
        epilog="exit status: 0 no shift detected, 1 shift detected, 2 error (bad input)",
    )
    monitor.add_argument("live_log", metavar="LIVE_LOG",
                         help="score log: CSV, CSV.gz or Parquet with the gate's signal columns (no labels needed), "
                         "optionally 'timestamp' (ISO 8601); a folder or a quoted glob of Parquet files with "
                         "--engine duckdb or spark")
    monitor.add_argument("--gate", type=Path, required=True, help="gate JSON from ragcal fit-gate")
    monitor.add_argument(
        "--calibration",
        type=Path,
        default=None,
        metavar="SCORES",
        help="the labeled score table the gate was fitted on (required: gate files do not record its path)",
    )
    monitor.add_argument("--alpha", type=float, default=0.05, help="false-alarm rate over all tests (default 0.05)")
    monitor.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and the martingale (default 0)")
    monitor.add_argument("--json", action="store_true", help="print the report as one JSON object")
    add_engine_options(monitor)
    monitor.set_defaults(run=run_monitor)


def run_monitor(args) -> int:
    import json

    from ..gates import read_gate_file
    from ..logs.monitor_counts import monitor_log

    document = read_gate_file(args.gate)
    if args.calibration is None:
        queries = (document.get("provenance") or {}).get("queries")
        hint = f" (it was fitted on questions from {queries})" if queries else ""
        raise ValueError(
            f"{args.gate}: the gate file does not record the score table it was fitted on{hint}; "
            "give it with --calibration SCORES.csv"
        )
    report = monitor_log(document["gate"], args.live_log, args.calibration, engine=args.engine, since=args.since,
                         until=args.until, bins=args.bins, alpha=args.alpha, random_state=args.seed)  # fmt: skip
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.to_markdown(), end="\n" if args.json else "")
    return SHIFT if report.shift_detected else NO_SHIFT
