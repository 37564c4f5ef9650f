"""Signals over a whole batch: the committed score tables, batch against per query, and the edge cases."""

import csv
import io
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ragcal.datasets import FASTAPI_QUERIES
from ragcal.queries import load_queries
from ragcal.retrieval import RetrievalResult
from ragcal.retrieval.index import IndexOptions
from ragcal.scoring import score_table
from ragcal.signals import (
    SIGNALS,
    ResultBatch,
    compute_signals,
    compute_signals_batch,
    get_signal,
    register_batch_signal,
    register_signal,
    unregister_signal,
)
from ragcal.study.anchoring import tolerance_for

REPOSITORY = Path(__file__).resolve().parents[2]
#: Questions that reach the edge cases on the real index: no token at all, only stop words (BM25 without stop words
#: matches nothing), words the corpus lacks, repeated words, one very long question.
EDGE_QUESTIONS = [
    "",
    "the of and",
    "zqxjv wwkpq",
    "cookie cookie cookie response",
    "How do I " + " ".join(["set", "a", "cookie", "header", "token", "session", "and", "the", "response"] * 4),
]


def per_query(retrieved: dict, position: int) -> dict:
    return {name: results[position] for name, results in retrieved.items()}


def same_info(first: dict, second: dict) -> bool:
    """Equal keys and equal values, NaN equal to NaN."""
    return list(first) == list(second) and np.array_equal(list(first.values()), list(second.values()), equal_nan=True)


def assert_same_bits(batch_values: np.ndarray, one_by_one: list, name: str):
    one_by_one = np.array(one_by_one, dtype=np.float64)
    differ = np.flatnonzero(~((batch_values == one_by_one) | (np.isnan(batch_values) & np.isnan(one_by_one))))
    assert differ.size == 0, f"{name}: batch and per-query values differ at {differ[:5]}"


@pytest.fixture(scope="module")
def fastapi_labeled(fastapi_index):
    queries = load_queries(FASTAPI_QUERIES, corpus_paths=fastapi_index.doc_paths)
    return queries, fastapi_index.retrieve(queries["query"])


#: Signals computed from ranks and BM25 arithmetic alone: equal bits on any machine. The others read MiniLM's
#: float32 cosines, which another CPU's kernels move slightly (on the bundled set, by at most 3.1e-6 for the normalised
#: QPP predictors, measured against the table committed from another machine): they are compared within their
#: declared tolerance (ragcal.study.anchoring.TOLERANCES), the one `make reproduce` anchors with.
RANK_AND_BM25_SIGNALS = ("rrf_top1", "dense_bm25_page_overlap", "dense_top_page_bm25_rr", "dense_perturbation_jaccard")


def test_score_table_reproduces_the_committed_fastapi_table(fastapi_labeled):
    # ragcal reproduce wrote results/fastapi/scores.csv with write_score_table, i.e. table.to_csv(index=False): full
    # shortest-round-trip precision, so equal text means equal float64 values (NaN is an empty cell).
    queries, retrieved = fastapi_labeled
    committed = (REPOSITORY / "results" / "fastapi" / "scores.csv").read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(committed)))
    signals = [column for column in rows[0] if column not in ("id", "query", "answerable", "slice")]
    # Every signal but the reranker's, a user's own run's and a judge's (results an index without them does not give).
    assert set(signals) == {name for name in SIGNALS if not name.startswith(("rerank_", "run_", "judge_"))}
    table = score_table(queries, retrieved, signals=signals)
    assert list(table["id"]) == [row["id"] for row in rows]
    exact = [name for name in signals if name.startswith("bm25_") or name in RANK_AND_BM25_SIGNALS]
    assert len(exact) == 18
    for name in signals:
        expected = np.array([float(row[name]) if row[name] else math.nan for row in rows])
        if name in exact:
            assert_same_bits(table[name].to_numpy(), expected, f"{name} against results/fastapi/scores.csv")
        else:
            absolute, relative = tolerance_for(name)
            np.testing.assert_allclose(
                table[name], expected, rtol=relative, atol=absolute, equal_nan=True, err_msg=name
            )


