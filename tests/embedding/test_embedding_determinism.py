"""A chunk's vector is a function of (model, text) only: not of the cache state, nor of the other texts in the call.

The texts are encoded in batches (:func:`ragcal.embedding.minilm.length_buckets`), so these tests are what makes the
batching exact: other batch sizes, orders, neighbours and cache states give the same bits.
"""

import platform
import random
import sqlite3

import numpy as np
import pytest

from ragcal.chunking import chunk_by_headings
from ragcal.corpus import load_corpus
from ragcal.embedding import DEFAULT_MODEL, Embedder, EmbeddingCache
from ragcal.embedding.minilm import (
    ENCODING_SCHEME,
    LENGTH_BUCKET,
    kernel_capability,
    length_buckets,
    processor_model,
    torch_capability,
)
from ragcal.embedding.models import PACKAGED_MODEL_SHA256

pytestmark = pytest.mark.slow


def assert_same_bits(actual, expected):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype == np.float32 and actual.shape == expected.shape
    assert actual.tobytes() == expected.tobytes(), f"{int((actual != expected).any(axis=-1).sum())} vectors differ"


@pytest.fixture(scope="module")
def texts(fastapi_slice):
    """40 real chunk texts from short to long (so batched encoding pads them), in a fixed shuffled order."""
    chunks = chunk_by_headings(load_corpus(fastapi_slice))
    unique = sorted(dict.fromkeys(chunk.text for chunk in chunks), key=lambda text: (len(text), text))
    assert len(unique) >= 40
    picked = unique[:: len(unique) // 40][:40]
    random.Random(0).shuffle(picked)
    return picked


@pytest.fixture(scope="module")
def cold(texts):
    """(a) All texts, cold, in one call."""
    return Embedder(use_cache=False).encode(texts)


def test_a_half_warm_cache_gives_the_same_bits_as_a_cold_run(texts, cold, tmp_path):
    embedder = Embedder(cache_dir=tmp_path)
    assert_same_bits(embedder.encode(texts[::2]), cold[::2])
    assert embedder.last_stats == {"cached": 0, "encoded": 20}
    assert_same_bits(embedder.encode(texts), cold)  # (b) half read from the cache, half encoded
    assert embedder.last_stats == {"cached": 20, "encoded": 20}
    reopened = Embedder(cache_dir=tmp_path)
    assert_same_bits(reopened.encode(texts), cold)
    assert reopened.last_stats == {"cached": 40, "encoded": 0}


def test_order_subset_and_neighbours_do_not_change_the_bits(texts, cold, tmp_path):
    order = list(reversed(range(len(texts))))
    subset = order[5:30]
    embedder = Embedder(cache_dir=tmp_path)
    assert_same_bits(embedder.encode([texts[i] for i in subset]), cold[subset])  # (c) another subset, other order
    assert_same_bits(embedder.encode([texts[i] for i in order]), cold[order])
    alone = Embedder(use_cache=False)
    for i in (0, 17, 39):
        assert_same_bits(alone.encode([texts[i]]), cold[[i]])
    assert_same_bits(alone.encode([texts[3], texts[3], texts[0]]), cold[[3, 3, 0]])


def test_other_batch_sizes_and_shuffles_give_the_same_bits(texts, cold):
    order = list(range(len(texts)))
    random.Random(1).shuffle(order)
    for tokens_per_batch in (1, 64, 300, 100_000):  # one text per pass up to every bucket in one pass
        embedder = Embedder(use_cache=False, tokens_per_batch=tokens_per_batch)
        assert_same_bits(embedder.encode([texts[i] for i in order]), cold[order])


def test_the_vectors_are_the_models_own(texts, cold):
    """Padding to a bucket changes the last bits only: sentence-transformers' own encode agrees to 1e-6."""
    model = Embedder(use_cache=False).model
    reference = model.encode(texts, batch_size=8, convert_to_numpy=True, normalize_embeddings=True)
    np.testing.assert_allclose(cold, reference, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(cold, axis=1), 1.0, atol=1e-6)


def test_length_buckets_pad_each_text_by_its_own_length():
    lengths = [3, 16, 17, 40, 300, 1, 16]
    batches = list(length_buckets(lengths, max_length=256, tokens_per_batch=32))
    # 16 tokens: two rows a batch; 32: one; 48: none; 256 (the cap) for the text over it: one.
    assert batches == [(16, [0, 1]), (16, [5, 6]), (32, [2]), (48, [3]), (256, [4])]
    assert LENGTH_BUCKET == 16
    assert list(length_buckets([], max_length=256)) == []
    assert [rows for _, rows in length_buckets([5] * 5, max_length=256, tokens_per_batch=1)] == [[0], [1], [2], [3], [4]]


def test_the_old_batched_scheme_did_depend_on_the_batch(texts, cold):
    """The tests above would have failed before: batches of 64 give other bits for a half-warm run."""
    model = Embedder(use_cache=False).model

    def old(batch):
        return model.encode(batch, batch_size=64, convert_to_numpy=True, normalize_embeddings=True)

    whole = old(texts)
    half_warm = np.empty_like(whole)
    half_warm[::2] = old(texts[::2])  # cached by the first run
    half_warm[1::2] = old(texts[1::2])  # encoded by the second
    assert not np.array_equal(whole, half_warm)
    assert not np.array_equal(whole, cold)
    np.testing.assert_allclose(whole, cold, atol=1e-6)  # the same vectors up to the last bits


def test_the_processor_names_the_cache_key(tmp_path):
    """MKL's kernels follow the processor: the key names the first processor of /proc/cpuinfo, x86 or Arm."""
    x86 = tmp_path / "x86"
    x86.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC 7763\n\n"
        "processor\t: 1\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
    )
    assert processor_model(x86) == "AuthenticAMD-25-1"
    arm = tmp_path / "arm"
    arm.write_text(
        "\nprocessor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU part\t: 0xd0c\n"
    )
    assert processor_model(arm) == "0x41-8-0xd0c"
    assert processor_model(tmp_path / "absent") == (platform.machine() or "unknown")
    assert kernel_capability().endswith("-" + processor_model())


