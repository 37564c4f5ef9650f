"""Review samples of a score log of any size: the design of :mod:`ragcal.monitoring.sample`, drawn in passes.

:func:`review_sample_log` draws the stratified review sample of
:func:`ragcal.monitoring.review_sample` (strata: decision x near/far by
distance to the bar; allocation by :func:`ragcal.monitoring.sample.allocate_strata`)
from a log on disk, read by any engine of :mod:`ragcal.logs.engines`, with
memory bounded by a batch of rows. It reads the log three times:

1. **Counts** (:func:`~ragcal.logs.engines.sum_batches`): per decision and
   distance group (a chain stage), the rows per *bucket* of the distance to the
   bar. A bucket is the distance's IEEE 754 bits shifted right by
   :data:`BUCKET_SHIFT` (for a non-negative double the bits are ordered as the
   values are): the exponent and the first 12 bits of the mantissa, so a bucket
   spans at most 1/4096 of its value, and no range has to be known beforehand.
   Non-finite distances (no score) are counted apart: they are far.
2. **The cut, exactly** (:func:`~ragcal.logs.engines.sum_batches`): the near
   stratum of a decision holds its ``c = max(1, ceil(near_fraction * n))``
   finite distances closest to the bar, ties with the last included. Pass 1
   tells which bucket holds the ``c``-th smallest distance; pass 2 counts the
   distinct distances inside that bucket only (about 1/4096 of an octave of the
   rows), which gives the ``c``-th smallest distance exactly, hence the near
   stratum's size, as :func:`ragcal.monitoring.review_sample` computes it.
3. **The draw** (:func:`~ragcal.logs.engines.collect_batches`): a seeded hash
   of each row's id picks rows without a shuffle. The key of a row is
   ``pandas.util.hash_pandas_object`` of its id (as text, stripped) with a
   16-character ``hash_key`` made from the seed; a stratum's sample is its
   rows with the smallest keys. Each batch returns its own smallest keys per
   stratum, and the smallest of those overall are the sample. A row's key
   depends on its id and the seed alone, so the sample is the same for every
   engine, batch size, file order and split of the log into files.

A log without an ``id`` column is keyed by its ``query`` text: repeated
queries share a key (and an id, ``live-<key in hex>``) and are drawn together.
"""

from __future__ import annotations

import hashlib
import math
from functools import partial

import numpy as np
import pandas as pd

from .._params import check_float, check_int
from .engines import choose_engine, collect_batches, sum_batches
from .sources import duckdb_connection, duckdb_view, parse_time, read_pandas

__all__ = ["BUCKET_SHIFT", "draw_keys", "duplicate_id", "review_sample_log"]

#: Pass 1 counts distances by ``bits >> BUCKET_SHIFT``: the exponent and 52 - 40 = 12 bits of the mantissa.
BUCKET_SHIFT = 40
#: Per-batch output of the draw, before the gate's signal columns, with their Spark SQL types.
DRAW_TYPES = {"id": "string", "query": "string", "decision": "string", "score": "double", "stratum": "string",
              "stage": "string", "bar_distance": "double", "draw_key": "long"}  # fmt: skip
#: Sort order of the draw: the key, then (for rows whose ids collide) enough to make the order total.
DRAW_ORDER = ["draw_key", "id", "bar_distance", "score", "query"]


def draw_keys(ids, seed: int) -> np.ndarray:
    """The seeded draw key (int64) of each id: ``hash_pandas_object`` of the id as stripped text.

    The same id and seed give the same key in any batch, on any engine; a
    stratum's sample is its rows with the smallest keys.
    """
    hash_key = hashlib.blake2b(str(int(seed)).encode(), digest_size=8).hexdigest()  # 16 characters
    text = pd.Series(ids, dtype=object).astype(str).str.strip().astype(object)
    hashed = pd.util.hash_pandas_object(text, index=False, hash_key=hash_key).to_numpy(dtype=np.uint64)
    return hashed.view(np.int64)


