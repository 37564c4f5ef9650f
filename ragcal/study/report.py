"""Markdown sections of ``results/summary.md``, set beside the published numbers.

Everything here formats tables that :mod:`ragcal.metrics` and
:mod:`ragcal.calibration` computed; the sentences that interpret them are
chosen by comparing numbers, so they stay true when the results change. The
sections of the extension studies live with them (:func:`ragcal.study.gates.gates_section`,
:func:`ragcal.study.learned_report.learned_gate_section`, ``access_section``, ``rerank_section``, ...).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..formatting import format_interval, format_share
from . import published as published_numbers

__all__ = [
    "group_stats_section",
    "auc_section",
    "sweep_section",
    "heldout_section",
    "rule_of_thumb_section",
    "empty_section",
    "differences_section",
    "HELDOUT_RULES",
    "GUARANTEE_RULE",
    "guarantee_check",
    "split_counts",
]

#: Rules compared over repeated splits (delta = 0.1 for the two guarantees).
HELDOUT_RULES = ("keep@1.0", "keep@0.95", "recall_guarantee@0.9", "false_answer_guarantee@0.2", "min_cost@5")
GUARANTEE_RULE = "recall_guarantee@0.9"


def differences_section(
    table: pd.DataFrame, aucs: pd.DataFrame, signal: str = "dense_top1", *, n_chunks: int, n_pages: int
) -> str:
    """Why our numbers are not the published ones: the setup differences, with the extreme questions named."""
    near = table[table["slice"] == "near-domain"].nlargest(3, signal)
    lowest = table[table["answerable"].astype(bool)].nsmallest(3, signal)

    def listing(rows):
        return "; ".join(f'{row.id} "{row.query}" ({getattr(row, signal):.3f})' for row in rows.itertuples())

    counts = table["slice"].value_counts()
    overall = aucs[aucs["comparison"] == "all unanswerable"].set_index("signal")["auc"]
    bm25 = [name for name in ("bm25_top1_raw", "bm25_top1_stopwords") if name in overall.index]
    higher = [name for name in bm25 if overall[name] > published_numbers.AUC[name]]
    bm25_note = (
        f"Our BM25 AUCs are {'higher' if len(higher) == len(bm25) else 'not all higher'} than the published "
        "ones (" + ", ".join(f"{name} {overall[name]:.3f} vs {published_numbers.AUC[name]:.3f}" for name in bm25) + ")."
    )
    return "\n".join(
        [
            "## Why our numbers differ from the published ones",
            "",
            f"- **Questions.** {len(table)} questions ({', '.join(f'{n} {name}' for name, n in counts.items())}) "
            "against 60 (30 / 15 / 15), written by a different person. About a quarter of our answerable questions hinge "
            "on an exact term (a class, a parameter, a status code), which favours BM25. " + bm25_note,
            "- **Near-domain slice.** Ours includes grey topics that some page half covers (see the `note` column of "
            f"`data/queries/fastapi.csv`). Its highest `{signal}` scores: {listing(near)}. The published maximum was "
            "0.508.",
            f"- **Corpus and chunks.** {n_pages} pages of a newer snapshot and {n_chunks:,} chunks (limit 256 "
            "word/punctuation tokens, include directives expanded into code) against 152 pages and 2,808 chunks with an "
            "unstated limit. Scores shift with the chunk size, so thresholds do not transfer.",
            f"- **Lowest answerable scores:** {listing(lowest)}. These set `keep@1.0`.",
            "- **Splits.** The published held-out numbers come from one split of 60 questions; ours from the same "
            "protocol on one seeded split and then 1,000 splits, which show how much a single split can vary.",
            "",
        ]
    )


def group_stats_section(stats: pd.DataFrame, signal: str = "dense_top1", *, published: bool = True) -> str:
    rows = []
    for row in stats[stats["signal"] == signal].itertuples():
        record = {"slice": row.slice, "n": row.n, "median": row.median, "min": row.min, "max": row.max}
        if published:
            median, low, high = published_numbers.GROUP_STATS.get(row.slice, (np.nan,) * 3)
            record.update(
                {
                    "published n": published_numbers.QUERY_COUNTS.get(row.slice),
                    "published median": median,
                    "published min": low,
                    "published max": high,
                }
            )
        rows.append(record)
    table = pd.DataFrame(rows)
    by_slice = table.set_index("slice")
    lines = [f"### `{signal}` by slice", "", table.to_markdown(index=False, floatfmt=".3f"), ""]
    if {"answerable", "near-domain", "unrelated"} <= set(by_slice.index):
        answerable_min = by_slice.loc["answerable", "min"]
        unrelated_max = by_slice.loc["unrelated", "max"]
        near_max = by_slice.loc["near-domain", "max"]
        gap = "below" if unrelated_max < answerable_min else "above"
        sentence = (
            f"Unrelated questions top out at {unrelated_max:.3f}, {gap} the lowest answerable score "
            f"({answerable_min:.3f}); near-domain questions reach {near_max:.3f}, so they "
            f"{'overlap' if near_max > answerable_min else 'stay below'} the answerable range."
        )
        if published:
            comparisons = []
            for name in ("answerable", "near-domain", "unrelated"):
                ours, theirs = by_slice.loc[name, "median"], by_slice.loc[name, "published median"]
                comparisons.append(f"{name} {'higher' if ours > theirs else 'lower'} ({ours:.3f} vs {theirs:.3f})")
            sentence += (
                f" Medians against the published run: {', '.join(comparisons)}. The snapshot, the chunk limit and "
                "the questions all differ, which is why thresholds must be recalibrated rather than copied."
            )
        lines.append(sentence)
        lines.append("")
    return "\n".join(lines)


def auc_section(aucs: pd.DataFrame, *, published: bool = True) -> str:
    overall = aucs[aucs["comparison"] == "all unanswerable"]
    table = pd.DataFrame(
        {
            "signal": overall["signal"],
            "AUC [95% CI]": [format_interval(*values) for values in overall[["auc", "ci_low", "ci_high"]].to_numpy()],
        }
    )
    if published:
        table["published AUC"] = [
            f"{published_numbers.AUC[signal]:.3f}" if signal in published_numbers.AUC else ""
            for signal in overall["signal"]
        ]
    slices = [name for name in aucs["comparison"].unique() if name != "all unanswerable"]
    for name in slices:
        part = aucs[aucs["comparison"] == name].set_index("signal")
        table[f"vs {name}"] = [
            format_interval(*part.loc[signal, ["auc", "ci_low", "ci_high"]]) for signal in overall["signal"]
        ]
    ranked = overall.dropna(subset=["auc"]).sort_values("auc", ascending=False)
    best = ranked.iloc[0]
    second = ranked.iloc[1]
    overlap = best["ci_low"] <= second["ci_high"]
    lines = [
        "## AUC: which signal separates answerable from unanswerable",
        "",
        "Answerable vs all unanswerable, and vs each unanswerable slice; stratified bootstrap, 2,000 resamples, "
        "seed 0. n/a: the signal is constant on this set.",
        "",
        table.to_markdown(index=False, floatfmt=".3f"),
        "",
        f"`{best['signal']}` separates best ({format_interval(best['auc'], best['ci_low'], best['ci_high'])}); "
        f"the runner-up `{second['signal']}` is "
        + (
            "within its interval, so the order of the top two is not settled by this set."
            if overlap
            else "clearly behind (the intervals do not overlap)."
        ),
    ]
    if "dense_gap" in set(overall["signal"]):
        gap = overall.set_index("signal").loc["dense_gap"]
        lines.append(
            f" The top-1/top-2 gap is weak here too ({format_interval(gap['auc'], gap['ci_low'], gap['ci_high'])}"
            + (f"; published {published_numbers.AUC['dense_gap']})." if published else ").")
        )
    lines.append("")
    return "\n".join(lines)


def empty_section(stats: pd.DataFrame, *, published: bool = True) -> str:
    """How often BM25 returns nothing, per slice (the published 'check for empty results' claim)."""
    rows = []
    for signal in ("bm25_empty_raw", "bm25_empty_stopwords"):
        for row in stats[stats["signal"] == signal].itertuples():
            rows.append(
                {
                    "retriever": signal.replace("bm25_empty_", "BM25 "),
                    "slice": row.slice,
                    "empty results": f"{row.mean:.0%} ({round(row.mean * row.n)}/{row.n})",
                }
            )
    return "\n".join(
        [
            "### BM25 empty results",
            "",
            pd.DataFrame(rows).to_markdown(index=False),
            "",
            (
                "Published: raw BM25 never came back empty; with stop words removed, 5 of 30 unanswerable "
                "queries and no answerable ones did. "
                if published
                else ""
            )
            + _empty_verdict(stats),
            "",
        ]
    )


def _empty_verdict(stats: pd.DataFrame) -> str:
    part = stats[stats["signal"] == "bm25_empty_stopwords"].set_index("slice")
    if part.empty or "answerable" not in part.index:
        return ""
    empty = (part["mean"] * part["n"]).round()
    unanswerable_empty = empty.drop("answerable").sum()
    unanswerable_n = part["n"].drop("answerable").sum()
    return (
        f"Here {int(empty['answerable'])} answerable and {int(unanswerable_empty)} of {int(unanswerable_n)} "
        f'unanswerable queries came back empty without stop words: "check for empty results" catches '
        f"{unanswerable_empty / unanswerable_n:.0%} of the unanswerable questions, so it is no refusal strategy "
        "on its own."
    )


def sweep_section(outcomes: pd.DataFrame, signal: str = "dense_top1", *, published: bool = True) -> str:
    """The published sweep layout (thresholds 0.30 to 0.55), ours beside theirs."""
    rows = []
    for row in outcomes.itertuples():
        theirs = published_numbers.SWEEP.get(round(row.threshold, 2), (np.nan,) * 4)
        rows.append(
            {
                "threshold": f"{row.threshold:.2f}",
                "answerable kept": format_share(row.answerable_kept_k, row.answerable_n)
                + f" [{row.answerable_kept_low:.0%}, {row.answerable_kept_high:.0%}]",
                "near-domain refused": format_share(row.near_domain_refused_k, row.near_domain_n)
                + f" [{row.near_domain_refused_low:.0%}, {row.near_domain_refused_high:.0%}]",
                "unrelated refused": format_share(row.unrelated_refused_k, row.unrelated_n),
                "all unanswerable refused": format_share(row.unanswerable_refused_k, row.unanswerable_n),
                **(
                    {"published (kept / near / unrel. / all)": " / ".join(f"{value:.0%}" for value in theirs)}
                    if published
                    else {}
                ),
            }
        )
    return "\n".join(
        [
            f"## Threshold sweep on `{signal}` (published layout)",
            "",
            "Exact 95% binomial (Clopper-Pearson) intervals in brackets. The full sweep over a grid and "
            "every distinct score, for every signal, is in `sweep.csv`.",
            "",
            pd.DataFrame(rows).to_markdown(index=False),
            "",
        ]
    )


def heldout_section(
    single: pd.Series,
    repeated: pd.DataFrame,
    *,
    signal: str = "dense_top1",
    delta: float = 0.1,
    total_answerable: int,
    published: bool = True,
) -> str:
    slices = [
        column[: -len("_refused")]
        for column in repeated.columns
        if column.endswith("_refused") and column != "unanswerable_refused"
    ]
    theirs = published_numbers.HELDOUT
    lines = [
        "## Held-out thresholds",
        "",
        "### The published protocol (one split)",
        "",
        f"Each slice split in half (seed 0; calibration gets the larger half), `{signal}` threshold set keeping every "
        "answerable calibration question (`keep@1.0`), scored on the other half only.",
        "",
        pd.DataFrame(
            [
                {
                    "": "ours",
                    "threshold": f"{single['threshold']:.3f}",
                    "answerable kept": format_share(single["answerable_kept_k"], single["answerable_n"]),
                    "unanswerable refused": format_share(single["unanswerable_refused_k"], single["unanswerable_n"]),
                    **{
                        f"{name.replace('_', '-')} refused": format_share(
                            single[f"{name}_refused_k"], single[f"{name}_n"]
                        )
                        for name in slices
                    },
                },
                {
                    "": "published",
                    "threshold": f"{theirs['threshold']:.3f}",
                    "answerable kept": format_share(*theirs["answerable_kept"]),
                    "unanswerable refused": format_share(*theirs["unanswerable_refused"]),
                    **{f"{name.replace('_', '-')} refused": "" for name in slices},
                },
            ][: 2 if published else 1]
        ).to_markdown(index=False),
        "",
        f"### {repeated['split'].nunique():,} repeated stratified splits",
        "",
        "Mean held-out rate, with the 5th to 95th percentile over splits. Thresholds are fitted on the calibration "
        f"half only; guarantees use delta = {delta}.",
        "",
    ]
    rows = []
    for rule, group in repeated.groupby("rule", sort=False):
        record = {"rule": rule, "threshold": _spread(group["threshold"], 3)}
        for column in ["answerable_kept"] + [f"{name}_refused" for name in slices] + ["unanswerable_refused"]:
            record[column.replace("_", " ")] = _spread(group[column], 2, percent=True)
        rows.append(record)
    lines += [pd.DataFrame(rows).to_markdown(index=False), ""]
    if GUARANTEE_RULE in set(repeated["rule"]):
        lines.append(guarantee_check(repeated, total_answerable=total_answerable, delta=delta))
        lines.append("")
    if {"near_domain", "unrelated"} <= set(slices):
        base = repeated[repeated["rule"] == "keep@1.0"]
        near, unrelated = base["near_domain_refused"].mean(), base["unrelated_refused"].mean()
        verdict = "holds" if near < unrelated and unrelated > 0.9 else "does not hold"
        lines.append(
            f"The published conclusion, that a top-1 cosine threshold refuses most unanswerable questions and that "
            f"near-domain ones are the hard part, {verdict} on this set: with `keep@1.0` the held-out refusal "
            f"averages {unrelated:.0%} for unrelated and {near:.0%} for near-domain questions."
        )
        lines.append("")
    return "\n".join(lines)


def guarantee_check(
    repeated: pd.DataFrame, *, total_answerable: int, rule: str = GUARANTEE_RULE, delta: float = 0.1
) -> str:
    """How often the recall guarantee held on the held-out halves, and why that check is rougher than the guarantee.

    Parameters
    ----------
    repeated : DataFrame
        :func:`ragcal.calibration.heldout_outcomes` output that includes ``rule``.
    total_answerable : int
        Answerable questions in the whole labeled set.
    """
    target = float(rule.split("@")[1])
    kept = repeated.loc[repeated["rule"] == rule, "answerable_kept"]
    held = float((kept >= target).mean())
    verdict = "consistent with the promise" if held >= 1 - delta else f"a little below the nominal {1 - delta:.0%}"
    return (
        f"`{rule}` promises recall >= {target:.0%} on future answerable questions with probability "
        f">= {1 - delta:.0%}. Held-out recall reached {target:.0%} in {held:.1%} of {len(kept):,} splits, {verdict}. "
        "The check is rougher than the guarantee: the held-out half is a finite sample of "
        f"{int(repeated['answerable_n'].iloc[0])} answerable questions, drawn without replacement from the same "
        f"{total_answerable}, so its recall scatters around the population recall that the guarantee is about; a "
        "share a little under the nominal one is what that scatter produces, not a broken guarantee (the simulation "
        "test in tests/calibration/test_rules.py checks the bound itself on fresh draws)."
    )


def split_counts(single: pd.Series) -> pd.DataFrame:
    """One held-out split as a one-row table with whole-number counts (``k/n`` and shares per group)."""
    groups = [column[: -len("_k")] for column in single.index if column.endswith("_k")]
    row = {"threshold": round(float(single["threshold"]), 4)}
    for group in groups:
        size = int(single[group.rsplit("_", 1)[0] + "_n"])
        row[group.replace("_", " ")] = f"{int(single[group + '_k'])}/{size}"
    return pd.DataFrame([row])


def _spread(values: pd.Series, digits: int, percent: bool = False) -> str:
    finite = values[np.isfinite(values)]
    if finite.empty:
        return "n/a"
    low, high = np.quantile(finite, [0.05, 0.95])
    if percent:
        return f"{finite.mean():.0%} ({low:.0%} to {high:.0%})"
    return f"{finite.mean():.{digits}f} ({low:.{digits}f} to {high:.{digits}f})"


def rule_of_thumb_section(
    thresholds: pd.DataFrame, *, signal: str = "dense_top1", golden_file: str = "tests/golden/fastapi_minilm.json"
) -> str:
    """Thresholds fitted on the whole labeled set (for use, not for reporting held-out performance)."""
    lookup = thresholds.set_index("rule")["threshold"]
    lines = [
        "## Rule of thumb for this corpus and model",
        "",
        "Fitted on all labeled questions (so these are the numbers to deploy, not held-out estimates):",
        "",
        thresholds.to_markdown(index=False, floatfmt=".3f"),
        "",
    ]
    if "keep@1.0" in lookup and "keep@0.95" in lookup:
        lines.append(
            f"Gate on `{signal}`: refuse below **{lookup['keep@1.0']:.2f}** to keep every known-answerable question, "
            f"or below **{lookup['keep@0.95']:.2f}** to trade 5% of them for more refusals of near-domain questions. "
            "Recalibrate whenever the model, the chunking or the corpus changes; the golden-set test "
            f"(`tests/test_golden.py`, pinned in `{golden_file}`) fails when they move the scale."
        )
        lines.append("")
    return "\n".join(lines)
