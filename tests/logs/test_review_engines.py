"""The review sample drawn from a log on disk (ragcal.logs.review_draw): the same on every engine and file split."""

import numpy as np
import pandas as pd
import pytest

from ragcal.datasets import DATA_DIR
from ragcal.gates import ThresholdGate, read_gate_file
from ragcal.logs.review_draw import draw_keys, duplicate_id, review_sample_log
from ragcal.logs.spark_counts import local_spark_session
from ragcal.monitoring import read_review_labels, review_estimates, review_sample
from ragcal.monitoring.review_files import REVIEW_COLUMNS

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")

RESULTS = DATA_DIR.parent / "results"
GATE = ThresholdGate("dense_top1", 0.5)
HEDGED = ThresholdGate("dense_top1", 0.45, hedge_below=0.6)


def live_log(n, *, seed=0, levels=40):
    """Unlabeled log: ids, queries, a day of timestamps, scores on ``levels`` levels (many ties) and some NaN."""
    rng = np.random.default_rng(seed)
    scores = np.round(rng.uniform(0.1, 0.9, n) * levels) / levels
    scores[rng.random(n) < 0.03] = np.nan
    seconds = pd.to_timedelta(np.sort(rng.uniform(0, 86_400, n)), unit="s")
    stamps = (pd.Timestamp("2026-05-01", tz="UTC") + seconds).as_unit("us")  # Spark reads no nanosecond Parquet
    return pd.DataFrame({"id": [f"q{i:05d}" for i in range(n)], "query": [f"question {i}" for i in range(n)],
                         "timestamp": stamps, "dense_top1": scores})  # fmt: skip


def write_parts(log, folder, parts=3):
    """``log`` as ``parts`` Parquet files of unequal sizes, rows shuffled across them."""
    folder.mkdir()
    order = np.random.default_rng(9).permutation(len(log))
    cuts = np.sort(np.random.default_rng(9).choice(np.arange(1, len(log)), parts - 1, replace=False))
    for part, rows in enumerate(np.split(order, cuts)):
        log.iloc[rows].to_parquet(folder / f"part{part}.parquet", index=False)
    return folder


def sizes_of(sample):
    return sample.groupby("stratum")[["stratum_size", "stratum_sampled"]].first().to_dict("index")


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("review_logs")
    log = live_log(4_000)
    log.to_parquet(folder / "one.parquet", index=False)
    log.to_csv(folder / "one.csv", index=False)
    write_parts(log, folder / "parts")
    return log, folder


@pytest.fixture(scope="module")
def spark():
    session = local_spark_session(cores=2)
    yield session
    session.stop()


def test_every_engine_and_file_split_draws_the_same_sample(logs):
    _, folder = logs
    expected = review_sample_log(HEDGED, folder / "one.parquet", engine="pandas", size=48, random_state=3)
    assert list(expected.columns[: len(REVIEW_COLUMNS)]) == list(REVIEW_COLUMNS)
    assert len(expected) == 48 and expected["id"].is_unique
    for engine, source in [("duckdb", folder / "one.parquet"), ("duckdb", folder / "parts"),
                           ("duckdb", f"{folder}/parts/part*.parquet"), ("pandas", folder / "one.csv"),
                           ("duckdb", folder / "one.csv")]:  # fmt: skip
        pd.testing.assert_frame_equal(review_sample_log(HEDGED, source, engine=engine, size=48, random_state=3), expected)
    other = review_sample_log(HEDGED, folder / "parts", size=48, random_state=4)
    assert sizes_of(other) == sizes_of(expected) and set(other["id"]) != set(expected["id"])


def test_csv_ids_that_look_like_numbers_stay_text_on_every_engine(tmp_path):
    log = live_log(300, seed=5)
    log["id"] = [f"{i}.50" for i in range(len(log))]  # "1.50" is not the number 1.5
    log.to_csv(tmp_path / "numbers.csv", index=False)
    expected = review_sample_log(HEDGED, tmp_path / "numbers.csv", engine="pandas", size=20, random_state=1)
    assert expected["id"].str.endswith(".50").all()
    pd.testing.assert_frame_equal(
        review_sample_log(HEDGED, tmp_path / "numbers.csv", engine="duckdb", size=20, random_state=1), expected
    )


