"""The threshold slider of notebook 01 and the review labeler, driven in JupyterLab by a real browser.

JupyterLab serves a copy of notebook 01 from a temporary folder (its figures go there too). Headless Chromium
(Debian's ``chromium`` and ``chromium-driver``), driven by Selenium, runs every cell, presses the arrow key on the
slider handle and reads what the widget shows. The plot must be redrawn and the per-slice counts must be those of
:func:`ragcal.metrics.outcome_table`, computed here on the same score table, at the slider's threshold.

Outside CI the test is skipped when the browser, its driver or Selenium is missing; in CI (``CI=true``) it fails
instead, so that a missing install is caught (``.ci/run`` installs the browser).

A second test serves a two-cell notebook showing :class:`ragcal.interactive.Labeler` over a hand-written review CSV,
labels three questions by clicking, reloads the page, runs the notebook again, and checks that the file holds the
three labels and that the labeler resumes at the fourth question.
"""

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import ragcal
from ragcal.metrics import outcome_table
from ragcal.study.notebooks import NOTEBOOKS_DIR

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)
NOTEBOOK = "01_score_distributions"
ARROW_PRESSES = 4
# Seconds. The kernel loads the model and scores the labeled set through the (warm) embedding cache.
SERVER_TIMEOUT, RUN_ALL_TIMEOUT, REDRAW_TIMEOUT, SETTLED_FOR = 60, 240, 60, 2.0
COUNT = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")

# What the notebook shows, read in one script so that a redraw cannot detach an element between two reads.
# Error outputs render as stderr text with a traceback in JupyterLab 4 (and as their own MIME type elsewhere).
READ_NOTEBOOK = """
const isError = (output) => output.dataset.mimeType === 'application/vnd.jupyter.error'
    || output.textContent.includes('Traceback');
const indicator = document.querySelector('.jp-NotebookPanel .jp-Notebook-ExecutionIndicator');
const innermostErrors = [...document.querySelectorAll('.jp-Notebook .jp-OutputArea-output')]
    .filter((output) => isError(output) && ![...output.querySelectorAll('.jp-OutputArea-output')].some(isError));
const state = {
    status: indicator ? indicator.dataset.status : null,
    prompts: [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]
        .map((prompt) => prompt.textContent.trim()),
    errors: innermostErrors.map((output) => output.textContent.slice(0, 2000)),
    widget: null,
};
const slider = document.querySelector('.jp-Notebook .widget-slider');
const box = slider && slider.closest('.widget-vbox');
const output = box && box.querySelector('.widget-output');
if (output) {
    const image = output.querySelector('img');
    state.widget = {
        signal: slider.querySelector('.widget-label').textContent.trim(),
        readout: slider.querySelector('.widget-readout').textContent.trim(),
        image: image ? image.getAttribute('src') : null,
        rows: [...output.querySelectorAll('table tbody tr')]
            .map((row) => [...row.children].map((cell) => cell.textContent.trim())),
    };
}
return state;
"""


