"""The benchmark study: article-clustered intervals by hand, logged signals, and the whole study on 3 fake articles."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from ragcal.gates.learned_score import fit_learned_score
from ragcal.metrics import clopper_pearson
from ragcal.queries import QueryFileError
from ragcal.study.imported import benchmark_study, join_logged_file, read_benchmark_results, score_benchmark
from ragcal.study.imported_stats import clustered_auc, clustered_share, operating_points

# Three fake articles: two paragraphs each, with questions answered by a paragraph and questions it does not answer.
ARTICLES = {
    "Lighthouses": [
        "The Bell Rock lighthouse stands on a reef off Scotland. Robert Stevenson built it between 1807 and 1810.",
        "Lighthouse keepers lived in the tower and trimmed the lamp wicks every night to keep the light steady.",
    ],
    "Volcanoes": [
        "Mount Etna on Sicily is one of the most active volcanoes in Europe, erupting many times each decade.",
        "Volcanic ash grounds aircraft because the glassy particles melt inside jet engines and clog them.",
    ],
    "Beekeeping": [
        "A honey bee colony has one queen, thousands of female workers and a few hundred male drones in summer.",
        "Beekeepers use smoke to calm bees before opening a hive, since smoke masks the alarm pheromone.",
    ],
}
QUESTIONS = {
    "Lighthouses": [
        ("Who built the Bell Rock lighthouse?", 0),
        ("When was the Bell Rock lighthouse finished?", 0),
        ("What did keepers trim every night?", 1),
        ("Who lived in the lighthouse tower?", 1),
        ("Who painted the Bell Rock lighthouse red?", None),
        ("How many keepers drowned at Bell Rock?", None),
        ("What fuel did the Bell Rock lamp burn in 1900?", None),
    ],
    "Volcanoes": [
        ("Where is Mount Etna?", 0),
        ("Why does volcanic ash ground aircraft?", 1),
        ("What melts inside jet engines?", 1),
        ("Who first climbed Mount Etna?", None),
        ("How tall was Etna in 1600?", None),
        ("Which airline lost a plane to ash?", None),
    ],
    "Beekeeping": [
        ("How many queens does a colony have?", 0),
        ("Why do beekeepers use smoke?", 1),
        ("What does smoke mask?", 1),
        ("How long does a drone live?", None),
        ("Who invented the smoker?", None),
        ("What colour is royal jelly?", None),
    ],
}


def write_benchmark(root):
    """``root/corpus/<Article>/pNN.md`` and ``root/queries.csv`` with a group column, as the importer writes them."""
    rows = []
    for article, paragraphs in ARTICLES.items():
        for number, text in enumerate(paragraphs):
            page = root / "corpus" / article / f"p{number:02d}.md"
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text(f"# {article}\n\n{text}\n", encoding="utf-8")
        for position, (question, paragraph) in enumerate(QUESTIONS[article]):
            rows.append(
                {
                    "id": f"{article[:3].lower()}{position}",
                    "query": question,
                    "answerable": "true" if paragraph is not None else "false",
                    "slice": "answerable" if paragraph is not None else "near-domain",
                    "gold": f"{article}/p{paragraph:02d}.md" if paragraph is not None else "",
                    "group": article,
                }
            )
    queries = root / "queries.csv"
    pd.DataFrame(rows).to_csv(queries, index=False)
    return root / "corpus", queries


def test_clustered_auc_by_hand():
    labels = np.array([True, False, True, False, True, False])
    # Every article separates perfectly: any resample of articles does too.
    perfect = np.array([0.9, 0.1, 0.8, 0.2, 0.7, 0.3])
    groups = np.array(["a", "a", "b", "b", "c", "c"])
    assert clustered_auc(labels, perfect, groups, n_resamples=200) == (1.0, 1.0, 1.0)
    # Article c is inverted: resamples range from all-c (AUC 0) to no-c (AUC 1); the point is the table's AUC.
    mixed = np.array([0.9, 0.1, 0.8, 0.2, 0.3, 0.7])
    auc, low, high = clustered_auc(labels, mixed, groups, n_resamples=2000)
    assert auc == pytest.approx(roc_auc_score(labels, mixed))
    assert low < auc < high and 0 <= low and high <= 1
    # Degenerate: one class, constant scores, NaN scores left out.
    assert all(math.isnan(value) for value in clustered_auc(labels[labels], perfect[labels], groups[labels]))
    assert all(math.isnan(value) for value in clustered_auc(labels, np.ones(6), groups))
    with_nan = np.append(perfect, np.nan)
    assert clustered_auc(np.append(labels, True), with_nan, np.append(groups, "d"), n_resamples=50)[0] == 1.0


def test_clustered_auc_resamples_match_weighted_sklearn():
    """The tallied Mann-Whitney of each resample is sklearn's AUC with the draw counts as sample weights."""
    from ragcal.study.imported_stats import _cluster_weights

    rng = np.random.default_rng(4)
    labels = rng.random(60) < 0.5
    scores = np.round(rng.normal(labels * 0.5, 1.0), 1)  # rounded: many ties
    groups = rng.choice(list("abcde"), size=60)
    codes, weights = _cluster_weights(groups, 40, 7)
    expected = []
    for draw in weights:
        row_weights = draw[codes].astype(float)
        drawn = row_weights > 0
        if 0 < labels[drawn].sum() < drawn.sum():
            expected.append(roc_auc_score(labels[drawn], scores[drawn], sample_weight=row_weights[drawn]))
    auc, low, high = clustered_auc(labels, scores, groups, n_resamples=40, random_state=7)
    assert auc == pytest.approx(roc_auc_score(labels, scores))
    assert (low, high) == (pytest.approx(np.quantile(expected, 0.025)), pytest.approx(np.quantile(expected, 0.975)))