def _decided(batch: pd.DataFrame, gate):
    """``(decisions, action, group, distance)`` of a batch: the gate's decisions and each row's distance to its bar."""
    from ..monitoring.sample import bar_distances

    decisions = gate.decide_table(batch)
    distance, group = bar_distances(gate, batch, decisions)
    group = pd.Series(group, dtype=object).fillna("").astype(str).to_numpy(dtype=object)
    return decisions, decisions["action"].to_numpy(dtype=object), group, distance + 0.0  # -0.0 as 0.0


def _buckets(distance: np.ndarray) -> np.ndarray:
    """``bits >> BUCKET_SHIFT`` of each finite distance (ordered as the distances), -1 where not finite."""
    finite = np.isfinite(distance)
    bucket = np.full(distance.shape, -1, dtype=np.int64)
    bucket[finite] = distance[finite].view(np.int64) >> BUCKET_SHIFT
    return bucket


def _per_pair(values: dict, action: np.ndarray, group: np.ndarray, default) -> np.ndarray:
    """``values[(decision, group)]`` of each row, ``default`` for a pair not in ``values``."""
    result = np.full(len(action), default, dtype=np.asarray(default).dtype)
    for (decision, name), value in values.items():
        result[(action == decision) & (group == name)] = value
    return result


def _bucket_counts(batch: pd.DataFrame, gate) -> pd.DataFrame:
    """Pass 1 on one batch: rows per decision, group and distance bucket."""
    if batch.empty:
        return pd.DataFrame({"decision": [], "group": [], "bucket": [], "n": []})
    _, action, group, distance = _decided(batch, gate)
    frame = pd.DataFrame({"decision": action, "group": group, "bucket": _buckets(distance)})
    return frame.groupby(["decision", "group", "bucket"]).size().rename("n").reset_index()


def _cut_bucket_distances(batch: pd.DataFrame, gate, cut_buckets: dict) -> pd.DataFrame:
    """Pass 2 on one batch: rows per decision, group and distance, inside each (decision, group)'s cut bucket."""
    if batch.empty:
        return pd.DataFrame({"decision": [], "group": [], "distance": [], "n": []})
    _, action, group, distance = _decided(batch, gate)
    wanted = _per_pair(cut_buckets, action, group, -2)
    inside = _buckets(distance) == wanted
    frame = pd.DataFrame({"decision": action[inside], "group": group[inside], "distance": distance[inside]})
    return frame.groupby(["decision", "group", "distance"]).size().rename("n").reset_index()


def _smallest_keys(batch: pd.DataFrame, gate, cutoffs: dict, taken: dict, seed: int, has_id: bool) -> pd.DataFrame:
    """Pass 3 on one batch: per stratum, its ``taken[stratum]`` rows with the smallest draw keys."""
    columns = [*DRAW_TYPES, *gate.columns]
    if batch.empty:
        return pd.DataFrame({column: [] for column in columns})
    decisions, action, group, distance = _decided(batch, gate)
    cutoff = _per_pair(cutoffs, action, group, math.nan)
    near = np.isfinite(distance) & (distance <= cutoff)
    stratum = (pd.Series(action, dtype=object) + np.where(near, "/near", "/far")).to_numpy(dtype=object)
    keys = draw_keys(batch["id"] if has_id else batch["query"], seed)
    candidates = []
    for name, count in taken.items():
        members = np.flatnonzero(stratum == name)
        if len(members) > count:  # the count smallest keys, and any row tied with the last of them
            last = np.partition(keys[members], count - 1)[count - 1]
            members = members[keys[members] <= last]
        candidates.append(members)
    rows = np.sort(np.concatenate(candidates)) if candidates else np.array([], dtype=np.int64)
    kept_keys = keys[rows]
    if has_id:
        ids = batch["id"].iloc[rows].astype(str).str.strip().to_numpy(dtype=object)
    else:
        ids = np.array([f"live-{key:016x}" for key in kept_keys.view(np.uint64)], dtype=object)
    stage = decisions["stage"].to_numpy(dtype=object)[rows]
    frame = pd.DataFrame(
        {
            "id": ids,
            "query": batch["query"].iloc[rows].astype(str).to_numpy(dtype=object),
            "decision": action[rows],
            "score": decisions["score"].to_numpy(dtype=float)[rows],
            "stratum": stratum[rows],
            "stage": [None if pd.isna(value) else str(value) for value in stage],
            "bar_distance": distance[rows],
            "draw_key": kept_keys,
        }
    )
    for column in gate.columns:
        frame[column] = batch[column].to_numpy(dtype=float)[rows]
    return _keep_smallest(frame, taken)[columns]


