"""Public benchmarks and exported candidate lists, read into ragcal's own formats.

- :mod:`~ragcal.benchmarks.candidates`: questions with their own retrieved
  passages (a candidates JSONL), the shape every reader here produces or
  consumes.
"""

from .candidates import (
    CandidateFileError,
    CandidateQuestion,
    CandidateSet,
    Passage,
    passage_pages,
    read_candidates_jsonl,
)

__all__ = [
    "Passage",
    "CandidateQuestion",
    "CandidateSet",
    "CandidateFileError",
    "read_candidates_jsonl",
    "passage_pages",
]
