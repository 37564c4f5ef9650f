"""The selective-risk part of ``make reproduce``: risk-coverage of every signal, certified gates, guarantees held out.

- ``risk_coverage.csv``: the curve of every signal (a :class:`~ragcal.gates.ThresholdGate`
  on it, passages cut as the gate cuts them) and the held-out operating point
  of every gate;
- ``risk_coverage_summary.csv``: AURC, E-AURC and AUGRC of every signal with
  stratified bootstrap intervals, and the paired difference against
  ``dense_top1`` on the same resamples;
- ``certified_gates.csv``: the Learn-then-Test gates of :func:`certified_fitters`,
  held out per slice like ``gates.csv`` (support outcomes included);
- ``guarantees.csv``: for each certified bound, beside its nominal level, how
  often it held on the held-out half of the same splits, and how often it held
  for the population when the labeled set itself is taken as the population
  (:func:`population_check`);
- ``certificate.csv`` and ``gates/threshold_risk_guarantee02.json``: the
  selective-risk gate fitted on every labeled question, and what was tested.
"""

from __future__ import annotations

import json
import math
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from .._io import atomic_write_text
from ..calibration import parse_rule
from ..gates import (
    certify_chain,
    certify_floor_gap_gate,
    certify_learned_gate,
    certify_threshold_gate,
    heldout_gates,
    save_gate,
    summarize_heldout_gates,
    support_levels,
)
from ..gates.base import decided_arrays
from ..gates.certify import chain_cuts
from ..gates.support import SupportMemo, bar_support, signal_support, support_inputs
from ..metrics.selective import risk_coverage, selective_comparison
from ..score_tables import signal_columns
from ..signals import SIGNALS

__all__ = [
    "SUPPORT_COLUMN",
    "BASELINE_SIGNAL",
    "DELTA",
    "CERTIFIED_GATES",
    "support_inputs",
    "certified_fitters",
    "threshold_gate_support",
    "risk_coverage_tables",
    "guarantee_check",
    "population_check",
    "evaluate_selective",
    "selective_section",
]

#: Column (added to the study's copy of the score table, never written to scores.csv) with the dense support level.
SUPPORT_COLUMN = "support_level_dense"
#: Names of the gates' curves in ``risk_coverage.csv`` (kind ``gate curve``), ranked with the signals: the learned
#: gate's cross-fitted score, and the floor + gap gate at its fitted gap with the floor swept.
LEARNED_CURVE = "learned score (cross-fitted)"
FLOOR_GAP_CURVE = "floor-gap, floor swept"
#: Signal every other one is compared with.
BASELINE_SIGNAL = "dense_top1"
#: 1 - confidence of every certified bound.
DELTA = 0.1
#: Certified gates: name -> (kind, rules).
CERTIFIED_GATES = {
    "threshold risk_guarantee@0.2": ("threshold", ("risk_guarantee@0.2",)),
    "threshold risk_guarantee@0.3": ("threshold", ("risk_guarantee@0.3",)),
    "threshold unsupported_guarantee@0.1": ("threshold", ("unsupported_guarantee@0.1",)),
    "threshold recall@0.9 + false_answer@0.2": ("threshold", ("recall_guarantee@0.9", "false_answer_guarantee@0.2")),
    "floor-gap risk_guarantee@0.2": ("floor_gap", ("risk_guarantee@0.2",)),
    "chain risk_guarantee@0.3": ("chain", ("risk_guarantee@0.3",)),
    "learned risk_guarantee@0.2": ("learned", ("risk_guarantee@0.2",)),
}
#: Calibration draws of :func:`population_check` in ``make reproduce`` (fewer with fewer splits).
POPULATION_DRAWS = 1000
#: The gate fitted on every question and saved, with its certificate.
SAVED_GATE = "threshold risk_guarantee@0.2"


def _certify(table, kind, rules, delta, results=None, gold=None, cuts=None):
    support = table[SUPPORT_COLUMN].to_numpy(dtype=float)
    if kind == "chain":  # the rows of the study's table are its index: pick their passages and gold pages
        rows = table.index
        if cuts is not None:
            cuts = {stage: stage_cuts.take(rows) for stage, stage_cuts in cuts.items()}
        return certify_chain(
            table, list(rules), results=[results[row] for row in rows], gold=[gold[row] for row in rows], delta=delta,
            cuts=cuts,
        )
    if kind == "threshold":
        return certify_threshold_gate(table, BASELINE_SIGNAL, list(rules), support=support, delta=delta)
    if kind == "floor_gap":
        return certify_floor_gap_gate(table, list(rules), support=support, delta=delta)
    return certify_learned_gate(table, list(rules), support=support, delta=delta)


