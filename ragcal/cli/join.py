"""``ragcal join`` and ``ragcal score --extra-signals``: logged signals joined into a score table by question id."""

from __future__ import annotations

from pathlib import Path

from ._options import warn

DIRECTION_HELP = (
    "NAME=higher or NAME=lower: whether a higher value of the logged signal NAME means answerable (repeatable); "
    "undeclared directions are inferred from the table's labels, which makes their AUC on that table >= 0.5 by "
    "construction"
)


def add_parsers(commands) -> None:
    join = commands.add_parser(
        "join",
        help="join logged signals (a production reranker, an LLM's verdict) into a score table by id",
        description="FILE is long (id,name,value[,direction]) or wide (id, then one column per signal), CSV or "
        "Parquet. Values are numbers, or true/false/yes/no (read as 1/0: a binary signal). Every id of FILE must be "
        "a question of the table and every question needs a value (unless --allow-missing). The directions go "
        "into the output's .meta.json, where `ragcal calibrate` and `ragcal fit-gate` find them.",
    )
    join.add_argument("scores", type=Path, help="score table CSV (its .meta.json, if any, is carried over)")
    join.add_argument("logged", type=Path, metavar="FILE", help="logged signals, long or wide, CSV or Parquet")
    join.add_argument("--out", type=Path, required=True, help="joined score table CSV to write (and its .meta.json)")
    join.add_argument("--replace", action="store_true", help="let a logged signal replace a column of the same name")
    add_logged_options(join)
    join.set_defaults(run=run_join)


def add_logged_options(parser) -> None:
    """``--direction`` and ``--allow-missing``, for ``join`` and ``score --extra-signals``."""
    parser.add_argument("--direction", action="append", default=None, metavar="NAME=higher|lower", help=DIRECTION_HELP)
    parser.add_argument(
        "--allow-missing",
        action="store_true",
        help="keep questions without a value of a logged signal as NaN (a threshold never answers them) instead "
        "of refusing the file",
    )


def add_extra_signals_options(parser) -> None:
    """The options ``ragcal score`` adds for logged signals."""
    parser.add_argument(
        "--extra-signals",
        type=Path,
        default=None,
        metavar="FILE",
        help="logged signals to join by id (long id,name,value[,direction] or wide; CSV or Parquet), see "
        "`ragcal join --help`",
    )
    add_logged_options(parser)


def print_joined(joined, logged, rows: int) -> None:
    """What was joined: one line per signal (direction and how it was decided, binary or not), then the warnings."""
    print(f"joined {len(logged.names)} logged signal(s) from {logged.source} ({logged.layout} file) into {rows} rows:")
    for row in joined.summary.itertuples():
        kind = "binary (0/1: an operating point, not a curve)" if row.binary else "continuous"
        missing = f", {row.n_missing} missing (NaN)" if row.n_missing else ""
        print(
            f"  {row.name}: {row.direction} means answerable ({row.decided_by}); {kind}; {row.n_values} values{missing}"
        )
    for note in joined.warnings:
        warn(note)


def run_join(args) -> None:
    from ..signals.logged import join_logged_signals, read_logged_signals
    from ..score_tables import read_csv_table, read_provenance, write_score_table
    from ..signals.directions import parse_direction_options

    logged = read_logged_signals(args.logged, directions=parse_direction_options(args.direction))
    provenance = read_provenance(args.scores)
    table = read_csv_table(args.scores)
    joined = join_logged_signals(
        table,
        logged,
        provenance=provenance,
        replace=args.replace,
        allow_missing=args.allow_missing,
        source=str(args.scores),
    )
    write_score_table(args.out, joined.table, config={**joined.provenance, "base_table": str(args.scores)})
    print(f"wrote {args.out} ({len(joined.table)} queries) and its .meta.json")
    print_joined(joined, logged, len(joined.table))


def read_extra_signals(args):
    """``ragcal score --extra-signals``: read and check the file before any expensive work; None without it.

    Besides the file's own checks, its ids must be questions of the query
    file and its names must not be signals ragcal computes (registered), so a
    bad file fails before the index is built.
    """
    if args.extra_signals is None:
        if args.direction or args.allow_missing:
            raise ValueError("--direction and --allow-missing go with --extra-signals FILE")
        return None
    from ..signals.logged import check_logged_ids, read_logged_signals
    from ..queries import load_queries
    from ..signals.directions import parse_direction_options
    from ..signals import SIGNALS

    logged = read_logged_signals(args.extra_signals, directions=parse_direction_options(args.direction))
    registered = [name for name in logged.names if name in SIGNALS]
    if registered:
        raise ValueError(
            f"{logged.source}: {', '.join(map(repr, registered))} are signals ragcal computes; rename the logged "
            "column(s), e.g. logged_<name>"
        )
    check_logged_ids(logged, load_queries(args.queries)["id"], source=str(args.queries))
    return logged


def apply_extra_signals(table, config: dict, logged, args) -> tuple:
    """``(table, config)`` with the logged signals joined and recorded; unchanged when ``logged`` is None."""
    if logged is None:
        return table, config
    from ..signals.logged import join_logged_signals

    joined = join_logged_signals(
        table, logged, provenance=config, allow_missing=args.allow_missing, source=str(args.queries)
    )
    print_joined(joined, logged, len(joined.table))
    return joined.table, joined.provenance
