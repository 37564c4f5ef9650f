"""Warm start benchmark: load a saved index and answer one question, against the bare minimum of any dense gate.

Run with ``.venv/bin/python benchmarks/bench_warm_start.py [--chunks 200000] [--repeats 3] [--kinds flat,hnsw]``.
Everything runs in fresh processes, interleaved, and the script prints ratios; nothing is asserted.

- **bare minimum**: a Python process that imports sentence-transformers, loads MiniLM and encodes one question.
  No gate can answer faster than that, whatever it stores.
- **warm start**: a Python process that calls ``build_index`` on a corpus whose index an earlier run saved
  (:mod:`ragcal.retrieval.store`), then ``ask(gate, index, [question])``: retrieval with every retriever, the
  per-query diagnostics, the signals and one decision (refusal message included). The goal: at most 2x the bare
  minimum at 200,000 chunks, for exact (flat) and HNSW search.
- **rebuild** (what every start cost before the index was saved): the same process with ``persist=False``, which
  chunks the pages, reads every vector from the embedding cache and builds BM25 and faiss again. Measured once for
  flat; for HNSW the cold build's time stands for it (the graph is the slow part, and it was rebuilt every time).

The large corpus is synthetic Markdown: pages of eight sections whose words are drawn (seeded) from the bundled
FastAPI docs' vocabulary with their frequencies. Embedding 200,000 chunks with MiniLM would take hours here, so
their vectors are clustered synthetic unit vectors (``ragcal.retrieval.approximate.synthetic_corpus``) written into
a private embedding cache under MiniLM's real cache key: the index build reads them as it would read real ones,
and the question is still encoded by the real model. The bundled FastAPI docs are measured too, with their real
embeddings (the user's cache).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

QUESTION = "How do I set a cookie on the response?"

BARE = """
import sentence_transformers
from ragcal.embedding import resolve_model
model = sentence_transformers.SentenceTransformer(resolve_model().location, device="cpu")
model.encode([{question!r}], normalize_embeddings=True)
"""

WARM = """
import time
start = time.perf_counter()
from ragcal.gates import ThresholdGate, ask
from ragcal.retrieval.index import build_index
index = build_index({corpus!r}, cache_dir={cache!r}, dense_index={kind!r}, exclude={exclude!r}, persist={persist!r})
loaded = time.perf_counter()
decisions, _ = ask(ThresholdGate("dense_top1", threshold=0.5), index, [{question!r}])
done = time.perf_counter()
print(f"PHASES {{loaded - start:.3f}} {{done - loaded:.3f}} {{len(index.chunks)}} {{decisions[0].action}}")
"""


def run(code: str) -> tuple[float, str]:
    start = time.perf_counter()
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if completed.returncode != 0:
        raise RuntimeError(f"benchmark process failed:\n{completed.stderr[-3000:]}")
    return seconds, completed.stdout


def phases(stdout: str) -> str:
    line = next(line for line in stdout.splitlines() if line.startswith("PHASES"))
    load, answer, n_chunks, action = line.split()[1:]
    return f"(load {float(load):.2f} s, answer {float(answer):.2f} s, {int(n_chunks):,} chunks, {action})"


def synthetic_markdown(folder: Path, n_sections: int, *, random_state: int = 0) -> None:
    """Pages of eight ``##`` sections of 20-120 words drawn from the FastAPI vocabulary (seeded)."""
    from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE
    from ragcal.retrieval.bm25 import tokenize
    from ragcal.retrieval.index import chunk_corpus

    rng = np.random.default_rng(random_state)
    chunks = chunk_corpus(FASTAPI_CORPUS, exclude=FASTAPI_EXCLUDE)[1]
    frequencies = Counter(token for chunk in chunks for token in tokenize(chunk.text) if token.isalpha())
    words = np.array(list(frequencies))
    counts = np.array([frequencies[word] for word in words], dtype=float)
    lengths = rng.integers(20, 120, size=n_sections)
    drawn = words[rng.choice(len(words), size=int(lengths.sum()), p=counts / counts.sum())]
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    per_page = 8
    for page in range(0, n_sections, per_page):
        sections = [
            f"## Section {section - page + 1} {drawn[bounds[section]]}\n\n"
            + " ".join(drawn[bounds[section] : bounds[section + 1]])
            for section in range(page, min(page + per_page, n_sections))
        ]
        path = folder / f"part{page // 20_000:02d}" / f"page{page // per_page:06d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Page {page // per_page}\n\n" + "\n\n".join(sections) + "\n", encoding="utf-8")


