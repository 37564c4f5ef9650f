"""The ``ragcal`` command: a thin top floor over the library and the study.

Each command parses its options, calls one library function and prints what
it returns. One module per command group:

- :mod:`ragcal.cli.scores`: ``score``, ``chunks``, ``evaluate``;
- :mod:`ragcal.cli.calibrate`: ``calibrate`` (any score table, no corpus);
- :mod:`ragcal.cli.join`: ``join`` (logged signals into a score table by id; ``score --extra-signals``);
- :mod:`ragcal.cli.chunking`: ``sweep-chunking``;
- :mod:`ragcal.cli.gates`: ``fit-gate``, ``ask``;
- :mod:`ragcal.cli.serve`: ``serve`` (HTTP, the optional ``serve`` extra);
- :mod:`ragcal.cli.monitor`: ``monitor`` (shift checks on an unlabeled live score log);
- :mod:`ragcal.cli.review`: ``review`` (a review sample of a live log, and estimates from its labels);
- :mod:`ragcal.cli.importers`: ``import-benchmark`` (SQuAD 2.0, BEIR or a candidates JSONL as a corpus and queries);
- :mod:`ragcal.cli.llm`: ``llm-abstain`` (an LLM's own "I don't know" per question, as a logged signal);
- :mod:`ragcal.cli.judges`: ``train-judge`` (a question-passage judge fine-tuned on a labeled set);
- :mod:`ragcal.study.commands`: ``golden``, ``reproduce`` (our study on the bundled corpora), ``try-signal``
  (a new signal beside ``dense_top1`` on every bundled corpus and benchmark).

``score``, ``calibrate``, ``fit-gate`` and ``ask`` take ``--signals-module
mymod.py`` (repeatable): the file is imported first, so the signals it
registers are computed, fitted and asked like the built-in ones.

Building the parser imports no model code, pandas or scikit-learn:
``ragcal --help`` answers at once.
"""

from __future__ import annotations

import argparse
import sys

from ..extras import MissingExtraError, require_extra
from . import calibrate, chunking, gates, importers, join, judges, llm, monitor, review, scores, serve
from ._options import load_signals_modules

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The ``ragcal`` argument parser: one subcommand per command of the groups listed above."""
    from ..study import commands as study_commands

    parser = argparse.ArgumentParser(prog="ragcal", description="Calibrate when a RAG system should abstain.")
    commands = parser.add_subparsers(dest="command", required=True)
    groups = (scores, calibrate, join, chunking, gates, serve, monitor, review, importers, llm, judges, study_commands)
    for group in groups:
        group.add_parsers(commands)
    return parser


#: Commands whose output is compared bit for bit with committed files: they run with pinned kernels.
PINNED_COMMANDS = ("reproduce", "golden")
#: Commands that always need an optional extra (ragcal.extras), checked before anything runs; ``reproduce`` needs
#: the study extra unless it skips the notebooks (:func:`needed_extra`). Commands that need one only with some
#: options (``score --corpus``, ``score --candidates``, ``fit-gate --reranker``, ``llm-abstain --corpus``,
#: ``review LIVE_LOG``, ``ask`` and ``serve`` without ``--candidates``) check it themselves, first.
COMMAND_EXTRAS = {
    "sweep-chunking": "retrieval",
    "train-judge": "retrieval",
    "golden": "retrieval",
    "reproduce": "retrieval",
    "try-signal": "retrieval",
}


def needed_extra(args) -> tuple[str, str] | None:
    """``(extra, feature)`` that the parsed command ``args`` needs whatever its input, or None."""
    if args.command == "reproduce" and not args.skip_notebooks:
        return "study", "ragcal reproduce (it executes the notebooks; --skip-notebooks runs without them)"
    if args.command in COMMAND_EXTRAS:
        return COMMAND_EXTRAS[args.command], f"ragcal {args.command}"
    return None


def main(argv=None) -> int:
    """Run one ``ragcal`` command (``argv``: its words, ``sys.argv[1:]`` when None) and return its exit code.

    A ``ValueError`` or ``OSError`` (a bad file, option or value), or a
    :class:`~ragcal.extras.MissingExtraError` (a feature whose optional extra is not installed), is printed as one
    line naming the problem, and the exit code is 2.
    """
    args = build_parser().parse_args(argv)
    try:
        if needed_extra(args) is not None:
            require_extra(*needed_extra(args))
    except MissingExtraError as error:
        print(f"ragcal: error: {error}", file=sys.stderr)
        return 2
    if args.command in PINNED_COMMANDS:
        from ..numerics import reexec_pinned

        reexec_pinned(["ragcal", *(sys.argv[1:] if argv is None else argv)])
    try:
        load_signals_modules(args)
        code = args.run(args)
    except (ValueError, OSError, MissingExtraError) as error:  # CorpusError, QueryFileError, GateFileError: ValueErrors
        # One line, never a traceback: the message names the file (OSError's too: "[Errno 21] Is a directory: 'x'").
        print(f"ragcal: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    return code or 0


if __name__ == "__main__":
    sys.exit(main())
