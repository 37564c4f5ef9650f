# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 10 · On data we did not write: SQuAD 2.0, split by article
#
# Every other notebook works on question sets written for this project. This one runs ragcal's defaults, untouched,
# on half of the SQuAD 2.0 development set (8 Wikipedia articles, 301 paragraphs, 2,828 questions), imported with
# `ragcal import-benchmark squad2`. Its unanswerable questions were written by crowd workers *against one paragraph*,
# to look answerable from it, so retrieval finds exactly that paragraph: the hard case for retrieval signals.
#
# Questions about one article are not independent. Everything fitted here (thresholds, the learned gate) is fitted
# on half the articles and counted on the other half, over every such split (C(8, 4) = 70), and the headline AUCs
# carry an interval that resamples whole articles beside the usual one over questions.
#
# The tables come from `ragcal reproduce --benchmark squad2-A` (`results/squad2-A/`). Without them the study is
# computed here on the articles of the `articles` parameter.

# %% tags=["parameters"]
benchmark = "squad2-A"
results_dir = None  # written by `ragcal reproduce --benchmark`; None: results/<benchmark>/ of the project
corpus_dir = None  # only when results_dir holds no results: the imported corpus (None: imported from data/benchmarks/)
queries_path = None  # ... and its labeled queries with a `group` (article) column
logged_signals = None  # ... and optionally logged signals joined by id (an LLM's llm_found_answer)
articles = ["Normans", "Huguenot"]  # ... computed on these articles only (None: all of them)
n_resamples = 2000  # bootstrap resamples of the figures' ROC intervals (and of a computed study)
figures_dir = None  # None: figures/<benchmark>/ of the project

# %%
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from ragcal.plotting import (
    OperatingPointDisplay,
    RiskCoverageDisplay,
    RocDisplay,
    ScoreDistributionDisplay,
    figure_style,
    save_figure,
)
from ragcal.signals import SIGNALS
from ragcal.study.imported import BENCHMARKS, benchmark_study, read_benchmark_results
from ragcal.study.imported_report import bundled_headline, spread
from ragcal.study.notebooks import FIGURES_DIR, RESULTS_DIR

figures_dir = Path(figures_dir or FIGURES_DIR / benchmark)
results_dir = Path(results_dir or RESULTS_DIR / benchmark)
computed_here = not (results_dir / "summary.md").is_file()
if computed_here:
    if corpus_dir is None or queries_path is None:  # imported from data/benchmarks/ (once, into the cache)
        corpus_dir, queries_path = BENCHMARKS[benchmark].resolve()
    results_dir = Path(tempfile.mkdtemp()) / benchmark
    benchmark_study(
        corpus_dir,
        queries_path,
        results_dir,
        logged_signals=logged_signals,
        articles=articles,
        n_resamples=n_resamples,
        compare_with={},
        log=None,
    )
tables = read_benchmark_results(results_dir)
scores = tables["scores"]
directions = {name: SIGNALS[name].higher_is_answerable for name in SIGNALS}
print(
    f"{'computed here' if computed_here else 'read from results'}: {len(scores):,} questions in "
    f"{scores['group'].nunique()} articles; {scores['answerable'].sum():,} answerable"
)

# %% [markdown]
# ## How well does each signal separate answerable from unanswerable?
#
# The headline signals (`dense_top1` and the best three others by AUC) and the logistic gate over all signals, whose
# score is cross-fitted by article (each article scored by a model fitted on the others). Two 95% intervals: over
# questions (as if independent) and over articles (whole articles resampled). The second is the honest one; with
# only 8 articles it is itself rough, and tends to run narrow.

# %%
tables["auc_clustered"].round(3)

# %% [markdown]
# `dense_top1` per slice, with the `keep@0.95` threshold fitted on half the articles (median over the splits).

# %%
keep = tables["heldout"]
keep = keep[(keep["signal"] == "dense_top1") & (keep["rule"] == "keep@0.95")]
with figure_style():
    figure, ax = plt.subplots(figsize=(7.6, 3.4), layout="constrained")
distribution = ScoreDistributionDisplay.from_score_table(
    scores, "dense_top1", thresholds={"keep@0.95 (median over article splits)": keep["threshold"].median()}
).plot(ax=ax, kind="hist", name="dense_top1 on SQuAD 2.0, half A")
save_figure(figure, f"{figures_dir}/score_distributions");

# %% [markdown]
# ROC of the headline signals and the learned gate (its cross-fitted score), with bootstrap bands for `dense_top1`
# and the learned gate. A logged binary verdict (an LLM's own "I don't know"), when given, is a single point.

# %%
curves = list(tables["auc_clustered"]["signal"])
roc = RocDisplay.from_score_table(scores, curves, directions=directions, n_resamples=n_resamples)
roc.plot(bands=["dense_top1", "learned all"], name="SQuAD 2.0, half A")
OperatingPointDisplay.from_table(tables["operating_points"], space="roc").plot(ax=roc.ax_)
save_figure(roc.figure_, f"{figures_dir}/roc");

# %% [markdown]
# ## Thresholds held out by article
#
# Each rule fitted on half the articles and counted on the other half: the 2.5th, 50th and 97.5th percentile over
# the splits.

# %%
measures = ["answerable_kept", "near_domain_refused", "threshold"]
heldout = tables["heldout"].replace([float("inf"), float("-inf")], float("nan"))  # a rule that fell back: no threshold
heldout.groupby(["signal", "rule"], sort=False)[measures].quantile([0.025, 0.5, 0.975]).unstack().round(3)

