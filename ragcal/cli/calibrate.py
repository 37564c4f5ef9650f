"""``ragcal calibrate``: thresholds and per-slice outcomes with intervals, for any score table (no corpus)."""

from __future__ import annotations

import math
from pathlib import Path

from ._options import LazyHelp, add_engine_options, add_signals_module, warn


def _rules_help() -> str:
    from ..calibration import RULES

    return "threshold rule, repeatable (default keep@1.0); one of: " + "; ".join(
        f"{name}@X: {rule.description}" for name, rule in RULES.items()
    )


def add_parsers(commands) -> None:
    calibrate = commands.add_parser(
        "calibrate",
        help="fit a threshold on a score table and show the per-slice outcome",
        description="Works on any CSV with 'answerable' (true/false), 'slice' and a numeric signal column, "
        "for instance scores logged by a production system.",
    )
    calibrate.add_argument(
        "scores",
        type=Path,
        help="score table or log: a CSV (also .csv.gz) or Parquet (.parquet, .pq) file, a folder of Parquet files or "
        "a quoted glob ('logs/*.parquet')",
    )
    calibrate.add_argument("--signal", default="dense_top1", help="signal column (default dense_top1)")
    calibrate.add_argument(
        "--rule",
        action="append",
        default=None,
        help=LazyHelp(_rules_help),
    )
    calibrate.add_argument(
        "--delta", type=float, default=0.1, help="1 - confidence of the guarantee rules (default 0.1)"
    )
    calibrate.add_argument(
        "--lower-is-answerable",
        action="store_true",
        help="the signal is low for answerable queries (default: the registry's direction, else the one recorded in "
        "the table's .meta.json by ragcal join, else high)",
    )
    calibrate.add_argument(
        "--heldout",
        type=int,
        default=0,
        metavar="N",
        help="also fit on half of each slice and score the other half, over N random splits",
    )
    calibrate.add_argument("--seed", type=int, default=0)
    calibrate.add_argument(
        "--sweep",
        type=Path,
        default=None,
        metavar="OUT.csv",
        help="write the per-slice sweep with exact counts and intervals (every distinct score up to 20,000 of "
        "them, else a 1,001-point grid) plus the fitted thresholds",
    )
    add_engine_options(calibrate)
    add_signals_module(calibrate)
    calibrate.set_defaults(run=run_calibrate)


def _print_auc(result) -> None:
    for row in result.auc.itertuples():
        if row.auc != row.auc:  # NaN: one class or a constant score
            print(f"AUC (answerable vs {row.comparison}): n/a")
            continue
        scheme = (
            f"stratified bootstrap, 2000 resamples of all {row.n_answerable + row.n_unanswerable} rows"
            if row.interval == "bootstrap"
            else f"m-out-of-n bootstrap, 2000 resamples of a stratified {row.bootstrap_rows}-row subsample, "
            "rescaled to every row"
        )
        print(f"AUC (answerable vs {row.comparison}): {row.auc:.4f} [{row.ci_low:.4f}, {row.ci_high:.4f}] ({scheme})")


def _print_rule(row, signal, higher, undefined) -> None:
    if math.isnan(row["threshold"]):
        print(f"\n{row['rule']}: no threshold (it keeps a share of the answerable questions, and there are none)")
        return
    print(f"\n{row['rule']}: answer when {signal} {'>=' if higher else '<='} {row['threshold']:.4f}")
    print("  (fitted and scored on the same queries: an in-sample view; use --heldout for honest estimates)")
    groups = ["answerable_kept"] + [
        column[:-2] for column in row.index if column.endswith("_refused_k") and column != "unanswerable_refused_k"
    ]
    groups.append("unanswerable_refused")
    for group in groups:
        population = group.rsplit("_", 1)[0]
        size = row[population + "_n"]
        if size == 0:
            print(f"  {group:<28} n/a ({undefined.get(population, 'no questions')})")
            continue
        print(
            f"  {group:<28} {row[group]:6.1%}  ({int(row[group + '_k'])}/{int(size)})  "
            f"[{row[group + '_low']:.1%}, {row[group + '_high']:.1%}]"
        )


def _direction(args, provenance):
    from ..signals.directions import signal_direction
    from ..signals import SIGNALS

    if args.lower_is_answerable:
        return False, "--lower-is-answerable"
    # A logged signal's direction is recorded in the table's .meta.json (ragcal join, score --extra-signals).
    direction = signal_direction(args.signal, None if args.signal in SIGNALS else provenance)
    if "inferred from labels" in direction.decided_by:
        warn(f"{args.signal}: its direction was inferred from these labels; its AUC here is >= 0.5 by construction")
    return direction.higher_is_answerable, direction.decided_by


