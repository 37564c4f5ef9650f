"""An LLM's own abstention as a baseline signal: the seeds' refusal prompt, structured, one verdict per question.

The prompt is the seeds' (``handling-failures-fallback-chain``)::

    system: Answer the question using only the provided context. Cite sources with [1], [2], etc.
            If the context doesn't contain the answer, say so.
    user:   Context:
            [1] <passage 1>
            ---
            [2] <passage 2>

            Question: <question>

and the reply is forced into the seeds' fix for a model that ignores the
instruction, a JSON object ``{"found_answer": bool, "answer": str,
"citations": [int]}``. ``found_answer`` is the signal: 1.0 when the model says
the context answers the question, 0.0 when it says it does not, NaN when its
reply could not be read (not JSON, cut off at ``max_tokens``, or not matching
the schema). NaN verdicts are counted, never guessed.

:func:`write_llm_signals` writes the verdicts as a logged-signals file
(``id,llm_found_answer``, or long ``id,name,value``) that ``ragcal join`` and
``--extra-signals`` read by question id.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pandas as pd

from .._io import atomic_write_text
from .._params import check_choice, check_int
from .client import ChatEndpoint, LLMReplyError, chat_json
from .verdict_cache import VERDICT_CACHE_FILE, VerdictCache, request_key

__all__ = [
    "ANSWER_MAX_CHARS",
    "SIGNAL_NAME",
    "SYSTEM_PROMPT",
    "VERDICT_COLUMNS",
    "llm_verdicts",
    "verdict_messages",
    "verdict_schema",
    "verdict_summary",
    "write_llm_signals",
    "write_verdicts",
]

#: The seeds' refusal instruction, word for word.
SYSTEM_PROMPT = (
    "Answer the question using only the provided context. Cite sources with [1], [2], etc. "
    "If the context doesn't contain the answer, say so."
)
#: Longest ``answer`` the schema allows, in characters: a bound on the reply's length, so that a small model
#: that rambles is cut by the grammar, not by ``max_tokens`` (which leaves unparseable JSON).
ANSWER_MAX_CHARS = 300


def verdict_schema(k: int) -> dict:
    """The seeds' structured reply ``{"found_answer": bool, "answer": str, "citations": [int]}`` for ``k`` passages.

    ``found_answer`` comes first, so the verdict is generated before the
    answer. Citations are passage numbers 1 to ``k``, at most ``k`` of them,
    and the answer has at most :data:`ANSWER_MAX_CHARS` characters: without
    these bounds SmolLM2 fills ``max_tokens`` with ``[1, 2, 3, 4, ...``.
    """
    k = check_int(k, "k", "verdict_schema", low=1)
    return {
        "type": "object",
        "properties": {
            "found_answer": {"type": "boolean"},
            "answer": {"type": "string", "maxLength": ANSWER_MAX_CHARS},
            "citations": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": k}, "maxItems": k},
        },
        "required": ["found_answer", "answer", "citations"],
        "additionalProperties": False,
    }


#: Column name of the verdict in score tables and logged-signals files.
SIGNAL_NAME = "llm_found_answer"
VERDICT_COLUMNS = (
    "id",
    "found_answer",
    "answer",
    "citations",
    "seconds",
    "prompt_tokens",
    "completion_tokens",
    "cached",
    "error",
)


def verdict_messages(question: str, passages) -> list[dict]:
    """The chat messages for one question and its passages (best first), numbered ``[1]``, ``[2]``, ..."""
    context = "\n---\n".join(f"[{number}] {passage}" for number, passage in enumerate(passages, start=1))
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"Context:\n{context}\n\nQuestion: {question}"},
    ]


def _check_questions(questions, contexts) -> tuple[list, list, list]:
    if not isinstance(questions, pd.DataFrame) or not {"id", "query"} <= set(questions.columns):
        raise ValueError("questions must be a DataFrame with 'id' and 'query' columns (as ragcal.load_queries returns)")
    ids = [str(value) for value in questions["id"]]
    duplicated = sorted({value for value in ids if ids.count(value) > 1}) if len(set(ids)) < len(ids) else []
    if duplicated:
        raise ValueError(f"questions: duplicate ids {', '.join(map(repr, duplicated[:5]))}")
    contexts = [list(passages) for passages in contexts]
    if len(contexts) != len(ids):
        raise ValueError(f"{len(contexts)} contexts for {len(ids)} questions: give one list of passages per question")
    return ids, [str(query) for query in questions["query"]], contexts


def llm_verdicts(
    questions: pd.DataFrame,
    contexts,
    *,
    endpoint,
    model: str | None = None,
    k: int = 1,
    seed: int = 0,
    max_tokens: int = 192,
    use_cache: bool = True,
    cache_dir=None,
    progress: bool = False,
    cache_path=None,
) -> pd.DataFrame:
    """Ask an LLM, for each question, whether its top-``k`` passages answer it.

    Parameters
    ----------
    questions : DataFrame
        With ``id`` and ``query`` columns (e.g. :func:`ragcal.load_queries`).
    contexts : sequence of sequence of str
        Per question, in the same order, the retrieved passages best first;
        the first ``k`` are shown.
    endpoint : ChatEndpoint or str
        An OpenAI-compatible endpoint (:class:`ChatEndpoint`, e.g.
        ``LocalLLMServer().start()``), or its base URL with ``model``.
    model : str, default=None
        The model name, when ``endpoint`` is a URL.
    k : int, default=1
        Passages per question.
    seed : int, default=0
        Sent with every request (with ``temperature=0``).
    max_tokens : int, default=192
        Longest reply; one cut off is unparseable (NaN).
    use_cache : bool, default=True
        Read and write the verdict cache (:class:`ragcal.llm.VerdictCache`).
    cache_dir : str or Path, default=None
        The cache folder, as everywhere in ragcal: the verdicts go to its
        ``llm_verdicts.sqlite``; None is ragcal's cache folder.
    progress : bool, default=False
        Show a progress bar (stderr).

    Returns
    -------
    DataFrame
        One row per question, in order: ``id``, ``found_answer`` (1.0, 0.0 or
        NaN), ``answer`` (str), ``citations`` (tuple of int), ``seconds``
        (of the model's reply, also for a cached one), ``prompt_tokens`` and
        ``completion_tokens`` (as the server reported them; NaN when it did
        not or the reply was unparseable), ``cached`` (bool), ``error`` (why
        the reply was unparseable; empty otherwise).

    Raises
    ------
    LLMEndpointError
        The endpoint is unreachable or answers with an HTTP error; verdicts
        computed so far are in the cache, so a rerun resumes.
    """
    if isinstance(endpoint, str):
        if not model:
            raise ValueError(f"LLM endpoint {endpoint}: give the model name (model=...)")
        endpoint = ChatEndpoint(endpoint, model)
    elif not isinstance(endpoint, ChatEndpoint):
        raise TypeError(f"endpoint must be a ChatEndpoint or a URL, got {type(endpoint).__name__}")
    k = check_int(k, "k", "llm_verdicts", low=1)
    seed = check_int(seed, "seed", "llm_verdicts")
    max_tokens = check_int(max_tokens, "max_tokens", "llm_verdicts", low=1)
    ids, queries, contexts = _check_questions(questions, contexts)
    sampling = {"temperature": 0.0, "seed": seed, "max_tokens": max_tokens}
    schema = verdict_schema(k)
    if cache_path is not None:  # the file name it took before it matched every other cache_dir
        import warnings

        warnings.warn(
            "llm_verdicts(cache_path=) is deprecated: pass cache_dir=, the folder of llm_verdicts.sqlite",
            DeprecationWarning,
            stacklevel=2,
        )
    else:
        cache_path = None if cache_dir is None else Path(cache_dir) / VERDICT_CACHE_FILE
    cache = VerdictCache(cache_path) if use_cache else None
    rows = []
    try:
        steps = zip(ids, queries, contexts)
        if progress:
            from ..progress import progress

            steps = progress(steps, total=len(ids), desc="LLM verdicts", unit="question")
        for question_id, query, passages in steps:
            messages = verdict_messages(query, passages[:k])
            key = request_key(endpoint.fingerprint(), {"messages": messages, "schema": schema, **sampling})
            record = cache.get(key) if cache is not None else None
            cached = record is not None
            if record is None:
                record = _ask(endpoint, messages, schema, sampling)
                if cache is not None:
                    cache.put(key, record)
            rows.append(_row(question_id, record, cached))
    finally:
        if cache is not None:
            cache.close()
    return pd.DataFrame(rows, columns=list(VERDICT_COLUMNS))


def _ask(endpoint: ChatEndpoint, messages, schema: dict, sampling: dict) -> dict:
    started = time.perf_counter()
    try:
        reply = chat_json(endpoint, messages, schema=schema, schema_name="verdict", **sampling)
    except LLMReplyError as error:  # the model's answer to this question: recorded, not fatal
        return {
            "found_answer": None,
            "answer": "",
            "citations": [],
            "error": str(error),
            "seconds": time.perf_counter() - started,
        }
    message = reply.message
    return {
        "found_answer": float(message["found_answer"]),
        "answer": message["answer"],
        "citations": list(message["citations"]),
        "error": "",
        "seconds": time.perf_counter() - started,
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
    }


def _row(question_id: str, record: dict, cached: bool) -> dict:
    found = record.get("found_answer")
    return {
        "id": question_id,
        "found_answer": math.nan if found is None else float(found),
        "answer": str(record.get("answer", "")),
        "citations": tuple(int(number) for number in record.get("citations", ())),
        "seconds": float(record.get("seconds", math.nan)),
        "prompt_tokens": _number(record.get("prompt_tokens")),
        "completion_tokens": _number(record.get("completion_tokens")),
        "cached": cached,
        "error": str(record.get("error", "")),
    }


def _number(value) -> float:
    return math.nan if value is None else float(value)


def verdict_summary(
    verdicts: pd.DataFrame, questions: pd.DataFrame, *, by: str = "slice", confidence: float = 0.95
) -> pd.DataFrame:
    """Verdict counts per group, with the found-answer rate and its exact (Clopper-Pearson) interval.

    Parameters
    ----------
    verdicts : DataFrame
        From :func:`llm_verdicts`.
    questions : DataFrame
        With ``id`` and the ``by`` column (``slice`` or ``answerable``).
    by : {"slice", "answerable"}, default="slice"
    confidence : float, default=0.95

    Returns
    -------
    DataFrame
        One row per group and a last row ``all``: ``group, questions,
        found, not_found, unparseable, found_rate`` (found over parseable
        replies), ``found_rate_low, found_rate_high``, ``seconds_mean``
        (per question, of the model's replies) and ``cached``.
    """
    from ..metrics.outcomes import clopper_pearson

    check_choice(by, "by", "verdict_summary", ("slice", "answerable"))
    labels = questions.assign(id=questions["id"].astype(str)).set_index("id")[by]
    missing = sorted(set(verdicts["id"]) - set(labels.index))
    if missing:
        raise ValueError(f"verdicts for {len(missing)} ids that are not among the questions, e.g. {missing[0]!r}")
    table = verdicts.assign(group=verdicts["id"].map(labels).astype(str))
    groups = [(name, part) for name, part in table.groupby("group", sort=True)] + [("all", table)]
    rows = []
    for name, part in groups:
        found = int((part["found_answer"] == 1.0).sum())
        not_found = int((part["found_answer"] == 0.0).sum())
        rows.append(
            {
                "group": name,
                "questions": len(part),
                "found": found,
                "not_found": not_found,
                "unparseable": int(part["found_answer"].isna().sum()),
                "seconds_mean": float(part["seconds"].mean()),
                "cached": int(part["cached"].sum()),
            }
        )
    summary = pd.DataFrame(rows)
    parseable = summary["found"] + summary["not_found"]
    low, high = clopper_pearson(summary["found"], parseable, confidence=confidence)
    summary.insert(5, "found_rate", summary["found"] / parseable.where(parseable > 0))
    summary.insert(6, "found_rate_low", low)
    summary.insert(7, "found_rate_high", high)
    return summary


def write_llm_signals(verdicts: pd.DataFrame, path, *, layout: str = "wide", name: str = SIGNAL_NAME) -> Path:
    """Write the verdicts as a logged-signals CSV that ``ragcal join`` / ``--extra-signals`` read by id.

    Parameters
    ----------
    verdicts : DataFrame
        From :func:`llm_verdicts`.
    path : str or Path
    layout : {"wide", "long"}, default="wide"
        ``wide``: ``id,llm_found_answer``; ``long``: ``id,name,value,direction``
        with the direction declared (``higher``: 1, "found the answer", means
        answerable), so that ``ragcal join`` need not infer it from labels.
        Joining the wide file, say so: ``--direction llm_found_answer=higher``.
        An unparseable reply is an empty cell (NaN).
    name : str, default="llm_found_answer"

    Returns
    -------
    Path
        Written whole or not at all.
    """
    check_choice(layout, "layout", "write_llm_signals", ("wide", "long"))
    values = verdicts[["id", "found_answer"]].rename(columns={"found_answer": name})
    if layout == "long":
        values = pd.DataFrame(
            {"id": verdicts["id"], "name": name, "value": verdicts["found_answer"], "direction": "higher"}
        )
    path = Path(path)
    atomic_write_text(path, values.to_csv(index=False, lineterminator="\n", float_format="%g"))
    return path


def write_verdicts(verdicts: pd.DataFrame, path) -> Path:
    """Write every column of the verdicts (answers, citations as ``1;2``, seconds, errors) as CSV."""
    table = verdicts.assign(citations=[";".join(map(str, numbers)) for numbers in verdicts["citations"]])
    path = Path(path)
    atomic_write_text(path, table.to_csv(index=False, lineterminator="\n"))
    return path