def test_batch_and_per_query_paths_agree_bit_for_bit(fastapi_index, fastapi_labeled):
    queries, _ = fastapi_labeled
    texts = [*queries["query"], *EDGE_QUESTIONS]
    retrieved = fastapi_index.retrieve(texts)
    assert retrieved["bm25_stopwords"][len(queries) + 1].is_empty  # "the of and"
    assert retrieved["bm25_raw"][len(queries) + 2].is_empty  # words the corpus lacks
    columns = compute_signals_batch(retrieved)
    assert list(columns) == [name for name in SIGNALS if not name.startswith(("rerank_", "run_", "judge_"))]
    for name, values in columns.items():
        signal = get_signal(name)
        assert_same_bits(values, [signal(per_query(retrieved, p)) for p in range(len(texts))], name)
    # compute_signals (one query, every signal at once) is the same again.
    for position in (0, len(queries), len(queries) + 1, len(texts) - 1):
        one = compute_signals(per_query(retrieved, position))
        assert_same_bits(np.array(list(one.values())), [columns[name][position] for name in one], "compute_signals")
    # The edge questions' values follow the documented conventions.
    empty_stopwords = len(queries) + 1
    assert columns["bm25_top1_stopwords"][empty_stopwords] == 0.0 and columns["bm25_empty_stopwords"][empty_stopwords]
    assert columns["bm25_norm_stopwords"][empty_stopwords] != columns["bm25_norm_stopwords"][empty_stopwords]  # NaN
    assert columns["dense_bm25_page_overlap"][empty_stopwords] == 0.0
    assert columns["dense_top_page_bm25_rr"][empty_stopwords] == 0.0
    unknown = len(queries) + 2
    assert columns["bm25_coverage_corpus"][unknown] == 0.0 and columns["bm25_norm_raw"][unknown] == 0.0


def test_batch_signals_do_not_depend_on_the_batch(fastapi_labeled):
    # A query's value is the same alone, in the labeled set, and in a shuffled, repeated batch.
    queries, retrieved = fastapi_labeled
    order = np.random.default_rng(0).permutation(np.tile(np.arange(len(queries)), 2))
    shuffled = {name: [results[p] for p in order] for name, results in retrieved.items()}
    full, mixed = compute_signals_batch(retrieved), compute_signals_batch(shuffled)
    for name in full:
        assert_same_bits(mixed[name], full[name][order], name)


def test_diagnostics_of_a_restricted_view_come_from_its_retrievers(fastapi_slice, embedder, tmp_path):
    from ragcal.access import AccessPolicy
    from ragcal.retrieval.diagnostics import bm25_info, dense_info
    from ragcal.retrieval.index import build_index

    access_map = tmp_path / "access.csv"
    access_map.write_text("path_glob,level\nadvanced/response-cookies.md,internal\n")
    index = build_index(fastapi_slice, embedder=embedder,
        options=IndexOptions(access=AccessPolicy.from_options(access_map=access_map)))
    view = index.restrict(["public"])
    assert "advanced/response-cookies.md" not in {chunk.doc_path for chunk in view.chunks}
    texts = ["How do I set a cookie on the response?", "CORS middleware origins", "the of and", ""]
    through_view = index.retrieve(texts, allowed_levels=["public"])
    everything = index.retrieve(texts)
    vectors = view.dense.encode_queries(texts)
    for position, text in enumerate(texts):
        for name, retriever in view.bm25.items():
            result = through_view[name][position]
            assert same_info(result.info, bm25_info(retriever, text, result))
        alone = dense_info(view.dense, vectors[position])[0]  # a batch of one: BLAS may round the last bit apart
        np.testing.assert_allclose(
            list(through_view["dense"][position].info.values()), list(alone.values()), rtol=0, atol=1e-14
        )
    # The hidden page moves the full index's numbers, never the view's.
    assert through_view["bm25_raw"][0].info != everything["bm25_raw"][0].info
    table = score_table(
        pd.DataFrame({"id": list("abcd"), "query": texts, "answerable": True, "slice": "s"}), through_view
    )
    for name in table.columns[4:]:
        signal = get_signal(name)
        assert_same_bits(table[name].to_numpy(), [signal(per_query(through_view, p)) for p in range(4)], name)


# --------------------------------------------------------------------------- hand-made batches: the edge cases


def result(name, pages, scores, info=None):
    chunk_ids = tuple(f"{page}#{n}" for n, page in enumerate(pages))
    return RetrievalResult(name, chunk_ids, np.array(scores, float), info=info or {})


