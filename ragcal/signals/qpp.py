"""Query-performance predictors (QPP) as gating signals: clarity, WIG, NQC, SMV, σ_k, n(σ_x%), perturbation stability.

A query-performance predictor estimates, without relevance judgments, how
well a retriever did on a query. A question the corpus does not cover tends
to get a poor list, so each predictor is also a candidate "I don't know"
signal. Importing :mod:`ragcal.signals` imports this module, so every
predictor below is a column of every score table.

Each signal is registered with :func:`ragcal.signals.register_batch_signal`
for the dense retriever and for BM25 without stop words (``bm25_stopwords``,
the variant the papers' stopped collections correspond to and the one fused
with dense), where its formula applies:

==========================  ==========================================================  ========  ==================
signal                      formula (top-k scores ``s(d)``, best first)                 default   paper
==========================  ==========================================================  ========  ==================
``*_nqc*``                  ``std_k(s) / |s(C)|``                                       k = 100   Shtok et al. 2012
``*_wig*``                  ``(1/k) Σ_k (s(d) - s(C)) / sqrt(|q|)``                     k = 5     Zhou & Croft 2007
``*_smv*``                  ``(1/k) Σ_k s(d) |ln(s(d)/μ_k)| / |s(C)|``                  k = 100   Tao & Wu 2014
``*_sigma100*``             ``std_k(s)``                                                k = 100   Pérez-Iglesias & Araujo 2010
``*_sigma50pct*``           ``std(s(d) : s(d) >= x s(d_1)) / sqrt(|q|)``                x = 50%   Cummins et al. 2011
``bm25_clarity_stopwords``  ``Σ_w P(w|Q) log2(P(w|Q) / P_coll(w))``                     k = 10    Cronen-Townsend et al. 2002
``dense_perturbation_*``    mean Jaccard of the top 10 under noisy query embeddings     10 × 0.1  Arabzadeh et al.
==========================  ==========================================================  ========  ==================

The corpus score ``s(C)`` and every other corpus statistic come from the
``info`` that :mod:`ragcal.retrieval.diagnostics` computed from the retriever
object that produced the result, never from a global corpus: on an access
view they describe the visible chunks only. Dense: ``s(C)`` is the cosine
between the query and the corpus centroid (``info["centroid_cosine"]``, the
``dense_centroid_cosine`` signal), and ``|q| = 1`` (a cosine does not grow
with the query's length the way a sum over query terms does). BM25: ``s(C)``
is the BM25 score of the collection treated as one document and ``|q|`` the
number of query tokens the score sums (``info["corpus_score"]``,
``info["query_terms"]``; see :mod:`ragcal.retrieval.diagnostics.bm25_statistics`).

Conventions, the same for every predictor:

- fewer than ``k`` results: the formula over the results there are (the mean
  and standard deviation of what was retrieved);
- a population standard deviation (``ddof=0``), as the papers write it; one
  result, or all scores equal, gives 0;
- nothing retrieved: NaN for dense (no list to judge, as ``dense_top10_std``),
  0 for BM25 (nothing matched: the lowest prediction, as ``bm25_top1_*``),
  except that a BM25 predictor that reads ``info`` (all but σ_k) is NaN when
  the query has no token at all or the result carries no diagnostics;
- ``s(C) = 0`` (or NaN) makes NQC and SMV NaN; a NaN score propagates;
- the papers' scores are query likelihoods, negative logs with ``s(C) < 0``;
  NQC divides by ``|s(C)|`` as Shtok et al. write it, and SMV by ``|s(C)|``
  too, which equals Tao & Wu's ``s(C)`` for BM25 (``s(C) > 0``) and keeps a
  dense query whose centroid cosine is negative from flipping sign. WIG is a
  difference and takes ``s(C)`` with its sign.

All are oriented as in the literature: a larger value predicts a better
retrieval, so ``higher_is_answerable=True`` for every one.

References
----------
- S. Cronen-Townsend, Y. Zhou, W. B. Croft. Predicting query performance. SIGIR 2002.
- Y. Zhou, W. B. Croft. Query performance prediction in web search environments. SIGIR 2007.
- A. Shtok, O. Kurland, D. Carmel, F. Raiber, G. Markovits. Predicting query performance by query-drift
  estimation. ACM TOIS 30(2), 2012.
- Y. Tao, S. Wu. Query performance prediction by considering score magnitude and variance together. CIKM 2014.
- J. Pérez-Iglesias, L. Araujo. Standard deviation as a query hardness estimator. SPIRE 2010.
- R. Cummins, J. Jose, C. O'Riordan. Improved query performance prediction using standard deviation. SIGIR 2011.
- N. Arabzadeh et al. Noisy perturbations for estimating query difficulty in dense retrievers.
"""

from __future__ import annotations

import numpy as np

