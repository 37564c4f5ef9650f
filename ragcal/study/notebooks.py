"""Execute the notebooks headless (for ``make reproduce`` and the tests).

The notebooks are kept as percent-format scripts (``notebooks/*.py``, paired
with ``.ipynb`` through jupytext) so that their diffs can be reviewed. Running
one reads the script, injects parameters after the cell tagged
``parameters`` (as papermill does), executes it with nbclient and writes the
executed ``.ipynb``.
"""

from __future__ import annotations

import importlib.util
import os
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "NOTEBOOKS_DIR",
    "FIGURES_DIR",
    "RESULTS_DIR",
    "NOTEBOOKS",
    "PER_CORPUS_NOTEBOOKS",
    "execute_notebook",
    "execute_notebooks",
    "reproduce_figures",
    "reproduce_benchmark_figures",
    "notebook_score_table",
    "notebook_scored_index",
    "notebook_queries",
    "anchored_store_table",
    "results_anchor",
    "ANCHOR_VARIABLE",
]

_PACKAGE = Path(__file__).resolve().parents[1]
_CHECKOUT = _PACKAGE.parent
#: The notebook sources: ``notebooks/`` of the checkout, else the copy an installed wheel ships.
NOTEBOOKS_DIR = _CHECKOUT / "notebooks" if (_CHECKOUT / "notebooks").is_dir() else _PACKAGE / "_notebooks"
#: Figures of the FastAPI docs (other corpora get a subfolder named after them): the checkout's ``figures/``, or
#: ``figures/`` in the current folder for an installed wheel.
FIGURES_DIR = _CHECKOUT / "figures" if (_CHECKOUT / "notebooks").is_dir() else Path.cwd() / "figures"
#: Tables of ``make reproduce``, one folder per corpus (the same rule).
RESULTS_DIR = _CHECKOUT / "results" if (_CHECKOUT / "notebooks").is_dir() else Path.cwd() / "results"
NOTEBOOKS = (
    "01_score_distributions",
    "02_roc_and_auc",
    "03_threshold_sweep_and_heldout",
    "04_prototype_a_signal",
    "05_gates",
    "06_two_corpora",
    "07_new_signals",
    "08_selective_risk",
    "09_review_and_monitor",
    "10_benchmarks",
    "11_judge",
    "12_frameworks",
)
#: The notebook of a gate inside LangChain; it runs only where LangChain's stores are installed (``ragcal[frameworks]``).
FRAMEWORK_NOTEBOOK = "12_frameworks"
FRAMEWORK_MODULES = ("langchain_core", "langchain_community")
#: Notebooks that read ``results/<corpus>/`` (the corpora compared, or the committed gate and scores).
COMPARING_NOTEBOOKS = ("06_two_corpora", "08_selective_risk", "09_review_and_monitor")
#: The notebooks that take longest, longest first (seconds of one run as a script on the FastAPI docs, on this
#: 2-core machine: 20 to 31, 15 and 14; the others 3 to 7): started first when notebooks run in parallel.
SLOWEST_NOTEBOOKS = ("04_prototype_a_signal", "07_new_signals", "05_gates")
#: The notebook of an imported public benchmark (``ragcal reproduce --benchmark``), not run for the bundled corpora.
BENCHMARK_NOTEBOOK = "10_benchmarks"
#: The notebook of the judge study (``ragcal reproduce --judge``), run once on ``results/judge/``.
JUDGE_NOTEBOOK = "11_judge"


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


#: Kernel starts a notebook gets: a start can lose its ports to a kernel started at the same moment elsewhere.
KERNEL_STARTS = 3

#: Seconds one poll of a kernel channel waits before it looks again (see :func:`_poll_in_steps`).
POLL_STEP = 1.0


