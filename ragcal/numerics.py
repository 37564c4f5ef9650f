"""Pinned numeric kernels: the same bits however a batch is split, and what they cannot pin.

Torch chooses its CPU kernels when it starts: AVX-512 where the processor has
it, AVX2 elsewhere, and MKL chooses its matrix kernels by processor. They round
differently in the last bits, so an embedding computed on one machine differs
from the same embedding computed on another by about 1e-7, and a study whose
threshold sits near a score would write other numbers. Across machines that is
settled by anchoring (:mod:`ragcal.study.anchoring`), not by these settings.

:data:`PINNED_ENVIRONMENT` fixes what can be fixed on one machine:

- ``ATEN_CPU_CAPABILITY=avx2``: torch's own vectorised kernels (softmax,
  layer norm, GELU, ...), the AVX2 ones that every such machine has; no
  slower here than the AVX-512 ones (6.42 s against 6.34 s for 300 FastAPI
  chunks);
- ``MKL_CBWR=AUTO,STRICT``: MKL's conditional numerical reproducibility, for
  the matrix products. ``AUTO`` runs the code path MKL chooses for the
  processor, with fixed cache sizes, deterministic reductions and static
  scheduling; ``STRICT`` makes a product's bits independent of how MKL splits
  it between threads (without it, on an AVX-512 Xeon with 2 threads, a
  question encoded with two others differed in its last bits from the same
  question encoded alone). :class:`ragcal.embedding.Embedder` runs its forward
  passes with oneDNN switched off (``torch.backends.mkldnn.flags``), so that
  torch multiplies through MKL; oneDNN picks its kernels by processor and has
  no such switch. Until December 2026 the branch was ``AVX2``: on an Intel
  Xeon with AVX-512 that made MiniLM 1.32 times slower than ``AUTO`` (8.51 s
  against 6.45 s for 300 FastAPI chunks, medians of 3 alternating runs,
  ``benchmarks/bench_kernels.py``) and bought nothing the committed results
  need. MKL runs its ``AUTO`` branch on processors that are not Intel's
  whatever branch is asked for (its documentation), so an AMD EPYC computes
  the same bits under both settings (so it did on an emulated one, below);
- ``NPY_DISABLE_CPU_FEATURES``: NumPy's AVX-512 loops, whose ``log`` and
  ``exp`` round otherwise than its AVX2 ones (the clarity and NQC signals).

OpenBLAS picks its matrix kernels by processor too, and its switch
(``OPENBLAS_CORETYPE``) is the machine's to set, not ours: the signals
multiply with ``np.einsum`` instead, whose loops are the same everywhere.
What is still computed through OpenBLAS (scikit-learn's logistic regression in
the learned gates) is exact on one kind of processor only; its results are
printed to 4 decimals.

They are read once, when torch, MKL and NumPy load, so they must be in the
environment before the process imports torch: ``make`` exports them,
``ragcal reproduce`` and ``ragcal golden`` restart themselves with them
(:func:`reexec_pinned`), and the test suite sets them in ``conftest.py``
before anything imports torch. :func:`pinned` says whether the running
process has them.

They change nothing in a process that set them after loading torch: the
embedding cache is keyed by the kernels torch actually runs, MKL's mode and
the processor (:attr:`ragcal.embedding.Embedder.cache_key`), so vectors from
pinned and unpinned runs, or from two processors, are never mixed.

What has been checked: on one machine, a text's vector has the same bits
whatever batch it is encoded in, under these settings and not without
``STRICT`` (``benchmarks/bench_kernels.py``; ``tests/embedding/``). Across
machines they do not: on an Intel Xeon with AVX-512 and AMX, the former
``AVX2`` pin moved 113 of the 189 committed FastAPI ``dense_top1`` scores by
up to 1.2e-7 (the vectors differ; faiss's batched and one-by-one searches
agree), an AMD EPYC moved them by as much (9.4e-7 for ``dense_smv``), and an
Arm machine runs other kernels (and no MKL) altogether. Under QEMU's
user-mode emulator as an AMD EPYC (``qemu-x86_64 -cpu EPYC-Milan-v1``,
``benchmarks/emulated_processor.py``), two FastAPI questions scored 0 and
5.96e-8 from the committed values, and their midpoint was the one a real
AMD EPYC gave, to the last digit (0.66789910197258). The study holds there
by anchoring (:mod:`ragcal.study.anchoring`): model-derived quantities within
their declared tolerance of the committed ones continue from the committed
values, and ``ragcal reproduce`` ends with a verdict. On a real AMD EPYC (a
Zen 4 with AVX-512, December 2026; not the AVX2-only one of issue 52) a cold
and a warm ``make reproduce`` of the whole study anchored 263 quantities (0
beyond tolerance, 0 decisions changed) and wrote every file identical but the
reranker's AUCs, whose scores were not anchored then: one ``rerank_gap`` moved
past another's (0.4218 became 0.4219). They are anchored since, and the next
warm run there wrote all 242 compared files identical, and the test suite
passed there (``docs/reproducing.md``). ``RAGCAL_KERNELS=machine``
(:data:`KERNELS_VARIABLE`) keeps ``ragcal reproduce`` from pinning, which is
how another processor is emulated on one machine
(``ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE``: in float32, 96% of
MiniLM's components differ from the pinned ones, by at most 1.8e-7).
"""

