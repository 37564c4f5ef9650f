"""The Spark engine on a real local Spark (``local[2]``, Java 17): the same counts as the pandas and DuckDB engines."""

import numpy as np
import pandas as pd
import pytest
from test_log_counts import synthetic_log

from ragcal.logs.counts import count_log
from ragcal.logs.duckdb_counts import count_log_duckdb
from ragcal.logs.spark_counts import count_log_spark, local_spark_session

# pyspark warns that it does not fully support pandas 3; its mapInPandas batches are tested below.
pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")


@pytest.fixture(scope="module")
def spark():
    session = local_spark_session(cores=2)
    yield session
    session.stop()


def assert_same_counts(counted, expected):
    assert counted.binning == expected.binning
    assert (counted.n_rows, counted.n_nan) == (expected.n_rows, expected.n_nan)
    pd.testing.assert_frame_equal(counted.frame, expected.frame)


@pytest.mark.parametrize("kind", ["csv", "folder"])
@pytest.mark.parametrize("grid", [False, True])
def test_spark_counts_equal_pandas_and_duckdb_counts(spark, tmp_path, kind, grid):
    log = synthetic_log(6_000, seed=2, distinct=None if grid else 300)
    options = {"max_distinct": 500, "bins": 250} if grid else {}
    if kind == "folder":  # Parquet in parts, NaN scores stored as NaN
        for part, start in enumerate(range(0, len(log), 2_000)):
            log.iloc[start : start + 2_000].to_parquet(tmp_path / f"part{part}.parquet", index=False)
        source = tmp_path
    else:  # every column as text, NaN scores as empty fields
        source = tmp_path / "log.csv"
        log.to_csv(source, index=False)
    expected = count_log(log, "s", **options)
    assert expected.binning.kind == ("grid" if grid else "distinct")
    counted = count_log_spark(source, "s", spark=spark, **options)
    assert_same_counts(counted, expected)
    assert_same_counts(count_log_duckdb(source, "s", **options), expected)
    assert counted.auc() == expected.auc() and counted.keep_threshold(0.95) == expected.keep_threshold(0.95)


def test_a_spark_dataframe_a_file_uri_and_a_glob_give_the_same_counts(spark, tmp_path):
    log = synthetic_log(3_000, seed=3, nan_share=0.05)
    log.iloc[:1_500].to_parquet(tmp_path / "day1.parquet", index=False)
    log.iloc[1_500:].to_parquet(tmp_path / "day2.parquet", index=False)
    expected = count_log(log, "s", max_distinct=100, bins=64)
    assert expected.binning.kind == "grid" and expected.n_nan > 0
    table = spark.read.parquet(str(tmp_path))  # a table of the lake, already a DataFrame
    assert_same_counts(count_log_spark(table, "s", max_distinct=100, bins=64), expected)
    assert_same_counts(count_log_spark(f"file://{tmp_path}/day*.parquet", "s", max_distinct=100, bins=64), expected)


def test_spark_reads_labels_as_written_and_names_what_is_wrong(spark, tmp_path):
    path = tmp_path / "log.csv"
    path.write_text(
        "answerable,slice,s\nyes,a,0.9\nno,u,0.1\nTRUE,a,0.7\n0,u,\n F ,u,0.3\nmaybe,a,0.5\n1.0,a,not-a-number\n",
        encoding="utf-8",
    )
    counted = count_log_spark(path, "s", spark=spark)
    assert_same_counts(counted, count_log_duckdb(path, "s"))
    # slice a: None (maybe) 0.5, True 0.7 and 0.9; slice u: False 0.1 and 0.3; two scores missing.
    assert counted.frame["answerable"].tolist() == [None, True, True, False, False]
    assert counted.frame["bin"].tolist() == [0.5, 0.7, 0.9, 0.1, 0.3]
    assert (counted.n_rows, counted.n_nan) == (7, 2) and counted.auc() == 1.0
    unlabeled = tmp_path / "live.csv"
    unlabeled.write_text("id,s\na,0.5\nb,0.7\nc,0.5\n", encoding="utf-8")
    live = count_log_spark(unlabeled, "s", spark=spark)
    assert live.frame.to_dict("list") == {
        "slice": ["all", "all"],
        "answerable": [None, None],
        "bin": [0.5, 0.7],
        "n": [2, 1],
    }
    with pytest.raises(ValueError, match=r"live\.csv: no column 'missing'; the log has id, s"):
        count_log_spark(unlabeled, "missing", spark=spark)
    with pytest.raises(FileNotFoundError, match="score log not found"):
        count_log_spark(tmp_path / "nothing.csv", "s", spark=spark)


