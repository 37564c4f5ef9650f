"""The Embedder protocol, load_embedder and WordLlama: a tiny embedder built here, the wheel's WordLlama files."""

import hashlib
import json
import logging
import shutil
import subprocess
import sys

import numpy as np
import pytest

from ragcal.cli import main
from ragcal.embedding import (
    DEFAULT_MODEL,
    WORDLLAMA_MODELS,
    Embedder,
    EmbedderProtocol,
    WordLlamaEmbedder,
    load_embedder,
)
from ragcal.embedding.minilm import processor_model
from ragcal.embedding.protocol import check_embedder, embedder_name
from ragcal.extras import MissingExtraError
from ragcal.gates import GateFileError, fit_threshold_gate, load_gate, save_gate
from ragcal.queries import load_queries
from ragcal.retrieval.index import build_index
from ragcal.score_tables import write_score_table
from ragcal.scoring import score_table

MINILM_FINGERPRINT = "sentence-transformers/all-MiniLM-L6-v2@53aa51172d14/max256"
WORDLLAMA_FINGERPRINT = "wordllama:l2_supercat_256@64b47a2dc493/dim256"
FILES = WORDLLAMA_MODELS["l2_supercat_256"]

QUERIES = """id,query,answerable,slice,gold
q1,How can I put a cookie in the response?,true,answerable,advanced/response-cookies.md
q2,How do I let a browser frontend on another domain call my API with CORS?,true,answerable,tutorial/cors.md
q3,How can I send an email in the background after returning a response?,true,answerable,tutorial/background-tasks.md
q4,How do I get the current user from the token?,true,answerable,tutorial/security/get-current-user.md
q5,How do I build a Docker image for my FastAPI app?,true,answerable,deployment/docker.md
q6,How do I upload a file?,true,answerable,tutorial/request-files.md
q7,How do I limit how many requests a client may send per minute?,false,near-domain,
q8,What is the best way to caramelise onions?,false,unrelated,
q9,How many players are on a cricket team?,false,unrelated,
q10,Which tulips flower earliest in spring?,false,unrelated,
"""


class HashBag:
    """A deterministic bag of hashed words: the least an embedder needs (a name, a fingerprint, encode)."""

    name = "hash-bag-64"
    fingerprint = "hash-bag-64@test/dim64"
    dimension = 64

    def encode(self, texts, *, show_progress_bar=None):
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            vectors[row, 0] = 0.25  # never the zero vector
            for word in str(text).lower().split():
                vectors[row, int(hashlib.sha256(word.encode()).hexdigest()[:8], 16) % self.dimension] += 1.0
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


class SavedHashBag(HashBag):
    """HashBag with what build_index needs to save the index (cache_dir, cache_key, use_cache); counts its texts."""

    def __init__(self, cache_dir, *, key="v1"):
        self.cache_dir = cache_dir
        self.cache_key = f"{self.fingerprint}/{key}"
        self.use_cache = True
        self.stats = {"cached": 0, "encoded": 0}

    def encode(self, texts, *, show_progress_bar=None):
        self.stats["encoded"] += len(texts)
        return super().encode(texts)


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def wordllama():
    return WordLlamaEmbedder(use_cache=False)


@pytest.fixture(scope="module")
def queries(fastapi_slice):
    return load_queries(write(fastapi_slice.parent / "embedders-queries.csv", QUERIES))


@pytest.fixture(scope="module")
def wordllama_index(fastapi_slice, wordllama):
    return build_index(fastapi_slice, embedder=wordllama, exclude=())


def fit_and_save(index, queries, path):
    table = score_table(queries, index.retrieve(queries["query"]))
    gate = fit_threshold_gate(table, "dense_top1", "keep@0.8")
    return save_gate(path, gate, rule="keep@0.8", provenance=index.config)


# The protocol -------------------------------------------------------------------------------------------------------


