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
and are left out of the comparisons. The paired statistics are in
:mod:`ragcal.study.cross_model_stats`; this module runs both models, words
the tables and writes the files.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd

from .._io import atomic_write_text
from ..formatting import format_interval
from .cross_model_stats import (
    TRANSFER_SIGNAL,
    auc_by_model,
    aurc_by_model,
    check_paired,
    model_dependent_signals,
    summarize_copy,
    threshold_copy,
    thresholds_by_model,
)

__all__ = ["model_label", "encoding_times", "cross_model_report", "model_scores", "compare_models", "write_cross_model"]


def model_label(embedder) -> str:
    """A short column label for an embedder (:func:`ragcal.study.golden.model_name_label` of its name)."""
    from ..embedding.protocol import embedder_name
    from .golden import model_name_label

    return model_name_label(embedder_name(embedder))


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


#: The file beside ``cross_model.md`` that holds the embedding times (run-dependent).
TIMING_FILE = "cross_model_timing.md"


def timing_report(timings: pd.DataFrame, *, labels) -> str:
    """The embedding times of :func:`encoding_times` as Markdown: ms per text per model and their ratio."""
    return "\n".join([
        "# Cost in time (this run, this machine)",
        "",
        "Embedding without any cache, model loading excluded, best of 3 runs; the ratio is the first model's "
        "time over the second's. These numbers vary with the machine and its load; everything in "
        "`cross_model.md` is reproducible.",
        "",
        timings.assign(texts=[f"{n} {what}" for what, n in zip(timings["texts"], timings["n"])])
        .pivot(index="texts", columns="model", values="ms_per_text")[list(labels)]
        .rename(columns=lambda model: f"{model} (ms per text)")
        .assign(**{"ratio": lambda frame: frame.iloc[:, 0] / frame.iloc[:, 1]})
        .to_markdown(floatfmt=".2f"),
        "",
    ])


