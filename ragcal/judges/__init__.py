"""Judges: read the question against each retrieved passage and say whether the passage answers it.

- :mod:`~ragcal.judges.protocol`: the :class:`Judge` protocol, question keys and the leakage check;
- :mod:`~ragcal.judges.cross_encoder`: :class:`CrossEncoderJudge`, any sentence-transformers cross-encoder;
- :mod:`~ragcal.judges.pairs`: training pairs from a labeled set and its retrieval results;
- :mod:`~ragcal.judges.training`: :func:`train_judge`, fine-tuning from the bundled MiniLM on CPU;
- :mod:`~ragcal.judges.trained`: :class:`TrainedJudge`, a judge folder loaded back;
- :mod:`~ragcal.judges.llm`: :class:`LLMJudge`, an OpenAI-compatible endpoint asked for a verdict;
- :mod:`~ragcal.judges.results`: :func:`judge_results`, the ``"judge"`` view the judge signals read, and
  :class:`JudgeReader` and :func:`judge_reader`, the judge as a reader after retrieval;
- :mod:`~ragcal.judges.loading`: :func:`load_judge` (a folder or a name), :func:`judge_config` (its provenance);
- :mod:`~ragcal.judges.labeled_pairs`: training pairs from a labeled query file and a corpus, or candidates;
- :mod:`~ragcal.judges.crossfit`: :func:`crossfit_judge_results`, judge scores no question was trained on.
"""

from .cross_encoder import CrossEncoderJudge
from .crossfit import crossfit_judge_results
from .labeled_pairs import candidate_judge_pairs, corpus_judge_pairs
from .llm import LLMJudge
from .loading import judge_config, load_judge
from .pairs import judge_pairs
from .protocol import Judge, JudgeLeakageError, check_not_trained_on, question_key
from .results import JUDGE, JudgeReader, judge_reader, judge_results
from .trained import JudgeFileError, TrainedJudge
from .training import JudgeTraining, JudgeWarning, train_judge

__all__ = [
    "Judge",
    "JudgeLeakageError",
    "JudgeFileError",
    "CrossEncoderJudge",
    "LLMJudge",
    "TrainedJudge",
    "JudgeTraining",
    "JudgeWarning",
    "JUDGE",
    "JudgeReader",
    "judge_reader",
    "judge_pairs",
    "train_judge",
    "judge_results",
    "question_key",
    "check_not_trained_on",
    "load_judge",
    "judge_config",
    "corpus_judge_pairs",
    "candidate_judge_pairs",
    "crossfit_judge_results",
]