def test_the_test_embedder_and_both_shipped_embedders_satisfy_the_protocol(wordllama):
    assert isinstance(HashBag(), EmbedderProtocol)
    assert isinstance(wordllama, EmbedderProtocol)
    minilm = Embedder(use_cache=False)
    assert check_embedder(minilm) is minilm and minilm._model is None  # checked without loading the model
    assert isinstance(minilm, EmbedderProtocol)
    assert not isinstance(object(), EmbedderProtocol)


def test_build_index_refuses_what_is_no_embedder_and_names_what_is_missing(tmp_path):
    class NoFingerprint:
        name = "x"

        def encode(self, texts, *, show_progress_bar=None):
            return np.ones((len(texts), 2), np.float32) / np.sqrt(2)

    write(tmp_path / "docs" / "a.md", "# A\n\nSome words.\n")
    with pytest.raises(TypeError, match="lacks fingerprint.*|.*EmbedderProtocol"):
        build_index(tmp_path / "docs", embedder=NoFingerprint(), exclude=())
    with pytest.raises(TypeError, match="lacks name, fingerprint, encode"):
        build_index(tmp_path / "docs", embedder=object(), exclude=())


def test_embedder_name_reads_name_or_the_older_spec_name():
    from ragcal.embedding import ModelSpec

    class Older:
        spec = ModelSpec("older-model", "older-model", None)

    assert embedder_name(HashBag()) == "hash-bag-64"
    assert embedder_name(Older()) == "older-model"
    with pytest.raises(TypeError, match="no model name"):
        embedder_name(object())


def test_a_tiny_embedder_feeds_retrieval_score_table_and_a_gate(fastapi_slice, queries, tmp_path):
    index = build_index(fastapi_slice, embedder=HashBag(), exclude=())
    assert index.config["model"] == "hash-bag-64" and index.config["model_fingerprint"] == HashBag.fingerprint
    assert index._saved is None  # no cache_dir: nothing saved
    retrieved = index.retrieve(queries["query"])
    assert retrieved["dense"][0].score_at(1) > 0 and len(retrieved["dense"][0].chunk_ids) > 0
    table = score_table(queries, retrieved)
    assert len(table) == len(queries) and table["dense_top1"].between(-1, 1.000001).all()
    path = fit_and_save(index, queries, tmp_path / "gate.json")
    assert json.loads(path.read_text())["provenance"]["model_fingerprint"] == HashBag.fingerprint
    load_gate(path, index=index)  # the same model: accepted


def test_an_embedder_with_a_cache_key_has_its_index_saved_and_loaded(fastapi_slice, tmp_path):
    first = SavedHashBag(tmp_path)
    built = build_index(fastapi_slice, embedder=first, exclude=())
    assert built._saved is not None and first.stats["encoded"] == len(built.chunks)
    again = SavedHashBag(tmp_path)
    loaded = build_index(fastapi_slice, embedder=again, exclude=())
    assert again.stats["encoded"] == 0 and loaded.config == built.config  # loaded, nothing embedded
    other = SavedHashBag(tmp_path, key="v2")  # another cache key never loads that index
    build_index(fastapi_slice, embedder=other, exclude=())
    assert other.stats["encoded"] == len(built.chunks)


# load_embedder ------------------------------------------------------------------------------------------------------


def test_load_embedder_routes_by_name_and_keeps_minilm_fingerprint_and_cache_key(tmp_path):
    minilm = load_embedder(cache_dir=tmp_path)
    assert type(minilm) is Embedder and minilm.name == DEFAULT_MODEL
    assert minilm.fingerprint == MINILM_FINGERPRINT and minilm.cache_key == (
        f"{MINILM_FINGERPRINT}/pad16/avx2-mklauto-strict-{processor_model().lower()}"
    )
    wordllama = load_embedder("wordllama:l2_supercat_256", cache_dir=tmp_path)
    assert type(wordllama) is WordLlamaEmbedder and wordllama.cache_dir == tmp_path and wordllama.use_cache
    assert wordllama.name == "wordllama:l2_supercat_256" and wordllama.fingerprint == WORDLLAMA_FINGERPRINT
    assert wordllama.cache_key.startswith(WORDLLAMA_FINGERPRINT + "/mean1/wordllama-")
    truncated = load_embedder("wordllama:l2_supercat_256:64", use_cache=False)
    assert truncated.fingerprint == "wordllama:l2_supercat_256@64b47a2dc493/dim64" and truncated.dimension == 64
    assert load_embedder(truncated.name).fingerprint == truncated.fingerprint  # the name reads back
    assert load_embedder("wordllama:l2_supercat_256:256").name == "wordllama:l2_supercat_256"


