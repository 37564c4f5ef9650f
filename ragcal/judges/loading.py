"""A judge from what a user names (a judge folder, a cross-encoder folder or Hub name), and what provenance records.

::

    judge = load_judge("judge/")                      # a folder ragcal train-judge wrote: a TrainedJudge
    judge = load_judge("cross-encoder/ms-marco-MiniLM-L6-v2")   # anything else: a CrossEncoderJudge
    judge_config(judge, depth=10)                     # {"judge": ..., "judge_fingerprint": ..., "judge_depth": 10}

:func:`ragcal.retrieval.index.build_index` and
:func:`ragcal.candidate_scoring.score_candidates` take a judge as a reader
(``readers=[judge_reader(...)]``, :mod:`ragcal.judges.results`), and write :func:`judge_config` into the score
table's provenance, from which a gate file learns which judge's scale its
thresholds are on.
"""

from __future__ import annotations

from pathlib import Path

from .._params import check_int, parameter_error
from .protocol import Judge

__all__ = ["load_judge", "judge_config"]


def load_judge(judge, *, cache_dir=None, use_cache: bool = True) -> Judge:
    """The judge ``judge`` names, or ``judge`` itself when it already is one.

    Parameters
    ----------
    judge : Judge, str or Path
        A :class:`~ragcal.judges.protocol.Judge` (returned as it is); a folder
        with a ``judge.json`` (written by ``ragcal train-judge``): a
        :class:`~ragcal.judges.trained.TrainedJudge`; any other folder or a
        Hugging Face Hub name: a :class:`~ragcal.judges.cross_encoder.CrossEncoderJudge`.
    cache_dir : str or Path, default=None
        The judge's score cache folder (the embedding cache's when None).
    use_cache : bool, default=True

    Returns
    -------
    Judge

    Raises
    ------
    JudgeFileError
        A judge folder whose judge.json is malformed.
    TypeError
        ``judge`` is neither a judge nor a str or Path.
    """
    if isinstance(judge, (str, Path)):
        from .trained import TrainedJudge, is_judge_folder

        if is_judge_folder(judge):
            return TrainedJudge(judge, cache_dir=cache_dir, use_cache=use_cache)
        from .cross_encoder import CrossEncoderJudge

        return CrossEncoderJudge(str(judge), cache_dir=cache_dir, use_cache=use_cache)
    if not isinstance(judge, Judge):
        raise parameter_error(
            "judge",
            "load_judge",
            "a Judge (name, fingerprint, trained_on, score), a judge folder or a cross-encoder name",
            type(judge).__name__,
            error=TypeError,
        )
    return judge


def judge_config(judge, *, depth: int = 10) -> dict:
    """Provenance of a judge: ``judge`` (what names it), ``judge_fingerprint`` and ``judge_depth``.

    A judge with ``to_dict()`` (the shipped ones) adds what it records there
    (a trained judge: how many questions trained it); any other judge is
    named by its ``name``.
    """
    depth = check_int(depth, "depth", "judge_config", low=1)
    recorded = judge.to_dict() if callable(getattr(judge, "to_dict", None)) else {}
    return {
        "judge": str(judge.name),
        **recorded,
        "judge_fingerprint": str(judge.fingerprint),
        "judge_depth": depth,
    }

