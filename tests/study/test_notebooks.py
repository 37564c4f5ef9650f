"""Every notebook runs end to end on the bundled data and writes its figures."""

import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ragcal.study.notebooks import NOTEBOOKS, NOTEBOOKS_DIR, execute_notebook

# name -> (small parameters, figures it must write, images it must show)
CASES = {
    # 01 shows its one saved figure plus the static view of the threshold slider.
    "01_score_distributions": ({}, ["score_distributions"], 2),
    "02_roc_and_auc": ({"n_resamples": 300}, ["roc", "roc_near_domain"], 2),
    "03_threshold_sweep_and_heldout": ({"n_splits": 50, "n_repeats": 50}, ["tradeoff", "heldout", "label_curve"], 3),
    "04_prototype_a_signal": (
        {"n_resamples": 300, "trial_corpora": ["fastapi"], "trial_benchmarks": [], "trial_splits": 20},
        ["new_signal_roc", "new_signal_tradeoff"],
        2,
    ),
    "05_gates": ({"n_splits": 30}, ["gates", "floor_gap"], 2),
    # Reads the per-corpus results that make reproduce committed.
    "06_two_corpora": (
        {"results_dir": str(NOTEBOOKS_DIR.parent / "results")},
        ["auc_two_corpora", "chunking_two_corpora", "score_distributions_two_models"],
        3,
    ),
    "07_new_signals": ({"n_splits": 20, "n_resamples": 300}, ["learned_roc", "learned_coefficients"], 2),
    # Reads the per-corpus results too, and fits a certified gate on the bundled FastAPI docs.
    "08_selective_risk": ({"results_dir": str(NOTEBOOKS_DIR.parent / "results")}, ["risk_coverage"], 1),
    # The committed FastAPI gate and scores; the review sample goes to a temporary folder of its own.
    "09_review_and_monitor": (
        {"results_dir": str(NOTEBOOKS_DIR.parent / "results"), "n_resamples": 300},
        ["monitor_shift"],
        1,
    ),
    # Reads the committed SQuAD 2.0 results (tests/study/test_imported_study.py runs it on a computed study).
    "10_benchmarks": (
        {"results_dir": str(NOTEBOOKS_DIR.parent / "results" / "squad2-A"), "n_resamples": 300},
        ["score_distributions", "roc", "risk_coverage"],
        3,
    ),
    # Reads the committed judge study (results/judge/, written by `ragcal reproduce --judge`).
    "11_judge": (
        {"results_dir": str(NOTEBOOKS_DIR.parent / "results" / "judge"), "n_resamples": 300},
        ["training_curves", "roc", "judge_distributions", "risk_coverage"],
        4,
    ),
    # LangChain's FAISS store on the FastAPI docs: certified through the store, then a chain.
    "12_frameworks": ({}, ["langchain_scores"], 1),
}


def test_every_notebook_has_a_case():
    assert set(CASES) == set(NOTEBOOKS)
    assert {path.stem for path in NOTEBOOKS_DIR.glob("*.py")} == set(NOTEBOOKS)


def png_size(path):
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", header[16:24])


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_and_writes_figures(name, tmp_path, fastapi_index):
    # fastapi_index warms the shared embedding cache once for all notebooks.
    parameters, figures, images = CASES[name]
    notebook = execute_notebook(
        NOTEBOOKS_DIR / f"{name}.py",
        tmp_path / f"{name}.ipynb",
        parameters={**parameters, "figures_dir": str(tmp_path / "figures")},
    )
    errors = [
        output for cell in notebook.cells for output in cell.get("outputs", []) if output.get("output_type") == "error"
    ]
    assert not errors
    assert (tmp_path / f"{name}.ipynb").stat().st_size > 10_000
    # Every figure the notebook saves is also shown in it (the cell that saves it displays an image).
    for cell in notebook.cells:
        if cell.cell_type == "code" and "save_figure(" in cell.source:
            assert any("image/png" in output.get("data", {}) for output in cell.get("outputs", [])), (
                f"{name}: a cell saves a figure but shows none:\n{cell.source}"
            )
    shown = [
        output for cell in notebook.cells for output in cell.get("outputs", []) if "image/png" in output.get("data", {})
    ]
    assert len(shown) == images, f"{name}: shows {len(shown)} images, expected {images}"
    for stem in figures:
        png, svg = tmp_path / "figures" / f"{stem}.png", tmp_path / "figures" / f"{stem}.svg"
        width, height = png_size(png)
        assert width >= 600 and height >= 400, f"{png}: {width}x{height}"
        assert png.stat().st_size > 20_000
        text = svg.read_text()
        assert text.lstrip().startswith("<?xml") and "<svg" in text and len(text) > 10_000


