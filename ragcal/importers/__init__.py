"""Public benchmarks and exported candidate lists, read into ragcal's own formats.

- :mod:`~ragcal.importers.candidates`: questions with their own retrieved
  passages (a candidates JSONL), the shape every reader here produces or
  consumes.
- :mod:`~ragcal.importers.importing`: :func:`import_benchmark`, a public
  benchmark written as a Markdown folder and a labeled query file, with its
  formats in one registry (:data:`BENCHMARK_FORMATS`):
  :mod:`~ragcal.importers.squad2` (the SQuAD 2.0 JSON),
  :mod:`~ragcal.importers.beir` (a BEIR folder) and the candidates JSONL.
- :mod:`~ragcal.importers.writing`: the folder they write, whole or not at all.
"""

from .candidates import (
    CandidateFileError,
    CandidateQuestion,
    CandidateSet,
    Passage,
    passage_pages,
    read_candidates_jsonl,
)
from .importing import BENCHMARK_FORMATS, BenchmarkFormat, import_benchmark
from .writing import BenchmarkFileError, BenchmarkWriter, ImportSummary

__all__ = [
    "Passage",
    "CandidateQuestion",
    "CandidateSet",
    "CandidateFileError",
    "read_candidates_jsonl",
    "passage_pages",
    "import_benchmark",
    "BENCHMARK_FORMATS",
    "BenchmarkFormat",
    "BenchmarkFileError",
    "BenchmarkWriter",
    "ImportSummary",
]
