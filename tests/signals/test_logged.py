"""Logged signals: long and wide files, booleans, every error, the join by id and the recorded provenance."""

import hashlib
import json

import numpy as np
import pandas as pd
import pytest
from conftest import write

from ragcal.signals.logged import join_logged_signals, join_signals, read_logged_signals
from ragcal.score_tables import read_provenance, write_score_table


def score_table(n=6):
    answerable = np.arange(n) % 2 == 0
    return pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(1, n + 1)],
            "query": [f"question {i}" for i in range(1, n + 1)],
            "answerable": answerable,
            "slice": np.where(answerable, "answerable", "near-domain"),
            "dense_top1": np.linspace(0.3, 0.8, n),
        }
    )


LONG = """id,name,value,direction
q1,llm_found,true,
q2,llm_found,No,
q3,llm_found,YES,
q4,llm_found,false,
q5,llm_found,1,
q6,llm_found,0,
q1,rerank_distance,0.1,lower
q2,rerank_distance,0.9,
q3,rerank_distance,0.2,lower
q4,rerank_distance,0.7,
q5,rerank_distance,0.3,
q6,rerank_distance,0.8,
"""

WIDE = """id,llm_found,rerank_distance
q1,true,0.1
q2,no,0.9
q3,yes,0.2
q4,false,0.7
q5,1,0.3
q6,0,0.8
"""


def test_long_and_wide_files_read_the_same_values_booleans_as_one_and_zero(tmp_path):
    long = read_logged_signals(write(tmp_path / "long.csv", LONG))
    wide = read_logged_signals(write(tmp_path / "wide.csv", WIDE))
    assert (long.layout, wide.layout) == ("long", "wide")
    assert long.names == wide.names == ["llm_found", "rerank_distance"]
    pd.testing.assert_frame_equal(long.values, wide.values)
    assert long.values["llm_found"].tolist() == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    assert long.values["rerank_distance"].tolist() == [0.1, 0.9, 0.2, 0.7, 0.3, 0.8]
    assert long.directions == {"rerank_distance": "lower"} and wide.directions == {}
    assert long.sha256 == hashlib.sha256((tmp_path / "long.csv").read_bytes()).hexdigest()


def test_parquet_file_with_real_booleans(tmp_path):
    frame = pd.DataFrame({"id": ["q1", "q2", "q3"], "llm_found": [True, False, None], "score": [0.5, 0.25, 1.0]})
    frame.to_parquet(tmp_path / "logged.parquet")
    logged = read_logged_signals(tmp_path / "logged.parquet")
    assert logged.values["llm_found"].tolist()[:2] == [1.0, 0.0]
    assert np.isnan(logged.values["llm_found"].iloc[2])
    assert logged.values["score"].tolist() == [0.5, 0.25, 1.0]


def test_non_numeric_values_are_listed_with_file_line_id_and_column(tmp_path):
    rows = "".join(f"q{i},{'maybe' if i % 2 else i / 10}\n" for i in range(1, 26))
    path = write(tmp_path / "wide.csv", "id,judge\n" + rows)
    with pytest.raises(ValueError) as error:
        read_logged_signals(path)
    message = str(error.value)
    assert message.startswith(f"{path}: 13 value(s) are not numbers")
    assert "line 2 (id 'q1', 'judge'): 'maybe'" in message  # the header is line 1
    assert "line 4 (id 'q3', 'judge')" in message
    assert "and 3 more" in message  # ten listed of thirteen
    assert "line 24 (id 'q23'" not in message


def test_long_file_non_numeric_value_names_its_line(tmp_path):
    path = write(tmp_path / "long.csv", "id,name,value\nq1,a,0.5\nq2,a,I don't know\n")
    with pytest.raises(
        ValueError, match=r"long.csv: 1 value\(s\) are not numbers.*line 3 \(id 'q2', 'a'\): \"I don't know\""
    ):
        read_logged_signals(path)


