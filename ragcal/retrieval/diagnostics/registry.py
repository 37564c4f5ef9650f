"""The diagnostics registry: per-query corpus statistics, computed from the retriever that produced each result.

A diagnostic is a function of a :class:`RetrieverBatch` (one retriever's
results for a batch of queries, together with the retriever object itself,
the query texts and the query embeddings) that returns one float64 array per
``info`` key it declares, one value per query. :func:`attach_diagnostics`,
which :meth:`ragcal.retrieval.index.RetrievalIndex.retrieve` and
:func:`ragcal.retrieval.retrieve_with` call, runs every registered diagnostic
that applies to each retriever and stores its values in the ``info`` of that
retriever's results, where signals read them
(:meth:`ragcal.signals.ResultBatch.info`).

A diagnostic applies either to a kind of retriever (``kind="bm25"``: every
:class:`~ragcal.retrieval.BM25Retriever`; ``kind="dense"``: every
:class:`~ragcal.retrieval.DenseRetriever` whose query embeddings the caller
passed) or to the retriever of one name (``retriever="dense"``), whatever its
type. The built-in ones are registered by the modules of this package
(:mod:`~ragcal.retrieval.diagnostics.bm25_statistics`,
:mod:`~ragcal.retrieval.diagnostics.dense_domain`); a signal that needs its
own corpus statistic registers one through
:func:`ragcal.signals.register_corpus_signal`, which is this hook plus a
signal that reads the value back.

The statistics come from the retriever object, never from a global corpus:
when a caller may only see some chunks, the retrievers are built on those
chunks only, and a restricted page cannot move a diagnostic.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from itertools import repeat
from typing import Callable, Mapping

import numpy as np

from ..._params import check_choice, parameter_error
from ..base import RetrievalResult

__all__ = [
    "DIAGNOSTIC_KINDS",
    "DIAGNOSTICS",
    "Diagnostic",
    "RetrieverBatch",
    "register_diagnostic",
    "unregister_diagnostic",
    "diagnostic_columns",
    "diagnostic_rows",
    "attach_diagnostics",
    "retriever_cache",
    "result_positions",
]

#: The kinds of retriever a diagnostic may apply to: ragcal's BM25 retrievers, and its dense retrievers whose query
#: embeddings are known.
DIAGNOSTIC_KINDS = ("bm25", "dense")


def retriever_cache(cache: weakref.WeakKeyDictionary, retriever, source, build):
    """``build(retriever)``, kept per retriever object while ``source`` (what it was built from) stays the same.

    ``cache`` is a module's own :class:`weakref.WeakKeyDictionary`, so an
    entry goes with its retriever. The entry is rebuilt when ``source`` is
    another object or the retriever holds another number of chunks.
    """
    entry = cache.get(retriever)
    if entry is not None and entry[0] is source and entry[1] == len(retriever.chunk_ids):
        return entry[2]
    value = build(retriever)
    cache[retriever] = (source, len(retriever.chunk_ids), value)
    return value


_POSITIONS: "weakref.WeakKeyDictionary[object, tuple]" = weakref.WeakKeyDictionary()


def result_positions(retriever, result: RetrievalResult, depth: int | None = None) -> np.ndarray:
    """Positions of a result's top ``depth`` chunks (all when None) in ``retriever``: its own stamp, else by id.

    A result's ``positions`` are trusted only when its ``source_ids`` are the
    retriever's own chunk list (the very object); any other result, built by
    hand or by another retriever, is looked up by chunk id.
    """
    if result.positions is not None and result.source_ids is retriever.chunk_ids:
        return result.positions[:depth]
    lookup = retriever_cache(
        _POSITIONS, retriever, retriever.chunk_ids, lambda r: {chunk_id: i for i, chunk_id in enumerate(r.chunk_ids)}
    )
    return np.fromiter(map(lookup.__getitem__, result.chunk_ids[:depth]), dtype=np.intp)


_PER_RETRIEVER: "weakref.WeakKeyDictionary[object, dict]" = weakref.WeakKeyDictionary()


class RetrieverBatch:
    """One retriever's results for a batch of queries, with the retriever object that produced them.

    What a diagnostic reads. Everything corpus-level must come from
    :attr:`retriever`, which holds only the chunks the caller may see.

    Parameters
    ----------
    retriever : object
        The retriever that produced ``results`` (a
        :class:`~ragcal.retrieval.BM25Retriever`, a
        :class:`~ragcal.retrieval.DenseRetriever`, or your own).
    queries : sequence of str
    results : sequence of RetrievalResult
        The retriever's result of each query, in the same order.
    name : str, default=None
        The retriever's name among the results (``"dense"``, ``"bm25_raw"``);
        defaults to the retriever's ``name`` attribute.
    query_vectors : ndarray of shape (n_queries, dim), default=None
        The query embeddings the caller's dense retriever searched with, when
        the caller passed them.

    Attributes
    ----------
    retriever, name, queries, results, query_vectors
        As given; ``queries`` and ``results`` as lists.
    """

    def __init__(self, retriever, queries, results, *, name: str | None = None, query_vectors=None):
        self.retriever = retriever
        self.name = name if name is not None else getattr(retriever, "name", None)
        self.queries = [str(query) for query in queries]
        self.results = list(results)
        if len(self.results) != len(self.queries):
            raise ValueError(f"RetrieverBatch: {len(self.queries)} queries but {len(self.results)} results")
        if query_vectors is not None:
            query_vectors = np.atleast_2d(np.asarray(query_vectors, dtype=np.float64))
            if query_vectors.shape[0] != len(self.queries):
                raise ValueError(
                    f"RetrieverBatch: {len(self.queries)} queries but {query_vectors.shape[0]} query vectors"
                )
        self.query_vectors = query_vectors
        self._shared: dict = {}

    def __len__(self) -> int:
        return len(self.queries)

    def positions(self, depth: int | None = None) -> list[np.ndarray]:
        """Positions, in :attr:`retriever`'s chunk list, of each result's first ``depth`` chunks (all when None)."""
        return [result_positions(self.retriever, result, depth) for result in self.results]

    def shared(self, key, build):
        """``build()``, computed once per batch: what several diagnostics of one batch share."""
        if key not in self._shared:
            self._shared[key] = build()
        return self._shared[key]

    def per_retriever(self, key, build):
        """``build(retriever)``, computed once per retriever object and kept while its chunk list stays the same.

        For corpus-level numbers that do not depend on the queries (a
        centroid, a vocabulary statistic): the first batch pays for them, the
        next ones reuse them. ``key`` names the number among those kept for
        the retriever, so two diagnostics that ask for one key share one
        value; ``build`` should not return an object that refers back to the
        retriever, which would then be kept alive.
        """
        kept = _PER_RETRIEVER.setdefault(self.retriever, {})
        chunk_ids = getattr(self.retriever, "chunk_ids", None)
        entry = kept.get(key)
        if entry is None or entry[0] is not chunk_ids or (chunk_ids is not None and entry[1] != len(chunk_ids)):
            entry = kept[key] = (chunk_ids, None if chunk_ids is None else len(chunk_ids), build(self.retriever))
        return entry[2]


@dataclass(frozen=True)
class Diagnostic:
    """A registered diagnostic.

    Attributes
    ----------
    name : str
        Its name in :data:`DIAGNOSTICS`.
    keys : tuple of str
        The ``info`` keys it returns, in order.
    function : callable
        ``function(RetrieverBatch) -> {key: ndarray of shape (n_queries,)}``.
    kind : str or None
        One of :data:`DIAGNOSTIC_KINDS`, or None when it applies by ``retriever``.
    retriever : str or None
        The name of the retriever it applies to, or None when it applies by ``kind``.
    qpp : bool
        A query-performance-prediction input, skipped with ``qpp=False``.
    origin : str
        Where the function was defined (``module.qualname``).
    """

    name: str
    keys: tuple[str, ...]
    function: Callable[[RetrieverBatch], Mapping[str, np.ndarray]]
    kind: str | None = None
    retriever: str | None = None
    qpp: bool = False
    origin: str = ""

    def applies(self, name: str, retriever, query_vectors) -> bool:
        """Whether it runs on the retriever ``retriever`` named ``name`` (with ``query_vectors``, maybe None)."""
        if self.retriever is not None:
            return name == self.retriever
        if self.kind == "bm25":
            from ..bm25 import BM25Retriever

            return isinstance(retriever, BM25Retriever)
        from ..dense import DenseRetriever

        return isinstance(retriever, DenseRetriever) and query_vectors is not None

    def columns(self, batch: RetrieverBatch) -> dict[str, np.ndarray]:
        """Its values on ``batch``: one float64 array of shape (n_queries,) per key, in the order of :attr:`keys`."""
        values = self.function(batch)
        if not isinstance(values, Mapping) or set(values) != set(self.keys):
            got = sorted(values) if isinstance(values, Mapping) else type(values).__name__
            raise ValueError(f"diagnostic {self.name!r} must return the keys {list(self.keys)}; got {got}")
        columns = {key: np.asarray(values[key], dtype=np.float64) for key in self.keys}
        for key, column in columns.items():
            if column.shape != (len(batch),):
                raise ValueError(
                    f"diagnostic {self.name!r} must return one value per query for {key!r}, shape ({len(batch)},); "
                    f"got shape {column.shape}"
                )
        return columns


#: The registry, in registration order (the order of the keys in a result's ``info``).
DIAGNOSTICS: dict[str, Diagnostic] = {}


def register_diagnostic(
    name: str, *, keys=None, kind: str | None = None, retriever: str | None = None, qpp: bool = False,
    replace: bool = False,
):
    """Decorator that registers ``function(batch: RetrieverBatch) -> {key: ndarray}`` as a diagnostic.

    Parameters
    ----------
    name : str
        The diagnostic's name in :data:`DIAGNOSTICS`.
    keys : tuple of str, default=None
        The ``info`` keys the function returns; defaults to ``(name,)``. A key
        belongs to one diagnostic only.
    kind : {"bm25", "dense"}, default=None
        Run on every retriever of this kind (see :data:`DIAGNOSTIC_KINDS`).
    retriever : str, default=None
        Run on the retriever of this name instead. Exactly one of ``kind`` and
        ``retriever`` is given.
    qpp : bool, default=False
        An input of the query-performance predictors, skipped by
        :func:`attach_diagnostics` with ``qpp=False``.
    replace : bool, default=False
        Replace a diagnostic of the same name defined elsewhere. Without it,
        the same name from the same place (module and qualified name of the
        function) is replaced silently, and from another place raises
        ``ValueError``.

    Examples
    --------
    >>> @register_diagnostic("query_length_example", kind="bm25")
    ... def query_length_example(batch):
    ...     return {"query_length_example": np.array([len(query.split()) for query in batch.queries], float)}
    >>> unregister_diagnostic("query_length_example")
    """
    if not isinstance(name, str) or not name:
        raise parameter_error("name", "register_diagnostic", "a non-empty string", name)
    if (kind is None) == (retriever is None):
        raise ValueError(
            f"register_diagnostic needs exactly one of 'kind' and 'retriever'. Got kind={kind!r}, "
            f"retriever={retriever!r} instead."
        )
    if kind is not None:
        check_choice(kind, "kind", "register_diagnostic", DIAGNOSTIC_KINDS)
    keys = (name,) if keys is None else ((keys,) if isinstance(keys, str) else tuple(keys))
    if not keys or not all(isinstance(key, str) and key for key in keys):
        raise parameter_error("keys", "register_diagnostic", "a non-empty tuple of non-empty strings", keys)

    def register(function):
        origin = _origin(function)
        existing = DIAGNOSTICS.get(name)
        if existing is not None and not replace and existing.origin != origin:
            raise ValueError(
                f"diagnostic {name!r} is already registered by {existing.origin}; {origin} defines it again. "
                "Rename one of them, or pass replace=True to override the first"
            )
        taken = {key: other.name for other in DIAGNOSTICS.values() if other.name != name for key in other.keys}
        clashes = sorted(key for key in keys if key in taken)
        if clashes:
            raise ValueError(
                f"diagnostic {name!r} would write the info keys {clashes}, which diagnostic "
                f"{taken[clashes[0]]!r} already writes"
            )
        DIAGNOSTICS[name] = Diagnostic(name, keys, function, kind, retriever, bool(qpp), origin)
        return function

    return register


def _origin(function) -> str:
    module = getattr(function, "__module__", None) or "<unknown>"
    return f"{module}.{getattr(function, '__qualname__', repr(function))}"


def unregister_diagnostic(name: str) -> None:
    """Remove a diagnostic from the registry; an unknown name lists the known ones."""
    if name not in DIAGNOSTICS:
        raise ValueError(f"unknown diagnostic {name!r}; registered diagnostics are: {', '.join(DIAGNOSTICS)}")
    del DIAGNOSTICS[name]


def diagnostic_columns(batch: RetrieverBatch, *, qpp: bool = True) -> dict[str, np.ndarray]:
    """Every registered diagnostic that applies to ``batch``'s retriever, run on it: ``{key: ndarray}``.

    In registration order; empty when none applies. ``qpp=False`` skips the
    query-performance-prediction inputs.
    """
    columns: dict[str, np.ndarray] = {}
    for diagnostic in list(DIAGNOSTICS.values()):
        if (qpp or not diagnostic.qpp) and diagnostic.applies(batch.name, batch.retriever, batch.query_vectors):
            columns.update(diagnostic.columns(batch))
    return columns


def diagnostic_rows(
    retrieved: dict, queries, retrievers: dict, *, query_vectors=None, qpp: bool = True
) -> dict[str, list[dict]]:
    """The ``info`` of every result in ``retrieved`` that has diagnostics: ``{retriever name: [dict per query]}``.

    What :func:`attach_diagnostics` stores (see it for the parameters); names
    without diagnostics are left out.
    """
    queries = [str(query) for query in queries]
    rows = {}
    for name, retriever in retrievers.items():
        if name not in retrieved:
            continue
        batch = RetrieverBatch(retriever, queries, retrieved[name], name=name, query_vectors=query_vectors)
        columns = diagnostic_columns(batch, qpp=qpp)
        if columns:
            keys = list(columns)
            rows[name] = list(map(dict, map(zip, repeat(keys), zip(*(column.tolist() for column in columns.values())))))
    return rows


def attach_diagnostics(retrieved: dict, queries, retrievers: dict, *, query_vectors=None, qpp: bool = True) -> dict:
    """Copy of ``retrieved`` whose results carry their retriever's diagnostics in ``info``.

    The diagnostics of each retriever are computed for the whole batch at
    once, by every registered diagnostic that applies to it
    (:func:`diagnostic_columns`).

    Parameters
    ----------
    retrieved : dict of str to list of RetrievalResult
        ``{retriever name: [result of query 0, query 1, ...]}``.
    queries : sequence of str
        The query texts, in the same order.
    retrievers : dict of str to retriever
        The objects that produced each named list (the ones built on the
        chunks this caller may see). :class:`BM25Retriever` and
        :class:`DenseRetriever` get the built-in diagnostics; any name gets
        those registered for it; other names are left as they are.
    query_vectors : ndarray of shape (n_queries, dim), default=None
        The query embeddings the dense retriever searched with; the dense
        diagnostics are skipped when None.
    qpp : bool, default=True
        Also the query-performance-prediction inputs (:data:`BM25_QPP_KEYS`,
        :data:`DENSE_QPP_KEYS`) that :mod:`ragcal.signals.qpp` reads.
    """
    output = dict(retrieved)
    for name, infos in diagnostic_rows(retrieved, queries, retrievers, query_vectors=query_vectors, qpp=qpp).items():
        output[name] = list(map(RetrievalResult._with_info, retrieved[name], infos))
    return output
