"""Cross-encoder scoring with each pair tokenized twice (before) and once (now), side by side, with the same bits.

    python benchmarks/bench_rerank_tokens.py [--base COMMIT] [--pairs-per-question 50] [--repeats 3]

:func:`ragcal.retrieval.rerank.cross_encoder_logits` runs pairs in batches of one padded length. It used to tokenize
every pair twice: once for its length, then again in its batch, padded. It now pads the first tokenization
(``tokenizer.pad``): a pair's tokens truncated at the model's maximum are its tokens at any padded length of at least
its own. The reranker and the judges both score through it.

Each run is a fresh process that scores, with the tiny random cross-encoder of the study's reranker stage
(:func:`ragcal.retrieval.rerank.build_tiny_cross_encoder`, no cache), the FastAPI labeled questions each paired with a
seeded sample of the bundled docs' chunks (no embedding needed): the code of ``--base`` in a git worktree, then this
checkout's, alternating. Prints the seconds of each run (scoring alone, after the model is built), the medians'
ratio (now / before), and whether the two score arrays are the same bits. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from worktree import ROOT, worktree

from ragcal.numerics import PINNED_ENVIRONMENT

RUN = """
import sys, tempfile, time
from pathlib import Path
import numpy as np
from ragcal.datasets import BUNDLED
from ragcal.queries import load_queries
from ragcal.retrieval.index import chunk_corpus
from ragcal.retrieval.rerank import CrossEncoderReranker, build_tiny_cross_encoder

per_question, out = int(sys.argv[1]), sys.argv[2]
spec = BUNDLED["fastapi"]
_, chunks, _ = chunk_corpus(spec.corpus, exclude=spec.exclude)
rng = np.random.default_rng(0)
pairs = [(question, chunks[position].text) for question in load_queries(spec.queries)["query"]
         for position in rng.choice(len(chunks), per_question, replace=False)]
with tempfile.TemporaryDirectory() as folder:
    ranker = CrossEncoderReranker(str(build_tiny_cross_encoder(Path(folder) / "tiny")), use_cache=False)
    ranker.score_pairs(pairs[:32])
    started = time.perf_counter()
    scores = ranker.score_pairs(pairs)
    print(time.perf_counter() - started, len(pairs))
np.save(out, scores)
"""


def run(source: Path, per_question: int, out: Path) -> tuple[float, int]:
    # The tree is the working folder too: an editable install's finder would otherwise import this checkout's ragcal.
    env = {**os.environ, **PINNED_ENVIRONMENT, "PYTHONPATH": str(source)}
    command = [sys.executable, "-c", RUN, str(per_question), str(out)]
    result = subprocess.run(command, env=env, check=True, capture_output=True, text=True, cwd=source)
    seconds, n_pairs = result.stdout.split()
    return float(seconds), int(n_pairs)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="07fac1f", help="the commit that tokenized twice")
    parser.add_argument("--pairs-per-question", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args(argv)
    times = {"before": [], "now": []}
    with worktree(options.base) as base, tempfile.TemporaryDirectory() as folder:
        sources = {"before": base, "now": ROOT}
        for repeat in range(options.repeats):
            for way, source in sources.items():
                seconds, n_pairs = run(source, options.pairs_per_question, Path(folder) / f"{way}.npy")
                times[way].append(seconds)
                print(f"{way:>6} run {repeat + 1}: {seconds:.2f} s for {n_pairs:,} pairs", flush=True)
        before, now = (np.load(Path(folder) / f"{way}.npy") for way in ("before", "now"))
    medians = {way: statistics.median(values) for way, values in times.items()}
    ratio = medians["now"] / medians["before"]
    print(f"medians: before {medians['before']:.2f} s, now {medians['now']:.2f} s, ratio {ratio:.2f}")
    print(f"the same bits: {before.tobytes() == now.tobytes()} ({len(now):,} scores)")


if __name__ == "__main__":
    main()
