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
# # 04 · Prototype a gating signal
#
# A new signal is one function from a query's retrieval results to a number, and one registration. From then on
# it is a column of the score table, so every table and plot in ragcal takes it like `dense_top1`.
#
# The idea tried here: how far the best chunk stands out from the next nine (`dense_top1` minus the mean of
# ranks 2 to 10). A question the docs cover should have one clearly best passage; an off-topic question gets a
# flat list of weak matches.

# %% tags=["parameters"]
corpus_dir = None
queries_path = None
n_resamples = 2000
figures_dir = None  # None: the figures/ folder of the project, wherever the kernel runs

# %%
from ragcal.metrics import auc_table
from ragcal.plotting import RocDisplay, TradeoffDisplay, save_figure
from ragcal.signals import register_signal
from ragcal.study.notebooks import FIGURES_DIR, notebook_score_table

figures_dir = figures_dir or FIGURES_DIR


# %%
@register_signal("dense_lift", retrievers=("dense",), replace=True)
def dense_lift(results):
    """Cosine of the best chunk minus the mean cosine of ranks 2 to 10."""
    scores = results["dense"].scores
    return float(scores[0] - scores[1:10].mean())


# %%
table = notebook_score_table(queries_path=queries_path, corpus_dir=corpus_dir)
table[["id", "slice", "dense_top1", "dense_lift"]].head()

# %%
aucs = auc_table(table, ["dense_top1", "dense_gap", "dense_lift"], n_resamples=n_resamples)
aucs.round(3)

# %%
roc = RocDisplay.from_score_table(table, ["dense_top1", "dense_gap", "dense_lift"], n_resamples=n_resamples).plot()
save_figure(roc.figure_, f"{figures_dir}/new_signal_roc");

# %%
tradeoff = TradeoffDisplay.from_score_table(table, "dense_lift").plot()
save_figure(tradeoff.figure_, f"{figures_dir}/new_signal_tradeoff");