def _fit(table, kind, rules, delta, results, gold, cuts=None):
    return _certify(table, kind, rules, delta, results, gold, cuts)[0]


def certified_fitters(results, gold, delta: float = DELTA) -> dict:
    """``{gate name: fit(table) -> Gate}``; the table needs :data:`SUPPORT_COLUMN`, and its index names the rows
    of ``results`` and ``gold`` (per-row retrieval results and gold pages, for the chain's stages).

    The chain's stage cuts (:func:`ragcal.gates.certify.chain_cuts`) are read from the results once, here, and
    taken at each table's rows: every split and draw certifies the chain on a subset of the same questions.
    """
    cuts = chain_cuts(results, gold)
    return {
        name: partial(_fit, kind=kind, rules=rules, delta=delta, results=results, gold=gold,
                      cuts=cuts if kind == "chain" else None)
        for name, (kind, rules) in CERTIFIED_GATES.items()
    }


def _signals(table):
    return [name for name in signal_columns(table) if name in SIGNALS and table[name].notna().any()]


def threshold_gate_support(results, gold, name: str) -> np.ndarray:
    """Support level per question of a :class:`ThresholdGate` on signal ``name``, as its risk-coverage curve reads it.

    :func:`ragcal.gates.support.signal_support`; for a signal where lower
    means answerable only the top passage is passed on, so the level is
    whether it is from a gold page, at any threshold.
    """
    levels = signal_support(results, gold, name)
    if not SIGNALS[name].higher_is_answerable:
        levels = levels > -math.inf
    return levels


def risk_coverage_tables(table, results, gold, *, n_resamples: int = 2000, random_state=0):
    """Curves and areas (with intervals and paired differences against :data:`BASELINE_SIGNAL`) of every signal
    and of the gates that order questions (:data:`LEARNED_CURVE`, :data:`FLOOR_GAP_CURVE`).

    Returns
    -------
    curves : DataFrame
        ``kind, name, threshold, answered, supported, unsupported, coverage, risk, generalized_risk``; kind
        ``signal``, or ``gate curve`` for :data:`LEARNED_CURVE` and :data:`FLOOR_GAP_CURVE`.
    summary : DataFrame
        ``name, measure, value, low, high, difference, difference_low, difference_high, lower, rank`` (rank by AURC).
    """
    strata = table["slice"].to_numpy()
    curves = []
    inputs = {}
    for name in _signals(table):
        higher = SIGNALS[name].higher_is_answerable
        levels = threshold_gate_support(results, gold, name)
        scores = table[name].to_numpy(dtype=float)
        inputs[name] = (scores, levels, higher)
        curves.append(risk_coverage(scores, levels, higher_is_answerable=higher).assign(kind="signal", name=name))
    floor_gap = _floor_gap_curve_inputs(table, results, gold)
    inputs[FLOOR_GAP_CURVE] = floor_gap
    curves.append(risk_coverage(*floor_gap[:2]).assign(kind="gate curve", name=FLOOR_GAP_CURVE))
    learned = _learned_curve_inputs(table, results, gold, random_state=random_state)
    if learned is not None:
        inputs[LEARNED_CURVE] = learned
        curves.append(risk_coverage(*learned[:2]).assign(kind="gate curve", name=LEARNED_CURVE))
    summary = selective_comparison(
        inputs, baseline=BASELINE_SIGNAL, strata=strata, n_resamples=n_resamples, random_state=random_state
    )
    aurc = summary[summary["measure"] == "aurc"].set_index("name")["value"]
    summary["rank"] = summary["name"].map(aurc.rank(method="min").astype(int))
    summary = summary.sort_values(["rank", "name", "measure"], kind="stable").reset_index(drop=True)
    columns = ["name", "measure", "value", "low", "high", "difference", "difference_low", "difference_high", "lower", "rank"]
    curves = pd.concat(curves, ignore_index=True)
    front = ["kind", "name"]
    return curves[front + [c for c in curves.columns if c not in front]], summary[columns]


