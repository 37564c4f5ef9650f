"""End to end: ``ragcal score`` on a small slice of the FastAPI docs with the real model."""

import json

import pandas as pd
import pytest
from conftest import write
from labeled_queries import QUERIES

from ragcal.cli import main


@pytest.fixture(scope="module")
def scored(fastapi_slice, tmp_path_factory, embedder):
    folder = tmp_path_factory.mktemp("cli")
    queries = write(folder / "queries.csv", QUERIES)
    code = main(
        [
            "score",
            str(queries),
            "--corpus",
            str(fastapi_slice),
            "--out",
            str(folder / "scores.csv"),
            "--runs",
            str(folder / "runs"),
            "--cache-dir",
            str(embedder.cache_dir),
        ]
    )
    assert code == 0
    return folder


def test_score_table_separates_fastapi_from_cooking(scored):
    table = pd.read_csv(scored / "scores.csv")
    assert list(table.columns[:4]) == ["id", "query", "answerable", "slice"]
    for column in (
        "dense_top1",
        "dense_top2",
        "dense_gap",
        "bm25_top1_raw",
        "bm25_top1_stopwords",
        "bm25_empty_stopwords",
        "rrf_top1",
    ):
        assert column in table.columns
    answerable = table.loc[table["answerable"], "dense_top1"]
    unrelated = table.loc[~table["answerable"], "dense_top1"]
    assert answerable.min() > unrelated.max() + 0.1
    assert (table["dense_gap"] >= 0).all()


def test_trec_runs_and_provenance(scored, fastapi_slice):
    runs = {path.stem for path in (scored / "runs").glob("*.run")}
    assert runs == {"dense", "bm25_raw", "bm25_stopwords", "rrf"}
    run = pd.read_csv(
        scored / "runs" / "dense.run", sep=" ", header=None, names=["qid", "q0", "docid", "rank", "score", "tag"]
    )
    assert (run["q0"] == "Q0").all() and (run["tag"] == "dense").all()
    assert run.groupby("qid")["rank"].min().eq(1).all()
    first = run[(run["qid"] == "q1") & (run["rank"] == 1)].iloc[0]
    assert first["docid"].startswith("advanced/response-cookies.md#")
    meta = json.loads((scored / "scores.meta.json").read_text())
    assert meta["model_fingerprint"].startswith("sentence-transformers/all-MiniLM-L6-v2@53aa51172d14")
    assert meta["chunker"] == "headings" and meta["n_chunks"] > 0


@pytest.mark.parametrize(
    "body, message",
    [
        ("id,query,answerable,slice\nq1,How?,true,answerable\n", "missing column"),
        (
            "id,query,answerable,slice,gold\nq1,How?,true,answerable,tutorial/cors.md\nq1,How?,true,answerable,tutorial/cors.md\n",
            "line 3, column 'id': duplicate",
        ),
        ("id,query,answerable,slice,gold\nq1,How?,maybe,answerable,tutorial/cors.md\n", "column 'answerable'"),
        (
            "id,query,answerable,slice,gold\nq1,How?,true,answerable,tutorial/nope.md\n",
            "tutorial/nope.md not in the corpus",
        ),
        (
            "id,query,answerable,slice,gold\nq1,How?,true,answerable,./tutorial/cors.md\n",
            "./tutorial/cors.md not in the corpus; did you mean tutorial/cors.md?",
        ),
        ("id;query;answerable;slice;gold\nq1;How?;true;answerable;tutorial/cors.md\n", "looks semicolon-delimited"),
    ],
)
def test_bad_query_file_writes_nothing(fastapi_slice, tmp_path, capsys, body, message):
    queries = write(tmp_path / "bad.csv", body)
    code = main(
        [
            "score",
            str(queries),
            "--corpus",
            str(fastapi_slice),
            "--out",
            str(tmp_path / "out" / "scores.csv"),
            "--runs",
            str(tmp_path / "out" / "runs"),
        ]
    )
    assert code == 2
    error = capsys.readouterr().err
    assert "bad.csv" in error and message in error
    assert not (tmp_path / "out").exists()


def test_bad_corpus_is_named(tmp_path, capsys):
    queries = write(tmp_path / "q.csv", "id,query,answerable,slice,gold\nq1,How?,false,unrelated,\n")
    (tmp_path / "empty").mkdir()
    assert main(["score", str(queries), "--corpus", str(tmp_path / "empty"), "--out", str(tmp_path / "s.csv")]) == 2
    assert "empty" in capsys.readouterr().err
    assert not (tmp_path / "s.csv").exists()


