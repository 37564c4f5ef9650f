"""Two embedding models on the same questions: what a model change does to every signal and threshold.

Every number in ``results/<corpus>/`` belongs to one model, MiniLM-L6-v2. Seed
003 warns that cosine scores from another model sit on another scale, so a
threshold must be recalibrated whenever the model changes. This module
measures that warning with a second model that runs offline, WordLlama's
static L2-supercat embeddings, on both bundled corpora, and writes
``results/cross_model.md`` with its CSVs:

- ``cross_model_auc.csv``: every signal's AUC under each model, answerable vs
  all unanswerable and vs each unanswerable slice, and the paired difference
  (second model minus first) on the same stratified bootstrap resamples;
- ``cross_model_aurc.csv``: the same for the area under the risk-coverage
  curve (lower is better; :mod:`ragcal.metrics.selective`), the risk being an
  answered question that is unanswerable or whose passages hold no gold page;
- ``cross_model_thresholds.csv``: each model's ``dense_top1`` threshold for
  every rule, fitted on the whole labeled set;
- ``cross_model_transfer.csv``: over repeated half splits of every slice, a
  threshold fitted on the calibration half of one model's scores, applied to
  the evaluation half of the other model's scores, beside that model's own
  threshold fitted on the same calibration half: per slice, the 5th, 50th
  and 95th percentile over splits of each outcome and of the paired
  difference, copied minus own.

The questions are the same under both models, row for row, so every
difference is paired. Signals that read BM25 only do not depend on the model
and are left out of the comparisons.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from .._io import atomic_write_text
from ..calibration import fit_rule, split_by_slice
from ..formatting import format_interval
from ..metrics import DegenerateInputWarning, auc_bootstrap, outcome_table
from ..metrics.selective import selective_comparison
from ..score_tables import unanswerable_slices
from ..signals import SIGNALS

__all__ = [
    "TRANSFER_SIGNAL",
    "model_label",
    "model_dependent_signals",
    "auc_by_model",
    "aurc_by_model",
    "thresholds_by_model",
    "threshold_copy",
    "summarize_copy",
    "encoding_times",
    "cross_model_report",
]

#: The signal whose thresholds are compared across models.
TRANSFER_SIGNAL = "dense_top1"
_MODEL_RETRIEVERS = {"dense", "rrf", "rerank"}


def model_label(embedder) -> str:
    """A short column label for an embedder (:func:`ragcal.study.golden.model_name_label` of its name)."""
    from ..embedding.protocol import embedder_name
    from .golden import model_name_label

    return model_name_label(embedder_name(embedder))


def model_dependent_signals(table: pd.DataFrame) -> list[str]:
    """Registered signals of ``table`` that read a dense list (directly or through fusion)."""
    return [
        name for name in SIGNALS if name in table.columns and _MODEL_RETRIEVERS.intersection(SIGNALS[name].retrievers)
    ]


def _check_paired(tables: dict) -> list:
    labels = list(tables)
    if len(labels) != 2:
        raise ValueError(f"the cross-model study compares two models; got {len(labels)}: {labels}")
    first, second = (tables[label] for label in labels)
    for column in ("id", "answerable", "slice"):
        if not first[column].reset_index(drop=True).equals(second[column].reset_index(drop=True)):
            raise ValueError(f"the two models' score tables differ in their {column!r} column: not the same questions")
    return labels


def _oriented(table: pd.DataFrame, signal: str) -> np.ndarray:
    sign = 1.0 if SIGNALS[signal].higher_is_answerable else -1.0
    return sign * table[signal].to_numpy(dtype=float)


def auc_by_model(tables: dict, signals, *, n_resamples: int = 2000, random_state=0) -> pd.DataFrame:
    """AUC of each signal under both models, and the paired difference (second minus first), per comparison.

    Parameters
    ----------
    tables : dict of str to DataFrame
        Model label -> score table, the same questions in the same order.

    Returns
    -------
    DataFrame
        ``signal, comparison, n_answerable, n_unanswerable``, then per model
        ``<label>_auc, <label>_low, <label>_high``, then ``difference,
        difference_low, difference_high``. Questions where either model's
        signal is NaN are left out of that signal's row; a signal constant on
        the questions of a comparison under either model gets NaN.
    """
    labels = _check_paired(tables)
    first = tables[labels[0]]
    answerable = first["answerable"].to_numpy(dtype=bool)
    comparisons = [("all unanswerable", ~answerable)]
    comparisons += [(name, (first["slice"] == name).to_numpy() & ~answerable) for name in unanswerable_slices(first)]
    rows = []
    for signal in signals:
        scores = {label: _oriented(tables[label], signal) for label in labels}
        finite = ~np.isnan(scores[labels[0]]) & ~np.isnan(scores[labels[1]])
        for comparison, negative in comparisons:
            keep = finite & (answerable | negative)
            truth = answerable[keep]
            row = {
                "signal": signal,
                "comparison": comparison,
                "n_answerable": int(truth.sum()),
                "n_unanswerable": int((~truth).sum()),
            }
            draws = {}
            for label in labels:
                values = scores[label][keep]
                if truth.all() or not truth.any() or np.ptp(values) == 0:
                    row.update({f"{label}_auc": np.nan, f"{label}_low": np.nan, f"{label}_high": np.nan})
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DegenerateInputWarning)
                    draws[label] = auc_bootstrap(truth, values, n_resamples=n_resamples, random_state=random_state)
                low, high = np.nanquantile(draws[label], [0.025, 0.975])
                row.update({f"{label}_auc": roc_auc_score(truth, values), f"{label}_low": low, f"{label}_high": high})
            if len(draws) == 2:  # the same seed and labels draw the same resamples: the difference is paired
                low, high = np.nanquantile(draws[labels[1]] - draws[labels[0]], [0.025, 0.975])
                row.update(
                    difference=row[f"{labels[1]}_auc"] - row[f"{labels[0]}_auc"],
                    difference_low=low,
                    difference_high=high,
                )
            else:
                row.update(difference=np.nan, difference_low=np.nan, difference_high=np.nan)
            rows.append(row)
    return pd.DataFrame(rows)


def aurc_by_model(tables: dict, support: dict, signals, *, n_resamples: int = 2000, random_state=0) -> pd.DataFrame:
    """AURC of each signal under both models, and the paired difference (second minus first).

    Parameters
    ----------
    tables : dict of str to DataFrame
        Model label -> score table, the same questions in the same order.
    support : dict of str to dict of str to ndarray
        Model label -> signal -> support level per question
        (:func:`ragcal.gates.support.signal_support` of that model's results):
        an answered question is supported when its level is at least the
        threshold that answered it.

    Returns
    -------
    DataFrame
        ``signal``, per model ``<label>_aurc, <label>_low, <label>_high``, and
        ``difference, difference_low, difference_high`` (lower is better, so a
        negative difference favours the second model), stratified by slice.
    """
    labels = _check_paired(tables)
    strata = tables[labels[0]]["slice"].to_numpy()
    rows = []
    for signal in signals:
        higher = SIGNALS[signal].higher_is_answerable
        inputs = {
            label: (tables[label][signal].to_numpy(dtype=float), support[label][signal], higher) for label in labels
        }
        # Both models on the same bootstrap draws; the difference is the second model minus the first.
        compared = selective_comparison(
            inputs, baseline=labels[0], strata=strata, n_resamples=n_resamples, random_state=random_state
        )
        aurc = compared[compared["measure"] == "aurc"].set_index("name")
        row = {"signal": signal}
        for label in labels:
            row.update(
                {
                    f"{label}_aurc": aurc.loc[label, "value"],
                    f"{label}_low": aurc.loc[label, "low"],
                    f"{label}_high": aurc.loc[label, "high"],
                }
            )
        row.update(
            difference=aurc.loc[labels[1], "difference"],
            difference_low=aurc.loc[labels[1], "difference_low"],
            difference_high=aurc.loc[labels[1], "difference_high"],
        )
        rows.append(row)
    return pd.DataFrame(rows)


def thresholds_by_model(tables: dict, rules, *, signal: str = TRANSFER_SIGNAL) -> pd.DataFrame:
    """Each model's threshold on ``signal`` for every rule, fitted on the whole labeled set.

    Returns
    -------
    DataFrame
        ``model, rule, threshold, fallback`` (True where the rule could not be met).
    """
    rows = []
    for label, table in tables.items():
        for rule in rules:
            threshold, fallback, _ = fit_rule(
                rule,
                table[signal].to_numpy(dtype=float),
                table["answerable"].to_numpy(dtype=bool),
                higher_is_answerable=SIGNALS[signal].higher_is_answerable,
            )
            rows.append({"model": label, "rule": rule, "threshold": threshold, "fallback": fallback})
    return pd.DataFrame(rows)


def threshold_copy(
    tables: dict, rules, *, signal: str = TRANSFER_SIGNAL, n_splits: int = 1000, random_state=0
) -> pd.DataFrame:
    """A threshold fitted on one model's calibration half, applied to the other model's evaluation half.

    Split ``i`` halves every slice with seed ``random_state + i``
    (:func:`ragcal.calibration.split_by_slice`), the same questions for both
    models. For each rule and each ordered pair of models (fitted on, applied
    to) the threshold is fitted on the calibration half of the first model's
    scores and applied to the evaluation half of the second's; the pair with
    the same model twice is that model's own held-out threshold.

    Returns
    -------
    DataFrame
        One row per (split, rule, fitted_on, applied_to): ``threshold``,
        ``fallback`` and the evaluation half's outcomes
        (:func:`ragcal.metrics.outcome_table`, without intervals).
    """
    labels = _check_paired(tables)
    higher = SIGNALS[signal].higher_is_answerable
    for label in labels:
        if tables[label][signal].isna().any():
            raise ValueError(f"threshold_copy: {signal} is NaN for some questions under {label}")
    first = tables[labels[0]]
    slices = first["slice"].to_numpy()
    answerable = first["answerable"].to_numpy(dtype=bool)
    rows = []
    for split in range(n_splits):
        calibration = split_by_slice(slices, random_state=random_state + split)
        for rule in rules:
            for fitted_on in labels:
                threshold, fallback, _ = fit_rule(
                    rule,
                    tables[fitted_on][signal].to_numpy(dtype=float)[calibration],
                    answerable[calibration],
                    higher_is_answerable=higher,
                )
                for applied_to in labels:
                    evaluation = tables[applied_to][~calibration]
                    outcome = outcome_table(
                        evaluation, signal, [threshold], higher_is_answerable=higher, intervals=False
                    )
                    outcome = outcome.iloc[0].drop("threshold").to_dict()
                    if math.isnan(threshold):
                        outcome = {key: (value if key.endswith("_n") else np.nan) for key, value in outcome.items()}
                    rows.append(
                        {
                            "split": split,
                            "rule": rule,
                            "fitted_on": fitted_on,
                            "applied_to": applied_to,
                            "threshold": threshold,
                            "fallback": fallback,
                            **outcome,
                        }
                    )
    return pd.DataFrame(rows)


def _outcome_columns(frame: pd.DataFrame) -> list[str]:
    return [column for column in frame.columns if column == "answerable_kept" or column.endswith("_refused")]


def summarize_copy(copies: pd.DataFrame) -> pd.DataFrame:
    """Per rule, model applied to and outcome: the own and the copied threshold's held-out share, and their difference.

    Returns
    -------
    DataFrame
        ``rule, applied_to, fitted_on, outcome`` and the 5th, 50th and 95th
        percentile over splits of ``own``, ``copied`` and ``difference``
        (copied minus own, paired by split), plus ``own_threshold`` and
        ``copied_threshold`` medians.
    """
    outcomes = _outcome_columns(copies)
    own = copies[copies["fitted_on"] == copies["applied_to"]].set_index(["split", "rule", "applied_to"])
    copied = copies[copies["fitted_on"] != copies["applied_to"]].set_index(["split", "rule", "applied_to"])
    rows = []
    for (rule, applied_to), part in copied.groupby(level=["rule", "applied_to"], sort=False):
        mine = own.loc[part.index]
        for outcome in outcomes:
            difference = part[outcome] - mine[outcome]
            row = {
                "rule": rule,
                "applied_to": applied_to,
                "fitted_on": part["fitted_on"].iloc[0],
                "outcome": outcome,
                "own_threshold": mine["threshold"].median(),
                "copied_threshold": part["threshold"].median(),
            }
            for name, values in (("own", mine[outcome]), ("copied", part[outcome]), ("difference", difference)):
                low, median, high = values.quantile([0.05, 0.5, 0.95]).tolist()
                row.update({f"{name}_p5": low, f"{name}": median, f"{name}_p95": high})
            rows.append(row)
    return pd.DataFrame(rows)


def encoding_times(embedders: dict, texts: dict, *, repeats: int = 3) -> pd.DataFrame:
    """Milliseconds per text to embed each set of ``texts`` without any cache, per model: the best of ``repeats``.

    Each embedder is asked with its cache switched off (``use_cache=False``),
    so this is the model's own cost on this machine, model loading excluded
    (one text is embedded first).

    Parameters
    ----------
    embedders : dict of str to embedder
    texts : dict of str to sequence of str
        What is timed, by name (e.g. ``{"questions": [...], "chunks": [...]}``).
    """
    rows = []
    for label, embedder in embedders.items():
        used = getattr(embedder, "use_cache", None)
        try:
            if used is not None:
                embedder.use_cache = False
            for what, values in texts.items():
                values = [str(value) for value in values]
                embedder.encode(values[:1])
                best = math.inf
                for _ in range(repeats):
                    start = time.perf_counter()
                    embedder.encode(values)
                    best = min(best, time.perf_counter() - start)
                rows.append({"model": label, "texts": what, "n": len(values), "ms_per_text": best / len(values) * 1000})
        finally:
            if used is not None:
                embedder.use_cache = used
    return pd.DataFrame(rows)


def _auc_cell(row, label) -> str:
    return format_interval(row[f"{label}_auc"], row[f"{label}_low"], row[f"{label}_high"])


def _verdict(difference, low, high, labels, better_is_lower=False) -> str:
    if np.isnan(difference):
        return "n/a"
    if low > 0:
        return labels[0] if better_is_lower else labels[1]
    if high < 0:
        return labels[1] if better_is_lower else labels[0]
    return "neither (interval includes 0)"


def cross_model_report(corpora: dict, *, labels, fingerprints: dict, timings: pd.DataFrame | None = None) -> str:
    """``results/cross_model.md`` from each corpus's tables (see :func:`write_cross_model`)."""
    first, second = labels
    lines = [
        "# Two embedding models on the same questions",
        "",
        "Generated by `make reproduce`. Models: "
        + "; ".join(f"{label} `{fingerprints[label]}`" for label in labels)
        + ". Same corpora, chunking, questions and BM25 lists; only the dense retriever's model differs, so signals "
        "that read BM25 only are left out. Differences are "
        f"{second} minus {first} on the same questions, with 95% paired bootstrap intervals (2,000 stratified "
        "resamples, seed 0).",
        "",
    ]
    for title, tables in corpora.items():
        auc = tables["auc"]
        overall = auc[auc["comparison"] == "all unanswerable"]
        aurc = tables["aurc"].set_index("signal")
        frame = pd.DataFrame(
            {
                "signal": overall["signal"],
                f"AUC {first}": [_auc_cell(row, first) for _, row in overall.iterrows()],
                f"AUC {second}": [_auc_cell(row, second) for _, row in overall.iterrows()],
                "AUC difference": [
                    format_interval(row["difference"], row["difference_low"], row["difference_high"], sign=True)
                    for _, row in overall.iterrows()
                ],
                f"AURC {first}": [
                    format_interval(*aurc.loc[name, [f"{first}_aurc", f"{first}_low", f"{first}_high"]])
                    for name in overall["signal"]
                ],
                f"AURC {second}": [
                    format_interval(*aurc.loc[name, [f"{second}_aurc", f"{second}_low", f"{second}_high"]])
                    for name in overall["signal"]
                ],
                "AURC difference": [
                    format_interval(*aurc.loc[name, ["difference", "difference_low", "difference_high"]], sign=True)
                    for name in overall["signal"]
                ],
            }
        )
        base = overall.set_index("signal").loc[TRANSFER_SIGNAL]
        base_aurc = aurc.loc[TRANSFER_SIGNAL]
        auc_winner = _verdict(base["difference"], base["difference_low"], base["difference_high"], labels)
        aurc_winner = _verdict(
            base_aurc["difference"], base_aurc["difference_low"], base_aurc["difference_high"], labels, True
        )
        best = {
            label: overall.dropna(subset=[f"{label}_auc"]).sort_values(f"{label}_auc", ascending=False).iloc[0]
            for label in labels
        }
        favour = {
            label: int(((overall["difference_low"] > 0) if label == second else (overall["difference_high"] < 0)).sum())
            for label in labels
        }
        lines += [
            f"## {title}",
            "",
            f"{tables['n_questions']} questions. AUC: answerable vs all unanswerable (higher is better). AURC: area "
            "under the risk-coverage curve of a threshold gate on the signal, risk = an answer to an unanswerable "
            "question or from passages with no gold page (lower is better).",
            "",
            frame.to_markdown(index=False),
            "",
            f"On `{TRANSFER_SIGNAL}`, the better model by AUC is: {auc_winner} "
            f"({first} {_auc_cell(base, first)}, {second} {_auc_cell(base, second)}); by AURC: {aurc_winner}. "
            f"Best signal under {first}: `{best[first]['signal']}` ({_auc_cell(best[first], first)}); under "
            f"{second}: `{best[second]['signal']}` ({_auc_cell(best[second], second)}). Of "
            f"{len(overall)} model-dependent signals, the AUC interval of the difference favours {first} for "
            f"{favour[first]} and {second} for {favour[second]}.",
            "",
            f"### `{TRANSFER_SIGNAL}` thresholds per rule, fitted on the whole set",
            "",
            tables["thresholds"]
            .pivot(index="rule", columns="model", values="threshold")[list(labels)]
            .reindex(tables["thresholds"]["rule"].unique())
            .to_markdown(floatfmt=".3f"),
            "",
            "### Copying a threshold across models (held out)",
            "",
            f"Over {tables['n_splits']} half splits of every slice: the threshold fitted on the calibration half of "
            "one model's scores, applied to the evaluation half of the other model's, against the other model's own "
            "threshold fitted on the same half. Median over splits [5th, 95th percentile]; the difference is paired "
            "by split (copied minus own), in points.",
            "",
            _copy_table(tables["copy"]),
            "",
        ]
    if timings is not None and len(timings):
        lines += [
            "## Cost in time (this run, this machine)",
            "",
            "Embedding without any cache, model loading excluded, best of 3 runs; the ratio is the first model's "
            "time over the second's. These numbers vary with the machine and its load; everything else in this "
            "file is reproducible.",
            "",
            timings.assign(texts=[f"{n} {what}" for what, n in zip(timings["texts"], timings["n"])])
            .pivot(index="texts", columns="model", values="ms_per_text")[list(labels)]
            .rename(columns=lambda model: f"{model} (ms per text)")
            .assign(**{"ratio": lambda frame: frame.iloc[:, 0] / frame.iloc[:, 1]})
            .to_markdown(floatfmt=".2f"),
            "",
        ]
    return "\n".join(lines)


def _copy_table(summary: pd.DataFrame) -> str:
    def percent(row, name):
        return f"{row[name]:.0%} [{row[name + '_p5']:.0%}, {row[name + '_p95']:.0%}]"

    def points(row):
        values = [row["difference"] * 100, row["difference_p5"] * 100, row["difference_p95"] * 100]
        if any(np.isnan(values)):
            return "n/a"
        return f"{values[0]:+.0f} [{values[1]:+.0f}, {values[2]:+.0f}]"

    frame = pd.DataFrame(
        {
            "rule": summary["rule"],
            "applied to": summary["applied_to"],
            "threshold own / copied": [
                f"{row.own_threshold:.3f} / {row.copied_threshold:.3f}" for row in summary.itertuples()
            ],
            "outcome": summary["outcome"],
            "own": [percent(row, "own") for _, row in summary.iterrows()],
            "copied": [percent(row, "copied") for _, row in summary.iterrows()],
            "copied minus own (points)": [points(row) for _, row in summary.iterrows()],
        }
    )
    return frame.to_markdown(index=False)


def model_scores(spec, embedder) -> dict:
    """One model's run of a bundled corpus: its index config, score table and per-signal support levels."""
    from ..queries import load_queries
    from ..retrieval.index import build_index
    from ..scoring import score_table
    from .selective import support_inputs, threshold_gate_support

    index = build_index(spec.corpus, exclude=spec.exclude, embedder=embedder)
    queries = load_queries(spec.queries, corpus_paths=index.doc_paths)
    retrieved = index.retrieve(queries["query"])
    table = score_table(queries, retrieved)
    results, gold = support_inputs(queries, retrieved)
    signals = model_dependent_signals(table)
    support = {name: threshold_gate_support(results, gold, name) for name in signals if table[name].notna().any()}
    return {"config": index.config, "queries": queries, "table": table, "support": support, "chunks": index.chunks}


def compare_models(runs: dict, rules, *, n_splits: int = 1000, n_resamples: int = 2000) -> dict:
    """The tables of one corpus from two :func:`model_scores` runs (model label -> run)."""
    tables = {label: run["table"] for label, run in runs.items()}
    labels = _check_paired(tables)
    signals = [
        name
        for name in model_dependent_signals(tables[labels[0]])
        if all(name in run["support"] for run in runs.values())
    ]
    copies = threshold_copy(tables, rules, n_splits=n_splits)
    return {
        "auc": auc_by_model(tables, signals, n_resamples=n_resamples),
        "aurc": aurc_by_model(
            tables, {label: run["support"] for label, run in runs.items()}, signals, n_resamples=n_resamples
        ),
        "thresholds": thresholds_by_model(tables, rules),
        "copy": summarize_copy(copies),
        "n_questions": len(tables[labels[0]]),
        "n_splits": n_splits,
    }


def write_cross_model(
    specs,
    embedders: dict,
    results_dir,
    *,
    rules,
    n_splits: int = 1000,
    n_resamples: int = 2000,
    timing_chunks: int | None = None,
    log=print,
) -> dict:
    """Run both models on every corpus of ``specs``; write ``results_dir/cross_model*.{md,csv}``.

    Also writes each corpus's score table under the second model as
    ``results_dir/<corpus>/scores_<slug>.csv`` (the first model's is
    ``scores.csv``), for the figures.

    Parameters
    ----------
    specs : sequence of BundledCorpus
    embedders : dict of str to embedder
        Two models by label, the first the one ``results/`` was made with.
    timing_chunks : int, default=None
        Time both models (:func:`encoding_times`) on the first corpus's
        questions and a seeded sample of this many of its chunks; no timing
        section when None.
    """
    from pathlib import Path

    from ..score_tables import write_score_table
    from .golden import slug

    results_dir = Path(results_dir)
    labels = list(embedders)
    per_corpus, fingerprints, titles = {}, {}, {}
    timing_texts = None
    for spec in specs:
        runs = {}
        for label, embedder in embedders.items():
            runs[label] = model_scores(spec, embedder)
            fingerprints[label] = runs[label]["config"]["model_fingerprint"]
        if timing_chunks is not None and timing_texts is None:
            chunks = runs[labels[0]]["chunks"]
            sample = np.random.default_rng(0).choice(len(chunks), min(timing_chunks, len(chunks)), replace=False)
            timing_texts = {
                "questions": list(runs[labels[0]]["queries"]["query"]),
                "chunks": [chunks[position].text for position in sample],
            }
        config = {**runs[labels[1]]["config"], "corpus": spec.name}
        write_score_table(
            results_dir / spec.name / f"scores_{slug(labels[1])}.csv", runs[labels[1]]["table"], config=config
        )
        per_corpus[spec.name] = compare_models(runs, rules, n_splits=n_splits, n_resamples=n_resamples)
        titles[spec.name] = spec.title
        log(f"{spec.name}: compared {labels[0]} and {labels[1]}")
    timings = encoding_times(embedders, timing_texts) if timing_texts is not None else None
    for name in ("auc", "aurc", "thresholds", "copy"):
        frame = pd.concat(
            [tables[name].assign(corpus=corpus) for corpus, tables in per_corpus.items()], ignore_index=True
        )
        frame = frame[["corpus", *[column for column in frame.columns if column != "corpus"]]]
        path = results_dir / f"cross_model_{'transfer' if name == 'copy' else name}.csv"
        atomic_write_text(path, frame.to_csv(index=False, float_format="%.4f"))
        log(f"wrote {path}")
    report = cross_model_report(
        {titles[corpus]: tables for corpus, tables in per_corpus.items()},
        labels=labels,
        fingerprints=fingerprints,
        timings=timings,
    )
    atomic_write_text(results_dir / "cross_model.md", report)
    log(f"wrote {results_dir / 'cross_model.md'}")
    return per_corpus
