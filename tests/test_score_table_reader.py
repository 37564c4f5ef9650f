"""ragcal.score_tables.read_columns reads CSV through DuckDB: types from the cells, every number to the nearest double.

The types are found on DuckDB's sample of the file, then checked against every row where the sample can mislead:
these tests put the misleading cell after the sample (DuckDB's first 20,480 rows).
"""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ragcal.score_tables import read_columns, read_score_table

ROWS = 30_000  # beyond DuckDB's sample
LATE = 25_000


def write_rows(path: Path, cell) -> Path:
    lines = ["id,answerable,slice,dense_top1"]
    lines += [f"q{row},{'true' if row % 2 else 'false'},s,{cell(row)}" for row in range(ROWS)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def read(path: Path, text_columns=()):
    return read_columns(path, ["answerable", "slice", "dense_top1"], source=path.name, what="score table",
                        text_columns=text_columns)  # fmt: skip


def test_a_stray_word_after_the_sample_is_reported_with_its_line(tmp_path):
    path = write_rows(tmp_path / "late.csv", lambda row: "high" if row == LATE else row / ROWS)
    with pytest.raises(ValueError, match=rf"late.csv, line {LATE + 2}, column 'dense_top1': not numeric, got 'high'"):
        read_score_table(path, ["dense_top1"])


def test_fractions_after_integers_are_kept_not_rounded(tmp_path):
    # Typed BIGINT from its sample, DuckDB would read 4285.5714... as 4286 without an error.
    table = read(write_rows(tmp_path / "ints.csv", lambda row: row if row < LATE else row / 7))
    assert table["dense_top1"].dtype == np.float64
    assert table["dense_top1"].iloc[-1] == (ROWS - 1) / 7
    assert table["dense_top1"].iloc[0] == 0.0


def test_a_column_empty_in_the_sample_is_numbers_with_nan(tmp_path):
    table = read(write_rows(tmp_path / "empty.csv", lambda row: "" if row < LATE else row / ROWS))
    assert table["dense_top1"].dtype == np.float64
    assert table["dense_top1"].isna().sum() == LATE
    assert table["dense_top1"].iloc[-1] == (ROWS - 1) / ROWS


def test_numbers_are_the_nearest_doubles(tmp_path):
    cells = ["0.1", "0.1000000000000000055511151231257827", "4.9e-324", "1.7976931348623157e308", "-0", "inf",
             "2.2250738585072011e-308", "NaN", "NA", ""]  # fmt: skip
    path = tmp_path / "numbers.csv"
    path.write_text("answerable,slice,dense_top1\n" + "".join(f"true,s,{cell}\n" for cell in cells))
    values = read(path)["dense_top1"].to_numpy()
    expected = np.array([float(cell) if cell not in ("NA", "") else np.nan for cell in cells])
    assert values.dtype == np.float64
    np.testing.assert_array_equal(values.view(np.int64)[:7], expected.view(np.int64)[:7])
    assert np.isnan(values[7:]).all()


def test_text_cells_stay_as_written_and_a_column_of_nothing_is_none(tmp_path):
    path = tmp_path / "text.csv"
    path.write_text("id,answerable,slice,dense_top1,query,note\n001,true,,0.5,NA,\n,false,b,0.25,,\n")
    table = read_columns(path, ["answerable", "slice", "dense_top1", "note"], source="text.csv", what="score table",
                         optional=("id", "query"), text_columns=("query",))  # fmt: skip
    assert table["id"].tolist() == ["001", ""]
    assert table["query"].tolist() == ["NA", ""]
    assert table["slice"].astype(str).tolist() == ["", "b"] and table["slice"].dtype == "category"
    assert table["note"].tolist() == [None, None]
    assert table["answerable"].tolist() == [True, False] and table["answerable"].dtype == bool


def test_missing_labels_and_counts_are_none_and_nan(tmp_path):
    path = tmp_path / "gaps.csv"
    path.write_text("answerable,slice,dense_top1,hits\ntrue,a,0.5,3\n,b,0.25,\n")
    table = read_columns(path, ["answerable", "slice", "dense_top1", "hits"], source="gaps.csv", what="score log",
                         optional=())  # fmt: skip
    assert table["answerable"].tolist() == [True, None]
    assert table["hits"].dtype == np.float64 and table["hits"].tolist()[0] == 3.0 and np.isnan(table["hits"][1])


@pytest.mark.parametrize(("ending", "line", "cells"), [("q9,true,s", 3, 3), ("q9,true,s,0.5,extra", 3, 5)])
def test_a_row_of_the_wrong_width_is_named_by_its_line(tmp_path, ending, line, cells):
    path = tmp_path / "ragged.csv"
    path.write_text(f"id,answerable,slice,dense_top1\nq1,true,s,0.5\n{ending}\n")
    with pytest.raises(ValueError, match=rf"ragged.csv: cannot be read as CSV \(line {line} has {cells} cells where "
                                         r"the header has 4\)$"):  # fmt: skip
        read_score_table(path, ["dense_top1"])


def test_a_file_name_with_glob_characters_names_that_file_alone(tmp_path):
    (tmp_path / "run[1].csv").write_text("id,answerable,slice,s\nq1,true,a,0.5\n")
    (tmp_path / "run1.csv").write_text("id,answerable,slice,s\nq9,true,a,0.9\n")
    (tmp_path / "a*b.csv").write_text("id,answerable,slice,s\nq2,true,a,0.5\n")
    (tmp_path / "aXb.csv").write_text("id,answerable,slice,s\nq8,true,a,0.9\n")
    assert read_score_table(tmp_path / "run[1].csv", ["s"])["id"].tolist() == ["q1"]
    assert read_score_table(tmp_path / "a*b.csv", ["s"])["id"].tolist() == ["q2"]


def test_columns_are_matched_by_their_exact_names(tmp_path):
    # DuckDB's own names ignore case, trim spaces and rename a repeated one ("s" twice: "s", "s_1").
    path = tmp_path / "names.csv"
    path.write_text("ID,id,s,s,S,s_1,s ,answerable,slice\nQ,q,1,2,3,4,5,true,a\n")
    table = read_columns(path, ["answerable", "slice", "s", "S", "s_1", "s "], source="names.csv", what="score table")
    assert table.to_dict("list") == {
        "id": ["q"], "answerable": [True], "slice": ["a"], "s": [1], "S": [3], "s_1": [4], "s ": [5]
    }  # fmt: skip


def test_parquet_columns_by_their_exact_names_and_decimals_to_the_nearest_double(tmp_path):
    from decimal import Decimal

    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    exact = "754698791262.741285"  # DuckDB's own DECIMAL -> DOUBLE gives the double below this one
    pq.write_table(
        pa.table({
            "Score": [1.0], "score": [2.0], "answerable": [True], "slice": ["a"],
            "reranker": pa.array([Decimal(exact)], type=pa.decimal128(18, 6)),
        }),
        tmp_path / "log.parquet",
    )  # fmt: skip
    table = read_columns(tmp_path / "log.parquet", ["answerable", "slice", "score", "reranker"], source="log.parquet",
                         what="score table")  # fmt: skip
    assert table["score"].tolist() == [2.0]
    assert table["reranker"].tolist() == [float(exact)]


def test_logged_parquet_signals_leave_pandas_index_out(tmp_path):
    from ragcal.signals.logged import read_logged_signals

    pytest.importorskip("pyarrow")
    frame = pd.DataFrame({"id": ["a", "b", "c"], "reranker": [0.1, 0.2, 0.3]})
    frame[frame["reranker"] > 0.15].to_parquet(tmp_path / "logged.parquet")  # writes __index_level_0__
    assert read_logged_signals(tmp_path / "logged.parquet").values.columns.tolist() == ["reranker"]


def test_underscored_digits_are_text_and_a_header_alone_is_an_empty_table(tmp_path):
    path = tmp_path / "u.csv"
    path.write_text("answerable,slice,s\ntrue,a,1_000\n")
    with pytest.raises(ValueError, match=r"u.csv, line 2, column 's': not numeric, got '1_000'"):
        read_score_table(path, ["s"])
    path.write_text("id,answerable,slice,s\n")
    table = read_columns(path, ["answerable", "slice", "s"], source="u.csv", what="score log")
    assert list(table.columns) == ["id", "answerable", "slice", "s"] and len(table) == 0
