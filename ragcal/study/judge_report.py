"""The judge study's summary.md for one corpus, and the overview across corpora (``results/judge/summary.md``).

Only formatting: every number comes from the tables :func:`ragcal.study.judge.judge_study` computed.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["LEARNED_RETRIEVAL", "LEARNED_WITH_JUDGE", "judge_findings", "judge_summary", "judge_overview"]

#: Names of the two learned gates of the judge study (cross-fitted columns of its scores table).
LEARNED_RETRIEVAL = "learned retrieval-only"
LEARNED_WITH_JUDGE = "learned retrieval + judge"


def _share(value) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.1f}%"


def _number(value, digits: int = 3) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _interval(row, low: str, high: str, *, share: bool = False) -> str:
    form = _share if share else _number
    return f"[{form(row[low])}, {form(row[high])}]"


def _heldout_rows(summary: pd.DataFrame, gates, measures) -> list[dict]:
    rows = []
    for gate in gates:
        found = summary[summary["gate"] == gate]
        if found.empty:
            continue
        row = {"gate": gate}
        for measure, label in measures.items():
            match = found[found["measure"] == measure]
            if not match.empty:
                values = match.iloc[0]
                row[label] = f"{_share(values['mean'])} [{_share(values['p2_5'])}, {_share(values['p97_5'])}]"
        rows.append(row)
    return rows


def _plain_links(text: str) -> str:
    """A passage as plain text in our Markdown: its links as their text (their targets are paths inside the corpus,
    not pages of ours), and its HTML (an ``<img>`` of the corpus's) shown, not rendered."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", str(text))
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _calibration(row) -> str:
    slope = getattr(row, "calibration_slope", None)
    if slope is None or (isinstance(slope, float) and math.isnan(slope)):
        return "none"
    return f"{slope:.3f}, {row.calibration_intercept:.3f} ({int(row.calibration_pairs)})"


def _medians(part: pd.DataFrame, signal: str) -> dict:
    found = part[part["signal"] == signal]
    if found.empty or "median_answerable" not in found.columns:
        return {}
    row = found.iloc[0]
    return {f"{signal} median (answerable / unanswerable)": f"{_number(row['median_answerable'])} / "
            f"{_number(row['median_unanswerable'])}"}  # fmt: skip


def _reading(row, baseline) -> str:
    """What a pooled AUC row says against chance and against the baseline's row."""
    if math.isnan(row["auc"]):
        return "constant: it orders nothing"
    low, high = row["group_low"], row["group_high"]
    if high < 0.5:
        verdict = "below chance (its interval lies under 0.5)"
    elif low <= 0.5:
        verdict = "no better than chance (its interval reaches 0.5)"
    else:
        verdict = "better than chance"
    if baseline is not None and row["signal"] != baseline["signal"]:
        verdict += (", below" if row["auc"] < baseline["auc"] else ", above") + f" `{baseline['signal']}`"
    return verdict


#: Fold medians of a judge signal within this of each other count as one scale in :func:`judge_findings`.
SAME_SCALE = 0.02


def judge_findings(tables: dict, *, baseline: str = "dense_top1", judge_signal: str = "judge_top1") -> list[str]:
    """The study's conclusions for one corpus, in sentences with their numbers, good and bad.

    Read from the tables :func:`ragcal.study.judge.judge_study` returns (``auc_compared``, ``fold_auc``,
    ``folds``, ``heldout_summary``).
    """
    auc = tables["auc_compared"].set_index("signal", drop=False)
    found = {name: auc.loc[name] for name in (baseline, judge_signal, LEARNED_RETRIEVAL, LEARNED_WITH_JUDGE) if name in auc.index}
    base = found.get(baseline)
    lines = []
    for name, row in found.items():
        lines.append(
            f"`{name}`: AUC {_number(row['auc'])} {_interval(row, 'group_low', 'group_high')} pooled; "
            f"{_reading(row, base)}."
        )
    folds = tables["folds"]
    if "verdict" in folds.columns:
        learned = folds["verdict"].fillna("").str.startswith("better")
        others = ", ".join(sorted(set(folds["verdict"][~learned].fillna("no verdict"))))
        if learned.all():
            said = f"All {len(folds)} fold judges beat chance and the dense cosine"
        elif not learned.any():
            said = f"None of the {len(folds)} fold judges beat both chance and the dense cosine"
        else:
            said = f"{int(learned.sum())} of {len(folds)} fold judges beat chance and the dense cosine"
        lines.append(
            f"{said} on their own validation pairs at the end of training"
            + ("." if learned.all() else f" (the {'others' if learned.any() else 'verdicts'}: {others}).")
        )
    per_fold = tables["fold_auc"]
    judged = per_fold[per_fold["signal"] == judge_signal]["auc"].dropna()
    if not judged.empty:
        lines.append(
            f"Within single folds, `{judge_signal}` reaches AUC {_number(judged.min())} to {_number(judged.max())}."
        )
    signal_rows = per_fold[per_fold["signal"] == judge_signal]
    if {"median_answerable", "median_unanswerable"} <= set(signal_rows.columns) and len(signal_rows) > 1:
        medians = signal_rows[["median_answerable", "median_unanswerable"]].to_numpy(dtype=float)
        low, high = float(np.nanmin(medians)), float(np.nanmax(medians))
        lines.append(
            f"The fold judges' calibrated `{judge_signal}` medians lie between {_number(low)} and {_number(high)}"
            + (
                ": on one scale."
                if high - low <= SAME_SCALE
                else ": calibration did not put them on one scale (a judge that orders little is calibrated to "
                "about its own validation pairs' share of answering pairs, which differs by fold), so the pooled "
                "numbers mix folds; read the per-fold ones."
            )
        )
    if LEARNED_RETRIEVAL in found and LEARNED_WITH_JUDGE in found:
        gain = round(found[LEARNED_WITH_JUDGE]["auc"] - found[LEARNED_RETRIEVAL]["auc"], 3) + 0.0  # no "-0.000"
        lines.append(
            f"Adding the judge signals to the learned gate moves its AUC by {gain:+.3f} "
            f"({_number(found[LEARNED_RETRIEVAL]['auc'])} to {_number(found[LEARNED_WITH_JUDGE]['auc'])})."
        )
    heldout = tables["heldout_summary"]
    refused = heldout[heldout["measure"] == "unanswerable_refused"].set_index("gate")["mean"]
    if baseline in refused.index and judge_signal in refused.index:
        lines.append(
            f"Held out at `keep@0.95`, `{judge_signal}` refuses {_share(refused[judge_signal])} of unanswerable "
            f"questions, `{baseline}` {_share(refused[baseline])}."
        )
    return lines


def _markdown(rows) -> str:
    frame = pd.DataFrame(rows)
    return frame.to_markdown(index=False) if not frame.empty else "(nothing to show)"


def judge_summary(tables: dict, *, spec, config: dict, n_splits: int, compared, judge_signals, n_resamples: int) -> str:
    """Markdown: the corpus, how the judges were trained, and what they buy, with intervals."""
    folds, auc = tables["folds"], tables["auc_compared"]
    training = config["judge_training"]
    grouped = spec.group_column is not None
    unit = "article" if grouped else "question"
    lines = [
        f"# Judge study: {spec.title}",
        "",
        f"{auc['n_questions'].iloc[0]} questions in {auc['n_groups'].iloc[0]} {unit} groups. "
        f"{len(folds)} judges, cross-fitted by {unit}: each fine-tuned from all-MiniLM-L6-v2 "
        f"({training['epochs']} epochs, batch {training['batch_size']}, learning rate {training['learning_rate']}, "
        f"{training['max_length']} tokens, seed {training['random_state']}, "
        f"{training['validation_fraction']:.0%} of its questions held out for validation"
        + (f", at most {training['max_pairs']} pairs" if training.get("max_pairs") else "")
        + f") on the other folds' questions, and scoring only its own fold's, reading the dense top "
        f"{config['judge_depth']}. No question is scored by a judge trained on it "
        "(ragcal.judges checks every fold). Each judge's probabilities are calibrated (Platt scaling) on its "
        "validation questions, a share of its own training questions held out of its gradient steps, so the "
        "folds' scores share one scale before they are pooled. The learned gates are cross-fitted by "
        f"{unit} too; every threshold below is fitted on the calibration half of a split only.",
        "",
        "## What this says",
        "",
        *[f"- {line}" for line in judge_findings(tables)],
        "",
        "## Judges",
        "",
        "Validation: the judge's AUC on its held-out validation pairs at the end of training, and its verdict "
        "against chance and the dense cosine of the same pairs. Calibration: `P = sigmoid(slope * logit + "
        "intercept)`, fitted on those pairs (a slope near 0 is a judge that orders nothing).",
        "",
        _markdown(
            [
                {
                    "fold": row.fold,
                    "questions scored": row.n_questions,
                    "trained on (questions)": row.n_training_questions,
                    "pairs (answering)": f"{row.n_pairs} ({row.n_positive})",
                    "training s": f"{row.train_seconds:.0f}",
                    "final validation loss": _number(row.final_validation_loss),
                    "validation AUC": _number(getattr(row, "validation_auc", None)),
                    "verdict": getattr(row, "verdict", None) or "–",
                    "calibration slope, intercept (pairs)": _calibration(row),
                }
                for row in folds.itertuples()
            ]
        ),
        "",
        "## Separation: AUC, answerable vs unanswerable",
        "",
        f"Intervals: 95% bootstrap over questions and over whole {unit}s ({n_resamples} resamples).",
        "",
        _markdown(
            [
                {
                    "signal": row.signal,
                    "AUC": _number(row.auc),
                    "questions": _interval(row._asdict(), "question_low", "question_high"),
                    f"{unit}s": _interval(row._asdict(), "group_low", "group_high"),
                }
                for row in auc.itertuples()
            ]
        ),
        "",
        "Within each fold (one judge): the AUC, and `judge_top1`'s median over answerable / unanswerable "
        "questions. The pooled AUC above pools the folds' calibrated scores; where the medians differ from fold to "
        "fold, the scales still differ and the pooled numbers mix them.",
        "",
        _markdown(
            [
                {"fold": fold, **{row.signal: _number(row.auc) for row in part.itertuples()},
                 **_medians(part, "judge_top1"), "questions": int(part["n_questions"].max())}
                for fold, part in tables["fold_auc"].groupby("fold", sort=True)
            ]
        ),
        "",
        f"## Held out: `keep@0.95`, over {n_splits} splits by {unit}",
        "",
        "Mean over splits [2.5th, 97.5th percentile]. A learned gate is nested: model and threshold fitted on the "
        "calibration half only.",
        "",
    ]
    slices = [measure for measure in tables["heldout_summary"]["measure"].unique() if measure != "unanswerable_refused"]
    measures = {measure: measure.replace("_", " ") for measure in [*slices, "unanswerable_refused"]}
    lines += [_markdown(_heldout_rows(tables["heldout_summary"], tables["heldout_summary"]["gate"].unique(), measures)), ""]
    lines += [
        "## Certified: `risk_guarantee@0.2` on the calibration half, selective risk on the other",
        "",
        "Learn-then-Test looks for a threshold whose selective risk (answered without a gold passage passed on) "
        "is at most 20% with 90% confidence. *Splits certified* is the share of calibration halves where it found "
        "one; where it found none the gate refuses everything (coverage 0, no selective risk). The other columns "
        "are what the gate does on the held-out half. A gate on `judge_top1` passes on only the passages the "
        "judge accepts.",
        "",
        _markdown(
            _heldout_rows(
                tables["certified_summary"],
                tables["certified_summary"]["gate"].unique(),
                {"certified": "splits certified", "selective_risk": "selective risk", "coverage": "coverage",
                 "answerable_kept": "answerable kept", "unanswerable_refused": "unanswerable refused"},
            )
        ),
        "",
        "## Risk–coverage",
        "",
    ]
    areas = tables["risk_coverage_summary"]
    aurc = areas[areas["measure"] == "aurc"]
    lines += [
        _markdown(
            [
                {"gate": row.name, "AURC (lower is better)": _number(row.value),
                 "questions": _interval(row._asdict(), "low", "high"),
                 f"{unit}s": _interval(row._asdict(), "article_low", "article_high")}
                for row in aurc.itertuples()
            ]
        ),
        "",
        "## Cost",
        "",
        _markdown(
            [
                {"step": row.step,
                 "seconds per question": _number(row.seconds_per_question, 4),
                 "measured on": f"{row.n} {'questions' if 'training' not in row.step else 'folds'}"
                 + (f", mean {row.seconds:.0f} s" if "training" in row.step else "")}
                for row in tables["cost"].itertuples()
            ]
        ),
        "",
        "## What fails",
        "",
        "The unanswerable questions the judge is surest are answered, and the answerable ones it is surest are not "
        "(top judged passage, first 400 characters).",
        "",
    ]
    for row in tables["failures"].itertuples():
        lines.append(
            f"- *{row.kind}* ({row.id}, judge {row.judge_top1:.2f}, dense {row.dense_top1:.2f}): "
            f"**{row.query}** — `{row.passage}`: {_plain_links(row.passage_text)}"
        )
    return "\n".join(lines) + "\n"


def judge_overview(results_root, names, *, titles=None) -> str:
    """``results/judge/summary.md``: the headline numbers of every corpus side by side, read from their folders."""
    results_root = Path(results_root)
    rows = []
    for name in names:
        folder = results_root / name
        auc = pd.read_csv(folder / "auc_compared.csv")
        heldout = pd.read_csv(folder / "heldout_summary.csv")
        for signal in ("dense_top1", LEARNED_RETRIEVAL, "judge_top1", "judge_at_dense_top1", LEARNED_WITH_JUDGE):
            found = auc[auc["signal"] == signal]
            if found.empty:
                continue
            row = found.iloc[0]
            refused = heldout[(heldout["gate"] == signal) & (heldout["measure"] == "unanswerable_refused")]
            near = heldout[(heldout["gate"] == signal) & (heldout["measure"] == "near_domain_refused")]
            kept = heldout[(heldout["gate"] == signal) & (heldout["measure"] == "answerable_kept")]
            rows.append(
                {
                    "corpus": (titles or {}).get(name, name),
                    "gate": signal,
                    "AUC [group interval]": f"{_number(row['auc'])} {_interval(row, 'group_low', 'group_high')}",
                    "keep@0.95: unanswerable refused": _share(refused["mean"].iloc[0]) if not refused.empty else "–",
                    "near-domain refused": _share(near["mean"].iloc[0]) if not near.empty else "–",
                    "answerable kept": _share(kept["mean"].iloc[0]) if not kept.empty else "–",
                }
            )
    return "\n".join(
        [
            "# Judge study: overview",
            "",
            "Held-out means over splits; each corpus's summary.md has the intervals, the certified selective risk, "
            "the risk–coverage areas, the cost and the failures.",
            "",
            "An opt-in study (about an hour of CPU on two cores, cold): `ragcal reproduce --judge` rebuilds "
            "`results/judge/` and `figures/judge/`; a plain `make reproduce` leaves them as they are.",
            "",
            _markdown(rows),
            "",
        ]
    )
