"""``summary.md`` of the benchmark study: the headline numbers with their intervals, beside the bundled corpora.

The numbers of the bundled corpora are read from their own results folders
(``auc.csv``, ``heldout.csv``, ``learned_auc.csv``, ``risk_coverage_summary.csv``),
never typed in.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ..calibration.heldout import fallback_notes
from ..score_tables import slice_column
from .imported_stats import BASELINE_SIGNAL, GROUP_COLUMN, LEARNED_RULE

__all__ = ["spread", "benchmark_summary", "bundled_headline"]

#: The numbers a previous measurement on the same questions found, splitting by question (issue 32): they are the
#: reference this study's by-article protocol is checked against, not results of this code.
BY_QUESTION_REFERENCE = {"dense_top1 AUC": 0.579, "keep@0.95 unanswerable refused": 0.08, "learned gate AUC": 0.599}


def spread(values) -> tuple:
    """Mean, 2.5th and 97.5th percentile of a column over splits (NaN left out)."""
    values = pd.Series(values, dtype=float).dropna()
    if values.empty:
        return math.nan, math.nan, math.nan
    return float(values.mean()), float(values.quantile(0.025)), float(values.quantile(0.975))


def _interval(value, low, high, *, percent: bool = False) -> str:
    if pd.isna(value):
        return "n/a"
    if percent:
        return f"{value:.1%} [{low:.1%}, {high:.1%}]"
    return f"{value:.3f} [{low:.3f}, {high:.3f}]"


def _spread_cell(values, *, percent: bool = True) -> str:
    return _interval(*spread(values), percent=percent)


def bundled_headline(folder, *, signal: str = BASELINE_SIGNAL, rule: str = LEARNED_RULE) -> dict | None:
    """The headline numbers of a bundled corpus, read from its results folder; None when the folder has none.

    ``{"auc": (value, low, high), "refused": (mean, p2.5, p97.5), "kept": ..., "learned": ..., "aurc": ...}``;
    a missing file gives NaN for its numbers.
    """
    folder = Path(folder)
    if not (folder / "auc.csv").is_file():
        return None
    nan = (math.nan,) * 3
    auc = pd.read_csv(folder / "auc.csv")
    row = auc[(auc["signal"] == signal) & (auc["comparison"] == "all unanswerable")]
    numbers = {"auc": tuple(row.iloc[0][["auc", "ci_low", "ci_high"]]) if len(row) else nan}
    numbers["refused"] = numbers["kept"] = numbers["learned"] = numbers["aurc"] = nan
    if (folder / "heldout.csv").is_file():
        heldout = pd.read_csv(folder / "heldout.csv")
        heldout = heldout[heldout["rule"] == rule]
        numbers["refused"] = spread(heldout["unanswerable_refused"])
        numbers["kept"] = spread(heldout["answerable_kept"])
    if (folder / "learned_auc.csv").is_file():
        learned = pd.read_csv(folder / "learned_auc.csv")
        row = learned[(learned["gate"] == "learned all") & (learned["comparison"] == "all unanswerable")]
        numbers["learned"] = tuple(row.iloc[0][["mean", "low", "high"]]) if len(row) else nan
    if (folder / "risk_coverage_summary.csv").is_file():
        areas = pd.read_csv(folder / "risk_coverage_summary.csv")
        row = areas[(areas["name"] == signal) & (areas["measure"] == "aurc")]
        numbers["aurc"] = tuple(row.iloc[0][["value", "low", "high"]]) if len(row) else nan
    return numbers


def _auc_rows(auc: pd.DataFrame, limit: int = 12) -> str:
    overall = auc[auc["comparison"] == "all unanswerable"].dropna(subset=["auc"])
    rows = [
        {"rank": rank, "signal": row.signal, "AUC [95% CI over questions]": _interval(row.auc, row.ci_low, row.ci_high)}
        for rank, row in enumerate(overall.head(limit).itertuples(), start=1)
    ]
    return pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True)


def _ratio(numerator, denominator) -> str:
    return f"{numerator / denominator:.1f}" if denominator > 0 else "n/a"


def _clustered_rows(clustered: pd.DataFrame) -> str:
    rows = [
        {
            "signal": row.signal,
            "AUC": f"{row.auc:.3f}",
            "95% CI over questions": f"[{row.question_low:.3f}, {row.question_high:.3f}]",
            f"95% CI over articles ({row.n_articles})": f"[{row.article_low:.3f}, {row.article_high:.3f}]",
            "width ratio (articles / questions)": _ratio(row.article_high - row.article_low,
                                                         row.question_high - row.question_low),
        }
        for row in clustered.itertuples()
    ]
    return pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True)


def _heldout_rows(heldout: pd.DataFrame, slices) -> str:
    rows = []
    for (signal, rule), group in heldout.groupby(["signal", "rule"], sort=False):
        row = {"signal": signal, "rule": rule, "answerable kept": _spread_cell(group["answerable_kept"])}
        for name in slices:
            row[f"{name} refused"] = _spread_cell(group[f"{slice_column(name)}_refused"])
        row["threshold"] = _interval(*spread(group["threshold"].replace([math.inf, -math.inf], math.nan)))
        rows.append(row)
    return pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True)


def _learned_rows(learned: pd.DataFrame, slices) -> str:
    rows = []
    for gate, group in learned.groupby("gate", sort=False):
        row = {"gate": gate, "held-out AUC": _spread_cell(group["auc"], percent=False)}
        row["answerable kept"] = _spread_cell(group["answerable_kept"])
        for name in slices:
            row[f"{name} refused"] = _spread_cell(group[f"{slice_column(name)}_refused"])
        rows.append(row)
    return pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True)


def _area_rows(areas: pd.DataFrame) -> str:
    aurc = areas[areas["measure"] == "aurc"].sort_values("value")
    rows = [
        {
            "signal or gate": row.name,
            "AURC": f"{row.value:.3f}",
            "95% CI over questions": f"[{row.low:.3f}, {row.high:.3f}]",
            "95% CI over articles": f"[{row.article_low:.3f}, {row.article_high:.3f}]",
        }
        for row in aurc.itertuples()
    ]
    return pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True)


def _protocol_rows(protocols: pd.DataFrame) -> str:
    if protocols.empty:
        return "(no fitted numbers to compare)"
    cells = protocols.assign(
        cell=[
            f"{row.value:.3f}" if pd.isna(row.low) else f"{row.value:.3f} [{row.low:.3f}, {row.high:.3f}]"
            for row in protocols.itertuples()
        ]
    )
    wide = cells.pivot(index="measure", columns="protocol", values="cell")
    return wide.loc[list(dict.fromkeys(protocols["measure"]))].to_markdown(disable_numparse=True)


def _llm_section(points: pd.DataFrame, heldout: pd.DataFrame, *, passages: int = 1) -> list:
    if points.empty:
        return [
            "## Logged binary signals (an LLM's own abstention)",
            "",
            "No logged signals were given to this run: there is no LLM operating point here. With a CSV of "
            "`id,llm_found_answer` (`benchmark_study(..., logged_signals=...)`), its answered/abstained verdict "
            "becomes a point on the ROC and risk-coverage figures (and, when every question has a verdict, a feature of "
            "a second learned gate).",
            "",
        ]
    baseline = heldout[(heldout["signal"] == BASELINE_SIGNAL) & (heldout["rule"] == LEARNED_RULE)]
    rows = []
    for row in points[points["space"] == "roc"].itertuples():
        kept, refused = row.y, 1 - row.x
        rows.append(
            {
                "verdict": row.name,
                "answerable kept [Clopper-Pearson] [articles]": f"{kept:.1%} [{row.y_low:.1%}, {row.y_high:.1%}] "
                f"[{row.y_article_low:.1%}, {row.y_article_high:.1%}] ({row.y_k} of {row.y_n})",
                "unanswerable refused [Clopper-Pearson] [articles]": f"{refused:.1%} [{1 - row.x_high:.1%}, "
                f"{1 - row.x_low:.1%}] [{1 - row.x_article_high:.1%}, {1 - row.x_article_low:.1%}] "
                f"({row.x_n - row.x_k} of {row.x_n})",
            }
        )
    if len(baseline):
        rows.append(
            {
                "verdict": f"threshold {BASELINE_SIGNAL} {LEARNED_RULE}, held out by article (mean [2.5th, 97.5th "
                "percentile over splits])",
                "answerable kept [Clopper-Pearson] [articles]": _spread_cell(baseline["answerable_kept"]),
                "unanswerable refused [Clopper-Pearson] [articles]": _spread_cell(baseline["unanswerable_refused"]),
            }
        )
    risk = points[points["space"] == "risk-coverage"]
    risk_lines = [
        f"- `{row.name}`: answers {row.x:.1%} of all questions, {row.y:.1%} of its answers unsupported "
        f"(Clopper-Pearson [{row.y_low:.1%}, {row.y_high:.1%}])."
        for row in risk.itertuples()
    ]
    return [
        "## Logged binary signals (an LLM's own abstention)",
        "",
        "A verdict that is 1 (answered) or 0 (abstained) is one operating point, not a curve. Its shares are over "
        "the questions the logged file covers (the LLM was asked about a sample stratified by slice; nothing is "
        "fitted, so nothing needs holding out), a reply that could not be read counting as an abstention, with a "
        "Clopper-Pearson interval (questions taken as independent) and an article bootstrap interval, beside the "
        "`dense_top1` threshold held out by article over all questions. An LLM answer counts as supported on the "
        f"risk-coverage figure when the question is answerable and a gold-page passage is among the dense top "
        f"{passages} (what it was given). The verdicts (`llm_found_answer.csv`, `llm_verdicts.csv`) are an opt-in "
        "study, about 13 minutes cold: `ragcal reproduce --benchmark squad2-A --llm` asks the LLM again and rewrites "
        "them; a plain `make reproduce` reads them as they are.",
        "",
        pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True),
        "",
        *risk_lines,
        "",
    ]


def _comparison_section(tables: dict, compare_with: dict, headline_numbers: dict) -> list:
    rows = []
    for title, folder in compare_with.items():
        numbers = bundled_headline(folder)
        if numbers is None:
            rows.append({"corpus": title, f"{BASELINE_SIGNAL} AUC": f"no results in {Path(folder).name}/"})
            continue
        rows.append(
            {
                "corpus": title,
                f"{BASELINE_SIGNAL} AUC": _interval(*numbers["auc"]),
                f"{LEARNED_RULE}: unanswerable refused (held out)": _interval(*numbers["refused"], percent=True),
                f"{LEARNED_RULE}: answerable kept (held out)": _interval(*numbers["kept"], percent=True),
                "learned gate (all signals) AUC, held out": _interval(*numbers["learned"]),
                f"{BASELINE_SIGNAL} AURC": _interval(*numbers["aurc"]),
            }
        )
    rows.append({"corpus": "this benchmark", **headline_numbers})
    return [
        "## Beside the bundled corpora",
        "",
        "The FastAPI and Rust-book numbers are read from `results/fastapi/` and `results/rust-book/` (their "
        "`auc.csv`, `heldout.csv`, `learned_auc.csv`, `risk_coverage_summary.csv`). Their held-out numbers split "
        "by question (stratified by slice, 1,000 splits: the questions there were written one by one); the "
        "benchmark's split by article. Intervals: the bundled corpora's AUC and AURC over questions; held-out "
        "shares as 2.5th to 97.5th percentile over splits; this benchmark's AUCs over articles.",
        "",
        pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True),
        "",
    ]


def benchmark_summary(
    tables: dict,
    *,
    title: str,
    config: dict,
    headline: list,
    n_splits: int,
    n_resamples: int,
    compare_with: dict,
) -> str:
    """The markdown of ``summary.md`` from the tables of :func:`ragcal.study.imported.benchmark_study`."""
    scores, clustered = tables["scores"], tables["auc_clustered"].set_index("signal")
    heldout, learned = tables["heldout"], tables["learned_gate"]
    slices = list(pd.unique(scores.loc[~scores["answerable"].astype(bool), "slice"]))
    n_articles = scores[GROUP_COLUMN].nunique()
    counts = scores["slice"].value_counts()
    baseline = heldout[(heldout["signal"] == BASELINE_SIGNAL) & (heldout["rule"] == LEARNED_RULE)]
    gate = learned[learned["gate"] == "learned all"]
    best = headline[1] if len(headline) > 1 else BASELINE_SIGNAL

    def clustered_cell(name):
        if name not in clustered.index:
            return "n/a"
        row = clustered.loc[name]
        return (
            f"{row['auc']:.3f}, over articles [{row['article_low']:.3f}, {row['article_high']:.3f}], over questions "
            f"[{row['question_low']:.3f}, {row['question_high']:.3f}]"
        )

    areas = tables["risk_coverage_summary"]
    aurc = areas[(areas["name"] == BASELINE_SIGNAL) & (areas["measure"] == "aurc")]
    headline_numbers = {
        f"{BASELINE_SIGNAL} AUC": _interval(*clustered.loc[BASELINE_SIGNAL, ["auc", "article_low", "article_high"]])
        if BASELINE_SIGNAL in clustered.index
        else "n/a",
        f"{LEARNED_RULE}: unanswerable refused (held out)": _spread_cell(baseline["unanswerable_refused"]),
        f"{LEARNED_RULE}: answerable kept (held out)": _spread_cell(baseline["answerable_kept"]),
        "learned gate (all signals) AUC, held out": _spread_cell(gate["auc"], percent=False),
        f"{BASELINE_SIGNAL} AURC": _interval(*aurc.iloc[0][["value", "article_low", "article_high"]])
        if len(aurc)
        else "n/a",
    }
    learned_name = "learned all"
    reference = BY_QUESTION_REFERENCE
    dense_auc = clustered.loc[BASELINE_SIGNAL, "auc"] if BASELINE_SIGNAL in clustered.index else math.nan
    refused, refused_low, refused_high = spread(baseline["unanswerable_refused"])
    kept, kept_low, kept_high = spread(baseline["answerable_kept"])
    best_auc = clustered.loc[best, "auc"] if best in clustered.index else math.nan
    learned_auc = clustered.loc[learned_name, "auc"] if learned_name in clustered.index else math.nan
    sections = [
        f"# Results: {title}",
        "",
        f"Generated by `ragcal reproduce --benchmark` (`ragcal.study.imported.benchmark_study`). "
        + (
            f"Imported with `ragcal import-benchmark` from `{config['imported_from']}` (sha256 "
            f"`{config.get('imported_from_sha256', '')[:12]}`): "
            if config.get("imported_from")
            else f"Corpus `{config.get('corpus')}`, queries `{config.get('queries')}`: "
        )
        + f"{len(scores):,} questions in {n_articles} "
        "articles ("
        + ", ".join(f"{count:,} {name}" for name, count in counts.items())
        + f"). Model `{config.get('model_fingerprint')}`, {config.get('chunker')} chunking (max "
        f"{config.get('max_tokens')} tokens), {config.get('n_chunks'):,} chunks: ragcal's defaults, nothing tuned.",
        "",
        "Questions about one paragraph, and paragraphs of one article, are not independent. Wherever something is "
        f"fitted (a threshold, the learned gate) it is fitted on half the articles and counted on the other half, "
        f"over every such split ({n_splits} splits), never on a question of an article it was fitted on. Bootstrap "
        f"intervals use {n_resamples:,} resamples (seed 0).",
        "",
        "## Headline",
        "",
        f"- `{BASELINE_SIGNAL}` AUC (answerable vs unanswerable): {clustered_cell(BASELINE_SIGNAL)}.",
        f"- Best other signal by AUC, `{best}`: {clustered_cell(best)} (picked on these questions).",
        f"- Logistic gate over all signals, each article scored by a model fitted on the other {n_articles - 1}: "
        f"{clustered_cell(learned_name)}; nested held out by article, its AUC on the evaluation articles is "
        f"{_spread_cell(gate['auc'], percent=False)} (mean [2.5th, 97.5th percentile over splits]).",
        f"- `{LEARNED_RULE}` on `{BASELINE_SIGNAL}`, fitted on half the articles: refuses "
        f"{_spread_cell(baseline['unanswerable_refused'])} of the other half's unanswerable questions and keeps "
        f"{_spread_cell(baseline['answerable_kept'])} of the answerable ones; the learned gate at the same rule "
        f"refuses {_spread_cell(gate['unanswerable_refused'])} and keeps {_spread_cell(gate['answerable_kept'])}.",
        "",
        "### Which interval to believe",
        "",
        "The interval over questions treats every question as independent evidence. It is not: the questions of "
        f"one article share its paragraphs, its vocabulary and its writers, and a signal's AUC moves from one "
        f"article to the next. The interval over articles resamples whole articles and is the honest one. With "
        f"only {n_articles} articles it is itself rough: a bootstrap of {n_articles} clusters has few distinct "
        "resamples and tends to run narrow (its variance is (g - 1) / g of the estimator's at best), and what it "
        f"describes is articles like these {n_articles}. The held-back half B of the dev set is the real check.",
        "",
        _clustered_rows(tables["auc_clustered"]),
        "",
        "## Every signal's AUC",
        "",
        f"Answerable against all unanswerable, stratified bootstrap over questions (`auc.csv` has all "
        f"{tables['auc']['signal'].nunique()} columns and each slice); the top 12:",
        "",
        _auc_rows(tables["auc"]),
        "",
        "## Held-out thresholds, split by article",
        "",
        f"The rules of the bundled corpora, each fitted on the calibration articles and counted on the other "
        f"articles; mean over the {n_splits} splits with the 2.5th and 97.5th percentiles. The signals are "
        f"`{BASELINE_SIGNAL}` and the best {len(headline) - 1} others by AUC.",
        "",
        _heldout_rows(heldout, slices),
        "",
        *[f"- {line}" for line in fallback_notes(heldout.drop(columns="signal"))],
        "",
        "## The learned gate, nested held out by article",
        "",
        f"Model and `{LEARNED_RULE}` threshold fitted on the calibration articles only (the threshold on scores "
        "cross-fitted with one calibration article left out at a time), counted on the evaluation articles.",
        "",
        _learned_rows(learned, slices),
        "",
        "## Risk-coverage",
        "",
        "An answer is supported when the question is answerable and a passage passed on is from its gold page "
        "(as in `results/fastapi/`); selective risk is unsupported answers over answers. The learned gate's curve "
        "orders questions by their cross-fitted (by article) score, its passages cut at the `keep@0.95` cosine "
        "bar of `dense_top1`. Lower AURC is better.",
        "",
        _area_rows(areas),
        "",
        *_llm_section(tables["operating_points"], heldout, passages=config.get("logged_passages", 1)),
        *_comparison_section(tables, compare_with, headline_numbers),
        "## What ragcal's retrieval signals can and cannot do here",
        "",
        f"On the bundled corpora an unanswerable question is about something the docs do not cover, so retrieval "
        f"finds nothing close and a cosine threshold refuses it. SQuAD 2.0's unanswerable questions were written "
        f"by crowd workers against one paragraph, to look answerable from it: retrieval finds that very paragraph, "
        f"as close as for an answerable question. Here `{BASELINE_SIGNAL}` separates the two only weakly (AUC "
        f"{dense_auc:.3f}), the best of the other signals {'is no' if best_auc <= dense_auc else 'hardly'} better "
        f"({best_auc:.3f}), and a logistic gate over "
        f"all of them, scored on articles it was not fitted on, does not fix it ({learned_auc:.3f}): they all "
        f"measure whether retrieval found something *about* the question, which is true for both kinds. A "
        f"`{LEARNED_RULE}` threshold fitted on other articles therefore refuses only {refused:.0%} of unanswerable "
        f"questions on average (from {refused_low:.0%} to {refused_high:.0%} across article splits).",
        "",
        f"What they can do here: the answerable side transfers across articles. `{LEARNED_RULE}` keeps "
        f"{kept:.1%} of held-out answerable questions on average ({kept_low:.1%} to {kept_high:.1%} across "
        "splits), about what it promises, though one split can miss by a few points more than a split by question "
        "suggests. SQuAD has no off-topic slice, so what these signals do well on the bundled corpora (refuse "
        "questions the corpus does not cover at all) is not tested here. What they cannot do: tell an on-topic "
        "question the retrieved paragraph does not answer from one it does; that takes a signal that reads the "
        "question against the passage (a judge).",
        "",
        f"A previous measurement on these questions, split by question rather than by article, found "
        f"`dense_top1` AUC {reference['dense_top1 AUC']:.3f}, `keep@0.95` refusing "
        f"{reference['keep@0.95 unanswerable refused']:.0%} of held-out unanswerable questions and a cross-fitted "
        f"logistic gate at AUC {reference['learned gate AUC']:.3f}. Measured here: `dense_top1` AUC {dense_auc:.3f} "
        "(nothing is fitted for it, so the protocol cannot change it), and the fitted numbers under both "
        "protocols on this run's table (`protocol_comparison.csv`):",
        "",
        _protocol_rows(tables["protocol_comparison"]),
        "",
        "Split by question, a learned model is fitted on other questions about the very articles it then scores, "
        "and a threshold on questions of the articles it is counted on: the held-out numbers are then flattered, "
        "and their spread over splits is narrower than the spread from one set of articles to another.",
        "",
    ]
    return "\n".join(sections)
