"""The package's layout: no import cycle, no module too long to read, and docs that list the real tree."""

import re
from pathlib import Path

import pytest
from test_package import PACKAGE, imported_modules, module_name

ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"
#: The documentation page with the one-line-per-package layout block (it was the README's "Layout" section).
LAYOUT = PACKAGE.parent / "docs" / "layout.md"
#: The longest a module may grow before it holds more than one concept.
MAX_MODULE_LINES = 600
ALL_FILES = sorted(PACKAGE.rglob("*.py"))
MODULES = {module_name(path) for path in ALL_FILES}


def import_graph(files) -> dict[str, set[str]]:
    """Module -> the ragcal modules it imports (top-level or lazy; a name imported from a package counts as the
    package unless it is itself a module). A submodule's edge to a package that contains it is left out: Python
    runs the package first anyway, and that is no cycle of the code's making."""
    names = {module_name(path) for path in files}
    graph = {}
    for path in files:
        name = module_name(path)
        edges = set()
        for target in imported_modules(path):
            while target not in names and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in names and target != name and not name.startswith(target + "."):
                edges.add(target)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_library_has_no_import_cycle():
    assert cycles(import_graph(ALL_FILES)) == []


def test_the_cycle_finder_finds_a_lazy_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_a_lazy_relative_import_between_two_modules(tmp_path):
    probe_a, probe_b = PACKAGE / "gates" / "_probe_a.py", PACKAGE / "gates" / "_probe_b.py"
    try:
        probe_a.write_text("def f():\n    from ._probe_b import g\n")
        probe_b.write_text("from . import _probe_a\n")
        graph = import_graph([probe_a, probe_b])
        assert cycles(graph) == [["ragcal.gates._probe_a", "ragcal.gates._probe_b"]]
    finally:
        probe_a.unlink()
        probe_b.unlink()


#: Packages a lower room never imports, not even inside a function: what reads retrieved passages builds on retrieval.
NEVER_IMPORTS = {"ragcal.retrieval": ("ragcal.judges", "ragcal.signals", "ragcal.gates", "ragcal.llm")}


def upward_imports(files, rules=NEVER_IMPORTS) -> list[str]:
    """``module -> imported`` for every import (top-level or lazy) that ``rules`` forbid."""
    found = []
    for path in files:
        name = module_name(path)
        for package, above in rules.items():
            if name == package or name.startswith(package + "."):
                found += [f"{name} -> {target}" for target in sorted(imported_modules(path))
                          if any(target == top or target.startswith(top + ".") for top in above)]
    return found


def test_retrieval_never_imports_the_judges_or_anything_above_it():
    assert upward_imports(ALL_FILES) == []


def test_the_upward_check_sees_a_lazy_import_of_the_judges():
    probe = PACKAGE / "retrieval" / "_probe_up.py"
    try:
        probe.write_text("def f():\n    from ..judges.results import judge_results\n")
        assert "ragcal.retrieval._probe_up -> ragcal.judges.results" in upward_imports([probe])
    finally:
        probe.unlink()


@pytest.mark.parametrize("path", ALL_FILES, ids=module_name)
def test_no_module_is_over_600_lines(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{module_name(path)} has {lines} lines: split it by concept"


def tree_entries() -> set[str]:
    """Every module of the tree as a path under ``ragcal/`` (``gates/fit.py``), and every package (``gates/``)."""
    entries = set()
    for path in ALL_FILES:
        relative = path.relative_to(PACKAGE).as_posix()
        if path.name == "__init__.py":
            if path.parent != PACKAGE:
                entries.add(relative.removesuffix("__init__.py"))
        else:
            entries.add(relative)
    return entries


def architecture_entries() -> list[str]:
    """The first column of the table under '## One line per module' in docs/architecture.md."""
    text = ARCHITECTURE.read_text()
    section = text.split("## One line per module", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", section, flags=re.M)


def test_the_architecture_doc_lists_every_module_once_and_nothing_else():
    listed = architecture_entries()
    assert len(listed) == len(set(listed)), "a module is listed twice"
    tree = tree_entries() | {"__init__.py"}
    assert sorted(tree - set(listed)) == [], "modules missing from docs/architecture.md"
    assert sorted(set(listed) - tree) == [], "docs/architecture.md lists modules that do not exist"


def readme_layout() -> tuple[set[str], dict[str, str]]:
    """The layout block of docs/layout.md read as (top-level module names, package -> its description).

    A line indented by two spaces is ``names  description``: the names end at the first run of two spaces. Names
    ending in ``/`` are a package, described on that line and on the deeper-indented lines below it; other names
    are top-level modules, separated by commas."""
    section = LAYOUT.read_text()
    block = re.search(r"```\n(.*?)```", section, flags=re.S).group(1)
    modules, packages, current = set(), {}, None
    for line in block.splitlines():
        if re.match(r"^  \S", line):
            names, _, description = line[2:].partition("  ")
            current = names.strip() if names.strip().endswith("/") else None
            if current:
                packages[current] = description
            else:
                modules |= {name.strip() for name in names.split(",")}
        elif current and line.startswith("    "):
            packages[current] += " " + line.strip()
        else:
            current = None
    return modules, packages


def test_the_layout_page_names_every_package_and_module():
    top_level, packages = readme_layout()
    missing = []
    for entry in sorted(tree_entries()):
        parts = entry.rstrip("/").split("/")
        if len(parts) == 1:
            if entry.endswith("/") and entry not in packages or not entry.endswith("/") and (
                entry.removesuffix(".py") not in top_level
            ):
                missing.append(entry)
            continue
        described = packages.get(parts[0] + "/", "")
        name = parts[-1].removesuffix(".py")
        if not re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", described):
            missing.append(entry)
    assert missing == [], "modules the layout block of docs/layout.md does not name (under their package's line)"


def test_pyproject_ships_every_package():
    """setuptools is given an explicit list (two packages map to data/ and notebooks/): a package missing from it
    would be left out of the wheel without any error."""
    import tomllib

    listed = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {module_name(path) for path in ALL_FILES if path.name == "__init__.py"}
    assert sorted(packages - listed) == []


def top_level_packages() -> list[str]:
    """The packages directly under ragcal/ (folders with an __init__.py)."""
    return sorted(path.parent.name for path in PACKAGE.glob("*/__init__.py"))


def test_the_package_docstring_and_the_diagram_name_every_package():
    import ragcal

    assert len(top_level_packages()) >= 10
    diagram = re.search(r"```\n(.*?)```", ARCHITECTURE.read_text(), flags=re.S).group(1)
    for package in top_level_packages():
        assert f":mod:`ragcal.{package}`" in ragcal.__doc__, f"ragcal's docstring does not name ragcal.{package}"
        assert re.search(rf"(?<![\w]){package}/", diagram), f"the diagram in docs/architecture.md leaves out {package}/"
