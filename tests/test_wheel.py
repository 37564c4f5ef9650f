"""ragcal installed from a wheel, outside the repository, finds its bundled data and runs the README's snippets."""

import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh venv with the built wheel; the test venv's packages lend it the dependencies (no download)."""
    root = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(root / "dist"),
            str(REPOSITORY),
        ],
        check=True,
        capture_output=True,
    )
    wheel = next((root / "dist").glob("ragcal-*.whl"))
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # Dependencies from the test environment, after the venv's own site-packages (so ragcal comes from the wheel).
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # pip --python installs into the new venv; `--prefix` would also uninstall ragcal from the running environment.
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
    )
    work = root / "elsewhere"
    work.mkdir()
    return python, work, wheel


def run(python, work, *arguments, **options):
    environment = {key: value for key, value in os.environ.items() if key != "RAGCAL_DATA_DIR"}
    return subprocess.run([python, *arguments], cwd=work, capture_output=True, text=True, env=environment, **options)


def test_the_wheel_ships_the_data_and_the_notebooks(installed):
    python, work, wheel = installed
    result = run(
        python,
        work,
        "-c",
        textwrap.dedent("""
        import ragcal, ragcal.datasets as d, ragcal.study.notebooks as n
        print(ragcal.__file__); print(d.DATA_DIR); print(d.FASTAPI_CORPUS.is_dir(), d.RUST_BOOK_QUERIES.is_file())
        print(n.NOTEBOOKS_DIR, (n.NOTEBOOKS_DIR / "01_score_distributions.py").is_file())
    """),
    )
    assert result.returncode == 0, result.stderr
    package, data, present, notebooks = result.stdout.splitlines()
    assert str(REPOSITORY) not in package and "site-packages" in package
    assert data.startswith(str(Path(package).parent)) and present == "True True"
    assert notebooks.endswith("_notebooks True")


def test_the_readme_snippet_runs_from_the_wheel(installed):
    python, work, _ = installed
    snippet = textwrap.dedent("""
        from ragcal import build_index, load_queries, score_table
        from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE, STARTER_QUERIES

        index = build_index(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE)
        queries = load_queries(STARTER_QUERIES, corpus_paths=index.doc_paths)
        retrieved = index.retrieve(queries["query"])
        table = score_table(queries, retrieved)
        print(len(index.chunks), len(table))
    """)
    result = run(python, work, "-c", snippet, timeout=600)
    assert result.returncode == 0, result.stderr
    chunks, rows = map(int, result.stdout.split())
    assert chunks == 2282 and rows > 0


#: The reduced study's committed output: what the wheel's `ragcal reproduce` below must write (to the byte, or
#: within the declared tolerance where nothing is anchored: see the test).
REDUCED_SNAPSHOT = REPOSITORY / "tests" / "golden" / "reduced-study"
#: The reduced study: FastAPI only, 50 splits, the default chunking alone, no notebooks (`make reduced-snapshot`).
REDUCED_ARGUMENTS = ("--corpus", "fastapi", "--skip-notebooks", "--splits", "50", "--chunking", "headings-256")


#: Provenance fields that name where the data lives: the repository's data/ here, the wheel's copy in site-packages.
PATH_FIELDS = {"corpus", "queries", "source", "path"}


def without_paths(value):
    if isinstance(value, dict):
        return {key: without_paths(item) for key, item in value.items() if key not in PATH_FIELDS}
    if isinstance(value, list):
        return [without_paths(item) for item in value]
    return value


def same_but_paths(name, work) -> bool:
    """A JSON file, or summary.md, that differs from the snapshot only in where the bundled data lives."""
    import json

    if name.endswith(".json"):
        read = lambda root: without_paths(json.loads((root / name).read_text()))  # noqa: E731
    elif name.endswith("summary.md"):  # its first paragraph names the corpus and query files
        read = lambda root: [line for line in (root / name).read_text().splitlines() if "Corpus `" not in line]  # noqa: E731
    else:
        return False
    return read(work / "out") == read(REDUCED_SNAPSHOT)


def test_reproduce_from_the_wheel_writes_the_committed_reduced_study(installed):
    """The study's guard: a code change that alters what the study writes fails here until the snapshot is rebuilt.

    It covers every file the study writes for one corpus (scores, runs, retrieval, chunking, calibration, gates,
    learned gates, selective risk and certificates, reranker signals, access control, summary.md), from the wheel,
    anchored to the snapshot's dense run and scores, so on any processor whose kernels stay within tolerance. It
    cannot see what only the full study touches: the 1,000-split numbers, the other chunkings, the Rust book, the
    cross-corpus and cross-model reports, SQuAD and the notebooks' figures (``make reproduce`` then ``git status``
    does). After a deliberate change: ``make reduced-snapshot`` and ``make reproduce``, and commit both.
    """
    from ragcal.study.exactness import compare_files

    python, work, _ = installed
    # `python -m ragcal` runs the console script's entry point (the script's shebang names the installing python).
    # 1,000 splits add minutes, and each other chunking embeds the whole corpus again (headings-512 alone took two
    # minutes of CI's cold cache), and nothing to this check (the sweep itself is tested on a slice of the docs).
    arguments = (*REDUCED_ARGUMENTS, "--results", "out", "--reference", str(REDUCED_SNAPSHOT))
    result = run(python, work, "-m", "ragcal", "reproduce", *arguments, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    # The dense scores and the score table are anchored to the snapshot's (ragcal.study.anchoring): on a processor
    # whose kernels move them within the declared tolerance the study continues from the committed values, so what
    # follows from them is rewritten to the byte; so are the reranker's scores (rerank_scores.csv). What is not
    # anchored (access control) is printed as 4-decimal rank statistics: compared within the declared tolerance.
    comparison = compare_files(work / "out", REDUCED_SNAPSHOT)
    problems = [
        problem
        for problem in comparison["different"]
        if not (problem.startswith("changed: ") and same_but_paths(problem[9:], work))
    ]
    assert not problems, (
        "the reduced study no longer writes the committed snapshot (run `make reduced-snapshot` and `make reproduce` "
        "if the change is meant): " + "; ".join(problems[:10])
    )
    verdict = result.stdout[result.stdout.index("exactness verdict") :]
    assert "decisions of the committed gates changed by this run's own scores: 0 (over 4 gates)" in verdict, verdict
    assert ", 0 beyond it" in verdict, verdict
    print(verdict)
    chunking = (work / "out" / "fastapi" / "chunking.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in chunking[1:]] == ["headings-256"]
    assert "certified in" in (work / "out" / "fastapi" / "summary.md").read_text()


def test_missing_data_says_what_to_do(installed, tmp_path):
    python, work, _ = installed
    environment = {**os.environ, "RAGCAL_DATA_DIR": str(tmp_path / "nowhere")}
    # An explicit RAGCAL_DATA_DIR that holds nothing falls back to the shipped copy...
    result = subprocess.run(
        [python, "-c", "import ragcal.datasets as d; print(d.DATA_DIR)"],
        cwd=work,
        capture_output=True,
        text=True,
        env=environment,
    )
    assert "site-packages" in result.stdout
    # ...and a folder without the data gets an error that names what to set.
    result = run(python, work, "-c", "from ragcal.datasets import check_data_dir; check_data_dir('/nonexistent')")
    assert result.returncode != 0 and "Set RAGCAL_DATA_DIR" in result.stderr
