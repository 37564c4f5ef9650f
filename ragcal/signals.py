"""Gating signals: one number per query, computed from its retrieval results.

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

Signals that need more than a ranked list (IDF weights, the corpus centroid)
read the ``info`` mapping of a result, which
:mod:`ragcal.retrieval.diagnostics` fills from the retriever that produced it;
they are NaN for results without it (e.g. from a user's own retriever).

A score table is computed for a whole batch of queries at once
(:func:`compute_signals_batch`, used by :func:`ragcal.scoring.score_table`).
A signal registered with :func:`register_batch_signal` is a vectorised
function of a :class:`ResultBatch` that returns one value per query; every
built-in signal is one. Its per-query form, which gates call on one query, is
the same function on a batch of one, so there is one definition of each
formula. A signal registered with :func:`register_signal` is evaluated query
by query within the batch, with the same values as on its own::

    from ragcal.signals import register_batch_signal

    @register_batch_signal("dense_top3_mean", retrievers=("dense",))
    def dense_top3_mean(batch):  # a (n_queries, 3) matrix, NaN-padded: NaN with fewer than three hits
        return batch.top_scores("dense", 3).mean(axis=1)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from itertools import chain, repeat
from operator import attrgetter, itemgetter
from typing import Callable, Mapping, Sequence

import numpy as np

from .chunking import page_of
from .retrieval.base import RetrievalResult
from .retrieval.diagnostics import PAGE_NEIGHBOURS

__all__ = [
    "Signal",
    "SIGNALS",
    "NEW_SIGNALS",
    "ResultBatch",
    "register_signal",
    "register_batch_signal",
    "get_signal",
    "compute_signals",
    "compute_signals_batch",
    "signals_for",
    "unregister_signal",
    "load_signals_module",
]


_CHUNK_IDS = attrgetter("chunk_ids")
_SCORES = attrgetter("scores")
_INFO = attrgetter("info")
_POSITIONS = attrgetter("positions")
#: ResultBatch.top_scores keeps the first this many scores of each list for any k up to it.
_SHORT = 10


class ResultBatch:
    """The retrieval results of a batch of queries, as the arrays that vectorised signals read.

    Parameters
    ----------
    retrieved : mapping of str to sequence of RetrievalResult
        ``{retriever name: [result of query 0, query 1, ...]}``, as
        :meth:`ragcal.retrieval.index.RetrievalIndex.retrieve` returns; every
        list holds one result per query.

    Notes
    -----
    Each array is built on first use and kept, so signals that read the same
    one share it; they are read-only. Rows are queries, in order. Padding is
    NaN for scores and -1 for page codes, so a row shorter than the width
    asked for stays recognisable.

    Examples
    --------
    >>> import numpy as np
    >>> from ragcal.retrieval import RetrievalResult
    >>> batch = ResultBatch({"dense": [RetrievalResult("dense", ("a.md#0", "b.md#0"), np.array([0.9, 0.5])),
    ...                                RetrievalResult("dense", ("a.md#1",), np.array([0.7]))]})
    >>> batch.top_scores("dense", 2)
    array([[0.9, 0.5],
           [0.7, nan]])
    """

    def __init__(self, retrieved: Mapping[str, Sequence[RetrievalResult]]):
        self._retrieved = {name: list(results) for name, results in retrieved.items()}
        sizes = {name: len(results) for name, results in self._retrieved.items()}
        if len(set(sizes.values())) > 1:
            raise ValueError(f"ResultBatch needs one result per query from every retriever; got {sizes}")
        self._size = next(iter(sizes.values()), 0)
        self._arrays: dict = {}
        self._queries: list | None = None
        self._page_of_chunk: dict[str, int] = {}  # chunk id -> page code, for every chunk id seen so far
        self._page_codes: dict[str, int] = {}  # page -> code
        self._source_codes: dict[int, tuple] = {}  # id(a retriever's chunk ids) -> (them, page code per position)

    @classmethod
    def of_query(cls, results: Mapping[str, RetrievalResult]) -> "ResultBatch":
        """The batch of one query: ``{retriever name: RetrievalResult}``."""
        return cls({name: [result] for name, result in results.items()})

    def __len__(self) -> int:
        return self._size

    def __contains__(self, retriever) -> bool:
        return retriever in self._retrieved

    def __iter__(self):
        return iter(self._retrieved)

    @property
    def retrievers(self) -> tuple[str, ...]:
        """Names of the retrievers whose results the batch holds."""
        return tuple(self._retrieved)

    def results(self, retriever: str) -> list[RetrievalResult]:
        """The results of ``retriever``, one per query."""
        return self._retrieved[retriever]

    def query(self, position: int) -> dict[str, RetrievalResult]:
        """``{retriever name: RetrievalResult}`` of the query at ``position``, as a per-query signal takes it."""
        if self._queries is None:
            self._queries = [dict(zip(self._retrieved, row)) for row in zip(*self._retrieved.values())]
        return self._queries[position]

    def _array(self, key, build):
        if key not in self._arrays:
            array = build()
            array.setflags(write=False)
            self._arrays[key] = array
        return self._arrays[key]

    def lengths(self, retriever: str) -> np.ndarray:
        """Number of ranked chunks of each query, shape (n_queries,)."""
        return self._array(("lengths", retriever), lambda: _lengths(self._retrieved[retriever]))

    def scores(self, retriever: str, depth: int | None = None) -> np.ndarray:
        """Each result's first ``depth`` scores (all when None), best first: shape (n_queries, width), NaN-padded.

        The width is that of the longest list, cut at ``depth``.
        """

        def build():
            lengths = self.lengths(retriever)
            kept = lengths if depth is None else np.minimum(lengths, depth)
            every = np.concatenate([np.empty(0), *map(_SCORES, self._retrieved[retriever])])  # no slice per result
            if depth is not None:  # the first ``kept`` of each list: its start in ``every``, then one by one
                shift = (np.cumsum(lengths) - lengths) - (np.cumsum(kept) - kept)
                every = every[np.repeat(shift, kept) + np.arange(kept.sum())]
            return _padded(kept, every, np.nan)

        return self._array(("scores", retriever, depth), build)

    def top_scores(self, retriever: str, k: int) -> np.ndarray:
        """The ``k`` best scores of each query, shape (n_queries, k): NaN where a list is shorter."""
        scores = self.scores(retriever, max(k, _SHORT))  # one matrix serves every k up to _SHORT
        if scores.shape[1] >= k:
            return scores[:, :k]
        return np.pad(scores, ((0, 0), (0, k - scores.shape[1])), constant_values=np.nan)

    def info(self, retriever: str, key: str) -> np.ndarray:
        """``result.info[key]`` of each query, shape (n_queries,): NaN where a result lacks it."""

        def build():
            infos = map(_INFO, self._retrieved[retriever])
            return np.fromiter(map(dict.get, infos, repeat(key), repeat(np.nan)), float, self._size)

        return self._array(("info", retriever, key), build)

    def pages(self, retriever: str, depth: int | None = None) -> np.ndarray:
        """Page of each of the first ``depth`` chunks (all when None) as an integer code, -1-padded.

        Shape (n_queries, longest list cut at ``depth``). Codes are shared by
        every retriever of the batch: equal codes are equal pages
        (:func:`ragcal.chunking.page_of`).
        """
        return self._array(("pages", retriever, depth), lambda: self.pages_of(retriever, None, depth))

    def pages_of(self, retriever: str, queries, depth: int | None = None) -> np.ndarray:
        """:meth:`pages` of the queries at positions ``queries`` only (all when None), in that order; not kept."""
        results = self._retrieved[retriever]
        if queries is not None:
            results = [results[position] for position in np.asarray(queries, dtype=np.intp).tolist()]
        lengths = _lengths(results)
        kept = lengths if depth is None else np.minimum(lengths, depth)
        cut = (lambda values: values) if depth is None else functools.partial(map, itemgetter(slice(depth)))
        sources = {id(result.source_ids) for result in results}
        if len(sources) == 1 and results and results[0].source_ids is not None:
            # One retriever's results: look its chunk positions up in one array per batch, code by code.
            source = results[0].source_ids
            positions = np.concatenate([np.empty(0, dtype=np.intp), *cut(map(_POSITIONS, results))])
            table = self._source_codes.get(id(source), (None, None))[1]
            if table is None:
                table = np.full(len(source), -1, dtype=np.int64)
                self._source_codes[id(source)] = (source, table)  # the reference keeps the id from being reused
            new = np.unique(positions[table[positions] < 0]).tolist()
            table[new] = [self._code(source[position]) for position in new]
            return _padded(kept, table[positions], -1)
        chunk_ids = list(chain.from_iterable(cut(map(_CHUNK_IDS, results))))
        return _padded(kept, np.fromiter(map(self._code, chunk_ids), np.int64, len(chunk_ids)), -1)

    def _code(self, chunk_id: str) -> int:
        """Page code of a chunk id; the page of each chunk id is worked out once per batch."""
        code = self._page_of_chunk.get(chunk_id)
        if code is None:
            pages = self._page_codes
            code = self._page_of_chunk[chunk_id] = pages.setdefault(page_of(chunk_id), len(pages))
        return code


def _lengths(results) -> np.ndarray:
    return np.fromiter(map(len, map(_CHUNK_IDS, results)), np.intp, len(results))


def _padded(lengths: np.ndarray, values: np.ndarray, fill) -> np.ndarray:
    """(len(lengths), max length) matrix whose row i holds the next ``lengths[i]`` of ``values``, then ``fill``."""
    width = int(lengths.max(initial=0))
    matrix = np.full((lengths.size, width), fill, dtype=values.dtype)
    matrix[np.arange(width) < lengths[:, None]] = values
    return matrix


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
    """

    name: str
    function: Callable[[Mapping[str, RetrievalResult]], float]
    retrievers: tuple[str, ...]
    description: str = ""
    higher_is_answerable: bool = True
    passage_scale: bool = False
    origin: str = ""
    batch: Callable[[ResultBatch], np.ndarray] | None = None

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