def test_parameters_need_a_parameters_cell(tmp_path):
    plain = tmp_path / "plain.py"
    plain.write_text("# %%\nx = 1\n")
    with pytest.raises(ValueError, match="no cell tagged 'parameters'"):
        execute_notebook(plain, parameters={"x": 2})


@pytest.mark.parametrize("name", ["01_score_distributions", "02_roc_and_auc", "03_threshold_sweep_and_heldout"])
def test_notebooks_run_on_a_score_table_brought_from_elsewhere(name, tmp_path):
    """Another team's logged scores: other slice names, one signal, no corpus at all."""
    rng = np.random.default_rng(0)
    slices = np.array(["covered"] * 40 + ["adjacent product"] * 20 + ["chit-chat"] * 20)
    centre = np.select([slices == "covered", slices == "adjacent product"], [0.7, 0.5], 0.2)
    scores = tmp_path / "logged_scores.csv"
    pd.DataFrame(
        {
            "id": [f"log{n}" for n in range(80)],
            "query": "logged",
            "answerable": slices == "covered",
            "slice": slices,
            "dense_top1": rng.normal(centre, 0.08).round(4),
        }
    ).to_csv(scores, index=False)
    parameters = {"scores_path": str(scores), "figures_dir": str(tmp_path / "figures")}
    parameters.update({"n_resamples": 200} if name == "02_roc_and_auc" else {})
    parameters.update({"n_splits": 20} if name.startswith("03") else {})
    execute_notebook(NOTEBOOKS_DIR / f"{name}.py", parameters=parameters)
    assert list((tmp_path / "figures").glob("*.png"))


class SlowChannel:
    """A kernel channel whose message is only seen by a poll that starts after ``ready_at``."""

    def __init__(self, ready_at):
        self.ready_at, self.polls = ready_at, []

    async def get_msg(self, timeout=None):
        import asyncio
        import time
        from queue import Empty

        self.polls.append(timeout)
        started = time.monotonic()
        if started >= self.ready_at:
            return {"msg": "reply"}
        await asyncio.sleep(timeout)  # a poll that misses the message waits out its whole timeout
        raise Empty


def test_channels_are_polled_in_steps_until_their_timeout():
    import asyncio
    import time
    from queue import Empty

    from ragcal.study.notebooks import _poll_in_steps

    # The message is there 0.15 s in: one poll of 30 s would miss it and wait 30 s; steps of 0.05 s find it.
    channel = SlowChannel(ready_at=time.monotonic() + 0.15)
    _poll_in_steps(channel, step=0.05)
    started = time.monotonic()
    assert asyncio.run(channel.get_msg(timeout=30)) == {"msg": "reply"}
    assert time.monotonic() - started < 5 and 3 <= len(channel.polls) and max(channel.polls) == 0.05
    # With nothing to read, it still gives up at the caller's timeout (the last step is shortened to fit).
    channel = SlowChannel(ready_at=float("inf"))
    _poll_in_steps(channel, step=0.05)
    started = time.monotonic()
    with pytest.raises(Empty):
        asyncio.run(channel.get_msg(timeout=0.12))
    assert 0.12 <= time.monotonic() - started < 2 and channel.polls[-1] < 0.05
    # No timeout: it keeps polling in steps (nbclient cancels the task when the cell is done).
    channel = SlowChannel(ready_at=time.monotonic() + 0.1)
    _poll_in_steps(channel, step=0.05)
    assert asyncio.run(channel.get_msg()) == {"msg": "reply"} and set(channel.polls) == {0.05}