def hand_made_batch():
    """Five queries: a full list, fewer than ten hits, one hit, nothing, and NaN scores; some without ``info``."""
    dense_scores = [np.linspace(0.9, 0.3, 12), [0.8, 0.7, 0.4], [0.6], [], [0.7, np.nan, 0.2]]
    dense_pages = [["a.md", "b.md", "a.md", "c.md"] * 3, ["c.md", "a.md", "d.md"], ["b.md"], [], ["a.md"] * 3]
    dense_info = [{"centroid_cosine": 0.3, "page_knn_cosine": 0.5}, {}, {"centroid_cosine": -0.1}, {}, {}]
    lexical_pages = [["c.md", "d.md", "a.md"], ["z.md"] * 12 + ["c.md"], [], [], ["a.md"]]
    lexical_scores = [[9.0, 8.0, 7.0], list(np.linspace(12, 1, 13)), [], [], [3.0]]
    lexical_info = [{"max_score": 18.0, "coverage_top": 0.5, "coverage_corpus": 1.0}, {"max_score": 0.0}, {}, {}, {}]
    return {
        "dense": [result("dense", p, s, i) for p, s, i in zip(dense_pages, dense_scores, dense_info)],
        "bm25_raw": [result("bm25_raw", p, s, i) for p, s, i in zip(lexical_pages, lexical_scores, lexical_info)],
        "bm25_stopwords": [
            result("bm25_stopwords", p, s, i) for p, s, i in zip(lexical_pages, lexical_scores, lexical_info)
        ],
        "rrf": [result("rrf", p[:2], s[:2]) for p, s in zip(dense_pages, dense_scores)],
    }


def test_edge_cases_agree_between_batch_and_per_query():
    retrieved = hand_made_batch()
    columns = compute_signals_batch(retrieved)
    for name, values in columns.items():
        signal = get_signal(name)
        assert_same_bits(values, [signal(per_query(retrieved, p)) for p in range(5)], name)
    top = np.linspace(0.9, 0.3, 12)[:10]
    assert columns["dense_top10_mean"][0] == top.mean() and columns["dense_top10_std"][0] == top.std()
    assert columns["dense_top10_mean"][1] == np.mean([0.8, 0.7, 0.4])  # fewer than ten: the mean of what there is
    assert columns["dense_top10_mean"][2] == 0.6 and math.isnan(columns["dense_top10_drop"][2])  # one hit
    assert all(math.isnan(columns[name][3]) for name in ("dense_top1", "dense_top10_mean", "dense_bm25_page_overlap"))
    assert math.isnan(columns["dense_top10_mean"][4])  # a NaN score propagates
    # Empty info: NaN; info present: read; BM25 that matched nothing: 0 for the top score and the norm.
    assert columns["dense_centroid_cosine"][0] == 0.3 and math.isnan(columns["dense_centroid_cosine"][1])
    assert math.isnan(columns["dense_page_knn5"][2]) and columns["dense_centroid_cosine"][2] == -0.1
    assert columns["bm25_norm_raw"][0] == 9.0 / 18.0 and columns["bm25_norm_raw"][1] == 0.0
    assert math.isnan(columns["bm25_norm_raw"][2]) and math.isnan(columns["bm25_coverage_top10"][1])
    assert columns["bm25_top1_raw"][3] == 0.0 and columns["bm25_empty_raw"][3] == 1.0
    # Pages {a, b, c} and {c, d, a}: 2 of 4; the dense top page a.md is BM25's third page.
    assert columns["dense_bm25_page_overlap"][0] == 2 / 4 and columns["dense_top_page_bm25_rr"][0] == 1 / 3
    # The dense top page c.md is BM25's 13th chunk, after twelve chunks of one other page: the second page.
    assert columns["dense_top_page_bm25_rr"][1] == 1 / 2 and columns["dense_bm25_page_overlap"][1] == 0.0


