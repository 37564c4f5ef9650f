"""Cross-fitted judge scores: every question scored by a judge that never saw it (the tests fail if one did)."""

import numpy as np
import pandas as pd
import pytest

from ragcal.judges import JudgeLeakageError, JudgeTraining, TrainedJudge, judge_results, question_key
from ragcal.judges.crossfit import crossfit_judge_results, judge_folds
from ragcal.retrieval import RetrievalResult
from ragcal.retrieval.rerank import build_tiny_cross_encoder

PAGES = ["cookies.md", "cors.md", "docker.md", "files.md", "auth.md", "tests.md"]
TEXTS = {f"{page}#0": f"All about {page.removesuffix('.md')}: how to use it and configure it." for page in PAGES}


def labeled_set():
    """Twelve questions in six articles (two each: one answerable, one not)."""
    rows = []
    for number, page in enumerate(PAGES):
        topic = page.removesuffix(".md")
        rows.append((f"a{number}", f"How do I use {topic}?", True, "answerable", (page,), f"article{number}"))
        rows.append((f"u{number}", f"Who invented {topic} in 1850?", False, "near-domain", (), f"article{number}"))
    return pd.DataFrame(rows, columns=["id", "query", "answerable", "slice", "gold", "group"])


def dense_lists(queries):
    """Each question's own page first, then two others."""
    lists = []
    for number in range(len(queries)):
        own = PAGES[number // 2]
        others = [page for page in PAGES if page != own][:2]
        lists.append(RetrievalResult("dense", tuple(f"{page}#0" for page in [own, *others]), np.array([0.9, 0.5, 0.4])))
    return lists


@pytest.fixture(scope="module")
def training(tmp_path_factory):
    base = build_tiny_cross_encoder(tmp_path_factory.mktemp("base") / "tiny", random_state=3)
    return JudgeTraining(base_model=str(base), epochs=1, batch_size=4, max_length=32, validation_fraction=0.0)


def test_folds_keep_groups_whole_and_spread_the_labels():
    queries = labeled_set()
    folds = judge_folds(queries["answerable"], queries["group"], n_folds=3, random_state=0)
    assert sorted(set(folds)) == [0, 1, 2]
    for group in queries["group"].unique():
        assert len(set(folds[queries["group"] == group])) == 1
    for fold in range(3):
        assert queries["answerable"][folds == fold].mean() == 0.5
    with pytest.raises(ValueError, match="at least two groups"):
        judge_folds([True, False], ["a", "a"], n_folds=2)


def test_every_question_is_scored_by_a_judge_that_never_saw_it(training, tmp_path):
    queries = labeled_set()
    results, folds = crossfit_judge_results(
        queries, dense_lists(queries), TEXTS, judge_dir=tmp_path, groups=queries["group"], n_folds=3,
        training=training, depth=3, progress=False, judge_options={"cache_dir": tmp_path},
    )
    fold_of = judge_folds(queries["answerable"], queries["group"], n_folds=3, random_state=0)
    keys = np.array([question_key(question) for question in queries["query"]])
    assert len(folds) == 3 and not folds["reused"].any()
    for row in folds.itertuples():
        judge = TrainedJudge(tmp_path / row.folder, cache_dir=tmp_path)
        scored, others = keys[fold_of == row.fold], keys[fold_of != row.fold]
        assert judge.trained_on.isdisjoint(scored)  # the fold it scores: never seen
        assert judge.trained_on == set(others)  # every other fold's question (no validation share here)
        assert row.n_questions == scored.size and row.fingerprint == judge.fingerprint
        # Scoring its own training questions is what the protocol forbids, and is refused.
        trained_rows = np.flatnonzero(fold_of != row.fold)
        with pytest.raises(JudgeLeakageError):
            judge_results(
                judge, queries["query"][trained_rows], [dense_lists(queries)[r] for r in trained_rows], TEXTS
            )
    assert [len(result.chunk_ids) for result in results] == [3] * len(queries)
    assert all(np.all((result.scores >= 0) & (result.scores <= 1)) for result in results)
    # Run again: the judges are reused (same pairs, same options) and give the very same scores.
    again, reused = crossfit_judge_results(
        queries, dense_lists(queries), TEXTS, judge_dir=tmp_path, groups=queries["group"], n_folds=3,
        training=training, depth=3, progress=False, judge_options={"cache_dir": tmp_path},
    )
    assert reused["reused"].all()
    assert [result.scores.tolist() for result in again] == [result.scores.tolist() for result in results]


def test_a_question_repeated_in_another_fold_is_left_out_of_training(training, tmp_path):
    queries = labeled_set()
    fold_of = judge_folds(queries["answerable"], queries["group"], n_folds=2, random_state=0)  # not from the texts
    elsewhere = int(np.flatnonzero((fold_of != fold_of[0]) & queries["answerable"].to_numpy())[0])
    queries.loc[elsewhere, "query"] = queries.loc[0, "query"].upper()  # the same question (by key), other fold
    results, folds = crossfit_judge_results(
        queries, dense_lists(queries), TEXTS, judge_dir=tmp_path, groups=queries["group"], n_folds=2,
        training=training, depth=3, progress=False,
    )
    repeated = question_key(queries.loc[0, "query"])
    for row in folds.itertuples():
        assert repeated not in TrainedJudge(tmp_path / row.folder, use_cache=False).trained_on
    assert folds["n_training_questions"].tolist() == [5, 5]  # six questions in the other fold, minus the repeat
    assert len(results) == len(queries)


def test_bad_input_is_refused(training, tmp_path):
    queries = labeled_set()
    with pytest.raises(ValueError, match="12 queries but 2 retrieved lists"):
        crossfit_judge_results(queries, dense_lists(queries)[:2], TEXTS, judge_dir=tmp_path, training=training)
    assert not any(tmp_path.iterdir())
