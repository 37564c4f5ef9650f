"""How one calibrated gate behaves for callers who see different parts of the corpus.

The study behind the "Access control" section of the FastAPI summary:

1. give the bundled FastAPI docs a demonstration access map
   (``data/access/fastapi-demo.csv``: some pages ``restricted``, the
   ``advanced/`` and ``deployment/`` folders ``internal``, the rest public);
2. score the labeled set once per access level, each time on the index view
   that caller may see (:meth:`ragcal.retrieval.index.RetrievalIndex.restrict`);
3. on each of many stratified half splits, fit the threshold on the
   calibration half of the **full-access** table (the gate a team would
   calibrate), and apply it to the evaluation half at every level.

An answerable question whose gold pages are all hidden from a caller is,
for that caller, unanswerable: the section reports it as its own slice,
``answerable, gold hidden``, and a good gate refuses it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..calibration import fit_threshold, split_by_slice
from ..scoring import score_table

__all__ = ["ACCESS_SETS", "DEMO_MAP_NAME", "access_score_tables", "visibility_slices", "access_gating"]

#: The callers of the demonstration, least privileged first.
ACCESS_SETS = {
    "public": ("public",),
    "public+internal": ("public", "internal"),
    "all": ("public", "internal", "restricted"),
}
#: The demonstration map, relative to the data folder.
DEMO_MAP_NAME = "access/fastapi-demo.csv"
GOLD_VISIBLE = "answerable, gold visible"
GOLD_HIDDEN = "answerable, gold hidden"


def access_score_tables(index, queries: pd.DataFrame, access_sets=None) -> dict:
    """``{label: (score table, view)}``: the labeled set scored on what each caller may see."""
    tables = {}
    for label, levels in (access_sets or ACCESS_SETS).items():
        view = index.restrict(levels)
        tables[label] = (score_table(queries, view.retrieve(queries["query"])), view)
    return tables


def visibility_slices(queries: pd.DataFrame, visible_pages) -> np.ndarray:
    """The query slices, with answerable ones split by whether any gold page is visible."""
    visible_pages = set(visible_pages)
    return np.array(
        [
            (GOLD_VISIBLE if set(row.gold) & visible_pages else GOLD_HIDDEN) if row.answerable else row.slice
            for row in queries.itertuples()
        ],
        dtype=object,
    )


def access_gating(
    tables: dict,
    queries: pd.DataFrame,
    *,
    signal: str = "dense_top1",
    rule: str = "keep@0.95",
    fitted_on: str = "all",
    n_splits: int = 1000,
    random_state: int = 0,
) -> pd.DataFrame:
    """Held-out answer rates per access level and visibility slice.

    Parameters
    ----------
    tables : dict
        From :func:`access_score_tables`.
    queries : DataFrame
        The labeled set, in the tables' row order (``gold`` as lists).
    signal, rule : str
        The gate: one threshold on ``signal`` fitted with ``rule``.
    fitted_on : str, default="all"
        The access level whose table the threshold is fitted on.
    n_splits : int, default=1000
        Stratified half splits (the same seeds as the threshold study).

    Returns
    -------
    DataFrame
        One row per (access, slice): ``n`` (questions in the slice),
        ``answered`` (mean share answered on evaluation halves), ``p5`` and
        ``p95`` (its 5th and 95th percentiles over splits), ``n_pages``
        visible, and the mean fitted ``threshold``.
    """
    reference = tables[fitted_on][0]
    slices = reference["slice"].to_numpy()
    answerable = reference["answerable"].to_numpy(dtype=bool)
    fitted_scores = reference[signal].to_numpy(dtype=float)
    masks = [split_by_slice(slices, random_state=random_state + split) for split in range(n_splits)]
    thresholds = np.array(
        [fit_threshold(rule, fitted_scores[mask], answerable[mask]) for mask in masks], dtype=float
    )
    rows = []
    for label, (table, view) in tables.items():
        refined = visibility_slices(queries, {chunk.doc_path for chunk in view.chunks})
        scores = table[signal].to_numpy(dtype=float)
        for name in pd.unique(refined):
            member = refined == name
            shares = []
            for mask, threshold in zip(masks, thresholds):
                evaluated = member & ~mask
                if evaluated.any():
                    shares.append(float(np.mean(scores[evaluated] >= threshold)))
            shares = np.array(shares)
            rows.append(
                {
                    "access": label,
                    "slice": name,
                    "n": int(member.sum()),
                    "answered": float(shares.mean()) if shares.size else np.nan,
                    "p5": float(np.percentile(shares, 5)) if shares.size else np.nan,
                    "p95": float(np.percentile(shares, 95)) if shares.size else np.nan,
                    "n_pages": len({chunk.doc_path for chunk in view.chunks}),
                    "threshold": float(np.mean(thresholds)),
                }
            )
    return pd.DataFrame(rows)


def access_section(frame: pd.DataFrame, *, n_splits: int, rule: str = "keep@0.95", signal: str = "dense_top1") -> str:
    """Markdown for the summary: answer rates per access level and visibility slice."""
    from ..formatting import format_interval

    order = list(dict.fromkeys(frame["access"]))
    slices = [GOLD_VISIBLE, GOLD_HIDDEN] + [name for name in dict.fromkeys(frame["slice"]) if name not in (GOLD_VISIBLE, GOLD_HIDDEN)]
    rows = []
    for access in order:
        part = frame[frame["access"] == access].set_index("slice")
        row = {"caller sees": f"{access} ({part['n_pages'].iloc[0]} pages)"}
        for name in slices:
            row[name] = (
                f"{format_interval(100 * part.loc[name, 'answered'], 100 * part.loc[name, 'p5'], 100 * part.loc[name, 'p95'], digits=0)}"
                f" (n={part.loc[name, 'n']})"
                if name in part.index
                else "–"
            )
        rows.append(row)
    hidden = frame[(frame["slice"] == GOLD_HIDDEN) & (frame["access"] == order[0])]
    near = frame[(frame["slice"] == "near-domain") & (frame["access"] == order[0])]
    lines = [
        "## Access control",
        "",
        "A made-up access map (`data/access/fastapi-demo.csv`) marks `advanced/security/`, `advanced/settings.md`, "
        "`deployment/https.md` and `deployment/docker.md` restricted and the rest of `advanced/` and `deployment/` "
        "internal. Each caller's questions are retrieved and scored on only the pages that caller may see (dense "
        "index, BM25 statistics, fusion and signals alike), so no restricted page can make a question look "
        "answerable. An answerable question whose gold pages are all hidden is, for that caller, unanswerable: it "
        "gets its own column.",
        "",
        f"The gate is one `{signal}` threshold fitted with `{rule}` on the calibration half of the full-access "
        f"table (mean threshold {frame['threshold'].iloc[0]:.3f}) and applied at every level to the other half; "
        f"% answered, mean with the 5th to 95th percentile over {n_splits:,} stratified half splits.",
        "",
        pd.DataFrame(rows).to_markdown(index=False),
        "",
        "A cell of n questions is scored on about n/2 of them per split, so cells of a few questions move in large "
        "steps; when most splits agree and a few do not, the mean can even lie outside the 5th-95th percentile range.",
        "",
    ]
    if len(hidden) and len(near):
        h, nd = hidden.iloc[0], near.iloc[0]
        lines += [
            f"What this shows: for a `{order[0]}` caller, the gate still answers {100 * h['answered']:.0f}% of the "
            f"questions whose pages it cannot see, against {100 * nd['answered']:.0f}% of near-domain questions. A "
            "cosine threshold cannot tell that the best page is hidden: it answers from the closest visible page, "
            "often a tutorial page on the same feature. Nothing restricted leaks (the passages come from the "
            "caller's view only, which the property tests check), but whether such an answer is good enough is a "
            "question for the labeled set of each access level, and a team that serves several levels should "
            "calibrate and check each one.",
            "",
        ]
    return "\n".join(lines)
