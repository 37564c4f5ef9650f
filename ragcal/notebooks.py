"""Execute the notebooks headless (for ``make reproduce`` and the tests).

The notebooks are kept as percent-format scripts (``notebooks/*.py``, paired
with ``.ipynb`` through jupytext) so that their diffs can be reviewed. Running
one reads the script, injects parameters after the cell tagged
``parameters`` (as papermill does), executes it with nbclient and writes the
executed ``.ipynb``.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

__all__ = ["NOTEBOOKS_DIR", "NOTEBOOKS", "execute_notebook", "execute_notebooks"]

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = (
    "01_score_distributions",
    "02_roc_and_auc",
    "03_threshold_sweep_and_heldout",
    "04_prototype_a_signal",
    "05_gates",
)


_QUIET = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error"}


def _inject_parameters(notebook, parameters: dict) -> None:
    import nbformat

    if not parameters:
        return
    source = "# Injected parameters\n" + "\n".join(f"{name} = {value!r}" for name, value in parameters.items())
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
    positions = [i for i, existing in enumerate(notebook.cells) if "parameters" in existing.metadata.get("tags", [])]
    if not positions:
        raise ValueError("the notebook has no cell tagged 'parameters' to inject after")
    notebook.cells.insert(positions[0] + 1, cell)


@contextmanager
def _quiet_progress_bars():
    """Progress bars (with their timings) off in the kernel, which inherits this environment."""
    saved = {name: os.environ.get(name) for name in _QUIET}
    os.environ.update(_QUIET)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _static_widget_outputs(notebook) -> None:
    """Replace live widget views (random model ids, useless without a kernel) by a short note."""
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if _WIDGET_VIEW in data:
                del data[_WIDGET_VIEW]
                data["text/plain"] = "Interactive widget: run this cell in JupyterLab to use it."


def execute_notebook(source, output=None, *, parameters=None, timeout: int = 1800):
    """Execute one notebook script and (optionally) write the executed ``.ipynb``.

    Parameters
    ----------
    source : str or Path
        A percent-format script or an ``.ipynb``.
    output : str or Path, default=None
    parameters : dict, default=None
        Values that override the ``parameters`` cell.
    timeout : int, default=1800
        Seconds allowed per cell.

    Returns
    -------
    NotebookNode
        The executed notebook. A failing cell raises ``nbclient``'s
        ``CellExecutionError``, naming the cell and the error.
    """
    import jupytext
    import nbformat
    from nbclient import NotebookClient

    from ._io import atomic_write_text

    source = Path(source)
    notebook = jupytext.read(source)
    _inject_parameters(notebook, parameters or {})
    # Stable cell ids and no timings, so that re-executing an unchanged notebook gives an unchanged file.
    for position, cell in enumerate(notebook.cells):
        cell["id"] = f"cell-{position:02d}"
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(source.parent)}},
    )
    with _quiet_progress_bars():
        client.execute()
    _static_widget_outputs(notebook)
    if output is not None:
        atomic_write_text(output, nbformat.writes(notebook))
    return notebook


def execute_notebooks(*, names=NOTEBOOKS, output_dir=NOTEBOOKS_DIR, parameters=None, log=print) -> list[Path]:
    """Execute every notebook, writing ``<output_dir>/<name>.ipynb``."""
    written = []
    for name in names:
        output = Path(output_dir) / f"{name}.ipynb"
        execute_notebook(NOTEBOOKS_DIR / f"{name}.py", output, parameters=parameters)
        log(f"executed notebooks/{name}.py -> {output}")
        written.append(output)
    return written