def test_the_draw_keeps_the_smallest_keys_and_the_strata_of_review_sample(logs):
    log, folder = logs
    sample = review_sample_log(HEDGED, folder / "parts", size=60, random_state=0)
    in_memory = review_sample(HEDGED, log, size=60, random_state=0)
    assert sizes_of(sample) == sizes_of(in_memory)
    assert set(sample["stratum"]) == {"answer/near", "answer/far", "hedge/near", "hedge/far", "refuse/near",
                                      "refuse/far"}  # fmt: skip
    # By hand: the strata of review_sample (by log_row), each one's rows with the smallest hash of their id.
    strata = pd.Series("", index=log.index)
    full = review_sample(HEDGED, log, size=len(log), random_state=0)
    strata[full["log_row"].to_numpy()] = full["stratum"].to_numpy()
    keys = pd.Series(draw_keys(log["id"], 0), index=log.index)
    for stratum, block in sample.groupby("stratum"):
        smallest = keys[strata == stratum].nsmallest(len(block)).index
        assert sorted(block["id"]) == sorted(log.loc[smallest, "id"])
        assert (block["draw_key"].to_numpy() == np.sort(keys[smallest].to_numpy())).all()
    assert (sample["bar_distance"].isna() == sample["dense_top1"].isna()).all()
    assert sample.loc[sample["dense_top1"].isna(), "stratum"].str.endswith("/far").all()  # NaN is far


@pytest.mark.parametrize("near_fraction", [0.01, 0.25, 0.5, 1.0])
def test_ties_at_the_cut_and_a_chain_give_review_sample_strata(tmp_path, near_fraction):
    table = pd.read_csv(RESULTS / "fastapi" / "scores.csv").drop(columns=["answerable", "slice"])
    chain = read_gate_file(RESULTS / "fastapi" / "gates" / "chain_keep095.json")["gate"]
    table.to_parquet(tmp_path / "chain.parquet", index=False)
    options = {"size": 30, "near_fraction": near_fraction, "min_per_stratum": 1}
    sample = review_sample_log(chain, tmp_path / "chain.parquet", engine="duckdb", **options)
    assert sizes_of(sample) == sizes_of(review_sample(chain, table, **options))
    ties = pd.DataFrame({"id": [f"t{i}" for i in range(12)], "query": "q",
                         "dense_top1": [0.45] * 6 + [0.2, 0.1] + [0.55, 0.7, 0.8, 0.9]})  # fmt: skip
    ties.to_csv(tmp_path / "ties.csv", index=False)
    drawn = review_sample_log(GATE, tmp_path / "ties.csv", engine="duckdb", **options)
    assert sizes_of(drawn) == sizes_of(review_sample(GATE, ties, **options))


def test_the_window_is_applied_in_the_engine(logs, tmp_path):
    log, folder = logs
    since, until = "2026-05-01T06:00:00", "2026-05-01T18:00:00Z"
    inside = log[(log["timestamp"] >= pd.Timestamp(since, tz="UTC")) & (log["timestamp"] < pd.Timestamp(until))]
    inside.to_parquet(tmp_path / "inside.parquet", index=False)
    expected = review_sample_log(GATE, tmp_path / "inside.parquet", size=20)
    windowed = review_sample_log(GATE, folder / "parts", since=since, until=until, size=20)
    pd.testing.assert_frame_equal(windowed, expected)
    assert sizes_of(windowed) == sizes_of(review_sample(GATE, inside, size=20))
    assert sum(size["stratum_size"] for size in sizes_of(windowed).values()) == len(inside) < len(log)


def test_bad_logs_are_refused_naming_the_file(logs, tmp_path):
    log, folder = logs
    with pytest.raises(ValueError, match=r"nothing\.parquet: no rows to sample in \[2027"):
        log.to_parquet(tmp_path / "nothing.parquet", index=False)
        review_sample_log(GATE, tmp_path / "nothing.parquet", engine="duckdb", since="2027-01-01")
    log.drop(columns=["query"]).to_parquet(tmp_path / "noquery.parquet", index=False)
    with pytest.raises(ValueError, match=r"noquery\.parquet: missing column\(s\) 'query'; have id, timestamp"):
        review_sample_log(GATE, tmp_path / "noquery.parquet")
    with pytest.raises(ValueError, match=r"one\.parquet: missing column\(s\) 'bm25_top1_raw'"):
        review_sample_log(ThresholdGate("bm25_top1_raw", 5.0), folder / "one.parquet")
    repeated = log.head(50).assign(id=[f"r{i % 49}" for i in range(50)])
    repeated.to_csv(tmp_path / "repeated.csv", index=False)
    for engine in ("pandas", "duckdb"):
        assert duplicate_id(tmp_path / "repeated.csv", engine=engine) == "r0"
        with pytest.raises(ValueError, match=r"repeated\.csv, column 'id': duplicate id 'r0'"):
            review_sample_log(GATE, tmp_path / "repeated.csv", engine=engine, size=10)
    assert duplicate_id(folder / "parts") is None
    with pytest.raises(ValueError, match="'size' parameter of review_sample_log must be at least the number"):
        review_sample_log(GATE, folder / "one.parquet", size=3)


