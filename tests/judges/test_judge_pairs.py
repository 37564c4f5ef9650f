"""judge_pairs on hand-made queries, retrieved lists and passages."""

import numpy as np
import pandas as pd
import pytest

from ragcal.judges import judge_pairs
from ragcal.judges.pairs import PAIR_COLUMNS
from ragcal.retrieval import RetrievalResult

# In corpus order: the first chunk of each page comes first.
TEXTS = {
    f"{page}#{n}": f"text of {page} chunk {n}"
    for page in ("cookies.md", "cors.md", "docker.md", "files.md", "tasks.md")
    for n in range(3)
}


def dense(*chunk_ids):
    return RetrievalResult("dense", tuple(chunk_ids), np.linspace(0.9, 0.5, len(chunk_ids)))


def queries_table(rows):
    return pd.DataFrame(rows, columns=["id", "query", "answerable", "gold"])


def as_tuples(pairs):
    return list(pairs[["id", "chunk_id", "label", "rank"]].itertuples(index=False, name=None))


def test_positives_are_the_first_gold_passage_and_negatives_the_first_non_gold_ones():
    queries = queries_table([("q1", "how do I set a cookie?", True, ("cookies.md",))])
    retrieved = [dense("cors.md#0", "cookies.md#2", "docker.md#1", "cookies.md#0", "files.md#0")]
    pairs = judge_pairs(queries, retrieved, TEXTS)
    assert tuple(pairs.columns) == PAIR_COLUMNS
    assert as_tuples(pairs) == [("q1", "cors.md#0", 0, 1), ("q1", "cookies.md#2", 1, 2), ("q1", "docker.md#1", 0, 3)]
    assert pairs["passage"].tolist() == [TEXTS["cors.md#0"], TEXTS["cookies.md#2"], TEXTS["docker.md#1"]]
    assert set(pairs["query"]) == {"how do I set a cookie?"}
    assert pairs["label"].dtype == np.int64 and pairs["rank"].dtype == np.int64
    more = judge_pairs(queries, retrieved, TEXTS, positives_per_question=2, negatives_per_question=3)
    assert as_tuples(more) == [
        ("q1", "cors.md#0", 0, 1),
        ("q1", "cookies.md#2", 1, 2),
        ("q1", "docker.md#1", 0, 3),
        ("q1", "cookies.md#0", 1, 4),
        ("q1", "files.md#0", 0, 5),
    ]


def test_a_gold_page_not_retrieved_falls_back_to_its_first_chunk_in_the_corpus_with_rank_0():
    queries = queries_table([("q1", "what is CORS?", True, ("cors.md",))])
    pairs = judge_pairs(queries, [dense("docker.md#2", "tasks.md#1", "files.md#0")], TEXTS)
    assert as_tuples(pairs) == [("q1", "cors.md#0", 1, 0), ("q1", "docker.md#2", 0, 1), ("q1", "tasks.md#1", 0, 2)]
    assert pairs["passage"].iloc[0] == TEXTS["cors.md#0"]
    # Two gold pages, neither retrieved: the first page in sorted order, then the next when two are asked for.
    two = queries_table([("q2", "cookies or tasks?", True, ("tasks.md", "cookies.md"))])
    pairs = judge_pairs(two, [dense("docker.md#0")], TEXTS, positives_per_question=2)
    assert as_tuples(pairs) == [("q2", "cookies.md#0", 1, 0), ("q2", "tasks.md#0", 1, 0), ("q2", "docker.md#0", 0, 1)]
    # An answerable question with nothing retrieved still gets its positive.
    pairs = judge_pairs(queries, [dense()], TEXTS)
    assert as_tuples(pairs) == [("q1", "cors.md#0", 1, 0)]


def test_unanswerable_questions_give_only_negatives():
    queries = queries_table([("u1", "how do I deploy on the moon?", False, ())])
    pairs = judge_pairs(queries, [dense("docker.md#0", "cookies.md#1", "cors.md#2")], TEXTS, negatives_per_question=2)
    assert as_tuples(pairs) == [("u1", "docker.md#0", 0, 1), ("u1", "cookies.md#1", 0, 2)]
    assert judge_pairs(queries, [dense()], TEXTS).empty


def test_depth_is_respected():
    queries = queries_table(
        [("q1", "how do I set a cookie?", True, ("cookies.md",)), ("u1", "unanswerable?", False, ())]
    )
    retrieved = [dense("cors.md#0", "docker.md#0", "cookies.md#1"), dense("files.md#0", "tasks.md#0", "cors.md#1")]
    # cookies.md#1 sits at rank 3, beyond depth 2: the positive falls back to the corpus, and no negative comes from
    # rank 3 either.
    pairs = judge_pairs(queries, retrieved, TEXTS, depth=2, negatives_per_question=5)
    assert as_tuples(pairs) == [
        ("q1", "cookies.md#0", 1, 0),
        ("q1", "cors.md#0", 0, 1),
        ("q1", "docker.md#0", 0, 2),
        ("u1", "files.md#0", 0, 1),
        ("u1", "tasks.md#0", 0, 2),
    ]
    deeper = judge_pairs(queries, retrieved, TEXTS, depth=3, negatives_per_question=5)
    assert ("q1", "cookies.md#1", 1, 3) in as_tuples(deeper) and ("u1", "cors.md#1", 0, 3) in as_tuples(deeper)


def test_rows_follow_the_query_order_and_zero_per_question_gives_none():
    queries = queries_table(
        [("b", "second?", False, ()), ("a", "first?", True, ("tasks.md",)), ("c", "third?", False, ())]
    )
    retrieved = [dense("cors.md#0"), dense("tasks.md#2", "files.md#1"), dense("docker.md#0")]
    pairs = judge_pairs(queries, retrieved, TEXTS)
    assert pairs["id"].tolist() == ["b", "a", "a", "c"]
    assert pairs["label"].tolist() == [0, 1, 0, 0]
    assert judge_pairs(queries, retrieved, TEXTS, negatives_per_question=0)["label"].tolist() == [1]
    assert judge_pairs(queries, retrieved, TEXTS, positives_per_question=0)["label"].tolist() == [0, 0, 0]


def test_empty_input_gives_an_empty_table_with_the_columns():
    pairs = judge_pairs(queries_table([]), [], TEXTS)
    assert pairs.empty and tuple(pairs.columns) == PAIR_COLUMNS


def test_bad_input_raises():
    queries = queries_table([("q1", "what is CORS?", True, ("cors.md",))])
    with pytest.raises(ValueError, match="1 queries but 2 retrieved lists"):
        judge_pairs(queries, [dense("cors.md#0"), dense("cors.md#1")], TEXTS)
    with pytest.raises(ValueError, match="depth"):
        judge_pairs(queries, [dense("cors.md#0")], TEXTS, depth=0)
    with pytest.raises(ValueError, match="negatives_per_question"):
        judge_pairs(queries, [dense("cors.md#0")], TEXTS, negatives_per_question=-1)
