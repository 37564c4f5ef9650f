"""Cold embedding throughput: ragcal's exact batches against a bare sentence-transformers encode, side by side.

    python benchmarks/bench_embedding.py [--passages 400] [--questions 400] [--repeats 2]

Encodes the same texts (FastAPI chunks and SQuAD 2.0 half-A questions) three ways, interleaved in one run so that
the machine's load falls on all of them alike:

- ``bare``: ``SentenceTransformer.encode(texts, batch_size=32)``, the model's own batched speed (not exact: a
  text's vector depends on the texts that share its batch);
- ``ragcal``: :class:`ragcal.embedding.Embedder` with no cache (exact: padded to a length bucket of its own);
- ``one by one``: each text alone, the previous scheme (exact, slow), on the first 100 texts only.

Prints the throughput ratio ragcal / bare (the goal: at least 0.8), the largest difference from the bare vectors,
and whether ragcal's vectors are bitwise identical when the texts are shuffled and batched otherwise.
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np


def texts_to_encode(n_passages: int, n_questions: int) -> dict:
    import pandas as pd

    from ragcal.chunking import chunk_by_headings
    from ragcal.corpus import load_corpus
    from ragcal.datasets import bundled
    from ragcal.study.imported import BENCHMARKS

    spec = bundled("fastapi")
    chunks = chunk_by_headings(load_corpus(spec.corpus, exclude=spec.exclude))
    passages = list(dict.fromkeys(chunk.text for chunk in chunks))
    random.Random(0).shuffle(passages)
    _, queries = BENCHMARKS["squad2-A"].resolve()  # imported once into the cache folder
    questions = list(dict.fromkeys(pd.read_csv(queries)["query"]))
    random.Random(0).shuffle(questions)
    return {"passages": passages[:n_passages], "questions": questions[:n_questions]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=400)
    parser.add_argument("--questions", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=2, help="interleaved repetitions; the best time counts")
    args = parser.parse_args()

    import torch

    from ragcal.embedding import Embedder
    from ragcal.numerics import pinned

    embedder = Embedder(use_cache=False)
    model = embedder.model
    print(
        f"torch {torch.__version__}, kernels {torch.backends.cpu.get_cpu_capability()}, {torch.get_num_threads()} "
        f"threads, pinned environment: {pinned()}"
    )
    for kind, texts in texts_to_encode(args.passages, args.questions).items():
        embedder.encode(texts[:8], show_progress_bar=False)  # warm-up: first calls allocate
        model.encode(texts[:8], batch_size=32)
        best = {"bare": np.inf, "ragcal": np.inf, "one by one": np.inf}
        for _ in range(args.repeats):
            start = time.perf_counter()
            bare = model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
            best["bare"] = min(best["bare"], time.perf_counter() - start)
            start = time.perf_counter()
            ours = embedder.encode(texts, show_progress_bar=False)
            best["ragcal"] = min(best["ragcal"], time.perf_counter() - start)
            start = time.perf_counter()
            for text in texts[:100]:
                model.encode([text], batch_size=1, normalize_embeddings=True, convert_to_numpy=True)
            best["one by one"] = min(best["one by one"], (time.perf_counter() - start) * len(texts) / min(100, len(texts)))
        order = list(range(len(texts)))
        random.Random(1).shuffle(order)
        shuffled = Embedder(use_cache=False, tokens_per_batch=1000).encode([texts[i] for i in order], show_progress_bar=False)
        identical = shuffled.tobytes() == ours[order].tobytes()
        print(
            f"{kind}: {len(texts)} texts; bare {best['bare']:.1f} s, ragcal {best['ragcal']:.1f} s, one by one "
            f"{best['one by one']:.1f} s (extrapolated from 100); throughput ragcal / bare "
            f"{best['bare'] / best['ragcal']:.2f}x, ragcal / one by one {best['one by one'] / best['ragcal']:.2f}x; "
            f"max |ragcal - bare| {np.abs(ours - bare).max():.1e}; shuffled and rebatched bitwise identical: {identical}"
        )


if __name__ == "__main__":
    main()