def _floor_gap_curve_inputs(table, results, gold):
    """Scores and support of the floor + gap family at the fitted gap: every floor, one curve.

    The gap is ``fit_floor_gap_gate``'s (``keep@0.95``) on the whole table; with it
    fixed, the gate at floor ``f`` answers where :func:`ragcal.gates.floor_gap.floor_gap_order`
    is at least ``f`` and passes on the dense passages clearing ``f``, so the
    dense support level decides support.
    """
    from ..gates import fit_floor_gap_gate
    from ..gates.floor_gap import floor_gap_order

    gap = fit_floor_gap_gate(table, rule="keep@0.95").min_gap
    scores = floor_gap_order(table["dense_top1"], table["dense_top2"], gap)
    return scores, support_levels(results, gold, "dense"), True


def _learned_curve_inputs(table, results, gold, *, random_state=0):
    """Scores and support of the learned gate's ordering: cross-fitted scores, passages cut at its cosine bar.

    Each row's learned score comes from a model fitted on the other folds
    (:func:`ragcal.gates.learned.crossfit_scores`), so the curve does not
    rank questions by a model that saw their labels. The passages are the
    dense ones clearing the gate's cosine bar (``keep@0.95`` of ``dense_top1``
    on the whole table, as the learned gate of the summaries), else the top one.
    None when the table lacks a default learned signal.
    """
    from ..calibration import fit_threshold
    from ..gates import DEFAULT_LEARNED_SIGNALS
    from ..gates.learned import crossfit_scores

    if any(name not in table.columns or table[name].isna().all() for name in DEFAULT_LEARNED_SIGNALS):
        return None
    scores = crossfit_scores(table, DEFAULT_LEARNED_SIGNALS, random_state=random_state)
    bar = fit_threshold("keep@0.95", table["dense_top1"], table["answerable"])
    gold_passed = bar_support(support_levels(results, gold, "dense"), table["dense_top1"], bar)
    return np.asarray(scores, dtype=float), gold_passed, True


def _held_out_rate(heldout, slice_name, outcome):
    selected = heldout[(heldout["slice"] == slice_name) & (heldout["outcome"] == outcome)]
    return selected.assign(rate=selected["k"] / selected["n"].where(selected["n"] > 0)).set_index(["gate", "split"])[
        "rate"
    ]


def _bound_held(name, value, rate):
    """Whether an observed rate is within a rule's bound; no answers means no unsupported answer."""
    if name == "recall_guarantee":
        return rate >= value
    return pd.isna(rate) | (rate <= value)


def guarantee_check(heldout: pd.DataFrame, *, delta: float = DELTA) -> pd.DataFrame:
    """How often each certified bound held on the held-out half of each split.

    Learn-then-Test bounds the chance that a **certified** gate breaks the
    bound: P(certified and broken) <= delta. ``held`` is one minus the share
    of splits where that happened (a split where nothing was certified
    refuses everything and claims nothing). ``held_when_certified`` conditions
    on the splits that certified something, which is not what is guaranteed:
    when few splits certify, those are the ones whose calibration half looked
    good, and with a finite pool of questions the other half then tends to
    look worse. A held-out half is itself a sample, so even a gate whose
    population rate is within the bound is exceeded on some halves by chance;
    :func:`population_check` has neither problem.

    Returns
    -------
    DataFrame
        ``gate, rule, bound, nominal, held, held_when_certified, certified_splits, splits``.
    """
    answered = _held_out_rate(heldout, "all questions", "answered")
    rates = {
        "recall_guarantee": _held_out_rate(heldout, "answerable", "answered"),
        "false_answer_guarantee": _held_out_rate(heldout, "all unanswerable", "answered"),
        "risk_guarantee": _held_out_rate(heldout, "all questions", "selective_risk"),
        "unsupported_guarantee": _held_out_rate(heldout, "all questions", "unsupported"),
    }
    rows = []
    present = set(heldout["gate"].unique())
    for gate, (_, rules) in CERTIFIED_GATES.items():
        if gate not in present:
            continue
        certified = answered.loc[gate] > 0  # nothing certified: the gate refuses everything
        for rule in rules:
            name, value = parse_rule(rule)
            held = _bound_held(name, value, rates[name].loc[gate]) | ~certified
            rows.append(
                {
                    "gate": gate,
                    "rule": rule,
                    "bound": value,
                    "nominal": 1 - delta,
                    "held": float(held.mean()),
                    "held_when_certified": float(held[certified].mean()) if certified.any() else math.nan,
                    "certified_splits": int(certified.sum()),
                    "splits": int(certified.size),
                }
            )
    return pd.DataFrame(rows)