# %% [markdown]
# The learned gate, nested held out by article: model and threshold fitted on the calibration articles only.

# %%
tables["learned_gate"].groupby("gate")[["auc", "answerable_kept", "near_domain_refused"]].quantile(
    [0.025, 0.5, 0.975]
).unstack().round(3)

# %% [markdown]
# ## Risk-coverage
#
# Selective risk (unsupported answers over answers) against coverage. An answer is supported when the question is
# answerable and a passage passed on is from its gold page.

# %%
with figure_style():
    figure, ax = plt.subplots(figsize=(7.6, 4.4), layout="constrained")
risk = RiskCoverageDisplay.from_results(tables["risk_coverage"], tables["risk_coverage_summary"])
risk.plot(ax=ax, name="SQuAD 2.0, half A")
OperatingPointDisplay.from_table(tables["operating_points"], space="risk-coverage").plot(ax=risk.ax_)
save_figure(figure, f"{figures_dir}/risk_coverage");

# %% [markdown]
# Why the curves end at different heights at coverage 1, where every question is answered: an answer counts as
# supported only if a passage the gate *passes on* comes from the gold page, and the gates pass on different
# passages. A threshold on a passage score (`dense_top1`, `dense_top2`) cuts the dense list at its own threshold, so
# at its most lenient one any gold passage in the dense top 10 counts; a gate on any other signal
# (`dense_sigma50pct`, `dense_page_knn5`) passes on only the top passage; the learned gate passes on the dense
# passages above one cosine bar (the `keep@0.95` threshold of `dense_top1`), or the top passage when none clears it.
# Where a curve ends says how often what its gate passes on misses the gold page, not how well its signal orders the
# questions.

# %% [markdown]
# An LLM's own "I don't know" (when the study was given its verdicts: SmolLM2 on a stratified sample, with the top-1
# dense passage) is one operating point on both figures. Its shares with Clopper-Pearson intervals, and the counts
# behind them: in ROC space x is the share of unanswerable questions it answered and y that of answerable ones; in
# risk-coverage space x is the share of all questions answered and y the unsupported share of its answers.

# %%
point_columns = ["name", "space", "x", "x_low", "x_high", "x_k", "x_n", "y", "y_low", "y_high", "y_k", "y_n"]
tables["operating_points"][point_columns].round(3)

# %% [markdown]
# ## By article against by question, and beside the bundled corpora
#
# The fitted numbers under the honest protocol (by article) and under a split by question, which lets questions of
# one article sit on both sides. Then the bundled corpora's own numbers, read from their results.

# %%
tables["protocol_comparison"].round(3)

# %%
beside = {name: bundled_headline(RESULTS_DIR / name) for name in ("fastapi", "rust-book")}
rows = {name: {measure: round(values[0], 3) for measure, values in numbers.items()} for name, numbers in beside.items()
        if numbers is not None}
areas = tables["risk_coverage_summary"]
rows[benchmark] = {
    "auc": round(tables["auc_clustered"].set_index("signal").loc["dense_top1", "auc"], 3),
    "refused": round(spread(keep["unanswerable_refused"])[0], 3),
    "kept": round(spread(keep["answerable_kept"])[0], 3),
    "learned": round(spread(tables["learned_gate"].query("gate == 'learned all'")["auc"])[0], 3),
    "aurc": round(areas.loc[(areas["name"] == "dense_top1") & (areas["measure"] == "aurc"), "value"].iloc[0], 3),
}
pd.DataFrame(rows).T


# %% [markdown]
# ## Conclusion
#
# - On the SQuAD half studied here (2,828 questions in 8 articles, 1,299 answerable), retrieval signals barely
#   separate answerable from unanswerable questions. `dense_top1` has AUC 0.579, [0.560, 0.600] over questions and
#   [0.541, 0.608] over articles, against 0.986 on FastAPI and 0.944 on the Rust book.
# - Nothing does better. The next-best signals reach 0.562, 0.560 and 0.558, and the learned gate over all signals
#   reaches 0.563 [0.523, 0.600] by article; nested by article, its median is 0.566 [0.525, 0.605].
# - Held out by article, `keep@0.95` keeps 0.952 [0.904, 0.981] of answerable questions but refuses only 0.085 [0.035,
#   0.152] of unanswerable ones.
# - Trading the other way does not help. `false_answer_guarantee@0.2` refuses 0.820 of unanswerable questions but
#   keeps only 0.258 [0.132, 0.383] of answerable ones.
# - The LLM's own "I don't know" does not separate either. On its sample it answered 0.167 [0.113, 0.233] of
#   unanswerable questions (27 of 162) and 0.167 [0.109, 0.240] of answerable ones (23 of 138). Its answers carry a
#   selective risk of 0.680 [0.533, 0.805].
# - Splitting by question instead of by article flatters the numbers: the learned AUC rises from 0.563 to 0.599, and
#   the interval on unanswerable refused narrows from [0.035, 0.152] to [0.067, 0.108].
# - The takeaway: when unanswerable questions are written against the very passage retrieval finds, retrieval-score
#   gates do not work. An AURC of 0.552 for `dense_top1`, against 0.202 and 0.158 on the bundled corpora, says the
#   same.
# - Caveat: with only 8 articles, even the by-article intervals are rough and may run narrow. In the risk-coverage
#   figure the curves end at different heights at full coverage. This is because each gate passes on different
#   passages, not because the signals order questions differently.