def test_clustered_share_resamples_whole_articles():
    # Article a: 3 of 4 answered; article b: 0 of 2. Any resample's share lies between the two articles' shares.
    answered = np.array([1, 1, 1, 0, 0, 0], dtype=bool)
    groups = np.array(["a", "a", "a", "a", "b", "b"])
    share, low, high = clustered_share(answered, groups, n_resamples=500)
    assert share == pytest.approx(3 / 6)
    assert low == pytest.approx(0.0) and high == pytest.approx(0.75)  # all-b and all-a resamples both occur
    assert all(math.isnan(value) for value in clustered_share([], []))


def test_operating_points_by_hand():
    table = pd.DataFrame(
        {
            "answerable": [True, True, True, False, False],
            "group": ["a", "a", "b", "b", "b"],
            "llm_found_answer": [1, 1, 0, 1, 0],
        }
    )
    support = np.array([True, False, False, False, False])
    points = operating_points(table, ["llm_found_answer"], support, n_resamples=100).set_index("space")
    roc = points.loc["roc"]
    assert (roc["x_k"], roc["x_n"], roc["y_k"], roc["y_n"]) == (1, 2, 2, 3)  # FPR 1/2, TPR 2/3
    assert roc["x"] == pytest.approx(0.5) and roc["y"] == pytest.approx(2 / 3)
    low, high = clopper_pearson(2, 3)
    assert (roc["y_low"], roc["y_high"]) == (pytest.approx(float(low)), pytest.approx(float(high)))
    coverage = points.loc["risk-coverage"]
    assert coverage["x"] == pytest.approx(3 / 5)  # answered 3 of 5
    assert coverage["y"] == pytest.approx(2 / 3)  # 2 of its 3 answers unsupported
    with pytest.raises(ValueError, match="not binary"):
        operating_points(table.assign(llm_found_answer=[0.5, 1, 0, 1, 0]), ["llm_found_answer"], support)
    # A column where 1 means "refused" is declared lower-is-answerable: the same decisions, the same point.
    refused = table.assign(llm_refused=1 - table["llm_found_answer"])
    flipped = operating_points(refused, ["llm_refused"], support, directions={"llm_refused": False}, n_resamples=100)
    assert flipped.set_index("space").loc["roc", ["x", "y"]].tolist() == roc[["x", "y"]].tolist()
    # No verdict (NaN) is an abstention.
    missing = operating_points(table.assign(llm_found_answer=[1, np.nan, 0, 1, 0]), ["llm_found_answer"], support)
    assert missing.set_index("space").loc["roc", "y_k"] == 1


