"""The bundled labeled query set: structure, slice counts and the near-domain keyword check."""

import pandas as pd
import pytest

from ragcal.chunking import chunk_by_headings
from ragcal.corpus import Document, load_corpus
from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE, FASTAPI_QUERIES
from ragcal.study.labeled_sets import keyword_check
from ragcal.queries import load_queries


@pytest.fixture(scope="module")
def documents():
    return load_corpus(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE)


@pytest.fixture(scope="module")
def chunks(documents):
    return chunk_by_headings(documents)


@pytest.fixture(scope="module")
def queries(documents):
    # load_queries checks unique ids, true/false labels and that every gold page exists.
    return load_queries(FASTAPI_QUERIES, corpus_paths={document.path for document in documents})


def test_slice_counts(queries):
    counts = queries["slice"].value_counts()
    assert counts["answerable"] >= 80
    assert counts["near-domain"] >= 40
    assert counts["unrelated"] >= 40
    assert set(counts.index) == {"answerable", "near-domain", "unrelated"}
    assert (queries["answerable"] == (queries["slice"] == "answerable")).all()
    assert queries.loc[queries["answerable"], "gold"].map(len).gt(0).all()


def test_published_examples_are_included(queries):
    texts = set(queries["query"])
    assert "How do I set a cookie on the response?" in texts
    assert "How do I expose Prometheus metrics from my service?" in texts


def test_answerable_gold_spreads_over_sections(queries):
    sections = {path.split("/")[0] if "/" in path else "top" for gold in queries["gold"] for path in gold}
    assert {"tutorial", "advanced", "how-to", "deployment", "reference"} <= sections


def test_queries_are_unique_and_not_headings(queries, chunks):
    assert queries["query"].str.lower().is_unique
    headings = {title.lower() for chunk in chunks for title in chunk.heading_path}
    assert not set(queries["query"].str.lower().str.rstrip("?")) & headings


def test_near_domain_keyword_check_still_holds(queries, documents, chunks):
    near = queries[queries["slice"] == "near-domain"]
    assert near["keywords"].str.strip().ne("").all()
    for row in near.itertuples():
        check = keyword_check(documents, row.keywords.split(";"), chunks=chunks)
        assert not check.covered, (
            f"{row.id}: the corpus covers {row.keywords!r}: {check.heading_hits or check.mentions}"
        )
        assert check.summary == row.keyword_check, f"{row.id}: recorded check {row.keyword_check!r} is stale"


def test_a_page_on_a_near_domain_topic_fails_the_check(documents, chunks):
    page = Document(
        path="advanced/rate-limiting.md",
        title="Rate Limiting",
        text="# Rate Limiting\n\nUse a middleware to rate limit each client IP.\n",
    )
    assert not keyword_check(documents, ["rate limit", "throttl"], chunks=chunks).covered
    extended = documents + [page]
    assert keyword_check(extended, ["rate limit", "throttl"]).covered
    # Many mentions on one page also count as coverage, even without a heading.
    chatty = Document(path="blog.md", title="Blog", text="# Blog\n\n" + "We added rate limiting. " * 5)
    assert keyword_check(documents + [chatty], ["rate limit"], chunks=chunks).covered


def test_recorded_columns_are_present():
    frame = pd.read_csv(FASTAPI_QUERIES, dtype=str, keep_default_na=False)
    assert list(frame.columns) == ["id", "query", "answerable", "slice", "gold", "keywords", "keyword_check", "note"]


def test_rust_book_labeled_set():
    """The second corpus's set: counts, labels, gold pages, and its near-domain keyword check."""
    from ragcal.datasets import RUST_BOOK_CORPUS, RUST_BOOK_EXCLUDE, RUST_BOOK_QUERIES

    documents = load_corpus(RUST_BOOK_CORPUS, exclude=RUST_BOOK_EXCLUDE)
    chunks = chunk_by_headings(documents)
    queries = load_queries(RUST_BOOK_QUERIES, corpus_paths={document.path for document in documents})
    counts = queries["slice"].value_counts()
    assert counts["answerable"] >= 100 and counts["near-domain"] >= 40 and counts["unrelated"] >= 40
    assert (queries["answerable"] == (queries["slice"] == "answerable")).all()
    assert queries["query"].str.lower().is_unique
    headings = {title.lower() for chunk in chunks for title in chunk.heading_path}
    assert not set(queries["query"].str.lower().str.rstrip("?")) & headings
    for row in queries[queries["slice"] == "near-domain"].itertuples():
        check = keyword_check(documents, row.keywords.split(";"), chunks=chunks)
        assert not check.covered, f"{row.id}: the book covers {row.keywords!r}"
        assert check.summary == row.keyword_check, f"{row.id}: recorded check {row.keyword_check!r} is stale"