def test_a_signal_registered_per_query_runs_query_by_query_in_the_batch():
    calls = []

    @register_signal("dense_top3_mean_batch_test", retrievers=("dense",))
    def dense_top3_mean(results):
        calls.append(1)
        return float(results["dense"].scores[:3].mean()) if len(results["dense"]) else float("nan")

    try:
        retrieved = hand_made_batch()
        frame = pd.DataFrame({"id": list("abcde"), "query": list("abcde"), "answerable": True, "slice": "s"})
        table = score_table(frame, retrieved)
        assert "dense_top3_mean_batch_test" in table.columns and len(calls) == 5
        expected = [dense_top3_mean(per_query(retrieved, p)) for p in range(5)]
        assert_same_bits(table["dense_top3_mean_batch_test"].to_numpy(), expected, "per-query signal")
        assert get_signal("dense_top3_mean_batch_test").batch is None
    finally:
        unregister_signal("dense_top3_mean_batch_test")


def test_register_batch_signal():
    @register_batch_signal("dense_top3_mean_vector_test", retrievers=("dense",))
    def dense_top3_mean(batch):
        """Mean of the three best cosines, NaN with fewer."""
        return batch.top_scores("dense", 3).mean(axis=1)

    try:
        signal = get_signal("dense_top3_mean_vector_test")
        assert (
            signal.batch is dense_top3_mean and signal.description == "Mean of the three best cosines, NaN with fewer."
        )
        assert signal.origin.endswith("test_register_batch_signal.<locals>.dense_top3_mean")
        retrieved = hand_made_batch()
        values = compute_signals_batch(retrieved, ["dense_top3_mean_vector_test"])["dense_top3_mean_vector_test"]
        assert values[1] == np.mean([0.8, 0.7, 0.4]) and math.isnan(values[2])
        # Its per-query form is the batch function on a batch of one.
        assert_same_bits(values, [signal(per_query(retrieved, p)) for p in range(5)], "batch signal")
        with pytest.raises(KeyError, match="needs retriever results"):
            signal.values(ResultBatch({"rrf": retrieved["rrf"]}))
    finally:
        unregister_signal("dense_top3_mean_vector_test")

    @register_batch_signal("wrong_shape_test", retrievers=("dense",))
    def wrong_shape(batch):
        return np.zeros(len(batch) + 1)

    try:
        with pytest.raises(ValueError, match="'wrong_shape_test' must return one value per query, shape \\(5,\\)"):
            compute_signals_batch(hand_made_batch(), ["wrong_shape_test"])
    finally:
        unregister_signal("wrong_shape_test")


def test_result_batch_arrays():
    retrieved = hand_made_batch()
    batch = ResultBatch(retrieved)
    assert len(batch) == 5 and batch.retrievers == ("dense", "bm25_raw", "bm25_stopwords", "rrf") and "rrf" in batch
    assert batch.lengths("dense").tolist() == [12, 3, 1, 0, 3]
    top = batch.top_scores("dense", 2)
    assert top.shape == (5, 2) and top[1].tolist() == [0.8, 0.7] and math.isnan(top[2, 1]) and np.isnan(top[3]).all()
    assert batch.top_scores("dense", 12).shape == (5, 12) and batch.top_scores("rrf", 3).shape == (5, 3)
    assert batch.scores("dense").shape == (5, 12) and batch.scores("dense", 2).shape == (5, 2)
    with pytest.raises(ValueError, match="read-only"):
        batch.scores("dense")[0, 0] = 1.0
    assert batch.info("bm25_raw", "max_score")[:2].tolist() == [18.0, 0.0] and np.isnan(batch.info("dense", "x")).all()
    dense, lexical = batch.pages("dense", 3), batch.pages("bm25_raw")
    assert dense.shape == (5, 3) and lexical.shape == (5, 13) and (dense[3] == -1).all()
    assert dense[0, 0] == dense[0, 2] == lexical[0, 2] and dense[0, 0] != dense[0, 1]  # a.md, shared codes
    assert (batch.pages_of("bm25_raw", [1, 0]) == lexical[[1, 0]]).all()
    assert batch.query(2)["dense"] is retrieved["dense"][2]
    with pytest.raises(ValueError, match="one result per query"):
        ResultBatch({"dense": retrieved["dense"], "rrf": retrieved["rrf"][:2]})


def test_score_table_needs_one_result_per_query():
    frame = pd.DataFrame({"id": list("abc"), "query": list("abc"), "answerable": True, "slice": "s"})
    with pytest.raises(ValueError, match="3 queries, but results per retriever"):
        score_table(frame, hand_made_batch())


