"""run_in_processes: results in task order, the same bits as in this process, errors raised here; stage timings."""

import numpy as np
import pytest

from ragcal.embedding import Embedder
from ragcal.study.parallel import default_jobs, run_in_processes
from ragcal.study.timings import StageTimings

TEXTS = [
    "How do I declare a path parameter?",
    "Path parameters are declared with the same syntax as Python format strings. " * 6,
    "Dependencies can be classes as well as functions.",
    "Ownership is Rust's most unique feature. " * 15,
]


def encode(texts, cache_dir):
    """Vectors of ``texts`` with the default model (a module-level function, so a spawned process can run it)."""
    return Embedder(cache_dir=cache_dir, use_cache=False).encode(list(texts))


def seeded_draw(seed):
    return np.random.default_rng(seed).random(5)


def fails(message):
    raise ValueError(message)


def test_results_come_back_in_task_order_with_the_same_bits(tmp_path):
    here = encode(TEXTS, tmp_path)
    tasks = [(encode, (TEXTS[::-1], tmp_path), {}), (seeded_draw, (3,), {}), (encode, (TEXTS, tmp_path), {})]
    backwards, draw, forwards = run_in_processes(tasks, jobs=2)
    # Two processes, one thread each: a MiniLM vector is the same bits as here, with every thread.
    assert np.array_equal(forwards, here)
    assert np.array_equal(backwards[::-1], here)
    assert np.array_equal(draw, seeded_draw(3))


def test_on_done_hears_of_every_task_once_with_its_result(tmp_path):
    for jobs in (1, 2):
        heard = []
        results = run_in_processes(
            [(seeded_draw, (seed,), {}) for seed in (1, 2, 3)], jobs=jobs, on_done=lambda i, r: heard.append((i, r))
        )
        assert sorted(position for position, _ in heard) == [0, 1, 2]
        assert all(result.tolist() == results[position].tolist() for position, result in heard)


def test_one_job_runs_here_and_errors_are_raised_here(tmp_path):
    assert run_in_processes([(seeded_draw, (1,), {}), (seeded_draw, (2,), {})], jobs=1)[1].tolist() == seeded_draw(
        2
    ).tolist()
    with pytest.raises(ValueError, match="the second task broke"):
        run_in_processes([(seeded_draw, (1,), {}), (fails, ("the second task broke",), {})], jobs=2)
    for jobs in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="jobs must be a positive int"):
            run_in_processes([(seeded_draw, (1,), {})], jobs=jobs)
    assert run_in_processes([], jobs=2) == []
    assert default_jobs() >= 1


def test_stages_run_in_other_processes_are_shown_but_not_counted_twice():
    clock = iter([0.0, 10.0, 10.0, 70.0]).__next__
    timings = StageTimings(clock=clock)
    with timings.stage("index"):
        pass
    with timings.stage("2 corpora in 2 processes"):
        pass
    timings.add_parallel([("fastapi: splits", 50.0, True), ("rust-book: splits", 55.0, True)])
    table = timings.table()
    assert table["stage"].tolist() == [
        "index", "2 corpora in 2 processes", "fastapi: splits", "rust-book: splits", "total"
    ]  # fmt: skip
    assert table["seconds"].tolist() == [10.0, 60.0, 50.0, 55.0, 70.0]  # total: 10 + 60, the wall clock
    lines = timings.format().splitlines()
    assert lines[2].startswith("  fastapi: splits") and lines[0].startswith("index ")
    assert lines[-1].split()[:3] == ["total", "70.0", "s"]
    assert StageTimings().format() == "no stage was timed"