@pytest.mark.parametrize(
    "model, message",
    [
        ("wordllama:l3_supercat_256", r"Unknown WordLlama model 'wordllama:l3_supercat_256'. Known: wordllama:l2_supercat_256"),
        ("wordllama:l2_supercat_256:100", r"truncation dimension must be one of 64, 128, 256. Got '100'"),
        ("wordllama:l2_supercat_256:x", r"truncation dimension must be one of"),
        ("wordllama", r"named with its prefix: wordllama:l2_supercat_256"),
        ("l2_supercat_256", r"named with its prefix"),
    ],
)
def test_unknown_wordllama_names_are_refused_with_the_known_ones(model, message):
    with pytest.raises(ValueError, match=message):
        load_embedder(model)


def test_a_missing_wordllama_package_is_named_with_the_install_command(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wordllama" else real(name, *a))
    with pytest.raises(MissingExtraError) as raised:
        load_embedder("wordllama:l2_supercat_256")
    assert str(raised.value) == (
        "the WordLlama embedder needs the retrieval extra: pip install 'ragcal[retrieval]' (wordllama is not installed)"
    )
    assert isinstance(raised.value, ImportError)


@pytest.fixture
def package_copy(wordllama, tmp_path):
    """A folder laid out like the wordllama package, holding copies of the two files."""
    for source in (wordllama.weights_path, wordllama.tokenizer_path):
        target = tmp_path / "wl" / source.parent.name / source.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
    return tmp_path / "wl"


def flip_last_byte(path):
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))


def test_a_copy_of_the_package_files_loads_and_gives_the_same_vectors(package_copy, wordllama):
    copy = WordLlamaEmbedder(package_dir=package_copy, use_cache=False)
    assert copy.fingerprint == wordllama.fingerprint
    texts = ["How do I add CORS?", "cookies"]
    assert np.array_equal(copy.encode(texts), wordllama.encode(texts))


@pytest.mark.parametrize("which", ["weights", "tokenizer"])
def test_a_missing_wordllama_file_is_named_with_its_expected_sha256(package_copy, which):
    missing = package_copy / getattr(FILES, which)
    missing.unlink()
    expected = getattr(FILES, f"{which}_sha256")
    with pytest.raises(FileNotFoundError, match=f"{missing.name}: WordLlama file not found .expected sha256 {expected}"):
        WordLlamaEmbedder(package_dir=package_copy)


@pytest.mark.parametrize("which", ["weights", "tokenizer"])
def test_a_wordllama_file_with_one_byte_changed_is_refused(package_copy, which):
    changed = package_copy / getattr(FILES, which)
    flip_last_byte(changed)
    expected = getattr(FILES, f"{which}_sha256")
    with pytest.raises(ValueError, match=f"{changed.name}: sha256 is [0-9a-f]{{64}}, expected {expected}"):
        WordLlamaEmbedder(package_dir=package_copy)


def test_a_file_changed_after_the_check_is_refused_when_loaded(package_copy):
    embedder = WordLlamaEmbedder(package_dir=package_copy, use_cache=False)
    flip_last_byte(package_copy / FILES.weights)
    with pytest.raises(ValueError, match=f"expected {FILES.weights_sha256}"):
        embedder.encode(["a question"])


# WordLlama vectors --------------------------------------------------------------------------------------------------