@pytest.mark.parametrize(
    "text, match",
    [
        (
            "id,name,value\nq1,a,1\nq2,a,0\nq1,a,1\n",
            r"2 rows repeat an \(id, name\) pair: \('q1', 'a'\) at line 2, \('q1', 'a'\) at line 4",
        ),
        ("id,a\nq1,1\nq1,0\n", r"2 rows repeat an id: 'q1' at line 2, 'q1' at line 3"),
        (
            "id,name,value,direction\nq1,a,1,up\n",
            r"line 2, column 'direction': expected higher or lower \(or empty\), got 'up'",
        ),
        (
            "id,name,value,direction\nq1,a,1,higher\nq2,a,0,lower\n",
            r"signal 'a' has direction 'higher' at line 2 but 'lower' at line 3",
        ),
        ("name,value\na,1\n", r"no 'id' column"),
        ("id,name,value,extra\nq1,a,1,x\n", r"also 'extra'"),
        ("id,answerable,a\nq1,true,1\n", r"'answerable' is a key column of score tables"),
        ("id,a\n,1\n", r"line 2, column 'id': empty id"),
        ("id,a,a\nq1,1,2\n", r"column\(s\) 'a' appear more than once"),
        ("id;a\nq1;1\n", r"semicolon-delimited"),
        ("id\nq1\n", r"no signal column besides 'id'"),
    ],
)
def test_bad_files_get_one_clear_error_naming_the_file(tmp_path, text, match):
    path = write(tmp_path / "logged.csv", text)
    with pytest.raises(ValueError, match=match) as error:
        read_logged_signals(path)
    assert str(error.value).startswith(str(path))


def test_declared_directions_are_checked(tmp_path):
    path = write(tmp_path / "long.csv", LONG)
    with pytest.raises(ValueError, match=r"'directions\[llm_found\]' parameter of read_logged_signals must be one of"):
        read_logged_signals(path, directions={"llm_found": "up"})
    with pytest.raises(ValueError, match="a direction is given for 'nope', which the file does not have"):
        read_logged_signals(path, directions={"nope": "lower"})
    with pytest.raises(
        ValueError, match="'rerank_distance' is declared 'higher', but the file's direction column says"
    ):
        read_logged_signals(path, directions={"rerank_distance": "higher"})
    assert read_logged_signals(path, directions={"llm_found": "lower"}).directions == {
        "rerank_distance": "lower",
        "llm_found": "lower",
    }
    with pytest.raises(ValueError, match="logged signals file not found"):
        read_logged_signals(tmp_path / "missing.csv")


def test_join_by_id_in_table_order_with_unknown_and_missing_ids_listed(tmp_path):
    table = score_table().iloc[::-1].reset_index(drop=True)  # the table's order, not the file's
    logged = read_logged_signals(write(tmp_path / "wide.csv", WIDE))
    joined = join_signals(table, logged)
    assert list(joined.columns) == [*table.columns, "llm_found", "rerank_distance"]
    assert joined["llm_found"].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]  # q6 .. q1
    assert table.columns.tolist() == ["id", "query", "answerable", "slice", "dense_top1"]  # input untouched

    extra = WIDE + "".join(f"x{i},1,0.5\n" for i in range(12))
    with pytest.raises(ValueError, match=r"12 id\(s\) are not questions of score table: x0, x1, .*x9 and 2 more"):
        join_signals(table, read_logged_signals(write(tmp_path / "extra.csv", extra)))

    partial = read_logged_signals(write(tmp_path / "partial.csv", "id,judge\nq1,1\nq2,\nq3,0\n"))
    with pytest.raises(ValueError, match=r"no value for some questions of score table \(judge: 4 \(q6, q5, q4, q2\)\)"):
        join_signals(table, partial)
    kept = join_signals(table, partial, allow_missing=True)
    assert kept["judge"].isna().tolist() == [True, True, True, False, True, False]


