"""Review a deployed gate: draw a stratified sample of a live log to label, and estimate from its labels.

Seed 003's advice is to "log rejected queries and manually check whether
relevant documents existed. If more than 20% of rejections were wrong, your
threshold is too high". This module is that loop::

    sample = review_sample(gate, live_log, size=60, random_state=0)
    sample = attach_passages(sample, index, gate, k=3)
    write_review_csv("review.csv", sample)          # label it (JupyterLab labeler, or by hand)
    labels = read_review_labels("review.csv")
    estimates = review_estimates(labels)             # shares with exact stratified intervals
    print(estimates.to_markdown())
    new_gate, change = refit_with_labels(gate, calibration, labels, rule="keep@0.95")

The design
----------
Rows of the live log are split by the gate's decision (``answer``, ``hedge``,
``refuse``, from :meth:`Gate.decide_table`), and each decision by the row's
distance to the bar it was compared with (:func:`bar_distances`):

- threshold and learned gates: ``|score - threshold|`` for refusals,
  ``|score - hedge_below|`` for answers (``threshold`` without a hedge band),
  the nearer of the two for hedges;
- floor + gap: ``|floor_gap_order(top, second, min_gap) - floor|`` (the score
  whose threshold at ``floor`` is exactly the gate's decision);
- fallback chain: an answer or hedge is measured by the stage that gave it
  (that stage's gate, by the rules above); a refusal by the last stage, the
  broadest fallback, which it failed last.

Within each decision (and, for a chain, each stage, so that cosine and BM25
distances are never compared), the ``near`` stratum holds the
``near_fraction`` of rows closest to the bar (rows tied with the last of them
included; rows with no score, NaN, count as far); the rest is ``far``.
Strata are named ``<decision>/<near|far>``.

The sample is split equally between the decisions present (each is a
population of its own for the estimates), then ``near_share`` of a decision's
part goes to its near stratum. Every non-empty stratum gets at least
``min_per_stratum`` rows; a stratum smaller than its part is taken whole and
the rest goes to the others, in proportion to their targets (a highest-average
apportionment). Inside a stratum rows are drawn by simple random sampling
without replacement with a seeded :func:`numpy.random.default_rng`.

The estimator and its interval
------------------------------
Each estimated share is of one decision's rows in the live log, e.g. the share
of refusals that were answerable. With stratum sizes ``N_h`` (rows of the log),
``m_h`` labeled rows and ``x_h`` of them in the event, the stratified estimate
is ``sum_h N_h * x_h / m_h / N`` (NaN while some non-empty stratum has no
label). The interval is exact for the design: in each stratum, an exact
hypergeometric confidence set for the number ``X_h`` of rows in the event
(finite population, without replacement, :data:`scipy.stats.hypergeom`), at
level ``1 - alpha / H`` (two-sided), where ``H`` counts the strata that are
partly labeled; Bonferroni's inequality then makes the sums of the bounds,
divided by ``N``, a ``1 - alpha`` interval for the share. Fully labeled strata
are known exactly and unlabeled ones contribute ``[0, N_h]``; neither spends
any ``alpha``. The interval is conservative (its coverage is at least the
nominal level, usually more); it assumes which sampled rows got labeled does
not depend on their labels (label them in any order, but do not skip the hard
ones).

Supported answers: an answered row counts as supported when one of its
``gold`` pages is among the pages the gate passed on (``passed_pages``, from
:meth:`Gate.passages_for`, written by :func:`attach_passages`; the top-K
``page_i`` columns when a file has no ``passed_pages``). An answerable row with
empty ``gold`` (the page that answers it was not retrieved) is unsupported.

See Also
--------
ragcal.gates.fit_gate : the refit in :func:`refit_with_labels`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "REVIEW_COLUMNS",
    "PASSAGE_TEXT_CHARS",
    "WRONG_REFUSAL_LIMIT",
    "ReviewEstimates",
    "bar_distances",
    "review_sample",
    "attach_passages",
    "write_review_csv",
    "read_review_labels",
    "review_estimates",
    "refit_with_labels",
    "stratified_share",
]

#: The first columns of a review CSV, in this order (then ``page_i, heading_i, text_i``, then extras).
REVIEW_COLUMNS = (
    "id",
    "query",
    "answerable",
    "slice",
    "gold",
    "decision",
    "score",
    "stratum",
    "stratum_size",
    "stratum_sampled",
)
#: Passage texts in a review CSV are cut to this many characters.
PASSAGE_TEXT_CHARS = 600
#: Seed 003: "if more than 20% of rejections were wrong, your threshold is too high".
WRONG_REFUSAL_LIMIT = 0.2

_DECISIONS = ("answer", "hedge", "refuse")
_PAGE_COLUMN = re.compile(r"^page_(\d+)$")


# ----------------------------------------------------------------------------------------------- the design


def bar_distances(gate, table: pd.DataFrame, decisions: pd.DataFrame | None = None) -> tuple[np.ndarray, np.ndarray]:
    """How far each row's score is from the bar the gate compared it with (see the module docstring).

    Parameters
    ----------
    gate : Gate
        A :class:`~ragcal.gates.ThresholdGate`, :class:`~ragcal.gates.LearnedGate`,
        :class:`~ragcal.gates.FloorGapGate` or :class:`~ragcal.gates.FallbackChain`.
    table : DataFrame
        With the gate's :attr:`~ragcal.gates.Gate.columns`.
    decisions : DataFrame, default=None
        ``gate.decide_table(table)``, when already computed.

    Returns
    -------
    distance : ndarray of shape (n_rows,)
        Non-negative; NaN where the row has no score.
    group : ndarray of shape (n_rows,), dtype object
        The scale each distance is on: None for a single gate, the deciding
        stage's name for a chain (the last stage's for refusals). Distances
        are compared only within a group.
    """
    from ..gates import FallbackChain, FloorGapGate, LearnedGate, ThresholdGate
    from ..gates.floor_gap import floor_gap_order

    decisions = gate.decide_table(table) if decisions is None else decisions
    action = decisions["action"].to_numpy(dtype=object)
    score = decisions["score"].to_numpy(dtype=float)
    group = np.full(len(table), None, dtype=object)
    if isinstance(gate, FallbackChain):
        distance = np.full(len(table), np.nan)
        stage = decisions["stage"].to_numpy(dtype=object)
        last = gate.stages[-1].name
        for candidate in gate.stages:
            rows = (stage == candidate.name) | ((action == "refuse") & (candidate.name == last))
            if rows.any():
                distance[rows] = bar_distances(candidate.gate, table)[0][rows]
                group[rows] = candidate.name
        return distance, group
    if isinstance(gate, FloorGapGate):
        top, second = (table[column].to_numpy(dtype=float) for column in gate.columns)
        return np.abs(floor_gap_order(top, second, gate.min_gap) - gate.floor), group
    if isinstance(gate, (ThresholdGate, LearnedGate)):
        to_threshold = np.abs(score - gate.threshold)
        if gate.hedge_below is None:
            return to_threshold, group
        to_hedge = np.abs(score - gate.hedge_below)
        distance = np.where(action == "answer", to_hedge, to_threshold)
        distance = np.where(action == "hedge", np.fmin(to_threshold, to_hedge), distance)
        return distance, group
    raise TypeError(
        f"bar_distances knows threshold, learned, floor_gap and chain gates; got a {type(gate).__name__} "
        f"(type {getattr(gate, 'type', '?')!r})"
    )


def _near_rows(distance: np.ndarray, near_fraction: float) -> np.ndarray:
    """True for the ``near_fraction`` of rows closest to the bar (ties with the last included; NaN is far)."""
    near = np.zeros(distance.shape, dtype=bool)
    finite = np.isfinite(distance)
    if not finite.any():
        return near
    count = max(1, math.ceil(near_fraction * int(finite.sum())))
    cutoff = np.sort(distance[finite])[count - 1]
    near[finite] = distance[finite] <= cutoff
    return near


def _allocate(sizes: np.ndarray, weights: np.ndarray, total: int, minimum: int) -> np.ndarray:
    """Integer sample sizes per stratum: at least ``minimum`` (capped by the size), the rest by highest averages.

    Each further unit goes to the stratum with room whose ``weight / (taken + 1)``
    is largest (D'Hondt), so a full stratum's share flows to the others in
    proportion to their weights. Ties go to the earlier stratum.
    """
    taken = np.minimum(sizes, minimum)
    while taken.sum() < total:
        room = taken < sizes
        priority = np.where(room, weights / (taken + 1), -np.inf)
        taken[int(np.argmax(priority))] += 1
    return taken


def _check_fraction(value, name: str, *, closed_low: bool) -> float:
    low_ok = value >= 0 if closed_low else value > 0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (low_ok and value <= 1):
        interval = "[0, 1]" if closed_low else "(0, 1]"
        raise ValueError(f"The '{name}' parameter of review_sample must be a float in {interval}. Got {value!r} instead.")
    return float(value)


def review_sample(
    gate,
    live: pd.DataFrame,
    *,
    size: int = 60,
    near_share: float = 0.5,
    near_fraction: float = 0.25,
    min_per_stratum: int = 2,
    random_state=0,
    source: str = "live log",
) -> pd.DataFrame:
    """Draw a stratified review sample of a live score log (the design of the module docstring).

    Parameters
    ----------
    gate : Gate
    live : DataFrame
        One row per logged question: ``query``, the gate's
        :attr:`~ragcal.gates.Gate.columns`, and ``id`` when it has one. No
        labels needed (any ``answerable``, ``slice`` or ``gold`` is not copied).
    size : int, default=60
        Rows to draw; the whole log when it has fewer.
    near_share : float in [0, 1], default=0.5
        Share of each decision's part of the sample that goes to its near stratum.
    near_fraction : float in (0, 1], default=0.25
        Share of each decision's rows (closest to the bar) that forms its near
        stratum. ``near_share > near_fraction`` oversamples the rows near the bar.
    min_per_stratum : int, default=2
        Rows drawn at least from every non-empty stratum (all of a smaller one).
    random_state : int or numpy.random.Generator, default=0
    source : str, default="live log"
        How messages name the log.

    Returns
    -------
    DataFrame
        One row per sampled question, in log order: :data:`REVIEW_COLUMNS`
        (``answerable``, ``slice`` and ``gold`` empty strings), then ``stage``,
        ``bar_distance``, ``log_row`` (0-based row of the log) and the gate's
        signal columns (kept so that :func:`refit_with_labels` needs no
        recomputation).

    Raises
    ------
    ValueError
        A missing ``query`` or signal column, duplicate ids, an empty log,
        bad parameters, or ``size`` smaller than the number of non-empty strata.
    """
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"The 'size' parameter of review_sample must be a positive int. Got {size!r} instead.")
    if isinstance(min_per_stratum, bool) or not isinstance(min_per_stratum, int) or min_per_stratum < 1:
        raise ValueError(
            f"The 'min_per_stratum' parameter of review_sample must be a positive int. Got {min_per_stratum!r} instead."
        )
    near_share = _check_fraction(near_share, "near_share", closed_low=True)
    near_fraction = _check_fraction(near_fraction, "near_fraction", closed_low=False)
    missing = [column for column in ("query", *gate.columns) if column not in live.columns]
    if missing:
        raise ValueError(
            f"{source}: missing column(s) {', '.join(map(repr, missing))}; have {', '.join(map(str, live.columns))}"
        )
    if live.empty:
        raise ValueError(f"{source}: no rows to sample")
    live = live.reset_index(drop=True)
    if "id" in live.columns:
        ids = live["id"].astype(str).str.strip()
        duplicated = ids[ids.duplicated()]
        if not duplicated.empty:
            line = int(duplicated.index[0]) + 2
            raise ValueError(f"{source}, line {line}, column 'id': duplicate id {duplicated.iloc[0]!r}")
    else:
        ids = pd.Series([f"live-{row + 1}" for row in range(len(live))])
    decisions = gate.decide_table(live)
    distance, group = bar_distances(gate, live, decisions)
    action = decisions["action"].to_numpy(dtype=object)
    near = np.zeros(len(live), dtype=bool)
    for key in pd.unique(pd.Series(list(zip(action, group)), dtype=object)):
        rows = np.array([(a, g) == key for a, g in zip(action, group)])
        near[rows] = _near_rows(distance[rows], near_fraction)
    stratum = np.array([f"{a}/{'near' if n else 'far'}" for a, n in zip(action, near)], dtype=object)

    names = [f"{decision}/{band}" for decision in _DECISIONS for band in ("near", "far")]
    sizes = np.array([int((stratum == name).sum()) for name in names])
    present = [decision for decision in _DECISIONS if (action == decision).any()]
    weights = np.array(
        [
            (near_share if name.endswith("/near") else 1 - near_share) / len(present) if count else 0.0
            for name, count in zip(names, sizes)
        ]
    )
    weights = np.where(sizes > 0, np.maximum(weights, 1e-12), 0.0)  # near_share 0 or 1: the minimum still applies
    total = min(size, int(sizes.sum()))
    if total < int((sizes > 0).sum()):
        raise ValueError(
            f"The 'size' parameter of review_sample must be at least the number of non-empty strata "
            f"({int((sizes > 0).sum())}: {', '.join(n for n, c in zip(names, sizes) if c)}) so that every stratum is "
            f"represented. Got {size} instead."
        )
    taken = _allocate(sizes, weights, total, min(min_per_stratum, max(1, total // int((sizes > 0).sum()))))

    rng = np.random.default_rng(random_state)
    chosen = []
    for name, count in zip(names, taken):
        members = np.flatnonzero(stratum == name)
        if count:
            chosen.append(rng.choice(members, size=int(count), replace=False))
    rows = np.sort(np.concatenate(chosen)) if chosen else np.array([], dtype=int)
    counts = dict(zip(names, zip(sizes, taken)))
    sample = pd.DataFrame(
        {
            "id": ids.iloc[rows].to_numpy(dtype=object),
            "query": live["query"].iloc[rows].astype(str).to_numpy(dtype=object),
            "answerable": "",
            "slice": "",
            "gold": "",
            "decision": action[rows],
            "score": decisions["score"].to_numpy(dtype=float)[rows],
            "stratum": stratum[rows],
            "stratum_size": [int(counts[name][0]) for name in stratum[rows]],
            "stratum_sampled": [int(counts[name][1]) for name in stratum[rows]],
            "stage": decisions["stage"].to_numpy(dtype=object)[rows],
            "bar_distance": distance[rows],
            "log_row": rows,
        }
    )
    for column in gate.columns:
        sample[column] = live[column].to_numpy(dtype=float)[rows]
    return sample


# ----------------------------------------------------------------------------------------------- passages


def attach_passages(sample: pd.DataFrame, index, gate, *, k: int = 3) -> pd.DataFrame:
    """Add the top ``k`` passages of each sampled question, retrieved on the gate's first retriever view.

    Parameters
    ----------
    sample : DataFrame
        From :func:`review_sample` (``query``, ``decision``, ``stage``).
    index : RetrievalIndex
        The index (or access-level view) the gate decides on.
    gate : Gate
    k : int, default=3

    Returns
    -------
    DataFrame
        ``sample`` with ``page_i, heading_i, text_i`` for i = 1..k after
        :data:`REVIEW_COLUMNS` (the chunk's page path, its heading path joined
        with `` › ``, its body cut to :data:`PASSAGE_TEXT_CHARS` characters;
        empty strings where fewer passages exist) and, at the end,
        ``passed_pages``: the ``;``-joined pages the gate passes on for an
        answer or hedge (:meth:`Gate.passages_for`), empty for a refusal.
    """
    from ..chunking import HEADING_SEPARATOR, page_of

    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"The 'k' parameter of attach_passages must be a positive int. Got {k!r} instead.")
    view = gate.retrievers[0]
    chunks = {chunk.chunk_id: chunk for chunk in index.chunks}
    retrieved = index.retrieve(list(sample["query"])) if len(sample) else {}
    columns = {f"{field}_{rank}": [] for rank in range(1, k + 1) for field in ("page", "heading", "text")}
    passed = []
    for position, row in enumerate(sample.itertuples(index=False)):
        results = {name: per_query[position] for name, per_query in retrieved.items()}
        top = list(results[view].chunk_ids[:k])
        for rank in range(1, k + 1):
            chunk = chunks.get(top[rank - 1]) if rank <= len(top) else None
            columns[f"page_{rank}"].append(chunk.doc_path if chunk else "")
            columns[f"heading_{rank}"].append(HEADING_SEPARATOR.join(chunk.heading_path) if chunk else "")
            columns[f"text_{rank}"].append(chunk.body[:PASSAGE_TEXT_CHARS] if chunk else "")
        if row.decision == "refuse":
            passed.append("")
        else:
            stage = row.stage if isinstance(row.stage, str) else None
            pages = dict.fromkeys(page_of(chunk_id) for chunk_id, _ in gate.passages_for(results, stage=stage))
            passed.append(";".join(pages))
    head = [column for column in REVIEW_COLUMNS if column in sample.columns]
    rest = [column for column in sample.columns if column not in head and not _is_passage_column(column)]
    rest = [column for column in rest if column != "passed_pages"]
    passages = pd.DataFrame(columns, index=sample.index, dtype=object)
    return pd.concat([sample[head], passages, sample[rest]], axis=1).assign(passed_pages=passed)


def _is_passage_column(column: str) -> bool:
    return bool(re.match(r"^(page|heading|text)_\d+$", str(column)))


def _passage_count(columns) -> int:
    """K of a review CSV: how many ``page_<i>`` columns it has."""
    return sum(1 for column in columns if _PAGE_COLUMN.match(str(column)))


# ----------------------------------------------------------------------------------------------- the CSV


def write_review_csv(path, sample: pd.DataFrame) -> Path:
    """Write a review sample as the labeling CSV (UTF-8, atomically), columns in the contract's order.

    :data:`REVIEW_COLUMNS` first, then ``page_i, heading_i, text_i``, then
    any other column of ``sample`` (``stage``, ``bar_distance``, the gate's
    signals, ``passed_pages``, ...).
    """
    from .._io import atomic_write_text

    missing = [column for column in REVIEW_COLUMNS if column not in sample.columns]
    if missing:
        raise ValueError(f"{path}: the sample has no column(s) {', '.join(map(repr, missing))}; draw it with review_sample")
    k = _passage_count(sample.columns)
    passages = [f"{field}_{rank}" for rank in range(1, k + 1) for field in ("page", "heading", "text")]
    rest = [column for column in sample.columns if column not in REVIEW_COLUMNS and column not in passages]
    ordered = sample[[*REVIEW_COLUMNS, *passages, *rest]]
    return atomic_write_text(path, ordered.to_csv(index=False, lineterminator="\n"))


def read_review_labels(path) -> pd.DataFrame:
    """Read a (partly) labeled review CSV and check it.

    Rows whose ``answerable`` is empty are not labeled yet; they are kept
    (``labeled`` False) and counted as such by :func:`review_estimates`.

    Returns
    -------
    DataFrame
        Every column of the file, in its order; ``answerable`` as pandas'
        nullable ``boolean`` (NA when unlabeled), ``gold`` a tuple of pages,
        ``score`` a float, ``stratum_size`` and ``stratum_sampled`` ints, and
        a ``labeled`` column.

    Raises
    ------
    ValueError
        Naming the file, line (the header is line 1) and column: a missing
        column, an ``answerable`` other than true/false (or empty), gold pages
        on an unanswerable row, an unknown decision, a stratum that does not
        belong to its decision, sizes that are not integers or disagree within
        a stratum, or a stratum with more or fewer rows than its
        ``stratum_sampled`` says (a row was deleted or added).
    """
    from ..queries import ANSWERABLE_EXPECTED, describe_cell, parse_answerable

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: review file not found")
    from .._io import check_csv_delimiter

    check_csv_delimiter(path)
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: cannot be read as CSV ({error})") from error
    missing = [column for column in REVIEW_COLUMNS if column not in frame.columns]
    if missing:
        raise ValueError(
            f"{path}: missing column(s) {', '.join(map(repr, missing))}; a review CSV starts with "
            f"{', '.join(REVIEW_COLUMNS)} (write it with `ragcal review --out`)"
        )
    labels, gold, numbers = [], [], {"score": [], "stratum_size": [], "stratum_sampled": []}
    for position, row in enumerate(frame.to_dict("records")):
        where = f"{path}, line {position + 2}"
        text = row["answerable"].strip()
        flag = None if not text else parse_answerable(text)
        if text and flag is None:
            raise ValueError(f"{where}, column 'answerable': {ANSWERABLE_EXPECTED} or empty, got {describe_cell(text)}")
        pages = tuple(part.strip() for part in row["gold"].split(";") if part.strip())
        if pages and flag is not True:
            state = "an unanswerable" if flag is False else "an unlabeled"
            raise ValueError(f"{where}, column 'gold': {state} row cannot have gold pages ({row['gold']!r})")
        if row["decision"] not in _DECISIONS:
            raise ValueError(f"{where}, column 'decision': expected one of {', '.join(_DECISIONS)}, got "
                             f"{describe_cell(row['decision'])}")
        if row["stratum"].split("/")[0] != row["decision"]:
            raise ValueError(f"{where}, column 'stratum': {row['stratum']!r} is not a stratum of decision "
                             f"{row['decision']!r} (expected '{row['decision']}/...')")
        for column in ("stratum_size", "stratum_sampled"):
            value = row[column].strip()
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"{where}, column {column!r}: expected a positive integer, got {describe_cell(value)}")
            numbers[column].append(int(value))
        try:
            numbers["score"].append(float(row["score"]) if row["score"].strip() else math.nan)
        except ValueError:
            raise ValueError(f"{where}, column 'score': not a number, got {describe_cell(row['score'])}") from None
        labels.append(flag)
        gold.append(pages)
    frame["answerable"] = pd.array(labels, dtype="boolean")
    frame["gold"] = gold
    for column, values in numbers.items():
        frame[column] = values
    frame["labeled"] = frame["answerable"].notna().to_numpy(dtype=bool)
    for name, rows in frame.groupby("stratum", sort=False).groups.items():
        block = frame.loc[rows]
        for column in ("stratum_size", "stratum_sampled"):
            if block[column].nunique() > 1:
                line = int(block.index[(block[column] != block[column].iloc[0]).to_numpy()][0]) + 2
                raise ValueError(f"{path}, line {line}, column {column!r}: stratum {name!r} has {column} "
                                 f"{block[column].iloc[0]} on its first row and another value here")
        sampled, size = int(block["stratum_sampled"].iloc[0]), int(block["stratum_size"].iloc[0])
        if len(block) != sampled:
            raise ValueError(f"{path}: stratum {name!r} has {len(block)} row(s) but stratum_sampled says {sampled}; "
                             "keep every sampled row (leave answerable empty for the ones not labeled)")
        if sampled > size:
            raise ValueError(f"{path}, line {int(block.index[0]) + 2}, column 'stratum_sampled': {sampled} rows drawn "
                             f"from a stratum of {size}")
    return frame


# ----------------------------------------------------------------------------------------------- estimates


def _count_bounds(positives: int, labeled: int, size: int, tail: float) -> tuple[int, int]:
    """Exact hypergeometric bounds on the number of rows in the event among a stratum's ``size`` rows.

    ``positives`` of ``labeled`` rows drawn without replacement were in the
    event. Each side is the confidence set of a one-sided exact test at level
    ``tail``: every count ``K`` for which ``P(X >= positives | K) > tail``
    and ``P(X <= positives | K) > tail``.
    """
    from scipy.stats import hypergeom

    if labeled == 0:
        return 0, size
    if labeled == size:
        return positives, positives
    counts = np.arange(size + 1)
    at_least = hypergeom.sf(positives - 1, size, counts, labeled)
    at_most = hypergeom.cdf(positives, size, counts, labeled)
    return int(counts[at_least > tail].min()), int(counts[at_most > tail].max())


def stratified_share(sizes, labeled, positives, *, confidence: float = 0.95) -> tuple[float, float, float]:
    """Stratified estimate of a population share, with an exact Bonferroni-combined hypergeometric interval.

    Parameters
    ----------
    sizes : array-like of int
        Rows of the population in each stratum (``N_h``).
    labeled : array-like of int
        Rows drawn and labeled in each stratum (``m_h``), by simple random
        sampling without replacement.
    positives : array-like of int
        Labeled rows in the event (``x_h``).
    confidence : float, default=0.95

    Returns
    -------
    estimate : float
        ``sum(N_h * x_h / m_h) / sum(N_h)``; NaN when a non-empty stratum has
        no label (or the population is empty).
    low, high : float
        ``sum(L_h) / N`` and ``sum(U_h) / N`` with ``[L_h, U_h]`` the exact
        hypergeometric bounds of each stratum at ``1 - (1 - confidence) / H``,
        ``H`` the number of partly labeled strata. Coverage is at least
        ``confidence``. NaN for an empty population.

    Examples
    --------
    >>> stratified_share([10, 30], [10, 0], [4, 0])  # one stratum fully labeled, the other not at all
    (nan, 0.1, 0.85)
    """
    sizes, labeled, positives = (np.asarray(values, dtype=int) for values in (sizes, labeled, positives))
    if not 0 < confidence < 1:
        raise ValueError(f"The 'confidence' parameter must be a float in (0, 1). Got {confidence!r} instead.")
    if np.any(labeled > sizes) or np.any(positives > labeled) or np.any(positives < 0):
        raise ValueError(f"stratified_share: need 0 <= positives <= labeled <= sizes; got {positives}, {labeled}, {sizes}")
    total = int(sizes.sum())
    if total == 0:
        return math.nan, math.nan, math.nan
    uncertain = int(((labeled > 0) & (labeled < sizes)).sum())
    tail = (1 - confidence) / (2 * max(uncertain, 1))
    bounds = np.array([_count_bounds(x, m, n, tail) for x, m, n in zip(positives, labeled, sizes)]).reshape(-1, 2)
    present = sizes > 0
    if np.any(present & (labeled == 0)):
        estimate = math.nan
    else:
        estimate = float(np.sum(sizes[present] * positives[present] / labeled[present]) / total)
    return estimate, float(bounds[:, 0].sum() / total), float(bounds[:, 1].sum() / total)


def _supported(labels: pd.DataFrame) -> np.ndarray:
    """True where one of the row's gold pages is among the pages the gate passed on (see the module docstring)."""
    if "passed_pages" in labels.columns:
        passed = [set(filter(None, (page.strip() for page in str(text).split(";")))) for text in labels["passed_pages"]]
    else:
        page_columns = [column for column in labels.columns if _PAGE_COLUMN.match(str(column))]
        passed = [set(filter(None, values)) for values in labels[page_columns].astype(str).itertuples(index=False)]
    return np.array([bool(set(gold) & pages) for gold, pages in zip(labels["gold"], passed)], dtype=bool)


#: estimand -> (decision whose rows it is a share of, what it counts, how to say it).
_ESTIMANDS = {
    "refusals_answerable": ("refuse", "answerable", "refusals that were answerable"),
    "hedges_answerable": ("hedge", "answerable", "hedges that were answerable"),
    "answers_unanswerable": ("answer", "unanswerable", "answers to unanswerable questions"),
    "answers_unsupported": ("answer", "unsupported", "answers to answerable questions without a gold passage"),
    "answers_wrong": ("answer", "wrong", "answers unanswerable or unsupported"),
}


@dataclass(frozen=True)
class ReviewEstimates:
    """What a labeled review sample says about the live log.

    Attributes
    ----------
    table : DataFrame
        One row per estimand (``refusals_answerable``, ``hedges_answerable``,
        ``answers_unanswerable``, ``answers_unsupported``, ``answers_wrong``):
        ``decision``, ``population`` (its rows in the log), ``sampled``,
        ``labeled``, ``positives`` (labeled rows in the event), ``estimate``,
        ``low``, ``high``.
    strata : DataFrame
        One row per stratum: ``stratum``, ``decision``, ``stratum_size``,
        ``sampled``, ``labeled``.
    confidence : float
    refusal_verdict : str
        Seed 003's 20% rule stated against the interval of ``refusals_answerable``.
    """

    table: pd.DataFrame
    strata: pd.DataFrame
    confidence: float
    refusal_verdict: str

    def to_markdown(self) -> str:
        """The estimates, the strata and the verdict as Markdown."""
        shown = self.table.copy()
        for column in ("estimate", "low", "high"):
            shown[column] = shown[column].map(lambda value: "n/a" if value != value else f"{value:.1%}")
        return "\n".join(
            [
                f"Shares of the live log's decisions ({self.confidence:.0%} exact stratified intervals):",
                "",
                shown.to_markdown(index=False),
                "",
                "Labeled per stratum:",
                "",
                self.strata.to_markdown(index=False),
                "",
                self.refusal_verdict,
            ]
        )


def _refusal_verdict(row, confidence: float, limit: float) -> str:
    if row.population == 0:
        return "Seed 003's rule: the live log has no refusals to check."
    level = f"{confidence:.0%} confidence"
    if row.low > limit:
        return (f"Seed 003's rule: more than {limit:.0%} of refusals were answerable (at least {row.low:.1%} at "
                f"{level}): the threshold is too high.")
    if row.high < limit:
        return (f"Seed 003's rule: fewer than {limit:.0%} of refusals were answerable (at most {row.high:.1%} at "
                f"{level}): the threshold passes.")
    return (f"Seed 003's rule: undecided, the interval [{row.low:.1%}, {row.high:.1%}] of answerable refusals "
            f"contains {limit:.0%}; label more refusals ({row.labeled} of {row.population} labeled).")


def review_estimates(labels: pd.DataFrame, *, confidence: float = 0.95,
                     wrong_refusal_limit: float = WRONG_REFUSAL_LIMIT) -> ReviewEstimates:
    """Stratified estimates with exact intervals from a labeled review sample (:func:`read_review_labels`).

    Only labeled rows count; each share is of one decision's rows in the
    live log, weighted by ``stratum_size`` (see the module docstring for the
    estimator, the interval and which passages count as support).

    Parameters
    ----------
    labels : DataFrame
        From :func:`read_review_labels`.
    confidence : float, default=0.95
    wrong_refusal_limit : float, default=0.2
        Seed 003's limit on the share of refusals that were answerable.

    Returns
    -------
    ReviewEstimates
    """
    if not 0 < confidence < 1:
        raise ValueError(f"The 'confidence' parameter of review_estimates must be a float in (0, 1). "
                         f"Got {confidence!r} instead.")
    labeled = labels["labeled"].to_numpy(dtype=bool)
    answerable = labels["answerable"].fillna(False).to_numpy(dtype=bool)
    supported = _supported(labels)
    events = {
        "answerable": labeled & answerable,
        "unanswerable": labeled & ~answerable,
        "unsupported": labeled & answerable & ~supported,
        "wrong": labeled & ~(answerable & supported),
    }
    strata = (
        labels.assign(_labeled=labeled)
        .groupby("stratum", sort=False)
        .agg(decision=("decision", "first"), stratum_size=("stratum_size", "first"),
             sampled=("stratum_sampled", "first"), labeled=("_labeled", "sum"))
        .reset_index()
    )
    order = {name: position for position, name in enumerate(f"{d}/{b}" for d in _DECISIONS for b in ("near", "far"))}
    strata = strata.sort_values("stratum", key=lambda names: names.map(lambda n: order.get(n, len(order))))
    strata = strata.reset_index(drop=True)
    rows = []
    for name, (decision, event, _) in _ESTIMANDS.items():
        block = strata[strata["decision"] == decision]
        positives = [int(events[event][(labels["stratum"] == stratum).to_numpy()].sum()) for stratum in block["stratum"]]
        estimate, low, high = stratified_share(block["stratum_size"], block["labeled"], positives, confidence=confidence)
        rows.append({
            "estimand": name,
            "decision": decision,
            "population": int(block["stratum_size"].sum()),
            "sampled": int(block["sampled"].sum()),
            "labeled": int(block["labeled"].sum()),
            "positives": int(sum(positives)),
            "estimate": estimate,
            "low": low,
            "high": high,
        })
    table = pd.DataFrame(rows)
    verdict = _refusal_verdict(table.iloc[0], confidence, wrong_refusal_limit)
    return ReviewEstimates(table, strata, float(confidence), verdict)


# ----------------------------------------------------------------------------------------------- refitting


def _fit_options(gate) -> dict:
    """:func:`ragcal.gates.fit_gate` options that reproduce ``gate``'s kind and settings."""
    from ..gates import FallbackChain, FloorGapGate, LearnedGate, ThresholdGate

    if isinstance(gate, ThresholdGate):
        return {"signal": gate.signal, "higher_is_answerable": gate.higher_is_answerable,
                "max_passages": gate.max_passages}
    if isinstance(gate, LearnedGate):
        return {"signals": list(gate.signals), "max_passages": gate.max_passages}
    if isinstance(gate, FloorGapGate):
        return {"retriever": gate.retriever, "max_passages": gate.max_passages}
    if isinstance(gate, FallbackChain):
        names = [stage.name for stage in gate.stages]
        first = gate.stages[1 if "rerank" in names else 0].gate
        return {"use_reranker": "rerank" in names, "max_passages": first.max_passages}
    raise TypeError(f"refit_with_labels cannot refit a {type(gate).__name__}")


def _bars(gate, prefix: str = "") -> dict:
    """Every bar of a gate by name, e.g. ``{"threshold": 0.48}`` or ``{"hybrid: dense_top1": 0.6, ...}``."""
    from ..gates import FallbackChain, FloorGapGate

    if isinstance(gate, FallbackChain):
        bars = {}
        for stage in gate.stages:
            bars.update(_bars(stage.gate, f"{stage.name}: "))
        return bars
    if isinstance(gate, FloorGapGate):
        return {f"{prefix}floor": gate.floor, f"{prefix}min_gap": gate.min_gap}
    name = getattr(gate, "signal", "learned score")
    bars = {f"{prefix}{name} threshold": gate.threshold}
    if gate.hedge_below is not None:
        bars[f"{prefix}{name} hedge_below"] = gate.hedge_below
    return bars


def _shares(gate, table: pd.DataFrame) -> dict:
    answered = gate.decide_table(table)["action"].to_numpy(dtype=object) != "refuse"
    answerable = table["answerable"].to_numpy(dtype=bool)
    return {
        "answerable kept": (answered[answerable].mean() if answerable.any() else math.nan, int(answerable.sum())),
        "unanswerable refused": ((~answered[~answerable]).mean() if (~answerable).any() else math.nan,
                                 int((~answerable).sum())),
    }


def refit_with_labels(gate, calibration: pd.DataFrame, labels: pd.DataFrame, *, rule: str | None = None,
                      **options) -> tuple:
    """Refit the same gate kind and rule on the calibration table plus the labeled rows of a review sample.

    Parameters
    ----------
    gate : Gate, or str or Path of a gate file
        From a file, ``rule`` defaults to the file's.
    calibration : DataFrame
        The score table the gate was fitted on (``answerable``, ``slice`` and
        the gate's columns).
    labels : DataFrame
        From :func:`read_review_labels`; its labeled rows, with the gate's
        signal columns that :func:`review_sample` keeps, join the
        calibration rows. Their ``slice`` is the labeled one (``answerable`` or
        ``unanswerable`` where the labeler left it empty).
    rule : str, default=None
        A threshold rule such as ``"keep@0.95"``; the gate file's when None.
    **options
        Override the settings read from the gate (:func:`ragcal.gates.fit_gate` options).

    Returns
    -------
    new_gate : Gate
    comparison : DataFrame
        ``quantity, old, new, n``: every bar of both gates, then the shares of
        answerable questions kept and unanswerable ones refused on the
        calibration table and on the labeled review rows. The review rows are
        a stratified sample weighted towards the bar, so their shares (and
        their weight in the refit) are the sample's, not the live log's.
    """
    from ..calibration.rules import get_rule
    from ..gates import fit_gate, read_gate_file
    from ..score_tables import check_score_table

    if isinstance(gate, (str, Path)):
        document = read_gate_file(gate)
        gate, rule = document["gate"], rule or document.get("rule")
    if not rule:
        raise ValueError("refit_with_labels needs the rule the gate was fitted with (e.g. rule='keep@0.95')")
    if "+" in rule or get_rule(rule).needs_support:
        raise ValueError(f"refit_with_labels refits single threshold rules (keep@, recall_guarantee@, ...); "
                         f"{rule!r} needs support levels or a joint certificate: refit with `ragcal fit-gate`")
    columns = list(gate.columns)
    missing = [column for column in columns if column not in labels.columns]
    if missing:
        raise ValueError(f"the review labels have no column(s) {', '.join(map(repr, missing))}, which the gate reads; "
                         "draw the sample with `ragcal review`, which keeps them")
    rows = labels[labels["labeled"].to_numpy(dtype=bool)]
    if rows.empty:
        raise ValueError("the review file has no labeled row yet: nothing to refit with")
    flags = rows["answerable"].to_numpy(dtype=bool)
    slices = [text.strip() or ("answerable" if flag else "unanswerable") for text, flag in zip(rows["slice"], flags)]
    live = pd.DataFrame({"id": rows["id"].astype(str).to_numpy(), "query": rows["query"].to_numpy(),
                         "answerable": flags, "slice": slices})
    for column in columns:
        live[column] = pd.to_numeric(rows[column], errors="coerce").to_numpy(dtype=float)
    calibration = check_score_table(calibration, columns, source="calibration table")
    keep = [column for column in ("id", "query", "answerable", "slice", *columns) if column in calibration.columns]
    calibration = calibration[keep].assign(slice=calibration["slice"].astype(str))
    combined = pd.concat([calibration, live], ignore_index=True)
    new_gate = fit_gate(combined, gate.type, rule, **{**_fit_options(gate), **options})
    old_bars, new_bars = _bars(gate), _bars(new_gate)
    records = [{"quantity": name, "old": old_bars.get(name, math.nan), "new": new_bars.get(name, math.nan),
                "n": len(combined)} for name in dict.fromkeys([*old_bars, *new_bars])]
    for where, table in (("calibration", calibration), ("review labels", live)):
        old, new = _shares(gate, table), _shares(new_gate, table)
        for name, (share, count) in old.items():
            records.append({"quantity": f"{where}: {name}", "old": share, "new": new[name][0], "n": count})
    return new_gate, pd.DataFrame(records)
