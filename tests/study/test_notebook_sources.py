"""The notebook sources: parameters that do not depend on the folder the kernel starts in."""

import re

import pytest

from ragcal.study.notebooks import NOTEBOOKS, NOTEBOOKS_DIR


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_parameter_paths_do_not_depend_on_the_working_directory(name):
    source = (NOTEBOOKS_DIR / f"{name}.py").read_text()
    parameters = source.split('# %% tags=["parameters"]', 1)[1].split("# %%", 1)[0]
    relative = re.findall(r"""^(\w+)\s*=\s*["'](\.\.?/[^"']*)["']""", parameters, flags=re.MULTILINE)
    assert not relative, f"{name}: parameters relative to the kernel's folder: {relative}"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_executed_notebooks_show_no_machine_paths(name):
    """The committed record reads the same on every machine: no absolute path in any output or source."""
    import json

    notebook = json.loads((NOTEBOOKS_DIR / f"{name}.ipynb").read_text())
    root = str(NOTEBOOKS_DIR.parent.resolve())
    texts = []
    for cell in notebook["cells"]:
        texts.append("".join(cell.get("source", "")))
        for output in cell.get("outputs", []):
            texts.append("".join(output.get("text", "")))
            texts.append("".join(output.get("data", {}).get("text/plain", "")))
    machine = re.compile(r"PosixPath\(|'/(?:work|home|root|tmp)/")
    found = [text for text in texts if root in text or machine.search(text)]
    assert not found, f"{name}.ipynb shows machine paths: {found[:2]}"