def missing(reason):
    """Skip on a developer's machine; fail in CI, where the browser must be installed."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the browser test must run in CI)")
    pytest.skip(reason)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_json(path, value):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")


def descendants(process):
    """The processes that ``process`` started (and they started), while they still run."""
    import psutil

    try:
        return psutil.Process(process.pid).children(recursive=True)
    except (AttributeError, psutil.NoSuchProcess):
        return []


def stop(process, started=None, *, timeout=30):
    """Terminate ``process`` (kill it after ``timeout``), then kill any of ``started`` still running.

    ``started`` defaults to the descendants of ``process`` now; pass them when something else ends it first.
    """
    import psutil

    started = descendants(process) if started is None else started
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)
    _, alive = psutil.wait_procs(started, timeout=5)
    for leftover in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            leftover.kill()
    psutil.wait_procs(alive, timeout=5)


def shown_counts(rows):
    """``(answered or refused, group size)`` per group row: the first cell that reads ``k/n``."""
    counts = []
    for row in rows:
        cells = [COUNT.fullmatch(cell) for cell in row]
        match = next((cell for cell in cells if cell), None)
        assert match, f"no 'k/n' count in the counts row {row}"
        counts.append((int(match[1]), int(match[2])))
    return tuple(counts)


def counts_within_readout(table, signal, readout):
    """Every per-group ``(k, n)`` that ``outcome_table`` gives at a threshold the readout rounds from.

    The readout shows a few decimals of the slider's value; the counts only change at a score, so the
    thresholds worth trying are both ends of the rounding interval and every score inside it and just above it.
    """
    decimals = len(readout.partition(".")[2])
    half = 0.5 * 10.0**-decimals * (1 + 1e-9)
    low, high = float(readout) - half, float(readout) + half
    scores = table[signal].dropna().to_numpy(dtype=float)
    inside = scores[(scores >= low) & (scores < high)]
    thresholds = np.concatenate([[low, high], inside, np.nextafter(inside, np.inf)])
    outcome = outcome_table(table, signal, thresholds, intervals=False)
    count_columns = [column for column in outcome.columns if column.endswith("_k")]
    size_columns = [column[: -len("_k")].rsplit("_", 1)[0] + "_n" for column in count_columns]
    return {
        tuple((int(row[count]), int(row[size])) for count, size in zip(count_columns, size_columns))
        for _, row in outcome.iterrows()
    }


@pytest.fixture
def selenium_webdriver():
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not path.is_file():
            missing(f"{path} not found: apt-get install {package}")
    try:
        from selenium import webdriver
    except ImportError:
        missing("selenium is not installed: pip install -e '.[dev]'")
    return webdriver


@pytest.fixture
def score_table(fastapi_index):
    """The table notebook 01 scores with its default parameters: the bundled FastAPI docs and labeled set.

    ``fastapi_index`` warms the shared embedding cache (once per session), which the kernel reads too.
    """
    from ragcal.study.notebooks import notebook_score_table

    return notebook_score_table()


@pytest.fixture
def notebook_folder(tmp_path):
    """A folder holding notebook 01 as a plain ``.ipynb`` whose figures go to ``tmp_path / "figures"``."""
    import jupytext
    import nbformat

    notebook = jupytext.read(NOTEBOOKS_DIR / f"{NOTEBOOK}.py")
    notebook.metadata.pop("jupytext", None)  # nothing to pair with: the committed files are never written
    parameters = next(
        position for position, cell in enumerate(notebook.cells) if "parameters" in cell.metadata.get("tags", [])
    )
    injected = f"figures_dir = {str(tmp_path / 'figures')!r}"
    notebook.cells.insert(
        parameters + 1, nbformat.v4.new_code_cell(injected, metadata={"tags": ["injected-parameters"]})
    )
    folder = tmp_path / "lab"
    folder.mkdir()
    nbformat.write(notebook, folder / f"{NOTEBOOK}.ipynb")
    return folder


def start_kernel_session(url: str, path: str) -> None:
    """Start the notebook's kernel through the REST API before the page opens it.

    JupyterLab then attaches the page to this session. Without it, a page
    opened while the machine is busy sometimes showed "Select Kernel" with "No
    Kernel" preselected (twice in CI), and Run All then had nothing to run.
    """
    body = json.dumps({"path": path, "type": "notebook", "name": path, "kernel": {"name": "python3"}}).encode()
    request = urllib.request.Request(
        f"{url}/api/sessions", data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 201, response.status


@contextlib.contextmanager
def serving_lab(tmp_path, folder):
    """JupyterLab on a free local port, without token or password, serving ``folder``; yields its URL."""
    settings = tmp_path / "lab-settings"
    # Every cell stays in the page (no windowing), and no news or update check. The preferred kernel starts without
    # asking: under load (CI, the wheel's reproduce on the other worker) JupyterLab could open the notebook before it
    # knew its kernel specs and ask with "Select Kernel", "No Kernel" preselected, which lost Run All (seen in CI).
    write_json(
        settings / "@jupyterlab/notebook-extension/tracker.jupyterlab-settings",
        {"windowingMode": "none", "autoStartDefaultKernel": True},
    )
    write_json(
        settings / "@jupyterlab/apputils-extension/notification.jupyterlab-settings",
        {"fetchNews": "false", "checkForUpdates": False},
    )
    checkout = str(Path(ragcal.__file__).resolve().parent.parent)
    env = {
        **os.environ,
        # The kernel imports the ragcal that this test imports.
        "PYTHONPATH": os.pathsep.join(filter(None, [checkout, os.environ.get("PYTHONPATH")])),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "lab-workspaces"),
    }
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "jupyter-lab.log"
    command = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--allow-root",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        "--IdentityProvider.token=",
        "--ServerApp.password=",
        # A loopback server without auth, for this test only: the REST call that starts the kernel needs no cookie.
        "--ServerApp.disable_check_xsrf=True",
        f"--ServerApp.root_dir={folder}",
    ]
    with open(log_path, "wb") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + SERVER_TIMEOUT
            while True:
                if server.poll() is not None:
                    pytest.fail(f"jupyter lab exited with {server.returncode}:\n{log_path.read_text()[-3000:]}")
                try:
                    with urllib.request.urlopen(f"{url}/api/status", timeout=2):
                        break
                except OSError:
                    if time.monotonic() > deadline:
                        pytest.fail(f"jupyter lab did not answer within {SERVER_TIMEOUT} s; see {log_path}")
                    time.sleep(0.25)
            yield url
        finally:
            stop(server)


@pytest.fixture
def jupyter_lab(tmp_path, notebook_folder):
    """JupyterLab serving ``notebook_folder`` (see :func:`serving_lab`); yields its URL."""
    with serving_lab(tmp_path, notebook_folder) as url:
        yield url


@pytest.fixture
def browser(tmp_path, selenium_webdriver):
    """Headless Chromium with a fresh profile, driven through Debian's chromedriver."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service

    options = selenium_webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    service = Service(str(CHROMEDRIVER), log_output=str(tmp_path / "chromedriver.log"))
    driver = None
    try:
        driver = selenium_webdriver.Chrome(options=options, service=service)
        yield driver
    finally:
        driver_process = getattr(service, "process", None)
        browser_processes = descendants(driver_process)  # before quit() ends chromedriver, their parent
        if driver is not None:
            with contextlib.suppress(WebDriverException):  # the browser may be gone already; stop() ends the rest
                driver.quit()
        stop(driver_process, browser_processes)


