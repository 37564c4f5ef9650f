"""The judge study: does reading the passage tell "about it" from "answers it"? (``results/judge/<corpus>/``)

For one labeled corpus (SQuAD 2.0 half A, the FastAPI docs, the Rust book):

1. index it with ragcal's defaults and retrieve every question (dense top 10
   is what a threshold gate passes on);
2. train judges by cross-fitting (:func:`ragcal.judges.crossfit.crossfit_judge_results`):
   K folds of whole groups (an article on SQuAD, a question elsewhere), a
   judge fine-tuned from the bundled MiniLM on the other K-1 folds scores
   each fold, so no question is scored by a judge trained on it;
3. add the judge signals to the score table, and two learned gates,
   cross-fitted the same way: one over every retrieval signal (the best
   retrieval-only gate), one over those and the judge signals;
4. measure, on held-out splits (by article on SQuAD: every way of giving half
   the articles to calibration; elsewhere random halves of every slice): the
   AUC with question and group intervals, ``keep@0.95`` refusals per slice,
   the selective risk of a threshold certified at ``risk_guarantee@0.2`` on
   the calibration half, the risk-coverage areas, the cost, and the
   questions the judge gets most wrong.

Thresholds are always fitted on the calibration half only; the judge scores
of those questions are out-of-fold too.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .._io import atomic_write_text
from ..calibration.heldout import group_splits, heldout_outcomes, split_by_slice
from ..calibration.rules import fit_rule
from ..gates.learned import crossfit_scores
from ..gates.support import support_inputs, support_levels
from ..judges.crossfit import crossfit_judge_results
from ..judges.training import JudgeTraining
from ..metrics import DegenerateInputWarning, auc_table
from ..score_tables import write_score_table
from ..scoring import score_table
from ..signals import JUDGE_SIGNALS, SIGNALS
from .imported_stats import GROUP_COLUMN, clustered_auc, learned_heldout, risk_coverage_study
from .judge_report import LEARNED_RETRIEVAL, LEARNED_WITH_JUDGE, judge_summary
from .learned import candidate_sets
from .selective import threshold_gate_support

__all__ = [
    "JudgeCorpus",
    "JUDGE_RULE",
    "CERTIFIED_RULE",
    "LEARNED_RETRIEVAL",
    "LEARNED_WITH_JUDGE",
    "judge_study",
    "judge_corpora",
    "reproduce_judge",
    "read_judge_results",
    "STUDY_TRAINING",
    "STUDY_DEPTH",
    "STUDY_PAIRS",
]

#: The rule every held-out refusal number is read at.
JUDGE_RULE = "keep@0.95"
#: The certified rule whose held-out selective risk is reported.
CERTIFIED_RULE = "risk_guarantee@0.2"
#: The signals compared in every table, when present.
BASELINE = "dense_top1"
#: How the study's judges are trained: the defaults (2 epochs, batch 16, 256 tokens, seed 0), with a fifth of each
#: judge's questions held out for validation instead of a tenth. On the bundled corpora a tenth is 11 to 15 questions,
#: fewer than 10 answering pairs: too few to tell a judge from chance, or to calibrate it.
STUDY_TRAINING = JudgeTraining(validation_fraction=0.2)
#: Passages each judge reads per question in the study: the dense top 5, half the gate's 10, to halve the CPU time
#: of scoring (about 25 pairs a second on two cores).
STUDY_DEPTH = 5
#: Training pairs per question: the gold passage of an answerable one, and one negative (an unanswerable question's
#: top passage, on SQuAD the very paragraph it was written against; an answerable one's best non-gold passage).
STUDY_PAIRS = {"positives_per_question": 1, "negatives_per_question": 1}


@dataclass(frozen=True)
class JudgeCorpus:
    """One labeled corpus of the judge study.

    Attributes
    ----------
    name : str
        Results folder name (``results/judge/<name>/``).
    title : str
    corpus : Path
        The Markdown folder.
    queries : Path
        Its labeled queries.
    exclude : tuple of str
        Pages left out of the index (the bundled corpora's non-doc pages).
    group_column : str or None
        The column whose values are kept whole in folds and splits (the
        article on SQuAD); None: each question is its own group, and the
        held-out splits are random halves of every slice.
    n_folds : int
        Judges trained per corpus (cross-fitting folds).
    """

    name: str
    title: str
    corpus: Path
    queries: Path
    exclude: tuple = ()
    group_column: str | None = None
    n_folds: int = 4


def index_and_retrieve(spec: JudgeCorpus, embedder=None):
    """The corpus's index, its labeled queries, every retriever's results and the seconds retrieval took."""
    from ..corpus import load_corpus
    from ..embedding import load_embedder
    from ..queries import load_queries
    from ..retrieval.index import build_index

    documents = load_corpus(spec.corpus, expand_includes=False, exclude=spec.exclude)
    queries = load_queries(spec.queries, corpus_paths={document.path for document in documents})
    index = build_index(spec.corpus, embedder=embedder or load_embedder(), exclude=spec.exclude)
    started = time.perf_counter()
    retrieved = index.retrieve(queries["query"])
    return index, queries, retrieved, time.perf_counter() - started


def _splits(table: pd.DataFrame, spec: JudgeCorpus, *, n_splits: int, max_splits, random_state) -> list:
    if spec.group_column is not None:
        return group_splits(table[GROUP_COLUMN].to_numpy(), max_splits=max_splits, random_state=random_state)
    slices = table["slice"].to_numpy()
    return [split_by_slice(slices, random_state=random_state + split) for split in range(n_splits)]


def _percentiles(values) -> dict:
    values = pd.Series(values, dtype=float).dropna()
    if values.empty:
        return {"mean": math.nan, "p2_5": math.nan, "p97_5": math.nan, "n_splits": 0}
    return {
        "mean": float(values.mean()),
        "p2_5": float(values.quantile(0.025)),
        "p97_5": float(values.quantile(0.975)),
        "n_splits": int(values.size),
    }


def _supported(levels: np.ndarray, threshold: float) -> np.ndarray:
    """Whether a gate at ``threshold`` passes on a gold passage, from :func:`threshold_gate_support` levels."""
    if levels.dtype == bool:
        return levels
    with np.errstate(invalid="ignore"):
        return levels >= threshold


def certified_heldout(table: pd.DataFrame, signal: str, levels, splits, *, rule: str = CERTIFIED_RULE) -> pd.DataFrame:
    """Per split: the ``rule`` threshold certified on the calibration half, its selective risk on the other half.

    ``levels`` are the support levels of a threshold gate on ``signal``
    (:func:`ragcal.study.selective.threshold_gate_support`): which answers
    pass on a gold passage at each threshold. Returns ``split, threshold,
    fallback, coverage, answered, selective_risk, answerable_kept,
    unanswerable_refused``.
    """
    scores = table[signal].to_numpy(dtype=float)
    answerable = table["answerable"].to_numpy(dtype=bool)
    levels = np.asarray(levels)
    rows = []
    for split, calibration in enumerate(splits):
        calibration = np.asarray(calibration, dtype=bool)
        held_out = ~calibration
        threshold, fallback, _ = fit_rule(
            rule, scores[calibration], answerable[calibration], support=levels[calibration]
        )
        with np.errstate(invalid="ignore"):
            answered = held_out & (scores >= threshold)
        supported = answered & _supported(levels, threshold) & answerable
        n_answered = int(answered.sum())
        rows.append(
            {
                "split": split,
                "threshold": threshold,
                "fallback": fallback,
                "coverage": n_answered / held_out.sum(),
                "answered": n_answered,
                "selective_risk": (n_answered - supported.sum()) / n_answered if n_answered else math.nan,
                "answerable_kept": (answered & answerable).sum() / max((held_out & answerable).sum(), 1),
                "unanswerable_refused": (held_out & ~answerable & ~answered).sum() / max((held_out & ~answerable).sum(), 1),
            }
        )
    return pd.DataFrame(rows)


def _measure_cost(index, judge_folds: pd.DataFrame, queries, retrieved, retrieve_seconds, judge_options, depth, sample):
    """Seconds per question: retrieval (query embedding and search, embedding cache off) and the judge (k passages,
    score cache off), on the same ``sample`` questions, side by side; and training per fold."""
    from ..embedding import load_embedder
    from ..judges.results import judge_results
    from ..judges.trained import TrainedJudge

    rows = np.arange(min(sample, len(queries)))
    questions = queries["query"].iloc[rows].tolist()
    fresh = load_embedder(use_cache=False)
    started = time.perf_counter()
    index.dense.search_vectors(fresh.encode(questions, show_progress_bar=False), k=10)
    retrieval = (time.perf_counter() - started) / len(rows)
    folder = Path(judge_options["judge_dir"]) / judge_folds["folder"].iloc[0]
    judge = TrainedJudge(folder, use_cache=False)
    fold0 = judge_folds["fold"].iloc[0]
    scored = np.flatnonzero(judge_options["fold_of"] == fold0)[: len(rows)]
    texts = judge_options["texts"]
    started = time.perf_counter()
    judge_results(judge, queries["query"].iloc[scored], [retrieved["dense"][row] for row in scored], texts, depth=depth)
    judging = (time.perf_counter() - started) / len(scored)
    return pd.DataFrame(
        [
            {"step": "retrieval (embed the question, dense search)", "seconds_per_question": retrieval, "n": len(rows)},
            {"step": f"judge ({depth} passages per question)", "seconds_per_question": judging, "n": len(scored)},
            {"step": "judge training, per fold", "seconds_per_question": math.nan,
             "n": len(judge_folds), "seconds": float(judge_folds["train_seconds"].mean())},
        ]
    )


def _fold_auc(table: pd.DataFrame, signals, directions) -> pd.DataFrame:
    """Each signal within each judge fold: its AUC, and its median over answerable and over unanswerable questions.

    One judge scores each fold; the medians show whether the folds' calibrated scales agree (pooled, the AUC and a
    threshold only mean one thing when they do).
    """
    from sklearn.metrics import roc_auc_score

    rows = []
    for fold, part in table.groupby("judge_fold", sort=True):
        labels = part["answerable"].to_numpy(dtype=bool)
        for signal in signals:
            raw = part[signal].to_numpy(dtype=float)
            values = raw * (1 if directions[signal] else -1)
            keep = np.isfinite(values)
            known = labels[keep]
            auc = roc_auc_score(known, values[keep]) if 0 < known.sum() < known.size else math.nan
            medians = {
                f"median_{name}": float(np.median(raw[keep & side])) if (keep & side).any() else math.nan
                for name, side in (("answerable", labels), ("unanswerable", ~labels))
            }
            rows.append({"fold": fold, "signal": signal, "auc": auc, **medians, "n_questions": int(keep.sum())})
    return pd.DataFrame(rows)


def _failures(table, retrieved, texts, *, n: int = 8) -> pd.DataFrame:
    """The unanswerable questions the judge is surest answer, and the answerable ones it is surest do not."""
    judged = retrieved["judge"]
    scores = table["judge_top1"].to_numpy(dtype=float)
    answerable = table["answerable"].to_numpy(dtype=bool)
    rows = []
    for kind, mask, order in (
        ("unanswerable, judged answered", ~answerable, -scores),
        ("answerable, judged not answered", answerable, scores),
    ):
        candidates = np.flatnonzero(mask & np.isfinite(scores))
        for row in candidates[np.argsort(order[candidates], kind="stable")][:n]:
            result = judged[row]
            passage = texts[result.chunk_ids[0]] if result.chunk_ids else ""
            rows.append(
                {
                    "kind": kind,
                    "id": table["id"].iloc[row],
                    "query": table["query"].iloc[row],
                    "judge_top1": scores[row],
                    "dense_top1": table[BASELINE].iloc[row],
                    "passage": result.chunk_ids[0] if result.chunk_ids else "",
                    "passage_text": " ".join(passage.split())[:400],
                }
            )
    return pd.DataFrame(rows)


def judge_study(
    spec: JudgeCorpus,
    results_dir,
    *,
    judge_dir,
    training: JudgeTraining | None = None,
    depth: int = STUDY_DEPTH,
    pair_options=None,
    n_splits: int = 200,
    max_splits: int | None = None,
    n_resamples: int = 2000,
    embedder=None,
    cost_sample: int = 40,
    random_state=0,
    progress: bool = False,
    log=print,
) -> dict:
    """Run the judge study on one corpus and write ``results_dir`` (see the module docstring).

    Parameters
    ----------
    spec : JudgeCorpus
    results_dir : str or Path
    judge_dir : str or Path
        Where the fold judges are kept (reused on the next run).
    training : JudgeTraining, default=None
        How each fold's judge is trained; the defaults when None.
    depth : int, default=STUDY_DEPTH
        Passages each judge reads per question.
    pair_options : dict, default=None
        Options of :func:`ragcal.judges.judge_pairs`; :data:`STUDY_PAIRS` when None.
    n_splits : int, default=200
        Random held-out splits when the corpus has no groups.
    max_splits : int, default=None
        At most this many group splits (all when None).
    n_resamples : int, default=2000
    cost_sample : int, default=40
        Questions the cost is measured on.

    Returns
    -------
    dict of str to DataFrame, and ``"summary"`` (markdown)
    """
    log = log or (lambda message: None)
    training = training or STUDY_TRAINING
    results_dir = Path(results_dir)
    index, queries, retrieved, retrieve_seconds = index_and_retrieve(spec, embedder)
    texts = {chunk.chunk_id: chunk.text for chunk in index.chunks}
    groups = queries[spec.group_column].to_numpy() if spec.group_column else queries["id"].astype(str).to_numpy()
    log(f"{spec.name}: {len(queries)} questions, {len(pd.unique(groups))} groups, {len(index.chunks)} chunks")
    retrieved["judge"], folds = crossfit_judge_results(
        queries, retrieved["dense"], texts, judge_dir=judge_dir, groups=groups, n_folds=spec.n_folds,
        training=training, depth=depth, pair_options=STUDY_PAIRS if pair_options is None else pair_options,
        random_state=random_state, progress=progress, log=log,
    )
    table = score_table(queries, retrieved)
    table.insert(4, GROUP_COLUMN, groups)
    from ..judges.crossfit import judge_folds

    fold_of = judge_folds(queries["answerable"], groups, n_folds=spec.n_folds, random_state=random_state)
    table.insert(5, "judge_fold", fold_of)
    config = {
        **index.config,
        "corpus": spec.title,
        "judge": "cross-fitted: one judge per fold, trained on the other folds",
        "judge_folds": int(fold_of.max() + 1),
        "judge_depth": depth,
        "judge_training": asdict(training),
    }
    write_score_table(results_dir / "scores.csv", table, config=config)
    log(f"wrote {results_dir / 'scores.csv'}")

    judge_signals = [name for name in JUDGE_SIGNALS if name in table.columns]
    retrieval_signals = [name for name in candidate_sets(table).get("all", ()) if name not in JUDGE_SIGNALS]
    learned_sets = {LEARNED_RETRIEVAL: retrieval_signals, LEARNED_WITH_JUDGE: retrieval_signals + judge_signals}
    n_groups = len(pd.unique(groups))
    learned_folds = min(n_groups, 10)
    for gate, signals in learned_sets.items():
        table[gate] = crossfit_scores(table, signals, n_folds=learned_folds, random_state=random_state, groups=groups)
    directions = {name: SIGNALS[name].higher_is_answerable for name in SIGNALS if name in table.columns}
    directions.update({gate: True for gate in learned_sets})

    with warnings.catch_warnings():  # the BM25 "matched nothing" flags are constant on most corpora: NaN, said once
        warnings.simplefilter("ignore", DegenerateInputWarning)
        auc = auc_table(
            table, list(directions), directions=directions, n_resamples=n_resamples, random_state=random_state
        )
    overall = auc[auc["comparison"] == "all unanswerable"]
    ranked = overall.dropna(subset=["auc"]).sort_values("auc", ascending=False)["signal"]
    best_retrieval = next((name for name in ranked if name in retrieval_signals), BASELINE)
    compared = list(dict.fromkeys([BASELINE, best_retrieval, LEARNED_RETRIEVAL, *judge_signals, LEARNED_WITH_JUDGE]))
    answerable = table["answerable"].to_numpy(dtype=bool)
    clustered = []
    for signal in compared:
        oriented = table[signal].to_numpy(dtype=float) * (1 if directions[signal] else -1)
        value, low, high = clustered_auc(answerable, oriented, groups, n_resamples=n_resamples, random_state=random_state)
        question = overall[overall["signal"] == signal].iloc[0]
        clustered.append(
            {"signal": signal, "auc": value, "question_low": question["ci_low"], "question_high": question["ci_high"],
             "group_low": low, "group_high": high, "n_questions": len(table), "n_groups": n_groups}
        )
    clustered = pd.DataFrame(clustered)

    splits = _splits(table, spec, n_splits=n_splits, max_splits=max_splits, random_state=random_state)
    threshold_signals = [BASELINE, best_retrieval, *judge_signals]
    threshold_signals = list(dict.fromkeys(threshold_signals))
    heldout = pd.concat(
        [
            heldout_outcomes(table, signal, [JUDGE_RULE], splits=splits, higher_is_answerable=directions[signal])
            .assign(gate=signal)
            for signal in threshold_signals
        ]
        + [
            learned_heldout(table, signals, splits, random_state=random_state, max_folds=learned_folds).assign(gate=gate)
            for gate, signals in learned_sets.items()
        ],
        ignore_index=True,
    )
    outcome_columns = [column for column in heldout.columns if column.endswith(("_refused", "_kept")) and not column.endswith("_k")]
    heldout_summary = pd.DataFrame(
        [
            {"gate": gate, "measure": measure, **_percentiles(rows[measure])}
            for gate, rows in heldout.groupby("gate", sort=False)
            for measure in outcome_columns
        ]
    )

    results, gold = support_inputs(queries, retrieved)
    levels = {signal: threshold_gate_support(results, gold, signal) for signal in threshold_signals}
    certified = pd.concat(
        [certified_heldout(table, signal, levels[signal], splits).assign(gate=signal) for signal in threshold_signals],
        ignore_index=True,
    )
    # "certified": the share of splits whose calibration half certified a threshold at all (else the gate refuses
    # everything, and its selective risk is undefined).
    certified = certified.assign(certified=~certified["fallback"].astype(bool))
    certified_summary = pd.DataFrame(
        [
            {"gate": gate, "measure": measure, **_percentiles(rows[measure])}
            for gate, rows in certified.groupby("gate", sort=False)
            for measure in ("certified", "selective_risk", "coverage", "answerable_kept", "unanswerable_refused")
        ]
    )
    dense_levels = support_levels(results, gold, "dense")
    inputs = {signal: (table[signal].to_numpy(dtype=float), levels[signal], directions[signal]) for signal in threshold_signals}
    for gate in learned_sets:  # a learned gate passes on the dense top 10 (its support: a gold page among them)
        inputs[gate] = (table[gate].to_numpy(dtype=float), dense_levels > -math.inf, True)
    curves, areas = risk_coverage_study(inputs, table, n_resamples=n_resamples, random_state=random_state)

    fold_of_rows = table["judge_fold"].to_numpy()
    cost = _measure_cost(
        index, folds, queries, retrieved, retrieve_seconds,
        {"judge_dir": judge_dir, "fold_of": fold_of_rows, "texts": texts}, depth, cost_sample,
    )
    failures = _failures(table, retrieved, texts)
    fold_auc = _fold_auc(table, [BASELINE, *judge_signals], directions)
    from ..judges.trained import TrainedJudge

    training_curves = pd.concat(
        [TrainedJudge(Path(judge_dir) / folder, use_cache=False).curve.assign(fold=fold)
         for fold, folder in zip(folds["fold"], folds["folder"])],
        ignore_index=True,
    )
    tables = {
        "scores": table,
        "folds": folds,
        "auc": auc,
        "auc_compared": clustered,
        "heldout": heldout,
        "heldout_summary": heldout_summary,
        "certified": certified,
        "certified_summary": certified_summary,
        "risk_coverage": curves,
        "risk_coverage_summary": areas,
        "cost": cost,
        "failures": failures,
        "fold_auc": fold_auc,
        "training_curves": training_curves[["fold", "step", "epoch", "training_loss", "validation_loss", "validation_auc"]],
        "learned_scores": table[["id", GROUP_COLUMN, "answerable", "slice", *learned_sets]],
    }
    for name, frame in tables.items():
        if name != "scores":
            atomic_write_text(results_dir / f"{name}.csv", frame.to_csv(index=False, float_format="%.4f"))
            log(f"wrote {results_dir / (name + '.csv')}")
    summary = judge_summary(
        tables, spec=spec, config=config, n_splits=len(splits), compared=compared, judge_signals=judge_signals,
        n_resamples=n_resamples,
    )
    atomic_write_text(results_dir / "summary.md", summary)
    log(f"wrote {results_dir / 'summary.md'}")
    return {**tables, "summary": summary}


def judge_corpora(*, cache_dir=None) -> dict:
    """``{name: JudgeCorpus}`` of the study: SQuAD 2.0 half A (imported from data/benchmarks/ on first use, split by
    article), then the bundled FastAPI docs and Rust book (split by question)."""
    from ..datasets import BUNDLED
    from .imported import BENCHMARKS

    squad = BENCHMARKS["squad2-A"]
    corpus, queries = squad.resolve(cache_dir=cache_dir)
    corpora = {"squad2-A": JudgeCorpus("squad2-A", squad.title, corpus, queries, group_column=GROUP_COLUMN, n_folds=2)}
    for name, bundled in BUNDLED.items():
        corpora[name] = JudgeCorpus(
            name, bundled.title, bundled.corpus, bundled.queries, exclude=bundled.exclude, n_folds=3
        )
    return corpora


def reproduce_judge(results_dir="results", *, names=None, cache_dir=None, embedder=None, log=print) -> dict:
    """``ragcal reproduce --judge``: :func:`judge_study` on every corpus of :func:`judge_corpora` (or ``names``),
    into ``<results_dir>/judge/<name>/``, and the overview ``<results_dir>/judge/summary.md``.

    The fold judges are kept in ``<cache>/judges/<name>/`` and reused while their training pairs and options stay
    the same.
    """
    from ..embedding import load_embedder
    from ..embedding.cache import default_cache_dir
    from .judge_report import judge_overview

    corpora = judge_corpora(cache_dir=cache_dir)
    names = list(corpora) if names is None else list(names)
    unknown = sorted(set(names) - set(corpora))
    if unknown:
        raise ValueError(f"unknown judge-study corpus {unknown}; known: {', '.join(corpora)}")
    embedder = embedder or load_embedder(cache_dir=cache_dir)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    root = Path(results_dir) / "judge"
    tables = {}
    for name in names:
        tables[name] = judge_study(
            corpora[name], root / name, judge_dir=cache / "judges" / name, embedder=embedder, progress=True, log=log
        )
    done = [name for name in corpora if (root / name / "auc_compared.csv").is_file()]
    atomic_write_text(
        root / "summary.md", judge_overview(root, done, titles={name: corpora[name].title for name in corpora})
    )
    log(f"wrote {root / 'summary.md'}")
    return tables


def read_judge_results(results_dir) -> dict:
    """The tables :func:`judge_study` wrote in ``results_dir``, read back (for a notebook)."""
    results_dir = Path(results_dir)
    names = (
        "folds", "auc", "auc_compared", "heldout", "heldout_summary", "certified", "certified_summary",
        "risk_coverage", "risk_coverage_summary", "cost", "failures", "fold_auc", "training_curves", "learned_scores",
    )
    tables = {name: pd.read_csv(results_dir / f"{name}.csv") for name in names}
    scores = pd.read_csv(results_dir / "scores.csv", dtype={"id": str, GROUP_COLUMN: str})
    learned = [column for column in tables["learned_scores"].columns if column.startswith("learned")]
    tables["scores"] = scores.join(tables["learned_scores"][learned])
    tables["summary"] = (results_dir / "summary.md").read_text(encoding="utf-8")
    return tables