def population_check(table, results, gold, *, n_draws: int = 200, size: int | None = None, delta: float = DELTA,
                     random_state=0) -> pd.DataFrame:
    """Each certified bound checked where the population is known: the labeled set itself.

    Take the labeled questions as the population (each equally likely).
    Draw a calibration set of ``size`` questions from it with replacement
    (independent draws, as Learn-then-Test assumes; half the set by default,
    as in the held-out splits), certify every gate of :data:`CERTIFIED_GATES`
    on it, and compute the certified gate's rate on the whole population
    exactly. The guarantee says that a certified gate breaks its bound in at
    most ``delta`` of the draws; ``held`` is one minus the share of draws
    where it did.

    Returns
    -------
    DataFrame
        ``gate, rule, bound, nominal, held_population, certified_draws, draws``.
    """
    table = table.reset_index(drop=True)
    size = len(table) // 2 if size is None else size
    answerable = table["answerable"].to_numpy(dtype=bool)
    fitters = certified_fitters(results, gold, delta=delta)
    rng = np.random.default_rng(random_state)
    broken = {(gate, rule): 0 for gate, (_, rules) in CERTIFIED_GATES.items() for rule in rules}
    certified_draws = dict.fromkeys(CERTIFIED_GATES, 0)
    population = {}  # a gate fitted again on another draw decides the population as before: computed once
    support = SupportMemo(results, gold)
    every_row = np.arange(len(table))

    def decide_population(gate):
        key = json.dumps(gate.to_dict(), sort_keys=True)
        if key not in population:
            decisions = decided_arrays(gate, table)
            answered = decisions.action != "refuse"
            supported = support(gate, decisions, every_row) if answered.any() else None
            population[key] = answered, supported
        return population[key]

    for _ in range(n_draws):
        drawn = table.iloc[rng.integers(0, len(table), size)]
        for gate_name, fit in fitters.items():
            answered, supported = decide_population(fit(drawn))
            if not answered.any():
                continue  # nothing certified: refuses everything, claims nothing
            certified_draws[gate_name] += 1
            unsupported = answered & ~supported
            rates = {
                "recall_guarantee": answered[answerable].mean(),
                "false_answer_guarantee": answered[~answerable].mean(),
                "risk_guarantee": unsupported.sum() / answered.sum(),
                "unsupported_guarantee": unsupported.mean(),
            }
            for rule in CERTIFIED_GATES[gate_name][1]:
                name, value = parse_rule(rule)
                broken[gate_name, rule] += not _bound_held(name, value, rates[name])
    return pd.DataFrame(
        [
            {
                "gate": gate,
                "rule": rule,
                "bound": parse_rule(rule)[1],
                "nominal": 1 - delta,
                "held_population": 1 - count / n_draws if n_draws else math.nan,
                "certified_draws": certified_draws[gate],
                "draws": n_draws,
            }
            for (gate, rule), count in broken.items()
        ]
    )


def _gate_points(heldout_summary: pd.DataFrame) -> pd.DataFrame:
    """Held-out coverage and selective risk of each gate (mean, 2.5th and 97.5th percentile over splits)."""
    rows = []
    for gate, group in heldout_summary.groupby("gate", sort=False):
        coverage = group[(group["slice"] == "all questions") & (group["outcome"] == "answered")]
        risk = group[(group["slice"] == "all questions") & (group["outcome"] == "selective_risk")]
        if coverage.empty or risk.empty:
            continue
        rows.append(
            {
                "kind": "gate",
                "name": gate,
                "coverage": float(coverage["mean"].iloc[0]),
                "coverage_low": float(coverage["p2.5"].iloc[0]),
                "coverage_high": float(coverage["p97.5"].iloc[0]),
                "risk": float(risk["mean"].iloc[0]),
                "risk_low": float(risk["p2.5"].iloc[0]),
                "risk_high": float(risk["p97.5"].iloc[0]),
            }
        )
    return pd.DataFrame(rows)


