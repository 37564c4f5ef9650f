"""A feature whose optional extra is missing says so in one line, names the extra and the command, and writes nothing.

The model stack is installed in the test environment, so its absence is made by blocking one of its modules, faiss
(``sys.modules[name] = None``, which makes Python's import raise ``ModuleNotFoundError``; blocking torch this way
would break SciPy, which looks torch up in ``sys.modules``). tests/dependency_floors.py checks the same messages in a
real environment without torch.
"""

import sys

import pytest

from ragcal.cli import COMMAND_EXTRAS, main
from ragcal.extras import EXTRAS, MissingExtraError, import_extra, missing_modules, require_extra


@pytest.fixture
def no_faiss(monkeypatch):
    monkeypatch.setitem(sys.modules, "faiss", None)


def test_an_installed_extra_passes_and_lists_nothing_missing():
    assert missing_modules("retrieval") == []
    require_extra("retrieval", "anything")


def test_a_missing_module_names_the_feature_the_extra_and_the_command(no_faiss):
    assert missing_modules("retrieval") == ["faiss"]
    with pytest.raises(MissingExtraError) as raised:
        require_extra("retrieval", "ragcal score --corpus")
    assert str(raised.value) == (
        "ragcal score --corpus needs the retrieval extra: pip install 'ragcal[retrieval]' (faiss is not installed)"
    )
    assert isinstance(raised.value, ImportError)  # caught by code that expects an ImportError
    assert (raised.value.feature, raised.value.extra, raised.value.module) == (
        "ragcal score --corpus",
        "retrieval",
        "faiss",
    )


def test_the_study_extra_is_the_retrieval_extra_and_more():
    assert set(EXTRAS["retrieval"]) < set(EXTRAS["study"])


def test_an_unknown_extra_is_a_value_error_listing_the_known_ones():
    with pytest.raises(ValueError, match="unknown extra 'models'; the extras with a model stack are: retrieval, study"):
        require_extra("models", "x")


def test_import_extra_imports_or_names_the_extra(no_faiss):
    assert import_extra("json", "retrieval", "x").dumps([1]) == "[1]"
    with pytest.raises(MissingExtraError, match=r"^the dense index needs the retrieval extra: .*\(faiss is not"):
        import_extra("faiss", "retrieval", "the dense index")


def test_import_extra_lets_an_installed_package_s_own_missing_dependency_through(tmp_path, monkeypatch):
    (tmp_path / "brokenpackage").mkdir()
    (tmp_path / "brokenpackage" / "__init__.py").write_text("import a_dependency_that_is_not_there\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as raised:
        import_extra("brokenpackage", "retrieval", "x")
    assert not isinstance(raised.value, MissingExtraError)
    assert raised.value.name == "a_dependency_that_is_not_there"


@pytest.mark.parametrize(
    ("arguments", "feature", "extra"),
    [
        (["score", "queries.csv", "--out", "scores.csv", "--runs", "runs"], "ragcal score --corpus", "retrieval"),
        (
            ["score", "--candidates", "candidates.jsonl", "--out", "scores.csv", "--judge", "judge"],
            "ragcal score --candidates --judge",
            "retrieval",
        ),
        (["ask", "--gate", "gate.json", "How do I?"], "ragcal ask (without --candidates)", "retrieval"),
        (["serve", "--gate", "gate.json"], "ragcal serve (without --candidates)", "retrieval"),
        (["sweep-chunking", "queries.csv", "--out", "sweep.csv"], "ragcal sweep-chunking", "retrieval"),
        (["train-judge", "queries.csv", "--out", "judge"], "ragcal train-judge", "retrieval"),
        (
            ["fit-gate", "scores.csv", "--out", "gate.json", "--reranker", "model"],
            "ragcal fit-gate --reranker",
            "retrieval",
        ),
        (
            ["llm-abstain", "queries.csv", "--corpus", "docs", "--local-model", "--out", "llm.csv"],
            "ragcal llm-abstain --corpus",
            "retrieval",
        ),
        (
            ["review", "scores.csv", "--gate", "gate.json", "--out", "review.csv"],
            "ragcal review LIVE_LOG (the sample's passages come from the gate's index; "
            "--passages 0 draws without them)",
            "retrieval",
        ),
        (
            ["reproduce", "--results", "results"],
            "ragcal reproduce (it executes the notebooks; --skip-notebooks runs without them)",
            "study",
        ),
        (["reproduce", "--skip-notebooks", "--results", "results"], "ragcal reproduce", "retrieval"),
        (["golden"], "ragcal golden", "retrieval"),
    ],
)
def test_a_command_without_its_extra_is_one_line_and_writes_nothing(
    arguments, feature, extra, no_faiss, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scores.csv").write_text("id,query,answerable,slice,dense_top1\nq1,x,true,answerable,0.5\n")
    before = sorted(tmp_path.rglob("*"))
    assert main(arguments) == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err.splitlines() == [
        f"ragcal: error: {feature} needs the {extra} extra: pip install 'ragcal[{extra}]' (faiss is not installed)"
    ]
    assert sorted(tmp_path.rglob("*")) == before


def test_every_command_that_always_needs_an_extra_names_a_known_one():
    assert set(COMMAND_EXTRAS.values()) <= set(EXTRAS)


def test_reproduce_needs_the_study_extra_only_to_execute_the_notebooks(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "nbclient", None)
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "--results", "results"]) == 2
    assert capsys.readouterr().err == (
        "ragcal: error: ragcal reproduce (it executes the notebooks; --skip-notebooks runs without them) needs the "
        "study extra: pip install 'ragcal[study]' (nbclient is not installed)\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_library_s_model_paths_raise_it_too(no_faiss):
    import numpy as np

    from ragcal.embedding import Embedder
    from ragcal.retrieval.ann import DenseIndexSpec, build_faiss_index

    with pytest.raises(MissingExtraError, match=r"^the MiniLM embedder \(ragcal.embedding.Embedder\) needs the retr"):
        Embedder()
    with pytest.raises(MissingExtraError, match=r"^the dense index \(faiss\) needs the retrieval extra"):
        build_faiss_index(np.eye(3, dtype=np.float32), DenseIndexSpec())
