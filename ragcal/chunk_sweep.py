"""How chunking changes retrieval and gating on a labeled set: the chunking sweep.

Every variant is built over the same corpus and scored on the same questions,
so differences are *paired*: each bootstrap resample draws the same queries for
the variant and for the baseline, which is far tighter than comparing two
marginal intervals. Measures:

- ``recall@5`` and ``mrr@10``: page-level dense retrieval quality (answerable questions);
- ``dense_top1_auc``: how well the best cosine separates answerable from unanswerable;
- ``bm25_top1_raw_auc``: the same for the best raw BM25 score.

``ragcal sweep-chunking QUERIES.csv --corpus DIR`` runs it on a user's corpus.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from .embedding.loading import load_embedder
from .formatting import interval_cell
from .metrics import auc_interval
from .metrics.auc import auc_bootstrap
from .metrics.retrieval import bootstrap_mean_ci, per_query_retrieval_metrics
from .queries import gold_pages
from .retrieval.index import IndexOptions, build_index

__all__ = [
    "CHUNKING_VARIANTS",
    "DEFAULT_VARIANT",
    "MEASURES",
    "sweep_chunking",
    "format_sweep",
    "MEASURE_LABELS",
    "chunking_verdict",
    "parse_variants",
]

#: name -> :func:`ragcal.retrieval.index.build_index` options. ``headings-whole`` keeps every section whole.
CHUNKING_VARIANTS = {
    "headings-128": {"chunker": "headings", "max_tokens": 128, "expand_includes": True},
    "headings-256": {"chunker": "headings", "max_tokens": 256, "expand_includes": True},
    "headings-512": {"chunker": "headings", "max_tokens": 512, "expand_includes": True},
    "headings-whole": {"chunker": "headings", "max_tokens": None, "expand_includes": True},
    "fixed-500": {"chunker": "fixed", "window": 500, "expand_includes": True},
    "headings-256-no-includes": {"chunker": "headings", "max_tokens": 256, "expand_includes": False},
}
#: The default of :func:`ragcal.retrieval.index.build_index`, and the baseline of the paired differences.
DEFAULT_VARIANT = "headings-256"
#: Measures of the sweep, in column order.
MEASURES = ("recall@5", "mrr@10", "dense_top1_auc", "bm25_top1_raw_auc")
#: How tables and sentences name each measure.
MEASURE_LABELS = {
    "recall@5": "Recall@5",
    "mrr@10": "MRR@10",
    "dense_top1_auc": "dense_top1 AUC",
    "bm25_top1_raw_auc": "bm25_top1_raw AUC",
}


def parse_variants(max_tokens="128,256,512,whole", windows="500", *, includes_off: bool = False) -> dict:
    """Variants from CLI-style lists: ``"128,256,whole"`` heading limits and ``"500"`` fixed windows."""
    variants = {}
    for item in filter(None, (part.strip() for part in str(max_tokens).split(","))):
        if item == "whole":
            variants["headings-whole"] = {"chunker": "headings", "max_tokens": None, "expand_includes": True}
        elif item.isdigit() and int(item) > 0:
            variants[f"headings-{item}"] = {"chunker": "headings", "max_tokens": int(item), "expand_includes": True}
        else:
            raise ValueError(f"--max-tokens takes positive integers or 'whole', comma-separated. Got {item!r}.")
    for item in filter(None, (part.strip() for part in str(windows).split(","))):
        if not (item.isdigit() and int(item) > 0):
            raise ValueError(f"--windows takes positive integers, comma-separated. Got {item!r}.")
        variants[f"fixed-{item}"] = {"chunker": "fixed", "window": int(item), "expand_includes": True}
    if includes_off:
        variants["headings-256-no-includes"] = {"chunker": "headings", "max_tokens": 256, "expand_includes": False}
    return variants


def _dense_run(queries: pd.DataFrame, results) -> pd.DataFrame:
    return pd.DataFrame(
        [
            (query_id, chunk_id, rank)
            for query_id, result in zip(queries["id"], results)
            for rank, chunk_id in enumerate(result.chunk_ids, start=1)
        ],
        columns=["qid", "docid", "rank"],
    )


def sweep_chunking(
    queries: pd.DataFrame,
    *,
    corpus_dir,
    embedder=None,
    variants=None,
    baseline: str = DEFAULT_VARIANT,
    exclude=(),
    n_resamples: int = 2000,
    random_state=0,
    log=None,
) -> pd.DataFrame:
    """Retrieval quality and AUCs for each chunking variant, with paired differences against ``baseline``.

    Parameters
    ----------
    queries : DataFrame
        Labeled queries (:func:`ragcal.queries.load_queries`).
    corpus_dir : str or Path
    embedder : EmbedderProtocol, default=None
        Shared by all variants, so unchanged chunk texts are embedded once (cache).
    variants : dict, default=None
        name -> :func:`ragcal.retrieval.index.build_index` options; :data:`CHUNKING_VARIANTS` when None.
    baseline : str, default="headings-256"
        Must be one of ``variants``.
    exclude : sequence of str, default=()
        Pages to leave out of every variant.

    Returns
    -------
    DataFrame
        One row per variant, in order: ``variant``, ``chunks``, ``median_tokens``,
        ``oversized``, and for each of :data:`MEASURES` the value, ``_low``,
        ``_high`` (95% bootstrap interval) and ``_diff``, ``_diff_low``,
        ``_diff_high`` (variant minus baseline, paired bootstrap).
    """
    variants = dict(variants or CHUNKING_VARIANTS)
    if baseline not in variants:
        raise ValueError(f"The baseline {baseline!r} is not one of the variants: {', '.join(variants)}")
    embedder = embedder or load_embedder()
    answerable = queries["answerable"].to_numpy(dtype=bool)
    gold = gold_pages(queries)
    per_query, scores, shape = {}, {}, {}
    for name, options in variants.items():
        index = build_index(corpus_dir, embedder=embedder, exclude=exclude, options=IndexOptions(**options))
        dense = index.dense.search(list(queries["query"]), k=100)
        bm25 = index.bm25["bm25_raw"].search(list(queries["query"]), k=1)
        per_query[name] = per_query_retrieval_metrics(_dense_run(queries, dense), gold, metrics=("recall@5", "mrr@10"))
        scores[name] = {
            "dense_top1_auc": np.array([result.score_at(1) for result in dense]),
            "bm25_top1_raw_auc": np.array([0.0 if result.is_empty else result.score_at(1) for result in bm25]),
        }
        tokens = np.array([chunk.n_tokens for chunk in index.chunks])
        shape[name] = {
            "chunks": len(index.chunks),
            "median_tokens": float(np.median(tokens)),
            "oversized": int(sum(chunk.oversized for chunk in index.chunks)),
        }
        if log is not None:
            log(f"chunking {name}: {len(index.chunks)} chunks")
    options = {"n_resamples": n_resamples, "random_state": random_state}
    base_aucs = {
        measure: auc_bootstrap(answerable, scores[baseline][measure], **options) for measure in scores[baseline]
    }
    rows = []
    for name in variants:
        row = {"variant": name, **shape[name]}
        for metric in ("recall@5", "mrr@10"):
            values = per_query[name][metric].to_numpy()
            value, low, high = bootstrap_mean_ci(values, **options)
            diff, diff_low, diff_high = bootstrap_mean_ci(values - per_query[baseline][metric].to_numpy(), **options)
            row.update(_measure(metric, value, low, high, diff, diff_low, diff_high))
        for measure, values in scores[name].items():
            interval = auc_interval(answerable, values, bootstrap_rows=None, **options)
            auc, low, high = interval.auc, interval.low, interval.high
            # Same seed, same labels: auc_bootstrap draws the same resamples for every variant (paired).
            differences = auc_bootstrap(answerable, values, **options) - base_aucs[measure]
            diff_low, diff_high = np.quantile(differences, [0.025, 0.975])
            diff = auc - roc_auc_score(answerable, scores[baseline][measure])
            row.update(_measure(measure, auc, low, high, diff, diff_low, diff_high))
        rows.append(row)
    return pd.DataFrame(rows)


def _measure(name, value, low, high, diff, diff_low, diff_high) -> dict:
    return {
        name: value,
        f"{name}_low": low,
        f"{name}_high": high,
        f"{name}_diff": diff,
        f"{name}_diff_low": float(diff_low),
        f"{name}_diff_high": float(diff_high),
    }


def format_sweep(chunking: pd.DataFrame, *, default: str = DEFAULT_VARIANT) -> str:
    """The sweep as a Markdown table: value [95% CI] and paired difference [95% CI] per measure."""
    rows = []
    for _, row in chunking.iterrows():
        record = {
            "variant": row["variant"],
            "chunks": int(row["chunks"]),
            "median tokens": f"{row['median_tokens']:.0f}",
        }
        for metric, label in MEASURE_LABELS.items():
            record[label] = interval_cell(row, metric)
            record[f"{label} vs {default}"] = (
                "baseline" if row["variant"] == default else interval_cell(row, f"{metric}_diff", sign=True)
            )
        rows.append(record)
    return pd.DataFrame(rows).to_markdown(index=False)


def chunking_verdict(chunkings: dict, *, default: str = DEFAULT_VARIANT) -> tuple[str | None, str]:
    """Which chunking variant serves every corpus, judged by paired intervals against the default.

    A variant *beats* the default when, on every corpus, at least one measure's
    paired interval lies above zero and none lies below. Returns the best such
    variant (most wins) or None, and a sentence that says so.
    """
    variants = [name for name in chunkings[next(iter(chunkings))]["variant"] if name != default]
    record = {}
    for variant in variants:
        wins, losses = {}, {}
        for corpus, table in chunkings.items():
            row = table.set_index("variant").loc[variant]
            wins[corpus] = [m for m in MEASURES if row[f"{m}_diff_low"] > 0]
            losses[corpus] = [m for m in MEASURES if row[f"{m}_diff_high"] < 0]
        record[variant] = (wins, losses)
    beating = {
        variant: sum(len(found) for found in wins.values())
        for variant, (wins, losses) in record.items()
        if all(wins.values()) and not any(losses.values())
    }
    # Never worse anywhere, better somewhere: evidence from some corpora only.
    partial = {
        variant: [corpus for corpus, found in wins.items() if found]
        for variant, (wins, losses) in record.items()
        if any(wins.values()) and not any(losses.values()) and variant not in beating
    }
    lines = []
    for variant, (wins, losses) in record.items():
        parts = []
        for corpus in chunkings:
            better = ", ".join(MEASURE_LABELS[m] for m in wins[corpus]) or "nothing"
            worse = ", ".join(MEASURE_LABELS[m] for m in losses[corpus]) or "nothing"
            parts.append(f"{corpus}: better on {better}, worse on {worse}")
        lines.append(f"- `{variant}` against `{default}`: " + "; ".join(parts) + ".")
    where = "on this corpus" if len(chunkings) == 1 else "on every corpus"
    if beating:
        best = max(beating, key=beating.get)
        verdict = (
            f"`{best}` beats `{default}` {where} (a paired interval above zero, none below), so it is the better "
            "choice" + (" here." if len(chunkings) == 1 else " across them.")
        )
    else:
        best = None
        verdict = f"No variant beats `{default}` {where} without losing somewhere, so `{default}` stays."
        for variant, corpora in partial.items():
            others = [corpus for corpus in chunkings if corpus not in corpora]
            verdict += (
                f" `{variant}` is never worse and is better on {', '.join(corpora)}; on {', '.join(others)} the data "
                "cannot tell it apart from the default, so the evidence for it comes from "
                + ("that corpus alone." if len(corpora) == 1 else "those corpora alone.")
            )
        if len(chunkings) > 1:
            verdict += " Run `ragcal sweep-chunking QUERIES.csv --corpus DIR` to choose for your own corpus."
    return best, "\n".join([verdict, "", *lines])
