"""The research loop: a new signal beside ``dense_top1`` on every bundled corpus and public benchmark, in a minute.

::

    from ragcal.signals import register_signal
    from ragcal.study.try_signal import try_signal

    @register_signal("dense_lift", retrievers=("dense",))
    def dense_lift(results):
        scores = results["dense"].scores
        return float(scores[0] - scores[1:10].mean())

    try_signal(["dense_lift"])   # or ``ragcal try-signal my_signal.py``

For every dataset (the bundled corpora of :data:`ragcal.datasets.BUNDLED`,
the benchmarks of :data:`ragcal.study.imported.BENCHMARKS`) it takes every
question's retrieval results, computes ``dense_top1`` and the new signal(s),
and reports per signal:

- the AUC, answerable against all unanswerable questions, with the
  stratified bootstrap interval over questions of
  :func:`ragcal.metrics.auc_table` (each signal oriented by its registered
  ``higher_is_answerable``); on a benchmark whose questions come in articles
  also the article-bootstrap interval of
  :func:`ragcal.study.imported_stats.clustered_auc`, as the benchmark study
  reports it;
- a held-out ``keep@0.95`` gate (:func:`ragcal.calibration.heldout_outcomes`):
  fitted on the calibration half of each split and counted on the other half,
  as the share of answerable and of unanswerable questions it refuses: the
  mean over splits and the 2.5th and 97.5th percentiles (the spread the
  benchmark study reports, :func:`ragcal.study.imported_report.spread`).
  On a bundled corpus each split halves every slice at random
  (:func:`ragcal.calibration.split_by_slice`); on a benchmark it gives half
  the articles to calibration (:func:`ragcal.calibration.group_splits`, as
  the benchmark study does).

The retrieval results come from the saved index (:mod:`ragcal.retrieval.store`)
and the embedding cache; warm, what remains is retrieving every question again,
so the lists are cached too (:mod:`ragcal.study.retrieved_cache`), keyed by
everything they depend on. A warm run then computes only the signals and
their statistics.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._params import check_int
from ..calibration import group_splits, heldout_outcomes
from ..datasets import BUNDLED, BundledCorpus, bundled
from ..metrics import auc_table
from ..score_tables import answerable_sign
from ..scoring import score_table
from ..signals import SIGNALS, Signal, get_signal
from .imported import BENCHMARKS, BenchmarkInputs, benchmark_questions
from .imported_report import spread
from .imported_stats import BASELINE_SIGNAL, GROUP_COLUMN, LEARNED_RULE, clustered_auc
from .retrieved_cache import cached_retrieval

__all__ = [
    "TRIAL_RULE",
    "DEFAULT_SPLITS",
    "TrialData",
    "signal_names",
    "trial_data",
    "trial_rows",
    "try_signal",
    "trial_report",
]

#: The gate each signal is held out with (the benchmark study's main rule).
TRIAL_RULE = LEARNED_RULE
#: Held-out splits per dataset by default: as many as ``ragcal reproduce`` uses. Warm (indexes, embeddings and
#: retrieved lists cached), a run over both bundled corpora and SQuAD half A with them took about 10 s on two busy
#: cores; a benchmark split by article has at most its C(g, g/2) article splits (70 for SQuAD half A's 8).
DEFAULT_SPLITS = 1000


@dataclass(frozen=True)
class TrialData:
    """One dataset's questions and their retrieval results.

    Attributes
    ----------
    name : str
        ``fastapi``, ``rust-book``, ``squad2-A``.
    queries : DataFrame
        The labeled questions, in the order of the results.
    retrieved : dict of str to list of RetrievalResult
        ``{retriever name: [result of question 0, question 1, ...]}``.
    groups : ndarray or None
        The article of each question on a benchmark (splits and intervals
        keep an article whole); None on a bundled corpus.
    from_cache : bool
        Whether the lists were read from the retrieval cache.
    """

    name: str
    queries: pd.DataFrame
    retrieved: dict
    groups: np.ndarray | None
    from_cache: bool


def signal_names(signals) -> list[str]:
    """The registered names of ``signals``: names, :class:`~ragcal.signals.Signal` objects or registered functions.

    Parameters
    ----------
    signals : str, Signal, callable or sequence of them
        A function must be the one a ``register_*`` decorator registered
        (what the decorator returned).

    Returns
    -------
    list of str
        In the given order, each once.

    Raises
    ------
    ValueError
        For an unknown name (listing the registered ones), a function that
        is not registered, or no signal at all.
    """
    if isinstance(signals, (str, Signal)) or callable(signals):
        signals = [signals]
    names = []
    for item in signals:
        if isinstance(item, str):
            names.append(get_signal(item).name)
        elif isinstance(item, Signal):
            names.append(get_signal(item.name).name)
        elif callable(item):
            found = [
                name for name, signal in SIGNALS.items()
                if any(item is function for function in (signal.function, signal.batch, signal.corpus))
            ]
            if not found:
                raise ValueError(
                    f"function {getattr(item, '__qualname__', item)!r} is not a registered signal; decorate it with "
                    "ragcal.signals.register_signal(name, retrievers=...) first"
                )
            names.append(found[0])
        else:
            raise TypeError(
                "The 'signals' parameter of try_signal must hold signal names, Signal objects or registered "
                f"functions. Got {type(item).__name__} instead."
            )
    if not names:
        raise ValueError("The 'signals' parameter of try_signal must name at least one signal. Got none.")
    return list(dict.fromkeys(names))


def trial_data(dataset, *, embedder=None, cache_dir=None, use_cache: bool = True, retrieve_again: bool = False):
    """The questions of a bundled corpus or benchmark and their retrieval results (:class:`TrialData`).

    ``dataset`` is a :class:`~ragcal.datasets.BundledCorpus` or a
    :class:`~ragcal.study.imported.BenchmarkInputs` (or the name of one in
    :data:`~ragcal.datasets.BUNDLED` or :data:`~ragcal.study.imported.BENCHMARKS`).

    A bundled corpus is indexed without its non-doc pages, as the study does;
    a benchmark is imported from its vendored file (once, into the cache,
    :meth:`ragcal.study.imported.BenchmarkInputs.resolve`), its questions read
    by :func:`ragcal.study.imported.benchmark_questions` and retrieved as
    :func:`ragcal.study.imported.retrieve_benchmark` does. With
    ``use_cache`` the lists are read from, or written to, the retrieval cache
    (:func:`ragcal.study.retrieved_cache.cached_retrieval`, in the embedder's
    cache folder); ``retrieve_again`` retrieves anyway (a corpus signal is
    computed at retrieval time) and refreshes the cached lists.
    """
    from ..embedding import load_embedder
    from ..queries import load_queries
    from ..retrieval.index import build_index

    dataset = _dataset(dataset)
    embedder = embedder or load_embedder(cache_dir=cache_dir)
    if isinstance(dataset, BenchmarkInputs):
        corpus, queries_path = dataset.resolve(cache_dir=cache_dir)
        queries = benchmark_questions(corpus, queries_path)
        index = build_index(corpus, embedder=embedder)
    else:
        index = build_index(dataset.corpus, exclude=dataset.exclude, embedder=embedder)
        queries = load_queries(dataset.queries, corpus_paths=index.doc_paths)
    retrieved, from_cache = cached_retrieval(
        index,
        queries["query"],
        lambda: index.retrieve(queries["query"]),
        cache_dir=getattr(embedder, "cache_dir", None) if use_cache else None,
        refresh=retrieve_again,
    )
    groups = queries[GROUP_COLUMN].to_numpy() if GROUP_COLUMN in queries.columns else None
    return TrialData(dataset.name, queries, retrieved, groups, from_cache)


def _dataset(dataset):
    """A dataset given by name (a bundled corpus first, then a benchmark) or as a spec, as its spec."""
    if isinstance(dataset, (BundledCorpus, BenchmarkInputs)):
        return dataset
    if isinstance(dataset, str) and dataset in BENCHMARKS and dataset not in BUNDLED:
        return BENCHMARKS[dataset]
    if isinstance(dataset, str) and dataset not in BUNDLED:
        raise ValueError(
            f"unknown dataset {dataset!r}; bundled corpora: {', '.join(BUNDLED)}; benchmarks: {', '.join(BENCHMARKS)}"
        )
    return bundled(dataset)


def trial_rows(
    data: TrialData, signals, *, n_resamples: int = 2000, n_splits: int = DEFAULT_SPLITS, random_state=0
) -> pd.DataFrame:
    """The rows of :func:`try_signal` for one dataset: ``dense_top1`` first, then ``signals`` (registered names)."""
    names = [BASELINE_SIGNAL] + [name for name in signals if name != BASELINE_SIGNAL]
    table = score_table(data.queries, data.retrieved, signals=names)
    directions = {name: SIGNALS[name].higher_is_answerable for name in names}
    aucs = auc_table(table, names, directions=directions, n_resamples=n_resamples, random_state=random_state)
    aucs = aucs[aucs["comparison"] == "all unanswerable"].set_index("signal")
    if data.groups is not None:
        splits, split_by = group_splits(data.groups, max_splits=n_splits, random_state=random_state), "article"
    else:
        splits, split_by = None, "slice"
    answerable = table["answerable"].to_numpy(dtype=bool)
    rows = []
    for name in names:
        higher = directions[name]
        row = {"dataset": data.name, "signal": name, "higher_is_answerable": higher, "n_questions": len(table)}
        row.update(aucs.loc[name, ["auc", "ci_low", "ci_high"]].to_dict())
        row.update({column: int(aucs.loc[name, column]) for column in ("n_answerable", "n_unanswerable")})
        row["article_low"] = row["article_high"] = math.nan
        if data.groups is not None:
            oriented = table[name].to_numpy(dtype=float) * answerable_sign(higher)
            _, row["article_low"], row["article_high"] = clustered_auc(
                answerable, oriented, data.groups, n_resamples=n_resamples, random_state=random_state
            )
        heldout = heldout_outcomes(
            table, name, [TRIAL_RULE], n_splits=n_splits, random_state=random_state, higher_is_answerable=higher,
            splits=splits,
        )
        row["threshold"] = float(heldout["threshold"].median())
        for column, values in (
            ("answerable_refused", 1.0 - heldout["answerable_kept"]),
            ("unanswerable_refused", heldout["unanswerable_refused"]),
        ):
            row[column], row[f"{column}_low"], row[f"{column}_high"] = spread(values)
        row.update(n_splits=len(heldout), split_by=split_by)
        rows.append(row)
    return pd.DataFrame(rows)


def try_signal(
    signals,
    *,
    corpora=None,
    benchmarks=None,
    n_resamples: int = 2000,
    n_splits: int | None = None,
    random_state=0,
    embedder=None,
    cache_dir=None,
    use_cache: bool = True,
    log=print,
) -> pd.DataFrame:
    """Evaluate new signals beside ``dense_top1`` on every bundled corpus and benchmark (see the module docstring).

    Parameters
    ----------
    signals : str, Signal, callable or sequence of them
        The registered signals to try (:func:`signal_names`).
    corpora : sequence of str or BundledCorpus, default=None
        Bundled corpora by name (``fastapi``, ``rust-book``) or a
        :class:`~ragcal.datasets.BundledCorpus` of your own; all of
        :data:`~ragcal.datasets.BUNDLED` when None.
    benchmarks : sequence of str or BenchmarkInputs, default=None
        Public benchmarks by name (``squad2-A``, imported from
        ``data/benchmarks/``) or a :class:`~ragcal.study.imported.BenchmarkInputs`;
        all of :data:`~ragcal.study.imported.BENCHMARKS` when None.
    n_resamples : int, default=2000
        Bootstrap resamples of each AUC interval.
    n_splits : int, default=None
        Held-out splits per dataset (on a benchmark, at most its article
        splits); :data:`DEFAULT_SPLITS` when None.
    random_state : int, default=0
    embedder : EmbedderProtocol, default=None
        MiniLM through the embedding cache in ``cache_dir`` when None.
    cache_dir : str or Path, default=None
        The cache folder: embeddings, saved indexes, imported benchmarks and
        retrieved lists (``$RAGCAL_CACHE_DIR`` or the user cache when None).
    use_cache : bool, default=True
        Read and write the cached retrieved lists (the embedding cache and
        saved indexes are the embedder's to use). A corpus signal among
        ``signals`` is computed at retrieval time, so its datasets are
        retrieved again whatever this says.
    log : callable or None, default=print
        Called with one line per dataset (with its elapsed seconds); None is silent.

    Returns
    -------
    DataFrame
        One row per dataset and signal, ``dense_top1`` first in each dataset:
        ``dataset, signal, higher_is_answerable, n_questions, n_answerable,
        n_unanswerable, auc, ci_low, ci_high`` (stratified bootstrap over
        questions), ``article_low, article_high`` (article bootstrap; NaN
        on a bundled corpus), ``threshold`` (median over splits of the
        held-out ``keep@0.95`` threshold), ``answerable_refused,
        unanswerable_refused`` (mean share refused on the evaluation halves)
        each with ``_low`` and ``_high`` (2.5th and 97.5th percentile over
        splits), ``n_splits, split_by`` (``slice`` or ``article``) and
        ``seconds`` (the dataset's wall time).

    Examples
    --------
    >>> try_signal("dense_gap", corpora=["fastapi"], benchmarks=[])  # doctest: +SKIP
    """
    names = signal_names(signals)
    n_resamples = check_int(n_resamples, "n_resamples", "try_signal", low=0)
    n_splits = DEFAULT_SPLITS if n_splits is None else check_int(n_splits, "n_splits", "try_signal", low=1)
    corpora = [
        corpus if isinstance(corpus, BundledCorpus) else bundled(corpus)
        for corpus in (BUNDLED if corpora is None else corpora)
    ]
    unknown = [name for name in (benchmarks or ()) if isinstance(name, str) and name not in BENCHMARKS]
    if unknown:
        raise ValueError(f"unknown benchmark {unknown[0]!r}; known: {', '.join(BENCHMARKS)}")
    benchmarks = [
        benchmark if isinstance(benchmark, BenchmarkInputs) else BENCHMARKS[benchmark]
        for benchmark in (BENCHMARKS if benchmarks is None else benchmarks)
    ]
    if not corpora + benchmarks:
        raise ValueError("try_signal needs at least one corpus or benchmark. Got none.")
    log = log or (lambda message: None)
    from ..embedding import load_embedder

    embedder = embedder or load_embedder(cache_dir=cache_dir)
    at_retrieval = any(SIGNALS[name].corpus is not None for name in names)
    frames = []
    for dataset in corpora + benchmarks:
        start = time.perf_counter()
        data = trial_data(dataset, embedder=embedder, cache_dir=cache_dir, use_cache=use_cache,
                          retrieve_again=at_retrieval)
        retrieved_at = time.perf_counter()
        rows = trial_rows(data, names, n_resamples=n_resamples, n_splits=n_splits, random_state=random_state)
        seconds = time.perf_counter() - start
        frames.append(rows.assign(seconds=seconds))
        how = "cached lists" if data.from_cache else "retrieved"
        log(
            f"{data.name}: {len(data.queries)} questions, {how} in {retrieved_at - start:.1f} s, signals and statistics "
            f"in {seconds - (retrieved_at - start):.1f} s ({rows['n_splits'].iloc[0]} splits by "
            f"{rows['split_by'].iloc[0]}); {seconds:.1f} s"
        )
    return pd.concat(frames, ignore_index=True)


def _interval(value, low, high, *, percent: bool = False) -> str:
    if pd.isna(value):
        return "n/a"
    if percent:
        return f"{value:.1%} [{low:.1%}, {high:.1%}]"
    return f"{value:.3f} [{low:.3f}, {high:.3f}]"


def trial_report(rows: pd.DataFrame) -> str:
    """:func:`try_signal`'s rows as plain text: one block per dataset (``dense_top1`` first), with its wall time."""
    blocks = []
    for dataset, frame in rows.groupby("dataset", sort=False):
        first = frame.iloc[0]
        grouped = frame["split_by"].iloc[0] == "article"
        header = (
            f"{dataset}: {first['n_questions']} questions ({first['n_answerable']} answerable, "
            f"{first['n_unanswerable']} unanswerable); {TRIAL_RULE} held out over {first['n_splits']} splits by "
            f"{first['split_by']}; {first['seconds']:.1f} s"
        )
        table = pd.DataFrame(
            {
                "signal": frame["signal"],
                "AUC [95% CI, questions]": [
                    _interval(row.auc, row.ci_low, row.ci_high) for row in frame.itertuples()
                ],
                **(
                    {"[95% CI, articles]": [f"[{row.article_low:.3f}, {row.article_high:.3f}]"
                                            for row in frame.itertuples()]}
                    if grouped else {}
                ),
                "threshold": [f"{value:.3f}" for value in frame["threshold"]],
                "answerable refused": [
                    _interval(row.answerable_refused, row.answerable_refused_low, row.answerable_refused_high,
                              percent=True)
                    for row in frame.itertuples()
                ],
                "unanswerable refused": [
                    _interval(row.unanswerable_refused, row.unanswerable_refused_low, row.unanswerable_refused_high,
                              percent=True)
                    for row in frame.itertuples()
                ],
            }
        )
        blocks.append(header + "\n" + table.to_string(index=False))
    notes = (
        "AUC: answerable vs all unanswerable, stratified bootstrap over questions (articles: bootstrap of whole "
        f"articles). Refused: mean share on the held-out halves [2.5th, 97.5th percentile over splits] of a "
        f"{TRIAL_RULE} threshold fitted on the calibration halves; threshold: its median."
    )
    return "\n\n".join(blocks + [notes])
