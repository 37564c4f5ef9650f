"""The benchmark study: ragcal's signals, thresholds and learned gate on a public benchmark, split by article.

On SQuAD 2.0 (``results/squad2-A/``) the questions come in articles: many
questions about one paragraph, many paragraphs of one article. They are not
independent, so wherever something is fitted the split is **by article**,
never by question (:func:`ragcal.calibration.group_splits`: with 8 articles,
all C(8, 4) = 70 ways to give half of them to calibration), and the headline
AUCs get an article-clustered bootstrap interval beside the usual one over
questions. What :func:`benchmark_study` writes:

- ``scores.csv`` (+ ``.meta.json``): the score table of ragcal's defaults (MiniLM,
  heading-aware chunks, every registered signal), with the ``group`` (article)
  of each question;
- ``auc.csv``: every signal's AUC with its stratified bootstrap interval over
  questions (:func:`ragcal.metrics.auc_table`), sorted;
- ``auc_clustered.csv``: the headline signals (and the learned score) with
  both intervals, over questions and over articles;
- ``heldout.csv``: the threshold rules of the bundled corpora fitted on half
  the articles and counted on the other half, every article split, per slice;
- ``learned_scores.csv`` and ``learned_gate.csv``: a logistic gate over all
  signals, its scores cross-fitted by article (each article scored by a model
  fitted on the others) and its ``keep@0.95`` outcomes nested held out by
  article (model **and** threshold fitted on the calibration articles only);
- ``risk_coverage.csv`` and ``risk_coverage_summary.csv``: risk-coverage
  curves and AURC with intervals over questions and over articles; support
  is "answerable, and a passage passed on is from the gold page", as in
  :mod:`ragcal.study.selective`;
- ``operating_points.csv``: binary logged signals (an LLM's ``found_answer``)
  as points on the same ROC and risk-coverage axes, with Clopper-Pearson
  intervals (questions taken as independent) and article-clustered ones;
- ``summary.md`` (:mod:`ragcal.study.imported_report`), beside the bundled
  corpora's numbers read from their own results.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .._io import atomic_write_text
from ..calibration import fit_threshold, group_splits, heldout_outcomes
from ..corpus import corpus_pages
from ..datasets import DATA_DIR
from ..gates import support_levels
from ..gates.learned import crossfit_scores
from ..gates.support import bar_support, support_inputs
from ..metrics import auc_table
from ..metrics.binary import is_binary_signal
from ..queries import QueryFileError, load_queries
from ..retrieval.base import RetrievalResult
from ..runs import write_trec_runs
from ..score_tables import answerable_sign, write_score_table
from ..scoring import score_table
from ..signals import SIGNALS
from .imported_stats import (
    BASELINE_SIGNAL,
    GROUP_COLUMN,
    LEARNED_RULE,
    clustered_auc,
    headline_signals,
    learned_heldout,
    operating_points,
    risk_coverage_study,
)
from .learned import candidate_sets
from .report import HELDOUT_RULES
from .selective import threshold_gate_support

__all__ = [
    "BenchmarkInputs",
    "RUN_DEPTH",
    "BENCHMARKS",
    "benchmark_questions",
    "retrieve_benchmark",
    "score_benchmark",
    "join_logged_file",
    "protocol_comparison",
    "benchmark_study",
    "read_benchmark_results",
]

#: Ranks of each question's dense run that the study commits (``runs/dense.run``) and anchors to: the passages a gate
#: passes on (at most 10). The whole run (100 ranks of 2,828 questions) would be 20 MB.
RUN_DEPTH = 10


@dataclass(frozen=True)
class BenchmarkInputs:
    """Where one benchmark's files are: either an imported Markdown corpus and its labeled queries (with a
    ``group`` column), or a ``source`` file in a public format that :meth:`resolve` imports with
    :func:`ragcal.importers.import_benchmark`; optionally logged signals (a CSV with ``id`` and one column per
    signal, e.g. ``llm_found_answer``). With ``llm_sample`` and no ``logged`` file, reproducing asks the local LLM
    about that many questions (:func:`ragcal.study.imported_llm.llm_baseline`) and joins its verdicts."""

    name: str
    title: str
    corpus: Path | None = None
    queries: Path | None = None
    logged: Path | None = None
    source: Path | None = None
    format: str | None = None
    llm_sample: int | None = None

    def resolve(self, *, cache_dir=None) -> tuple[Path, Path]:
        """``(corpus folder, queries file)``: the given ones, or those imported from ``source``.

        The import goes to ``<cache>/benchmarks/<name>-<first 12 hex digits of the source's sha256>/`` (the
        embedding cache's folder, :func:`ragcal.embedding.cache.default_cache_dir`, unless ``cache_dir``) and is
        reused while the source is unchanged: importing is deterministic, and a folder appears there only whole.
        """
        if self.source is None:
            return Path(self.corpus), Path(self.queries)
        from .._io import sha256_file
        from ..importers import import_benchmark
        from ..embedding.cache import default_cache_dir

        source = Path(self.source)
        if not source.is_file():
            raise FileNotFoundError(f"{source}: the {self.name} benchmark's source file is not there")
        folder = Path(cache_dir or default_cache_dir()) / "benchmarks" / f"{self.name}-{sha256_file(source)[:12]}"
        if not (folder / "queries.csv").is_file():
            import_benchmark(self.format, source, folder, overwrite=True)
        return folder / "corpus", folder / "queries.csv"


#: The benchmarks ``ragcal reproduce --benchmark NAME`` knows, imported from the files vendored under
#: ``data/benchmarks/<name>/``.
BENCHMARKS = {
    "squad2-A": BenchmarkInputs(
        "squad2-A",
        "SQuAD 2.0 dev set, half A (8 articles)",
        source=DATA_DIR / "benchmarks" / "squad2-A" / "dev-v2.0-half-A.json",
        format="squad2",
        llm_sample=300,  # the local LLM's verdicts on a stratified sample (ragcal.study.imported_llm)
    ),
}


#: Columns of the study's table that are not signals.
KEY_COLUMNS = ("id", "query", "answerable", "slice", GROUP_COLUMN)


def _project_relative(path) -> str:
    """``path`` relative to the project root when it lies inside it, else its name (results carry no machine paths)."""
    resolved, root = Path(path).resolve(), DATA_DIR.parent.resolve()
    return resolved.relative_to(root).as_posix() if resolved.is_relative_to(root) else Path(path).name


def _directions(table: pd.DataFrame, declared=None) -> dict:
    """``higher_is_answerable`` of every registered signal of ``table``; of a logged column, its file's declared
    direction (``{"name": "higher" | "lower"}``), else True (an LLM's ``found_answer``: 1 means answerable)."""
    declared = declared or {}
    return {
        name: SIGNALS[name].higher_is_answerable if name in SIGNALS else declared.get(name, "higher") == "higher"
        for name in table.columns
        if name not in KEY_COLUMNS and pd.api.types.is_numeric_dtype(table[name])
    }


def _oriented(table: pd.DataFrame, name: str, directions: dict) -> np.ndarray:
    return table[name].to_numpy(dtype=float) * answerable_sign(directions.get(name, True))


def benchmark_questions(corpus_dir, queries_path, *, articles=None):
    """The labeled questions of ``queries_path``, checked against the pages of ``corpus_dir``, each with its article.

    Parameters
    ----------
    corpus_dir, queries_path, articles
        As for :func:`score_benchmark`.

    Returns
    -------
    DataFrame
        :func:`ragcal.queries.load_queries` of the file, with its ``group``
        column (only the rows of ``articles`` when given).

    Raises
    ------
    QueryFileError
        When the file has no ``group`` column or an empty group (naming the file and line).
    """
    queries_path = Path(queries_path)
    pages = {path.relative_to(corpus_dir).as_posix() for path in corpus_pages(corpus_dir)} if Path(
        corpus_dir
    ).is_dir() else set()
    if not pages:
        raise OSError(f"{corpus_dir}: no Markdown pages to index")
    queries = load_queries(queries_path, corpus_paths=pages)
    if GROUP_COLUMN not in queries.columns:
        raise QueryFileError(
            f"{queries_path}: missing column {GROUP_COLUMN!r} (the article of each question); the benchmark study "
            "splits by it"
        )
    empty = np.flatnonzero(queries[GROUP_COLUMN].str.strip() == "")
    if empty.size:
        raise QueryFileError(f"{queries_path}, line {empty[0] + 2}, column {GROUP_COLUMN!r}: empty group")
    if articles is not None:
        articles = list(articles)
        unknown = sorted(set(articles) - set(queries[GROUP_COLUMN]))
        if unknown:
            raise ValueError(f"articles: {unknown} not in {queries_path}; known: {sorted(set(queries[GROUP_COLUMN]))}")
        queries = queries[queries[GROUP_COLUMN].isin(articles)].reset_index(drop=True)
    return queries


def retrieve_benchmark(corpus_dir, queries_path, *, articles=None, embedder=None):
    """Index ``corpus_dir`` with ragcal's defaults and retrieve for the labeled questions of ``queries_path``.

    What :func:`score_benchmark` scores, without computing any signal. The
    index is the saved one when the embedder has a cache
    (:func:`ragcal.retrieval.index.build_index`).

    Parameters
    ----------
    corpus_dir, queries_path, articles, embedder
        As for :func:`score_benchmark`.

    Returns
    -------
    queries : DataFrame
        :func:`benchmark_questions`: the questions retrieved for, in order.
    retrieved : dict of str to list of RetrievalResult
    config : dict
        The index's provenance.
    """
    from ..embedding import load_embedder
    from ..retrieval.index import build_index

    queries = benchmark_questions(corpus_dir, queries_path, articles=articles)
    index = build_index(corpus_dir, embedder=embedder or load_embedder())
    return queries, index.retrieve(queries["query"]), dict(index.config)


def score_benchmark(corpus_dir, queries_path, *, articles=None, embedder=None, anchor=None):
    """Index ``corpus_dir`` with ragcal's defaults and score the labeled questions of ``queries_path``.

    Parameters
    ----------
    corpus_dir : str or Path
        The Markdown folder (every page is indexed, whatever ``articles`` says).
    queries_path : str or Path
        Labeled queries with a ``group`` column (the article of each question).
    articles : sequence of str, default=None
        Keep only the questions of these groups (all when None).
    embedder : EmbedderProtocol, default=None
        MiniLM with the default embedding cache when None.
    anchor : ragcal.study.anchoring.Anchor, default=None
        Anchors the dense top ranks, then the score table, to the committed
        ones (:func:`benchmark_study`).

    Returns
    -------
    table : DataFrame
        The score table, with ``group`` after ``slice``.
    queries : DataFrame
        The questions scored (with their gold pages).
    retrieved : dict of str to list of RetrievalResult
    config : dict
        The index's provenance.

    See Also
    --------
    retrieve_benchmark : the same questions retrieved, with no signal computed.
    """
    queries, retrieved, config = retrieve_benchmark(corpus_dir, queries_path, articles=articles, embedder=embedder)
    if anchor is not None:  # the committed top ranks, before any signal is computed from them
        retrieved = anchor.retrieved(retrieved, queries["id"])
    table = score_table(queries, retrieved)
    table.insert(4, GROUP_COLUMN, queries[GROUP_COLUMN].to_numpy())
    if anchor is not None:
        table = anchor.table(table)
    return table, queries, retrieved, config


def join_logged_file(table: pd.DataFrame, path, *, allow_missing: bool = False):
    """``(table, in_file, directions)``: ``table`` with the signals of a logged-signals file joined by id, a
    boolean array, one per row, saying which questions the file has a row for, and the file's declared directions.

    The file is read and checked by :func:`ragcal.signals.logged.read_logged_signals` (long or wide; booleans
    as 1/0; an empty cell is a missing value; a non-numeric cell, a repeated id or a key column is an error naming
    the file and the line). Ids it has beyond ``table`` are left out (the table may be a subset of articles). A
    question of ``table`` with no value, or a column ``table`` already has, is an error
    (:func:`ragcal.signals.logged.join_signals`) unless ``allow_missing``: then it is NaN (an LLM run on a
    sample of the questions, or a reply that could not be read).
    """
    from dataclasses import replace

    from ..signals.logged import join_signals, read_logged_signals

    logged = read_logged_signals(path)
    ids = table["id"].astype(str)
    values = logged.values[logged.values.index.isin(ids)]
    joined = join_signals(
        table, replace(logged, values=values), allow_missing=allow_missing, source="the benchmark's score table"
    )
    return joined, ids.isin(values.index).to_numpy(), dict(logged.directions)


def _learned_signals(table: pd.DataFrame, logged: list) -> dict:
    """``{gate name: signals}``: all registered continuous signals, and with the logged ones added when every
    question has a value of each (a signal logged for a sample of the questions is no feature for all of them)."""
    sets = {"learned all": tuple(candidate_sets(table).get("all", ()))}
    if logged and table[logged].notna().all().all():
        sets["learned all + logged"] = sets["learned all"] + tuple(logged)
    return {name: signals for name, signals in sets.items() if signals}




def protocol_comparison(table, learned_signals, learned_by_article, heldout, *, n_splits: int = 100, random_state=0):
    """The fitted headline numbers by article (honest) beside the same numbers split by question (for comparison).

    By question: ``keep@0.95`` on ``dense_top1`` over ``n_splits`` stratified
    half splits of the questions (:func:`ragcal.calibration.split_by_slice`),
    and the learned gate's scores cross-fitted over 5 folds of questions
    (stratified by slice): questions of one article sit on both sides.

    Returns
    -------
    DataFrame
        ``protocol, measure, value, low, high`` (held-out shares: mean and
        2.5th / 97.5th percentile over splits; AUC: the cross-fitted score's).
    """
    from sklearn.metrics import roc_auc_score

    from .imported_report import spread

    rows = []
    by_article = heldout[(heldout["signal"] == BASELINE_SIGNAL) & (heldout["rule"] == LEARNED_RULE)]
    if BASELINE_SIGNAL in table.columns:
        by_question = heldout_outcomes(table, BASELINE_SIGNAL, [LEARNED_RULE], n_splits=n_splits,
                                       random_state=random_state)
        for protocol, frame in (("by article", by_article), ("by question", by_question)):
            for measure in ("unanswerable_refused", "answerable_kept"):
                rows.append({"protocol": protocol, "measure": f"{BASELINE_SIGNAL} {LEARNED_RULE} {measure}",
                             **dict(zip(("value", "low", "high"), spread(frame[measure])))})
    if len(learned_signals):
        labels = table["answerable"].to_numpy(dtype=bool)
        by_question = crossfit_scores(table, learned_signals, random_state=random_state)
        for protocol, scores in (("by article", learned_by_article), ("by question", by_question)):
            rows.append({"protocol": protocol, "measure": "learned all AUC (cross-fitted)",
                         "value": float(roc_auc_score(labels, np.asarray(scores, dtype=float))),
                         "low": math.nan, "high": math.nan})
    return pd.DataFrame(rows, columns=["protocol", "measure", "value", "low", "high"])


def _write(results_dir: Path, name: str, frame: pd.DataFrame, log) -> None:
    atomic_write_text(results_dir / f"{name}.csv", frame.to_csv(index=False, float_format="%.4f"))
    log(f"wrote {results_dir / name}.csv")


def benchmark_study(
    corpus_dir,
    queries_path,
    results_dir,
    *,
    logged_signals=None,
    name: str = "squad2-A",
    title: str | None = None,
    articles=None,
    embedder=None,
    n_resamples: int = 2000,
    max_splits: int | None = None,
    compare_with=None,
    random_state=0,
    imported_from=None,
    logged_passages: int = 1,
    anchor=None,
    log=print,
) -> dict:
    """Run the benchmark study on one imported benchmark and write ``results_dir`` (see the module docstring).

    Parameters
    ----------
    corpus_dir : str or Path
        The imported Markdown corpus.
    queries_path : str or Path
        Its labeled queries, with a ``group`` column (the article).
    results_dir : str or Path
        Output folder (``results/squad2-A``).
    logged_signals : str or Path, default=None
        A CSV of signals joined by ``id`` (:func:`join_logged_file`); its
        binary columns (an LLM's ``llm_found_answer``) become operating
        points, all of them features of a second learned gate.
    articles : sequence of str, default=None
        Only the questions of these articles (a quick look, or a notebook's test).
    n_resamples : int, default=2000
        Bootstrap resamples of every interval.
    max_splits : int, default=None
        At most this many article splits (a seeded sample); all when None (70 for 8 articles).
    compare_with : dict of str to str or Path, default=None
        ``{title: results folder}`` of the corpora to set the numbers beside;
        ``results/fastapi`` and ``results/rust-book`` next to ``results_dir`` when None.
    logged_passages : int, default=1
        Passages the system behind a binary logged signal was given (the
        dense top-k; the LLM baseline reads the top 1): one of its answers is
        supported when a gold-page passage is among them.
    anchor : ragcal.study.anchoring.Anchor, default=None
        Anchors the dense top ranks (to the committed ``runs/dense.run``, the
        top :data:`RUN_DEPTH` of each question) and the score table (to the
        committed ``scores.csv``) when within their declared tolerance.
    imported_from : str or Path, default=None
        The public-format file the corpus and queries were imported from
        (recorded in the provenance, with its sha256, instead of the import's
        own folder).
    log : callable or None, default=print
        Called with one line per file written; None is silent.

    Returns
    -------
    dict of str to DataFrame (and the markdown summary under ``"summary"``)
    """
    from .imported_report import benchmark_summary

    log = log or (lambda message: None)
    results_dir = Path(results_dir)
    # Anchored to the committed top ranks and scores.csv, where this run's are within tolerance (ragcal.study.anchoring)
    table, queries, retrieved, config = score_benchmark(
        corpus_dir, queries_path, articles=articles, embedder=embedder, anchor=anchor
    )
    log(f"{name}: {len(table)} questions in {table[GROUP_COLUMN].nunique()} articles, {config['n_chunks']} chunks")
    config = {**config, "corpus": _project_relative(corpus_dir), "queries": _project_relative(queries_path)}
    if imported_from is not None:
        from .._io import sha256_file

        source = _project_relative(imported_from)
        config = {
            **config,
            "corpus": f"{source} -> corpus/",
            "queries": f"{source} -> queries.csv",
            "imported_from": source,
            "imported_from_sha256": sha256_file(imported_from),
        }
    write_score_table(results_dir / "scores.csv", table, config=config)
    log(f"wrote {results_dir / 'scores.csv'}")
    top = [RetrievalResult("dense", r.chunk_ids[:RUN_DEPTH], r.scores[:RUN_DEPTH]) for r in retrieved["dense"]]
    write_trec_runs(results_dir / "runs", queries["id"], {"dense": top}, config=config)
    log(f"wrote {results_dir / 'runs'}/dense.run (top {RUN_DEPTH})")
    config = {**config, "logged_passages": logged_passages}
    logged, in_logged_file, declared = [], np.zeros(len(table), dtype=bool), {}
    if logged_signals is not None:
        joined, in_logged_file, declared = join_logged_file(table, logged_signals, allow_missing=True)
        logged = [column for column in joined.columns if column not in table.columns]
        table = joined
    directions = _directions(table, declared)
    signals = [column for column in directions if column in SIGNALS or column in logged]
    answerable = table["answerable"].to_numpy(dtype=bool)
    groups = table[GROUP_COLUMN].to_numpy()
    n_articles = len(pd.unique(groups))

    auc = auc_table(table, signals, directions=directions, n_resamples=n_resamples, random_state=random_state)
    auc = auc.sort_values(["comparison", "auc"], ascending=[True, False], kind="stable", na_position="last")
    _write(results_dir, "auc", auc, log)
    headline = headline_signals(auc)

    learned_sets = _learned_signals(table, logged)
    learned_scores = table[["id", GROUP_COLUMN, "answerable", "slice"]].copy()
    for gate, gate_signals in learned_sets.items():
        learned_scores[gate] = crossfit_scores(
            table, gate_signals, n_folds=n_articles, random_state=random_state, groups=groups
        )
    _write(results_dir, "learned_scores", learned_scores, log)
    scored = table.join(learned_scores[list(learned_sets)])
    binary = [column for column in logged if is_binary_signal(table[column])]

    clustered = []
    for signal in headline + list(learned_sets) + [column for column in logged if column not in binary]:
        question = auc_table(
            scored, [signal], directions=directions, n_resamples=n_resamples, random_state=random_state
        ).iloc[0]
        value, low, high = clustered_auc(
            answerable, _oriented(scored, signal, directions), groups, n_resamples=n_resamples,
            random_state=random_state,
        )
        clustered.append(
            {
                "signal": signal,
                "auc": value,
                "question_low": question["ci_low"],
                "question_high": question["ci_high"],
                "article_low": low,
                "article_high": high,
                "n_questions": len(scored),
                "n_articles": n_articles,
            }
        )
    clustered = pd.DataFrame(clustered)
    _write(results_dir, "auc_clustered", clustered, log)

    splits = group_splits(groups, max_splits=max_splits, random_state=random_state)
    heldout = pd.concat(
        [
            heldout_outcomes(
                table, signal, HELDOUT_RULES, splits=splits, higher_is_answerable=directions[signal]
            ).assign(signal=signal)
            for signal in headline
        ],
        ignore_index=True,
    )
    heldout = heldout[["signal"] + [column for column in heldout.columns if column != "signal"]]
    _write(results_dir, "heldout", heldout, log)
    learned_gate = pd.concat(
        [
            learned_heldout(table, gate_signals, splits, random_state=random_state).assign(gate=gate)
            for gate, gate_signals in learned_sets.items()
        ],
        ignore_index=True,
    )
    learned_gate = learned_gate[["gate"] + [column for column in learned_gate.columns if column != "gate"]]
    _write(results_dir, "learned_gate", learned_gate, log)

    protocols = protocol_comparison(
        table, learned_sets.get("learned all", ()), learned_scores.get("learned all"), heldout,
        n_splits=max(len(splits), 100), random_state=random_state,
    )
    _write(results_dir, "protocol_comparison", protocols, log)

    results, gold = support_inputs(queries, retrieved)
    dense_levels = support_levels(results, gold, "dense")
    inputs = {
        signal: (table[signal].to_numpy(dtype=float), threshold_gate_support(results, gold, signal), directions[signal])
        for signal in headline
    }
    if "dense_top1" in table.columns and learned_sets:
        bar = fit_threshold(LEARNED_RULE, table["dense_top1"], table["answerable"])
        passed = bar_support(dense_levels, table["dense_top1"], bar)
        for gate in learned_sets:
            inputs[f"{gate} (cross-fitted by article)"] = (learned_scores[gate].to_numpy(dtype=float), passed, True)
    curves, areas = risk_coverage_study(inputs, table, n_resamples=n_resamples, random_state=random_state)
    _write(results_dir, "risk_coverage", curves, log)
    _write(results_dir, "risk_coverage_summary", areas, log)
    # A binary logged signal is counted on the questions its file has (an LLM run on a sample); a row there with
    # no value (a reply that could not be read) counts as an abstention, as a deployed system would treat it. Its
    # answer is supported when a gold-page passage is among the dense top `logged_passages`: what it was given.
    given = support_levels(results, gold, "dense", max_passages=logged_passages) > -math.inf
    points = operating_points(
        table[in_logged_file], binary, given[in_logged_file], directions=directions, n_resamples=n_resamples,
        random_state=random_state,
    ) if binary else pd.DataFrame(columns=["name", "space", "x", "x_low", "x_high", "y", "y_low", "y_high"])
    _write(results_dir, "operating_points", points, log)

    tables = {
        "scores": scored,
        "auc": auc,
        "auc_clustered": clustered,
        "heldout": heldout,
        "learned_scores": learned_scores,
        "learned_gate": learned_gate,
        "risk_coverage": curves,
        "risk_coverage_summary": areas,
        "operating_points": points,
        "protocol_comparison": protocols,
    }
    if compare_with is None:
        compare_with = {"FastAPI docs": results_dir.parent / "fastapi", "Rust book": results_dir.parent / "rust-book"}
    summary = benchmark_summary(
        tables,
        title=title or name,
        config=config,
        headline=headline,
        n_splits=len(splits),
        n_resamples=n_resamples,
        compare_with=compare_with,
    )
    atomic_write_text(results_dir / "summary.md", summary)
    log(f"wrote {results_dir / 'summary.md'}")
    return {**tables, "summary": summary}


def read_benchmark_results(results_dir) -> dict:
    """The tables :func:`benchmark_study` wrote in ``results_dir``, read back (``scores`` with the learned scores
    joined as extra columns), for a notebook."""
    results_dir = Path(results_dir)
    names = (
        "auc", "auc_clustered", "heldout", "learned_scores", "learned_gate", "risk_coverage",
        "risk_coverage_summary", "operating_points", "protocol_comparison",
    )
    tables = {name: pd.read_csv(results_dir / f"{name}.csv") for name in names}
    scores = pd.read_csv(results_dir / "scores.csv", dtype={"id": str, GROUP_COLUMN: str})
    learned = [column for column in tables["learned_scores"].columns if column.startswith("learned")]
    tables["scores"] = scores.join(tables["learned_scores"][learned])
    return tables