def flaky_kernel(folder: Path, failures: int) -> Path:
    """A ``python3`` kernelspec (put first with JUPYTER_PATH) whose first ``failures`` starts die at once."""
    import json
    import sys

    folder.mkdir(parents=True)
    counter = folder / "starts"
    launcher = folder / "launch.py"
    launcher.write_text(
        "import os, sys\n"
        f"counter = {str(counter)!r}\n"
        "starts = int(open(counter).read()) + 1 if os.path.exists(counter) else 1\n"
        "open(counter, 'w').write(str(starts))\n"
        f"if starts <= {failures}:\n"
        "    sys.exit(1)  # as a kernel whose port another kernel took first\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'ipykernel_launcher', *sys.argv[1:]])\n"
    )
    spec = folder / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, str(launcher), "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "flaky", "language": "python"}))
    return counter


def test_a_kernel_that_does_not_start_is_started_again(tmp_path, monkeypatch):
    from ragcal.study.notebooks import KERNEL_STARTS

    script = tmp_path / "sum.py"
    script.write_text("# %%\nprint(1 + 1)\n")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "flaky"))
    counter = flaky_kernel(tmp_path / "flaky", failures=1)
    with pytest.warns(UserWarning, match="sum.py: the kernel did not start .*; starting another"):
        notebook = execute_notebook(script)
    assert notebook.cells[0]["outputs"][0]["text"] == "2\n" and counter.read_text() == "2"
    # A kernel that never starts: the last attempt's error, after KERNEL_STARTS starts.
    counter = flaky_kernel(tmp_path / "dead", failures=99)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "dead"))
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="Kernel died"):
        execute_notebook(script)
    assert counter.read_text() == str(KERNEL_STARTS)


def test_a_print_cut_into_several_messages_is_one_output(tmp_path):
    # Under load a kernel may send a print's text and its newline as two messages; the executed file must not
    # depend on that, or a re-run writes other bytes.
    script = tmp_path / "cut.py"
    script.write_text(
        "# %%\nimport sys, time\n"
        "print('largest difference: 0', end='')\nsys.stdout.flush()\ntime.sleep(0.5)\nprint()\n"
        "print('second line')\nsys.stdout.flush()\ntime.sleep(0.5)\nprint('to stderr', file=sys.stderr)\n"
    )
    notebook = execute_notebook(script, tmp_path / "cut.ipynb")
    outputs = [(output["name"], output["text"]) for output in notebook.cells[0]["outputs"]]
    assert outputs == [("stdout", "largest difference: 0\nsecond line\n"), ("stderr", "to stderr\n")]


def test_what_runs_after_the_slowest_notebook_runs_in_its_process_after_it(tmp_path):
    """``make reproduce`` runs the benchmarks' studies this way, in the notebooks' pool (``then``)."""
    import json
    import os

    from ragcal.study.notebooks import SLOWEST_NOTEBOOKS, _execute_runs

    source = tmp_path / "notebooks"
    source.mkdir()
    slowest, other = SLOWEST_NOTEBOOKS[0], "01_other"
    for name in (slowest, other):  # each prints the process that started its kernel
        (source / f"{name}.py").write_text("# %%\nimport os\nprint(os.getppid())\n")
    runs = [(other, tmp_path / "out", {}), (slowest, tmp_path / "out", {})]
    lines = []
    then = [(os.getpid, (), {}), (os.getpid, (), {})]
    done = _execute_runs(runs, jobs=2, log=lines.append, then=then, notebooks_dir=source)

    def kernel_parent(name):
        notebook = json.loads((tmp_path / "out" / f"{name}.ipynb").read_text())
        return int(notebook["cells"][0]["outputs"][0]["text"][0].strip())

    assert done[0] == done[1] == kernel_parent(slowest) != os.getpid()  # after it, in its process
    assert any(f"{slowest}.py and what runs after it (2 tasks)" in line for line in lines)
    # One job: the notebooks here, then the tasks, here too.
    assert _execute_runs(runs[1:], jobs=1, log=lines.append, then=then, notebooks_dir=source) == [os.getpid()] * 2
    assert kernel_parent(slowest) == os.getpid()