def _registration(name, retrievers, description, higher_is_answerable, passage_scale, replace) -> tuple:
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"The 'name' parameter of register_signal must be a valid identifier. Got {name!r} instead.")
    if isinstance(retrievers, str):
        retrievers = (retrievers,)
    return name, tuple(retrievers), description, higher_is_answerable, passage_scale, replace


def _register(function, batch, name, retrievers, description, higher_is_answerable, passage_scale, replace):
    """Put the signal into the registry; returns what was decorated (the batch function for a batch signal)."""
    defined = batch if batch is not None else function
    origin = _origin(defined)
    existing = SIGNALS.get(name)
    if existing is not None and not replace and existing.origin != origin:
        raise ValueError(
            f"signal {name!r} is already registered by {existing.origin}; {origin} defines it again. "
            "Rename one of them, or pass replace=True to override the first"
        )
    summary = description or (defined.__doc__ or "").strip().split("\n")[0]
    SIGNALS[name] = Signal(
        name, function, retrievers, summary, higher_is_answerable, passage_scale, origin, batch=batch
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
        raise ValueError(f"The 'signals module' must be an existing .py file. Got {str(path)!r} instead.")
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
    """Remove a signal from the registry."""
    get_signal(name)
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


def _by_length(values: np.ndarray, lengths: np.ndarray, function, *, minimum: int = 1) -> np.ndarray:
    """``function(rows)`` on the first ``length`` columns of the rows of each length; NaN below ``minimum``.

    ``function`` maps a C-contiguous (n_rows, length) matrix to one value per
    row. NumPy reduces a contiguous row exactly as it reduces the same values
    as a 1-D array, so each query gets, bit for bit, what its own score vector
    would give: the padding never enters a sum.
    """
    output = np.full(values.shape[0], np.nan)
    for length in np.unique(lengths).tolist():
        if length >= minimum:
            rows = np.flatnonzero(lengths == length)
            output[rows] = function(np.ascontiguousarray(values[rows, :length]))
    return output


def _distinct_counts(codes: np.ndarray) -> np.ndarray:
    """Number of distinct non-negative codes in each row."""
    ordered = np.sort(codes, axis=1)
    new = ordered >= 0
    new[:, 1:] &= ordered[:, 1:] != ordered[:, :-1]
    return new.sum(axis=1)


# --------------------------------------------------------------------------- built-in signals


def _top(batch: ResultBatch, retriever: str, rank: int = 1) -> np.ndarray:
    """Score at 1-based ``rank`` of each query; NaN when the list is shorter."""
    return batch.top_scores(retriever, rank)[:, rank - 1]


def _top_or_zero(batch: ResultBatch, retriever: str) -> np.ndarray:
    """Best score of each query; 0 when nothing matched."""
    return np.where(batch.lengths(retriever) == 0, 0.0, _top(batch, retriever))


@register_batch_signal("dense_top1", retrievers=("dense",), passage_scale=True)
def dense_top1(batch):
    """Cosine similarity of the best chunk."""
    return _top(batch, "dense")


@register_batch_signal("dense_top2", retrievers=("dense",), passage_scale=True)
def dense_top2(batch):
    """Cosine similarity of the second-best chunk."""
    return _top(batch, "dense", 2)


@register_batch_signal("dense_gap", retrievers=("dense",))
def dense_gap(batch):
    """Cosine top-1 minus top-2 (the margin of the floor-and-gap check)."""
    return _top(batch, "dense") - _top(batch, "dense", 2)


@register_batch_signal("bm25_top1_raw", retrievers=("bm25_raw",), passage_scale=True)
def bm25_top1_raw(batch):
    """Best BM25 score, all tokens kept; 0 when nothing matched."""
    return _top_or_zero(batch, "bm25_raw")


@register_batch_signal("bm25_top1_stopwords", retrievers=("bm25_stopwords",), passage_scale=True)
def bm25_top1_stopwords(batch):
    """Best BM25 score, English stop words removed; 0 when nothing matched."""
    return _top_or_zero(batch, "bm25_stopwords")


@register_batch_signal("bm25_empty_raw", retrievers=("bm25_raw",), higher_is_answerable=False)
def bm25_empty_raw(batch):
    """1 when BM25 (all tokens) matched no chunk, else 0."""
    return (batch.lengths("bm25_raw") == 0).astype(float)


@register_batch_signal("bm25_empty_stopwords", retrievers=("bm25_stopwords",), higher_is_answerable=False)
def bm25_empty_stopwords(batch):
    """1 when BM25 without stop words matched no chunk, else 0."""
    return (batch.lengths("bm25_stopwords") == 0).astype(float)


@register_batch_signal("rrf_top1", retrievers=("rrf",), passage_scale=True)
def rrf_top1(batch):
    """Reciprocal-rank-fusion score of the best fused chunk."""
    return _top(batch, "rrf")


@register_batch_signal("rerank_top1", retrievers=("rerank",), passage_scale=True)
def rerank_top1(batch):
    """Cross-encoder score of the best re-scored candidate (needs a reranker; on the reranker's own scale)."""
    return _top(batch, "rerank")


@register_batch_signal("rerank_gap", retrievers=("rerank",))
def rerank_gap(batch):
    """Cross-encoder top-1 minus top-2: how clearly the reranker prefers one passage."""
    return _top(batch, "rerank") - _top(batch, "rerank", 2)


# --------------------------------------------------------------------------- the sorted top-k score vector
# Gisserot-Boukhlef et al. (TMLR 2024) found that a regression over the sorted retrieval scores beat the max, the
# standard deviation and the top-1/top-2 gap for deciding when to abstain; these are the summaries of that vector.

#: How many of the best dense scores the top-k features summarise.
TOP_K = 10


def _dense_top_k(batch: ResultBatch, function, *, minimum: int = 1) -> np.ndarray:
    """``function`` of each query's (up to) ``TOP_K`` best dense scores; NaN with fewer than ``minimum``."""
    lengths = np.minimum(batch.lengths("dense"), TOP_K)
    return _by_length(batch.top_scores("dense", TOP_K), lengths, function, minimum=minimum)


@register_batch_signal("dense_top10_mean", retrievers=("dense",))
def dense_top10_mean(batch):
    """Mean cosine of the ten best chunks (the level of the sorted top-k score vector); NaN with no hit."""
    return _dense_top_k(batch, lambda scores: scores.mean(axis=1))


@register_batch_signal("dense_top10_std", retrievers=("dense",))
def dense_top10_std(batch):
    """Standard deviation of the ten best cosines (the spread of the sorted top-k vector); NaN with no hit."""
    return _dense_top_k(batch, lambda scores: scores.std(axis=1))


def _drop(scores: np.ndarray) -> np.ndarray:
    """Minus the least-squares slope of each row of ``scores`` against its ranks 1, 2, ..."""
    ranks = np.arange(1, scores.shape[1] + 1) - (scores.shape[1] + 1) / 2  # centred ranks
    return -(ranks * (scores - scores.mean(axis=1, keepdims=True))).sum(axis=1) / (ranks**2).sum()


@register_batch_signal("dense_top10_drop", retrievers=("dense",))
def dense_top10_drop(batch):
    """Cosine lost per rank over the ten best chunks: minus the least-squares slope of score against rank.

    Large when a few chunks stand out above the rest (the slope of the sorted
    top-k vector); NaN with fewer than two hits.
    """
    return _dense_top_k(batch, _drop, minimum=2)


# --------------------------------------------------------------------------- length-normalised BM25


def _bm25_norm(batch: ResultBatch, retriever: str) -> np.ndarray:
    max_score = batch.info(retriever, "max_score")
    values = np.where(np.isnan(max_score), np.nan, 0.0)
    scored = (batch.lengths(retriever) > 0) & (max_score > 0)  # NaN > 0 is False
    values[scored] = _top(batch, retriever)[scored] / max_score[scored]
    return values


@register_batch_signal("bm25_norm_raw", retrievers=("bm25_raw",))
def bm25_norm_raw(batch):
    """Best BM25 score (all tokens) over the query's maximum attainable score, the sum of idf * (k1 + 1).

    Between 0 and 1 whatever the query's length, so long and short queries are
    comparable; 0 when nothing matched. The maximum comes from the BM25
    retriever that scored the query (``info["max_score"]``); NaN without it.
    """
    return _bm25_norm(batch, "bm25_raw")


@register_batch_signal("bm25_norm_stopwords", retrievers=("bm25_stopwords",))
def bm25_norm_stopwords(batch):
    """Best BM25 score without stop words over the query's maximum attainable score (as ``bm25_norm_raw``)."""
    return _bm25_norm(batch, "bm25_stopwords")


# --------------------------------------------------------------------------- lexical coverage


@register_batch_signal("bm25_coverage_top10", retrievers=("bm25_raw",))
def bm25_coverage_top10(batch):
    """IDF-weighted share of the query's distinct terms found in the ten best BM25 chunks (all tokens).

    From the BM25 retriever that scored the query (``info["coverage_top"]``):
    a question whose rare terms no top passage contains is probably not
    covered. NaN without that information or for a query with no token.
    """
    return batch.info("bm25_raw", "coverage_top")


@register_batch_signal("bm25_coverage_corpus", retrievers=("bm25_raw",))
def bm25_coverage_corpus(batch):
    """IDF-weighted share of the query's distinct terms that occur anywhere in the corpus (all tokens).

    A term the corpus never uses counts with the IDF it would have at document
    frequency 0, so one unknown rare word weighs a lot (``info["coverage_corpus"]``).
    """
    return batch.info("bm25_raw", "coverage_corpus")


# --------------------------------------------------------------------------- dense-BM25 agreement


@register_batch_signal("dense_bm25_page_overlap", retrievers=("dense", "bm25_stopwords"))
def dense_bm25_page_overlap(batch):
    """Jaccard overlap of the pages among the ten best dense chunks and the ten best BM25 chunks (no stop words).

    Two retrievers that agree on where the answer is suggest there is one; 0
    when BM25 matched nothing, NaN when dense found nothing.
    """
    dense, lexical = batch.pages("dense", TOP_K), batch.pages("bm25_stopwords", TOP_K)
    n_dense, n_lexical = _distinct_counts(dense), _distinct_counts(lexical)
    union = _distinct_counts(np.concatenate([dense, lexical], axis=1))
    with np.errstate(invalid="ignore"):
        return np.where(n_dense > 0, (n_dense + n_lexical - union) / union, np.nan)


def _page_rank(pages: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Position of the first ``target[i]`` in ``pages[i]`` (-1 when absent) and how many distinct pages precede it."""
    width = pages.shape[1]
    hits = (pages == target[:, None]) & (target[:, None] >= 0)
    first = np.where(hits, np.arange(width), width).min(axis=1, initial=width)
    before = _distinct_counts(np.where(np.arange(width) < first[:, None], pages, -1))
    return np.where(first < width, first, -1), before


@register_batch_signal("dense_top_page_bm25_rr", retrievers=("dense", "bm25_stopwords"))
def dense_top_page_bm25_rr(batch):
    """Reciprocal rank of the dense top page among the pages BM25 (no stop words) returns, in BM25's order.

    1 when both put the same page first, 0 when BM25 does not list it (or
    matched nothing); NaN when dense found nothing.
    """
    dense = batch.pages("dense", TOP_K)
    top_page = dense[:, 0] if dense.shape[1] else np.full(len(batch), -1)
    first, before = _page_rank(batch.pages("bm25_stopwords", TOP_K), top_page)
    # Most queries meet the page among BM25's first chunks; only the others need the pages of their whole list.
    deeper = np.flatnonzero((first < 0) & (top_page >= 0) & (batch.lengths("bm25_stopwords") > TOP_K))
    if deeper.size:
        first[deeper], before[deeper] = _page_rank(batch.pages_of("bm25_stopwords", deeper), top_page[deeper])
    values = np.where(first >= 0, 1.0 / (before + 1), 0.0)
    return np.where(batch.lengths("dense") > 0, values, np.nan)


# --------------------------------------------------------------------------- domain scores (seed 003, no LLM)


@register_batch_signal("dense_centroid_cosine", retrievers=("dense",))
def dense_centroid_cosine(batch):
    """Cosine between the query and the centroid of the corpus's chunk embeddings ("is this our domain at all").

    The centroid is that of the dense retriever that searched the query
    (``info["centroid_cosine"]``); NaN without it.
    """
    return batch.info("dense", "centroid_cosine")


@register_batch_signal(f"dense_page_knn{PAGE_NEIGHBOURS}", retrievers=("dense",))
def dense_page_knn(batch):
    """Mean cosine between the query and its five nearest page centroids (mean embedding of a page's chunks).

    A softer domain check than the single corpus centroid: a corpus covers
    several topics. From the dense retriever that searched the query
    (``info["page_knn_cosine"]``); NaN without it.
    """
    return batch.info("dense", "page_knn_cosine")


#: The signals this module adds beyond the top scores (issue 11), in registration order.
NEW_SIGNALS = (
    "dense_top10_mean",
    "dense_top10_std",
    "dense_top10_drop",
    "bm25_norm_raw",
    "bm25_norm_stopwords",
    "bm25_coverage_top10",
    "bm25_coverage_corpus",
    "dense_bm25_page_overlap",
    "dense_top_page_bm25_rr",
    "dense_centroid_cosine",
    f"dense_page_knn{PAGE_NEIGHBOURS}",
)


# The query-performance predictors (issue 21) register themselves as signals too. Imported last: ragcal.qpp imports
# this module, which is complete by now, so importing either one first gives the same registry, in the same order.
from . import qpp as _qpp  # noqa: E402, F401
