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
# # 06 · Two corpora: does what we learned on FastAPI carry over?
#
# Every number so far came from one corpus, the FastAPI docs. This notebook puts the per-corpus results of
# `make reproduce` side by side for FastAPI and the Rust book: how well each signal separates answerable from
# unanswerable questions, and how retrieval and the signals move when the chunking changes.

# %% tags=["parameters"]
results_dir = None  # one folder per corpus, written by `make reproduce`; None: the project's results/
corpora = ["fastapi", "rust-book"]
figures_dir = None  # None: the figures/ folder of the project, wherever the kernel runs

# %%
import pandas as pd

from ragcal.plotting import AucComparisonDisplay, ChunkingSweepDisplay, save_figure
from ragcal.study.notebooks import FIGURES_DIR, RESULTS_DIR

figures_dir = figures_dir or FIGURES_DIR
results_dir = results_dir or RESULTS_DIR

auc_tables = {corpus: pd.read_csv(f"{results_dir}/{corpus}/auc.csv") for corpus in corpora}
chunking_tables = {corpus: pd.read_csv(f"{results_dir}/{corpus}/chunking.csv") for corpus in corpora}

# %% [markdown]
# ## Signal AUCs, side by side
#
# AUC with its 95% bootstrap interval, per comparison (all unanswerable questions, or one slice of them) and corpus.
# "constant" marks a signal that takes one value on every question of that corpus, so it cannot rank them.

# %%
auc = pd.concat(auc_tables, names=["corpus"]).reset_index(level="corpus")
auc["auc [95% CI]"] = (
    auc["auc"].map("{:.3f}".format)
    + " ["
    + auc["ci_low"].map("{:.3f}".format)
    + ", "
    + auc["ci_high"].map("{:.3f}".format)
    + "]"
).where(auc["auc"].notna(), "constant")
auc.pivot_table(index="signal", columns=["comparison", "corpus"], values="auc [95% CI]", aggfunc="first", sort=False)

# %% [markdown]
# Each row is one signal, one marker per corpus. Look for signals whose intervals overlap across corpora (a
# ranking that carries over) and for ones that drop on the second corpus: a signal that only works on FastAPI is a
# property of those docs, not of the method. The dashed line is chance; a signal with no AUC on one corpus says so,
# and one with no AUC on any corpus is left out (`auc_comparison.dropped`).

# %%
auc_comparison = AucComparisonDisplay.from_auc_tables(auc_tables).plot()
save_figure(auc_comparison.figure_, f"{figures_dir}/auc_two_corpora");

# %% [markdown]
# ## Chunking
#
# One row per chunking variant, one column per corpus: the number of chunks and each metric. `chunking.csv` also
# holds each metric's 95% interval and its paired difference against the default variant (the `_diff` columns).

# %%
chunking_sweep = ChunkingSweepDisplay.from_chunking_tables(chunking_tables)
chunking = pd.concat(chunking_tables, names=["corpus"]).reset_index(level="corpus")
chunking.pivot_table(
    index="variant", columns="corpus", values=["chunks", *chunking_sweep.metrics], aggfunc="first", sort=False
).round(3)

# %% [markdown]
# One panel per metric, variants along x with the default (`headings-256`) shaded. A filled marker means the
# paired difference from the default has a 95% interval that excludes 0; a hollow one means this data cannot tell
# them apart. A chunking choice worth changing should look better on both corpora, not just on one.

# %%
chunking_sweep.plot()
save_figure(chunking_sweep.figure_, f"{figures_dir}/chunking_two_corpora");
