"""The signal registry: :class:`Signal`, :data:`SIGNALS`, the ``register_*`` decorators, and evaluation.

A signal is an ordinary function that takes the mapping ``{retriever name:
RetrievalResult}`` of one query and returns a float. Registering it makes it a
column of every score table, and so part of every AUC table, sweep and plot::

    from ragcal.signals import register_signal

    @register_signal("dense_top3_mean", retrievers=("dense",))
    def dense_top3_mean(results):
        return float(results["dense"].scores[:3].mean())

By convention a higher value means "more likely answerable"; a signal for
which the opposite holds says so with ``higher_is_answerable=False``.

Re-running the cell or re-importing the module that registers a signal
replaces it: a name is owned by the place that defined it (the function's
module and qualified name). Registering the same name from another place is a
``ValueError`` that names both, unless ``replace=True`` says the override is
meant.

A score table is computed for a whole batch of queries at once
(:func:`compute_signals_batch`, used by :func:`ragcal.scoring.score_table`).
A signal registered with :func:`register_batch_signal` is a vectorised
function of a :class:`~ragcal.signals.batch.ResultBatch` that returns one
value per query; every built-in signal is one. Its per-query form, which
gates call on one query, is the same function on a batch of one, so there is
one definition of each formula. A signal registered with
:func:`register_signal` is evaluated query by query within the batch, with
the same values as on its own::

    from ragcal.signals import register_batch_signal

    @register_batch_signal("dense_top3_mean", retrievers=("dense",))
    def dense_top3_mean(batch):  # a (n_queries, 3) matrix, NaN-padded: NaN with fewer than three hits
        return batch.top_scores("dense", 3).mean(axis=1)

Signals that need more than a ranked list read the ``info`` mapping of a
result, which :mod:`ragcal.retrieval.diagnostics` fills at retrieval time from
the retriever object that produced it; they are NaN for results without it
(e.g. from a user's own retriever). A signal registered with
:func:`register_corpus_signal` is such a signal in one definition: its
function of a :class:`~ragcal.signals.batch.CorpusBatch` (the results plus the
retriever object) runs as a diagnostic, and the signal reads its value back.

The registry imports no signal: :mod:`ragcal.signals` imports the built-in
ones (:mod:`~ragcal.signals.builtin`, :mod:`~ragcal.signals.qpp`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from .._params import parameter_error
from ..retrieval.base import RetrievalResult
from ..retrieval.diagnostics.registry import register_diagnostic, unregister_diagnostic
from .batch import CorpusBatch, ResultBatch

__all__ = [
    "Signal",
    "SIGNALS",
    "register_signal",
    "register_batch_signal",
    "register_corpus_signal",
    "get_signal",
    "compute_signals",
    "compute_signals_batch",
    "signals_for",
    "unregister_signal",
    "load_signals_module",
]


@dataclass(frozen=True)
class Signal:
    """A registered gating signal.

    Attributes
    ----------
    name : str
        Column name in score tables.
    function : callable
        ``function(results) -> float`` with ``results`` a mapping from
        retriever name to :class:`RetrievalResult`. For a signal registered
        with :func:`register_batch_signal`, the batch function on a batch of
        one.
    retrievers : tuple of str
        The retrievers the function reads.
    description : str
    higher_is_answerable : bool
        Whether larger values point to an answerable query.
    passage_scale : bool
        True when the value is the score of one passage in the list of
        ``retrievers[0]`` (``dense_top1`` is a cosine of a chunk). A threshold
        on such a signal is also a bar that single passages can clear, which is
        how :class:`ragcal.gates.ThresholdGate` cuts the passages it passes on.
    origin : str
        Where the function was defined (``module.qualname``); registering the
        same name from the same origin replaces the entry.
    batch : callable, default=None
        ``batch(ResultBatch) -> ndarray of shape (n_queries,)``, the
        vectorised form (see :func:`register_batch_signal`); None for a
        signal evaluated query by query.
    corpus : callable, default=None
        For a signal registered with :func:`register_corpus_signal`, the
        function of a :class:`CorpusBatch` that computes it at retrieval
        time; its :attr:`batch` form reads the stored value back. None for
        the other signals.
    """

    name: str
    function: Callable[[Mapping[str, RetrievalResult]], float]
    retrievers: tuple[str, ...]
    description: str = ""
    higher_is_answerable: bool = True
    passage_scale: bool = False
    origin: str = ""
    batch: Callable[[ResultBatch], np.ndarray] | None = None
    corpus: Callable[[CorpusBatch], np.ndarray] | None = None

    def _check_retrievers(self, available) -> None:
        missing = [name for name in self.retrievers if name not in available]
        if missing:
            raise KeyError(f"signal {self.name!r} needs retriever results {missing}; got {sorted(available)}")

    def __call__(self, results: Mapping[str, RetrievalResult]) -> float:
        self._check_retrievers(results)
        return float(self.function(results))

    def values(self, batch: ResultBatch) -> np.ndarray:
        """The signal of every query of ``batch``: float64, shape (n_queries,).

        The vectorised form when there is one, else :attr:`function` query by
        query (the same numbers as calling the signal on each query).
        """
        self._check_retrievers(batch)
        if self.batch is None:
            return np.array([float(self.function(batch.query(p))) for p in range(len(batch))], dtype=np.float64)
        values = np.asarray(self.batch(batch), dtype=np.float64)
        if values.shape != (len(batch),):
            raise ValueError(
                f"the batch function of signal {self.name!r} must return one value per query, shape "
                f"({len(batch)},); got shape {values.shape}"
            )
        return values


#: The registry, in registration order (which is the column order of score tables).
SIGNALS: dict[str, Signal] = {}


def register_signal(
    name: str,
    *,
    retrievers,
    description: str = "",
    higher_is_answerable: bool = True,
    passage_scale: bool = False,
    replace: bool = False,
):
    """Decorator that registers ``function`` under ``name``.

    Parameters
    ----------
    name : str
    retrievers : tuple of str
        Retriever names the function reads, e.g. ``("dense",)``.
    description : str, default=""
        One line for tables and legends; defaults to the docstring's first line.
    higher_is_answerable : bool, default=True
    passage_scale : bool, default=False
        The value is one passage's score in the first retriever's list (see
        :class:`Signal`).
    replace : bool, default=False
        Replace a signal of the same name defined elsewhere. Without it, the
        same name from the same place (module and qualified name of the
        function, so re-running a notebook cell or re-importing a module) is
        replaced silently, and from another place raises ``ValueError``.

    See Also
    --------
    register_batch_signal : the same for a vectorised function of a whole batch.
    """
    options = _registration(name, retrievers, description, higher_is_answerable, passage_scale, replace)
    return lambda function: _register(function, None, *options)


def register_batch_signal(
    name: str,
    *,
    retrievers,
    description: str = "",
    higher_is_answerable: bool = True,
    passage_scale: bool = False,
    replace: bool = False,
):
    """Decorator that registers a vectorised signal: ``function(batch) -> ndarray`` over a :class:`ResultBatch`.

    ``function`` returns one float per query of the batch, and a query's
    value must not depend on the other queries in it. Score tables call it
    once per batch; its per-query form (:attr:`Signal.function`, what a gate
    calls on one query) is ``function`` on a batch of one, so the two are one
    definition. The parameters are those of :func:`register_signal`.

    Examples
    --------
    >>> @register_batch_signal("dense_top3_mean_example", retrievers=("dense",))
    ... def dense_top3_mean_example(batch):
    ...     return batch.top_scores("dense", 3).mean(axis=1)  # NaN with fewer than three hits
    >>> unregister_signal("dense_top3_mean_example")
    """
    options = _registration(name, retrievers, description, higher_is_answerable, passage_scale, replace)
    return lambda function: _register(_one_query(function), function, *options)


def register_corpus_signal(
    name: str,
    *,
    retriever: str,
    description: str = "",
    higher_is_answerable: bool = True,
    replace: bool = False,
):
    """Decorator that registers a signal computed from the retriever object and its corpus.

    ``function(batch) -> ndarray`` takes a :class:`CorpusBatch`: the results
    of ``retriever`` for a batch of queries (every :class:`ResultBatch`
    array), together with the retriever object that produced them
    (``batch.retriever``, built on the chunks the caller may see), the query
    texts and embeddings, and :meth:`CorpusBatch.per_retriever` for numbers
    computed once per retriever (a centroid, a vocabulary statistic). It
    returns one float per query, which must not depend on the other queries.

    The function runs where the retriever object is at hand: when
    :meth:`ragcal.retrieval.index.RetrievalIndex.retrieve` or
    :func:`ragcal.retrieval.retrieve_with` retrieves (it is a diagnostic of
    :mod:`ragcal.retrieval.diagnostics`, registered under the signal's name).
    The value travels in the ``info`` of the retriever's results, under the
    signal's name, and score tables and gates read it from there. So register
    the signal before retrieving: results retrieved before it, or by another
    engine, give NaN.

    Parameters
    ----------
    name : str
        The signal's name, and its key in ``info``.
    retriever : str
        The retriever whose object the function reads and whose results carry
        the value: ``"dense"``, ``"bm25_raw"``, ``"bm25_stopwords"`` (or your
        own retriever's name with :func:`ragcal.retrieval.retrieve_with`).
    description, higher_is_answerable, replace
        As for :func:`register_signal`.

    Examples
    --------
    >>> from ragcal.retrieval import tokenize
    >>> @register_corpus_signal("bm25_unknown_words_example", retriever="bm25_raw", higher_is_answerable=False)
    ... def bm25_unknown_words_example(batch):
    ...     # How many of the query's tokens occur in no chunk of the retriever that searched it.
    ...     return [np.isnan(batch.retriever.idf(tokenize(query))).sum() for query in batch.queries]
    >>> unregister_signal("bm25_unknown_words_example")
    """
    if not isinstance(retriever, str) or not retriever:
        raise parameter_error("retriever", "register_corpus_signal", "a retriever name", retriever)
    options = _registration(name, (retriever,), description, higher_is_answerable, False, replace)

    def register(function):
        @functools.wraps(function)
        def stored(batch):  # the value computed at retrieval time
            return batch.info(retriever, name)

        _register(_one_query(stored), stored, *options, corpus=function)
        return function

    return register


def _registration(name, retrievers, description, higher_is_answerable, passage_scale, replace) -> tuple:
    if not isinstance(name, str) or not name.isidentifier():
        raise parameter_error("name", "register_signal", "a valid identifier", name)
    if isinstance(retrievers, str):
        retrievers = (retrievers,)
    return name, tuple(retrievers), description, higher_is_answerable, passage_scale, replace


def _register(
    function, batch, name, retrievers, description, higher_is_answerable, passage_scale, replace, *, corpus=None
):
    """Put the signal into the registry; returns what was decorated (the batch function for a batch signal).

    A corpus signal (``corpus``, a function of a :class:`CorpusBatch`) also
    registers the diagnostic that computes it at retrieval time, under its
    name; a signal that replaces a corpus signal removes that diagnostic.
    """
    defined = batch if batch is not None else function
    origin = _origin(defined)
    existing = SIGNALS.get(name)
    if existing is not None and not replace and existing.origin != origin:
        raise ValueError(
            f"signal {name!r} is already registered by {existing.origin}; {origin} defines it again. "
            "Rename one of them, or pass replace=True to override the first"
        )
    if corpus is not None:  # may refuse (an info key another diagnostic writes) before the signal is in

        @functools.wraps(corpus)
        def diagnostic(retriever_batch):
            return {name: corpus(CorpusBatch(retriever_batch))}

        register_diagnostic(name, retriever=retrievers[0], replace=True)(diagnostic)
    elif existing is not None and existing.corpus is not None:
        unregister_diagnostic(name)
    summary = description or (defined.__doc__ or "").strip().split("\n")[0]
    SIGNALS[name] = Signal(
        name, function, retrievers, summary, higher_is_answerable, passage_scale, origin, batch=batch, corpus=corpus
    )
    return defined


def _one_query(batch_function):
    """The per-query form of a batch function: the function on a batch of one query."""

    @functools.wraps(batch_function)
    def one_query(results):
        return float(batch_function(ResultBatch.of_query(results))[0])

    return one_query


def load_signals_module(path):
    """Import a Python file so that the signals it registers join the registry (``ragcal --signals-module``).

    The module is named ``ragcal_signals_<file stem>``, so loading the same file
    again replaces its signals instead of clashing with them.

    Returns
    -------
    list of str
        The names the file registered or redefined, in registry order.
    """
    import importlib.util
    import re
    import sys
    from pathlib import Path

    path = Path(path)
    if path.suffix != ".py" or not path.is_file():
        raise parameter_error("path", "load_signals_module", "an existing .py file", str(path))
    name = "ragcal_signals_" + re.sub(r"\W", "_", path.stem)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    before = {key: signal.function for key, signal in SIGNALS.items()}
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except ValueError:  # e.g. a clash between two definitions of one signal: already a clear message
        del sys.modules[name]
        raise
    except Exception as error:
        del sys.modules[name]
        where = f", line {error.lineno}" if isinstance(error, SyntaxError) and error.lineno else ""
        raise ValueError(f"{path}{where}: the signals module failed to load: {type(error).__name__}: {error}") from error
    return [key for key, signal in SIGNALS.items() if before.get(key) is not signal.function]


def _origin(function) -> str:
    module = getattr(function, "__module__", None) or "<unknown>"
    return f"{module}.{getattr(function, '__qualname__', repr(function))}"


def unregister_signal(name: str) -> None:
    """Remove a signal from the registry (and, for a corpus signal, the diagnostic that computes it)."""
    if get_signal(name).corpus is not None:
        unregister_diagnostic(name)
    del SIGNALS[name]


def get_signal(name: str) -> Signal:
    """Look a signal up by name; an unknown name lists the known ones."""
    try:
        return SIGNALS[name]
    except KeyError:
        raise ValueError(f"unknown signal {name!r}; registered signals are: {', '.join(SIGNALS)}") from None


def compute_signals(results: Mapping[str, RetrievalResult], names=None) -> dict[str, float]:
    """Evaluate the named signals on one query.

    Without ``names``: every registered signal whose retrievers are in
    ``results`` (``rerank_*`` only when a reranker ran). The values are those
    of :func:`compute_signals_batch` on a batch of this one query.
    """
    columns = compute_signals_batch(ResultBatch.of_query(results), names)
    return {name: float(values[0]) for name, values in columns.items()}


def compute_signals_batch(retrieved, names=None) -> dict[str, np.ndarray]:
    """Evaluate the named signals on every query of a batch.

    Parameters
    ----------
    retrieved : ResultBatch or mapping of str to sequence of RetrievalResult
        ``{retriever name: [result of query 0, query 1, ...]}``.
    names : sequence of str, default=None
        Without it, every registered signal whose retrievers are in
        ``retrieved``.

    Returns
    -------
    dict of str to ndarray of shape (n_queries,)
        One float64 array per signal, in the order of ``names``. Vectorised
        signals run once on the whole batch, the others query by query.
    """
    batch = retrieved if isinstance(retrieved, ResultBatch) else ResultBatch(retrieved)
    names = signals_for(batch) if names is None else list(names)
    return {name: get_signal(name).values(batch) for name in names}


def signals_for(retrievers) -> list[str]:
    """Registered signals, in registry order, whose retrievers are all among ``retrievers`` (names or a mapping)."""
    return [name for name, signal in SIGNALS.items() if all(r in retrievers for r in signal.retrievers)]