def wait_until(driver, condition, timeout, message, *, script=None):
    """Poll ``condition(state)`` on the notebook state until it returns something truthy; return that.

    ``script`` reads the state (default: ``READ_NOTEBOOK``).
    """
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    seen = {}

    def check(driver):
        seen["state"] = driver.execute_script(script or READ_NOTEBOOK)
        return condition(seen["state"])

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.25).until(check)
    except TimeoutException:
        state = seen.get("state") or {}
        raise AssertionError(
            f"{message} within {timeout} s; last seen: kernel {state.get('status')!r}, prompts {state.get('prompts')}"
        ) from None


def wait_until_settled(driver, timeout):
    """The notebook state once the kernel is idle and the widget has not changed for ``SETTLED_FOR`` seconds."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        state = driver.execute_script(READ_NOTEBOOK)
        if state["widget"] != (last or {}).get("widget") or state["status"] != "idle":
            since = time.monotonic()
        elif time.monotonic() - since >= SETTLED_FOR:
            return state
        last = state
        time.sleep(0.25)
    raise AssertionError(f"the widget kept changing or the kernel stayed busy for {timeout} s")


def dismiss_dialogs(driver) -> list[str]:
    """Close every open JupyterLab dialog with its default button (Escape when it has none); return their texts.

    A modal dialog that opens while the notebook loads takes every click meant
    for the menu bar. The one seen (CI, and a local run under load) is
    "Select Kernel" with "No Kernel" preselected; the Python kernel is picked
    before it is accepted.
    """
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    from selenium.webdriver.support.ui import Select

    texts = []
    for dialog in driver.find_elements(By.CSS_SELECTOR, ".jp-Dialog"):
        texts.append(" ".join(dialog.text.split()))
        # "Select Kernel" (seen in CI under load) preselects "No Kernel": accepting it leaves Run All with nothing
        # to run. Pick the notebook's Python kernel first.
        for choice in dialog.find_elements(By.CSS_SELECTOR, "select"):
            options = [option.text for option in Select(choice).options]
            python = next((text for text in options if text.startswith("Python 3")), None)
            if python is not None:
                Select(choice).select_by_visible_text(python)
        buttons = dialog.find_elements(By.CSS_SELECTOR, ".jp-Dialog-button.jp-mod-accept")
        if buttons:
            buttons[0].click()
        else:
            dialog.send_keys(Keys.ESCAPE)
    if texts:
        print(f"dismissed JupyterLab dialog(s): {texts}")
    return texts


def run_all_cells(driver, attempts=5, started_within=45):
    """Run › Run All Cells, from the menu bar, until a cell shows it ran or is running.

    A click on a menu that is still opening can be lost; it is repeated (up to
    ``attempts`` times) when no prompt changes within ``started_within`` seconds.
    Under load (a CI run with the wheel's reproduce on the other worker) the
    kernel may be slow to start and JupyterLab asks for a kernel again: hence
    five tries of 45 seconds.
    An open dialog is dismissed first (and again when it takes the click).
    """
    from selenium.common.exceptions import ElementClickInterceptedException
    from selenium.webdriver.common.by import By

    dismissed = []
    for attempt in range(attempts):
        dismissed += dismiss_dialogs(driver)
        try:
            menu = next(
                item for item in driver.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item") if item.text == "Run"
            )
            menu.click()
            entries = driver.find_elements(By.CSS_SELECTOR, ".lm-Menu-content .lm-Menu-item .lm-Menu-itemLabel")
            next(entry for entry in entries if entry.text == "Run All Cells").click()
        except ElementClickInterceptedException:
            time.sleep(1)
            continue
        deadline = time.monotonic() + started_within
        while time.monotonic() < deadline:
            prompts = driver.execute_script(READ_NOTEBOOK)["prompts"]
            if any(re.fullmatch(r"\[(\*|\d+)\]:", prompt) for prompt in prompts):
                return
            time.sleep(0.25)
    raise AssertionError(f"Run All Cells started no cell in {attempts} tries (dialogs dismissed: {dismissed})")


@pytest.mark.slow
def test_threshold_slider_redraws_and_counts_follow_it(selenium_webdriver, score_table, jupyter_lab, browser, tmp_path):
    # selenium_webdriver comes first: a missing browser skips (or fails, in CI) before anything is computed.
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    try:
        start_kernel_session(jupyter_lab, f"{NOTEBOOK}.ipynb")
        browser.get(f"{jupyter_lab}/lab/tree/{NOTEBOOK}.ipynb")
        wait_until(
            browser,
            lambda state: state["status"] == "idle" and state["prompts"],
            SERVER_TIMEOUT,
            "the notebook did not open with an idle kernel",
        )
        for attempt in range(2):
            # Now and then the menu click runs only the first cell (the others stay "[ ]:", never queued); the
            # kernel is then idle with cells left, and Run All Cells is chosen once more.
            run_all_cells(browser)
            state = wait_until(
                browser,
                lambda state: (
                    state
                    if state["status"] == "idle"
                    and "[*]:" not in state["prompts"]
                    and any(re.fullmatch(r"\[\d+\]:", prompt) for prompt in state["prompts"])
                    else None
                ),
                RUN_ALL_TIMEOUT,
                "Run All Cells did not finish",
            )
            if state["errors"] or all(re.fullmatch(r"\[\d+\]:", prompt) for prompt in state["prompts"]):
                break
        assert not state["errors"], "a cell shows an error:\n" + "\n\n".join(state["errors"])
        assert all(re.fullmatch(r"\[\d+\]:", prompt) for prompt in state["prompts"]), (
            f"not every cell ran: {state['prompts']}"
        )

        before = wait_until(
            browser,
            lambda state: state["widget"] and state["widget"]["image"] and state["widget"]["rows"] and state,
            REDRAW_TIMEOUT,
            "the slider widget shows no plot or no counts",
        )["widget"]
        signal = before["signal"]
        assert signal in score_table.columns, f"the slider is labelled {signal!r}, not a score table column"
        assert shown_counts(before["rows"]) in counts_within_readout(score_table, signal, before["readout"]), (
            f"counts {before['rows']} at the first readout {before['readout']}"
        )

        handle = browser.find_element(By.CSS_SELECTOR, ".jp-Notebook .widget-slider .noUi-handle")
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'}); arguments[0].focus();", handle)
        keys = ActionChains(browser)
        for _ in range(ARROW_PRESSES):
            keys.send_keys(Keys.ARROW_RIGHT)
        keys.perform()
        wait_until(
            browser,
            lambda state: state["widget"] and state["widget"]["readout"] != before["readout"],
            REDRAW_TIMEOUT,
            f"the readout stayed at {before['readout']} after {ARROW_PRESSES} arrow presses",
        )
        wait_until(
            browser,
            lambda state: state["widget"] and state["widget"]["rows"] != before["rows"],
            REDRAW_TIMEOUT,
            "the counts did not change",
        )
        state = wait_until_settled(browser, REDRAW_TIMEOUT)
        after = state["widget"]

        assert not state["errors"], "an error after moving the slider:\n" + "\n\n".join(state["errors"])
        assert float(after["readout"]) > float(before["readout"])
        assert after["image"] and after["image"] != before["image"], "the plot was not redrawn"
        shown = shown_counts(after["rows"])
        assert shown != shown_counts(before["rows"])
        expected = counts_within_readout(score_table, signal, after["readout"])
        assert shown in expected, (
            f"at readout {after['readout']} the widget shows {after['rows']}; "
            f"outcome_table gives (k, n) per group {sorted(expected)}"
        )
    except BaseException:
        with contextlib.suppress(WebDriverException, OSError):  # evidence for a failure, kept in tmp_path
            browser.save_screenshot(str(tmp_path / "failure.png"))
            (tmp_path / "failure.html").write_text(browser.page_source, encoding="utf-8")
        raise


# The labeler's state, read with the notebook's: what it shows and its controls' values.
READ_LABELER = (
    READ_NOTEBOOK.removesuffix("return state;\n")
    + """
const labeler = document.querySelector('.jp-Notebook .ragcal-labeler');
// ipywidgets puts a zero-width space in front of a description.
const clean = (element) => element.textContent.replaceAll('\u200b', '').trim();
const text = (name) => clean(labeler.querySelector('.' + name));
state.labeler = labeler && {
    position: text('ragcal-position'),
    query: text('ragcal-query'),
    status: text('ragcal-status'),
    gold: [...labeler.querySelectorAll('.ragcal-gold')].map(clean),
};
return state;
"""
)
LABELER_ROWS = 5
LABELER_PAGES = (
    ("tutorial/cors.md", "advanced/middleware.md"),
    ("tutorial/security/oauth2-jwt.md", "tutorial/cors.md"),
    ("deployment/docker.md", ""),
    ("tutorial/bigger-applications.md", "tutorial/cors.md"),
    ("advanced/events.md", "advanced/settings.md"),
)
# Clicked in the browser: (row, button, slice chosen first or None, gold pages ticked), and what the file must hold.
LABELER_CLICKS = (
    (0, "answerable", None, ("advanced/middleware.md",)),
    (1, "not answerable", "unrelated", ()),
    (2, "not answerable", "near-domain", ()),
)
LABELER_EXPECTED = (
    ("true", "answerable", "advanced/middleware.md"),
    ("false", "unrelated", ""),
    ("false", "near-domain", ""),
    ("", "", ""),
    ("", "", ""),
)


def review_csv(path):
    """A review CSV of ``LABELER_ROWS`` unlabeled rows, two passages each, as ``ragcal review`` writes them."""
    import csv

    header = ["id", "query", "answerable", "slice", "gold", "decision", "score", "stratum", "stratum_size"]
    header += ["stratum_sampled", "page_1", "heading_1", "text_1", "page_2", "heading_2", "text_2"]
    with open(path, "w", encoding="utf-8", newline="") as stream:
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(header)
        for row, pages in enumerate(LABELER_PAGES):
            passages = []
            for page in pages:
                passages += [
                    page,
                    f"{page} > Section" if page else "",
                    f"Text of {page}, with a comma." if page else "",
                ]
            writer.writerow(
                [f"live-{row + 1}", f"Question {row + 1}: how do I do thing {row + 1}?", "", "", ""]
                + ["refuse", f"0.{40 + row}1", "refuse/near", "10", "5", *passages]
            )
    return path


def review_labels(path):
    import pandas as pd

    cells = pd.read_csv(path, dtype=str, keep_default_na=False)
    return tuple(tuple(row) for row in cells[["answerable", "slice", "gold"]].itertuples(index=False))


@pytest.fixture
def labeler_lab(tmp_path):
    """JupyterLab serving a notebook that shows ``Labeler(review.csv).widget()``; yields its URL and the CSV."""
    import nbformat

    review = review_csv(tmp_path / "review.csv")
    folder = tmp_path / "labeler-lab"
    folder.mkdir()
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell("from ragcal.interactive import Labeler"),
        nbformat.v4.new_code_cell(f"Labeler({str(review)!r}).widget()"),
    ]
    # A kernel named in the notebook, so that JupyterLab opens it without asking for one.
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(notebook, folder / "labeler.ipynb")
    with serving_lab(tmp_path, folder) as url:
        yield url, review


def labeler_shows(state, row):
    """``state`` when the labeler shows all of ``row`` (0-based): position, question and gold checkboxes; else None.

    The widget's parts update one message at a time, and the checkboxes come last: the position alone can already
    be the next row's while the question is still the last one's.
    """
    shown = state["labeler"]
    if not shown or not shown["position"].startswith(f"{row + 1} / {LABELER_ROWS}"):
        return None
    if f"Question {row + 1}:" not in shown["query"]:
        return None
    return state if shown["gold"] == [page for page in LABELER_PAGES[row] if page] else None


def run_labeler_notebook(browser, row):
    """Run the labeler notebook the page shows; return the state once the labeler shows ``row``. No cell may fail."""
    wait_until(
        browser,
        # Both cells in the page: a Run All clicked before then can be lost.
        lambda state: state["status"] == "idle" and len(state["prompts"]) == 2,
        SERVER_TIMEOUT,
        "the notebook did not open with an idle kernel",
    )
    run_all_cells(browser)
    state = wait_until(
        browser,
        lambda state: (
            state
            if state["status"] == "idle"
            and all(re.fullmatch(r"\[\d+\]:", prompt) for prompt in state["prompts"])
            and labeler_shows(state, row)
            else None
        ),
        RUN_ALL_TIMEOUT,
        f"Run All Cells did not show the labeler at question {row + 1}",
        script=READ_LABELER,
    )
    assert not state["errors"], "a cell shows an error:\n" + "\n\n".join(state["errors"])
    return state


@pytest.mark.slow
def test_labels_clicked_in_the_labeler_are_in_the_file_after_a_reload(
    selenium_webdriver, labeler_lab, browser, tmp_path
):
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    url, review = labeler_lab
    try:
        start_kernel_session(url, "labeler.ipynb")
        browser.get(f"{url}/lab/tree/labeler.ipynb")
        state = run_labeler_notebook(browser, 0)
        first_prompts = state["prompts"]
        for row, button, slice_name, gold in LABELER_CLICKS:
            labeler = browser.find_element(By.CSS_SELECTOR, ".jp-Notebook .ragcal-labeler")
            if slice_name:
                Select(labeler.find_element(By.CSS_SELECTOR, ".ragcal-slice select")).select_by_visible_text(slice_name)
            for box in labeler.find_elements(By.CSS_SELECTOR, ".ragcal-gold"):
                if box.text.replace("\u200b", "").strip() in gold:
                    box.find_element(By.CSS_SELECTOR, "input[type=checkbox]").click()
            control = labeler.find_element(By.CSS_SELECTOR, ".ragcal-" + button.replace(" ", "-"))
            browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", control)
            control.click()
            state = wait_until(
                browser,
                lambda state, row=row: labeler_shows(state, row + 1),
                REDRAW_TIMEOUT,
                f"the labeler did not move on from row {row + 1} after '{button}'",
                script=READ_LABELER,
            )
            assert state["labeler"]["status"].startswith(f"saved row {row + 1}"), state["labeler"]["status"]
        assert review_labels(review) == LABELER_EXPECTED

        browser.refresh()
        state = run_labeler_notebook(browser, 3)  # resumes at the 4th question
        assert state["prompts"] != first_prompts, "the cells were not run again after the reload"
        assert "labeled 3 / 5" in state["labeler"]["position"]
        assert review_labels(review) == LABELER_EXPECTED
    except BaseException:
        with contextlib.suppress(WebDriverException, OSError):  # evidence for a failure, kept in tmp_path
            browser.save_screenshot(str(tmp_path / "failure.png"))
            (tmp_path / "failure.html").write_text(browser.page_source, encoding="utf-8")
        raise