def test_wordllama_vectors_are_float32_unit_rows_the_same_bits_alone_or_in_a_batch(fastapi_slice, wordllama):
    from ragcal.retrieval.index import chunk_corpus

    _, chunks, _ = chunk_corpus(fastapi_slice)
    texts = ["How do I set a cookie?", *[chunk.text for chunk in chunks[:40]], "x"]
    batch = wordllama.encode(texts)
    assert batch.dtype == np.float32 and batch.shape == (len(texts), 256)
    np.testing.assert_allclose(np.linalg.norm(batch.astype(np.float64), axis=1), 1.0, atol=1e-6)
    alone = np.vstack([wordllama.encode([text]) for text in texts])
    reversed_batch = wordllama.encode(texts[::-1])[::-1]
    fresh = WordLlamaEmbedder(use_cache=False).encode(texts)
    for other in (alone, reversed_batch, fresh):
        assert np.array_equal(batch.view(np.uint32), other.view(np.uint32))
    assert wordllama.encode([]).shape == (0, 256)


def test_wordllama_vectors_are_the_packages_own_normalised_means(wordllama):
    from wordllama.inference import WordLlamaInference

    texts = ["How can I put a cookie in the response?", "uvicorn main:app --reload"]
    for dimension in (256, 64):
        ours = WordLlamaEmbedder(f"l2_supercat_256:{dimension}", use_cache=False)
        embedding = wordllama.model.embedding[:, :dimension]  # the package's float32 copy of the float16 weights
        reference = WordLlamaInference(embedding, ours.model.tokenizer).embed(texts, norm=True)
        np.testing.assert_allclose(ours.encode(texts), reference, atol=1e-6)


def test_a_text_with_no_token_has_a_zero_row(wordllama):
    vectors = wordllama.encode(["", "cookies"])
    assert not vectors[0].any() and abs(float(vectors[1] @ vectors[1]) - 1) < 1e-6
    assert wordllama.stats["encoded"] >= 2 and wordllama.stats["cached"] == 0


