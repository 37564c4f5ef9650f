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