def test_join_logged_file_and_its_errors(tmp_path):
    table = pd.DataFrame({"id": ["q1", "q2"], "query": "q", "answerable": [True, False], "slice": "s"})
    logged = tmp_path / "llm.csv"
    logged.write_text("id,llm_found_answer\nq2,0\nq1,1\nq9,1\n")  # another order, and an id beyond the table
    joined, in_file, declared = join_logged_file(table, logged)
    assert joined["llm_found_answer"].tolist() == [1.0, 0.0] and in_file.tolist() == [True, True]
    logged.write_text("id,llm_found_answer\nq2,\nq9,1\n")  # a sample: q1 not asked, q2's reply unreadable
    joined, in_file, declared = join_logged_file(table, logged, allow_missing=True)
    assert np.isnan(joined["llm_found_answer"]).all() and in_file.tolist() == [False, True]
    logged.write_text("id,llm_found_answer\nq1,1\n")
    with pytest.raises(ValueError, match=r"llm.csv: no value for some questions .*llm_found_answer: 1 \(q2\)"):
        join_logged_file(table, logged)
    logged.write_text("id,llm_found_answer\nq1,1\nq2,maybe\n")
    with pytest.raises(ValueError, match="llm.csv: 1 value.* not numbers.*line 3 .*llm_found_answer.*'maybe'"):
        join_logged_file(table, logged)
    logged.write_text("id,query\nq1,x\nq2,y\n")
    with pytest.raises(ValueError, match="'query' is a key column of score tables, not a signal"):
        join_logged_file(table, logged)
    logged.write_text("question,llm_found_answer\nq1,1\n")
    with pytest.raises(ValueError, match="llm.csv: no 'id' column"):
        join_logged_file(table, logged)


def test_queries_without_group_are_refused(tmp_path):
    corpus, queries = write_benchmark(tmp_path)
    frame = pd.read_csv(queries, dtype=str, keep_default_na=False)
    frame.drop(columns="group").to_csv(queries, index=False)
    with pytest.raises(QueryFileError, match=r"queries.csv: missing column 'group'"):
        score_benchmark(corpus, queries)
    frame.loc[2, "group"] = " "
    frame.to_csv(queries, index=False)
    with pytest.raises(QueryFileError, match=r"queries.csv, line 4, column 'group': empty group"):
        score_benchmark(corpus, queries)


