"""Anchoring to the committed values and the verdict's comparisons, on hand-made tables, runs and files."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from ragcal.retrieval.base import RetrievalResult
from ragcal.study.anchoring import Anchor, anchor_report, tolerance_for, within_tolerance
from ragcal.study.exactness import compare_files, compare_text, verdict_lines

THRESHOLD = 0.5


def write_reference(folder, table, *, run_lines=(), gate=True):
    folder.mkdir(parents=True, exist_ok=True)
    table.to_csv(folder / "scores.csv", index=False)
    if run_lines:
        (folder / "runs").mkdir()
        (folder / "runs" / "dense.run").write_text("\n".join(run_lines) + "\n")
    if gate:
        (folder / "gates").mkdir()
        gate_dict = {"type": "threshold", "signal": "dense_top1", "threshold": THRESHOLD, "higher_is_answerable": True}
        (folder / "gates" / "threshold.json").write_text(json.dumps({"gate": gate_dict}))
    return folder


@pytest.fixture
def committed():
    return pd.DataFrame(
        {
            "id": ["q1", "q2", "q3"],
            "query": ["a", "b", "c"],
            "answerable": [True, False, True],
            "dense_top1": [0.7, 0.50000001, 0.3],
            "dense_nqc": [12.0, 3.0, math.nan],
            "bm25_top1_raw": [10.5, 0.0, 3.25],
        }
    )


def test_tolerances_are_declared_per_quantity():
    assert tolerance_for("dense_top1") == (1e-5, 0.0)
    assert tolerance_for("dense_nqc") == (1e-5, 1e-4)  # a ratio: relative
    assert tolerance_for("bm25_top1_raw") == (1e-9, 0.0)
    assert tolerance_for("rerank_gap") == (1e-5, 0.0)  # a float32 cross-encoder's sigmoid
    assert within_tolerance([0.1, 0.2], [0.1, 0.2], "dense_top1") == (0.0, 0.0)
    deviation, share = within_tolerance([0.1 + 5e-6, 0.2], [0.1, 0.2], "dense_top1")
    assert deviation == pytest.approx(5e-6) and share == pytest.approx(0.5)
    # 12.0 moved by 1e-4: 1e-5 + 1e-4 * 12 = 1.21e-3 allowed.
    assert within_tolerance([12.0001], [12.0], "dense_nqc")[1] == pytest.approx(1e-4 / 1.21e-3)
    assert within_tolerance([math.nan, 1.0], [math.nan, 1.0], "dense_top1") == (0.0, 0.0)
    assert within_tolerance([math.nan], [1.0], "dense_top1") == (math.inf, math.inf)


def test_a_table_within_tolerance_takes_the_committed_values(tmp_path, committed):
    reference = write_reference(tmp_path / "fastapi", committed)
    mine = committed.copy()
    mine["dense_top1"] = mine["dense_top1"] + 2e-7  # q2 crosses the committed gate's threshold
    mine["dense_nqc"] = [12.0005, 3.0, math.nan]
    mine["extra_signal"] = [1.0, 2.0, 3.0]  # a signal being prototyped stays this run's own
    anchor = Anchor(reference, label="fastapi")
    anchored = anchor.table(mine, decisions=True)
    for column in ("dense_top1", "dense_nqc", "bm25_top1_raw"):
        np.testing.assert_array_equal(anchored[column].to_numpy(), committed[column].to_numpy())
    assert list(anchored["extra_signal"]) == [1.0, 2.0, 3.0]
    status = {record.quantity: record.status for record in anchor.records}
    assert status == {"dense_top1": "anchored", "dense_nqc": "anchored", "bm25_top1_raw": "identical"}
    # Only q2's decision moved with this run's own scores: 0.50000021 against 0.50000001, both above 0.5.
    assert anchor.changed_decisions == {"fastapi/gates/threshold.json": 0}
    mine.loc[1, "dense_top1"] = 0.4999999  # now this run's own score refuses where the committed one answered
    anchor = Anchor(reference, label="fastapi")
    anchor.table(mine, decisions=True)
    assert anchor.changed_decisions == {"fastapi/gates/threshold.json": 1}
    lines = anchor_report([anchor])
    assert "0 beyond it" in lines[0] and "changed by this run's own scores: 1" in lines[2]


def test_beyond_tolerance_keeps_this_runs_values_and_says_so(tmp_path, committed):
    reference = write_reference(tmp_path / "fastapi", committed)
    mine = committed.copy()
    mine["dense_top1"] = mine["dense_top1"] + 1e-3
    mine["bm25_top1_raw"] = mine["bm25_top1_raw"] + 1e-7
    anchor = Anchor(reference, label="fastapi")
    anchored = anchor.table(mine)
    np.testing.assert_array_equal(anchored["dense_top1"], mine["dense_top1"])
    np.testing.assert_array_equal(anchored["bm25_top1_raw"], mine["bm25_top1_raw"])
    lines = anchor_report([anchor])
    assert "2 beyond it" in lines[0]
    assert any("dense_top1: deviation 1.00e-03, 100.0 times its declared tolerance" in line for line in lines)
    # Another set of questions, or a committed column this run does not compute: nothing anchored.
    for other in (mine.iloc[:2], mine.drop(columns="dense_nqc")):
        anchor = Anchor(reference)
        assert anchor.table(other) is other
        assert [record.status for record in anchor.records] == ["beyond tolerance"]
    # A label that changed is not a rounding: nothing anchored.
    anchor = Anchor(reference)
    relabeled = committed.assign(answerable=[True, True, True], dense_top1=committed["dense_top1"] + 1e-7)
    assert anchor.table(relabeled) is relabeled


def test_a_store_table_anchors_only_the_columns_it_shares(tmp_path, committed, monkeypatch):
    from ragcal.study.notebooks import ANCHOR_VARIABLE, anchored_store_table

    reference = write_reference(tmp_path / "results" / "fastapi", committed)
    # A framework store's table: the same questions, its own dense_top1, none of BM25's columns, a gap of its own.
    store = committed[["id", "query", "answerable", "dense_top1"]].assign(
        dense_top1=committed["dense_top1"] + 3e-7, dense_gap=[0.1, 0.2, 0.3]
    )
    anchor = Anchor(reference, label="fastapi")
    assert anchor.table(store) is store  # every committed column is required by default
    anchor = Anchor(reference, label="fastapi")
    anchored = anchor.table(store, columns=["id", "query", "answerable", "dense_top1"])
    np.testing.assert_array_equal(anchored["dense_top1"].to_numpy(), committed["dense_top1"].to_numpy())
    assert list(anchored["dense_gap"]) == [0.1, 0.2, 0.3]
    assert [(record.quantity, record.status) for record in anchor.records] == [("dense_top1", "anchored")]
    # Beyond tolerance: the store's own values, recorded.
    far = store.assign(dense_top1=store["dense_top1"] + 1e-3)
    anchor = Anchor(reference, label="fastapi")
    np.testing.assert_array_equal(anchor.table(far, columns=["id", "dense_top1"])["dense_top1"], far["dense_top1"])
    assert [record.status for record in anchor.records] == ["beyond tolerance"]
    # The notebooks' helper: nothing outside `ragcal reproduce`, the committed values under it.
    monkeypatch.delenv(ANCHOR_VARIABLE, raising=False)
    assert anchored_store_table(store) is store
    monkeypatch.setenv(ANCHOR_VARIABLE, str(tmp_path / "results"))
    np.testing.assert_array_equal(anchored_store_table(store)["dense_top1"], committed["dense_top1"])
    # Other questions (or another order) are not a rounding: nothing anchored.
    reordered = store.iloc[::-1]
    assert anchored_store_table(reordered) is reordered


def test_a_table_of_another_model_is_not_anchored_to(tmp_path):
    from ragcal.score_tables import write_score_table

    rerank = pd.DataFrame(
        {"id": ["q1", "q2"], "answerable": [True, False], "rerank_top1": [0.51, 0.5], "rerank_gap": [0.0, 6e-8]}
    )
    reference = tmp_path / "fastapi"
    reference.mkdir()
    write_score_table(reference / "rerank_scores.csv", rerank, config={"reranker_fingerprint": "tiny@abc"})
    mine = rerank.assign(rerank_gap=[6e-8, 0.0])  # a near tie broken the other way by other kernels
    anchor = Anchor(reference, label="fastapi")
    anchored = anchor.table(mine, "rerank_scores.csv", provenance={"reranker_fingerprint": "tiny@abc"})
    np.testing.assert_array_equal(anchored["rerank_gap"], rerank["rerank_gap"])
    assert {record.quantity: record.status for record in anchor.records}["rerank_gap"] == "anchored"
    # Another reranker's committed scores: another measurement, neither anchored nor recorded.
    anchor = Anchor(reference, label="fastapi")
    assert anchor.table(mine, "rerank_scores.csv", provenance={"reranker_fingerprint": "real@def"}) is mine
    assert anchor.records == []
    # A provenance that is not the table's (edited afterwards) names nothing: nothing anchored.
    (reference / "rerank_scores.csv").write_text(rerank.assign(rerank_top1=[0.52, 0.5]).to_csv(index=False))
    anchor = Anchor(reference, label="fastapi")
    assert anchor.table(mine, "rerank_scores.csv", provenance={"reranker_fingerprint": "tiny@abc"}) is mine


def test_no_committed_files_anchor_nothing(tmp_path, committed):
    anchor = Anchor(tmp_path / "nothing")
    assert anchor.table(committed) is committed
    assert anchor.retrieved({"dense": []}, []) == {"dense": []}
    assert anchor_report([anchor]) == ["anchoring: no committed values to compare with (nothing anchored)"]


def run_line(qid, docid, rank, score):
    return f"{qid} Q0 {docid} {rank} {score!r} dense"


def test_dense_scores_anchor_per_question_only_in_the_same_order(tmp_path, committed):
    lines = [run_line("q1", "p#1", 1, 0.7), run_line("q1", "p#2", 2, 0.6), run_line("q2", "p#3", 1, 0.4)]
    reference = write_reference(tmp_path / "fastapi", committed, run_lines=lines)
    fresh = {
        "dense": [
            RetrievalResult("dense", ("p#1", "p#2"), [0.7000001, 0.6]),
            RetrievalResult("dense", ("p#3",), [0.39999998]),
        ],
        "bm25_raw": ["kept as it is"],
    }
    anchor = Anchor(reference)
    anchored = anchor.retrieved(fresh, ["q1", "q2"])
    np.testing.assert_array_equal(anchored["dense"][0].scores, [0.7, 0.6])
    np.testing.assert_array_equal(anchored["dense"][1].scores, [0.4])
    assert anchored["bm25_raw"] == ["kept as it is"]
    [record] = anchor.records
    assert record.status == "anchored" and record.n_values == 3
    assert record.max_deviation == pytest.approx(1e-7, rel=1e-3)
    # Two chunks swapped (a near tie): nothing anchored, the record says which question.
    swapped = {"dense": [RetrievalResult("dense", ("p#2", "p#1"), [0.65, 0.65]), fresh["dense"][1]]}
    anchor = Anchor(reference)
    kept = anchor.retrieved(swapped, ["q1", "q2"])["dense"]
    assert all(mine is theirs for mine, theirs in zip(kept, swapped["dense"]))
    assert anchor.records[0].status == "beyond tolerance" and "q1: other chunks" in anchor.records[0].detail
    # A committed question this run did not ask.
    anchor = Anchor(reference)
    anchor.retrieved({"dense": fresh["dense"][:1]}, ["q1"])
    assert "1 committed questions not asked" in anchor.records[0].detail


def test_a_shallower_committed_run_anchors_the_first_ranks_and_the_diagnostics_follow_the_table(tmp_path, committed):
    # SQuAD commits its top 10 only: the first ranks take the committed scores, the rest stay this run's.
    lines = [run_line("q1", "p#1", 1, 0.7), run_line("q2", "p#3", 1, 0.4), run_line("q3", "p#5", 1, 0.3)]
    table = committed.assign(dense_centroid_cosine=[0.1, 0.2, 0.3])
    reference = write_reference(tmp_path / "squad", table, run_lines=lines)
    info = lambda value: {"centroid_cosine": value}  # noqa: E731
    fresh = [
        RetrievalResult("dense", ("p#1", "p#2"), [0.7000001, 0.5], info=info(0.1000002)),
        RetrievalResult("dense", ("p#3", "p#4"), [0.4, 0.39], info=info(0.2)),
        RetrievalResult("dense", ("p#5", "p#6"), [0.3, 0.3000001], info=info(0.3)),  # rank 2 ties rank 1
    ]
    anchor = Anchor(reference)
    anchored = anchor.retrieved({"dense": fresh}, ["q1", "q2", "q3"])["dense"]
    assert anchor.records[0].status == "beyond tolerance" and "q3: rank 2 ties rank 1" in anchor.records[0].detail
    np.testing.assert_array_equal(anchored[0].scores, [0.7000001, 0.5])  # scores left as they were
    assert [result.info["centroid_cosine"] for result in anchored] == [0.1, 0.2, 0.3]  # the diagnostics anchored
    assert anchor.records[1].quantity == "dense info centroid_cosine" and anchor.records[1].status == "anchored"
    fresh[2] = RetrievalResult("dense", ("p#5", "p#6"), [0.3, 0.2], info=info(0.3))
    anchor = Anchor(reference)
    anchored = anchor.retrieved({"dense": fresh}, ["q1", "q2", "q3"])["dense"]
    np.testing.assert_array_equal(anchored[0].scores, [0.7, 0.5])
    assert anchor.records[0].status == "anchored" and anchor.records[0].n_values == 3


def test_printed_numbers_compare_within_tolerance_and_their_last_digit():
    assert compare_text("auc 0.8123 n 57", "auc 0.8123 n 57") == (True, 0.0)
    same, deviation = compare_text("auc 0.8124 n 57", "auc 0.8123 n 57")  # a value that rounded the other way
    assert same and deviation == pytest.approx(1e-4)
    assert not compare_text("auc 0.8126 n 57", "auc 0.8123 n 57")[0]  # three units of the last digit
    assert compare_text("auc 0.8123 n 58", "auc 0.8123 n 57") == (False, math.inf)  # a count: exact
    assert compare_text("gate refuse", "gate answer") == (False, math.inf)
    assert compare_text("0.6906381845474243", "0.6906382845474243")[0]  # full precision: 1e-7 < 5e-5
    assert not compare_text("0.690638", "0.690738")[0]
    assert compare_text("1.5e-05", "1.6e-05")[0]


def test_folders_compare_identical_within_and_beyond(tmp_path):
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    for folder, numbers in ((mine, "0.1235"), (theirs, "0.1234")):
        (folder / "sub").mkdir(parents=True)
        (folder / "same.csv").write_text("a,b\n1,2\n")
        (folder / "sub" / "rounded.csv").write_text(f"auc\n{numbers}\n")
        (folder / "timing.md").write_text(f"{numbers} s\n")
    (mine / "figure.png").write_bytes(b"\x89PNG\x00one")
    (theirs / "figure.png").write_bytes(b"\x89PNG\x00two")
    (theirs / "gone.csv").write_text("x\n")
    comparison = compare_files(mine, theirs, ignore=["timing.md"])
    assert comparison["identical"] == ["same.csv"]
    assert [name for name, _ in comparison["within"]] == ["sub/rounded.csv"]
    assert comparison["different"] == ["changed: figure.png", "missing: gone.csv"]
    lines = verdict_lines(comparison, ignored=1)
    assert lines[0].startswith("files: 1 identical to the committed ones (1 run-dependent files not compared); 1 equal")
    assert lines[0].endswith("; 2 beyond tolerance") and lines[1] == "  beyond tolerance: changed: figure.png"