def test_join_refuses_collisions_unless_replaced_and_never_key_columns(tmp_path):
    table = score_table()
    logged = read_logged_signals(
        write(tmp_path / "wide.csv", "id,dense_top1\n" + "".join(f"q{i},0.5\n" for i in range(1, 7)))
    )
    with pytest.raises(ValueError, match=r"'dense_top1' are already columns of score table \(pass replace=True"):
        join_signals(table, logged)
    replaced = join_signals(table, logged, replace=True)
    assert list(replaced.columns) == list(table.columns) and (replaced["dense_top1"] == 0.5).all()
    with pytest.raises(ValueError, match="no 'id' column; logged signals are joined by question id"):
        join_signals(table.drop(columns="id"), logged)
    with pytest.raises(ValueError, match=r"ids appear more than once \(q1\)"):
        join_signals(pd.concat([table, table.iloc[:1]]), logged, replace=True)


def test_directions_declared_or_inferred_from_labels_with_a_warning(tmp_path):
    table = score_table()  # q1, q3, q5 answerable
    logged = read_logged_signals(write(tmp_path / "long.csv", LONG))
    joined = join_logged_signals(table, logged)
    summary = joined.summary.set_index("name")
    # llm_found is 1 on q1, q3, q5: higher is answerable, inferred from the very labels it is evaluated on.
    assert summary.loc["llm_found", ["direction", "decided_by", "binary"]].tolist() == [
        "higher",
        "inferred from labels",
        True,
    ]
    assert summary.loc["rerank_distance", ["direction", "decided_by", "binary"]].tolist() == [
        "lower",
        "declared",
        False,
    ]
    assert summary["n_values"].tolist() == [6, 6] and summary["n_missing"].tolist() == [0, 0]
    assert len(joined.warnings) == 1 and "llm_found" in joined.warnings[0]
    assert ">= 0.5 by construction" in joined.warnings[0]

    # Labels that cannot decide: the default, said as such.
    constant = read_logged_signals(
        write(tmp_path / "constant.csv", "id,flat\n" + "".join(f"q{i},1\n" for i in range(1, 7)))
    )
    flat = join_logged_signals(table, constant)
    assert flat.summary.loc[0, ["direction", "decided_by"]].tolist() == ["higher", "default"]
    assert "labels cannot decide" in flat.warnings[0]


def test_provenance_records_directions_and_the_file_and_round_trips(tmp_path):
    table = score_table()
    path = write(tmp_path / "long.csv", LONG)
    logged = read_logged_signals(path)
    joined = join_logged_signals(table, logged, provenance={"model": "m", "directions": {"older": "lower"}})
    out = tmp_path / "joined.csv"
    write_score_table(out, joined.table, config=joined.provenance)
    provenance = read_provenance(out)
    assert provenance["model"] == "m"
    assert provenance["directions"] == {"older": "lower", "llm_found": "higher", "rerank_distance": "lower"}
    assert provenance["direction_sources"] == {"llm_found": "inferred from labels", "rerank_distance": "declared"}
    assert provenance["logged_signals"] == [
        {"file": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "signals": logged.names}
    ]
    assert json.loads((tmp_path / "joined.meta.json").read_text())["table_sha256"]
    assert pd.read_csv(out)["llm_found"].tolist() == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]


def test_infinite_values_are_refused_with_their_line(tmp_path):
    from ragcal.signals.logged import read_logged_signals

    path = tmp_path / "inf.csv"
    path.write_text("id,judge\nq1,0.5\nq2,inf\nq3,-inf\n")
    with pytest.raises(ValueError, match=r"inf.csv: 2 value\(s\) are not numbers \(expected a finite number.*line 3"):
        read_logged_signals(path)


def test_join_keeps_ids_with_leading_zeros(tmp_path):
    from ragcal.cli import main

    scores = tmp_path / "scores.csv"
    scores.write_text("id,query,answerable,slice,dense_top1\n001,a,true,answerable,0.9\n002,b,false,unrelated,0.1\n")
    logged = tmp_path / "judge.csv"
    logged.write_text("id,judge\n002,0.2\n001,0.8\n")
    out = tmp_path / "joined.csv"
    assert main(["join", str(scores), str(logged), "--out", str(out), "--direction", "judge=higher"]) == 0
    joined = pd.read_csv(out, dtype={"id": str})
    assert joined["id"].tolist() == ["001", "002"] and joined["judge"].tolist() == [0.8, 0.2]
