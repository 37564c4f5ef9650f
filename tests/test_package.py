"""The package's shape: two layers, cheap imports, and a public API that matches what the README documents."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ragcal

PACKAGE = Path(ragcal.__file__).resolve().parent
README = PACKAGE.parent / "README.md"
#: What is not the library: our study, and the command line (the thin top floor over both).
NOT_LIBRARY = ("ragcal.study", "ragcal.cli", "ragcal.__main__")
HEAVY = ("torch", "sentence_transformers", "faiss", "transformers", "sklearn", "scipy", "matplotlib")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Every ragcal module a file imports, at the top or inside a function, absolute or relative."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("ragcal")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("ragcal"):
                found.add(target)
                found |= {f"{target}.{alias.name}" for alias in node.names}  # `from . import x` names a module
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "import_module" and node.args:
            argument = node.args[0]
            if isinstance(argument, ast.Constant) and str(argument.value).startswith("ragcal"):
                found.add(argument.value)
    return found


LIBRARY_FILES = [
    path for path in sorted(PACKAGE.rglob("*.py")) if not module_name(path).startswith(NOT_LIBRARY)
]


def test_the_study_and_the_library_are_both_there():
    names = {module_name(path) for path in LIBRARY_FILES}
    assert {"ragcal.score_tables", "ragcal.runs", "ragcal.metrics.auc", "ragcal.plotting.roc"} <= names
    assert (PACKAGE / "study" / "reproduce.py").is_file() and (PACKAGE / "cli" / "calibrate.py").is_file()
    assert not any(name.startswith("ragcal.study") for name in names)


@pytest.mark.parametrize("path", LIBRARY_FILES, ids=module_name)
def test_no_library_module_imports_the_study_or_the_command_line(path):
    offending = sorted(target for target in imported_modules(path) if target.startswith(NOT_LIBRARY))
    assert not offending, f"{module_name(path)} imports {offending}"


def test_the_import_walk_sees_relative_and_lazy_imports(tmp_path):
    """The walk above would catch a lazy, relative import of the study (it is not a test that cannot fail)."""
    fake = PACKAGE / "gates" / "_probe_for_test.py"
    try:
        fake.write_text("def f():\n    from ..study import reproduce\n    from ..study.report import format_interval\n")
        assert {"ragcal.study", "ragcal.study.reproduce", "ragcal.study.report"} <= imported_modules(fake)
    finally:
        fake.unlink()


def loaded_after(code: str) -> set[str]:
    script = f"import sys\n{code}\nprint(','.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    output = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    return set(output.strip().split(","))


def test_import_ragcal_loads_no_model_code_faiss_or_scikit_learn():
    assert not loaded_after("import ragcal") & set(HEAVY)


def test_ragcal_help_loads_no_model_code_faiss_pandas_or_scikit_learn():
    code = (
        "from ragcal.cli import build_parser\n"
        "import contextlib, io\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        build_parser().parse_args(['--help'])\n"
        "    except SystemExit:\n"
        "        pass"
    )
    assert not loaded_after(code) & {*HEAVY, "pandas"}


def test_calibrating_a_score_table_needs_no_model_code_or_faiss():
    """A user who brings only a score table does not need torch, sentence-transformers or faiss installed."""
    code = "from ragcal.calibration import calibrate\nfrom ragcal.score_tables import read_score_table\nimport ragcal.gates"
    assert not loaded_after(code) & {"torch", "sentence_transformers", "faiss", "transformers"}


def test_public_names_load_lazily_and_are_listed_once():
    assert len(ragcal.__all__) == len(set(ragcal.__all__))
    assert len(ragcal.__all__) <= 40, "the top-level API is what the README uses and little more"
    for name in ragcal.__all__:
        assert getattr(ragcal, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        ragcal.nope  # noqa: B018


def readme_imports() -> list[tuple[str, str]]:
    """(module, name) of every ``from ragcal... import ...`` in the Python snippets of the README and docs/*.md."""
    from doc_snippets import snippets

    pairs = []
    for snippet in snippets("python"):
        for node in ast.walk(ast.parse(snippet.code)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ragcal"):
                pairs += [(node.module, alias.name) for alias in node.names]
    return pairs


def test_every_name_the_readme_imports_is_in_that_modules_all():
    pairs = readme_imports()
    assert len(pairs) >= 10
    import importlib

    for module, name in pairs:
        imported = importlib.import_module(module)
        assert name in getattr(imported, "__all__", ()), f"a snippet imports {name} from {module}, not in its __all__"
        assert getattr(imported, name) is not None


@pytest.mark.parametrize(
    "module",
    [
        "ragcal.embedding",
        "ragcal.retrieval",
        "ragcal.signals",
        "ragcal.metrics",
        "ragcal.calibration",
        "ragcal.gates",
        "ragcal.monitoring",
        "ragcal.plotting",
    ],
)
def test_subpackages_list_only_names_they_have(module):
    import importlib

    imported = importlib.import_module(module)
    assert imported.__all__ and len(imported.__all__) == len(set(imported.__all__))
    for name in imported.__all__:
        assert getattr(imported, name) is not None, f"{module}.{name}"
        assert not name.startswith("_"), f"{module}.{name} is private"


def test_the_command_line_default_model_is_the_librarys():
    from ragcal.cli._options import DEFAULT_MODEL_NAME
    from ragcal.embedding import DEFAULT_MODEL

    assert DEFAULT_MODEL_NAME == DEFAULT_MODEL


def test_gate_kinds_come_from_the_gate_registry():
    from ragcal.cli.gates import _gate_kinds
    from ragcal.gates.base import GATE_TYPES
    from ragcal.gates.fit import GATE_FITTERS

    assert set(GATE_FITTERS) == set(GATE_TYPES)  # every registered gate can be fitted from a score table
    assert set(_gate_kinds()) == {kind.replace("_", "-") for kind in GATE_TYPES}