def _poll_in_steps(channel, step: float = POLL_STEP) -> None:
    """Make ``channel.get_msg(timeout)`` poll in short steps until its timeout, instead of once.

    Under load, one long zmq poll sometimes misses a message that arrives
    during it: the kernel has replied and is idle, but nbclient waits out the
    whole cell timeout (30 minutes here) and then fails the cell. This was seen
    on the cell that shows the threshold slider (widgets; nbclient issue 312).
    A fresh poll finds the waiting message at once, so polling in steps of
    ``step`` seconds bounds the delay by one step and keeps the timeout.
    """
    from queue import Empty

    get_msg = channel.get_msg

    async def get_msg_in_steps(timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = step if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return await get_msg(timeout=min(step, remaining))
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    channel.get_msg = get_msg_in_steps


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
    from nbconvert.preprocessors import CoalesceStreamsPreprocessor

    from .._io import atomic_write_text

    source = Path(source)
    for attempt in range(1, KERNEL_STARTS + 1):
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
        started = []

        def on_notebook_start(notebook, client=client, started=started):
            started.append(True)
            _poll_in_steps(client.kc.shell_channel)
            _poll_in_steps(client.kc.iopub_channel)

        client.on_notebook_start = on_notebook_start
        try:
            with _quiet_progress_bars():
                client.execute()
            break
        except RuntimeError as error:
            # A kernel that never came up: jupyter_client picks free ports, and a kernel started at the same time
            # in another process can take one first ("Address already in use"); a fresh start gets fresh ports.
            if started:
                raise
            # nbclient still calls its cleanup at exit, which needs a kernel manager: give it an idle one.
            client.km = client.create_kernel_manager()
            if attempt == KERNEL_STARTS:
                raise
            warnings.warn(f"{source.name}: the kernel did not start ({error}); starting another", stacklevel=2)
    _static_widget_outputs(notebook)
    # One output per run of the same stream: how a print's text is cut into messages depends on the kernel's
    # flush timing (under load, "...: 0" and its newline can come apart), so merged, the file does not.
    CoalesceStreamsPreprocessor().preprocess(notebook, {})
    if output is not None:
        atomic_write_text(output, nbformat.writes(notebook))
    return notebook


def execute_notebooks(*, names=NOTEBOOKS, output_dir=NOTEBOOKS_DIR, parameters=None, log=print) -> list[Path]:
    """Execute every notebook, writing ``<output_dir>/<name>.ipynb``."""
    names = list(names)
    written = []
    for position, name in enumerate(names, start=1):
        # Each notebook takes seconds to a minute: say which one runs and how many remain.
        log(f"executing {name}.py ({position} of {len(names)})")
        output = Path(output_dir) / f"{name}.ipynb"
        execute_notebook(NOTEBOOKS_DIR / f"{name}.py", output, parameters=parameters)
        log(f"executed {name}.py -> {output}")
        written.append(output)
    return written


#: Notebooks that are also run on every other bundled corpus, for its figures (their executed copies are not kept).
PER_CORPUS_NOTEBOOKS = (
    "01_score_distributions",
    "02_roc_and_auc",
    "03_threshold_sweep_and_heldout",
    "05_gates",
    "07_new_signals",
)


def _execute_to(name: str, folder, parameters, notebooks_dir=None) -> None:
    """Execute notebook ``name`` (of ``notebooks_dir``, :data:`NOTEBOOKS_DIR` when None) and write its executed copy to
    ``folder`` (made when missing)."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    source = Path(notebooks_dir or NOTEBOOKS_DIR) / f"{name}.py"
    execute_notebook(source, Path(folder) / f"{name}.ipynb", parameters=parameters)


def _execute_then(run, then, notebooks_dir=None) -> list:
    """Execute notebook ``run`` (``(name, folder, parameters)``), then each ``(function, args, kwargs)`` of ``then``;
    the results of ``then``."""
    _execute_to(*run, notebooks_dir)
    return [function(*args, **kwargs) for function, args, kwargs in then]


def _execute_runs(runs, *, jobs: int, log, then=(), notebooks_dir=None) -> list:
    """Execute ``(name, folder, parameters)`` runs, ``jobs`` at a time, saying what runs.

    ``then``: ``(function, args, kwargs)`` tasks run in the process of the slowest notebook, after it (in the order
    given); their results are returned. With one job they run here, after every notebook.
    """
    from .parallel import run_in_processes

    if jobs <= 1:
        for position, (name, folder, parameters) in enumerate(runs, start=1):
            log(f"executing {name}.py ({position} of {len(runs)})")
            _execute_to(name, folder, parameters, notebooks_dir)
            log(f"executed {name}.py -> {Path(folder) / f'{name}.ipynb'}")
        return [function(*args, **kwargs) for function, args, kwargs in then]
    # The slowest first, so that the last ones to finish are short and neither process waits long for the other.
    runs = sorted(runs, key=lambda run: SLOWEST_NOTEBOOKS.index(run[0]) if run[0] in SLOWEST_NOTEBOOKS else 99)
    log(f"executing {len(runs)} notebooks, {min(jobs, len(runs))} at a time: {', '.join(name for name, *_ in runs)}")
    started, done = time.perf_counter(), []

    def finished(position, _):
        done.append(position)
        name, folder, _ = runs[position]
        elapsed = time.perf_counter() - started
        after = f" and what runs after it ({len(then)} tasks)" if then and position == 0 else ""
        log(f"executed {name}.py{after} -> {Path(folder) / f'{name}.ipynb'} ({len(done)} of {len(runs)}, "
            f"{elapsed:.0f} s)")  # fmt: skip

    tasks = [(_execute_to, (*run, notebooks_dir), {}) for run in runs]
    if then:
        tasks[0] = (_execute_then, (runs[0], list(then), notebooks_dir), {})
    results = run_in_processes(tasks, jobs=jobs, on_done=finished)
    return results[0] if then else []


def reproduce_figures(corpora, *, figures_dir=None, results_dir=None, output_dir=None, jobs: int = 1,
                      then=(), log=print) -> list:  # fmt: skip
    """The figures of ``make reproduce``.

    The first corpus (FastAPI, the published one) runs every notebook and keeps
    the executed copies in ``notebooks/`` with figures in ``figures/``. Every
    other corpus runs :data:`PER_CORPUS_NOTEBOOKS` with its figures in
    ``figures/<name>/``. Notebooks that compare corpora (:data:`COMPARING_NOTEBOOKS`)
    run once, when there are two corpora or more.

    Parameters
    ----------
    figures_dir, results_dir, output_dir : str or Path, default=None
        Where figures go, where ``make reproduce`` wrote its tables, and where
        the executed notebooks go: :data:`FIGURES_DIR`, :data:`RESULTS_DIR`
        and :data:`NOTEBOOKS_DIR` when None.
    jobs : int, default=1
        Notebooks executed at once, each in its own process and kernel
        (:func:`ragcal.study.parallel.run_in_processes`), the slowest
        (:data:`SLOWEST_NOTEBOOKS`) first. Each writes the same bytes whatever
        runs beside it.
    then : sequence of (callable, tuple, dict), default=()
        Module-level tasks that need the study's results, not the figures
        (``make reproduce`` passes the public benchmarks' studies): they run
        in the process of the slowest notebook, after it, while the other
        process goes on with the notebooks, so that no core waits for them
        afterwards. Run one after the other, never beside the slowest notebook,
        they never fill the embedding cache at the same time as it
        (the first of :data:`SLOWEST_NOTEBOOKS` embeds SQuAD 2.0 on a cold cache).

    Returns
    -------
    list
        The results of ``then``, in its order.
    """
    import tempfile

    corpora = list(corpora)
    figures_dir = Path(figures_dir or FIGURES_DIR).resolve()
    results_dir = Path(results_dir or RESULTS_DIR).resolve()
    output_dir = Path(output_dir or NOTEBOOKS_DIR)
    # Only folders that differ from the notebooks' own defaults are injected, so that the executed notebooks of a
    # checkout carry no machine paths (and stay byte-identical from one machine to the next).
    folders = {}
    if figures_dir != FIGURES_DIR.resolve():
        folders["figures_dir"] = str(figures_dir)
    single = [
        name for name in NOTEBOOKS if name not in COMPARING_NOTEBOOKS and name not in (BENCHMARK_NOTEBOOK, JUDGE_NOTEBOOK)
    ]
    missing = [module for module in FRAMEWORK_MODULES if importlib.util.find_spec(module) is None]
    if missing:
        single.remove(FRAMEWORK_NOTEBOOK)
        log(f"{FRAMEWORK_NOTEBOOK} skipped: it needs LangChain's stores ({', '.join(missing)} not installed); "
            "pip install 'ragcal[frameworks]'")  # fmt: skip
    with tempfile.TemporaryDirectory() as scratch:
        # (notebook, where its executed copy goes, parameters): the first corpus's copies are kept.
        runs = [(name, output_dir, folders) for name in single]
        for spec in corpora[1:]:
            parameters = {
                "corpus_dir": str(spec.corpus),
                "queries_path": str(spec.queries),
                "figures_dir": str(figures_dir / spec.name),
            }
            runs += [(name, Path(scratch) / spec.name, parameters) for name in PER_CORPUS_NOTEBOOKS]
        if len(corpora) > 1:
            # They read only results/, which the study wrote before any notebook starts: the same pool runs them.
            comparing = dict(folders)
            if results_dir != RESULTS_DIR.resolve():
                comparing["results_dir"] = str(results_dir)
            runs += [(name, output_dir, comparing) for name in NOTEBOOKS if name in COMPARING_NOTEBOOKS]
        done = _execute_runs(runs, jobs=jobs, log=log, then=then)
    for spec in corpora[1:]:
        log(f"figures of {spec.title} written to {figures_dir / spec.name}/")
    return done


def reproduce_benchmark_figures(name: str, *, figures_dir=None, results_dir=None, output_dir=None, log=print):
    """Execute :data:`BENCHMARK_NOTEBOOK` on the results of ``ragcal reproduce --benchmark NAME``.

    Its figures go to ``figures/<name>/`` and the executed copy to
    ``notebooks/``; only folders that differ from the notebook's own defaults
    are injected (so the executed notebook of a checkout carries no machine paths).
    """
    figures_dir = Path(figures_dir or FIGURES_DIR / name).resolve()
    results_dir = Path(results_dir or RESULTS_DIR / name).resolve()
    parameters = {"benchmark": name}
    if figures_dir != (FIGURES_DIR / name).resolve():
        parameters["figures_dir"] = str(figures_dir)
    if results_dir != (RESULTS_DIR / name).resolve():
        parameters["results_dir"] = str(results_dir)
    return execute_notebooks(
        names=[BENCHMARK_NOTEBOOK], output_dir=Path(output_dir or NOTEBOOKS_DIR), parameters=parameters, log=log
    )


def reproduce_judge_figures(*, figures_dir=None, results_dir=None, output_dir=None, log=print):
    """Execute :data:`JUDGE_NOTEBOOK` on ``results/judge/`` (``ragcal reproduce --judge``): its figures go to
    ``figures/judge/`` and the executed copy to ``notebooks/``; only folders other than the notebook's defaults are
    injected."""
    figures_dir = Path(figures_dir or FIGURES_DIR / "judge").resolve()
    results_dir = Path(results_dir or RESULTS_DIR / "judge").resolve()
    parameters = {}
    if figures_dir != (FIGURES_DIR / "judge").resolve():
        parameters["figures_dir"] = str(figures_dir)
    if results_dir != (RESULTS_DIR / "judge").resolve():
        parameters["results_dir"] = str(results_dir)
    return execute_notebooks(
        names=[JUDGE_NOTEBOOK], output_dir=Path(output_dir or NOTEBOOKS_DIR), parameters=parameters, log=log
    )


def _bundled_inputs(queries_path, corpus_dir) -> tuple:
    """A notebook's corpus and labeled set: the bundled FastAPI ones where its parameters leave them out."""
    from ..datasets import FASTAPI_CORPUS, FASTAPI_QUERIES, default_exclude

    corpus_dir = corpus_dir or FASTAPI_CORPUS
    return queries_path or FASTAPI_QUERIES, corpus_dir, default_exclude(corpus_dir)


#: Set by ``ragcal reproduce`` for the notebooks it executes: the results folder whose committed dense scores and
#: score tables a notebook's own are anchored to (:mod:`ragcal.study.anchoring`), as the study's were.
ANCHOR_VARIABLE = "RAGCAL_ANCHOR_RESULTS"


def results_anchor(name: str):
    """The anchor of bundled corpus ``name`` in a notebook that ``ragcal reproduce`` runs; None elsewhere."""
    from .anchoring import Anchor

    root = os.environ.get(ANCHOR_VARIABLE)
    return Anchor(Path(root) / name, label=name) if root else None


def anchored_store_table(table, name: str = "fastapi", *, columns=("dense_top1",)):
    """A score table computed through a framework's store, anchored when ``ragcal reproduce`` runs the notebook.

    The store's ``columns`` within their declared tolerance of the committed
    ``results/<name>/scores.csv`` take the committed values (the questions'
    ``id``, ``query``, ``answerable`` and ``slice`` must match), so that what
    the notebook fits and draws from them is rewritten byte for byte on any
    processor. Elsewhere (a reader's own run, the tests) the table is
    returned as the store computed it.
    """
    anchor = results_anchor(name)
    if anchor is None:
        return table
    return anchor.table(table, columns=("id", "query", "answerable", "slice", *columns))


def _notebook_anchor(queries_path, corpus_dir):
    """:func:`results_anchor` of the bundled corpus whose corpus and queries a notebook uses; None for others."""
    from ..datasets import BUNDLED, bundled

    for name in BUNDLED:
        spec = bundled(name)
        if Path(spec.corpus).resolve() == Path(corpus_dir).resolve() and (
            Path(spec.queries).resolve() == Path(queries_path).resolve()
        ):
            return results_anchor(name)
    return None


def _scored(queries_path, corpus_dir, exclude):
    """:func:`ragcal.scoring.score_query_file`, anchored as the study is when ``ragcal reproduce`` runs the notebook.

    The dense scores are anchored before the signals are computed from them, so a signal the notebook registers
    (a prototype) is computed from the committed scores too.
    """
    from ..queries import load_queries
    from ..retrieval.index import build_index
    from ..scoring import score_query_file, score_table

    anchor = _notebook_anchor(queries_path, corpus_dir)
    if anchor is None:
        return score_query_file(queries_path, corpus_dir, exclude=exclude)
    index = build_index(corpus_dir, exclude=exclude)  # the bundled corpus and its queries, checked by the study
    queries = load_queries(queries_path, corpus_paths=index.doc_paths)
    retrieved = anchor.retrieved(index.retrieve(queries["query"]), queries["id"])
    return anchor.table(score_table(queries, retrieved)), index, retrieved


def notebook_score_table(scores_path=None, *, queries_path=None, corpus_dir=None):
    """The score table a notebook works on.

    ``scores_path`` when given: an existing score table CSV (for instance
    scores logged in production), read and checked, with nothing retrieved.
    Else the table is computed by :func:`ragcal.scoring.score_query_file`
    from ``corpus_dir`` and ``queries_path``, each the bundled FastAPI one
    when None (with the bundled corpus's non-doc pages left out).
    """
    from ..score_tables import check_score_table, read_csv_table

    if scores_path is not None:
        return check_score_table(read_csv_table(scores_path), source=str(scores_path))
    queries_path, corpus_dir, exclude = _bundled_inputs(queries_path, corpus_dir)
    table, _, _ = _scored(queries_path, corpus_dir, exclude)
    return table


def notebook_scored_index(*, queries_path=None, corpus_dir=None):
    """``(table, index, retrieved)`` of :func:`ragcal.scoring.score_query_file` on a notebook's corpus and queries."""

    queries_path, corpus_dir, exclude = _bundled_inputs(queries_path, corpus_dir)
    return _scored(queries_path, corpus_dir, exclude)


def notebook_queries(index, *, queries_path=None, corpus_dir=None):
    """The labeled queries (with their gold pages) of a notebook's corpus, checked against ``index``'s pages."""
    from ..queries import load_queries

    queries_path, _, _ = _bundled_inputs(queries_path, corpus_dir)
    return load_queries(queries_path, corpus_paths=index.doc_paths)
