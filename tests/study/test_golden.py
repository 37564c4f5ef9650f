"""The golden sets (one per bundled corpus): fail when a model, chunking or tokenizer change moves the score scale.

To re-baseline on purpose: ``ragcal golden [--corpus rust-book] --write tests/golden/<corpus>_minilm.json``,
review the diff, run ``make reproduce`` and commit both (see the README).
"""

import copy
import json

import pytest

from ragcal.datasets import BUNDLED
from ragcal.queries import load_queries
from ragcal.study.golden import GOLDEN_FILE, GOLDEN_IDS, compare_golden, golden_file, golden_snapshot


@pytest.fixture(scope="module", params=list(BUNDLED))
def corpus(request):
    return request.param


@pytest.fixture(scope="module")
def pinned(corpus):
    return json.loads(golden_file(corpus).read_text())


@pytest.fixture(scope="module")
def current(corpus, request):
    # The Rust book is embedded whole once (about a minute cold): its keep@1.0 threshold needs every question.
    index = request.getfixturevalue("fastapi_index" if corpus == "fastapi" else "rust_book_index")
    queries = load_queries(BUNDLED[corpus].queries, corpus_paths=index.doc_paths)
    return golden_snapshot(index, queries, ids=GOLDEN_IDS[corpus])


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