@pytest.mark.slow
def test_the_study_end_to_end_on_three_fake_articles(tmp_path, embedder):
    corpus, queries = write_benchmark(tmp_path)
    ids = pd.read_csv(queries, dtype=str)["id"]
    # An LLM verdict: answers every other question.
    logged = tmp_path / "llm.csv"
    verdicts = [int(n % 2 == 0) for n in range(len(ids))]
    pd.DataFrame({"id": ids, "llm_found_answer": verdicts}).to_csv(logged, index=False)
    out = tmp_path / "results" / "fake"
    tables = benchmark_study(
        corpus, queries, out, logged_signals=logged, embedder=embedder, n_resamples=50, compare_with={}, log=None
    )
    written = {path.name for path in out.iterdir()}
    assert {"scores.csv", "scores.meta.json", "auc.csv", "auc_clustered.csv", "heldout.csv", "learned_scores.csv",
            "learned_gate.csv", "risk_coverage.csv", "risk_coverage_summary.csv", "operating_points.csv",
            "protocol_comparison.csv", "summary.md"} <= written
    scores = pd.read_csv(out / "scores.csv")
    assert list(scores.columns[:5]) == ["id", "query", "answerable", "slice", "group"]
    assert "llm_found_answer" not in scores.columns  # logged signals join the study, not ragcal's score table
    assert json.loads((out / "scores.meta.json").read_text())["n_chunks"] >= 6

    # Three articles: C(3, 2) = 3 splits, two articles fitted, one counted, per signal and rule.
    heldout = tables["heldout"]
    assert heldout.groupby(["signal", "rule"]).size().eq(3).all()
    # Each split counts exactly one whole article: Lighthouses (4 + 3), Volcanoes (3 + 3) or Beekeeping (3 + 3).
    dense = heldout[heldout["signal"] == "dense_top1"]
    counted = sorted({(row.split, row.answerable_n, row.near_domain_n) for row in dense.itertuples()})
    assert counted == [(0, 3, 3), (1, 3, 3), (2, 4, 3)]  # splits: {L, V}, {L, B}, {V, B} to calibration

    # The learned scores: each article scored by a model fitted on the other two (leave one article out).
    learned = tables["learned_scores"]
    signals = [name for name in tables["scores"].columns if name in set(tables["auc"]["signal"])]
    all_set = [name for name in signals if name != "llm_found_answer" and not name.startswith("bm25_empty")]
    for article in ARTICLES:
        held = (scores["group"] == article).to_numpy()
        model = fit_learned_score(tables["scores"][~held], all_set)
        expected = model.score(tables["scores"].loc[held, all_set].to_numpy(dtype=float))
        np.testing.assert_allclose(learned.loc[held, "learned all"], expected, rtol=1e-8)
    assert set(tables["learned_gate"]["gate"]) == {"learned all", "learned all + logged"}
    assert tables["learned_gate"].groupby("gate").size().eq(3).all()

    # The LLM's verdict is a point, with countable shares.
    roc = tables["operating_points"].set_index("space").loc["roc"]
    verdict = pd.Series([n % 2 == 0 for n in range(len(ids))], index=ids)
    answerable = scores.set_index("id")["answerable"]
    assert roc["y_k"] == int((verdict & answerable).sum()) and roc["x_k"] == int((verdict & ~answerable).sum())

    clustered = tables["auc_clustered"]
    assert clustered["signal"].iloc[0] == "dense_top1" and (clustered["n_articles"] == 3).all()
    summary = (out / "summary.md").read_text()
    assert "over articles" in summary and "3 splits" in summary and "llm_found_answer" in summary
    # What the notebook reads back is what was written.
    again = read_benchmark_results(out)
    assert "learned all" in again["scores"].columns and len(again["scores"]) == len(ids)
    # Only some articles: the questions of those, the whole corpus indexed.
    table, _, _, config = score_benchmark(corpus, queries, articles=["Volcanoes", "Beekeeping"], embedder=embedder)
    assert set(table["group"]) == {"Volcanoes", "Beekeeping"} and len(config["documents"]) == 6
    with pytest.raises(ValueError, match="Atlantis"):
        score_benchmark(corpus, queries, articles=["Atlantis"], embedder=embedder)


