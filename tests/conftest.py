import os
import shutil
from pathlib import Path

from ragcal.numerics import PINNED_ENVIRONMENT

# Pinned numeric kernels (ragcal.numerics) before anything imports torch, so that the tests that compare bits with
# committed numbers hold on AVX2 and AVX-512 machines alike; xdist's workers inherit them.
os.environ.update(PINNED_ENVIRONMENT)

import pytest  # noqa: E402

from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE  # noqa: E402
from ragcal.embedding import Embedder  # noqa: E402

# Pages copied into the small end-to-end corpus; the queries in tests refer to them.
SLICE_PAGES = (
    "advanced/response-cookies.md",
    "tutorial/cors.md",
    "tutorial/background-tasks.md",
    "tutorial/request-files.md",
    "tutorial/index.md",
    "tutorial/security/index.md",
    "tutorial/security/get-current-user.md",
    "deployment/docker.md",
)


@pytest.fixture(scope="session")
def fastapi_slice(tmp_path_factory) -> Path:
    """A copy of a few FastAPI pages plus the docs_src they include."""
    root = tmp_path_factory.mktemp("fastapi_slice")
    for page in SLICE_PAGES:
        target = root / "docs" / page
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FASTAPI_CORPUS / page, target)
    shutil.copytree(FASTAPI_CORPUS.parent / "docs_src", root / "docs_src")
    return root / "docs"


@pytest.fixture(scope="session")
def embedder(tmp_path_factory) -> Embedder:
    """The real default model with a cache private to this test session."""
    return Embedder(cache_dir=tmp_path_factory.mktemp("embedding_cache"))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


#: The slowest test files, slowest first: seconds of one worker in a ``make test`` on this 2-core machine with the
#: embedding cache warm (2026-12-07; re-measure with ``--junitxml``): floors 177, notebooks 126, doc snippets 98,
#: faults 108 (about 80 since its corpus was halved), then 50 down to 20. The wheel's reduced study took 57 s warm and
#: about two minutes more on CI's cold cache while it embedded a second chunking (it no longer does). Given first to
#: pytest-xdist, which ``make test`` tells to keep this order (``--no-loadscope-reorder``), they run while the many
#: short files fill in behind them, and both workers finish together; by default xdist starts with the files that
#: hold the most tests, which left the longest to the end.
SLOWEST_FILES = (
    "test_dependency_floors.py",  # three fresh venvs (core, frameworks, torch and the retrieval extra) and Spark
    "test_wheel.py",
    "study/test_notebooks.py",
    "test_doc_snippets.py",  # the documentation's examples (the framework quick starts run in tests/integrations/)
    "test_faults.py",
    "logs/test_monitor_engines.py",  # DuckDB and a local Spark
    "logs/test_review_engines.py",
    "study/test_docs_site.py",  # builds the documentation site (Sphinx), then opens it in Chromium
    "study/test_browser.py",
    "integrations/test_haystack_gate.py",  # FastAPI through Haystack's store
    "study/test_kernels.py",  # the model step under other kernels: always a cold embedding
    "embedding/test_embedding_determinism.py",
    "test_serve.py",
    "logs/test_calibrate_from_counts.py",
    "integrations/test_llamaindex_gate.py",
    "logs/test_spark_counts.py",
    "study/test_parallel.py",
    "cli/test_judge_cli.py",  # trains four tiny judges
    "llm/test_local_llm_server.py",  # a real local LLM server
    "study/test_imported_study.py",
    "integrations/test_langchain_gate.py",  # FAISS and Chroma stores on the FastAPI docs
    "judges/test_llm_judge.py",
    "judges/test_train_judge.py",
    "cli/test_gates_cli.py",
    "cli/test_cli.py",
    "embedding/test_embedders.py",
)
TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    """Put the tests of :data:`SLOWEST_FILES` first, in that order; the others keep theirs."""
    rank = {name: position for position, name in enumerate(SLOWEST_FILES)}

    def position(item):
        path = Path(str(item.path)).resolve()
        return rank.get(path.relative_to(TESTS).as_posix(), len(rank)) if path.is_relative_to(TESTS) else len(rank)

    items.sort(key=position)


def pytest_sessionstart(session):
    """With pytest-xdist (``make test`` runs ``-n 2``), build and save the bundled FastAPI index once, first.

    Both workers need it. Built here, in the controller and before the
    workers start, the corpus is embedded once and each worker's
    :func:`fastapi_index` loads the saved index; otherwise both workers would
    embed the same cold corpus at once, each on two cores. A plain ``pytest``
    run (no ``-n``) skips this. No test needs the whole Rust book embedded
    (its golden set searches the committed candidates, tests/study/test_golden.py).
    """
    if hasattr(session.config, "workerinput") or not getattr(session.config.option, "numprocesses", None):
        return
    from ragcal.retrieval.index import build_index

    build_index(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE)
    # The workers, started after this hook, and the processes they start (notebook kernels, CLI runs, the wheel's
    # reproduce) share the two cores. OpenMP threads that spin while they wait (torch's default) then take the
    # cores from each other: two 2-thread MiniLM runs at once took 50 s each here, against 15 s alone, and 21 s
    # each with passive waiting. The waiting policy changes no bits; alone, this build is faster spinning.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # And each worker (with what it starts) gets its share of the cores for torch, MKL and OpenBLAS: one thread on
    # this 2-core machine. OpenBLAS's idle threads spin on sched_yield after every product, and two workers' pools
    # of two threads each only took the cores from each other. The bits do not depend on the thread count
    # (ragcal.study.parallel runs the study's corpora on one thread each and writes the same files).
    from ragcal.study.parallel import THREAD_VARIABLES, default_jobs

    workers = session.config.option.numprocesses
    threads = str(max(1, default_jobs() // workers) if isinstance(workers, int) else 1)
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, threads)


@pytest.fixture(scope="session")
def fastapi_index():
    """The full bundled corpus with the default model and the default (user or CI) embedding cache."""
    from ragcal.retrieval.index import build_index

    return build_index(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE)
