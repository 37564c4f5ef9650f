"""Concurrent and killed runs lose nothing and corrupt nothing: real ``ragcal score`` processes, real MiniLM.

- two processes on one cold cache both succeed, write what a single run writes, and leave a sound cache;
- a run killed with SIGKILL in the middle of embedding leaves no output (or the previous one, intact) and only
  whole cache entries, and the next run reuses them and writes what a clean run writes.
"""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import write
from labeled_queries import QUERIES

from ragcal.cli import main
from ragcal.datasets import FASTAPI_CORPUS
from ragcal.embedding import EmbeddingCache
from ragcal.embedding.cache import CACHE_COMMIT_EVERY

pytestmark = pytest.mark.slow

#: 9 pages, 138 chunks: long enough to embed (several seconds cold) that a kill lands in the middle. Embedding goes
#: from the shortest chunks to the longest, so the longest are still ahead when the first batches are committed.
DEPLOYMENT = FASTAPI_CORPUS / "deployment"
DEPLOYMENT_CHUNKS = 138
DEPLOYMENT_QUERIES = """id,query,answerable,slice,gold
a1,How do I build a Docker image for my FastAPI app?,true,answerable,docker.md
a2,How does HTTPS termination work for my API?,true,answerable,https.md
u1,What is the best way to caramelise onions?,false,unrelated,
u2,How do I configure a Django admin site?,false,near-domain,
"""


def score_command(queries, corpus, out, cache_dir, *extra):
    return [
        sys.executable, "-m", "ragcal", "score", str(queries), "--corpus", str(corpus), "--out", str(out),
        "--cache-dir", str(cache_dir), *extra,
    ]


def start(command):
    env = {**os.environ, "PYTHONHASHSEED": "0", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def finish(process, timeout=600):
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err
    return out, err


def in_this_process(command) -> None:
    """A reference run of ``command`` (a :func:`score_command`) in this process: the same ``main``, the same bits,
    without a second interpreter importing torch (the runs under test are the separate processes)."""
    assert main(command[3:]) == 0


def cache_entries(cache_dir: Path) -> int:
    path = cache_dir / "embeddings.sqlite"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as connection:
            return connection.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]
    except sqlite3.OperationalError:  # the table is not there yet, or the writer holds a lock for a moment
        return 0


def sound(cache_dir: Path) -> dict:
    cache = EmbeddingCache(cache_dir / "embeddings.sqlite")
    try:
        report = cache.verify()
    finally:
        cache.close()
    assert report["integrity"] == "ok" and report["bad_entries"] == 0, report
    return report


def leftovers(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir() if path.name.endswith(".tmp"))


def test_two_processes_on_one_cold_cache(fastapi_slice, tmp_path):
    queries = write(tmp_path / "queries.csv", QUERIES)
    shared = tmp_path / "shared_cache"
    first = start(score_command(queries, fastapi_slice, tmp_path / "a.csv", shared, "--runs", str(tmp_path / "runs_a")))
    second = start(score_command(queries, fastapi_slice, tmp_path / "b.csv", shared, "--runs", str(tmp_path / "runs_b")))
    finish(first)
    finish(second)
    single = tmp_path / "single_cache"
    in_this_process(score_command(queries, fastapi_slice, tmp_path / "single.csv", single))
    expected = (tmp_path / "single.csv").read_bytes()
    assert (tmp_path / "a.csv").read_bytes() == expected
    assert (tmp_path / "b.csv").read_bytes() == expected
    for name in ("dense.run", "rrf.run"):
        assert (tmp_path / "runs_a" / name).read_bytes() == (tmp_path / "runs_b" / name).read_bytes()
    assert sound(shared)["entries"] == sound(single)["entries"]
    assert not leftovers(tmp_path)


def kill_mid_embedding(command, cache_dir: Path, *, at_least: int) -> int:
    """Start ``command``, SIGKILL it once the cache holds ``at_least`` entries; return how many it held."""
    process = start(command)
    deadline = time.monotonic() + 300
    while cache_entries(cache_dir) < at_least:
        assert process.poll() is None, f"finished before it could be killed: {process.communicate()[1]}"
        assert time.monotonic() < deadline, "embedding never started"
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL
    return cache_entries(cache_dir)


def test_a_run_killed_while_embedding_loses_nothing(tmp_path):
    queries = write(tmp_path / "queries.csv", DEPLOYMENT_QUERIES)
    out, meta = tmp_path / "scores.csv", tmp_path / "scores.meta.json"
    cache = tmp_path / "cache"

    # 1. Killed with no earlier output: no output appears, and the cache holds only whole, valid entries.
    held = kill_mid_embedding(score_command(queries, DEPLOYMENT, out, cache), cache, at_least=2 * CACHE_COMMIT_EVERY)
    assert not out.exists() and not meta.exists() and not leftovers(tmp_path)
    report = sound(cache)
    assert report["entries"] == held and 0 < held < DEPLOYMENT_CHUNKS  # whole batches committed, each one transaction

    # 2. The next run completes and reuses what the killed one committed.
    _, err = finish(start(score_command(queries, DEPLOYMENT, out, cache)))
    assert f"{held:,} embeddings read from the cache" in err
    resumed = out.read_bytes()

    # 3. Killed again over an existing output (cold cache): the previous output stays, byte for byte.
    before = (resumed, meta.read_bytes())
    other_cache = tmp_path / "other_cache"
    kill_mid_embedding(score_command(queries, DEPLOYMENT, out, other_cache), other_cache, at_least=CACHE_COMMIT_EVERY)
    assert (out.read_bytes(), meta.read_bytes()) == before and not leftovers(tmp_path)
    sound(other_cache)

    # 4. What the resumed run wrote is what a clean run (no cache at all) writes.
    clean = tmp_path / "clean.csv"
    in_this_process(score_command(queries, DEPLOYMENT, clean, tmp_path / "unused", "--no-cache"))
    assert clean.read_bytes() == resumed