def test_segment_sums_are_numpys_sum_of_each_segment():
    from ragcal.retrieval.diagnostics.bm25_terms import segment_sums

    rng = np.random.default_rng(7)
    counts = rng.integers(0, 40, size=500)
    counts[::7] = 0
    values = rng.standard_normal(counts.sum()) * 10.0 ** rng.uniform(-4, 4, counts.sum())
    starts = np.cumsum(counts) - counts
    expected = [values[start : start + count].sum() for start, count in zip(starts, counts)]
    assert_same_bits(segment_sums(values, counts), expected, "segment_sums")
    assert segment_sums(np.empty(0), np.zeros(3, int)).tolist() == [0.0, 0.0, 0.0]


def stripped(result: RetrievalResult) -> RetrievalResult:
    """The same ranked list without what its retriever stamped (positions, source ids, tokens)."""
    return RetrievalResult(result.retriever, result.chunk_ids, result.scores, info=result.info, view=result.view)


def test_retrievers_stamp_positions_and_tokens_that_match_their_lists(fastapi_index, fastapi_labeled):
    from ragcal.retrieval.bm25 import tokenize

    queries, retrieved = fastapi_labeled
    sources = {"dense": fastapi_index.dense, **fastapi_index.bm25}
    for name, retriever in sources.items():
        for query, result in zip(queries["query"], retrieved[name]):
            assert result.source_ids is retriever.chunk_ids
            assert [retriever.chunk_ids[p] for p in result.positions] == list(result.chunk_ids)
            expected = None if name == "dense" else tuple(tokenize(query, variant=retriever.variant))
            assert result.tokens == expected
    assert all(result.positions is None for result in retrieved["rrf"])
    with pytest.raises(ValueError, match="go together"):
        RetrievalResult("dense", ("a.md#0",), np.array([0.5]), positions=np.array([0]))
    with pytest.raises(ValueError, match="1 chunk ids but 2 positions"):
        RetrievalResult("dense", ("a.md#0",), np.array([0.5]), positions=np.array([0, 1]), source_ids=["a.md#0"])


def test_stamped_and_unstamped_results_give_the_same_diagnostics_and_signals(fastapi_index, fastapi_labeled):
    from ragcal.retrieval.diagnostics import bm25_diagnostics

    queries, retrieved = fastapi_labeled
    texts = list(queries["query"])
    bare = {name: [stripped(result) for result in results] for name, results in retrieved.items()}
    for name, retriever in fastapi_index.bm25.items():
        stamped, looked_up = (
            bm25_diagnostics(retriever, texts, retrieved[name]),
            bm25_diagnostics(retriever, texts, bare[name]),
        )
        for key in stamped:
            assert_same_bits(stamped[key], looked_up[key], f"{name}.{key}")
        # Positions that index another retriever's chunk list are not trusted: the ids are looked up instead.
        other = [
            RetrievalResult(
                r.retriever,
                r.chunk_ids,
                r.scores,
                view=r.view,
                positions=np.zeros(len(r), dtype=np.intp),
                source_ids=list(retriever.chunk_ids),
                tokens=("zzz",),
            )
            for r in retrieved[name]
        ]
        misled = bm25_diagnostics(retriever, texts, other)
        for key in stamped:
            assert_same_bits(misled[key], stamped[key], f"{name}.{key} with foreign positions")
    # Page codes from positions and from chunk ids agree; so do all signals, also in a batch that mixes the two.
    mixed = {
        name: [bare[name][p] if p % 2 else result for p, result in enumerate(results)]
        for name, results in retrieved.items()
    }
    with_positions, without = ResultBatch(retrieved), ResultBatch(bare)
    for name in ("dense", "bm25_raw", "bm25_stopwords"):
        for depth in (None, 3):
            first, second = with_positions.pages(name, depth), without.pages(name, depth)
            assert first.shape == second.shape
            pairs = set(zip(first.ravel().tolist(), second.ravel().tolist()))
            assert len(pairs) == len(set(first.ravel().tolist())) == len(set(second.ravel().tolist()))
    full, plain, both = compute_signals_batch(retrieved), compute_signals_batch(bare), compute_signals_batch(mixed)
    for name in full:
        assert_same_bits(plain[name], full[name], name)
        assert_same_bits(both[name], full[name], name)
