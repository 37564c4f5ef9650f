"""Every code block of the README and of docs/*.md, as a reader would paste it (tests/doc_snippets.py finds them).

- A ```python block that needs nothing of the reader's runs as written, in a fresh process in an empty folder; one
  that needs the reader's own things (a name defined elsewhere, a path of theirs) has its imports run, so every
  name it uses must still exist. Blocks that import a framework run here too: the test environment has the
  frameworks extra.
- A ```python block preceded by ``<!-- runs as written -->`` runs as written, even when it names files (it
  writes them first). The three framework quick starts are run by the tests of their integrations
  (tests/integrations/), which check what each one built on the whole FastAPI docs (:func:`run_quick_start`);
  running them here too would score the docs through each framework twice.
- A ```bash block preceded by ``<!-- runs as written -->`` runs line by line in an empty folder, with the test
  environment's ``ragcal`` and ``python`` first on the PATH. Every other block is checked: each ``ragcal``
  subcommand exists and takes every option the block passes it, each ``make`` target exists, and each script it
  runs is in the repository.
"""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from doc_snippets import (
    FRAMEWORKS,
    REPOSITORY,
    imports_of,
    imports_script,
    needs_the_readers_things,
    quick_start,
    shell_commands,
    snippets,
)

pytestmark = pytest.mark.slow

PYTHON = snippets("python")
#: Each distinct Python block once (the README's example is also Getting started's), run where it first appears.
DISTINCT = list({snippet.code: snippet for snippet in reversed(PYTHON)}.values())[::-1]
BASH = snippets("bash")

def environment() -> dict:
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "PYTHONUNBUFFERED": "1"}


QUICK_STARTS = [quick_start(framework) for framework in FRAMEWORKS]  # run by tests/integrations/test_*_gate.py
RUNNABLE_HERE = [snippet for snippet in DISTINCT if snippet.marked_to_run or not needs_the_readers_things(snippet.code)]
RUN = [snippet for snippet in RUNNABLE_HERE if snippet not in QUICK_STARTS]
IMPORTS_ONLY = [snippet for snippet in DISTINCT if snippet not in RUNNABLE_HERE]


def run_python(code: str, folder) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=folder, capture_output=True, text=True, env=environment(), timeout=900,
        check=False,
    )


@pytest.mark.parametrize("snippet", RUN, ids=[snippet.where for snippet in RUN])
def test_a_python_block_runs_as_written(snippet, tmp_path):
    result = run_python(snippet.code, tmp_path)
    assert result.returncode == 0, f"{snippet.where}:\n{result.stderr}"


def test_the_imports_of_every_block_that_needs_the_readers_things_run(tmp_path):
    """Their imports, each block's on its own, in one process (a fresh interpreter per block costs seconds each)."""
    assert IMPORTS_ONLY
    result = run_python(imports_script((snippet.where, imports_of(snippet.code)) for snippet in IMPORTS_ONLY), tmp_path)
    assert result.returncode == 0, result.stderr
    failed = json.loads(result.stdout.strip().splitlines()[-1])
    assert failed == [], "\n".join(f"{where}: {error}" for where, error in failed)


def test_each_framework_has_a_quick_start_that_its_integration_test_runs():
    assert len(set(QUICK_STARTS)) == len(FRAMEWORKS)
    tests = REPOSITORY / "tests" / "integrations"
    files = ("test_langchain_gate.py", "test_llamaindex_gate.py", "test_haystack_gate.py")
    for framework, test_file in zip(FRAMEWORKS, files):
        assert f'run_quick_start("{framework}"' in (tests / test_file).read_text(encoding="utf-8"), framework


def test_the_readme_and_getting_started_show_a_study_that_runs_as_written():
    runnable = [snippet.where for snippet in PYTHON if not needs_the_readers_things(snippet.code)]
    assert any(where.startswith("README.md") for where in runnable)
    assert any(where.startswith("docs/getting-started.md") for where in runnable)


def ragcal_options() -> dict:
    """``{subcommand: set of its options}``, read from ``ragcal --help`` and ``ragcal <subcommand> --help``."""
    import contextlib
    import io

    from ragcal.cli import build_parser

    parser = build_parser()
    names = re.search(r"\{([\w,-]+)\}", parser.format_usage()).group(1).split(",")
    options = {}
    for name in names:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), pytest.raises(SystemExit):
            build_parser().parse_args([name, "--help"])
        options[name] = set(re.findall(r"(?<![\w-])(--[\w-]+|-\w)\b", printed.getvalue()))
    return options


def make_targets() -> set:
    return set(re.findall(r"^([\w.-]+):", (REPOSITORY / "Makefile").read_text(), flags=re.MULTILINE))


def problems_of(command: str, options: dict, targets: set) -> list[str]:
    """What a pasted command would trip on: an unknown ragcal subcommand or option, make target or script."""
    words = shlex.split(command, comments=True)
    if not words:
        return []
    program = Path(words[0]).name
    if program == "ragcal":
        sub = words[1] if len(words) > 1 else ""
        if sub not in options:
            return [f"no subcommand {sub!r}"]
        used = {word.split("=", 1)[0] for word in words[2:] if word.startswith("--")}
        used |= {match for match in re.findall(r"\[(--[\w-]+)", command)}
        return [f"ragcal {sub} has no option {option}" for option in sorted(used - options[sub])]
    if program == "make":
        return [f"no make target {target!r}" for target in words[1:] if target not in targets]
    if program.startswith("python") and len(words) > 1 and words[1].endswith(".py"):
        return [] if (REPOSITORY / words[1]).is_file() else [f"no script {words[1]}"]
    return []


@pytest.mark.parametrize("snippet", BASH, ids=[snippet.where for snippet in BASH])
def test_a_bash_block_names_commands_and_options_that_exist(snippet):
    options, targets = ragcal_options(), make_targets()
    problems = [f"{command}: {problem}" for command in shell_commands(snippet.code)
                for problem in problems_of(command, options, targets)]  # fmt: skip
    assert problems == [], snippet.where


def test_the_command_check_catches_what_a_reader_would_trip_on():
    options, targets = ragcal_options(), make_targets()
    assert problems_of("ragcal score q.csv --out s.csv --runs runs/", options, targets) == []
    assert problems_of("ragcal score q.csv --out s.csv --run runs/", options, targets) == ["ragcal score has no option --run"]
    assert problems_of("ragcal scores q.csv", options, targets) == ["no subcommand 'scores'"]
    assert problems_of("ragcal review --gate g.json [--sizes 60]", options, targets) == ["ragcal review has no option --sizes"]
    assert problems_of("make reproduce", options, targets) == []
    assert problems_of("make publish", options, targets) == ["no make target 'publish'"]
    assert problems_of("python benchmarks/nope.py", options, targets) == ["no script benchmarks/nope.py"]


RUNNABLE = [snippet for snippet in BASH if snippet.marked_to_run]


@pytest.mark.parametrize("snippet", RUNNABLE, ids=[snippet.where for snippet in RUNNABLE])
def test_a_bash_block_marked_so_runs_as_written_in_an_empty_folder(snippet, tmp_path):
    for command in shell_commands(snippet.code):
        result = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, env=environment(), timeout=900,
            check=False,
        )
        assert result.returncode == 0, f"{snippet.where}: {command}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"


def test_the_getting_started_commands_are_marked_to_run():
    assert any(snippet.where.startswith("docs/getting-started.md") for snippet in RUNNABLE)