def _run_from_counts(args, rules, engine) -> None:
    """Calibration from counts (DuckDB, Spark, or pandas on a time window): see :mod:`ragcal.logs`."""
    from ..logs.calibration_counts import calibrate_counts
    from ..logs.engines import count_signal
    from ..score_tables import read_provenance

    if args.heldout:
        raise ValueError(
            "--heldout draws random halves of the rows: it needs them in memory (--engine pandas, without "
            "--since/--until); from counts, calibrate shows the fitted thresholds and their exact outcomes"
        )
    provenance = read_provenance(args.scores) if args.scores.is_file() else None
    higher, decided_by = _direction(args, provenance)
    counts = count_signal(args.scores, args.signal, engine=engine, since=args.since, until=args.until,
                          bins=args.bins, higher_is_answerable=higher)  # fmt: skip
    labeled = counts.frame[counts.frame["answerable"].notna()]
    n_unlabeled = int(counts.frame["n"].sum() - labeled["n"].sum())
    window = "" if args.since is None and args.until is None else f" in [{args.since or '...'}, {args.until or '...'})"
    print(f"{args.scores}{window}: {counts.n_rows:,} rows read by {engine}; signal {args.signal} "
          f"({'higher' if higher else 'lower'} means answerable: {decided_by}); intervals: exact 95% binomial")  # fmt: skip
    print(f"bins: {counts.binning.exactness}")
    if counts.n_nan:
        warn(f"{args.scores}: {counts.n_nan:,} rows without a {args.signal} score are left out")
    if n_unlabeled:
        warn(f"{args.scores}: {n_unlabeled:,} rows without an answerable label (true/false) are left out")
    result = calibrate_counts(counts, rules, delta=args.delta, random_state=args.seed)
    n_answerable = int(labeled.loc[labeled["answerable"].astype(bool), "n"].sum())
    _print_result(args, result, higher, n_answerable, int(labeled["n"].sum()) - n_answerable)


def _print_result(args, result, higher, n_answerable, n_unanswerable) -> None:
    """What both paths print: group statistics, AUCs, each rule's outcome, the sweep file."""
    from .._io import atomic_write_text

    print(result.group_stats.drop(columns="signal").to_string(index=False, float_format=lambda value: f"{value:.4f}"))
    _print_auc(result)
    # One class only: the other class's rates have no questions to count; say so rather than print nan%.
    undefined = {}
    if n_unanswerable == 0:
        undefined["unanswerable"] = "no unanswerable questions"
        warn(f"{args.scores}: no unanswerable questions; refusal rates are undefined (shown as n/a)")
    if n_answerable == 0:
        undefined["answerable"] = "no answerable questions"
        warn(
            f"{args.scores}: no answerable questions; the share of answerable questions kept is undefined "
            "(shown as n/a), and keep@ rules have no threshold"
        )
    for _, row in result.thresholds.iterrows():
        for message in row["messages"]:
            warn(message)
        _print_rule(row, args.signal, higher, undefined)
    if args.sweep is not None:
        atomic_write_text(args.sweep, result.sweep.to_csv(index=False))
        print(f"\nsweep ({result.sweep_scheme}; exact counts): {len(result.sweep)} thresholds written to {args.sweep}")
    return undefined


def run_calibrate(args) -> None:
    import warnings

    import pandas as pd

    from ..calibration import calibrate, parse_rule, summarize_heldout
    from ..calibration.heldout import fallback_notes
    from ..logs.engines import choose_engine
    from ..metrics import DegenerateInputWarning
    from ..score_tables import read_provenance, read_score_table

    rules = args.rule or ["keep@1.0"]
    for rule in rules:
        parse_rule(rule)
    engine = choose_engine(args.engine, args.scores)
    if engine != "pandas" or args.since is not None or args.until is not None:
        return _run_from_counts(args, rules, engine)
    # CSV or Parquet, only the needed columns, through DuckDB: fine for millions of rows.
    table = read_score_table(args.scores, [args.signal])
    higher, decided_by = _direction(args, read_provenance(args.scores))
    print(
        f"{args.scores}: {len(table)} queries; signal {args.signal} "
        f"({'higher' if higher else 'lower'} means answerable: {decided_by}); intervals: exact 95% binomial"
    )
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("ignore", DegenerateInputWarning)
        result = calibrate(
            table,
            args.signal,
            rules,
            higher_is_answerable=higher,
            delta=args.delta,
            n_splits=args.heldout,
            random_state=args.seed,
        )
    n_answerable = int(table["answerable"].sum())
    undefined = _print_result(args, result, higher, n_answerable, len(table) - n_answerable)
    if args.heldout:
        summary = summarize_heldout(
            result.heldout, answerable="answerable" not in undefined, unanswerable="unanswerable" not in undefined
        )
        print(f"\nheld out over {args.heldout} stratified half splits (5th / 50th / 95th percentile):")
        with pd.option_context("display.width", 200, "display.max_columns", 50):
            print(summary.round(3).to_string(na_rep="n/a"))
        for population, reason in undefined.items():
            print(f"(left out: {'refusal rates' if population == 'unanswerable' else 'answerable_kept'}, {reason})")
        for line in fallback_notes(result.heldout):
            print(line)
