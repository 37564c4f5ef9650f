"""``ragcal train-judge``: fine-tune a judge on a labeled set's own passages, and write its folder."""

from __future__ import annotations

import sys
from pathlib import Path

from ._options import add_index_options, index_arguments_from


def add_parsers(commands) -> None:
    train = commands.add_parser(
        "train-judge",
        help="fine-tune a question-passage judge on a labeled set (for the judge_* signals: score --judge)",
        description="Builds training pairs from the labeled questions and their dense lists (ragcal's index of "
        "--corpus, or your own --candidates as `ragcal score` reads them): gold passages of answerable questions "
        "answer, the top passages of unanswerable questions and the non-gold ones of answerable questions do not. "
        "Then fine-tunes a cross-encoder from --base-model (default: the bundled all-MiniLM-L6-v2) on CPU, seeded, "
        "and writes the judge folder: weights, judge.json (what trained it) and training.csv (its loss curve). "
        "Never score a judge on the questions it was trained on: ragcal refuses.",
    )
    train.add_argument(
        "queries", type=Path, nargs="?", default=None, help="labeled query CSV: id,query,answerable,slice,gold"
    )
    train.add_argument("--out", type=Path, required=True, help="judge folder to write (an existing judge is replaced)")
    add_index_options(train)
    train.add_argument(
        "--candidates",
        type=Path,
        default=None,
        metavar="FILE",
        help="your system's candidates instead of a corpus: a candidates JSONL (its own labels), or a TREC run with "
        "--passages and the query file",
    )
    train.add_argument(
        "--passages", type=Path, default=None, metavar="FILE", help="the run's passages: BEIR corpus.jsonl"
    )
    train.add_argument("--run-tag", default=None, metavar="TAG", help="the run to read from a TREC file with several")
    train.add_argument("--depth", type=int, default=10, help="pairs come from the top K dense passages (default 10)")
    train.add_argument("--epochs", type=int, default=2, help="passes over the training pairs (default 2)")
    train.add_argument("--batch-size", type=int, default=16, help="pairs per training step (default 16)")
    train.add_argument("--max-pairs", type=int, default=None, help="train on at most N pairs (whole questions)")
    train.add_argument("--max-minutes", type=float, default=None, help="stop training after this long")
    train.add_argument("--seed", type=int, default=0, help="seed of the head, the order and the validation split")
    train.add_argument(
        "--base-model",
        default=None,
        metavar="PATH_OR_NAME",
        help="encoder (or cross-encoder) to fine-tune (default: the bundled all-MiniLM-L6-v2)",
    )
    corpus_only = ("corpus", "chunker", "max_tokens", "window", "no_includes", "exclude", "dense_index")
    train.set_defaults(
        run=run_train_judge,
        corpus_only={dest: ("--" + dest.replace("_", "-"), train.get_default(dest)) for dest in corpus_only},
    )


def _check_out(out: Path) -> None:
    """Refuse an ``--out`` that exists and is no judge folder before anything is built."""
    from ..judges.trained import is_judge_folder

    if out.exists() and not is_judge_folder(out):
        raise FileExistsError(f"{out}: exists and is not a judge folder; choose another --out")


def _pairs(args):
    """The training pairs from ``--corpus`` or ``--candidates``, read as ``ragcal score`` reads them."""
    from ..judges.labeled_pairs import candidate_judge_pairs, corpus_judge_pairs

    if args.candidates is None:
        if args.passages is not None or args.run_tag is not None:
            raise ValueError("--passages and --run-tag go with --candidates run.trec")
        if args.queries is None:
            raise ValueError(
                "train-judge needs a labeled query file (or --candidates FILE.jsonl, which carries its labels)"
            )
        arguments = index_arguments_from(args, args.corpus, access=False)
        return corpus_judge_pairs(args.queries, args.corpus, depth=args.depth, **arguments)
    from ..importers.candidates import read_candidates_jsonl
    from ..importers.trec import read_trec_candidates

    given = [option for dest, (option, default) in args.corpus_only.items() if getattr(args, dest) != default]
    if given:
        raise ValueError(f"{', '.join(given)} cannot be used with --candidates: they describe an index of a corpus")
    if args.passages is not None:
        if args.queries is None:
            raise ValueError("a TREC run carries no question text or labels: give the labeled query CSV too")
        candidates = read_trec_candidates(args.candidates, args.passages, queries=args.queries, tag=args.run_tag)
    else:
        if args.run_tag is not None or args.queries is not None:
            raise ValueError(
                "--candidates without --passages reads a candidates JSONL, which carries its own labels: "
                "drop the query file and --run-tag, or give the run's --passages"
            )
        candidates = read_candidates_jsonl(args.candidates)
    return candidate_judge_pairs(
        candidates, depth=args.depth, model=args.model, cache_dir=args.cache_dir, use_cache=not args.no_cache
    )


def run_train_judge(args) -> None:
    from ..judges.training import JudgeTraining, train_judge

    training = JudgeTraining(  # options checked before anything is read or embedded
        base_model=args.base_model,
        epochs=args.epochs,
        batch_size=args.batch_size,
        max_pairs=args.max_pairs,
        max_minutes=args.max_minutes,
        random_state=args.seed,
    )
    _check_out(args.out)
    pairs = _pairs(args)
    judge = train_judge(pairs, args.out, training=training, progress=True)
    description, curve = judge.description, judge.curve["validation_loss"].dropna()
    first, last = (f"{curve.iloc[0]:.3f}", f"{curve.iloc[-1]:.3f}") if len(curve) else ("n/a", "n/a")
    print(
        f"trained a judge on {description['n_pairs']} pairs ({description['n_positive']} answering) of "
        f"{description['n_questions']} questions in {description['train_seconds']:.1f} s, {description['steps']} steps"
        f"{' (stopped by --max-minutes)' if description['stopped_early'] else ''}"
    )
    print(f"validation loss {first} -> {last} on {description['n_validation_pairs']} held-out pairs")
    if description.get("verdict"):
        auc, dense = description.get("validation_auc"), description.get("dense_validation_auc")
        print(
            f"validation AUC {'n/a' if auc is None else f'{auc:.3f}'} against {'n/a' if dense is None else f'{dense:.3f}'}"
            f" for the dense cosine of the same pairs: {description['verdict']}"
        )
    calibration = description.get("calibration")
    if calibration:
        print(
            f"calibrated on the {calibration['n_pairs']} validation pairs: P = sigmoid({calibration['slope']:.3f} * "
            f"logit {calibration['intercept']:+.3f})"
        )
    else:
        print("not calibrated (fewer than 10 validation pairs of a class): its scores are the raw sigmoid")
    print(f"wrote {args.out} (judge.json, training.csv, weights); fingerprint {judge.fingerprint}")
    print(
        f"score with it: ragcal score OTHER_QUERIES.csv --judge {args.out} (never on the {len(judge.trained_on)} "
        "questions it was trained or calibrated on)",
        file=sys.stderr,
    )
