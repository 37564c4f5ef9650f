"""What holds across corpora: the FastAPI conclusions checked on the Rust book.

Everything here compares tables that :func:`ragcal.study.reproduce.reproduce_corpus`
computed for each bundled corpus, and writes ``results/cross_corpus.md`` with
its CSVs:

- ``cross_corpus_auc.csv``: every signal's AUC on each corpus, with the
  difference between corpora (independent stratified bootstraps, so the
  interval of the difference is the percentile interval of differences of
  independent resamples);
- ``threshold_transfer.csv``: a ``keep@0.95`` threshold fitted on one corpus
  and applied to the other, per slice, with exact binomial intervals, beside
  the target corpus's own threshold;
- ``chunking_both.csv``: both chunking sweeps, and which default serves both.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from .._io import atomic_write_text
from ..calibration import fit_threshold
from ..chunk_sweep import chunking_verdict
from ..formatting import format_interval
from ..metrics import DegenerateInputWarning, outcome_table
from ..metrics.auc import auc_bootstrap
from ..score_tables import unanswerable_slices
from ..signals import SIGNALS
from .learned import learned_transfer

__all__ = [
    "auc_side_by_side",
    "paired_signal_difference",
    "threshold_transfer",
    "learned_transfer_text",
    "write_cross_corpus",
]

def _oriented(table, signal):
    subset = table[~table[signal].isna()]
    sign = -1.0 if signal in SIGNALS and not SIGNALS[signal].higher_is_answerable else 1.0
    return subset["answerable"].to_numpy(dtype=bool), sign * subset[signal].to_numpy(dtype=float)


def auc_side_by_side(score_tables: dict, aucs: dict, *, n_resamples: int = 2000) -> pd.DataFrame:
    """AUC per signal and comparison on each corpus, and the difference between the first two corpora.

    Parameters
    ----------
    score_tables : dict of str to DataFrame
        Corpus name -> score table.
    aucs : dict of str to DataFrame
        Corpus name -> :func:`ragcal.metrics.auc_table` output (gives AUC and interval per corpus).

    Returns
    -------
    DataFrame
        ``signal, comparison``, then ``<corpus>_auc``, ``_low``, ``_high`` per
        corpus, and ``difference``, ``difference_low``, ``difference_high``
        (first corpus minus second; NaN where a signal is constant).
    """
    names = list(score_tables)
    first, second = names[0], names[1]
    merged = None
    for name in names:
        part = aucs[name][["signal", "comparison", "auc", "ci_low", "ci_high"]].rename(
            columns={"auc": f"{name}_auc", "ci_low": f"{name}_low", "ci_high": f"{name}_high"}
        )
        merged = part if merged is None else merged.merge(part, on=["signal", "comparison"], how="inner")
    differences = []
    for row in merged.itertuples():
        resamples = []
        for position, name in enumerate((first, second)):
            table = score_tables[name]
            negative = ~table["answerable"].astype(bool)
            if row.comparison != "all unanswerable":
                negative &= table["slice"] == row.comparison
            labels, scores = _oriented(table[table["answerable"].astype(bool) | negative], row.signal)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DegenerateInputWarning)
                resamples.append(auc_bootstrap(labels, scores, n_resamples=n_resamples, random_state=position))
        spread = resamples[0] - resamples[1]
        point = merged.loc[row.Index, f"{first}_auc"] - merged.loc[row.Index, f"{second}_auc"]
        if np.isnan(point) or np.isnan(spread).all():
            differences.append((np.nan, np.nan, np.nan))
        else:
            low, high = np.nanquantile(spread, [0.025, 0.975])
            differences.append((point, low, high))
    merged[["difference", "difference_low", "difference_high"]] = np.array(differences, dtype=float)
    return merged


def paired_signal_difference(table: pd.DataFrame, first: str, second: str, *, n_resamples: int = 2000):
    """AUC of ``first`` minus AUC of ``second`` on the same questions, with a paired bootstrap interval.

    Both AUCs are computed on the same stratified resamples (same labels, same
    seed), so the interval is that of the paired difference.
    """
    labels = table["answerable"].to_numpy(dtype=bool)
    keep = ~(table[first].isna() | table[second].isna()).to_numpy()
    resamples, points = [], []
    for signal in (first, second):
        oriented = _oriented(table[keep], signal)[1]
        resamples.append(auc_bootstrap(labels[keep], oriented, n_resamples=n_resamples, random_state=0))
        points.append(roc_auc_score(labels[keep], oriented))
    low, high = np.quantile(resamples[0] - resamples[1], [0.025, 0.975])
    return points[0] - points[1], float(low), float(high)


def threshold_transfer(score_tables: dict, *, signal: str = "dense_top1", rule: str = "keep@0.95") -> pd.DataFrame:
    """Fit ``rule`` on each corpus and apply the threshold to every corpus, per slice.

    Returns
    -------
    DataFrame
        One row per (fitted on, applied to): ``threshold``, then for
        ``answerable_kept`` and each ``<slice>_refused`` the share with its
        count, size and exact 95% interval. Rows where the two corpora are the
        same are in-sample (the corpus's own threshold, for reference).
    """
    rows = []
    thresholds = {
        name: fit_threshold(rule, table[signal], table["answerable"].astype(bool))
        for name, table in score_tables.items()
    }
    for fitted_on, threshold in thresholds.items():
        for applied_to, table in score_tables.items():
            outcome = outcome_table(table, signal, [threshold]).iloc[0].to_dict()
            rows.append({"fitted_on": fitted_on, "applied_to": applied_to, "rule": rule, **outcome})
    return pd.DataFrame(rows)


def _share_cell(outcome, group) -> str:
    share, k, n = outcome[group], outcome[f"{group}_k"], outcome[f"{group.rsplit('_', 1)[0]}_n"]
    return f"{share:.0%} ({int(k)}/{int(n)}) [{outcome[f'{group}_low']:.0%}, {outcome[f'{group}_high']:.0%}]"


def _transfer_claims(transfer: pd.DataFrame, titles: dict) -> list[str]:
    rows = transfer.set_index(["fitted_on", "applied_to"])
    claims = []
    for (fitted_on, applied_to), row in rows.iterrows():
        if fitted_on == applied_to:
            continue
        own = rows.loc[(applied_to, applied_to)]
        near = "near_domain_refused"
        near_part = (
            f" and refuses {row[near]:.0%} of its near-domain questions (own threshold: {own[near]:.0%})"
            if near in row and not np.isnan(row[near])
            else ""
        )
        claims.append(
            f"- The `keep@0.95` threshold of the {titles[fitted_on]} ({row['threshold']:.3f}) applied to the "
            f"{titles[applied_to]} keeps {row['answerable_kept']:.0%} of its answerable questions (own threshold "
            f"{own['threshold']:.3f}: {own['answerable_kept']:.0%}){near_part}."
        )
    return claims


def _learned_share(row, group) -> str:
    if group not in row or pd.isna(row[group]):
        return "n/a"
    return (
        f"{row[group]:.0%} ({int(row[group + '_k'])}/{int(row[group + '_n'])}) "
        f"[{row[group + '_low']:.0%}, {row[group + '_high']:.0%}]"
    )


def learned_transfer_text(transfer: pd.DataFrame, titles: dict, own: dict) -> str:
    """The table of :func:`ragcal.study.learned.learned_transfer` and what it says, in words.

    ``own`` maps each corpus to its :func:`ragcal.study.learned.evaluate_learned_gates`
    tables (or None), for the learned gate's held-out numbers on its own corpus.
    """
    groups = [column[: -len("_refused")] for column in transfer.columns if column.endswith("_refused")]
    rows, claims = [], []
    for row in transfer.to_dict("records"):
        record = {
            "fitted on": titles[row["fitted_on"]],
            "applied to": titles[row["applied_to"]],
            "gate": row["gate"],
            "AUC on the other corpus": format_interval(row["auc"], row["auc_low"], row["auc_high"]),
            "answerable kept": _learned_share(row, "answerable_kept"),
        }
        for group in groups:
            record[f"{group.replace('_', '-')} refused"] = _learned_share(row, f"{group}_refused")
        rows.append(record)
    for (fitted_on, applied_to), pair in transfer.groupby(["fitted_on", "applied_to"], sort=False):
        learned = pair[pair["gate"].str.startswith("learned")].iloc[0]
        threshold = pair[~pair["gate"].str.startswith("learned")].iloc[0]
        drift_learned = abs(learned["answerable_kept"] - 0.95)
        drift_threshold = abs(threshold["answerable_kept"] - 0.95)
        near = "near_domain_refused"
        near_part = ""
        if near in learned and not pd.isna(learned[near]):
            near_part = (
                f"; it refuses {learned[near]:.0%} of the near-domain questions against {threshold[near]:.0%} for "
                f"the transferred threshold"
            )
        native = own.get(applied_to)
        native_part = ""
        if native is not None:
            outcomes = native["outcomes"]
            home = outcomes[(outcomes["gate"] == learned["gate"]) & (outcomes["slice"] == "near-domain")]
            if not home.empty:
                native_part = (
                    f" (a learned gate fitted on the {titles[applied_to]} itself refuses {home.iloc[0]['mean']:.0%} "
                    "of them, held out)"
                )
        keeps = (
            "closer to"
            if drift_learned < drift_threshold
            else ("as close to" if drift_learned == drift_threshold else "further from")
        )
        difference = format_interval(
            learned["auc_difference"], learned["auc_difference_low"], learned["auc_difference_high"], sign=True
        )
        claims.append(
            f"- Fitted on the {titles[fitted_on]}, applied to the {titles[applied_to]}: the learned gate keeps "
            f"{learned['answerable_kept']:.0%} of the answerable questions, {keeps} the 95% it was fitted for than "
            f"the `dense_top1` threshold ({threshold['answerable_kept']:.0%}){near_part}{native_part}. "
            f"Its AUC there is {format_interval(learned['auc'], learned['auc_low'], learned['auc_high'])} against "
            f"{format_interval(threshold['auc'], threshold['auc_low'], threshold['auc_high'])} for `dense_top1` "
            f"(paired difference {difference})."
        )
    return "\n".join(
        [
            "A learned gate (`learned default`: logistic regression over the default signal set of `ragcal fit-gate "
            "--learned`, threshold `keep@0.95` on out-of-fold scores) and one `dense_top1` `keep@0.95` threshold, each "
            "fitted on every question of one corpus and applied unchanged to the other. AUC intervals: stratified "
            "bootstrap (2,000 resamples) on the target corpus, paired for the difference; shares: exact 95% intervals.",
            "",
            pd.DataFrame(rows).to_markdown(index=False),
            "",
            *claims,
        ]
    )


def write_cross_corpus(results: dict, results_dir, *, log=print) -> dict:
    """Write ``cross_corpus.md`` and its CSVs from the per-corpus tables of :func:`ragcal.study.reproduce.reproduce_corpus`.

    Parameters
    ----------
    results : dict of BundledCorpus to dict
        The spec of each corpus and its tables, FastAPI (the published corpus) first.
    """
    from pathlib import Path

    results_dir = Path(results_dir)
    specs = list(results)
    names = [spec.name for spec in specs]
    titles = {spec.name: spec.title for spec in specs}
    score_tables = {spec.name: results[spec]["scores"] for spec in specs}
    aucs = auc_side_by_side(score_tables, {spec.name: results[spec]["auc"] for spec in specs})
    transfer = threshold_transfer(score_tables)
    learned = learned_transfer(score_tables)
    chunkings = {spec.name: results[spec]["chunking"] for spec in specs}
    both = pd.concat([table.assign(corpus=name) for name, table in chunkings.items()], ignore_index=True)
    best, chunking_text = chunking_verdict(chunkings)
    first, second = names[:2]

    auc_rows = []
    for row in aucs.to_dict("records"):
        if row["comparison"] not in ("all unanswerable", "near-domain"):
            continue
        record = {"signal": row["signal"], "vs": row["comparison"]}
        for name in names:
            record[titles[name]] = format_interval(row[f"{name}_auc"], row[f"{name}_low"], row[f"{name}_high"])
        record[f"{titles[first]} minus {titles[second]}"] = format_interval(
            row["difference"], row["difference_low"], row["difference_high"], sign=True
        )
        auc_rows.append(record)
    overall = aucs[aucs["comparison"] == "all unanswerable"].set_index("signal")

    def ranking(name):
        column = f"{name}_auc"
        ranked = overall[column].dropna().sort_values(ascending=False)
        return ranked.index[0], ranked.iloc[0]

    claims = []
    for name in names:
        top_signal, top_auc = ranking(name)
        claims.append(f"- {titles[name]}: the best single signal is `{top_signal}` (AUC {top_auc:.3f}).")
    for name in names:
        diff, low, high = paired_signal_difference(score_tables[name], "dense_top1", "bm25_top1_raw")
        verdict = (
            "dense separates better"
            if low > 0
            else ("raw BM25 separates better" if high < 0 else "the two cannot be told apart")
        )
        claims.append(
            f"- {titles[name]}: `dense_top1` AUC minus `bm25_top1_raw` AUC on the same questions "
            f"{format_interval(diff, low, high, sign=True)}: {verdict}."
        )
    dense = overall.loc["dense_top1"]
    change = (
        "lower"
        if dense["difference_low"] > 0
        else ("higher" if dense["difference_high"] < 0 else "not clearly different")
    )
    claims.append(
        f"- `dense_top1` AUC: {titles[first]} {dense[f'{first}_auc']:.3f}, {titles[second]} {dense[f'{second}_auc']:.3f}; "
        f"on the {titles[second]} it is {change} (difference {format_interval(dense['difference'], dense['difference_low'], dense['difference_high'], sign=True)})."
    )
    transfer_rows = []
    slices = [name for name in unanswerable_slices(score_tables[first])]
    for row in transfer.to_dict("records"):
        record = {
            "threshold fitted on": titles[row["fitted_on"]],
            "applied to": titles[row["applied_to"]] + (" (in-sample)" if row["fitted_on"] == row["applied_to"] else ""),
            "threshold": f"{row['threshold']:.3f}",
            "answerable kept": _share_cell(row, "answerable_kept"),
        }
        for slice_name in slices:
            group = f"{slice_name.replace('-', '_')}_refused"
            if group in row:
                record[f"{slice_name} refused"] = _share_cell(row, group)
        transfer_rows.append(record)
    gate_lines = []
    for spec in specs:
        comparison = results[spec]["comparison"]
        near = comparison[(comparison["slice"] == "near-domain") & (comparison["outcome"] == "refuse")]
        for row in near.itertuples():
            if row.gate in ("floor-gap keep@0.95", "chain keep@0.95"):
                gate_lines.append(
                    f"- {spec.title}, `{row.gate}` minus `threshold keep@0.95`, near-domain refused: "
                    f"{row.mean:+.1%} [{row.low:+.1%}, {row.high:+.1%}]"
                )
    text = "\n".join(
        [
            "# Across corpora: does what we learned on the FastAPI docs transfer?",
            "",
            "Generated by `make reproduce`. Each corpus is scored with its own labeled set (see `data/README.md`); "
            f"per-corpus tables are in `results/{first}/` and `results/{second}/`. Intervals: 95% stratified "
            "bootstrap (2,000 resamples) for AUCs; the difference between corpora uses independent resamples of each; "
            "exact binomial intervals for shares.",
            "",
            "## Headlines",
            "",
            *claims,
            *_transfer_claims(transfer, titles),
            f"- Chunking: {chunking_text.splitlines()[0]}",
            "",
            "## AUC of every signal on both corpora",
            "",
            pd.DataFrame(auc_rows).to_markdown(index=False),
            "",
            "## One corpus's threshold on the other (`dense_top1`, `keep@0.95`)",
            "",
            "Fitted on all questions of one corpus and applied to all questions of the other; the in-sample rows are "
            "each corpus's own threshold, for reference.",
            "",
            pd.DataFrame(transfer_rows).to_markdown(index=False),
            "",
            "## A learned gate on the other corpus",
            "",
            learned_transfer_text(learned, titles, {spec.name: results[spec].get("learned") for spec in specs}),
            "",
            "## Chunking: which default serves both corpora",
            "",
            "Paired differences against the default on each corpus (full tables in `results/<corpus>/summary.md` and "
            "`chunking_both.csv`).",
            "",
            chunking_text,
            "",
            "## Gates at 95% answerable kept, on both corpora",
            "",
            "Paired per-split differences against one `dense_top1` threshold (held out, 2.5th to 97.5th percentile).",
            "",
            *gate_lines,
            "",
        ]
    )
    atomic_write_text(results_dir / "cross_corpus.md", text)
    atomic_write_text(results_dir / "cross_corpus_auc.csv", aucs.to_csv(index=False, float_format="%.4f"))
    atomic_write_text(results_dir / "threshold_transfer.csv", transfer.to_csv(index=False, float_format="%.4f"))
    atomic_write_text(results_dir / "chunking_both.csv", both.to_csv(index=False, float_format="%.4f"))
    atomic_write_text(results_dir / "learned_transfer.csv", learned.to_csv(index=False, float_format="%.4f"))
    log(f"wrote {results_dir / 'cross_corpus.md'} and its CSVs")
    return {
        "auc": aucs,
        "transfer": transfer,
        "learned_transfer": learned,
        "chunking": both,
        "recommended_chunking": best,
    }
