"""Learn-then-Test for each kind of gate: the candidates a gate offers, and the gate the certificate chooses.

The multiple testing itself (binomial p-values, fixed sequence, Bonferroni,
Holm, the :class:`~ragcal.calibration.ltt.Certificate`) lives in
:mod:`ragcal.calibration.ltt`; each function here builds one gate family's
candidates (thresholds, (floor, gap) pairs, a learned gate's threshold, the
chain's three stage bars), says what each candidate answers and which answers
are supported, and turns the chosen candidate back into a gate. When nothing
is certified the gate refuses everything and the certificate says so.

The gate's parameters are the chosen candidate's, placed midway between the
boundary calibration value and the next one
(:func:`ragcal.calibration.rules.place_threshold`,
:func:`ragcal.gates.fit.place_floor_gap`): the placed gate answers, and passes
on, exactly what the chosen candidate does on every calibration question, so
the certificate (computed from those decisions, never from a threshold value)
holds for it unchanged. The certificate's table keeps the candidates as tested.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..calibration.ltt import certify_candidates, quantile_grid, resolve_method, threshold_answers, threshold_grid
from ..calibration.rules import fit_threshold, place_threshold
from ..score_tables import answerable_sign, check_score_table
from .floor_gap import FloorGapGate, floor_gap_answers, floor_gap_columns
from .threshold import ThresholdGate, zero_means_no_match

__all__ = [
    "certify_threshold_gate",
    "certify_floor_gap_gate",
    "certify_learned_gate",
    "certify_chain",
    "chain_cuts",
]


def certify_threshold_gate(table: pd.DataFrame, signal: str, rules, *, support=None, delta: float = 0.1,
                           method: str = "auto", grid=None, higher_is_answerable: bool | None = None,
                           **gate_options):
    """A :class:`ThresholdGate` on ``signal`` whose threshold Learn-then-Test certifies for ``rules``.

    Parameters
    ----------
    table : DataFrame
        Calibration score table.
    rules : str or sequence of str
        One or several of the rules Learn-then-Test certifies
        (:func:`ragcal.calibration.ltt.risk_rules`), certified jointly.
    support : array-like of float, default=None
        Support level per row (:func:`ragcal.gates.support.signal_support`);
        needed by the risk and unsupported rules.
    grid : array-like of float, default=None
        Candidate thresholds; every distinct calibration score when None.
        "Refuse all" (+inf) is always a candidate.

    Returns
    -------
    gate : ThresholdGate
        Threshold +inf (refuse all) when nothing is certified.
    certificate : Certificate
    """
    from ..signals import get_signal

    table = check_score_table(table, [signal])
    if higher_is_answerable is None:
        higher_is_answerable = get_signal(signal).higher_is_answerable
    sign = answerable_sign(higher_is_answerable)
    scores = sign * table[signal].to_numpy(dtype=float)
    fixed_sequence = resolve_method(rules, method, owner="certify_threshold_gate") == "fixed_sequence"
    candidates = threshold_grid(
        scores, None if grid is None else sign * np.asarray(grid, dtype=float), fixed_sequence=fixed_sequence
    )
    answered, supported = threshold_answers(
        scores,
        candidates,
        support,
        higher_is_answerable=higher_is_answerable,
        no_match_at_zero=zero_means_no_match(signal),
        owner="certify_threshold_gate",
    )
    parameters = pd.DataFrame({"threshold": sign * candidates})
    certificate = certify_candidates(
        answered, supported, table["answerable"], rules, delta=delta, method=method, parameters=parameters
    )
    threshold = math.inf * sign
    if certificate.chosen is not None:
        compared = scores
        if support is not None and higher_is_answerable:  # the threshold also cuts passages at the support levels
            compared = np.concatenate([scores, np.asarray(support, dtype=float).reshape(-1)])
        threshold = sign * place_threshold(candidates[certificate.chosen], compared)
    gate = ThresholdGate(signal, threshold, higher_is_answerable=higher_is_answerable, **gate_options)
    return gate, certificate


#: Default grid of :func:`certify_floor_gap_gate`: floors and minimum gaps at evenly spaced quantiles.
N_FLOORS, N_GAPS = 20, 6


def certify_floor_gap_gate(table: pd.DataFrame, rules, *, support=None, delta: float = 0.1, method: str = "auto",
                      floors=None, gaps=None, retriever: str = "dense", max_passages: int | None = 10):
    """A :class:`FloorGapGate` whose (floor, min_gap) Learn-then-Test certifies over a 2-D grid.

    The gate passes on ``retriever``'s passages that clear the floor, so an
    answer is supported when the support level (:func:`ragcal.gates.support.support_levels`
    of ``retriever``) is at least the floor. Candidates are :data:`N_FLOORS`
    floors at quantiles of the top scores times 0 and :data:`N_GAPS` - 1
    quantiles of the top-second gaps as minimum gaps (or the grids given),
    plus "refuse all"; there is no single order along which every risk is
    monotone, so ``auto`` takes Holm.

    Returns
    -------
    gate : FloorGapGate
        Floor +inf (refuse all) when nothing is certified.
    certificate : Certificate
    """
    top_column, second_column = floor_gap_columns(retriever)
    table = check_score_table(table, [top_column, second_column])
    top = table[top_column].to_numpy(dtype=float)
    second = table[second_column].to_numpy(dtype=float)
    if floors is None:
        floors = quantile_grid(top, N_FLOORS)
    if gaps is None:
        gaps = np.union1d([0.0], quantile_grid(top - second, N_GAPS - 1))
    floors, gaps = np.asarray(floors, dtype=float), np.asarray(gaps, dtype=float)
    grid_floor, grid_gap = np.meshgrid(floors, gaps, indexing="ij")
    grid_floor = np.concatenate([[math.inf], grid_floor.ravel()])
    grid_gap = np.concatenate([[0.0], grid_gap.ravel()])
    answered = floor_gap_answers(top[None, :], second[None, :], grid_floor[:, None], grid_gap[:, None])
    supported = None
    if support is not None:
        levels = np.asarray(support, dtype=float).reshape(-1)
        if levels.size != top.size:
            raise ValueError(f"certify_floor_gap_gate: {levels.size} support levels for {top.size} rows")
        supported = answered & (levels[None, :] >= grid_floor[:, None])
    # strictest first: by how few questions each answers
    order = np.lexsort((grid_gap, -grid_floor, answered.sum(axis=1)))
    parameters = pd.DataFrame({"floor": grid_floor, "min_gap": grid_gap})
    certificate = certify_candidates(
        answered, supported, table["answerable"], rules, delta=delta, method=method, order=order, monotone=False,
        parameters=parameters,
    )
    if certificate.chosen is None:
        floor, gap = math.inf, 0.0
    else:
        from .fit import place_floor_gap

        floor, gap = place_floor_gap(
            float(grid_floor[certificate.chosen]), float(grid_gap[certificate.chosen]), top, second, levels=support
        )
    return FloorGapGate(floor, gap, retriever=retriever, max_passages=max_passages), certificate


def certify_learned_gate(table: pd.DataFrame, rules, *, support=None, signals=None, fit_share: float = 0.5,
                         delta: float = 0.1, method: str = "auto", passage_rule: str = "keep@0.95",
                         random_state=0, **gate_options):
    """A learned gate: the model and its cosine bar fitted on one split, its threshold certified on the other.

    The certification questions are never seen by the model (Learn-then-Test
    needs the candidates fixed before the calibration draw). ``fit_share`` of
    every slice fits the classifier (and the dense cosine bar that cuts the
    passages, by ``passage_rule``); the rest certifies the threshold on the
    learned score.

    Parameters
    ----------
    support : array-like of float, default=None
        Dense support levels per row (:func:`ragcal.gates.support.support_levels`
        of ``"dense"``): an answer is supported when the level clears the cosine bar.

    Returns
    -------
    gate : LearnedGate
    certificate : Certificate
        With ``fit_rows`` in its candidates' ``attrs``: how many rows fitted the model.
    """
    from .learned import DEFAULT_LEARNED_SIGNALS, LearnedGate
    from .learned_score import fit_learned_score, signal_matrix
    from .support import bar_support

    signals = tuple(DEFAULT_LEARNED_SIGNALS if signals is None else signals)
    table = check_score_table(table).reset_index(drop=True)
    rng = np.random.default_rng(random_state)
    fitting = np.zeros(len(table), dtype=bool)
    slices = table["slice"].to_numpy()
    for name in pd.unique(slices):
        members = np.flatnonzero(slices == name)
        fitting[rng.permutation(members)[: int(round(fit_share * members.size))]] = True
    fit_table, certify_table = table[fitting], table[~fitting].reset_index(drop=True)
    model = fit_learned_score(fit_table, signals, random_state=random_state)
    bar = fit_threshold(passage_rule, fit_table["dense_top1"], fit_table["answerable"])
    scores = model.score(signal_matrix(certify_table, signals))
    fixed_sequence = resolve_method(rules, method, owner="certify_learned_gate") == "fixed_sequence"
    candidates = threshold_grid(scores, None, fixed_sequence=fixed_sequence)
    answered = np.isfinite(scores)[None, :] & (scores[None, :] >= candidates[:, None])
    supported = None
    if support is not None:
        levels = np.asarray(support, dtype=float).reshape(-1)
        if levels.size != len(table):
            raise ValueError(f"certify_learned_gate: {levels.size} support levels for {len(table)} rows")
        levels, top = levels[~fitting], certify_table["dense_top1"].to_numpy(dtype=float)
        # Passages are the dense ones clearing the bar; when none does, the top one (gold when its level is the top).
        supported = answered & bar_support(levels, top, bar)[None, :]
    parameters = pd.DataFrame({"threshold": candidates})
    certificate = certify_candidates(
        answered, supported, certify_table["answerable"], rules, delta=delta, method=method, parameters=parameters
    )
    certificate.candidates.attrs["fit_rows"] = int(fitting.sum())
    threshold = math.inf if certificate.chosen is None else place_threshold(candidates[certificate.chosen], scores)
    gate = LearnedGate(model, threshold, passage_floor=bar, **gate_options)
    return gate, certificate


#: Default grid of :func:`certify_chain`: dense bars (for both the hybrid and the broad stage) and keyword bars.
N_DENSE_BARS, N_KEYWORD_BARS = 8, 3


def chain_cuts(results, gold, *, max_passages: int = 10, broad_max_passages: int = 20) -> dict:
    """``{stage name: PassageCuts}`` of the default chain's stages, for :func:`certify_chain`'s ``cuts``.

    What the stages' passage cuts read from the results
    (:func:`ragcal.gates.support.passage_cuts`), computed once: a study that
    certifies the chain on many subsets of one table takes these at each
    subset's rows (:meth:`~ragcal.gates.support.PassageCuts.take`) instead of
    reading the results again.
    """
    from .chain import default_chain
    from .support import passage_cuts

    options = {"max_passages": max_passages, "broad_max_passages": broad_max_passages}
    return {
        stage.name: passage_cuts(stage.gate, results, gold)
        for stage in default_chain(math.inf, math.inf, math.inf, **options).stages
    }


def certify_chain(table: pd.DataFrame, rules, *, results=None, gold=None, delta: float = 0.1, method: str = "auto",
                  dense_bars=None, keyword_bars=None, max_passages: int = 10, broad_max_passages: int = 20,
                  cuts=None):
    """The default :class:`FallbackChain` whose three stage bars Learn-then-Test certifies together.

    The chain is :func:`ragcal.gates.chain.default_chain` (no reranker stage):
    ``hybrid`` answers when ``dense_top1`` clears the high bar (passages in
    fused order, each clearing it), then ``keyword`` when
    ``bm25_top1_stopwords`` clears its bar, then ``broad`` hedges when
    ``dense_top1`` clears the low bar. Hedges count as answers: an
    unsupported hedge is still an unsupported answer.

    Candidates are every (high, keyword, low) with ``high >= low`` from
    :data:`N_DENSE_BARS` dense bars and :data:`N_KEYWORD_BARS` keyword bars
    at evenly spaced quantiles of the calibration scores (or the grids
    given), the keyword stage also switched off (+inf), plus "refuse all".
    No single order makes every risk monotone over three bars, so ``auto``
    takes Holm.

    Parameters
    ----------
    table : DataFrame
        Calibration score table with ``dense_top1`` and ``bm25_top1_stopwords``.
    rules : str or sequence of str
        One or several of the rules Learn-then-Test certifies
        (:func:`ragcal.calibration.ltt.risk_rules`), certified jointly.
    results, gold : sequence, default=None
        Per row of ``table``: ``{retriever: RetrievalResult}`` (``dense``,
        ``rrf``, ``bm25_stopwords``; :func:`ragcal.gates.support.results_from_runs`
        gives them from TREC runs) and the gold pages. Needed by the risk and
        unsupported rules: each stage's passages at each of its bars are cut
        as the stage cuts them (:func:`ragcal.gates.support.cut_support`).
    cuts : dict, default=None
        :func:`chain_cuts` of the same results and gold pages (with the same
        ``max_passages`` and ``broad_max_passages``), taken at the rows of
        ``table``: the stages' cuts are then not read from ``results`` again.

    Returns
    -------
    gate : FallbackChain
        Every bar +inf (refuse all) when nothing is certified.
    certificate : Certificate
    """
    from .chain import DEFAULT_CHAIN_COLUMNS, default_chain

    table = check_score_table(table, list(DEFAULT_CHAIN_COLUMNS))
    dense = table["dense_top1"].to_numpy(dtype=float)
    keyword_scores = table["bm25_top1_stopwords"].to_numpy(dtype=float)
    if dense_bars is None:
        dense_bars = quantile_grid(dense, N_DENSE_BARS)
    if keyword_bars is None:
        keyword_bars = quantile_grid(keyword_scores[keyword_scores > 0], N_KEYWORD_BARS)
    dense_bars = np.unique(np.asarray(dense_bars, dtype=float))
    keyword_bars = np.union1d(np.asarray(keyword_bars, dtype=float), [math.inf])
    if dense_bars.size == 0:
        raise ValueError("certify_chain: no finite dense_top1 score to build the grid from")
    options = {"max_passages": max_passages, "broad_max_passages": broad_max_passages}
    hybrid, keyword, broad = (stage.gate for stage in default_chain(math.inf, math.inf, math.inf, **options).stages)
    fires = (hybrid.answers_at(table, dense_bars), keyword.answers_at(table, keyword_bars),
             broad.answers_at(table, dense_bars))
    high_index, low_index = np.nonzero(dense_bars[:, None] >= dense_bars[None, :])
    keyword_index = np.repeat(np.arange(keyword_bars.size), high_index.size)
    high_index, low_index = np.tile(high_index, keyword_bars.size), np.tile(low_index, keyword_bars.size)
    by_hybrid = fires[0][high_index]
    by_keyword = fires[1][keyword_index] & ~by_hybrid
    by_broad = fires[2][low_index] & ~by_hybrid & ~by_keyword
    n = len(table)
    answered = np.vstack([np.zeros((1, n), dtype=bool), by_hybrid | by_keyword | by_broad])
    supported = None
    if results is not None or gold is not None:
        if results is None or gold is None:
            raise ValueError("certify_chain: results and gold go together (the passages and the gold pages)")
        if cuts is None:
            cuts = chain_cuts(results, gold, **options)
        passes = (cuts["hybrid"].support(dense_bars), cuts["keyword"].support(keyword_bars),
                  cuts["broad"].support(dense_bars))
        supported = np.vstack([
            np.zeros((1, n), dtype=bool),
            (by_hybrid & passes[0][high_index]) | (by_keyword & passes[1][keyword_index])
            | (by_broad & passes[2][low_index]),
        ])
    grid = {
        "high": np.concatenate([[math.inf], dense_bars[high_index]]),
        "keyword": np.concatenate([[math.inf], keyword_bars[keyword_index]]),
        "low": np.concatenate([[math.inf], dense_bars[low_index]]),
    }
    order = np.lexsort((-grid["keyword"], -grid["high"], -grid["low"], answered.sum(axis=1)))
    certificate = certify_candidates(
        answered, supported, table["answerable"], rules, delta=delta, method=method, order=order, monotone=False,
        parameters=pd.DataFrame(grid),
    )
    bars = (math.inf,) * 3
    if certificate.chosen is not None:
        # Each bar is compared with its stage's scores and, when it cuts passages, with the passages' scores.
        passage_scores = [] if results is None else [
            np.asarray(listed.scores, dtype=float) for row in results for listed in row.values()
        ]
        dense_values = np.concatenate([dense, *passage_scores])
        keyword_values = np.concatenate([keyword_scores, *passage_scores])
        high, keyword_bar, low = (float(grid[name][certificate.chosen]) for name in ("high", "keyword", "low"))
        bars = (place_threshold(high, dense_values), place_threshold(keyword_bar, keyword_values),
                place_threshold(low, dense_values))
    return default_chain(*bars, **options), certificate


def certify_floor_gap(*args, **kwargs):
    """Deprecated name of :func:`certify_floor_gap_gate` (``certify_<kind>_gate``, as ``certify_threshold_gate``)."""
    import warnings

    warnings.warn("certify_floor_gap is deprecated: call certify_floor_gap_gate", DeprecationWarning, stacklevel=2)
    return certify_floor_gap_gate(*args, **kwargs)
