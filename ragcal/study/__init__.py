"""The study: reproduce and extend the published experiment on the bundled corpora.

Everything here exists for our own results (``make reproduce``); a user's own
corpus, score logs or service needs only the library. The library never
imports this package (a test walks the import graph).

- :mod:`~ragcal.study.reproduce`: the main job, ``results/<corpus>/`` and ``results/cross_corpus.md``;
- :mod:`~ragcal.study.report`: the sections of ``summary.md`` set beside the published numbers;
- :mod:`~ragcal.study.published`: the published numbers we set ours beside;
- :mod:`~ragcal.study.golden`: the pinned golden sets of both corpora;
- :mod:`~ragcal.study.labeled_sets`: the keyword check of the bundled labeled sets' near-domain questions;
- :mod:`~ragcal.study.gates`, :mod:`~ragcal.study.learned`, :mod:`~ragcal.study.access`,
  :mod:`~ragcal.study.rerank`: the gate, learned-gate, access-control and reranker studies, each with its
  ``summary.md`` section (the learned gate's in :mod:`~ragcal.study.learned_report`);
- :mod:`~ragcal.study.cross_corpus`: what holds across the two corpora;
- :mod:`~ragcal.study.cross_model`: two embedding models on the same questions (statistics in
  :mod:`~ragcal.study.cross_model_stats`);
- :mod:`~ragcal.study.imported`: a public benchmark (SQuAD 2.0) split by article (statistics in
  :mod:`~ragcal.study.imported_stats`, ``summary.md`` in :mod:`~ragcal.study.imported_report`);
- :mod:`~ragcal.study.notebooks`: the notebook runner;
- :mod:`~ragcal.study.try_signal`: the research loop, a new signal beside ``dense_top1`` on every bundled corpus
  and benchmark (retrieved lists cached by :mod:`~ragcal.study.retrieved_cache`);
- :mod:`~ragcal.study.commands`: the ``reproduce``, ``golden`` and ``try-signal`` commands.
"""
