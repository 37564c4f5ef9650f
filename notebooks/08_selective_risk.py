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
# # 08 · Selective risk: supported answers, risk-coverage, and a certified gate
#
# Answered and refused shares do not say whether an answer can be trusted. An answer is *supported* when the question
# is answerable and a passage passed on comes from a gold page; anything else the gate answers is *unsupported*: an
# unanswerable question, or an answerable one answered from the wrong pages. *Selective risk* is unsupported answers
# over answers, *coverage* the share of questions answered. This notebook draws the risk-coverage curves of the main
# signals with the gates as held-out points on both corpora, then fits a gate whose selective risk Learn-then-Test
# certifies, saves it, and shows what was tested.

# %% tags=["parameters"]
results_dir = None  # one folder per corpus, written by `make reproduce`; None: the project's results/
corpora = ["fastapi", "rust-book"]
signals = ["dense_top1", "dense_top2", "bm25_top1_stopwords", "rrf_top1"]
gates = ["threshold keep@0.95", "floor-gap keep@0.95", "chain keep@0.95", "threshold risk_guarantee@0.3"]
corpus_dir = None  # the corpus the certified gate is fitted on; None: the bundled FastAPI docs
queries_path = None  # its labeled queries; None: data/queries/fastapi.csv
rules = ["risk_guarantee@0.3"]  # one bound, or several certified jointly
figures_dir = None  # None: the figures/ folder of the project, wherever the kernel runs

# %%
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from ragcal.gates import certify_threshold_gate, load_gate, save_gate, support_levels
from ragcal.plotting import RiskCoverageDisplay, figure_style, save_figure
from ragcal.study.notebooks import FIGURES_DIR, RESULTS_DIR, notebook_queries, notebook_scored_index
from ragcal.study.selective import support_inputs

figures_dir = figures_dir or FIGURES_DIR
results_dir = results_dir or RESULTS_DIR

curves = {corpus: pd.read_csv(f"{results_dir}/{corpus}/risk_coverage.csv") for corpus in corpora}
summaries = {corpus: pd.read_csv(f"{results_dir}/{corpus}/risk_coverage_summary.csv") for corpus in corpora}

# %% [markdown]
# ## Signals ranked by AURC
#
# Area under the risk-coverage curve (lower is better), with 95% stratified bootstrap intervals, and each signal's
# paired difference from `dense_top1` on the same resamples. E-AURC subtracts the area of the oracle ordering of the
# same questions; AUGRC counts unsupported answers over all questions instead of over answers.

# %%
summary = pd.concat(summaries, names=["corpus"]).reset_index(level="corpus")
summary["cell"] = summary.apply(lambda row: f"{row['value']:.3f} [{row['low']:.3f}, {row['high']:.3f}]", axis=1)
ranked = summary.pivot_table(index="name", columns=["corpus", "measure"], values="cell", aggfunc="first")
ranked.loc[summaries[corpora[0]].drop_duplicates("name")["name"]].head(10)

# %% [markdown]
# ## Risk-coverage on both corpora
#
# Each curve is a `ThresholdGate` on the signal swept over every distinct score, with passages cut as the gate cuts
# them. Each point is a gate at its fitted operating point, held out over the 1,000 splits (bars: 2.5th to 97.5th
# percentile over splits). A point below a curve at the same coverage passes on fewer unsupported answers than that
# signal's threshold would.

# %%
with figure_style():
    figure, axes = plt.subplots(1, len(corpora), figsize=(5.2 * len(corpora), 4.4), layout="constrained", sharey=True)
displays = {}
for ax, corpus in zip(axes, corpora):
    displays[corpus] = RiskCoverageDisplay.from_results(
        curves[corpus], summaries[corpus], signals=signals, gates=gates
    ).plot(ax=ax, name=corpus)
save_figure(figure, f"{figures_dir}/risk_coverage");

# %% [markdown]
# ## A gate with a certified selective risk
#
# Learn-then-Test tests every candidate threshold and certifies those whose selective risk is below the bound with
# probability at least 1 - delta over the draw of the labeled questions (Holm's correction across candidates; see
# `docs/calibration.md`). Support levels come from the retrieval runs and the gold pages. Here the gate is fitted on
# every labeled question, for use; `results/<corpus>/guarantees.csv` checks the same procedure held out.

# %%
table, index, retrieved = notebook_scored_index(queries_path=queries_path, corpus_dir=corpus_dir)
queries = notebook_queries(index, queries_path=queries_path, corpus_dir=corpus_dir)
results, gold = support_inputs(queries, retrieved)
support = support_levels(results, gold, "dense")  # best gold-passage cosine among the top 10, per question
gate, certificate = certify_threshold_gate(table, "dense_top1", rules, support=support)
print(certificate.summary())

# %% [markdown]
# The certificate: every candidate tested (strictest first), how many calibration questions it answers, the
# unsupported answers among them, the binomial p-value of "selective risk above the bound", and whether Holm's
# procedure certified it. The chosen one answers the most questions among the certified.

# %%
tested = certificate.candidates
tested[tested["certified"] | tested["chosen"] | (tested.index % 5 == 0)].round(4)

# %% [markdown]
# Saved, the gate remembers the model and chunking it was fitted with, and the certificate goes with it.

# %%
folder = Path(tempfile.mkdtemp())
path = save_gate(
    folder / "certified.json",
    gate,
    rule=" + ".join(rules),
    fitted={"n_calibration": len(table), "certificate": certificate.summary()},
    provenance=index.config,
)
loaded = load_gate(path, index=index)
loaded.decide_table(table)["action"].value_counts()