def cross_model_report(corpora: dict, *, labels, fingerprints: dict, timed: bool = False) -> str:
    """``results/cross_model.md`` from each corpus's tables (see :func:`write_cross_model`).

    ``timed``: the embedding times are in :data:`TIMING_FILE`, which a section points to.
    """
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
    if timed:
        lines += [
            "## Cost in time",
            "",
            f"In `{TIMING_FILE}`: it varies with the machine and its load (results/run-dependent.txt), so it is kept "
            "apart from this file, which is reproducible to the byte.",
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


def model_scores(spec, embedder, *, anchor=None, table_name: str = "scores.csv") -> dict:
    """One model's run of a bundled corpus: its index config, score table and per-signal support levels.

    ``anchor`` (:class:`ragcal.study.anchoring.Anchor`), when given, anchors the dense scores and the score table
    to the committed ``table_name`` (and, for ``scores.csv``, ``runs/dense.run``).
    """
    from ..queries import load_queries
    from ..retrieval.index import build_index
    from ..scoring import score_table
    from .selective import support_inputs, threshold_gate_support

    index = build_index(spec.corpus, exclude=spec.exclude, embedder=embedder)
    queries = load_queries(spec.queries, corpus_paths=index.doc_paths)
    retrieved = index.retrieve(queries["query"])
    if anchor is not None and table_name == "scores.csv":
        retrieved = anchor.retrieved(retrieved, queries["id"])
    table = score_table(queries, retrieved)
    if anchor is not None:
        table = anchor.table(table, table_name)
    results, gold = support_inputs(queries, retrieved)
    signals = model_dependent_signals(table)
    support = {name: threshold_gate_support(results, gold, name) for name in signals if table[name].notna().any()}
    return {"config": index.config, "queries": queries, "table": table, "support": support, "chunks": index.chunks}


def compare_models(runs: dict, rules, *, n_splits: int = 1000, n_resamples: int = 2000) -> dict:
    """The tables of one corpus from two :func:`model_scores` runs (model label -> run)."""
    tables = {label: run["table"] for label, run in runs.items()}
    labels = check_paired(tables)
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
    measure_timing: bool = True,
    reference_dir=None,
    anchors: list | None = None,
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
    measure_timing : bool, default=True
        False leaves the timing itself to the caller
        (:func:`write_cross_model_timing`, for instance once no other work
        shares the cores); ``cross_model.md`` still points to its file when
        ``timing_chunks`` is set.
    reference_dir : str or Path, default=None
        Committed results (``<reference_dir>/<corpus>/``) that both models'
        dense scores and score tables are anchored to
        (:mod:`ragcal.study.anchoring`); ``results_dir`` when None.
    anchors : list, default=None
        Receives the :class:`~ragcal.study.anchoring.Anchor` of every model
        and corpus, for the verdict.
    """
    from pathlib import Path

    from ..score_tables import write_score_table
    from .anchoring import Anchor
    from .golden import slug

    results_dir = Path(results_dir)
    labels = list(embedders)
    reference_root = Path(reference_dir) if reference_dir is not None else results_dir
    per_corpus, fingerprints, titles = {}, {}, {}
    anchors = anchors if anchors is not None else []
    timing_texts = None
    for spec in specs:
        runs = {}
        for position, (label, embedder) in enumerate(embedders.items()):
            anchors.append(Anchor(reference_root / spec.name, label=spec.name))
            table_name = "scores.csv" if position == 0 else f"scores_{slug(label)}.csv"
            runs[label] = model_scores(spec, embedder, anchor=anchors[-1], table_name=table_name)
            fingerprints[label] = runs[label]["config"]["model_fingerprint"]
        if timing_chunks is not None and timing_texts is None:
            timing_texts = timed_texts(runs[labels[0]]["chunks"], runs[labels[0]]["queries"], timing_chunks)
        config = {**runs[labels[1]]["config"], "corpus": spec.name}
        write_score_table(
            results_dir / spec.name / f"scores_{slug(labels[1])}.csv", runs[labels[1]]["table"], config=config
        )
        per_corpus[spec.name] = compare_models(runs, rules, n_splits=n_splits, n_resamples=n_resamples)
        titles[spec.name] = spec.title
        log(f"{spec.name}: compared {labels[0]} and {labels[1]}")
    timings = encoding_times(embedders, timing_texts) if timing_texts is not None and measure_timing else None
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
        timed=timing_texts is not None,
    )
    atomic_write_text(results_dir / "cross_model.md", report)
    log(f"wrote {results_dir / 'cross_model.md'}")
    if timings is not None and len(timings):
        atomic_write_text(results_dir / TIMING_FILE, timing_report(timings, labels=labels))
        log(f"wrote {results_dir / TIMING_FILE}")
    return per_corpus


def timed_texts(chunks, queries: pd.DataFrame, timing_chunks: int) -> dict:
    """What :func:`write_cross_model` times: every question, and a seeded sample of ``timing_chunks`` chunks."""
    sample = np.random.default_rng(0).choice(len(chunks), min(timing_chunks, len(chunks)), replace=False)
    return {"questions": list(queries["query"]), "chunks": [chunks[position].text for position in sample]}


def write_cross_model_timing(spec, embedders: dict, results_dir, *, timing_chunks: int, log=print) -> None:
    """``results_dir/cross_model_timing.md``: what :func:`write_cross_model` times, timed here.

    For a caller that ran :func:`write_cross_model` with ``measure_timing=False``
    in a process that shared the cores with other work (``ragcal reproduce``
    runs it beside the corpora's studies, on one thread): the same texts, on
    the first corpus of ``specs`` (``spec``), timed in this process.
    """
    from pathlib import Path

    from ..queries import load_queries
    from ..retrieval.index import build_index

    first = next(iter(embedders.values()))
    index = build_index(spec.corpus, exclude=spec.exclude, embedder=first)
    queries = load_queries(spec.queries, corpus_paths=index.doc_paths)
    timings = encoding_times(embedders, timed_texts(index.chunks, queries, timing_chunks))
    path = Path(results_dir) / TIMING_FILE
    atomic_write_text(path, timing_report(timings, labels=list(embedders)))
    log(f"wrote {path}")
