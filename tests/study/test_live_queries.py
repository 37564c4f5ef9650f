"""The FastAPI live-log questions (data/queries/fastapi-live.csv): format, novelty, gold pages, keyword check."""

import re

import pandas as pd
import pytest

from ragcal.chunking import chunk_by_headings
from ragcal.corpus import load_corpus
from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE, FASTAPI_LIVE_QUERIES, FASTAPI_QUERIES, RUST_BOOK_QUERIES
from ragcal.study.labeled_sets import keyword_check
from ragcal.queries import load_queries

#: What each answerable question's gold page must say for the label to hold (read off the page, includes expanded).
EVIDENCE = {
    "la01": ("advanced/testing-events.md", r"with TestClient\(app\)"),
    "la02": ("tutorial/frontend.md", r'fallback="index\.html"'),
    "la03": ("tutorial/path-params.md", r"/users/me` is declared before the one for `/users/\{user_id\}"),
    "la04": ("tutorial/query-params-str-validations.md", r"q=foo&q=bar"),
    "la05": ("advanced/middleware.md", r"app\.add_middleware\(HTTPSRedirectMiddleware\)"),
    "la06": ("advanced/settings.md", r"@lru_cache"),
    "la07": ("advanced/websockets.md", r"except WebSocketDisconnect"),
    "la08": ("tutorial/handling-errors.md", r"@app\.exception_handler\(UnicornException\)"),
    "la09": ("tutorial/extra-models.md", r"defined in OpenAPI with `anyOf`"),
    "la10": ("editor-support.md", r"Path Operation Explorer"),
    "la11": ("project-generation.md", r"PostgreSQL.*?React.*?Docker Compose"),
    "la12": ("tutorial/path-params.md", r"\{file_path:path\}"),
}


@pytest.fixture(scope="module")
def documents():
    return load_corpus(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE)


@pytest.fixture(scope="module")
def chunks(documents):
    return chunk_by_headings(documents)


@pytest.fixture(scope="module")
def live(documents):
    # load_queries checks unique ids, true/false labels and that every gold page exists.
    return load_queries(FASTAPI_LIVE_QUERIES, corpus_paths={document.path for document in documents})


def test_format_ids_and_counts(live):
    frame = pd.read_csv(FASTAPI_LIVE_QUERIES, dtype=str, keep_default_na=False)
    assert list(frame.columns) == ["id", "query", "answerable", "slice", "gold", "keywords", "keyword_check", "note"]
    counts = live["slice"].value_counts().to_dict()
    assert set(counts) == {"answerable", "near-domain"}
    assert counts["near-domain"] >= 30 and counts["answerable"] >= 10
    assert (live["answerable"] == (live["slice"] == "answerable")).all()
    near = live["slice"] == "near-domain"
    assert live.loc[near, "id"].str.fullmatch(r"l\d{2}").all()
    assert live.loc[~near, "id"].str.fullmatch(r"la\d{2}").all()
    assert live.loc[~near, "gold"].map(len).gt(0).all() and live.loc[near, "gold"].map(len).eq(0).all()
    assert frame.loc[~near.to_numpy(), "keywords"].eq("").all()


def test_questions_are_new_and_not_headings(live, chunks):
    texts = live["query"].str.lower()
    assert texts.is_unique
    seen = pd.concat(
        [pd.read_csv(path, dtype=str, keep_default_na=False)["query"] for path in (FASTAPI_QUERIES, RUST_BOOK_QUERIES)]
    )
    assert not set(texts) & set(seen.str.lower())
    headings = {title.lower() for chunk in chunks for title in chunk.heading_path}
    assert not set(texts.str.rstrip("?")) & headings


def test_every_answerable_question_is_answered_on_its_gold_page(live, documents):
    pages = {document.path: document.text for document in documents}
    answerable = live[live["answerable"]]
    assert set(answerable["id"]) == set(EVIDENCE)
    for row in answerable.itertuples():
        page, evidence = EVIDENCE[row.id]
        assert page in row.gold, f"{row.id}: {page} is not among its gold pages {row.gold}"
        assert re.search(evidence, pages[page], flags=re.S), f"{row.id}: {page} no longer says {evidence!r}"


def test_near_domain_keyword_check_still_holds(live, documents, chunks):
    near = live[live["slice"] == "near-domain"]
    assert near["keywords"].str.strip().ne("").all()
    for row in near.itertuples():
        check = keyword_check(documents, row.keywords.split(";"), chunks=chunks)
        assert not check.covered, (
            f"{row.id}: the corpus covers {row.keywords!r}: {check.heading_hits or check.mentions}"
        )
        assert check.summary == row.keyword_check, f"{row.id}: recorded check {row.keyword_check!r} is stale"


def test_no_question_paraphrases_the_calibration_set(live):
    from ragcal.embedding import Embedder

    calibration = pd.read_csv(FASTAPI_QUERIES, dtype=str, keep_default_na=False)["query"].tolist()
    # A near copy of a01 ("How do I set a cookie on the response?") shows that the bar catches a paraphrase.
    paraphrase = "How do I set a cookie in the response?"
    embedder = Embedder()
    vectors = embedder.encode(live["query"].tolist() + [paraphrase])
    similarity = vectors @ embedder.encode(calibration).T  # rows are L2-normalised: cosine similarity
    assert similarity[-1].max() > 0.9
    nearest = similarity[:-1].max(axis=1)
    assert nearest.max() < 0.9, f"{live['id'].iloc[nearest.argmax()]} is within cosine {nearest.max():.3f}"
