"""``ragcal review``: draw a review sample of a live score log to label, and estimate from its labels."""

from __future__ import annotations

import sys
from pathlib import Path

from ..extras import require_extra
from ._options import add_engine_options
from .gates import add_gate_index_options


def add_parsers(commands) -> None:
    review = commands.add_parser(
        "review",
        help="draw a stratified sample of a live score log to label, or estimate from a labeled one",
        description="Two modes. `ragcal review --gate G LIVE_LOG --out sample.csv` draws a sample stratified by "
        "decision and by distance to the bar, retrieves each question's top passages with the index the gate was "
        "fitted on, and writes the labeling CSV. The log may be larger than memory: every engine reads it in "
        "batches, and a seeded hash of each row's id picks the rows (the smallest keys of each stratum), so that "
        "the same log gives the same sample on pandas, DuckDB and Spark, and whether it is one file or many. "
        "`ragcal review --gate G --labels sample.csv` estimates, with exact intervals for the stratified design, "
        "the share of refusals that were answerable (against seed 003's 20%% rule) and of answers that were "
        "unanswerable or unsupported; with --calibration and --refit it refits the gate on the calibration table "
        "plus the new labels.",
    )
    review.add_argument("live_log", nargs="?", default=None, metavar="LIVE_LOG",
                        help="score log (CSV, CSV.gz or Parquet file, folder or glob of Parquet files) with a 'query' "
                        "column, the gate's signals and, best, an 'id'")
    review.add_argument("--out", type=Path, default=None, help="review CSV to write (draw mode)")
    review.add_argument("--size", type=int, default=60, help="rows to draw (default 60)")
    review.add_argument("--seed", type=int, default=0, help="seed of the hash that draws the rows (default 0)")
    add_engine_options(review, bins=False)
    review.add_argument("--near-share", type=float, default=0.5,
                        help="share of each decision's part of the sample drawn near the bar (default 0.5)")
    review.add_argument("--passages", type=int, default=3, metavar="K",
                        help="top passages per question, from the gate's index (default 3); 0: none, and no index is "
                        "built (a store ragcal cannot rebuild, or a core install without the retrieval extra)")
    review.add_argument("--labels", type=Path, default=None, help="labeled review CSV (estimate mode)")
    review.add_argument("--confidence", type=float, default=0.95, help="confidence of the intervals (default 0.95)")
    review.add_argument("--calibration", type=Path, default=None,
                        help="score table the gate was fitted on (for --refit)")
    review.add_argument("--refit", type=Path, default=None, metavar="NEW_GATE.json",
                        help="refit the gate on --calibration plus the labeled rows and write it here")
    add_gate_index_options(review)
    review.set_defaults(run=run_review)


def run_review(args) -> None:
    if (args.labels is None) == (args.live_log is None):
        raise ValueError("ragcal review takes either LIVE_LOG with --out (draw a sample) or --labels FILE (estimate)")
    if args.labels is not None:
        return _run_estimates(args)
    if args.out is None:
        raise ValueError("ragcal review LIVE_LOG needs --out sample.csv")
    if args.refit is not None or args.calibration is not None:
        raise ValueError("--calibration and --refit go with --labels FILE, once the sample is labeled")
    if args.passages < 0:
        raise ValueError(f"--passages must be 0 or more. Got {args.passages} instead.")
    if args.passages:
        require_extra("retrieval", "ragcal review LIVE_LOG (the sample's passages come from the gate's index; "
                      "--passages 0 draws without them)")  # fmt: skip
    from ..gates import read_gate_file
    from ..gates.base import ACTIONS
    from ..logs.review_draw import review_sample_log
    from ..monitoring import attach_passages, write_review_csv
    from .gates import load_gate_and_index

    # The draw first, with the gate as read from its file (Spark ships it to its workers), so a bad log fails
    # before the index is built.
    sample = review_sample_log(read_gate_file(args.gate)["gate"], args.live_log, engine=args.engine,
                               since=args.since, until=args.until, size=args.size, near_share=args.near_share,
                               random_state=args.seed)
    if args.passages:
        _, gate, index = load_gate_and_index(args, command="review")
        sample = attach_passages(sample, index, gate, k=args.passages)
    write_review_csv(args.out, sample)
    counts = sample.groupby("stratum").agg(size=("stratum_size", "first"), drawn=("id", "size"))
    print(f"wrote {args.out}: {len(sample)} of {int(counts['size'].sum())} questions of {args.live_log} to label "
          f"(seed {args.seed})")
    order = [f"{decision}/{band}" for decision in ACTIONS for band in ("near", "far")]
    for stratum, row in counts.reindex([name for name in order if name in counts.index]).iterrows():
        print(f"  {stratum:<12} {row['drawn']:4d} of {row['size']:5d}")


def _run_estimates(args) -> None:
    from ..gates import read_gate_file, save_gate
    from ..monitoring import read_review_labels, refit_with_labels, review_estimates

    document = read_gate_file(args.gate)
    labels = read_review_labels(args.labels)
    estimates = review_estimates(labels, confidence=args.confidence)
    print(estimates.to_markdown())
    if args.refit is None:
        if args.calibration is not None:
            print("note: --calibration is only read with --refit", file=sys.stderr)
        return
    if args.calibration is None:
        raise ValueError("--refit needs --calibration SCORES.csv, the table the gate was fitted on")
    from ..score_tables import read_score_table

    calibration = read_score_table(args.calibration, document["gate"].columns)
    new_gate, comparison = refit_with_labels(document["gate"], calibration, labels, rule=document.get("rule"))
    n_labeled = int(labels["labeled"].sum())
    fitted = {"n_calibration": len(calibration), "n_review_labels": n_labeled, "refit_from": str(args.gate),
              "review_labels": str(args.labels), "calibration": str(args.calibration),
              "fitted_before": document.get("fitted", {})}
    save_gate(args.refit, new_gate, rule=document.get("rule"), fitted=fitted, provenance=document["provenance"])
    print()
    print(f"wrote {args.refit}: refitted with {document.get('rule')} on {len(calibration)} calibration rows "
          f"+ {n_labeled} review labels")
    print(comparison.to_markdown(index=False, floatfmt=".4f"))
