"""MiniLM's top-1 scores computed on an emulated processor, against the committed ones and this machine's.

    python benchmarks/emulated_processor.py [--cpu EPYC-Milan-v1] [--corpus fastapi] [--questions a25,a73]

No AMD or Arm machine is at hand, but QEMU's user-mode emulator (Debian's ``qemu-user``: ``apt-get install
qemu-user``) runs this machine's Python under another processor's identity: with ``-cpu EPYC-Milan-v1`` the process
sees an AMD EPYC's vendor, family and instruction sets, so MKL, oneDNN, OpenBLAS and faiss take the code paths they
take on that processor. The instructions are emulated exactly (FMA included), so the bits are those of the real
processor as long as the libraries pick their paths from what the processor reports.

For each question, in a fresh process, natively and then emulated, with the pinned kernels of
:data:`ragcal.numerics.PINNED_ENVIRONMENT` and no cache: the question and its committed top-1 chunk (from the
committed dense run) are embedded and scored with faiss's inner product, as the index does. Printed per question:
the committed ``dense_top1``, the native and the emulated score, the emulated score's distance from the committed one
and the share of its declared tolerance (``ragcal.study.anchoring.tolerance_for``), and the midpoint of consecutive
questions' scores (a threshold fitted between them sits there). Then both runs' seconds. Nothing is asserted.

Emulation is slow: a matrix product runs about 10,000 times slower than natively, so MiniLM takes about 1.5 s per
token. The default two questions and their chunks (about 345 tokens) took 579 s emulated against 7.0 s natively, most
of that loading. Keep to a few short questions. Under ``qemu-user`` the process reads the host's
``/proc/cpuinfo``, so :func:`ragcal.embedding.minilm.processor_model` names the host: this script never touches an
embedding cache for that reason.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from ragcal.numerics import PINNED_ENVIRONMENT
from ragcal.runs import read_trec_run
from ragcal.study.anchoring import tolerance_for, within_tolerance

RESULTS = Path(__file__).resolve().parent.parent / "results"

RUN = """
import json, sys
import faiss
from ragcal.datasets import BUNDLED
from ragcal.embedding import Embedder
from ragcal.retrieval.index import chunk_corpus

corpus, pairs = sys.argv[1], json.loads(sys.argv[2])
docs = BUNDLED[corpus]
_, chunks, _ = chunk_corpus(docs.corpus, exclude=list(docs.exclude))
texts = {chunk.chunk_id: chunk.text for chunk in chunks}
embedder = Embedder(use_cache=False)
questions = embedder.encode([query for query, _ in pairs.values()], show_progress_bar=False)
scores = {}
for row, (key, (_, chunk_id)) in enumerate(pairs.items()):
    index = faiss.IndexFlatIP(questions.shape[1])
    index.add(embedder.encode([texts[chunk_id]], show_progress_bar=False))
    found, _ = index.search(questions[row : row + 1], 1)
    scores[key] = float(found[0, 0])
print(json.dumps(scores))
"""


def committed_top1(corpus: str, ids: list[str]) -> tuple[dict, dict]:
    """``{id: (question, committed top-1 chunk id)}`` and ``{id: committed dense_top1}``, from the committed files."""
    table = pd.read_csv(RESULTS / corpus / "scores.csv").set_index("id")
    run = read_trec_run(RESULTS / corpus / "runs" / "dense.run")
    missing = [qid for qid in ids if qid not in table.index]
    if missing:
        raise SystemExit(f"{RESULTS / corpus / 'scores.csv'}: no question {', '.join(missing)}")
    first = run[run["rank"] == 1].set_index("qid")["docid"]
    pairs = {qid: (table.loc[qid, "query"], first[qid]) for qid in ids}
    return pairs, {qid: float(table.loc[qid, "dense_top1"]) for qid in ids}


def scores_in_a_process(command: list[str], corpus: str, pairs: dict) -> tuple[dict, float]:
    environment = {**os.environ, **PINNED_ENVIRONMENT, "TOKENIZERS_PARALLELISM": "false"}
    started = time.perf_counter()
    done = subprocess.run(
        [*command, sys.executable, "-c", RUN, corpus, json.dumps(pairs)],
        capture_output=True, text=True, env=environment, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        where = " ".join(command) or "natively"
        raise SystemExit(f"the model step failed ({where}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1]), time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", default="EPYC-Milan-v1", help="a model of `qemu-x86_64 -cpu help`")
    parser.add_argument("--corpus", default="fastapi", choices=("fastapi", "rust-book"))
    parser.add_argument("--questions", default="a25,a73", help="question ids of the committed score table")
    arguments = parser.parse_args(argv)
    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        raise SystemExit("qemu-x86_64 not found: apt-get install qemu-user")
    pairs, committed = committed_top1(arguments.corpus, arguments.questions.split(","))
    native, native_seconds = scores_in_a_process([], arguments.corpus, pairs)
    emulated, emulated_seconds = scores_in_a_process([qemu, "-cpu", arguments.cpu], arguments.corpus, pairs)
    absolute, relative = tolerance_for("dense_top1")
    print(
        f"dense_top1 of each question with its committed top-1 chunk; tolerance {absolute:g} + {relative:g} x |value|"
    )
    emulated_header = f"{arguments.cpu} (emulated)"
    print(f"{'question':<9} {'committed':<20} {'native':<20} {emulated_header:<26} gap        tolerance used")
    for qid in pairs:
        gap, share = within_tolerance([emulated[qid]], [committed[qid]], "dense_top1")
        print(f"{qid:<9} {committed[qid]!r:<20} {native[qid]!r:<20} {emulated[qid]!r:<26} {gap:<10.3g} {share:.1%}")
    for left, right in itertools.pairwise(pairs):
        print(
            f"midpoint of {left} and {right}: committed {(committed[left] + committed[right]) / 2!r}, "
            f"native {(native[left] + native[right]) / 2!r}, emulated {(emulated[left] + emulated[right]) / 2!r}"
        )
    slower = emulated_seconds / native_seconds
    print(f"seconds: native {native_seconds:.1f}, emulated {emulated_seconds:.1f} ({slower:.0f} times as long)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