# --------------------------------------------------------------------------- ragcal chunks


@pytest.fixture
def no_model(monkeypatch):
    """Fail the test if anything tries to build an embedder."""

    def refuse(*args, **kwargs):
        raise AssertionError("ragcal chunks must not load an embedding model")

    import ragcal.embedding.loading
    import ragcal.retrieval.index

    monkeypatch.setattr(ragcal.embedding.loading, "Embedder", refuse)
    monkeypatch.setattr(ragcal.retrieval.index, "Embedder", refuse)


def _read_jsonl(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_chunks_writes_what_would_be_indexed(tmp_path, capsys, no_model):
    from ragcal.chunking import chunk_by_headings
    from ragcal.corpus import load_corpus

    write(tmp_path / "docs" / "index.md", "# Home\n\nWelcome.\n\n## Café\n\nCrème brûlée.\n")
    write(tmp_path / "docs" / "guide" / "page.md", "# Guide\n\n{* ../../src/app.py *}\n")
    write(tmp_path / "src" / "app.py", "print('hi')\n")
    out = tmp_path / "out" / "chunks.jsonl"
    assert main(["chunks", str(tmp_path / "docs"), "--out", str(out)]) == 0
    rows = _read_jsonl(out)
    expected = chunk_by_headings(load_corpus(tmp_path / "docs"))
    assert rows == [
        {
            "chunk_id": chunk.chunk_id,
            "path": chunk.doc_path,
            "heading_path": list(chunk.heading_path),
            "text": chunk.text,
            "n_tokens": chunk.n_tokens,
            "oversized": chunk.oversized,
            "access_level": "public",
        }
        for chunk in expected
    ]
    assert rows[0]["path"] == "guide/page.md" and "print('hi')" in rows[0]["text"]
    assert rows[-1]["heading_path"] == ["Home", "Café"] and rows[-1]["text"] == "Home › Café\n\nCrème brûlée."
    summary = capsys.readouterr().out.strip()
    median = sorted(row["n_tokens"] for row in rows)[1]
    assert summary == f"wrote {out}: 2 pages, 3 chunks, median {median} tokens, 0 oversized"
    assert list(out.parent.iterdir()) == [out]  # no temporary file left behind


def test_chunks_options(tmp_path, no_model):
    write(tmp_path / "docs" / "a.md", "# A\n\n{* ../src/x.py *}\n\n" + "word " * 30 + "\n")
    write(tmp_path / "docs" / "b.md", "# B\n\nText.\n")
    out = tmp_path / "chunks.jsonl"
    args = ["chunks", str(tmp_path / "docs"), "--out", str(out)]
    assert main(args + ["--no-includes", "--exclude", "b.md"]) == 0
    rows = _read_jsonl(out)
    assert {row["path"] for row in rows} == {"a.md"} and "{* ../src/x.py *}" in rows[0]["text"]
    assert main(args + ["--chunker", "fixed", "--window", "10"]) == 0
    rows = _read_jsonl(out)
    assert [row["n_tokens"] for row in rows if row["path"] == "a.md"][:2] == [10, 10]
    assert all(row["heading_path"] == [] for row in rows)
    assert main(args + ["--max-tokens", "5"]) == 0
    assert any(row["oversized"] for row in _read_jsonl(out))
    assert {row["access_level"] for row in _read_jsonl(out)} == {"public"}
    access_map = write(tmp_path / "access.csv", "path_glob,level\nb.md,internal\n")
    assert main(args + ["--access-map", str(access_map), "--default-access", "staff"]) == 0
    assert {row["path"]: row["access_level"] for row in _read_jsonl(out)} == {"a.md": "staff", "b.md": "internal"}


def test_chunks_of_the_rust_book(tmp_path, capsys, no_model):
    from ragcal.chunking import chunk_size_summary
    from ragcal.datasets import RUST_BOOK_CORPUS, RUST_BOOK_EXCLUDE
    from ragcal.retrieval.index import chunk_corpus

    out = tmp_path / "rust.jsonl"
    assert main(["chunks", str(RUST_BOOK_CORPUS), "--out", str(out)]) == 0
    rows = _read_jsonl(out)
    documents, chunks, _ = chunk_corpus(RUST_BOOK_CORPUS, exclude=RUST_BOOK_EXCLUDE)
    summary = chunk_size_summary(chunks).iloc[0]
    assert len(rows) == len(chunks) == summary["chunks"]
    assert len({row["path"] for row in rows}) == len(documents) == 111  # SUMMARY.md left out by default
    assert not any("<Listing" in row["text"] or "{{#" in row["text"] for row in rows)
    assert any(row["heading_path"][-1] == "The Stack and the Heap" for row in rows)
    assert capsys.readouterr().out.strip() == (
        f"wrote {out}: 111 pages, {len(chunks)} chunks, median {summary['tokens_median']:g} tokens, "
        f"{int(summary['oversized'])} oversized"
    )


def test_chunks_missing_corpus_is_named_and_writes_nothing(tmp_path, capsys, no_model):
    out = tmp_path / "out" / "chunks.jsonl"
    assert main(["chunks", str(tmp_path / "nope"), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("ragcal: error: ") and str(tmp_path / "nope") in error
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- console output


def test_slice_summary_prints_whole_number_counts(capsys):
    from ragcal.cli._options import print_slice_summary

    table = pd.DataFrame(
        {
            "slice": ["answerable"] * 9 + ["unrelated"] * 3,
            "dense_top1": [0.61, 0.72, 0.55, 0.8, 0.66, 0.7, 0.59, 0.74, 0.68, 0.12, 0.2, float("nan")],
        }
    )
    print_slice_summary(table)
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "dense_top1 by slice:"
    assert lines[1].split() == ["count", "median", "min", "max"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[3:]}
    assert rows["answerable"][0] == "9" and rows["unrelated"][0] == "2"
    assert rows["answerable"][1:] == ["0.68", "0.55", "0.8"]


SIGNALS_MODULE = '''from ragcal.signals import register_signal


@register_signal("dense_top3_mean_cli", retrievers=("dense",))
def dense_top3_mean_cli(results):
    """Mean cosine of the three best chunks."""
    return float(results["dense"].scores[:3].mean())
'''


def test_score_with_a_signals_module_writes_its_column(fastapi_slice, tmp_path, embedder, capsys):
    from ragcal.signals import SIGNALS, unregister_signal

    module = write(tmp_path / "my_signals.py", SIGNALS_MODULE)
    queries = write(tmp_path / "queries.csv", QUERIES)
    out = tmp_path / "scores.csv"
    arguments = ["score", str(queries), "--corpus", str(fastapi_slice), "--out", str(out)]
    arguments += ["--cache-dir", str(embedder.cache_dir), "--signals-module", str(module)]
    try:
        assert main(arguments) == 0
        assert "registered dense_top3_mean_cli" in capsys.readouterr().err
        table = pd.read_csv(out)
        assert "dense_top3_mean_cli" in table.columns
        assert (table["dense_top3_mean_cli"] <= table["dense_top1"] + 1e-9).all()
    finally:
        if "dense_top3_mean_cli" in SIGNALS:
            unregister_signal("dense_top3_mean_cli")


def learned_scores_csv(path):
    rows = []
    for n in range(40):
        answerable = n % 2 == 0
        rows.append(
            {
                "id": f"q{n}",
                "query": f"question {n}",
                "answerable": answerable,
                "slice": "answerable" if answerable else ("near-domain" if n % 4 == 1 else "unrelated"),
                "dense_top1": 0.3 + 0.01 * n + (0.2 if answerable else 0.0),
                "bm25_top1_raw": 5.0 + (n % 7) + (6.0 if answerable else 0.0),
                "dense_top3_mean_cli": 0.25 + 0.005 * n + (0.15 if answerable else 0.0),
            }
        )
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_fit_gate_learned_with_named_signals_from_a_module(tmp_path, capsys):
    from ragcal.signals import SIGNALS, unregister_signal

    scores = learned_scores_csv(tmp_path / "scores.csv")
    module = write(tmp_path / "my_signals.py", SIGNALS_MODULE)
    gate_path = tmp_path / "gate.json"
    base = ["fit-gate", str(scores), "--learned", "--rule", "keep@0.9", "--out", str(gate_path)]
    assert main([*base, "--signals", "dense_top1,dense_top3_mean_cli"]) == 2
    assert "unknown signal 'dense_top3_mean_cli'" in capsys.readouterr().err and not gate_path.exists()
    try:
        assert main([*base, "--signals", "dense_top1,dense_top3_mean_cli", "--signals-module", str(module)]) == 0
        out = capsys.readouterr().out
        assert "standardised coefficients" in out and "dense_top3_mean_cli" in out
        document = json.loads(gate_path.read_text())
        assert document["gate"]["type"] == "learned"
        assert document["gate"]["signals"] == ["dense_top1", "dense_top3_mean_cli"]
        assert document["fitted"]["signals_from"] == "--signals"
        assert document["fitted"]["signals_modules"] == [str(module)]
    finally:
        if "dense_top3_mean_cli" in SIGNALS:
            unregister_signal("dense_top3_mean_cli")


def test_fit_gate_learned_says_which_default_set_it_uses(tmp_path, capsys):
    from ragcal.gates import DEFAULT_LEARNED_SIGNALS

    scores = pd.read_csv(learned_scores_csv(tmp_path / "scores.csv"))
    for offset, name in enumerate(DEFAULT_LEARNED_SIGNALS):
        if name not in scores:
            scores[name] = scores["dense_top1"] * (offset + 1) + (scores.index % 3) * 0.01
    scores.to_csv(tmp_path / "scores.csv", index=False)
    gate_path = tmp_path / "gate.json"
    code = main(["fit-gate", str(tmp_path / "scores.csv"), "--learned", "--out", str(gate_path)])
    out = capsys.readouterr().out
    assert code == 0
    assert f"using the default set {','.join(DEFAULT_LEARNED_SIGNALS)}" in out
    assert json.loads(gate_path.read_text())["gate"]["signals"] == list(DEFAULT_LEARNED_SIGNALS)
    assert main(["fit-gate", str(tmp_path / "scores.csv"), "--signals", "dense_top1", "--out", str(gate_path)]) == 2
    assert "add --learned" in capsys.readouterr().err


def test_ask_names_the_missing_signals_module(tmp_path, capsys):
    gate = {
        "format": "ragcal-gate/1",
        "gate": {
            "type": "learned",
            "signals": ["not_registered_anywhere"],
            "scaler_mean": [0.0],
            "scaler_scale": [1.0],
            "coefficients": [1.0],
            "intercept": 0.0,
            "threshold": 0.5,
        },
        "provenance": {"model_fingerprint": "m"},
    }
    path = write(tmp_path / "gate.json", json.dumps(gate))
    assert main(["ask", "--gate", str(path), "anything"]) == 2
    error = capsys.readouterr().err
    assert "unknown signal 'not_registered_anywhere'" in error and "--signals-module FILE.py" in error


def test_a_broken_signals_module_is_an_error_not_a_traceback(tmp_path, capsys):
    scores = write(tmp_path / "scores.csv", "id,query,answerable,slice,dense_top1\na,q,true,answerable,0.5\n")
    for body, expected in (("def broken(:\n", "line 1"), ("raise RuntimeError('boom')\n", "RuntimeError: boom")):
        module = write(tmp_path / "bad_signals.py", body)
        code = main(["calibrate", str(scores), "--signals-module", str(module)])
        error = capsys.readouterr().err
        assert code != 0 and "signals module failed to load" in error and expected in error
        assert "Traceback" not in error


def test_reproduce_chunking_names_a_bad_variant_before_any_work(tmp_path, capsys, no_model):
    results = tmp_path / "results"
    assert main(["reproduce", "--chunking", "headings-256,fixed-9", "--results", str(results)]) == 2
    assert "--chunking: unknown variant 'fixed-9'; known: headings-128, headings-256" in capsys.readouterr().err
    assert main(["reproduce", "--chunking", "fixed-500", "--results", str(results)]) == 2
    assert "--chunking must include headings-256" in capsys.readouterr().err
    assert not results.exists()


def test_reproduce_chunking_keeps_the_order_given_once_each():
    from ragcal.chunk_sweep import CHUNKING_VARIANTS
    from ragcal.study.commands import chunking_variants

    variants = chunking_variants(" fixed-500, headings-256,fixed-500,")
    assert list(variants) == ["fixed-500", "headings-256"] and variants["fixed-500"] == CHUNKING_VARIANTS["fixed-500"]
