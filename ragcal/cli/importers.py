"""``ragcal import-benchmark``: SQuAD 2.0, a BEIR folder or a candidates JSONL as Markdown pages and a query file."""

from __future__ import annotations

from pathlib import Path

from ._options import LazyChoices, LazyHelp

#: The format options of the command, by the library's option name.
FORMAT_FLAGS = {
    "articles": "--articles",
    "split": "--split",
    "unanswerable_slice": "--unanswerable-slice",
    "queries": "--queries",
}


def format_names() -> tuple[str, ...]:
    from ..importers import BENCHMARK_FORMATS

    return tuple(BENCHMARK_FORMATS)


def formats_help() -> str:
    from ..importers import BENCHMARK_FORMATS

    return "; ".join(f"{name}: {benchmark_format.source}" for name, benchmark_format in BENCHMARK_FORMATS.items())


def query_selections() -> tuple[str, ...]:
    from ..importers.beir import QUERY_SELECTIONS

    return QUERY_SELECTIONS


def add_parsers(commands) -> None:
    parser = commands.add_parser(
        "import-benchmark",
        help="write a public benchmark as a Markdown folder (DIR/corpus) and a labeled query file (DIR/queries.csv)",
        description="Write DIR/corpus/ (one Markdown page per passage) and DIR/queries.csv "
        "(id,query,answerable,slice,gold,group) from a public benchmark, through a temporary folder: "
        "a bad source leaves nothing behind. See docs/importers.md.",
    )
    parser.add_argument("format", choices=LazyChoices(format_names), metavar="FORMAT", help=LazyHelp(formats_help))
    parser.add_argument("source", type=Path, metavar="SOURCE", help="the benchmark file or folder")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder to write")
    parser.add_argument(
        "--force", action="store_true", help="replace an existing non-empty DIR (once the new one is complete)"
    )
    parser.add_argument(
        "--articles",
        action="append",
        default=None,
        metavar="TITLES",
        help="squad2: import only these articles (comma-separated titles; repeatable)",
    )
    parser.add_argument("--split", default=None, help="beir: the qrels file qrels/SPLIT.tsv (default test)")
    parser.add_argument(
        "--unanswerable-slice",
        default=None,
        metavar="NAME",
        help="beir: slice of queries with no relevant document (default no-relevant-document)",
    )
    parser.add_argument(
        "--queries",
        default=None,
        choices=LazyChoices(query_selections),
        help="beir: which queries to import: split (default: the split's and those no qrels file names), "
        "qrels (only the split's) or all",
    )
    parser.set_defaults(run=run_import_benchmark)


def run_import_benchmark(args) -> None:
    from ..importers import BENCHMARK_FORMATS, import_benchmark

    options = {name: getattr(args, name) for name in FORMAT_FLAGS if getattr(args, name) is not None}
    takes = BENCHMARK_FORMATS[args.format].options
    foreign = [FORMAT_FLAGS[name] for name in options if name not in takes]
    if foreign:
        owners = {
            FORMAT_FLAGS[name]: name_format
            for name_format, benchmark_format in BENCHMARK_FORMATS.items()
            for name in benchmark_format.options
        }
        raise ValueError("; ".join(f"{flag} is an option of {owners[flag]}, not of {args.format}" for flag in foreign))
    summary = import_benchmark(args.format, args.source, args.out, overwrite=args.force, **options)
    for line in summary_lines(summary):
        print(line)


def summary_lines(summary) -> list[str]:
    """The few lines ``import-benchmark`` prints about an :class:`~ragcal.importers.ImportSummary`."""
    by_slice = ", ".join(f"{count} {slice_name}" for slice_name, count in summary.unanswerable) or "none"
    lines = [
        f"imported {summary.format} {summary.source} -> {summary.out}",
        f"  {summary.corpus}: {summary.pages} pages",
        f"  {summary.queries}: {summary.questions} questions, {summary.answerable} answerable, "
        f"{summary.unanswerable_total} unanswerable ({by_slice})",
    ]
    if summary.answerable_without_gold:
        lines.append(f"  {summary.answerable_without_gold} answerable questions have no gold page")
    if summary.groups:
        noun = "group" if summary.groups == 1 else "groups"
        lines.append(f"  group column: {summary.groups} {noun}; keep each group on one side of any split")
    else:
        lines.append("  group column: empty (every question stands alone)")
    lines.extend(f"  {note}" for note in summary.notes)
    return lines
