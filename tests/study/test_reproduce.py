import numpy as np
import pandas as pd
import pytest
from conftest import write
from labeled_queries import QUERIES

from ragcal.chunk_sweep import CHUNKING_VARIANTS, MEASURES, parse_variants, sweep_chunking
from ragcal.cli import main
from ragcal.queries import load_queries
from ragcal.runs import hardest_queries
from ragcal.study.reproduce import chunking_paragraph


@pytest.fixture(scope="module")
def queries(tmp_path_factory):
    return load_queries(write(tmp_path_factory.mktemp("q") / "queries.csv", QUERIES))


def test_sweep_chunking_on_a_slice(fastapi_slice, embedder, queries):
    variants = {
        name: CHUNKING_VARIANTS[name] for name in ("headings-128", "headings-256", "headings-whole", "fixed-500")
    }
    table = sweep_chunking(queries, corpus_dir=fastapi_slice, embedder=embedder, variants=variants, n_resamples=300)
    rows = table.set_index("variant")
    assert list(rows.index) == list(variants)
    assert (
        rows.loc["headings-128", "chunks"] > rows.loc["headings-256", "chunks"] >= rows.loc["headings-whole", "chunks"]
    )
    assert rows.loc["headings-whole", "oversized"] == 0  # nothing is over an unlimited size
    baseline = rows.loc["headings-256"]
    for metric in MEASURES:
        assert (
            baseline[f"{metric}_diff"] == 0 and baseline[f"{metric}_diff_low"] == 0 == baseline[f"{metric}_diff_high"]
        )
        assert (table[f"{metric}_low"] <= table[metric] + 1e-12).all() and (
            table[metric] <= table[f"{metric}_high"] + 1e-12
        ).all()
        assert (table[f"{metric}_diff_low"] <= table[f"{metric}_diff"] + 1e-12).all()
    assert table["recall@5"].between(0, 1).all()
    with pytest.raises(ValueError, match="baseline 'nope' is not one of the variants"):
        sweep_chunking(queries, corpus_dir=fastapi_slice, embedder=embedder, variants=variants, baseline="nope")


def test_parse_variants():
    variants = parse_variants("128, whole", "300,500")
    assert list(variants) == ["headings-128", "headings-whole", "fixed-300", "fixed-500"]
    assert variants["headings-whole"]["max_tokens"] is None and variants["fixed-300"]["window"] == 300
    with pytest.raises(ValueError, match="positive integers or 'whole'"):
        parse_variants("0")


def test_sweep_chunking_cli(fastapi_slice, embedder, tmp_path, capsys):
    queries = write(tmp_path / "queries.csv", QUERIES)
    out = tmp_path / "sweep.csv"
    arguments = ["sweep-chunking", str(queries), "--corpus", str(fastapi_slice), "--cache-dir", str(embedder.cache_dir)]
    code = main([*arguments, "--max-tokens", "128,256", "--windows", "500", "--resamples", "200", "--out", str(out)])
    assert code == 0
    table = pd.read_csv(out)
    assert list(table["variant"]) == ["headings-128", "headings-256", "fixed-500"]
    printed = capsys.readouterr().out
    assert "headings-256" in printed and ("stays" in printed or "beats" in printed)
    assert main([*arguments, "--max-tokens", "128", "--out", str(tmp_path / "x.csv")]) == 2
    assert "--baseline 'headings-256' is not among the variants" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()


def test_chunking_paragraph_verdicts():
    def table(diff_low, diff_high):
        # Differences are fixed windows minus the default heading-aware chunking.
        row = {"variant": "fixed-500"}
        base = {"variant": "headings-256"}
        for metric in ("recall@5", "mrr@10", "dense_top1_auc"):
            row.update(
                {
                    metric: 0.9,
                    f"{metric}_low": 0.8,
                    f"{metric}_high": 1.0,
                    f"{metric}_diff": 0.05,
                    f"{metric}_diff_low": diff_low,
                    f"{metric}_diff_high": diff_high,
                }
            )
            base.update(
                {
                    metric: 0.85,
                    f"{metric}_low": 0.7,
                    f"{metric}_high": 0.95,
                    f"{metric}_diff": 0,
                    f"{metric}_diff_low": 0,
                    f"{metric}_diff_high": 0,
                }
            )
        return pd.DataFrame([row, base])

    assert chunking_paragraph(table(-0.1, -0.01)).startswith("Seed 000's claim holds here")
    assert chunking_paragraph(table(-0.01, 0.1)).startswith("With this many queries the data cannot tell")
    assert chunking_paragraph(table(0.01, 0.1)).startswith("Seed 000's claim does not hold")
    assert chunking_paragraph(table(0.01, 0.1).iloc[[1]]) == ""  # no fixed-window row: nothing to say


