"""``ragcal serve``: the real server in a subprocess, spoken to over loopback HTTP.

The corpus is the eight-page FastAPI slice plus one page at access level
``internal`` ("Zanzibarquux payroll"). The server serves ``public,internal``;
callers ask for ``public`` alone or for both, and a public caller must never
see the internal page.
"""

import json
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from ragcal.cli import main
from ragcal.gates import ThresholdGate, load_gate, read_gate_file, save_gate
from ragcal.retrieval.index import build_index

from conftest import write

COOKIE = "How do I set a cookie on the response?"
PAYROLL = "When are salaries paid by the payroll team?"
OFF_TOPIC = "What is a good recipe for banana bread?"
#: Marks of the internal page: its path, its title and words only its text uses (none is in PAYROLL).
INTERNAL_MARKS = ("internal/payroll.md", "Zanzibarquux", "signs off", "25th")
SERVED = "public,internal"
#: A hand-set gate: the cookie question is answered, the payroll one hedged at public+internal and refused at
#: public (its best public chunk scores about 0.11), the off-topic one refused.
GATE = ThresholdGate("dense_top1", 0.5, hedge_below=0.6)
START_TIMEOUT = 180.0


@pytest.fixture(scope="module")
def corpus(fastapi_slice, tmp_path_factory):
    root = tmp_path_factory.mktemp("serve_corpus")
    shutil.copytree(fastapi_slice.parent, root, dirs_exist_ok=True)  # docs/ and the docs_src/ they include
    write(
        root / "docs" / "internal" / "payroll.md",
        "---\naccess_level: internal\n---\n# Zanzibarquux payroll\n\n## Salary runs\n\n"
        "Salaries are paid on the 25th; the payroll team signs off every salary run.\n",
    )
    return root / "docs"


@pytest.fixture(scope="module")
def index(corpus, embedder):
    """The whole corpus (both levels), embedded into the session's cache, which the server then reads."""
    return build_index(corpus, embedder=embedder)