def evaluate_selective(
    table: pd.DataFrame,
    queries: pd.DataFrame,
    retrieved: dict,
    results_dir,
    *,
    gate_heldout: pd.DataFrame,
    provenance: dict,
    n_splits: int = 1000,
    n_resamples: int = 2000,
    random_state=0,
    log=print,
) -> dict:
    """Write the files of the module docstring; return their tables.

    ``gate_heldout`` is :func:`ragcal.gates.heldout_gates` of the study's other
    gates with support outcomes: their operating points join the curves.
    """
    results_dir = Path(results_dir)
    results, gold = support_inputs(queries, retrieved)
    table = table.reset_index(drop=True).assign(**{SUPPORT_COLUMN: support_levels(results, gold, "dense")})
    curves, summary = risk_coverage_tables(table, results, gold, n_resamples=n_resamples, random_state=random_state)
    certified_heldout = heldout_gates(
        table, certified_fitters(results, gold), n_splits=n_splits, random_state=random_state, results=results,
        gold=gold,
    )
    certified = summarize_heldout_gates(certified_heldout)
    points = _gate_points(pd.concat([summarize_heldout_gates(gate_heldout), certified], ignore_index=True))
    curves = pd.concat([curves, points], ignore_index=True)
    population = population_check(
        table, results, gold, n_draws=min(n_splits, POPULATION_DRAWS), random_state=random_state
    )
    guarantees = guarantee_check(certified_heldout).merge(
        population[["gate", "rule", "held_population", "certified_draws", "draws"]], on=["gate", "rule"]
    )
    kind, rules = CERTIFIED_GATES[SAVED_GATE]
    gate, certificate = _certify(table, kind, rules, DELTA)
    save_gate(
        results_dir / "gates" / "threshold_risk_guarantee02.json",
        gate,
        rule=" + ".join(rules),
        fitted={
            "n_calibration": len(table),
            "note": "fitted on every labeled question, for use",
            "certificate": certificate.summary(),
        },
        provenance=provenance,
    )
    for name, frame in (
        ("risk_coverage", curves),
        ("risk_coverage_summary", summary),
        ("certified_gates", certified),
        ("guarantees", guarantees),
        ("certificate", certificate.candidates),
    ):
        atomic_write_text(results_dir / f"{name}.csv", frame.to_csv(index=False, float_format="%.4f"))
        log(f"wrote {results_dir / name}.csv")
    return {
        "risk_coverage": curves,
        "risk_coverage_summary": summary,
        "certified_gates": certified,
        "certified_heldout": certified_heldout,
        "guarantees": guarantees,
        "certificate": certificate,
        "certified_gate": gate,
        "certified_gate_json": json.dumps(gate.to_dict()),
    }


def _cell(value, low, high, percent=False):
    if pd.isna(value):
        return "n/a"
    if percent:
        return f"{value:.0%} ({low:.0%} to {high:.0%})"
    return f"{value:.3f} [{low:.3f}, {high:.3f}]"


