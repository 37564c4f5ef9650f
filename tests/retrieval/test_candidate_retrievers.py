"""Re-scoring a user's own candidates: dense, BM25 over the pool, the run, and the score table they feed."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from conftest import write
from rank_bm25 import BM25Okapi

from ragcal.importers.candidates import CandidateFileError, read_candidates_jsonl
from ragcal.importers.trec import read_trec_candidates
from ragcal.candidate_scoring import left_out_signals, score_candidates
from ragcal.chunking import page_of
from ragcal.queries import load_queries
from ragcal.retrieval import retrieve_with, tokenize
from ragcal.retrieval.candidates import candidate_pool, candidate_retrievers, passage_text
from ragcal.retrieval.index import IndexOptions, build_index
from ragcal.scoring import score_table
from ragcal.signals import SIGNALS

P1 = {"id": "p1", "title": "Cats", "text": "Cats purr when they are content and cats sleep a lot."}
P2 = {"id": "p2", "title": "Dogs", "text": "Dogs bark at strangers and dogs fetch sticks."}
P3 = {"id": "p3", "title": "", "text": "The Eiffel Tower stands in Paris, and cats nap near it."}
QUESTIONS = [
    {
        "id": "q1",
        "query": "Why do cats purr?",
        "answerable": True,
        "passages": [{**P1, "score": 12.5}, {**P2, "score": 10.0}],
    },
    {"id": "q2", "query": "Where is the Eiffel Tower?", "answerable": True, "passages": [{**P3, "score": 3.0}]},
    {
        "id": "q3",
        "query": "Who won the 1950 final?",
        "answerable": False,
        "slice": "unrelated",
        "passages": [{**P2, "score": 0.4}, {**P3, "score": 0.4}, {**P1, "score": 0.1}],
    },
]


def candidates_file(folder, questions=QUESTIONS, name="candidates.jsonl"):
    return write(folder / name, "".join(json.dumps(question) + "\n" for question in questions))


@pytest.fixture(scope="module")
def candidates(tmp_path_factory):
    return read_candidates_jsonl(candidates_file(tmp_path_factory.mktemp("candidates")))


@pytest.fixture(scope="module")
def scored(candidates, embedder):
    return score_candidates(candidates, embedder=embedder)


def test_the_run_signals_are_the_systems_own_scores(scored):
    table = scored.table.set_index("id")
    assert table.loc["q1", "run_top1"] == 12.5 and table.loc["q1", "run_gap"] == 12.5 - 10.0
    assert math.isnan(table.loc["q2", "run_gap"])  # one candidate: no second score
    assert table.loc["q3", "run_top10_mean"] == pytest.approx((0.4 + 0.4 + 0.1) / 3)
    assert table.loc["q3", "run_top10_std"] == pytest.approx(np.std([0.4, 0.4, 0.1]))
    # Minus the least-squares slope of (1, 0.4), (2, 0.4), (3, 0.1): slope = -0.15.
    assert table.loc["q3", "run_top10_drop"] == pytest.approx(0.15)
    assert [result.chunk_ids for result in scored.retrieved["run"]][2] == ("p2.md#0", "p3.md#0", "p1.md#0")


def test_bm25_scores_the_candidates_with_the_pool_as_the_collection(scored):
    """rank_bm25's BM25Okapi over the three passages of the pool, scored on each question's own candidates."""
    texts = [passage_text(type("P", (), passage)) for passage in (P1, P2, P3)]
    for variant in ("raw", "stopwords"):
        reference = BM25Okapi([tokenize(text, variant=variant) for text in texts])
        for position, question in enumerate(QUESTIONS):
            tokens = tokenize(question["query"], variant=variant)
            every = dict(zip(("p1", "p2", "p3"), reference.get_scores(tokens)))
            matched = [
                p["id"]
                for p in question["passages"]
                if set(tokens) & set(tokenize(passage_text(type("P", (), p)), variant=variant))
            ]
            expected = sorted(((every[p], p) for p in matched), key=lambda pair: -pair[0])
            result = scored.retrieved[f"bm25_{variant}"][position]
            assert [page_of(chunk) for chunk in result.chunk_ids] == [f"{p}.md" for _, p in expected]
            np.testing.assert_allclose(result.scores, [score for score, _ in expected], rtol=1e-12)
    table = scored.table.set_index("id")
    q1 = BM25Okapi([tokenize(text) for text in texts]).get_scores(tokenize("Why do cats purr?"))
    assert table.loc["q1", "bm25_top1_raw"] == pytest.approx(max(q1[0], q1[1]), rel=1e-12)  # p3 is not q1's
    # "Who won the 1950 final?": only "the" occurs in q3's candidates; without stop words nothing matches.
    assert table.loc["q3", "bm25_empty_raw"] == 0.0 and table.loc["q3", "bm25_top1_raw"] > 0
    assert table.loc["q3", "bm25_empty_stopwords"] == 1.0 and table.loc["q3", "bm25_top1_stopwords"] == 0.0


def test_dense_top1_is_the_cosine_of_the_query_and_its_best_candidate(scored, embedder):
    texts = {passage["id"]: passage_text(type("P", (), passage)) for passage in (P1, P2, P3)}
    table = scored.table.set_index("id")
    for question in QUESTIONS:
        query = embedder.encode([question["query"]])[0].astype(np.float64)
        cosines = sorted(
            (float(embedder.encode([texts[p["id"]]])[0].astype(np.float64) @ query) for p in question["passages"]),
            reverse=True,
        )
        assert table.loc[question["id"], "dense_top1"] == pytest.approx(cosines[0], abs=1e-6)
        if len(cosines) > 1:
            assert table.loc[question["id"], "dense_gap"] == pytest.approx(cosines[0] - cosines[1], abs=1e-6)


def test_every_signal_the_candidates_can_feed_is_computed_and_the_rest_said_why(scored):
    computed = list(scored.table.columns[4:])
    assert set(computed) | set(scored.left_out) == set(SIGNALS) and not set(computed) & set(scored.left_out)
    # Without a reranker and without a judge: their signals, each with its reason.
    needs = {name: signal.retrievers[0] for name, signal in SIGNALS.items() if signal.retrievers[0] in ("rerank", "judge")}
    assert set(scored.left_out) == set(needs)
    for name, reason in scored.left_out.items():
        assert ("reranker" if needs[name] == "rerank" else "judge") in reason, (name, reason)
    assert not scored.table[["dense_centroid_cosine", "bm25_norm_raw", "dense_perturbation_jaccard"]].isna().any().any()
    assert scored.config["n_pool_passages"] == 3 and scored.config["candidate_depth"] == 3
    assert scored.config["model_fingerprint"] and scored.config["signals_left_out"] == scored.left_out


def test_without_the_systems_scores_the_run_signals_are_left_out(tmp_path, embedder):
    unscored = [
        {**q, "passages": [{k: v for k, v in p.items() if k != "score"} for p in q["passages"]]} for q in QUESTIONS
    ]
    result = score_candidates(read_candidates_jsonl(candidates_file(tmp_path, unscored)), embedder=embedder)
    assert not any(column.startswith("run_") for column in result.table.columns)
    assert "do not carry" in result.left_out["run_top1"] and "run" not in result.retrieved
    assert left_out_signals(("dense",))["rrf_top1"] == (
        "needs the dense and bm25_stopwords lists fused, and one of them was left out"
    )
    with pytest.raises(ValueError, match=r"signal 'run_top1' cannot be computed from these candidates: it needs the "):
        score_candidates(
            read_candidates_jsonl(candidates_file(tmp_path, unscored)), embedder=embedder, signals=["run_top1"]
        )


def test_the_retriever_protocol_gives_the_same_table(candidates, scored, embedder):
    queries = scored.table[["id", "query", "answerable", "slice"]]
    retrieved = retrieve_with(candidate_retrievers(candidates, embedder=embedder), queries["query"], k=100)
    pd.testing.assert_frame_equal(score_table(queries, retrieved), scored.table)
    # By text, in another order: each query finds its own question's candidates.
    dense = candidate_retrievers(candidates, embedder=embedder)["dense"]
    reordered = dense.search(["Who won the 1950 final?", "Why do cats purr?"], k=2)
    assert [len(result) for result in reordered] == [2, 2]
    assert reordered[0].scores[0] == pytest.approx(scored.table.set_index("id").loc["q3", "dense_top1"], abs=1e-7)
    with pytest.raises(ValueError, match=r"'What is this\?' is not a question of the candidate set"):
        dense.search(["What is this?"], k=2)


def test_a_shared_question_text_with_other_candidates_is_ambiguous_by_text(tmp_path, embedder):
    twins = [*QUESTIONS, {**QUESTIONS[1], "id": "q4", "passages": [P1]}]
    candidates = read_candidates_jsonl(candidates_file(tmp_path, twins))
    dense = candidate_retrievers(candidates, embedder=embedder)["dense"]
    with pytest.raises(ValueError, match=r"2 questions of the candidate set .* share the text 'Where is the Eiffel"):
        dense.search(["Where is the Eiffel Tower?"], k=5)
    table = score_candidates(candidates, embedder=embedder).table.set_index("id")  # by position: both scored
    assert table.loc["q2", "dense_top1"] != table.loc["q4", "dense_top1"]


def test_bad_candidate_sets_are_refused(tmp_path, embedder):
    rising = [{**QUESTIONS[0], "passages": [{**P1, "score": 0.1}, {**P2, "score": 0.9}]}]
    with pytest.raises(CandidateFileError, match=r"rising.jsonl, question 'q1': its scores increase down the ranking"):
        candidate_pool(read_candidates_jsonl(candidates_file(tmp_path, rising, "rising.jsonl")))
    empty = [{**QUESTIONS[0], "passages": []}]
    with pytest.raises(ValueError, match=r"empty.jsonl: no question has a candidate passage"):
        score_candidates(read_candidates_jsonl(candidates_file(tmp_path, empty, "empty.jsonl")), embedder=embedder)
    unlabeled = [{k: v for k, v in QUESTIONS[0].items() if k != "answerable"}]
    path = candidates_file(tmp_path, unlabeled, "unlabeled.jsonl")
    with pytest.raises(ValueError, match=r"unlabeled.jsonl: 1 question\(s\) carry no 'answerable' label: 'q1'"):
        score_candidates(read_candidates_jsonl(path, require_labels=False), embedder=embedder)


PAGES = {
    "cats.md": "# Cats\n\nCats purr when content and sleep for most of the day.\n",
    "dogs.md": "# Dogs\n\nDogs bark at strangers and love to fetch sticks in the park.\n",
    "paris.md": "# Paris\n\nThe Eiffel Tower is a wrought-iron lattice tower in Paris, France.\n",
    "rust.md": "# Rust\n\nThe borrow checker enforces ownership rules at compile time.\n",
    "tea.md": "# Tea\n\nGreen tea is steeped at a lower temperature than black tea.\n",
}
CORPUS_QUERIES = """id,query,answerable,slice,gold
c1,Why do cats purr?,true,answerable,cats.md
c2,What does the borrow checker do?,true,answerable,rust.md
c3,How hot should water be for green tea?,true,answerable,tea.md
c4,Who won the 1950 world cup final?,false,unrelated,
"""


def test_ragcals_own_dense_run_fed_back_gives_the_same_top_scores(tmp_path, embedder):
    """An index's dense top 3, written as a TREC run plus passages, scores back to the same dense_top1 and dense_gap."""
    for page, text in PAGES.items():
        write(tmp_path / "corpus" / page, text)
    index = build_index(tmp_path / "corpus", embedder=embedder, options=IndexOptions(persist=False))
    assert len(index.chunks) == len(PAGES)  # one chunk per page
    queries = load_queries(write(tmp_path / "queries.csv", CORPUS_QUERIES), corpus_paths=index.doc_paths)
    retrieved = index.retrieve(queries["query"], depth=3)
    # The exported run names pages (one chunk each), so the query file's gold pages are the passages' ids.
    lines = [
        f"{query_id} Q0 {page_of(chunk)} {rank} {score!r} ragcal"
        for query_id, result in zip(queries["id"], retrieved["dense"])
        for rank, (chunk, score) in enumerate(zip(result.chunk_ids, result.scores.tolist()), start=1)
    ]
    write(tmp_path / "dense.trec", "\n".join(lines) + "\n")
    passages = [{"_id": chunk.doc_path, "title": "", "text": chunk.text} for chunk in index.chunks]
    write(tmp_path / "passages.jsonl", "".join(json.dumps(passage) + "\n" for passage in passages))
    candidates = read_trec_candidates(
        tmp_path / "dense.trec", tmp_path / "passages.jsonl", queries=tmp_path / "queries.csv"
    )
    fed_back = score_candidates(candidates, embedder=embedder).table
    own = score_table(queries, retrieved)
    for signal in ("dense_top1", "dense_gap", "dense_top2"):
        np.testing.assert_allclose(fed_back[signal], own[signal], atol=1e-6, rtol=0)
    np.testing.assert_allclose(fed_back["run_top1"], own["dense_top1"], atol=1e-12, rtol=0)  # the run's own scores