def _keep_smallest(rows: pd.DataFrame, taken: dict) -> pd.DataFrame:
    """Per stratum, the ``taken[stratum]`` rows first in :data:`DRAW_ORDER`."""
    rows = rows[rows["stratum"].map(taken).fillna(0).to_numpy() > 0]
    rows = rows.sort_values(DRAW_ORDER, kind="stable")
    rank = rows.groupby("stratum").cumcount().to_numpy()
    return rows[rank < rows["stratum"].map(taken).to_numpy()].reset_index(drop=True)


def _log_columns(source) -> list:
    """The columns of the log at ``source`` (its schema, read by DuckDB without reading the rows)."""
    connection = duckdb_connection()
    try:
        return list(duckdb_view(connection, source, None, None))
    finally:
        connection.close()


def duplicate_id(source, *, engine: str = "auto", since=None, until=None):
    """An id (stripped text) that two rows of the log in the window share, or None.

    The pandas engine checks in memory and gives the first repeat in row order;
    DuckDB (by the ids' hashes, then the ids with a repeated hash) and Spark
    group the log inside the engine, out of core, and give one of them. On a
    very large log this is a costly pass of :func:`review_sample_log`, which
    ``check_ids=False`` skips.
    """
    engine = choose_engine(engine, source)
    since, until = parse_time(since, "since"), parse_time(until, "until")
    if engine == "pandas":
        ids = read_pandas(source, [], since, until)["id"].astype(str).str.strip()
        repeated = ids[ids.duplicated()]
        return None if repeated.empty else str(repeated.iloc[0])
    if engine == "duckdb":
        connection = duckdb_connection()
        try:
            duckdb_view(connection, source, since, until)
            return _duplicate_id_duckdb(connection)
        finally:
            connection.close()
    from .spark_counts import quoted_column, read_log, session_for, windowed

    spark, own_session = session_for(source, None)
    try:
        from pyspark.sql import functions

        log = windowed(read_log(spark, source), source, since, until)
        text = functions.trim(quoted_column("id").cast("string")).alias("id")
        found = log.select(text).groupBy("id").count().where("count > 1").orderBy("id").limit(1).collect()
    finally:
        if own_session:
            spark.stop()
    return found[0]["id"] if found else None


def _duplicate_id_duckdb(connection, page: int = 1_000):
    """The smallest repeated id among those whose hash is in the first repeated hashes, or None.

    Grouping a billion text ids runs out of DuckDB's memory limit; grouping
    their 64-bit hashes spills to disk. Repeated hashes are then checked on the
    ids themselves, ``page`` at a time (two ids can share a hash).
    """
    text = 'trim(CAST("id" AS VARCHAR))'
    last = None
    while True:
        above = "" if last is None else f"AND h > {last}"
        hashes = [row[0] for row in connection.execute(
            f"SELECT h FROM (SELECT hash({text}) AS h FROM score_log) GROUP BY h HAVING count(*) > 1 {above} "
            f"ORDER BY h LIMIT {int(page)}"
        ).fetchall()]  # fmt: skip
        if not hashes:
            return None
        found = connection.execute(
            f"SELECT {text} AS id FROM score_log WHERE hash({text}) IN (SELECT unnest(?::UBIGINT[])) "
            "GROUP BY 1 HAVING count(*) > 1 ORDER BY 1 LIMIT 1",
            [hashes],
        ).fetchall()
        if found:
            return found[0][0]
        if len(hashes) < page:
            return None
        last = hashes[-1]


