"""The study's model step under other kernels of this machine: the committed results still hold.

The test suite runs with pinned kernels (conftest.py). Here a subprocess embeds questions and their committed top
passages with torch's generic kernels, MKL's SSE2 path and NumPy without its AVX2 and AVX-512 loops (what another
processor may give), and scores them. The scores differ from the committed ones (else this would test nothing),
but within the declared tolerance of a cosine (ragcal.study.anchoring.TOLERANCES); anchoring then gives back the
committed scores to the bit, and the committed gates decide every question as before.

The tiny random reranker of the summaries' "Reranker signals" sections is not anchored: its fingerprint is printed.
Its weights are drawn with NumPy (ragcal.retrieval.rerank.build_tiny_cross_encoder), so a subprocess under those
kernels saves the same bytes as one under the pinned kernels, while torch's own normal sampling differs there.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd

from ragcal.gates import load_gate
from ragcal.numerics import PINNED_ENVIRONMENT
from ragcal.retrieval.base import RetrievalResult
from ragcal.runs import read_trec_run
from ragcal.study.anchoring import Anchor, anchor_report, tolerance_for
from ragcal.study.notebooks import RESULTS_DIR

#: Another machine's kernels, on this one (ragcal.numerics.KERNELS_VARIABLE keeps a command from pinning them).
OTHER_KERNELS = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
    "RAGCAL_KERNELS": "machine",
}
#: Questions of every slice, and how many of each one's committed passages are scored (the generic kernels are slow).
QUESTIONS = ("a01", "a10", "a40", "a80", "n01", "n30", "u01", "u40")
DEPTH = 5

SCRIPT = r"""
import json, sys
import numpy as np
import torch
from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE
from ragcal.embedding import Embedder
from ragcal.retrieval.index import chunk_corpus

request = json.load(sys.stdin)
_, chunks, _ = chunk_corpus(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE)
texts = {chunk.chunk_id: chunk.text for chunk in chunks}
embedder = Embedder(use_cache=False)
questions = embedder.encode(request["questions"], show_progress_bar=False)
scores = []
for question, ids in zip(questions, request["passages"]):
    passages = embedder.encode([texts[chunk_id] for chunk_id in ids], show_progress_bar=False)
    scores.append([float(score) for score in passages @ question])
print(json.dumps({"kernels": str(torch.backends.cpu.get_cpu_capability()), "scores": scores}))
"""


def test_the_committed_dense_scores_hold_under_other_kernels(tmp_path):
    committed = RESULTS_DIR / "fastapi"
    run = read_trec_run(committed / "runs" / "dense.run")
    run = run[run["qid"].isin(QUESTIONS) & (run["rank"].astype(int) <= DEPTH)]
    queries = pd.read_csv(RESULTS_DIR / "fastapi" / "scores.csv", dtype={"id": str}).set_index("id")
    passages = [list(run.loc[run["qid"] == qid, "docid"]) for qid in QUESTIONS]
    request = {"questions": [queries.loc[qid, "query"] for qid in QUESTIONS], "passages": passages}
    environment = {**os.environ, **OTHER_KERNELS}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], input=json.dumps(request), capture_output=True, text=True, env=environment
    )
    assert result.returncode == 0, result.stderr[-2000:]
    answer = json.loads(result.stdout.splitlines()[-1])
    assert answer["kernels"] == "DEFAULT"  # torch really ran its generic kernels

    # A reference folder holding just these questions' committed lines, and the committed gates.
    reference = tmp_path / "fastapi"
    (reference / "runs").mkdir(parents=True)
    lines = (committed / "runs" / "dense.run").read_text().splitlines()
    kept = [line for line in lines if line.split()[0] in QUESTIONS and int(line.split()[3]) <= DEPTH]
    (reference / "runs" / "dense.run").write_text("\n".join(kept) + "\n")
    shutil.copytree(committed / "gates", reference / "gates")

    fresh = []
    for ids, scores in zip(passages, answer["scores"]):
        order = np.argsort(-np.asarray(scores), kind="stable")
        fresh.append(RetrievalResult("dense", tuple(ids[i] for i in order), np.asarray(scores)[order]))
    committed_scores = [run.loc[run["qid"] == qid, "score"].to_numpy(dtype=float) for qid in QUESTIONS]
    deviation = max(float(np.max(np.abs(found.scores - scores))) for found, scores in zip(fresh, committed_scores))
    # The kernels moved the scores (so this tests something), by less than the declared tolerance.
    assert 0 < deviation <= tolerance_for("dense_top1")[0], deviation

    anchor = Anchor(reference, label="fastapi")
    anchored = anchor.retrieved({"dense": fresh}, QUESTIONS)["dense"]
    # The same passages in the same order, so the committed scores are kept to the bit.
    for found, scores in zip(anchored, committed_scores):
        np.testing.assert_array_equal(found.scores, scores)
    [record] = anchor.records
    assert record.status == "anchored" and record.max_deviation == deviation
    report = anchor_report([anchor])
    assert "0 beyond it" in report[0], report

    # Every committed gate that reads only dense_top1 decides these questions as it did.
    top1 = lambda results: pd.DataFrame({"dense_top1": [found.scores[0] for found in results]})
    for name in ("threshold_keep095.json", "threshold_risk_guarantee02.json"):
        gate = load_gate(committed / "gates" / name)
        mine, theirs = gate.decide_table(top1(fresh))["action"], gate.decide_table(top1(anchored))["action"]
        assert list(mine) == list(theirs), name


RERANKER_SCRIPT = r"""
import hashlib, json, tempfile
from pathlib import Path
import torch
from ragcal.retrieval.rerank import build_tiny_cross_encoder

with tempfile.TemporaryDirectory() as folder:
    weights = build_tiny_cross_encoder(Path(folder) / "tiny-random-cross-encoder") / "model.safetensors"
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
torch.manual_seed(0)
normal = torch.empty(1000).normal_(0.0, 0.5).tolist()
print(json.dumps({"kernels": str(torch.backends.cpu.get_cpu_capability()), "weights": digest, "normal": normal}))
"""


def test_the_tiny_reranker_has_the_same_weights_under_other_kernels():
    answers = {}
    for name, kernels in {"pinned": PINNED_ENVIRONMENT, "other": OTHER_KERNELS}.items():
        environment = {**os.environ, **kernels}
        command = [sys.executable, "-c", RERANKER_SCRIPT]
        result = subprocess.run(command, capture_output=True, text=True, env=environment)
        assert result.returncode == 0, result.stderr[-2000:]
        answers[name] = json.loads(result.stdout.splitlines()[-1])
    pinned, other = answers["pinned"], answers["other"]
    assert (pinned["kernels"], other["kernels"]) == ("AVX2", "DEFAULT")
    # torch's own normal sampling follows the kernels (what the tiny reranker's weights used to come from) ...
    assert pinned["normal"] != other["normal"]
    # ... the weights drawn with NumPy do not, and are those whose fingerprint the summaries print.
    assert other["weights"] == pinned["weights"]
    for corpus in ("fastapi", "rust-book"):
        summary = (RESULTS_DIR / corpus / "summary.md").read_text(encoding="utf-8")
        [printed] = re.findall(r"`tiny-random-cross-encoder@([0-9a-f]+)/", summary)
        assert pinned["weights"].startswith(printed), corpus
