"""Hostile or broken files get one clear line that names the file and the field, never a traceback.

Each row of ``CASES`` is a file a user might hand ragcal (edited by hand, cut short, from another tool), the
command that reads it, and the message expected. The command runs in-process through ``ragcal.cli.main``.
"""

import json
import re

import pandas as pd
import pytest
from conftest import write

from ragcal.cli import main
from ragcal.gates import FallbackChain, FloorGapGate, GateFileError, Stage, ThresholdGate, read_gate_file
from ragcal.score_tables import read_provenance, write_score_table

THRESHOLD = ThresholdGate("dense_top1", 0.43, hedge_below=0.5).to_dict()
CHAIN = FallbackChain(
    (Stage("hybrid", ThresholdGate("dense_top1", 0.43)), Stage("keyword", ThresholdGate("bm25_top1_stopwords", 7.0)))
).to_dict()


def gate_text(gate: dict, **changes) -> str:
    gate = {**gate, **changes}
    gate = {key: value for key, value in gate.items() if value is not DROP}
    return json.dumps({"format": "ragcal-gate/1", "gate": gate, "rule": None, "fitted": {}, "provenance": {}})


DROP = object()


def nested_chain_text() -> str:
    chain = json.loads(json.dumps(CHAIN))
    chain["stages"][1]["gate"]["threshold"] = "seven"
    return gate_text(chain)


def score_table_text() -> str:
    return "id,answerable,slice,dense_top1\nq1,true,answerable,0.71\nq2,false,unrelated,0.22\nq3,true,answerable,0.65\n"


def write_parquet(path, **columns):
    frame = pd.DataFrame({"id": ["q1", "q2"], "answerable": [True, False], "slice": ["answerable", "unrelated"]})
    frame = frame.assign(**columns)
    frame.to_parquet(path)
    return path


def truncated_parquet(path):
    write_parquet(path, dense_top1=[0.7, 0.2])
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def write_file(name, text):
    return lambda folder: write(folder / name, text)


def big_gate_file(folder):
    path = folder / "huge.json"
    with open(path, "w") as handle:
        handle.write('{"format": "ragcal-gate/1", "padding": "')
        handle.write("x" * (50 * 2**20))
        handle.write('"}')
    return path


# (case, kind, make the file in a folder, expected message: a regex)
CASES = [
    # gate files, read by `ragcal ask --gate FILE`
    ("NaN threshold", "gate", write_file("g.json", gate_text(THRESHOLD, threshold=float("nan"))),
     r"g\.json: invalid gate: field 'gate\.threshold': NaN is not a number"),
    ("infinite floor", "gate", write_file("g.json", gate_text(FloorGapGate(0.4, 0.1).to_dict(), floor=float("inf"))),
     r"g\.json: invalid gate: field 'gate\.floor': must be finite, got inf"),
    ("infinite passage floor", "gate", write_file("g.json", gate_text(THRESHOLD, passage_floor="-inf")),
     r"field 'gate\.passage_floor': must be finite"),
    ("unknown gate type", "gate", write_file("g.json", gate_text(THRESHOLD, type="oracle")),
     r"g\.json: invalid gate: field 'gate\.type': unknown gate type 'oracle'; known types are \['chain', 'floor_gap'"),
    ("threshold of the wrong type", "gate", write_file("g.json", gate_text(THRESHOLD, threshold="high")),
     r"field 'gate\.threshold': expected a number, got str 'high'"),
    ("threshold given as true", "gate", write_file("g.json", gate_text(THRESHOLD, threshold=True)),
     r"field 'gate\.threshold': expected a number, got bool True"),
    ("orientation as text", "gate", write_file("g.json", gate_text(THRESHOLD, higher_is_answerable="no")),
     r"field 'gate\.higher_is_answerable': expected true or false, got str 'no'"),
    ("missing key", "gate", write_file("g.json", gate_text(THRESHOLD, signal=DROP)),
     r"g\.json: invalid gate: field 'gate': missing key\(s\) 'signal'"),
    ("misspelt key", "gate", write_file("g.json", gate_text(THRESHOLD, hedge_below=DROP, hedge_belo=0.5)),
     r"field 'gate': unknown key\(s\) 'hedge_belo'; known keys:"),
    ("negative max_passages", "gate", write_file("g.json", gate_text(THRESHOLD, max_passages=-3)),
     r"field 'gate\.max_passages': expected a positive integer or null, got int -3"),
    ("bad threshold inside a chain stage", "gate", write_file("g.json", nested_chain_text()),
     r"field 'gate\.stages\[1\]\.gate\.threshold': expected a number, got str 'seven'"),
    ("stages not a list", "gate", write_file("g.json", gate_text(CHAIN, stages="hybrid")),
     r"field 'gate\.stages': expected a non-empty list of stages"),
    ("unknown signal", "gate", write_file("g.json", gate_text(THRESHOLD, signal="dense_top9")),
     r"g\.json: .*unknown signal 'dense_top9'"),
    ("a 50 MB file", "gate", big_gate_file, r"huge\.json: 50\.0 MiB is no gate file"),
    ("not JSON", "gate", write_file("g.json", "threshold = 0.43\n"), r"g\.json: not a JSON gate file"),
    ("JSON but no gate file", "gate", write_file("g.json", "[1, 2, 3]"),
     r"g\.json: expected a 'ragcal-gate/1' file, found format 'list'"),
    ("a folder", "gate", lambda folder: (folder / "g.json").mkdir() or folder / "g.json", r"g\.json: gate file not found"),
    # score logs, read by `ragcal calibrate FILE`
    ("Parquet with a string signal column", "scores",
     lambda folder: write_parquet(folder / "log.parquet", dense_top1=["0.7", "high"]),
     r"log\.parquet, line 3, column 'dense_top1': not numeric, got 'high'"),
    ("mixed types in a CSV column", "scores",
     write_file("log.csv", score_table_text().replace("0.22", "n/a-ish")),
     r"log\.csv, line 3, column 'dense_top1': not numeric, got 'n/a-ish'"),
    ("truncated CSV", "scores", write_file("log.csv", score_table_text()[:-12]),
     r"log\.csv: cannot be read as CSV \(line 4 has 3 cells where the header has 4\)"),
    ("truncated Parquet", "scores", lambda folder: truncated_parquet(folder / "log.parquet"),
     r"log\.parquet: cannot be read as Parquet"),
    ("semicolon-separated CSV", "scores", write_file("log.csv", score_table_text().replace(",", ";")),
     r"log\.csv: looks semicolon-delimited"),
    # access maps, read by `ragcal chunks CORPUS --access-map FILE`
    ("a glob that matches nothing", "access", write_file("map.csv", "path_glob,level\ncookies.md,public\nsecrte/*,restricted\n"),
     r"map\.csv: row\(s\) 'secrte/\*' match no page of the corpus"),
    ("a level with spaces", "access", write_file("map.csv", "path_glob,level\ncookies.md,top secret\n"),
     r"map\.csv, line 2: .*'top secret'.*letters, digits"),
    ("no level column", "access", write_file("map.csv", "path_glob;level\ncookies.md;public\n"),
     r"map\.csv: missing column\(s\) path_glob, level"),
]


