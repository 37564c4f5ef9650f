"""What a judge costs beside retrieval: training time, and seconds per question side by side.

    .venv/bin/python benchmarks/bench_judge.py                      # the FastAPI docs' labeled set
    .venv/bin/python benchmarks/bench_judge.py --corpus squad2-A    # SQuAD 2.0 half A (imported into the cache)

1. ``train_judge`` on every labeled question of the corpus (the study's pairs and options, the defaults of
   ``ragcal.study.judge``), in a temporary folder: pairs, steps, seconds.
2. On the same ``--sample`` questions, alternately ``--repeats`` times: retrieval (embed the question with the
   embedding cache off, dense search) and the judge reading the dense top ``--depth`` (score cache off). Prints the
   best time of each per question and the ratio. Asserts nothing.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="fastapi", help="fastapi, rust-book or squad2-A")
    parser.add_argument("--sample", type=int, default=40, help="questions timed per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--depth", type=int, default=None, help="passages the judge reads (default: the study's)")
    parser.add_argument("--max-minutes", type=float, default=None, help="training budget (default: none)")
    args = parser.parse_args()

    import torch

    from ragcal.embedding import load_embedder
    from ragcal.judges import TrainedJudge, judge_pairs, judge_results, question_key, train_judge
    from ragcal.study.judge import STUDY_DEPTH, STUDY_PAIRS, STUDY_TRAINING, index_and_retrieve, judge_corpora

    spec = judge_corpora()[args.corpus]
    depth = args.depth or STUDY_DEPTH
    index, queries, retrieved, _ = index_and_retrieve(spec)
    texts = {chunk.chunk_id: chunk.text for chunk in index.chunks}
    pairs = judge_pairs(queries, retrieved["dense"], texts, depth=depth, **STUDY_PAIRS)
    training = STUDY_TRAINING if args.max_minutes is None else type(STUDY_TRAINING)(max_minutes=args.max_minutes)
    print(f"{spec.title}: {len(queries)} questions, {len(pairs)} pairs ({int(pairs['label'].sum())} answering); "
          f"torch threads {torch.get_num_threads()}")
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        judge = train_judge(pairs, Path(scratch) / "judge", training=training, progress=True)
        seconds = time.perf_counter() - started
        description = judge.description
        print(f"train-judge: {description['n_pairs']} training pairs, {description['steps']} steps of "
              f"{training.batch_size}, {training.epochs} epochs, {training.max_length} tokens: {seconds:.0f} s "
              f"({seconds / max(description['steps'], 1):.2f} s per step)"
              f"{'; stopped by the budget' if description['stopped_early'] else ''}")
        # Time the judge on questions it was not trained on: its validation share.
        held_out = [
            row for row, question in enumerate(queries["query"]) if question_key(question) not in judge.trained_on
        ][: args.sample]
        if not held_out:
            print("no question outside the judge's training: nothing to time")
            return
        fresh_judge = TrainedJudge(Path(scratch) / "judge", use_cache=False)
        embedder = load_embedder(use_cache=False)
        questions = queries["query"].iloc[held_out].tolist()
        lists = [retrieved["dense"][row] for row in held_out]
        best = {"retrieval": float("inf"), "judge": float("inf")}
        for _ in range(args.repeats):
            started = time.perf_counter()
            index.dense.search_vectors(embedder.encode(questions, show_progress_bar=False), k=10)
            best["retrieval"] = min(best["retrieval"], time.perf_counter() - started)
            started = time.perf_counter()
            judge_results(fresh_judge, questions, lists, texts, depth=depth)
            best["judge"] = min(best["judge"], time.perf_counter() - started)
        per_question = {name: value / len(questions) for name, value in best.items()}
        print(f"per question, best of {args.repeats} on {len(questions)} questions: retrieval "
              f"{per_question['retrieval'] * 1000:.1f} ms, judge ({depth} passages) "
              f"{per_question['judge'] * 1000:.1f} ms; judge / retrieval = "
              f"{per_question['judge'] / per_question['retrieval']:.1f}")


if __name__ == "__main__":
    main()