def _cutoffs(buckets: pd.DataFrame, inside: pd.DataFrame | None, near_fraction: float):
    """Per (decision, group): the exact near cut-off distance (NaN without finite distances) and near size."""
    cutoffs, near_sizes, cut_buckets = {}, {}, {}
    finite = buckets[buckets["bucket"] >= 0]
    for (decision, group), block in finite.groupby(["decision", "group"], sort=True):
        block = block.sort_values("bucket")
        count = max(1, math.ceil(near_fraction * int(block["n"].sum())))
        cumulative = block["n"].cumsum().to_numpy()
        position = int(np.searchsorted(cumulative, count))  # the bucket holding the count-th smallest distance
        below = int(cumulative[position - 1]) if position else 0
        cut_buckets[(decision, group)] = int(block["bucket"].iloc[position])
        if inside is None:
            continue
        values = inside[(inside["decision"] == decision) & (inside["group"] == group)].sort_values("distance")
        within = values["n"].cumsum().to_numpy()
        at = int(np.searchsorted(within, count - below))
        cutoffs[(decision, group)] = float(values["distance"].iloc[at])
        near_sizes[(decision, group)] = below + int(within[at])
    return cut_buckets, cutoffs, near_sizes


def review_sample_log(gate, source, *, engine: str = "auto", since=None, until=None, size: int = 60,
                      near_share: float = 0.5, near_fraction: float = 0.25, min_per_stratum: int = 2,
                      random_state: int = 0, check_ids: bool = True, seed=None) -> pd.DataFrame:  # fmt: skip
    """Draw the stratified review sample of :func:`ragcal.monitoring.review_sample` from a log of any size.

    Parameters
    ----------
    gate : Gate
        Its :meth:`~ragcal.gates.Gate.decide_table` runs on every batch (on
        Spark, on the workers: it is pickled, so pass the gate as read from
        its file, not one bound to an index).
    source : str or Path
        The score log: a CSV, CSV.gz or Parquet file, a folder or a glob of
        Parquet files, with a ``query`` column, the gate's signal columns and
        ``id`` when it has one.
    engine : {"auto", "pandas", "duckdb", "spark"}, default="auto"
        See :func:`ragcal.logs.engines.choose_engine`. Every engine draws the same sample.
    since, until : str or datetime, optional
        Keep the rows whose ``timestamp`` is in ``[since, until)``.
    size, near_share, near_fraction, min_per_stratum
        The design, as for :func:`ragcal.monitoring.review_sample`.
    random_state : int, default=0
        Seeds the hash of the ids (see the module docstring), as
        ``random_state`` seeds :func:`ragcal.monitoring.review_sample`.
    check_ids : bool, default=True
        Refuse a log whose ids repeat (:func:`duplicate_id`, a pass of its
        own). Without the check, only the sample's own ids are checked.

    Returns
    -------
    DataFrame
        As :func:`ragcal.monitoring.review_sample` returns it, with the same
        strata and stratum sizes, except that rows are ordered by stratum and
        draw key, and ``log_row`` (a row number, which a folder of files does
        not have) is replaced by ``draw_key``, the row's seeded hash.

    Raises
    ------
    ValueError
        Naming the log: a missing ``query`` or signal column, no row in the
        window, a repeated id, bad parameters, or ``size`` smaller than the
        number of non-empty strata.
    """
    from ..monitoring.review_files import REVIEW_COLUMNS
    from ..monitoring.sample import allocate_strata, stratum_names

    name = "review_sample_log"
    size = check_int(size, "size", name, low=1)
    min_per_stratum = check_int(min_per_stratum, "min_per_stratum", name, low=1)
    near_share = check_float(near_share, "near_share", name, low=0, high=1, low_open=False, high_open=False)
    near_fraction = check_float(near_fraction, "near_fraction", name, low=0, high=1, high_open=False)
    if seed is not None:  # the name it had before it matched review_sample's
        import warnings

        warnings.warn("review_sample_log(seed=) is deprecated: pass random_state=", DeprecationWarning, stacklevel=2)
        random_state = seed
    seed = check_int(random_state, "random_state", name)
    engine = choose_engine(engine, source)
    present = _log_columns(source)
    missing = [column for column in ("query", *gate.columns) if column not in present]
    if missing:
        raise ValueError(f"{source}: missing column(s) {', '.join(map(repr, missing))}; have {', '.join(present)}")
    has_id = "id" in present
    signals = list(gate.columns)
    window = {"engine": engine, "since": since, "until": until}

    keys = ["decision", "group", "bucket"]
    types = {"bucket": "long"}
    buckets = sum_batches(source, signals, partial(_bucket_counts, gate=gate), keys, key_types=types, **window)
    if buckets.empty:
        bounds = f" in [{since or '-inf'}, {until or 'inf'})" if since is not None or until is not None else ""
        raise ValueError(f"{source}: no rows to sample{bounds}")
    if has_id and check_ids:
        repeated = duplicate_id(source, **window)
        if repeated is not None:
            raise ValueError(f"{source}, column 'id': duplicate id {repeated!r}")
    cut_buckets, _, _ = _cutoffs(buckets, None, near_fraction)
    inside = sum_batches(source, signals, partial(_cut_bucket_distances, gate=gate, cut_buckets=cut_buckets),
                         ["decision", "group", "distance"], key_types={"distance": "double"}, **window)  # fmt: skip
    _, cutoffs, near_sizes = _cutoffs(buckets, inside, near_fraction)

    rows_per_decision = buckets.groupby("decision")["n"].sum()
    near_per_decision = pd.Series(near_sizes, dtype=np.int64).groupby(level=0).sum()
    names = stratum_names()
    sizes = []
    for stratum in names:
        decision, band = stratum.split("/")
        near = int(near_per_decision.get(decision, 0))
        sizes.append(near if band == "near" else int(rows_per_decision.get(decision, 0)) - near)
    sizes = np.array(sizes, dtype=np.int64)
    drawn = allocate_strata(sizes, size=size, near_share=near_share, min_per_stratum=min_per_stratum, function=name)
    taken = {stratum: int(count) for stratum, count in zip(names, drawn) if count}

    function = partial(_smallest_keys, gate=gate, cutoffs=cutoffs, taken=taken, seed=seed, has_id=has_id)
    output_types = {**DRAW_TYPES, **dict.fromkeys(signals, "double")}
    chosen = collect_batches(source, signals, function, list(output_types), output_types=output_types,
                             reduce=partial(_keep_smallest, taken=taken), **window)  # fmt: skip
    chosen = chosen.astype({column: float for column in ("score", "bar_distance", *signals)})
    chosen["draw_key"] = chosen["draw_key"].astype(np.int64)
    got = chosen["stratum"].value_counts()
    short = [stratum for stratum, count in taken.items() if int(got.get(stratum, 0)) != count]
    if short:
        raise ValueError(f"{source}: stratum {short[0]!r} had {int(got.get(short[0], 0))} row(s) in the draw and "
                         f"{taken[short[0]]} in the counts; did the log change while it was read?")  # fmt: skip
    repeated = chosen["id"][chosen["id"].duplicated()]
    if not repeated.empty:
        raise ValueError(f"{source}, column 'id': duplicate id {repeated.iloc[0]!r} in the sample")

    order = {stratum: position for position, stratum in enumerate(names)}
    chosen = chosen.assign(position=chosen["stratum"].map(order)).sort_values(["position", "draw_key", "id"])
    size_of = dict(zip(names, sizes.tolist()))
    sample = chosen.assign(
        answerable="",
        slice="",
        gold="",
        stratum_size=[size_of[stratum] for stratum in chosen["stratum"]],
        stratum_sampled=[taken[stratum] for stratum in chosen["stratum"]],
    )
    head = [column for column in REVIEW_COLUMNS]
    return sample[[*head, "stage", "bar_distance", "draw_key", *signals]].reset_index(drop=True)
