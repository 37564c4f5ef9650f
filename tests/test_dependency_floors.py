"""The ragcal wheel installs and works at the lowest dependency versions pyproject.toml allows.

The job itself is tests/dependency_floors.py (``python tests/dependency_floors.py [--newest]``); the last test
runs it. It needs the package index (PyPI), which CI has: it fails, never skips, when the job fails.
"""

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from dependency_floors import floor_constraints
from doc_snippets import imports_of, needs_the_readers_things, snippets

SCRIPT = Path(__file__).resolve().parent / "dependency_floors.py"
PYPROJECT = SCRIPT.parent.parent / "pyproject.toml"


def test_the_floors_are_read_from_pyproject(tmp_path):
    pins = floor_constraints()
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    expected = [line.replace(">=", "==") for line in dependencies if not line.startswith("torch")]
    assert pins == expected
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\ndependencies = ["numpy>=2.0", "faiss-cpu>=1.11,<2", "torch>=2.1"]\n')
    assert floor_constraints(pyproject) == ["numpy==2.0", "faiss-cpu==1.11"]
    pyproject.write_text('[project]\ndependencies = ["numpy"]\n')
    with pytest.raises(ValueError, match="'numpy' needs exactly one '>=' floor"):
        floor_constraints(pyproject)


def test_environment_yml_asks_for_what_pyproject_asks_for():
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    wanted = [
        *project["dependencies"],
        *(line for extra in project["optional-dependencies"].values() for line in extra),
    ]
    wanted = {line for line in wanted if not line.startswith(("ragcal[", "torch"))}
    environment = yaml.safe_load((PYPROJECT.parent / "environment.yml").read_text())["dependencies"]
    pip_lines = next(entry["pip"] for entry in environment if isinstance(entry, dict))
    assert {line for line in pip_lines if line not in ("torch==2.13.0", "-e .")} == wanted


def test_a_snippet_that_needs_the_readers_things_is_told_apart():
    assert needs_the_readers_things("from ragcal import build_index\nindex = build_index(CORPUS)\n") == ["CORPUS"]
    assert needs_the_readers_things('import ragcal\nragcal.load_queries("my_queries.csv")\n') == ["my_queries.csv"]
    decorated = '@register("x", retrievers=("dense",))\ndef f(results):\n    return results\n'
    assert needs_the_readers_things("from ragcal.signals import register_signal as register\n" + decorated) == []
    assert imports_of("import a\nfrom b import c\nx = c(a)\n") == "import a\nfrom b import c"
    # The snippets of the README and the docs include at least one that runs as written.
    assert any(not needs_the_readers_things(snippet) for snippet in (found.code for found in snippets("python")))


@pytest.mark.slow
def test_the_wheel_works_at_the_dependency_floors():
    result = subprocess.run([sys.executable, str(SCRIPT)], check=False, capture_output=True, text=True, timeout=1800)
    print(result.stdout)
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-4000:]