from .batch import ResultBatch, by_length
from .registry import register_batch_signal

__all__ = ["NQC_DEPTH", "WIG_DEPTH", "SMV_DEPTH", "SIGMA_DEPTH", "SIGMA_SHARE", "QPP_SIGNALS"]

#: Top-k of NQC (Shtok et al. 2012: k = 100).
NQC_DEPTH = 100
#: Top-k of WIG (Zhou & Croft 2007: k = 5 for query-likelihood retrieval).
WIG_DEPTH = 5
#: Top-k of SMV (Tao & Wu 2014: k = 100).
SMV_DEPTH = 100
#: Top-k of σ_k (100, the depth of NQC and SMV, so the three differ by their normalisation only).
SIGMA_DEPTH = 100
#: x of n(σ_x%): the scores kept are those at least this share of the top score (Cummins et al. 2011: 50%).
SIGMA_SHARE = 0.5

_DENSE = "dense"
_BM25 = "bm25_stopwords"


# Shared pieces.


def _depth(batch: ResultBatch, retriever: str, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(scores, lengths)``: each query's ``k`` best scores, NaN-padded, and how many of them there are."""
    return batch.top_scores(retriever, k), np.minimum(batch.lengths(retriever), k)


def _std(scores: np.ndarray) -> np.ndarray:
    return scores.std(axis=1)


def _corpus_score(batch: ResultBatch, retriever: str) -> np.ndarray:
    """``s(C)`` of each query: the centroid cosine for dense, the collection's BM25 score for BM25."""
    return batch.info(retriever, "centroid_cosine" if retriever == _DENSE else "corpus_score")


def _query_length(batch: ResultBatch, retriever: str) -> np.ndarray:
    """``|q|``: 1 for dense, the number of query tokens the BM25 score sums for BM25."""
    if retriever == _DENSE:
        return np.ones(len(batch))
    return batch.info(retriever, "query_terms")


def _normalised(values: np.ndarray, corpus: np.ndarray) -> np.ndarray:
    """``values / |s(C)|``; NaN where ``s(C)`` is 0 or NaN."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.abs(corpus) > 0, values / np.abs(corpus), np.nan)


def _nothing_retrieved(values: np.ndarray, batch: ResultBatch, retriever: str, needed=None) -> np.ndarray:
    """For BM25, 0 where nothing matched (NaN kept where ``needed``, an info value, is NaN); dense stays NaN."""
    if retriever == _DENSE:
        return values
    empty = batch.lengths(retriever) == 0
    if needed is not None:
        empty &= ~np.isnan(needed)
    return np.where(empty, 0.0, values)


# The formulas, for one retriever.


def nqc(batch: ResultBatch, retriever: str, *, k: int = NQC_DEPTH) -> np.ndarray:
    """Normalized Query Commitment: ``std(top-k scores) / |s(C)|`` (Shtok et al., TOIS 2012)."""
    scores, lengths = _depth(batch, retriever, k)
    corpus = _corpus_score(batch, retriever)
    return _nothing_retrieved(_normalised(by_length(scores, lengths, _std), corpus), batch, retriever, corpus)


def wig(batch: ResultBatch, retriever: str, *, k: int = WIG_DEPTH) -> np.ndarray:
    """Weighted Information Gain: ``(1/k) Σ_{top k} (s(d) - s(C)) / sqrt(|q|)`` (Zhou & Croft, SIGIR 2007)."""
    scores, lengths = _depth(batch, retriever, k)
    corpus = _corpus_score(batch, retriever)
    gain = by_length(scores - corpus[:, None], lengths, lambda rows: rows.mean(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        values = gain / np.sqrt(_query_length(batch, retriever))
    return _nothing_retrieved(values, batch, retriever, corpus)


def _magnitude_variance(rows: np.ndarray) -> np.ndarray:
    """``(1/k) Σ s |ln(s / μ)|`` of each row; NaN where the scores are not all of one sign (the log is undefined)."""
    mean = rows.mean(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = rows / mean
        terms = np.where(rows == 0, 0.0, rows * np.abs(np.log(ratio)))  # s ln s -> 0 as s -> 0
    values = terms.mean(axis=1)
    mixed = (ratio < 0).any(axis=1) | ((mean[:, 0] == 0) & (rows != 0).any(axis=1))
    return np.where(mixed, np.nan, values)


def smv(batch: ResultBatch, retriever: str, *, k: int = SMV_DEPTH) -> np.ndarray:
    """Score Magnitude and Variance: ``(1/k) Σ_{top k} s(d) |ln(s(d)/μ)| / |s(C)|`` (Tao & Wu, CIKM 2014)."""
    scores, lengths = _depth(batch, retriever, k)
    corpus = _corpus_score(batch, retriever)
    values = _normalised(by_length(scores, lengths, _magnitude_variance), corpus)
    return _nothing_retrieved(values, batch, retriever, corpus)


def sigma_k(batch: ResultBatch, retriever: str, *, k: int = SIGMA_DEPTH) -> np.ndarray:
    """σ_k: the standard deviation of the top-k scores (Pérez-Iglesias & Araujo, SPIRE 2010)."""
    scores, lengths = _depth(batch, retriever, k)
    return _nothing_retrieved(by_length(scores, lengths, _std), batch, retriever)


def sigma_share(batch: ResultBatch, retriever: str, *, share: float = SIGMA_SHARE) -> np.ndarray:
    """n(σ_x%): std of the scores at least ``share`` of the top score, over ``sqrt(|q|)`` (Cummins et al. 2011).

    The scores are those of the retrieved list (the retrieval depth, 100 by
    default), which is where it is cut when more than that many chunks clear
    the bar. NaN when the top score is not positive (a share of it is then no
    bar).
    """
    scores = batch.scores(retriever)
    lengths = batch.lengths(retriever)
    top = scores[:, 0] if scores.shape[1] else np.full(len(batch), np.nan)
    with np.errstate(invalid="ignore"):
        kept = (scores >= share * top[:, None]).sum(axis=1)  # a prefix: the scores are non-increasing
    spread = by_length(scores, kept, _std)
    with np.errstate(divide="ignore", invalid="ignore"):
        values = np.where(top > 0, spread / np.sqrt(_query_length(batch, retriever)), np.nan)
    within = np.arange(scores.shape[1]) < lengths[:, None]
    values[(np.isnan(scores) & within).any(axis=1)] = np.nan  # a NaN score propagates, as in the other predictors
    return _nothing_retrieved(values, batch, retriever, _query_length(batch, retriever))


# Dense.


@register_batch_signal("dense_nqc", retrievers=(_DENSE,))
def dense_nqc(batch):
    """NQC of the dense list: std of the top 100 cosines over |cosine to the corpus centroid| (Shtok et al. 2012).

    ``std_{d in top k} s(d) / |s(C)|``, k = 100, population standard deviation;
    ``s(C)`` is ``info["centroid_cosine"]`` of the retriever that searched the
    query. NaN with no hit or when ``s(C)`` is 0 or missing.
    """
    return nqc(batch, _DENSE)


@register_batch_signal("dense_wig", retrievers=(_DENSE,))
def dense_wig(batch):
    """WIG of the dense list: mean of the top 5 cosines minus the cosine to the corpus centroid (Zhou & Croft 2007).

    ``(1/k) Σ_{d in top k} (s(d) - s(C)) / sqrt(|q|)`` with k = 5, ``s(C)`` the
    centroid cosine and ``|q| = 1`` (a cosine does not sum over query terms).
    Over the hits there are when fewer than five; NaN with none.
    """
    return wig(batch, _DENSE)


@register_batch_signal("dense_smv", retrievers=(_DENSE,))
def dense_smv(batch):
    """SMV of the dense list: ``(1/k) Σ s(d) |ln(s(d)/μ)| / |s(C)|`` over the top 100 cosines (Tao & Wu 2014).

    μ is the mean of the top-k cosines, ``s(C)`` the centroid cosine. NaN
    when the top cosines are not all of one sign, when ``s(C)`` is 0 or
    missing, or with no hit.
    """
    return smv(batch, _DENSE)


@register_batch_signal("dense_sigma100", retrievers=(_DENSE,))
def dense_sigma100(batch):
    """σ_100 of the dense list: standard deviation of the top 100 cosines (Pérez-Iglesias & Araujo 2010).

    Unnormalised NQC; NaN with no hit.
    """
    return sigma_k(batch, _DENSE)


@register_batch_signal("dense_sigma50pct", retrievers=(_DENSE,))
def dense_sigma50pct(batch):
    """n(σ_50%) of the dense list: std of the cosines at least half the top cosine (Cummins et al. 2011).

    ``|q| = 1`` for dense, so no length normalisation. Over the retrieved list
    (top 100); NaN when the top cosine is not positive or with no hit.
    """
    return sigma_share(batch, _DENSE)


@register_batch_signal("dense_perturbation_jaccard", retrievers=(_DENSE,))
def dense_perturbation_jaccard(batch):
    """Stability of the dense top 10 under noisy query embeddings (after Arabzadeh et al.): mean Jaccard overlap.

    For perturbed queries ``q + e_p`` (``PERTURBATIONS`` = 10 Gaussian noise
    vectors of length about ``PERTURBATION_NOISE`` = 0.1, drawn once from a
    fixed seed and shared by every query), the mean over ``p`` of
    ``|T ∩ T_p| / |T ∪ T_p|`` with ``T`` the original top 10 and ``T_p`` the
    perturbed one, re-ranked among the original top 100 (see
    ``info["perturbation_jaccard"]`` in :mod:`ragcal.retrieval.diagnostics.perturbation`,
    computed from the retriever that searched the query). Between 0 and 1; a
    query whose best chunks stand clear of the rest keeps them. NaN without
    the diagnostic or with no hit.
    """
    return batch.info(_DENSE, "perturbation_jaccard")


# BM25 (no stop words).


@register_batch_signal("bm25_nqc_stopwords", retrievers=(_BM25,))
def bm25_nqc_stopwords(batch):
    """NQC of BM25 without stop words: std of the top 100 scores over the collection's BM25 score (Shtok et al.).

    ``std_{d in top k} s(d) / |s(C)|``, k = 100, with ``s(C)`` the BM25 score
    of the whole collection as one document (``info["corpus_score"]``). 0 when
    nothing matched, NaN for a query with no token or when ``s(C)`` is 0.
    """
    return nqc(batch, _BM25)


@register_batch_signal("bm25_wig_stopwords", retrievers=(_BM25,))
def bm25_wig_stopwords(batch):
    """WIG of BM25 without stop words: ``(1/k) Σ_{top 5} (s(d) - s(C)) / sqrt(|q|)`` (Zhou & Croft 2007).

    ``s(C)`` the collection's BM25 score, ``|q|`` the number of query tokens
    that occur in the corpus (``info["query_terms"]``). 0 when nothing
    matched, NaN for a query with no token.
    """
    return wig(batch, _BM25)


@register_batch_signal("bm25_smv_stopwords", retrievers=(_BM25,))
def bm25_smv_stopwords(batch):
    """SMV of BM25 without stop words: ``(1/k) Σ_{top 100} s(d) |ln(s(d)/μ)| / s(C)`` (Tao & Wu 2014).

    0 when nothing matched; NaN for a query with no token, when ``s(C)`` is 0,
    or when the top scores are not all of one sign (negative IDF floors).
    """
    return smv(batch, _BM25)


@register_batch_signal("bm25_sigma100_stopwords", retrievers=(_BM25,))
def bm25_sigma100_stopwords(batch):
    """σ_100 of BM25 without stop words: standard deviation of the top 100 scores (Pérez-Iglesias & Araujo 2010).

    0 when nothing matched.
    """
    return sigma_k(batch, _BM25)


@register_batch_signal("bm25_sigma50pct_stopwords", retrievers=(_BM25,))
def bm25_sigma50pct_stopwords(batch):
    """n(σ_50%) of BM25 without stop words: std of the scores ≥ half the top one, over sqrt(|q|) (Cummins et al.).

    Over the retrieved list (top 100); 0 when nothing matched, NaN for a query
    with no token or a top score that is not positive.
    """
    return sigma_share(batch, _BM25)


@register_batch_signal("bm25_clarity_stopwords", retrievers=(_BM25,))
def bm25_clarity_stopwords(batch):
    """Clarity of BM25 without stop words: KL divergence (bits) of the top-10 query model from the collection's.

    Cronen-Townsend, Zhou & Croft (SIGIR 2002):
    ``Σ_w P(w|Q) log2(P(w|Q) / P_coll(w))`` over the terms ``w`` of the top
    ``CLARITY_DEPTH`` = 10 chunks, with

    - ``P(w|Q) = Σ_{D in top k} P(w|D) P(D|Q)`` (a relevance model, RM1),
    - ``P(w|D) = λ tf(w,D)/|D| + (1 - λ) P_coll(w)``, Jelinek-Mercer, λ = 0.6
      as in the paper, ``P_coll(w) = cf(w)/|C|``,
    - ``P(D|Q) ∝ P(Q|D) = Π_{q in Q} P(q|D)`` over the query's tokens that
      occur in the corpus (a uniform document prior), normalised over the top
      k: the query likelihood the BM25 retriever's own term statistics give,
      not the BM25 scores (which are not probabilities).

    k = 10, not the paper's larger retrieved set: the chunks here are
    passages, ten of them a few pages' worth, and the query model of a
    hundred chunks costs ten times as much for every batch. The term
    frequencies, lengths and collection counts are those of the retriever
    that scored the query (``info["clarity"]``), so an access view's clarity
    never counts a hidden chunk. 0 when nothing matched, NaN for a query with
    no token.
    """
    return batch.info(_BM25, "clarity")


#: The signals this module registers, in registration order.
QPP_SIGNALS = (
    "dense_nqc",
    "dense_wig",
    "dense_smv",
    "dense_sigma100",
    "dense_sigma50pct",
    "dense_perturbation_jaccard",
    "bm25_nqc_stopwords",
    "bm25_wig_stopwords",
    "bm25_smv_stopwords",
    "bm25_sigma100_stopwords",
    "bm25_sigma50pct_stopwords",
    "bm25_clarity_stopwords",
)
