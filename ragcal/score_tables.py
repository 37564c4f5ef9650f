"""The score table, the hinge of ragcal: its schema, its checks, reading and writing with provenance.

A score table has one row per query: ``id, query, answerable, slice``, then one
numeric column per signal. It is what retrieval produces (:func:`ragcal.scoring.score_table`)
and what calibration, gates and plots consume, and it may equally be scores
logged by a production system with no corpus at all.

- :func:`check_score_table` validates the columns calibration needs.
- :func:`read_score_table` reads CSV, ``.csv.gz`` or Parquet through DuckDB,
  keeping only the columns asked for (millions of rows fit).
- :func:`write_score_table` writes CSV plus its provenance as ``<name>.meta.json``.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ._io import atomic_write_text, check_csv_delimiter, delimiter_problem
from .queries import ANSWERABLE_EXPECTED, describe_cell, parse_answerable

__all__ = [
    "SCORE_KEY_COLUMNS",
    "SCORE_TABLE_FORMATS",
    "signal_columns",
    "answerable_sign",
    "unanswerable_slices",
    "slice_column",
    "check_score_table",
    "read_score_table",
    "write_score_table",
    "read_csv_table",
    "provenance_path",
    "read_provenance",
]

#: Columns of a score table that are not signals.
SCORE_KEY_COLUMNS = ("id", "query", "answerable", "slice")


def signal_columns(table: pd.DataFrame) -> list[str]:
    """The numeric columns of a score table other than its key columns."""
    return [
        column
        for column in table.columns
        if column not in SCORE_KEY_COLUMNS
        and pd.api.types.is_numeric_dtype(table[column])
        and not pd.api.types.is_bool_dtype(table[column])
    ]


def answerable_sign(higher_is_answerable: bool) -> float:
    """``1.0`` when a higher score means answerable, else ``-1.0``: a signal times it is higher when answerable."""
    return 1.0 if higher_is_answerable else -1.0


def unanswerable_slices(table: pd.DataFrame) -> list[str]:
    """Slice names of the unanswerable rows, in order of appearance."""
    return list(pd.unique(table.loc[~table["answerable"].astype(bool), "slice"]))


def slice_column(name: str) -> str:
    """Column-name form of a slice: ``"near-domain"`` -> ``"near_domain"``."""
    return re.sub(r"\W+", "_", str(name)).strip("_").lower()


def copy_on_write() -> bool:
    """Whether pandas copies on write: always from pandas 3.0, and in pandas 2.2 when its option is turned on."""
    return int(pd.__version__.split(".")[0]) >= 3 or pd.get_option("mode.copy_on_write") is True


def check_score_table(table: pd.DataFrame, signals=(), *, source: str = "score table") -> pd.DataFrame:
    """Validate the columns calibration needs; return a copy with a boolean ``answerable``.

    ``answerable`` may be true/false, yes/no or 1/0 (also 1.0/0.0). Problems
    are reported with ``source`` and the line of the CSV (the header is line 1,
    as for query files).
    """
    if len(table.columns) == 1:
        problem = delimiter_problem(str(table.columns[0]))
        if problem:
            raise ValueError(f"{source}: {problem}")
    missing = [column for column in ("answerable", "slice", *signals) if column not in table.columns]
    if missing:
        raise ValueError(
            f"{source}: missing column(s) {', '.join(map(repr, missing))}; have {', '.join(map(str, table.columns))}"
        )
    # Under Copy-on-Write a shallow copy is a copy: changing it never changes ``table``, and it copies no column
    # (the held-out studies validate thousands of calibration halves, and the deep copy was most of the check).
    table = table.copy(deep=not copy_on_write())
    if table["answerable"].dtype != bool:
        # Parse each distinct cell once: a logged table of millions of rows holds a handful of spellings.
        codes, distinct = pd.factorize(table["answerable"], use_na_sentinel=False)
        labels = [parse_answerable(value) for value in pd.Index(distinct).tolist()]
        bad_codes = [code for code, label in enumerate(labels) if label is None]
        if bad_codes:
            first = int(np.flatnonzero(np.isin(codes, bad_codes))[0])
            raise ValueError(
                f"{source}, line {first + 2}, column 'answerable': {ANSWERABLE_EXPECTED}, got "
                f"{describe_cell(table['answerable'].iloc[first])}"
            )
        table["answerable"] = np.array(labels, dtype=bool)[codes]
    check_numeric_columns(table, signals, source=source)
    return table


def check_numeric_columns(table: pd.DataFrame, columns, *, source: str) -> None:
    """Raise ``ValueError`` naming ``source``, the line (header = line 1) and the column of the first non-numeric cell."""
    for signal in columns:
        if not pd.api.types.is_numeric_dtype(table[signal]):
            values = table[signal]
            bad = np.nonzero((pd.to_numeric(values, errors="coerce").isna() & values.notna()).to_numpy())[0]
            where = f", line {bad[0] + 2}" if bad.size else ""
            got = f", got {describe_cell(values.iloc[bad[0]])}" if bad.size else ""
            raise ValueError(f"{source}{where}, column {signal!r}: not numeric{got}")


#: File endings :func:`read_score_log` understands, and the reader each one uses.
SCORE_TABLE_FORMATS = {".csv": "csv", ".gz": "csv", ".parquet": "parquet", ".pq": "parquet"}


def _log_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".gz" and not path.name.lower().endswith(".csv.gz"):
        suffix = ""
    if suffix not in SCORE_TABLE_FORMATS:
        # Unknown endings are read as CSV, as the score command writes them.
        return "csv"
    return SCORE_TABLE_FORMATS[suffix]


def read_score_table(path, signals=(), *, source: str | None = None) -> pd.DataFrame:
    """Read a score table (CSV or Parquet) with only the columns calibration needs, validated.

    Parameters
    ----------
    path : str or Path
        ``*.parquet`` / ``*.pq`` are read as Parquet, anything else as CSV
        (``*.csv.gz`` decompressed on the fly).
    signals : sequence of str
        Signal columns to keep besides ``answerable`` and ``slice`` (and
        ``id`` when present).
    source : str, default=None
        How messages name the file; ``str(path)`` when None.

    Returns
    -------
    DataFrame
        As :func:`check_score_table` returns it: boolean
        ``answerable``, categorical ``slice``, the signal columns.

    Raises
    ------
    ValueError
        Naming the file: not found, unreadable, a missing column, a bad
        ``answerable`` cell or a non-numeric signal (with its line for CSV).
    """
    path = Path(path)
    source = source or str(path)
    signals = list(dict.fromkeys(signals))
    table = read_columns(path, ("answerable", "slice", *signals), source=source, what="score table")
    if not isinstance(table["slice"].dtype, pd.CategoricalDtype):
        table["slice"] = table["slice"].astype("category")
    return check_score_table(table, signals, source=source)


def _csv_header(path: Path, source: str) -> list[str]:
    import gzip

    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8-sig", newline="") as stream:
            return next(csv.reader(stream), [])
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{source}: cannot be read as CSV ({error})") from error


#: Cells read as missing in a CSV column that is not text (``id``, ``slice``, the caller's text columns): the empty
#: cell and the usual spellings of "not available", the list pyarrow and pandas use.
CSV_NULLS = (
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "N/A", "NA", "NULL", "NaN", "n/a", "nan", "null",
)  # fmt: skip


def _sql_text(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _sql_name(name: str) -> str:
    return '"' + str(name).replace('"', '""') + '"'


def duckdb_file(path) -> str:
    """``path`` as DuckDB's file readers must be given one file: absolute, its glob characters (``[ ] * ? { }``)
    escaped as one-character classes, so that ``run[1].csv`` is not read as ``run1.csv``."""
    return re.sub(r"([\[\]*?{}])", r"[\1]", str(Path(path).resolve()))


def _sql_path(path) -> str:
    return _sql_text(duckdb_file(path))


def read_parquet_columns(connection, path, wanted=None) -> pd.DataFrame:
    """Columns of a Parquet file through DuckDB, by position and under their exact names (DuckDB's own names ignore
    case and rename a repeated one); ``wanted`` (names) or all but pandas' unnamed index columns. DECIMAL columns come
    back as their exact text, which the caller parses (DuckDB's DECIMAL to DOUBLE is not correctly rounded).

    Raises ``duckdb.Error`` when the file cannot be read and ``ValueError`` for a column it lacks.
    """
    names = parquet_names(connection, path)
    if wanted is None:
        wanted = [name for name in names if not re.fullmatch(r"__index_level_\d+__", name)]
    positions = {}
    for position, name in enumerate(names, start=1):
        positions.setdefault(name, position)
    missing = [name for name in wanted if name not in positions]
    if missing:
        raise ValueError(f"no column(s) {', '.join(map(repr, missing))}")
    selected = [f"#{positions[name]}" for name in wanted]
    query = f"SELECT {', '.join(selected)} FROM read_parquet({_sql_path(path)})"
    kinds = [kind for _, kind, *_ in connection.execute(f"DESCRIBE {query}").fetchall()]
    selected = [
        f"CAST({column} AS VARCHAR)" if kind.startswith("DECIMAL") else column for column, kind in zip(selected, kinds)
    ]
    aliased = [f"{column} AS c{number}" for number, column in enumerate(selected)]
    table = connection.execute(f"SELECT {', '.join(aliased)} FROM read_parquet({_sql_path(path)})").df()
    table.columns = list(wanted)
    for name, kind in zip(wanted, kinds):
        if kind.startswith("DECIMAL"):
            table[name] = _numbers_or_text(table[name].fillna(""))
    return table


def parquet_names(connection, path) -> list[str]:
    """The top-level column names of a Parquet file, exactly as written (see :func:`read_parquet_columns`)."""
    schema = connection.execute(f"SELECT name, num_children FROM parquet_schema({_sql_path(path)})").fetchall()
    if all(not children for _, children in schema[1:]):
        return [name for name, _ in schema[1:]]
    return connection.read_parquet(duckdb_file(path)).columns


def read_columns(path: Path, required, *, source: str, what: str, optional=("id",), text_columns=()) -> pd.DataFrame:
    """Columns ``optional`` (those present) then ``required`` of a CSV, CSV.gz or Parquet file, through DuckDB.

    Shared by :func:`read_score_table` and :func:`ragcal.monitoring.read_score_log`.
    In CSV, ``slice`` is read as a category, ``id`` and ``text_columns`` as
    text (an empty cell stays empty), and every other column is typed from all
    its cells: booleans (DuckDB's: true / false, yes / no, t / f, y / n),
    integers, doubles or text, the cells of :data:`CSV_NULLS` missing, so that
    a stray text cell in a signal is reported with its line by the caller's
    checks. A row with too few or too many cells is an error that names its
    line. Numbers are parsed to the nearest double, as pyarrow, which read
    these files before, and Python parse them.
    """
    import duckdb

    if not path.is_file():
        raise ValueError(f"{source}: {what} not found")
    kind = _log_format(path)
    if kind == "csv" and not path.name.lower().endswith(".gz"):
        check_csv_delimiter(path)  # a compressed file's header is checked once decompressed, in _wanted_columns
    connection = duckdb.connect()
    try:
        connection.execute("SET enable_progress_bar = false")
        if kind == "csv":
            header = _csv_header(path, source)
            wanted = _wanted_columns(header, required, source, optional=optional)
            if not _has_rows(path):  # the header alone: DuckDB finds no row to read past it
                return _numpy_columns(
                    pd.DataFrame({name: pd.Series([], dtype=object) for name in wanted}), categories=("slice",)
                )
            table = _read_csv(connection, path, header, wanted, ("id", "slice", *text_columns), source)
            return _numpy_columns(table, categories=("slice",))
        try:
            wanted = _wanted_columns(parquet_names(connection, path), required, source, optional=optional)
            return _numpy_columns(read_parquet_columns(connection, path, wanted))
        except duckdb.Error as error:
            raise ValueError(f"{source}: cannot be read as Parquet ({error})") from error
    finally:
        connection.close()


def _read_csv(connection, path: Path, header, wanted, text_columns, source: str) -> pd.DataFrame:
    """``wanted`` of a CSV whose header is ``header``, through DuckDB: ``text_columns`` as text, the others typed from
    their cells.

    Columns are read by position under names of ragcal's own, then given their names from ``header``: DuckDB's
    names ignore case, trim spaces and rename a repeated one. The types are found on DuckDB's sample of the file
    (its first rows), then pinned for the read; when a later cell does not fit its column's type (a stray word in a
    column of numbers), or a column is text or integers in the sample, they are found again from every row. DuckDB's
    only missing cell is the empty one: a column that holds another spelling of :data:`CSV_NULLS` is text to it, and
    :func:`_numbers_or_text` types it. ``text_columns`` keep every cell as written (an empty cell stays empty).
    """
    import duckdb

    positions = {}
    for position, name in enumerate(header):
        positions.setdefault(name, position)
    columns = [f"c{positions[name]}" for name in wanted]
    text = {f"c{positions[name]}" for name in text_columns if name in positions and name in wanted}
    options = {
        "header": "false",
        "skip": "1",
        "names": "[" + ", ".join(_sql_text(f"c{position}") for position in range(len(header))) + "]",
        "delim": "','",
        "quote": "'\"'",
        "escape": "'\"'",
        "auto_type_candidates": "['BOOLEAN', 'BIGINT', 'DOUBLE', 'VARCHAR']",
    }

    def query(types: dict, *, whole_file: bool) -> str:
        kept = [column for column, kind in types.items() if kind == "VARCHAR"]
        chosen = {
            **options,
            **({"sample_size": "-1"} if whole_file else {}),
            **({"types": "{" + ", ".join(f"{_sql_text(c)}: {_sql_text(k)}" for c, k in types.items()) + "}"}
               if types else {}),
            **({"force_not_null": "[" + ", ".join(map(_sql_text, kept)) + "]"} if kept else {}),
        }  # fmt: skip
        arguments = ", ".join(f"{key} = {value}" for key, value in chosen.items())
        return f"SELECT {', '.join(columns)} FROM read_csv({_sql_path(path)}, {arguments})"

    def types(*, whole_file: bool) -> dict:
        found = connection.execute(f"DESCRIBE {query(dict.fromkeys(sorted(text), 'VARCHAR'), whole_file=whole_file)}")
        return {name: kind for name, kind, *_ in found.fetchall()}

    try:
        found = types(whole_file=False)
        # Integers are found on every row: DuckDB reads 2.5 into a column typed BIGINT as 3, without an error.
        if any(kind in ("VARCHAR", "BIGINT") and name not in text for name, kind in found.items()):
            found = types(whole_file=True)
        try:
            table = connection.execute(query(found, whole_file=False)).df()
        except duckdb.Error:
            found = types(whole_file=True)
            table = connection.execute(query(found, whole_file=False)).df()
    except duckdb.Error as error:
        raise ValueError(f"{source}: cannot be read as CSV ({_ragged_row(path) or error})") from error
    for column in columns:
        if found[column] == "VARCHAR" and column not in text:
            table[column] = _numbers_or_text(table[column])
    table.columns = list(wanted)
    return table


#: A number as pyarrow and DuckDB's DOUBLE read one: digits with an optional point and exponent, or inf / nan
#: (Python's ``float`` alone would also take ``1_000`` and other scripts' digits).
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|infinity|nan)", re.IGNORECASE | re.ASCII)


def _numbers_or_text(values: pd.Series) -> pd.Series:
    """A column that is text to DuckDB, whose only null is the empty cell, typed as pyarrow types it: nothing but the
    cells of :data:`CSV_NULLS` is a column of None; numbers and those cells (R's ``NA``) are doubles with NaN, each
    parsed by Python's ``float`` (the nearest double); booleans (true / false) and those cells are objects with None;
    anything else is text, every cell as written."""
    missing = values.isin(CSV_NULLS).to_numpy()
    if len(values) and missing.all():
        return pd.Series([None] * len(values), index=values.index, dtype=object)
    present = values[~missing]
    if all(_NUMBER.fullmatch(cell) for cell in present):
        numbers = np.full(len(values), np.nan)
        numbers[~missing] = [float(cell) for cell in present]
        return pd.Series(numbers, index=values.index)
    flags = present.str.lower().map({"true": True, "false": False})
    if flags.notna().all():
        return pd.Series(np.where(missing, None, values.str.lower().map({"true": True, "false": False})),
                         index=values.index, dtype=object)  # fmt: skip
    return values


def _has_rows(path: Path) -> bool:
    """Whether a CSV has a row after its header."""
    import gzip

    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8-sig", newline="") as stream:
            rows = csv.reader(stream)
            next(rows, None)
            return next(rows, None) is not None
    except (OSError, UnicodeDecodeError, csv.Error):
        return True  # DuckDB's read then says what is wrong


def _ragged_row(path: Path) -> str | None:
    """Where a CSV that DuckDB could not read has a row with more or fewer cells than its header, if it has one."""
    import gzip

    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8-sig", newline="") as stream:
            rows = csv.reader(stream)
            width = len(next(rows, []))
            for row in rows:
                if len(row) != width:
                    return f"line {rows.line_num} has {len(row)} cells where the header has {width}"
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    return None


def _booleans_with_gaps(values: pd.Series) -> bool:
    """Whether an object column is booleans and missing cells (DuckDB before 1.2 gives NaN for a missing boolean)."""
    present = values.dropna()
    return len(present) < len(values) and len(present) > 0 and all(isinstance(value, bool) for value in present)


def _numpy_columns(table: pd.DataFrame, *, categories=()) -> pd.DataFrame:
    """DuckDB's nullable integer and boolean columns as NumPy ones: integers with a missing cell as floats with NaN,
    booleans with a missing cell as objects with None; the columns of ``categories`` (those present) as categories."""
    for column in table.columns:
        dtype = table[column].dtype
        if column in categories:
            table[column] = table[column].astype("category")
        elif isinstance(dtype, pd.BooleanDtype) or (dtype == object and _booleans_with_gaps(table[column])):
            values = table[column]
            table[column] = (
                values.astype(object).where(values.notna(), None) if values.isna().any() else values.astype(bool)
            )
        elif isinstance(dtype, pd.api.extensions.ExtensionDtype) and pd.api.types.is_integer_dtype(dtype):
            values = table[column]
            table[column] = values.astype("float64") if values.isna().any() else values.astype(dtype.numpy_dtype)
    return table


def _wanted_columns(available, required, source, *, optional=("id",)) -> list[str]:
    # Worded as check_score_table words it, for every reader.
    available = list(available)
    missing = [column for column in required if column not in available]
    if missing:
        if len(available) == 1:
            problem = delimiter_problem(str(available[0]))
            if problem:
                raise ValueError(f"{source}: {problem}")
        raise ValueError(
            f"{source}: missing column(s) {', '.join(map(repr, missing))}; have {', '.join(map(str, available))}"
        )
    return list(dict.fromkeys(column for column in (*optional, *required) if column in available))


def read_csv_table(path, *, what: str = "score table") -> pd.DataFrame:
    """Read a whole CSV (every column, pandas types; ``id`` as text, so ``001`` stays ``001``) with errors that name
    the file, a foreign delimiter included."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: {what} not found")
    check_csv_delimiter(path)
    try:
        return pd.read_csv(path, dtype={"id": str})
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: cannot be read as CSV ({error})") from error


def provenance_path(path) -> Path:
    """``scores.csv`` -> ``scores.meta.json``: where a score table's provenance lives."""
    path = Path(path)
    return path.with_name(path.stem + ".meta.json")


def _text_sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def write_score_table(path, table: pd.DataFrame, *, config: dict | None = None) -> Path:
    """Write the score table as CSV and its provenance as ``<name>.meta.json`` (both atomically).

    The provenance records the table's sha256 (``table_sha256``), and
    :func:`read_provenance` checks it: a run killed between the two renames,
    or a table replaced later, can never pass for the table the provenance
    describes.
    """
    path = Path(path)
    # Full precision (shortest round-trip repr): a threshold fitted on the file must equal the live score it came from.
    text = table.to_csv(index=False)
    atomic_write_text(path, text)
    if config is not None:
        config = {**config, "table_sha256": _text_sha256(text.encode("utf-8"))}
        atomic_write_text(provenance_path(path), json.dumps(config, indent=2) + "\n")
    return path


def read_provenance(path) -> dict | None:
    """The provenance written beside a score table (its ``.meta.json``), or None when there is none.

    Raises
    ------
    ValueError
        Naming the file: the provenance is not a JSON object, or its
        ``table_sha256`` is not the table's (the table was replaced or edited
        after it was scored, or a run was killed between writing the two).
    """
    from ._io import sha256_file

    path = Path(path)
    meta = provenance_path(path)
    if not meta.is_file():
        return None
    try:
        provenance = json.loads(meta.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{meta}: not valid JSON ({error})") from error
    if not isinstance(provenance, dict):
        raise ValueError(f"{meta}: expected a JSON object of provenance, found {type(provenance).__name__}")
    recorded = provenance.get("table_sha256")
    if recorded and path.is_file() and sha256_file(path) != recorded:
        raise ValueError(
            f"{meta}: describes another version of {path.name} (table_sha256 differs): the table was replaced or "
            "edited after scoring, or a run stopped between writing the two; score again (or, for a deliberate "
            "edit, remove table_sha256 from the .meta.json)"
        )
    return provenance