def prefill_cache(corpus: Path, cache: Path) -> None:
    """Write a synthetic vector for every chunk of ``corpus`` into a private cache, under MiniLM's cache key."""
    from ragcal.embedding import Embedder, EmbeddingCache
    from ragcal.retrieval.approximate import synthetic_corpus
    from ragcal.retrieval.index import chunk_corpus

    chunks = chunk_corpus(corpus)[1]
    vectors = synthetic_corpus(len(chunks), 1).embeddings.astype(np.float32)
    store = EmbeddingCache(cache / "embeddings.sqlite")
    key = Embedder(cache_dir=cache).cache_key
    texts = [chunk.text for chunk in chunks]
    for start in range(0, len(texts), 10_000):
        store.put(key, texts[start : start + 10_000], vectors[start : start + 10_000])
    store.close()


def compare(label: str, corpus: str, cache: str | None, kinds, repeats: int, *, exclude=(), rebuild=True) -> None:
    bare_code = BARE.format(question=QUESTION)

    def warm_code(kind, persist=True):
        return WARM.format(
            corpus=corpus, cache=cache, kind=kind, exclude=tuple(exclude), persist=persist, question=QUESTION
        )

    print(f"\n== {label}")
    for kind in kinds:
        seconds, _ = run(warm_code(kind))  # the first call builds and saves (or finds) the index
        print(f"  {kind}: first build (saves the index) {seconds:.1f} s")
    times = {"bare": []} | {kind: [] for kind in kinds}
    details = {}
    for _ in range(repeats):  # interleaved, so that load from other processes hits every variant alike
        times["bare"].append(run(bare_code)[0])
        for kind in kinds:
            seconds, stdout = run(warm_code(kind))
            times[kind].append(seconds)
            details[kind] = phases(stdout)
    bare = statistics.median(times["bare"])
    print(
        f"  bare minimum (import sentence-transformers, load MiniLM, encode one question): {bare:.2f} s "
        f"(median of {repeats})"
    )
    for kind in kinds:
        warm = statistics.median(times[kind])
        print(
            f"  {kind}: load the saved index + answer one question: {warm:.2f} s = {warm / bare:.2f}x the bare "
            f"minimum (goal: at most 2x) {details[kind]}"
        )
    if rebuild and "flat" in kinds:
        seconds, stdout = run(warm_code("flat", persist=False))
        print(
            f"  flat, rebuilt from the embedding cache instead (persist=False): {seconds:.2f} s = "
            f"{seconds / bare:.2f}x {phases(stdout)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=200_000, help="sections of the synthetic corpus")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--kinds", default="flat,hnsw")
    parser.add_argument("--skip-bundled", action="store_true")
    parser.add_argument(
        "--workdir", help="keep the synthetic corpus, its vectors and saved indexes here (reused by the next run)"
    )
    args = parser.parse_args()
    kinds = args.kinds.split(",")

    if not args.skip_bundled:
        from ragcal.datasets import FASTAPI_CORPUS, FASTAPI_EXCLUDE

        compare(
            "bundled FastAPI docs (real embeddings, the user's cache)",
            str(FASTAPI_CORPUS),
            None,
            ["flat"],
            args.repeats,
            exclude=FASTAPI_EXCLUDE,
        )

    with tempfile.TemporaryDirectory(prefix="ragcal-warm-") as temporary:
        folder = Path(args.workdir or temporary)
        corpus, cache = folder / f"docs{args.chunks}", folder / f"cache{args.chunks}"
        start = time.perf_counter()
        if not (cache / "embeddings.sqlite").is_file():  # a --workdir kept from an earlier run has both already
            shutil.rmtree(corpus, ignore_errors=True)
            synthetic_markdown(corpus, args.chunks)
            prefill_cache(corpus, cache)
        n_pages = len(list(corpus.rglob("*.md")))
        print(
            f"\nsynthetic corpus: {n_pages:,} pages, vectors in a private cache, ready in {time.perf_counter() - start:.0f} s"
        )
        compare(f"synthetic corpus, {args.chunks:,} sections", str(corpus), str(cache), kinds, args.repeats)


if __name__ == "__main__":
    main()