CAPABILITY_PROBE = """
import json, sys
from ragcal.embedding.minilm import torch_capability
print(json.dumps([torch_capability(sys.argv[1], cpuinfo=sys.argv[2]), "torch" in sys.modules]))
"""


def probe_capability(memo_dir, cpuinfo="/proc/cpuinfo", **environment):
    """torch_capability in a fresh process: (its answer, whether it imported torch)."""
    import json
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", CAPABILITY_PROBE, str(memo_dir), str(cpuinfo)], check=True,
                          capture_output=True, text=True, env={**os.environ, **environment})  # fmt: skip
    return tuple(json.loads(done.stdout.strip().splitlines()[-1]))


def test_torchs_kernels_are_remembered_per_build_setting_and_processor(tmp_path):
    """A warm process reads the kernels from the cache folder's memo instead of importing torch (a second of CPU)."""
    import json

    import torch

    from ragcal.embedding.minilm import CAPABILITY_MEMO, _capability_memo_key

    pinned = str(torch.backends.cpu.get_cpu_capability())  # this process runs under the pinned kernels
    memo = tmp_path / CAPABILITY_MEMO
    assert probe_capability(tmp_path) == (pinned, True)  # asked torch, and wrote it down
    assert probe_capability(tmp_path) == (pinned, False)  # then read it
    # torch's own setting is part of the key: its generic kernels are asked for, then remembered beside.
    assert probe_capability(tmp_path, ATEN_CPU_CAPABILITY="default") == ("DEFAULT", True)
    assert probe_capability(tmp_path, ATEN_CPU_CAPABILITY="default") == ("DEFAULT", False)
    assert sorted(json.loads(memo.read_text()).values()) == sorted(["DEFAULT", pinned])
    # So is the processor: other flags are another entry, and torch is asked.
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(open("/proc/cpuinfo").read().replace("flags\t\t:", "flags\t\t: made_up_flag", 1))
    assert probe_capability(tmp_path, cpuinfo) == (pinned, True)
    assert len(json.loads(memo.read_text())) == 3
    # A wrong entry never outlives a process that imports torch: torch is asked and the entry corrected.
    key = _capability_memo_key("/proc/cpuinfo")  # this process's entry (the made-up flags' entry is another)
    assert json.loads(memo.read_text())[key] == pinned
    memo.write_text(json.dumps({**json.loads(memo.read_text()), key: "AVX512"}))
    assert torch_capability(tmp_path) == pinned and json.loads(memo.read_text())[key] == pinned
    # A damaged memo is asked again and rewritten; without flags to key it (not Linux) torch is always asked.
    memo.write_text("{not json")
    assert probe_capability(tmp_path) == (pinned, True) and probe_capability(tmp_path) == (pinned, False)
    assert probe_capability(tmp_path, tmp_path / "absent") == (pinned, True)


def test_a_cache_written_with_the_old_key_is_not_read(texts, cold, tmp_path):
    embedder = Embedder(cache_dir=tmp_path)
    # The public fingerprint (score tables, gate files) is unchanged; only the cache key carries the scheme.
    assert embedder.fingerprint == f"{DEFAULT_MODEL}@{PACKAGED_MODEL_SHA256[:12]}/max256"
    assert embedder.cache_key == f"{embedder.fingerprint}/{ENCODING_SCHEME}/{kernel_capability().lower()}"
    assert kernel_capability() == f"AVX2-mklAUTO-STRICT-{processor_model()}"  # pinned by conftest.py (ragcal.numerics)
    stale = np.random.default_rng(0).normal(size=(3, 384)).astype(np.float32)
    stale /= np.linalg.norm(stale, axis=1, keepdims=True)
    old_cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    old_cache.put(embedder.fingerprint, texts[:3], stale)  # how entries were keyed before
    old_cache.close()
    assert_same_bits(embedder.encode(texts[:3]), cold[:3])
    assert embedder.last_stats == {"cached": 0, "encoded": 3}
    connection = sqlite3.connect(tmp_path / "embeddings.sqlite")
    keys = connection.execute("SELECT model, COUNT(*) FROM embeddings GROUP BY model ORDER BY model").fetchall()
    connection.close()
    assert keys == [(embedder.fingerprint, 3), (embedder.cache_key, 3)]
    again = Embedder(cache_dir=tmp_path)
    assert_same_bits(again.encode(texts[:3]), cold[:3])
    assert again.last_stats == {"cached": 3, "encoded": 0}


def test_progress_bar_batch_size_and_empty_input(texts, tmp_path, capfd):
    embedder = Embedder(use_cache=False, batch_size=2)  # a bar for more than 2 * batch_size texts
    embedder.encode(texts[:4])
    assert "Embedding" not in capfd.readouterr().err
    embedder.encode(texts[:5])
    assert "Embedding" in capfd.readouterr().err
    embedder.encode(texts[:5], show_progress_bar=False)
    assert "Embedding" not in capfd.readouterr().err
    for embedder in (Embedder(use_cache=False), Embedder(cache_dir=tmp_path)):
        empty = embedder.encode([])
        assert empty.shape == (0, 384) and empty.dtype == np.float32
        assert embedder.last_stats == {"cached": 0, "encoded": 0}