def test_calibration_from_spark_counts_is_the_in_memory_one_and_the_window_is_applied(spark, tmp_path):
    import warnings

    from ragcal.calibration import calibrate
    from ragcal.logs.calibration_counts import calibrate_counts
    from ragcal.logs.engines import sum_batches

    log = synthetic_log(4_000, seed=7, distinct=250)
    log["timestamp"] = pd.date_range("2026-03-01", periods=len(log), freq="h", tz="UTC").strftime("%Y-%m-%dT%H:%MZ")
    log.to_csv(tmp_path / "log.csv", index=False)
    inside = log[(log["timestamp"] >= "2026-03-10") & (log["timestamp"] < "2026-04-01")]
    rules = ["keep@0.95", "recall_guarantee@0.9", "false_answer_guarantee@0.2", "min_cost@5"]
    counts = count_log_spark(tmp_path / "log.csv", "s", since="2026-03-10", until="2026-04-01",
                             higher_is_answerable=False, spark=spark)  # fmt: skip
    assert counts.frame["n"].sum() + counts.n_nan == len(inside)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = calibrate(inside, "s", rules, higher_is_answerable=False, bootstrap_rows=500)
    result = calibrate_counts(counts, rules, bootstrap_rows=500)
    pd.testing.assert_frame_equal(result.thresholds[expected.thresholds.columns], expected.thresholds,
                                  check_exact=True, check_dtype=False)  # fmt: skip
    aucs = result.auc.sort_values("comparison").reset_index(drop=True)
    expected_aucs = expected.auc.sort_values("comparison").reset_index(drop=True)
    pd.testing.assert_frame_equal(aucs, expected_aucs, check_exact=False, rtol=0, atol=1e-12)

    # A Python function per batch (mapInPandas on the workers), summed: the same as on the rows in memory.
    def above(batch):
        high = np.where(batch["s"] >= 0.5, "high", np.where(batch["s"] < 0.5, "low", "missing"))
        return pd.DataFrame({"band": high}).groupby("band").size().rename("n").reset_index()

    summed = sum_batches(tmp_path / "log.csv", ["s"], above, ["band"], engine="spark", since="2026-03-10",
                         until="2026-04-01")  # fmt: skip
    assert dict(zip(summed["band"], summed["n"])) == above(inside).set_index("band")["n"].to_dict()


@pytest.mark.parametrize("engine", ["pandas", "duckdb", "spark"])
def test_what_the_caller_keeps_is_reduced_as_rows_come_in_on_every_engine(spark, tmp_path, engine):
    from ragcal.logs.engines import collect_batches, gather

    log = synthetic_log(6_000, seed=4, distinct=40)  # ties in s, broken by id
    log.to_parquet(tmp_path / "log.parquet", index=False)
    held = []

    def smallest(rows):  # the 25 rows first by (s, id): the same whatever the split
        held.append(len(rows))
        return rows.astype({"s": float}).sort_values(["s", "id"], kind="stable").head(25)

    def scored(batch):
        return batch.loc[batch["s"].notna(), ["id", "s"]]

    expected = smallest(scored(log)).reset_index(drop=True)
    held.clear()
    kept = collect_batches(tmp_path / "log.parquet", ["s"], scored, ["id", "s"], engine=engine,
                           output_types={"s": "double"}, reduce=smallest, reduce_rows=400)  # fmt: skip
    pd.testing.assert_frame_equal(kept, expected)
    if engine == "spark":  # rows come to the driver in chunks of reduce_rows, reduced as they come
        assert len(held) > 10 and max(held) <= 2 * 400
    # The same through gather on parts of any size: never more than reduce_rows + one part is held.
    held.clear()
    parts = (scored(log.iloc[start : start + 150]) for start in range(0, len(log), 150))
    pd.testing.assert_frame_equal(gather(parts, ["id", "s"], smallest, reduce_rows=400), expected)
    assert len(held) > 10 and max(held) <= 400 + 150
    empty = gather(iter([]), ["id", "s"], smallest)
    assert list(empty.columns) == ["id", "s"] and len(empty) == 0


@pytest.mark.parametrize("engine", ["pandas", "duckdb"])
def test_batch_tables_are_summed_as_they_come_in(tmp_path, engine):
    from ragcal.logs.engines import sum_batches

    log = synthetic_log(6_000, seed=5, distinct=400)  # NaN scores are a key too
    log.to_parquet(tmp_path / "log.parquet", index=False)

    def per_score(batch):  # up to 250 rows per batch of 250: summed many times over 24 batches
        return batch.groupby(["slice", "s"], dropna=False).size().rename("n").reset_index()

    expected = per_score(log).sort_values(["slice", "s"], kind="stable").reset_index(drop=True)
    summed = sum_batches(tmp_path / "log.parquet", ["s"], per_score, ["slice", "s"], engine=engine, batch_rows=250)
    assert log["s"].isna().any() and len(expected) > 250
    pd.testing.assert_frame_equal(summed, expected, check_dtype=False)
    assert summed["n"].dtype == np.int64 and summed["n"].sum() == len(log)