def test_loading_wordllama_leaves_the_root_logger_alone():
    code = (
        "import logging; from ragcal.embedding import WordLlamaEmbedder; "
        "WordLlamaEmbedder(use_cache=False).encode(['x']); root = logging.getLogger(); "
        "print(len(root.handlers), root.level)"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.split() == ["0", str(logging.WARNING)]


# End to end on WordLlama --------------------------------------------------------------------------------------------


def test_wordllama_end_to_end_on_a_slice_of_the_fastapi_docs(fastapi_slice, queries, wordllama_index, tmp_path):
    index = wordllama_index
    assert index.config["model"] == "wordllama:l2_supercat_256"
    assert index.config["model_fingerprint"] == WORDLLAMA_FINGERPRINT
    retrieved = index.retrieve(queries["query"])
    table = score_table(queries, retrieved)
    answerable = table["answerable"].to_numpy(dtype=bool)
    assert table.loc[answerable, "dense_top1"].mean() > table.loc[~answerable, "dense_top1"].mean()
    top_pages = [result.chunk_ids[0].split("#")[0] for result in retrieved["dense"]]
    gold = list(queries["gold"])  # every answerable question's top dense chunk is on its gold page
    assert all(page in pages for page, pages in zip(top_pages[:6], gold[:6])), (top_pages, gold)
    scores = write_score_table(tmp_path / "scores.csv", table, config=index.config)
    meta = json.loads(scores.with_name("scores.meta.json").read_text())
    assert meta["model_fingerprint"] == WORDLLAMA_FINGERPRINT
    gate = fit_and_save(index, queries, tmp_path / "gate.json")
    assert json.loads(gate.read_text())["provenance"]["model_fingerprint"] == WORDLLAMA_FINGERPRINT
    load_gate(gate, index=index)

    # Saved and loaded under the cache key: the loaded index scores the same.
    saved = build_index(fastapi_slice, embedder=WordLlamaEmbedder(cache_dir=tmp_path / "cache"), exclude=())
    loaded = build_index(fastapi_slice, embedder=WordLlamaEmbedder(cache_dir=tmp_path / "cache"), exclude=())
    assert saved._saved is not None and loaded._saved == saved._saved
    assert table.equals(score_table(queries, loaded.retrieve(queries["query"])))


def test_a_gate_of_one_wordllama_dimension_is_refused_on_another(fastapi_slice, queries, wordllama_index, tmp_path):
    gate = fit_and_save(wordllama_index, queries, tmp_path / "gate.json")
    truncated = build_index(fastapi_slice, embedder=WordLlamaEmbedder("l2_supercat_256:64", use_cache=False), exclude=())
    with pytest.raises(GateFileError, match=f"fitted on model {WORDLLAMA_FINGERPRINT} but the index uses "
                       "wordllama:l2_supercat_256@64b47a2dc493/dim64"):
        load_gate(gate, index=truncated)


@pytest.mark.slow
def test_a_gate_fitted_on_one_model_is_refused_by_name_on_the_other(fastapi_slice, queries, embedder, tmp_path):
    docs = tmp_path / "docs"  # two pages of the slice: MiniLM embeds a handful of chunks, not the slice's 118
    for page in ("tutorial/cors.md", "advanced/response-cookies.md"):
        write(docs / page, (fastapi_slice / page).read_text(encoding="utf-8"))
    shutil.copytree(fastapi_slice.parent / "docs_src", tmp_path / "docs_src")
    minilm_index = build_index(docs, embedder=embedder, exclude=())
    wordllama_index = build_index(docs, embedder=WordLlamaEmbedder(use_cache=False), exclude=())
    assert minilm_index.config["model_fingerprint"] == MINILM_FINGERPRINT
    assert minilm_index.config["chunks_sha256"] == wordllama_index.config["chunks_sha256"]  # only the model differs
    wordllama_gate = fit_and_save(wordllama_index, queries, tmp_path / "wordllama.json")
    minilm_gate = fit_and_save(minilm_index, queries, tmp_path / "minilm.json")
    with pytest.raises(GateFileError, match=f"fitted on model {WORDLLAMA_FINGERPRINT} but the index uses {MINILM_FINGERPRINT}"):
        load_gate(wordllama_gate, index=minilm_index)
    with pytest.raises(GateFileError, match=f"fitted on model {MINILM_FINGERPRINT} but the index uses {WORDLLAMA_FINGERPRINT}"):
        load_gate(minilm_gate, index=wordllama_index)


# The command line ---------------------------------------------------------------------------------------------------


def test_score_fit_gate_and_ask_with_wordllama_on_the_command_line(fastapi_slice, tmp_path, capsys):
    queries = write(tmp_path / "queries.csv", QUERIES)
    scores, gate = tmp_path / "scores.csv", tmp_path / "gate.json"
    cache = ["--cache-dir", str(tmp_path / "cache")]
    code = main(["score", str(queries), "--corpus", str(fastapi_slice), "--model", "wordllama:l2_supercat_256",
                 "--out", str(scores), *cache])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    meta = json.loads(scores.with_name("scores.meta.json").read_text())
    assert meta["model"] == "wordllama:l2_supercat_256" and meta["model_fingerprint"] == WORDLLAMA_FINGERPRINT
    assert "0 embeddings read from the cache" in captured.err
    assert main(["fit-gate", str(scores), "--rule", "keep@0.8", "--out", str(gate)]) == 0
    assert json.loads(gate.read_text())["provenance"]["model_fingerprint"] == WORDLLAMA_FINGERPRINT
    capsys.readouterr()
    # ask rebuilds the index with the gate's model (wordllama:...), read back by load_embedder.
    code = main(["ask", "--gate", str(gate), "--json", "--corpus", str(fastapi_slice), *cache,
                 "How can I put a cookie in the response?"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert json.loads(captured.out)["query"] == "How can I put a cookie in the response?"
    code = main(["ask", "--gate", str(gate), "--corpus", str(fastapi_slice), *cache,
                 "--model", "wordllama:l2_supercat_256:128", "Anything?"])
    captured = capsys.readouterr()
    assert code != 0 and "wordllama:l2_supercat_256@64b47a2dc493/dim128" in captured.err
    code = main(["score", str(queries), "--corpus", str(fastapi_slice), "--model", "wordllama:nope",
                 "--out", str(tmp_path / "x.csv"), *cache])
    assert code != 0 and "Known: wordllama:l2_supercat_256" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()