def selective_section(
    summary: pd.DataFrame,
    curves: pd.DataFrame,
    certified: pd.DataFrame,
    guarantees: pd.DataFrame,
    *,
    certificate,
    n_splits: int,
    gate_json: str,
) -> str:
    """Markdown: signals ranked by AURC with intervals, gates' operating points, certified gates and their checks."""
    wide = summary.pivot(index="name", columns="measure")
    order = summary.drop_duplicates("name").sort_values("rank")["name"]
    rows = []
    for name in order:
        row = wide.loc[name]
        rows.append(
            {
                "rank": int(row[("rank", "aurc")]),
                "signal or gate": name,
                "AURC [95% CI]": _cell(row[("value", "aurc")], row[("low", "aurc")], row[("high", "aurc")]),
                "E-AURC": _cell(row[("value", "e_aurc")], row[("low", "e_aurc")], row[("high", "e_aurc")]),
                "AUGRC": _cell(row[("value", "augrc")], row[("low", "augrc")], row[("high", "augrc")]),
                f"AURC minus {BASELINE_SIGNAL}": _cell(
                    row[("difference", "aurc")], row[("difference_low", "aurc")], row[("difference_high", "aurc")]
                ),
            }
        )
    points = curves[curves["kind"] == "gate"]
    point_rows = [
        {
            "gate": point.name,
            "coverage (all questions)": _cell(point.coverage, point.coverage_low, point.coverage_high, percent=True),
            "selective risk": _cell(point.risk, point.risk_low, point.risk_high, percent=True),
        }
        for point in points.itertuples()
    ]
    check_rows = [
        {
            "gate": row.gate,
            "bound": row.rule,
            "nominal": f"{row.nominal:.0%}",
            "certified in": f"{row.certified_splits} of {row.splits} splits",
            "held, held-out halves": f"{row.held:.1%}",
            "of which certified": "n/a" if pd.isna(row.held_when_certified) else f"{row.held_when_certified:.1%}",
            f"held for the population ({row.draws} draws)": f"{row.held_population:.1%}",
            "certified in draws": f"{row.certified_draws} of {row.draws}",
        }
        for row in guarantees.itertuples()
    ]
    lines = [
        "## Selective risk: supported answers and risk-coverage",
        "",
        "An answer is *supported* when the question is answerable and a passage passed on comes from a gold page. "
        "*Coverage* is the share of all questions answered; *selective risk* the share of answers that are "
        "unsupported. Each signal's curve is a `ThresholdGate` on it swept over every distinct score, passages cut "
        "as that gate cuts them (`results/risk_coverage.csv`). Areas (lower is better): AURC (Geifman & El-Yaniv "
        "2017), E-AURC (AURC minus that of the oracle ordering of the same questions) and AUGRC (Traub et al. "
        "2024); 95% stratified bootstrap intervals (2,000 resamples by slice, seed 0), and the paired difference "
        f"against `{BASELINE_SIGNAL}` on the same resamples. In-sample: no threshold is fitted here. "
        f"`{LEARNED_CURVE}` is the learned gate's ordering: each question scored by a model fitted on the other "
        f"four of five folds, its passages cut at the learned gate's cosine bar. `{FLOOR_GAP_CURVE}` is the floor + "
        "gap gate at its fitted gap (`keep@0.95` on every question) with the floor swept: with the gap fixed, a "
        "lower floor only adds answers, so its gates form one curve. The chain's three bars order no questions, so "
        "it has no curve and no area: it is a held-out point below.",
        "",
        pd.DataFrame(rows).to_markdown(index=False),
        "",
        f"Gates at their fitted operating point, held out over {n_splits:,} splits (mean, 2.5th to 97.5th "
        "percentile over splits). They are single points, so they carry no area.",
        "",
        pd.DataFrame(point_rows).to_markdown(index=False),
        "",
        "### Certified gates (Learn-then-Test)",
        "",
        f"Each gate is certified on the calibration half of every split (delta {DELTA}) and counted on the other "
        "half. Learn-then-Test promises that a certified gate breaks its bound with probability at most delta "
        "over the calibration draw; when nothing is certified the gate refuses everything and claims nothing. "
        "*Held, held-out halves* is one minus the share of splits in which a certified gate broke its bound on "
        "the held-out half, which is the quantity guaranteed (at least 90%), except that a half of about 95 "
        "questions is itself a sample, so a gate whose population rate is within the bound still exceeds it on "
        "some halves by chance. *Of which certified* conditions on the splits that certified something, which is "
        "not guaranteed: when few splits certify, they are the ones whose calibration half looked good, and with "
        "a finite pool the other half then tends to look worse. *Held for the population* takes the labeled set "
        "itself as the population: calibration sets of half its size are drawn from it with replacement "
        "(independent draws, as the guarantee assumes), and each certified gate's rate on the whole set is then "
        "exact, with no second sample in the way. The learned gate fits its model on half of each calibration "
        "set and certifies on the other half; the chain certifies its three stage bars together.",
        "",
        pd.DataFrame(check_rows).to_markdown(index=False),
        "",
        f"Fitted on every labeled question and saved as `gates/threshold_risk_guarantee02.json`: `{gate_json}`.",
        "",
        "```",
        certificate.summary(),
        "```",
        "",
    ]
    return "\n".join(lines)