@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "docs"
    write(root / "cookies.md", "# Cookies\n\nSet a cookie with response.set_cookie.\n")
    write(root / "secret" / "payroll.md", "---\naccess_level: restricted\n---\n# Payroll\n\nPaid on the 25th.\n")
    return root


def command(kind, path, corpus, tmp_path):
    if kind == "gate":
        return ["ask", "--gate", str(path), "--corpus", str(corpus), "anything"]
    if kind == "scores":
        return ["calibrate", str(path)]
    return ["chunks", str(corpus), "--access-map", str(path), "--out", str(tmp_path / "chunks.jsonl")]


@pytest.mark.parametrize("case, kind, make, expected", CASES, ids=[case[0] for case in CASES])
def test_a_hostile_file_gets_one_line_naming_it(case, kind, make, expected, corpus, tmp_path, capsys):
    folder = tmp_path / "files"
    folder.mkdir()
    path = make(folder)
    assert main(command(kind, path, corpus, tmp_path)) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ragcal: error: "), captured.err
    assert re.search(expected, lines[0]), lines[0]
    assert "Traceback" not in captured.err + captured.out
    assert not (tmp_path / "chunks.jsonl").exists()  # nothing half-written
    if kind == "gate":
        with pytest.raises(GateFileError, match=expected):  # the Python API says the same
            read_gate_file(path)


def test_an_infinite_threshold_is_a_valid_gate(tmp_path):
    """The calibration's fall-backs (answer all, refuse all) are infinite thresholds: they load."""
    path = write(tmp_path / "g.json", gate_text(THRESHOLD, threshold="-inf", hedge_below=DROP))
    assert read_gate_file(path)["gate"].threshold == float("-inf")


def test_front_matter_wins_over_a_disagreeing_map_and_says_so(corpus, tmp_path, capsys):
    access_map = write(tmp_path / "map.csv", "path_glob,level\nsecret/,public\ncookies.md,public\n")
    out = tmp_path / "chunks.jsonl"
    with pytest.warns(UserWarning, match=r"map\.csv: front matter and map disagree .*secret/payroll\.md \(front matter "
                      r"restricted, map public\); the front matter wins"):
        assert main(["chunks", str(corpus), "--access-map", str(access_map), "--out", str(out)]) == 0
    levels = {json.loads(line)["path"]: json.loads(line)["access_level"] for line in out.read_text().splitlines()}
    assert levels == {"cookies.md": "public", "secret/payroll.md": "restricted"}


def test_provenance_of_another_table_is_refused(tmp_path):
    table = pd.read_csv(pd.io.common.StringIO(score_table_text()))
    path = write_score_table(tmp_path / "scores.csv", table, config={"model_fingerprint": "m@1"})
    assert read_provenance(path)["model_fingerprint"] == "m@1"
    path.write_text(score_table_text().replace("0.71", "0.81"))  # replaced after scoring (or a run cut short)
    with pytest.raises(ValueError, match=r"scores\.meta\.json: describes another version of scores\.csv"):
        read_provenance(path)