def test_duckdb_finds_a_repeated_id_by_hashes_page_after_page(tmp_path):
    from ragcal.logs.review_draw import _duplicate_id_duckdb
    from ragcal.logs.sources import duckdb_connection, duckdb_view

    ids = [f"x{i}" for i in range(5_000)]
    repeated = {f"x{i}" for i in (17, 2_222, 4_999)}
    pd.DataFrame({"id": [*ids, *sorted(repeated), " x17 "]}).to_parquet(tmp_path / "ids.parquet", index=False)
    pd.DataFrame({"id": ids}).to_parquet(tmp_path / "unique.parquet", index=False)
    connection = duckdb_connection()
    try:
        duckdb_view(connection, tmp_path / "ids.parquet", None, None)
        for page in (1, 2, 1_000):  # one repeated hash per query, then two, then all of them
            assert _duplicate_id_duckdb(connection, page=page) in repeated
    finally:
        connection.close()
    assert duplicate_id(tmp_path / "ids.parquet", engine="duckdb") in repeated
    assert duplicate_id(tmp_path / "unique.parquet", engine="duckdb") is None


def test_a_log_without_ids_is_keyed_by_its_query(tmp_path):
    log = live_log(300, seed=2).drop(columns=["id"])
    log.loc[:9, "query"] = "the same question"  # ten rows asked the same thing: one key
    log.to_csv(tmp_path / "noid.csv", index=False)
    sample = review_sample_log(GATE, tmp_path / "noid.csv", size=20)
    keys = draw_keys(sample["query"], 0)
    assert (sample["draw_key"].to_numpy() == keys).all()
    assert (sample["id"] == [f"live-{key:016x}" for key in keys.view(np.uint64)]).all()
    assert sizes_of(sample) == sizes_of(review_sample(GATE, log, size=20))


def test_spark_draws_the_sample_of_duckdb(logs, spark):
    _, folder = logs
    expected = review_sample_log(HEDGED, folder / "parts", engine="duckdb", size=30, random_state=1, since="2026-05-01T03:00")
    drawn = review_sample_log(HEDGED, folder / "parts", engine="spark", size=30, random_state=1, since="2026-05-01T03:00")
    pd.testing.assert_frame_equal(drawn, expected)
    assert duplicate_id(folder / "parts", engine="spark") is None


def test_cli_draws_with_duckdb_and_the_labels_read_back(tmp_path, capsys):
    from ragcal.cli import main

    live = pd.read_csv(RESULTS / "rust-book" / "scores.csv").drop(columns=["answerable", "slice"]).head(40)
    write_parts(live, tmp_path / "live")
    gate = RESULTS / "fastapi" / "gates" / "threshold_keep095.json"
    out = tmp_path / "sample.csv"
    arguments = ["review", "--gate", str(gate), str(tmp_path / "live"), "--out", str(out), "--size", "8"]
    assert main([*arguments, "--engine", "duckdb", "--seed", "5"]) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}: 8 of 40 questions" in printed
    sample = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert len(sample) == 8 and sample["page_1"].str.endswith(".md").all() and "draw_key" in sample.columns
    sample.assign(answerable=np.where(sample["decision"] == "refuse", "true", "false")).to_csv(out, index=False)
    labels = read_review_labels(out)
    assert labels["labeled"].all() and labels["stratum_size"].groupby(labels["stratum"]).first().sum() == 40
    estimates = review_estimates(labels)
    assert estimates.strata["stratum_size"].sum() == 40
    table = estimates.table.set_index("estimand")
    refusals = labels[labels["decision"] == "refuse"].groupby("stratum")["stratum_size"].first()
    assert table.loc["refusals_answerable", "population"] == refusals.sum() > 0
    assert table.loc["refusals_answerable", "estimate"] == 1.0 and table.loc["answers_unanswerable", "estimate"] == 1.0
    assert main([*arguments[:4], "--out", str(out), "--engine", "duckdb", "--until", "2020-01-01"]) == 2
    assert "--since/--until need a 'timestamp' column" in capsys.readouterr().err


def test_review_sample_log_seed_is_the_deprecated_name_of_random_state(logs):
    _, folder = logs
    with pytest.warns(DeprecationWarning, match=r"review_sample_log\(seed=\) is deprecated: pass random_state="):
        old = review_sample_log(HEDGED, folder / "one.parquet", engine="pandas", size=20, seed=3)
    new = review_sample_log(HEDGED, folder / "one.parquet", engine="pandas", size=20, random_state=3)
    pd.testing.assert_frame_equal(old, new)