@pytest.fixture(scope="module")
def gate_path(index, tmp_path_factory):
    path = tmp_path_factory.mktemp("serve_gate") / "gate.json"
    return save_gate(path, GATE, rule="hand-set for tests", fitted={"n_calibration": 0}, provenance=index.config)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def request(url, body=None, *, content_type="application/json", method=None, timeout=60.0):
    """``(status, text)`` of one HTTP request; ``body`` is bytes, or any other value sent as JSON."""
    if body is not None and not isinstance(body, bytes):
        body = json.dumps(body).encode()
    headers = {"Content-Type": content_type} if content_type else {}
    method = method or ("GET" if body is None else "POST")
    prepared = urllib.request.Request(url, data=body, headers=headers, method=method)
    try:
        with urllib.request.urlopen(prepared, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.fixture(scope="module")
def server(corpus, gate_path, embedder, tmp_path_factory):
    """Base URL of a ``ragcal serve`` subprocess on a free loopback port; stopped by its process id afterwards."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("serve_log") / "server.log"
    command = [
        sys.executable, "-m", "ragcal", "serve", "--gate", str(gate_path), "--corpus", str(corpus),
        "--cache-dir", str(embedder.cache_dir), "--access", SERVED, "--port", str(port),
    ]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                pytest.fail(f"ragcal serve exited with {process.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                if request(f"{base}/healthz", timeout=2.0)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"ragcal serve did not answer /healthz in {START_TIMEOUT:.0f} s:\n{log_path.read_text()}")
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def decide(server, query, levels=None):
    body = {"query": query, **({"allowed_levels": levels} if levels is not None else {})}
    status, text = request(f"{server}/decide", body)
    assert status == 200, text
    return text


def assert_public(record: dict) -> None:
    """Nothing of the internal page in what a public caller gets back (the query itself aside)."""
    shown = json.dumps({key: value for key, value in record.items() if key != "query"}, ensure_ascii=False)
    assert not [mark for mark in INTERNAL_MARKS if mark in shown], shown


@pytest.mark.slow
@pytest.mark.parametrize("levels", [None, ["public"]], ids=["served-levels", "public"])
def test_decide_is_what_ask_json_prints(server, corpus, gate_path, embedder, levels, capsys):
    questions = [COOKIE, PAYROLL, OFF_TOPIC]
    access = SERVED if levels is None else ",".join(levels)
    common = ["ask", "--gate", str(gate_path), "--corpus", str(corpus), "--cache-dir", str(embedder.cache_dir)]
    assert main([*common, "--access", access, "--json", *questions]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) == len(questions)
    served = [decide(server, question, levels) for question in questions]
    for line, text in zip(printed, served):
        assert json.loads(text) == json.loads(line)
        assert text == line  # the same bytes, too: both are json.dumps(..., ensure_ascii=False)
    actions = [json.loads(text)["action"] for text in served]
    # The gate does all three things here, so the comparison covers answers, hedges and refusals alike.
    assert actions == (["answer", "hedge", "refuse"] if levels is None else ["answer", "refuse", "refuse"])


@pytest.mark.slow
def test_healthz(server, index):
    status, text = request(f"{server}/healthz")
    assert status == 200
    health = json.loads(text)
    assert health["status"] == "ok" and health["gate"] == "threshold"
    assert health["n_chunks"] == len(index.chunks) and health["levels"] == ["internal", "public"]
    assert health["model_fingerprint"] == index.config["model_fingerprint"]
    assert health["max_query_chars"] == 10_000


@pytest.mark.slow
def test_gate_endpoint_shows_the_gate_file(server, gate_path):
    status, text = request(f"{server}/gate")
    assert status == 200
    shown, document = json.loads(text), json.loads(gate_path.read_text())
    assert shown["kind"] == "threshold" and shown["format"] == document["format"]
    for key in ("gate", "rule", "fitted", "provenance"):
        assert shown[key] == document[key], key
    assert shown["provenance"]["model_fingerprint"]


#: (id, body: bytes sent as is or a value sent as JSON, Content-Type, field named, words of the message)
INVALID = [
    ("empty-query", {"query": ""}, "application/json", "query", "empty"),
    ("whitespace-query", {"query": " \n\t "}, "application/json", "query", "whitespace"),
    ("query-too-long", {"query": "x" * 10_001}, "application/json", "query", "at most 10,000 characters"),
    ("query-100000-chars", {"query": "x" * 100_000}, "application/json", "query", "100,000"),
    ("query-not-a-string", {"query": 5}, "application/json", "query", "string"),
    ("query-a-list", {"query": ["a", "b"]}, "application/json", "query", "string"),
    ("query-missing", {"allowed_levels": ["public"]}, "application/json", "query", "required"),
    ("lone-surrogate", b'{"query": "\\ud800 cookie"}', "application/json", "query", "Unicode"),
    ("level-not-served", {"query": COOKIE, "allowed_levels": ["secret"]}, "application/json", "allowed_levels",
     "secret not served here; this server serves internal, public"),
    ("one-level-not-served", {"query": COOKIE, "allowed_levels": ["public", "admin"]}, "application/json",
     "allowed_levels", "admin not served"),
    ("levels-a-string", {"query": COOKIE, "allowed_levels": "public"}, "application/json", "allowed_levels", "list"),
    ("levels-empty", {"query": COOKIE, "allowed_levels": []}, "application/json", "allowed_levels", "at least one"),
    ("level-not-a-string", {"query": COOKIE, "allowed_levels": [3]}, "application/json", "allowed_levels[0]",
     "string"),
    ("level-not-a-word", {"query": COOKIE, "allowed_levels": ["public; drop"]}, "application/json",
     "allowed_levels", "letters, digits"),
    ("unknown-field", {"query": COOKIE, "allowed_level": ["public"]}, "application/json", "allowed_level",
     "unknown field"),
    ("body-a-list", [COOKIE], "application/json", "body", "JSON object"),
    ("body-a-string", COOKIE, "application/json", "body", "JSON object"),
    ("malformed-json", b'{"query": "How do I', "application/json", "body", "malformed JSON"),
    ("not-utf8", b'\xff\xfe{"query"', "application/json", "body", "malformed JSON"),
    ("no-body", b"", "application/json", "body", "no body"),
    ("no-body-no-type", b"", None, "body", "no body"),
    ("json-null", b"null", "application/json", "body", "no body"),
    ("form-encoded", b"query=cookie", "application/x-www-form-urlencoded", "body", "JSON object"),
]


@pytest.mark.slow
@pytest.mark.parametrize("body, content_type, field, words", [case[1:] for case in INVALID],
                         ids=[case[0] for case in INVALID])
def test_bad_input_is_a_422_that_names_the_field(server, body, content_type, field, words):
    status, text = request(f"{server}/decide", body, content_type=content_type, method="POST")
    assert status == 422, text
    error = json.loads(text)
    assert error["message"].startswith(f"{field}: ") and words in error["message"], error["message"]
    assert [item["field"] for item in error["detail"]] == [field]
    assert "Traceback" not in text and "File \"" not in text
    assert len(text) < 1000  # the input is not echoed back


@pytest.mark.slow
def test_a_query_of_the_maximum_length_is_decided(server):
    record = json.loads(decide(server, ("How do I set a cookie? " * 500)[:10_000]))
    assert record["action"] in ("answer", "hedge", "refuse") and len(record["query"]) == 10_000


@pytest.mark.slow
def test_the_server_still_answers_after_bad_input(server):
    for body in ({"query": ""}, b"{", {"query": 5}):
        assert request(f"{server}/decide", body)[0] == 422
    assert json.loads(decide(server, COOKIE))["action"] == "answer"


@pytest.mark.slow
def test_concurrent_callers_at_different_levels_never_share_state(server):
    """8 threads interleave public and public+internal requests; each gets what it gets alone, public sees no leak."""
    cases = [(question, levels) for question in (PAYROLL, OFF_TOPIC, COOKIE) for levels in (["public"], None)]
    expected = {(question, str(levels)): decide(server, question, levels) for question, levels in cases}
    internal = json.loads(expected[(PAYROLL, "None")])  # the control: at public+internal the page is there to leak
    assert internal["passages"][0]["chunk_id"].startswith("internal/payroll.md#")
    assert "internal/payroll.md" in internal["message"]
    got, failures = [], []

    def caller(worker: int) -> None:
        try:
            for step in range(12):
                question, levels = cases[(worker + step) % len(cases)]
                got.append((question, str(levels), decide(server, question, levels)))
        except BaseException as error:  # reported below, with the thread's exception
            failures.append(repr(error))

    threads = [threading.Thread(target=caller, args=(worker,)) for worker in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not failures and len(got) == 8 * 12
    for question, levels, text in got:
        assert text == expected[(question, levels)], (question, levels)
        if levels == str(["public"]):
            assert_public(json.loads(text))


@pytest.mark.slow
def test_served_questions_are_not_written_to_the_embedding_cache(server, embedder):
    from ragcal.embedding import EmbeddingCache

    question = "Which header carries the session token after login? (asked only of the server)"
    decide(server, question)
    cache = EmbeddingCache(embedder.cache_dir / "embeddings.sqlite")
    try:
        assert cache.get(embedder.cache_key, [question], embedder.dimension) == {}
        assert cache.get(embedder.cache_key, [COOKIE], embedder.dimension)  # `ask` did write its questions
    finally:
        cache.close()


# ---------------------------------------------------------------------------------------- create_app in-process


@pytest.mark.slow
def test_create_app_leaves_the_index_as_it_was_and_refuses_levels_with_no_page(index, gate_path):
    from fastapi.testclient import TestClient

    from ragcal.serve import create_app

    gate = load_gate(gate_path, index=index)
    app = create_app(gate, index, allowed_levels=["public", "secret"], gate_document=read_gate_file(gate_path))
    with TestClient(app) as client:
        assert client.get("/healthz").json()["levels"] == ["public", "secret"]
        response = client.post("/decide", json={"query": COOKIE, "allowed_levels": ["secret"]})
        assert response.status_code == 422
        assert response.json()["message"] == "allowed_levels: no page of the corpus is at access level(s) secret"
        public = client.post("/decide", json={"query": PAYROLL})  # default: the served levels, here public only
        assert public.status_code == 200 and public.json()["action"] == "refuse"
        assert_public(public.json())
    assert index.dense.embedder.use_cache  # the copy that serves questions uses no cache, the index is untouched


def test_create_app_checks_its_arguments():
    from ragcal.serve import create_app

    with pytest.raises(TypeError, match="'gate' parameter of create_app must be a Gate"):
        create_app({"type": "threshold"}, None)
    with pytest.raises(ValueError, match="'max_query_chars' parameter of create_app must be an int >= 1. Got 0"):
        create_app(GATE, None, max_query_chars=0)


def test_without_fastapi_the_error_says_what_to_install(monkeypatch):
    from ragcal.serve import create_app

    monkeypatch.setitem(sys.modules, "fastapi", None)  # `import fastapi` now raises ImportError
    with pytest.raises(ImportError, match=r"needs fastapi.*pip install 'ragcal\[serve\]'"):
        create_app(GATE, None)


def test_ragcal_serve_without_fastapi_is_a_one_line_error(tmp_path):
    script = (
        "import sys\nsys.modules['fastapi'] = None\nfrom ragcal.cli import main\n"
        f"sys.exit(main(['serve', '--gate', {str(tmp_path / 'gate.json')!r}]))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "ragcal: error: ragcal serve needs fastapi, which is not installed: pip install 'ragcal[serve]'"
    ]


@pytest.mark.parametrize(
    "option, value, words",
    [("--port", "70000", "--port must be in 1..65535"), ("--port", "0", "--port must be in 1..65535"),
     ("--max-query-chars", "0", "--max-query-chars must be a positive"),
     ("--torch-threads", "0", "--torch-threads must be a positive")],
)
def test_ragcal_serve_refuses_bad_options_before_loading_anything(tmp_path, capsys, option, value, words):
    assert main(["serve", "--gate", str(tmp_path / "missing.json"), option, value]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_import_ragcal_and_serve_help_load_no_web_framework():
    code = (
        "import sys, contextlib, io\nimport ragcal\nfrom ragcal.cli import build_parser\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        build_parser().parse_args(['serve', '--help'])\n    except SystemExit:\n        pass\n"
        "print(','.join(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert not set(loaded.strip().split(",")) & {"fastapi", "starlette", "uvicorn", "pydantic"}
