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
# # 11 · Reading the passage: a question–passage judge
#
# Every other signal says whether retrieval found something *about* the question. A judge reads the question
# against each of the top passages and says how likely the passage *answers* it. ragcal fine-tunes one from the
# bundled all-MiniLM-L6-v2 weights on the labeled questions (`ragcal train-judge`), or takes any cross-encoder or an
# OpenAI-compatible endpoint a user brings.
#
# A judge trained on questions is never scored on them. Here every corpus is cut into folds (whole articles on
# SQuAD 2.0, questions on the bundled corpora); each fold is scored by a judge trained on the other folds only, and
# every threshold and learned gate below is fitted on the calibration half of a split and counted on the other.
# Each fold's judge is calibrated (Platt scaling) on its own validation questions, a share of its training
# questions held out of its gradient steps, so that the folds' scores are on one scale before they are pooled.
#
# The tables come from `ragcal reproduce --judge` (`results/judge/`), which trains the judges (about 40 minutes on
# two cores for SQuAD 2.0 half A); this notebook only reads and draws them.

# %% tags=["parameters"]
results_dir = None  # None: results/judge/ of the project, written by `ragcal reproduce --judge`
corpora = ["squad2-A", "fastapi", "rust-book"]  # the study's corpora present in results_dir
n_resamples = 2000  # bootstrap resamples of the ROC bands
figures_dir = None  # None: figures/judge/ of the project

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from ragcal.plotting import (
    RiskCoverageDisplay,
    RocDisplay,
    ScoreDistributionDisplay,
    TrainingCurveDisplay,
    figure_style,
    save_figure,
)
from ragcal.signals import SIGNALS
from ragcal.study.judge import read_judge_results
from ragcal.study.judge_report import LEARNED_RETRIEVAL, LEARNED_WITH_JUDGE, judge_findings
from ragcal.study.notebooks import FIGURES_DIR, RESULTS_DIR

results_dir = Path(results_dir or RESULTS_DIR / "judge")
figures_dir = Path(figures_dir or FIGURES_DIR / "judge")
missing = [name for name in corpora if not (results_dir / name / "summary.md").is_file()]
if missing:
    raise FileNotFoundError(f"{results_dir}: no judge study for {missing}; run `ragcal reproduce --judge` first")
tables = {name: read_judge_results(results_dir / name) for name in corpora}
directions = {name: SIGNALS[name].higher_is_answerable for name in SIGNALS}
directions.update({LEARNED_RETRIEVAL: True, LEARNED_WITH_JUDGE: True})
for name, found in tables.items():
    scores = found["scores"]
    print(f"{name}: {len(scores):,} questions, {scores['answerable'].sum():,} answerable, "
          f"{found['folds'].shape[0]} cross-fitted judges")

# %% [markdown]
# ## The judges: how they trained
#
# Training loss per logged step (solid) and validation loss per epoch (dashed, on questions held out of that
# judge's gradient steps). Nothing is tuned on the validation questions; the final model's scores on them fit the
# judge's calibration, so they count as trained on. A loss that stays near ln 2 ≈ 0.693 is a judge guessing.

# %%
with figure_style():
    figure, axes = plt.subplots(len(corpora), 1, figsize=(6.4, 2.8 * len(corpora)), layout="constrained")
for ax, name in zip(np.atleast_1d(axes), corpora):
    TrainingCurveDisplay.from_curves(tables[name]["training_curves"]).plot(ax=ax, name=name)
save_figure(figure, f"{figures_dir}/training_curves");

# %% [markdown]
# Each judge's validation AUC and its verdict against chance and against the dense cosine of the same pairs, and
# its calibration `P = sigmoid(slope · logit + intercept)`: a slope near 0 is a judge whose scores order nothing.

# %%
judge_columns = ["n_questions", "n_training_questions", "train_seconds", "final_validation_loss", "validation_auc",
                 "verdict", "calibration_slope", "calibration_intercept", "calibration_pairs"]
pd.concat({name: found["folds"][judge_columns] for name, found in tables.items()}, names=["corpus", "fold"]).round(3)

# %% [markdown]
# ## Separation: AUC with intervals over questions and over whole groups
#
# `dense_top1`, the best retrieval-only signal and the learned gate over every retrieval signal, against the judge
# signals and a learned gate over both. The learned gates' scores are cross-fitted too.

# %%
pd.concat({name: found["auc_compared"].set_index("signal") for name, found in tables.items()}, names=["corpus"]).round(3)

# %% [markdown]
# The pooled AUC above pools two or three calibrated judges. Beside it, each fold alone: the AUC of every signal,
# and the median `judge_top1` of answerable and of unanswerable questions. When the medians agree from fold to
# fold, the calibration put the judges on one scale and a pooled threshold means one thing.

