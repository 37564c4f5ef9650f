"""The golden sets (one per bundled corpus): fail when a model, chunking or tokenizer change moves the score scale.

To re-baseline on purpose: ``ragcal golden [--corpus rust-book] --write tests/golden/<corpus>_minilm.json``,
review the diff, run ``make reproduce`` and commit both (see the README).
"""

import copy
import json
from pathlib import Path

import pytest

from ragcal.datasets import BUNDLED, FASTAPI_QUERIES
from ragcal.embedding import Embedder
from ragcal.queries import load_queries
from ragcal.retrieval.index import chunk_corpus
from ragcal.runs import read_trec_run
from ragcal.study.golden import (
    GOLDEN_FILE,
    GOLDEN_IDS,
    candidate_golden_snapshot,
    compare_golden,
    golden_file,
    golden_snapshot,
)

RESULTS = Path(__file__).resolve().parents[2] / "results"


@pytest.fixture(scope="module", params=list(BUNDLED))
def corpus(request):
    return request.param


@pytest.fixture(scope="module")
def pinned(corpus):
    return json.loads(golden_file(corpus).read_text())


def candidate_snapshot(corpus: str, **options) -> dict:
    """:func:`candidate_golden_snapshot` of a bundled corpus, from its committed dense run."""
    spec = BUNDLED[corpus]
    _, chunks, chunking = chunk_corpus(spec.corpus, exclude=spec.exclude)
    run = read_trec_run(RESULTS / corpus / "runs" / "dense.run")
    return candidate_golden_snapshot(
        chunks, chunking, Embedder(), load_queries(spec.queries), run, ids=GOLDEN_IDS[corpus], **options
    )


@pytest.fixture(scope="module")
def current(corpus, request):
    if corpus == "fastapi":  # the whole index, which other tests need too
        index = request.getfixturevalue("fastapi_index")
        return golden_snapshot(index, load_queries(BUNDLED[corpus].queries, corpus_paths=index.doc_paths))
    # The Rust book's golden questions are searched over their committed top-10 chunks (about 170, a few seconds
    # cold) instead of the whole book (1,721 chunks, a minute of CI's cold cache that no other test needs). That
    # gives the whole book's snapshot while model and chunks are unchanged: see the next test, on FastAPI.
    return candidate_snapshot(corpus)


def test_searching_the_committed_candidates_gives_the_whole_index_snapshot(fastapi_index):
    whole = golden_snapshot(fastapi_index, load_queries(FASTAPI_QUERIES, corpus_paths=fastapi_index.doc_paths))
    candidates = candidate_snapshot("fastapi")
    # The same vectors, but faiss multiplies a 170-row and a 2,282-row matrix: BLAS may sum a dot product in another
    # order on another processor, so the scores (rounded to 6 decimals) are compared within 2e-6, not to the bit.
    assert {key: value for key, value in candidates.items() if key not in ("dense_top1", "threshold")} == {
        key: value for key, value in whole.items() if key not in ("dense_top1", "threshold")
    }
    assert candidates["dense_top1"] == pytest.approx(whole["dense_top1"], abs=2e-6)
    assert candidates["threshold"]["value"] == pytest.approx(whole["threshold"]["value"], abs=2e-6)
    # With a threshold's neighbours left out, the snapshot's keep@1.0 threshold is another one: they are needed.
    assert candidate_snapshot("fastapi", lowest=0)["threshold"] != whole["threshold"]
    assert candidate_snapshot("fastapi", lowest=0)["dense_top1"] == whole["dense_top1"]


def test_a_run_that_does_not_fit_the_corpus_is_refused(tmp_path):
    spec = BUNDLED["rust-book"]
    _, chunks, chunking = chunk_corpus(spec.corpus, exclude=spec.exclude)
    queries = load_queries(spec.queries)
    run = read_trec_run(RESULTS / "rust-book" / "runs" / "dense.run")
    moved = run.assign(docid=run["docid"].where(run["qid"] != "a001", "ch99-gone.md#0"))
    with pytest.raises(ValueError, match=r"chunks of the run are not in the corpus: \['ch99-gone.md#0'\]"):
        candidate_golden_snapshot(chunks, chunking, None, queries, moved)
    with pytest.raises(ValueError, match=r"the run has no results for \['a001'\]"):
        candidate_golden_snapshot(chunks, chunking, None, queries, run[run["qid"] != "a001"])


def test_scores_and_threshold_hold(current, pinned):
    problems = compare_golden(current, pinned)
    assert not problems, "score scale moved; re-baseline on purpose if intended:\n" + "\n".join(problems)


def test_the_pinned_setup_is_the_current_one(current, pinned):
    assert current["model_fingerprint"] == pinned["model_fingerprint"]
    assert current["chunking"] == pinned["chunking"]


def test_a_moved_scale_is_caught():
    pinned = json.loads(GOLDEN_FILE.read_text())
    shifted = copy.deepcopy(pinned)
    shifted["dense_top1"]["a01"] += 2 * pinned["tolerance"]
    shifted["threshold"]["value"] = pinned["threshold"]["band"][1] + 0.01
    problems = compare_golden(shifted, pinned)
    assert len(problems) == 2
    assert problems[0].startswith("dense_top1 of a01") and "outside the pinned band" in problems[1]
    within = copy.deepcopy(pinned)
    within["dense_top1"]["a01"] += pinned["tolerance"] / 2
    assert compare_golden(within, pinned) == []


@pytest.mark.parametrize("corpus", list(BUNDLED))
def test_the_second_models_golden_set_holds(corpus, tmp_path):
    # WordLlama embeds a whole bundled corpus in about a second, so its golden set is checked from scratch.
    from ragcal.embedding import load_embedder
    from ragcal.retrieval.index import build_index
    from ragcal.study.reproduce import SECOND_MODEL

    spec = BUNDLED[corpus]
    index = build_index(spec.corpus, exclude=spec.exclude, embedder=load_embedder(SECOND_MODEL, use_cache=False))
    queries = load_queries(spec.queries, corpus_paths=index.doc_paths)
    pinned = json.loads(golden_file(corpus, SECOND_MODEL).read_text())
    assert golden_file(corpus, SECOND_MODEL).name == f"{corpus}_wordllama.json"
    current = golden_snapshot(index, queries, ids=GOLDEN_IDS[corpus])
    assert (
        current["model_fingerprint"]
        == pinned["model_fingerprint"]
        != json.loads(golden_file(corpus).read_text())["model_fingerprint"]
    )
    assert not compare_golden(current, pinned)


def test_model_slugs():
    from ragcal.study.golden import model_slug

    assert model_slug("sentence-transformers/all-MiniLM-L6-v2") == "minilm"
    assert model_slug("wordllama:l2_supercat_256") == "wordllama"
    assert model_slug("wordllama:l2_supercat_256:64") == "wordllama-64"
    assert model_slug("/models/My Model") == "models-my-model"
