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


def output_texts(notebook: dict) -> list[str]:
    """What an executed notebook shows as text: streams (warnings land on stderr), tracebacks, and every text form
    of a rich output (``text/plain``, ``text/html``, ...); images are left out (base64 may spell anything)."""
    texts = []
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            texts.append("".join(output.get("text", "")))
            texts.append("\n".join(output.get("traceback", [])))
            texts += ["".join(value) for kind, value in output.get("data", {}).items() if kind.startswith("text/")]
    return texts


@pytest.mark.parametrize("path", sorted(NOTEBOOKS_DIR.glob("*.ipynb")), ids=lambda path: path.stem)
def test_committed_outputs_name_no_temporary_home_or_checkout_folder(path):
    """A warning printed in a cell names the kernel's file of that cell (``/tmp/ipykernel_<pid>/<hash>.py``), which
    differs on every run; the checkout and the home folder differ on every machine. None may reach the record."""
    import json
    from pathlib import Path

    forbidden = ["/tmp/", "ipykernel_", str(NOTEBOOKS_DIR.parent.resolve())]
    home = Path.home()
    if len(home.parts) > 1:
        forbidden.append(f"{home}/")
    found = [
        (needle, text.strip()[:200])
        for text in output_texts(json.loads(path.read_text()))
        for needle in forbidden
        if needle in text
    ]
    assert not found, f"{path.name}: outputs show {found[:2]}"