# %%
fold_auc = pd.concat({name: found["fold_auc"] for name, found in tables.items()}, names=["corpus"]).reset_index(level=0)
by_fold = fold_auc.pivot_table(index=["corpus", "fold"], columns="signal", values="auc", sort=False)
medians = fold_auc[fold_auc["signal"] == "judge_top1"].set_index(["corpus", "fold"])[
    ["median_answerable", "median_unanswerable"]
].add_prefix("judge_top1 ")
by_fold.join(medians).round(3)

# %% [markdown]
# ROC on SQuAD 2.0 half A, with bootstrap bands for `dense_top1` and `judge_top1` (a signal that is constant there,
# such as `judge_mass` when no passage reaches 0.5, has no curve).

# %%
first = corpora[0]
compared = list(tables[first]["auc_compared"].dropna(subset=["auc"])["signal"])  # a constant signal has no curve
roc = RocDisplay.from_score_table(tables[first]["scores"], compared, directions=directions, n_resamples=n_resamples)
roc.plot(bands=["dense_top1", "judge_top1"], name=first)
save_figure(roc.figure_, f"{figures_dir}/roc");

# %% [markdown]
# What the judge's best probability looks like per slice (answerable against unanswerable questions), with the
# `keep@0.95` threshold fitted on all of them. A calibrated judge that orders little says about the same probability
# for every pair: the share of answering pairs among its own validation pairs. Each cluster below is one fold's
# judge, and the clusters sit apart because those shares differ from fold to fold: calibration put each judge's
# scores on the probability scale, but it cannot make judges that learned nothing agree.

# %%
with figure_style():
    figure, axes = plt.subplots(len(corpora), 1, figsize=(6.4, 3.0 * len(corpora)), layout="constrained")
for ax, name in zip(np.atleast_1d(axes), corpora):
    ScoreDistributionDisplay.from_score_table(tables[name]["scores"], "judge_top1", rules=("keep@0.95",)).plot(
        ax=ax, kind="hist", name=name
    )
save_figure(figure, f"{figures_dir}/judge_distributions");

# %% [markdown]
# ## Held out: what `keep@0.95` refuses
#
# Thresholds fitted on the calibration half (keep 95% of its answerable questions), counted on the other half:
# mean over splits, with the 2.5th and 97.5th percentiles. On the bundled corpora the near-domain slice is where
# retrieval-only gates lose.

# %%
heldout = pd.concat({name: found["heldout_summary"] for name, found in tables.items()}, names=["corpus"])
heldout = heldout.reset_index(level=0).pivot_table(index=["corpus", "gate"], columns="measure", values="mean", sort=False)
heldout.round(3)

# %% [markdown]
# ## Certified: `risk_guarantee@0.2`
#
# Learn-then-Test on the calibration half looks for a threshold whose selective risk (answers without a gold
# passage passed on) is at most 20% with 90% confidence. `certified` is the share of splits where it found one; in
# the others the gate refuses everything, so its coverage is 0 and its selective risk undefined. The other columns
# are means over splits on the held-out half. A gate on `judge_top1` also cuts passages by the judge: it passes on
# only those the judge accepts.

# %%
certified = pd.concat({name: found["certified_summary"] for name, found in tables.items()}, names=["corpus"])
certified.reset_index(level=0).pivot_table(index=["corpus", "gate"], columns="measure", values="mean", sort=False).round(3)

# %% [markdown]
# ## Risk–coverage on SQuAD 2.0 half A

# %%
with figure_style():
    figure, ax = plt.subplots(figsize=(7.6, 4.4), layout="constrained")
RiskCoverageDisplay.from_results(tables[first]["risk_coverage"], tables[first]["risk_coverage_summary"]).plot(
    ax=ax, name=first
)
save_figure(figure, f"{figures_dir}/risk_coverage");

# %% [markdown]
# ## Cost, beside retrieval's
#
# Seconds per question measured side by side in one run (embedding cache and judge cache off), and training seconds
# per fold.

# %%
pd.concat({name: found["cost"] for name, found in tables.items()}, names=["corpus"]).round(4)

# %% [markdown]
# ## What fails
#
# The unanswerable questions the judge is surest are answered, and the answerable ones it is surest are not, with
# the passage it ranked first.

# %%
pd.set_option("display.max_colwidth", 160)
tables[first]["failures"][["kind", "query", "judge_top1", "dense_top1", "passage_text"]]

# %% [markdown]
# ## Conclusion
#
# What the tables above say, corpus by corpus, read from them (`ragcal.study.judge_report.judge_findings`):

# %%
display(Markdown("\n\n".join(
    f"**{name}**\n\n" + "\n".join(f"- {line}" for line in judge_findings(found)) for name, found in tables.items()
)))

# %% [markdown]
# The summary of every corpus, as `ragcal reproduce --judge` wrote it:

# %%
display(Markdown((results_dir / "summary.md").read_text(encoding="utf-8")))
