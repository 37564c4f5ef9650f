"""``ragcal reproduce --benchmark NAME``: the benchmark study of :mod:`ragcal.study.imported` on a named benchmark.

Resolves the benchmark's import (:data:`ragcal.study.imported.BENCHMARKS`), asks the LLM's verdicts when asked to
(:mod:`ragcal.study.imported_llm`), and anchors the study to the committed results (:mod:`ragcal.study.anchoring`).
"""

from __future__ import annotations

from pathlib import Path

from .imported import BENCHMARKS, benchmark_study

__all__ = ["reproduce_benchmark"]


def reproduce_benchmark(name: str, results_dir="results", *, embedder=None, max_splits=None, cache_dir=None,
                        llm: bool = False, timings=None, anchors=None, log=print) -> dict:  # fmt: skip
    """``ragcal reproduce --benchmark NAME``: :func:`benchmark_study` on :data:`BENCHMARKS` ``[name]``, written to
    ``<results_dir>/<name>/`` beside the bundled corpora's folders (which its summary reads). The LLM's verdicts are
    asked again only with ``llm`` (:func:`ragcal.study.imported_llm.llm_signals`). The score table is anchored to the
    committed one (:mod:`ragcal.study.anchoring`); ``anchors``, a list, receives the anchor."""
    from .anchoring import Anchor
    from .timings import StageTimings

    timings = timings if timings is not None else StageTimings()
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
    inputs = BENCHMARKS[name]
    corpus, queries = inputs.resolve(cache_dir=cache_dir)
    for path in (corpus, queries):
        if not path.exists():
            raise FileNotFoundError(
                f"{path}: not found; import the benchmark first (ragcal import-benchmark ... --out {queries.parent})"
            )
    logged = inputs.logged
    if logged is None and inputs.llm_sample:
        from .imported_llm import llm_signals

        logged = llm_signals(inputs, corpus, queries, Path(results_dir) / name, ask=llm, cache_dir=cache_dir,
                             timings=timings, log=log)  # fmt: skip
    with timings.stage(f"{name}: study"):
        anchor = Anchor(Path(results_dir) / name, label=name)
        if anchors is not None:
            anchors.append(anchor)
        return benchmark_study(corpus, queries, Path(results_dir) / name, logged_signals=logged, name=name,
                               title=inputs.title, embedder=embedder, max_splits=max_splits,
                               imported_from=inputs.source, anchor=anchor, log=log)  # fmt: skip
