import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from ragcal.retrieval import BM25Retriever, tokenize

TEXTS = [
    "How to set a cookie on the response object",
    "Use CORSMiddleware to allow cross origin requests",
    "Background tasks run after the response is sent",
    "Upload a file with UploadFile and File",
    "The response_model parameter filters the output",
]
IDS = [f"doc{n}.md#0" for n in range(len(TEXTS))]


@pytest.fixture(scope="module")
def raw():
    return BM25Retriever(IDS, TEXTS, variant="raw")


@pytest.fixture(scope="module")
def stopwords():
    return BM25Retriever(IDS, TEXTS, variant="stopwords")


def test_tokenizer():
    assert tokenize("How do I set a Cookie? /items/{item_id}") == [
        "how",
        "do",
        "i",
        "set",
        "a",
        "cookie",
        "items",
        "item_id",
    ]
    assert tokenize("How do I set a Cookie?", variant="stopwords") == ["set", "cookie"]
    with pytest.raises(ValueError, match="'variant' parameter"):
        tokenize("x", variant="porter")


def test_ranking_on_a_tiny_corpus(raw, stopwords):
    assert stopwords.search_one("set a cookie").chunk_ids[0] == "doc0.md#0"
    assert stopwords.search_one("cross origin CORS").chunk_ids[0] == "doc1.md#0"
    assert raw.search_one("UploadFile").chunk_ids == ("doc3.md#0",)
    assert stopwords.search_one("response_model").chunk_ids == ("doc4.md#0",)


def test_scores_match_rank_bm25(raw):
    query = "the response cookie"
    reference = BM25Okapi([tokenize(text) for text in TEXTS]).get_scores(tokenize(query))
    result = raw.search_one(query)
    for chunk_id, score in zip(result.chunk_ids, result.scores):
        assert score == pytest.approx(reference[IDS.index(chunk_id)])
    assert np.all(np.diff(result.scores) <= 0)
    # Only chunks that contain a query token are returned.
    assert set(result.chunk_ids) == {IDS[0], IDS[2], IDS[4]}


def test_nothing_matched_is_an_empty_result(raw, stopwords):
    assert raw.search_one("quantum entanglement").is_empty
    # Only stop words: raw matches, the stop-word variant does not.
    assert not raw.search_one("how do I").is_empty
    assert stopwords.search_one("how do I").is_empty
    assert stopwords.search_one("").is_empty


def test_ties_keep_corpus_order():
    retriever = BM25Retriever(["a#0", "b#0", "c#0"], ["same words", "other thing", "same words"])
    assert retriever.search_one("same").chunk_ids == ("a#0", "c#0")


def test_k_limits_results(raw):
    assert len(raw.search_one("the response", k=1)) == 1