def test_hardest_queries_orders_misses_first(queries):
    def run(rankings):
        return pd.DataFrame(
            [(qid, docid, rank) for qid, docids in rankings.items() for rank, docid in enumerate(docids, start=1)],
            columns=["qid", "docid", "rank"],
        )

    dense = run(
        {
            "q1": ["advanced/response-cookies.md#0"],
            "q2": ["x.md#0", "tutorial/cors.md#1"],
            "q3": ["x.md#0"],
            "q4": ["a.md#0", "b.md#0", "tutorial/security/get-current-user.md#2"],
        }
    )
    table = hardest_queries(queries, {"dense": dense}, n=4)
    assert list(table["id"]) == ["q3", "q4", "q2", "q1"]
    assert np.isnan(table.iloc[0]["dense_gold_rank"]) and list(table["dense_gold_rank"])[1:] == [3, 2, 1]
    assert table.iloc[0]["dense_top_page"] == "x.md"


def test_evaluate_cli(fastapi_slice, embedder, tmp_path, capsys):
    queries = write(tmp_path / "queries.csv", QUERIES)
    assert (
        main(
            [
                "score",
                str(queries),
                "--corpus",
                str(fastapi_slice),
                "--out",
                str(tmp_path / "s.csv"),
                "--runs",
                str(tmp_path / "runs"),
                "--cache-dir",
                str(embedder.cache_dir),
            ]
        )
        == 0
    )
    assert main(["evaluate", str(queries), "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "r.csv")]) == 0
    table = pd.read_csv(tmp_path / "r.csv")
    assert set(table["retriever"]) == {"dense", "bm25_raw", "bm25_stopwords", "rrf"}
    assert (table["n_queries"] == 4).all()
    dense_recall = table[(table["retriever"] == "dense") & (table["metric"] == "recall@5")].iloc[0]
    assert dense_recall["value"] == 1.0
    assert main(["evaluate", str(queries), "--runs", str(tmp_path / "nothing"), "--out", str(tmp_path / "x.csv")]) == 2
    assert "no *.run files" in capsys.readouterr().err


def test_the_cross_model_task_reads_a_copy_of_what_the_corpora_overwrite(tmp_path):
    # With --jobs 2 the cross-model report runs beside the corpora's studies, which rewrite results/<corpus>/ as it
    # reads them; it anchors to a copy taken first. The copy holds every file an Anchor reads, byte for byte.
    from ragcal.study.anchoring import Anchor, copy_reference
    from ragcal.study.notebooks import RESULTS_DIR

    copied = tmp_path / "frozen"
    for name in ("fastapi", "rust-book"):
        assert copy_reference(RESULTS_DIR / name, copied / name) == copied / name
    for name in ("fastapi", "rust-book"):
        read = ["scores.csv", "scores_wordllama.csv", "runs/dense.run"]
        read += [f"gates/{path.name}" for path in sorted((RESULTS_DIR / name / "gates").glob("*.json"))]
        assert len(read) > 3
        for relative in read:
            assert (copied / name / relative).read_bytes() == (RESULTS_DIR / name / relative).read_bytes(), relative
        table = pd.read_csv(RESULTS_DIR / name / "scores.csv")
        anchored = Anchor(copied / name, label=name)
        anchored.table(table)
        assert anchored.records and {record.status for record in anchored.records} == {"identical"}
    assert not (copied / "squad2-A").exists()  # only the corpora asked for