from __future__ import annotations

import os
import sys

__all__ = ["KERNELS_VARIABLE", "PINNED_ENVIRONMENT", "pinned", "pinned_environment", "reexec_pinned"]

#: Environment variables that pin the numeric kernels (read when torch and MKL load).
PINNED_ENVIRONMENT = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_CBWR": "AUTO,STRICT",
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
}
#: ``RAGCAL_KERNELS=machine`` runs ``ragcal reproduce`` with the kernels the environment gives (not restarted pinned):
#: how the study is checked under other kernels on one machine; its anchoring (:mod:`ragcal.study.anchoring`) and
#: verdict then say what moved.
KERNELS_VARIABLE = "RAGCAL_KERNELS"
#: Set in the environment of a process that :func:`reexec_pinned` restarted, so it never loops.
_REEXEC_MARK = "RAGCAL_PINNED_REEXEC"


def pinned_environment(environ=None) -> dict:
    """``environ`` (default ``os.environ``) with :data:`PINNED_ENVIRONMENT` added, as a new dict."""
    return {**(os.environ if environ is None else environ), **PINNED_ENVIRONMENT}


def pinned(environ=None) -> bool:
    """Whether ``environ`` (default ``os.environ``) holds every value of :data:`PINNED_ENVIRONMENT`."""
    environ = os.environ if environ is None else environ
    return all(environ.get(name) == value for name, value in PINNED_ENVIRONMENT.items())


def reexec_pinned(argv=None) -> None:
    """Restart this process with :data:`PINNED_ENVIRONMENT`, unless it already has it.

    For commands whose output is compared bit for bit with committed files
    (``ragcal reproduce``, ``ragcal golden``). Does nothing when the
    environment is already pinned, or when ``RAGCAL_KERNELS=machine``
    (:data:`KERNELS_VARIABLE`) asks for the environment's kernels; a restarted process that still is not
    pinned raises ``RuntimeError`` rather than loop.

    Parameters
    ----------
    argv : list of str, default=None
        The command line to run again; ``sys.argv`` when None.
    """
    if pinned() or os.environ.get(KERNELS_VARIABLE) == "machine":
        return
    if os.environ.get(_REEXEC_MARK):
        raise RuntimeError(
            "ragcal: could not pin the numeric kernels: " + ", ".join(f"{k}={v}" for k, v in PINNED_ENVIRONMENT.items())
        )
    argv = list(sys.argv if argv is None else argv)
    environ = {**pinned_environment(), _REEXEC_MARK: "1"}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "ragcal.cli", *argv[1:]], environ)