@pytest.mark.slow
def test_the_notebook_computes_the_study_when_there_are_no_results(tmp_path):
    """Notebook 10 without results: the study on the given corpus, with an LLM verdict drawn as points."""
    from ragcal.study.notebooks import NOTEBOOKS_DIR, execute_notebook

    corpus, queries = write_benchmark(tmp_path)
    ids = pd.read_csv(queries, dtype=str)["id"]
    logged = tmp_path / "llm.csv"
    pd.DataFrame({"id": ids, "llm_found_answer": [int(n % 3 > 0) for n in range(len(ids))]}).to_csv(logged, index=False)
    parameters = {
        "results_dir": str(tmp_path / "no results here"),
        "corpus_dir": str(corpus),
        "queries_path": str(queries),
        "logged_signals": str(logged),
        "articles": None,
        "n_resamples": 100,
        "figures_dir": str(tmp_path / "figures"),
    }
    notebook = execute_notebook(NOTEBOOKS_DIR / "10_benchmarks.py", parameters=parameters)
    printed = "".join(output.get("text", "") for cell in notebook.cells for output in cell.get("outputs", []))
    assert f"computed here: {len(ids)} questions in 3 articles" in printed
    for stem in ("score_distributions", "roc", "risk_coverage"):
        assert (tmp_path / "figures" / f"{stem}.png").stat().st_size > 10_000
    # The verdict is a point on both figures: its legend entry is in the SVGs.
    assert "llm_found_answer" in (tmp_path / "figures" / "roc.svg").read_text()
    assert "llm_found_answer" in (tmp_path / "figures" / "risk_coverage.svg").read_text()


@pytest.mark.slow
def test_reproduce_benchmark_from_the_command_line(tmp_path, monkeypatch, capsys):
    from ragcal.cli import main
    from ragcal.study.imported import BENCHMARKS, BenchmarkInputs

    assert main(["reproduce", "--benchmark", "squad3", "--results", str(tmp_path)]) == 2
    assert "unknown benchmark 'squad3'; known: squad2-A" in capsys.readouterr().err
    monkeypatch.setitem(BENCHMARKS, "missing", BenchmarkInputs("missing", "m", tmp_path / "no", tmp_path / "no.csv"))
    assert main(["reproduce", "--benchmark", "missing", "--results", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert "not found; import the benchmark first" in error and not (tmp_path / "missing").exists()

    corpus, queries = write_benchmark(tmp_path / "fake")
    monkeypatch.setitem(BENCHMARKS, "fake", BenchmarkInputs("fake", "Three fake articles", corpus, queries))
    results = tmp_path / "results"
    assert main(["reproduce", "--benchmark", "fake", "--results", str(results), "--skip-notebooks"]) == 0
    printed = capsys.readouterr().out
    assert "dense_top1" in printed and "learned all" in printed
    summary = (results / "fake" / "summary.md").read_text()
    assert summary.startswith("# Results: Three fake articles") and "3 splits" in summary
    assert "no results in fastapi/" in summary  # no bundled results beside this results folder


@pytest.mark.slow
def test_llm_baseline_asks_the_local_model_about_a_stratified_sample(tmp_path):
    from ragcal.study.imported_llm import llm_baseline

    corpus, queries = write_benchmark(tmp_path / "fake")
    out = tmp_path / "results"
    baseline = llm_baseline(corpus, queries, out, sample=4, log=None)
    assert not baseline.skipped
    signals = pd.read_csv(baseline.signals, dtype={"id": str})
    labeled = pd.read_csv(queries, dtype={"id": str})
    assert list(signals.columns) == ["id", "llm_found_answer"] and len(signals) == 4
    assert set(signals["id"]) <= set(labeled["id"])
    # Stratified by slice: both slices of the fake benchmark are asked about.
    assert labeled.set_index("id").loc[signals["id"], "slice"].nunique() == 2
    assert signals["llm_found_answer"].dropna().isin([0.0, 1.0]).all()
    details = pd.read_csv(baseline.details, dtype={"id": str})
    assert list(details["id"]) == list(signals["id"])
    # A second run is answered from the verdict cache, with the same verdicts.
    again = llm_baseline(corpus, queries, tmp_path / "again", sample=4, log=None)
    assert pd.read_csv(again.details, dtype={"id": str})["cached"].all()
    pd.testing.assert_frame_equal(pd.read_csv(again.signals, dtype={"id": str}), signals)
