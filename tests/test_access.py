"""Access control before ranking: nothing a caller may not see reaches any result, score, run, decision or message."""

import hashlib
import json
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragcal.access import AccessMapError, AccessPolicy, AccessWarning, load_access_map, parse_levels
from ragcal.embedding import ModelSpec
from ragcal.gates import FallbackChain, FloorGapGate, LearnedGate, Stage, ThresholdGate, ask, load_gate, save_gate
from ragcal.gates.learned_score import LinearScore
from ragcal.gates.refusal import CorpusDescription
from ragcal.retrieval import BM25Retriever
from ragcal.retrieval.diagnostics import BM25_KEYS, DENSE_KEYS
from ragcal.retrieval.fusion import reciprocal_rank_fusion
from ragcal.retrieval.index import IndexOptions, build_index
from ragcal.runs import format_trec_run
from ragcal.scoring import score_table
from ragcal.signals import QPP_SIGNALS

LEVELS = ("public", "internal", "restricted")
VOCABULARY = (
    "request response cookie header token database session cache route model schema upload file docker worker "
    "proxy test error status query path body form security password user admin deploy server"
).split()


class HashEmbedder:
    """A deterministic bag-of-hashed-words embedder: no model, same interface as Embedder for build_index."""

    dimension = 32
    spec = ModelSpec("hash-bag-32", "hash-bag-32", None)
    fingerprint = "hash-bag-32@test"

    def encode(self, texts, *, show_progress_bar=None):
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            vectors[row, 0] = 0.5  # never the zero vector
            for word in str(text).lower().split():
                slot = int(hashlib.sha256(word.encode()).hexdigest()[:8], 16) % self.dimension
                vectors[row, slot] += 1.0
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def secret(page: int) -> str:
    return f"zqsecret{page:02d}x"


def heading(page: int) -> str:
    return f"Heading zqhead{page:02d}x"


def write_corpus(root: Path, pages, *, front_matter: bool) -> dict:
    """``pages``: list of (level, [section word lists]); returns {page path: level}."""
    levels = {}
    for number, (level, sections) in enumerate(pages):
        path = f"doc{number:02d}.md"
        levels[path] = level
        lines = [f"---\naccess_level: {level}\n---"] if front_matter else []
        lines.append(f"# {heading(number)}\n")
        for position, words in enumerate(sections):
            lines.append(f"## Part {position} of {secret(number)}\n\n{' '.join(words)} {secret(number)}.\n")
        (root / path).write_text("\n".join(lines), encoding="utf-8")
    return levels


pages_strategy = st.lists(
    st.tuples(
        st.sampled_from(LEVELS),
        st.lists(st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=8), min_size=1, max_size=3),
    ),
    min_size=2,
    max_size=6,
)


@pytest.fixture(scope="module")
def tiny_reranker(tmp_path_factory):
    from ragcal.retrieval.rerank import CrossEncoderReranker, build_tiny_cross_encoder

    folder = build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny_ce") / "model")
    return CrossEncoderReranker(str(folder), depth=20, cache_dir=tmp_path_factory.mktemp("rerank_cache"))


def leaks(text: str, hidden_pages) -> list[str]:
    """Which marks of hidden pages (path, heading, secret word) occur in ``text``."""
    found = []
    for path in hidden_pages:
        number = int(path[3:5])
        for mark in (path, heading(number), f"zqhead{number:02d}x", secret(number)):
            if mark in text:
                found.append(mark)
    return found


def gates_for(index, bound_to):
    """A gate of every kind that reads ``index``'s views, each bound to ``bound_to`` (often a larger view)."""
    stages = [Stage("hybrid", ThresholdGate("dense_top1", 0.6, passages_from="rrf"))]
    if index.reranker is not None:
        stages.insert(0, Stage("rerank", ThresholdGate("rerank_top1", 0.99)))
    stages += [
        Stage("keyword", ThresholdGate("bm25_top1_stopwords", 1.0)),
        Stage("broad", ThresholdGate("dense_top1", 0.2), tier="partial"),
    ]
    learned = LearnedGate(LinearScore(("dense_top1", "bm25_top1_stopwords"), (0.5, 1.0), (0.2, 1.0), (3.0, 1.0), 0.0), 0.7)
    gates = [
        ThresholdGate("dense_top1", 0.5, hedge_below=0.7),
        FloorGapGate(0.3, 0.05),
        FallbackChain(tuple(stages)),
        learned,
    ]
    return [gate.bind(bound_to) for gate in gates]


# Derandomized so that CI is reproducible; run with --hypothesis-seed=N (and without derandomize) to explore more.
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    pages=pages_strategy,
    allowed=st.sets(st.sampled_from(LEVELS), min_size=1),
    queries=st.lists(st.lists(st.sampled_from(VOCABULARY + ["zqsecret00x", "zqsecret01x"]), min_size=1, max_size=5),
                     min_size=1, max_size=4),
    front_matter=st.booleans(),
    use_reranker=st.booleans(),
)
def test_no_disallowed_chunk_reaches_any_output(pages, allowed, queries, front_matter, use_reranker, request):
    reranker = request.getfixturevalue("tiny_reranker") if use_reranker else None
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "docs"
        root.mkdir()
        levels = write_corpus(root, pages, front_matter=front_matter)
        policy = AccessPolicy()
        if not front_matter:
            map_path = Path(folder) / "access.csv"
            map_path.write_text("path_glob,level\n" + "".join(f"{p},{lv}\n" for p, lv in levels.items()))
            policy = AccessPolicy.from_options(access_map=map_path)
        visible_pages = {path for path, level in levels.items() if level in allowed}
        hidden_pages = set(levels) - visible_pages
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AccessWarning)
            index = build_index(root, embedder=HashEmbedder(), reranker=reranker, exclude=(),
                options=IndexOptions(access=policy))
        if not visible_pages:
            with pytest.raises(ValueError, match="no chunk .* is visible"):
                index.restrict(allowed)
            return
        view = index.restrict(allowed)
        assert {chunk.doc_path for chunk in view.chunks} == visible_pages
        texts = [" ".join(words) for words in queries]
        retrieved = index.retrieve(texts, allowed_levels=allowed)
        assert set(retrieved) == set(view.retriever_names)
        for results in retrieved.values():
            for result in results:
                assert {chunk_id.rsplit("#", 1)[0] for chunk_id in result.chunk_ids} <= visible_pages

        frame = pd.DataFrame(
            {"id": [f"q{n}" for n in range(len(texts))], "query": texts, "answerable": True, "slice": "s"}
        )
        table = score_table(frame, retrieved)
        outputs = [table.to_csv(index=False), json.dumps(view.config)]
        outputs += [format_trec_run(frame["id"], results) for results in retrieved.values()]
        # Every public decision path, with gates bound to the full index (the reported leak) and to the view.
        by_hand = {name: retriever.search(texts) for name, retriever in view.bm25.items()}
        by_hand["dense"] = view.dense.search(texts)
        by_hand["rrf"] = [
            reciprocal_rank_fusion([by_hand[name][position] for name in view.fuse]) for position in range(len(texts))
        ]
        messages = []
        for bound_to in (index.description, view.description):
            for number, gate in enumerate(gates_for(view, bound_to)):
                outputs.append(gate.decide_table(table).to_csv(index=False))
                path = save_gate(Path(folder) / f"gate{number}.json", gate, provenance=index.config)
                loaded = load_gate(path, index=index)  # bound to the full index, as the README shows
                for decider in (gate, loaded):
                    for position, text in enumerate(texts):
                        decision = decider.decide({name: lists[position] for name, lists in retrieved.items()}, query=text)
                        outputs.append(json.dumps(decision.to_dict()))
                        messages.append(decision.message or "")
                        if "rerank" not in decider.retrievers:
                            assembled = {name: lists[position] for name, lists in by_hand.items()}
                            outputs.append(json.dumps(decider.decide(assembled, query=text).to_dict()))
                decisions, asked = ask(loaded, index, texts, allowed_levels=allowed)
                outputs += [asked.to_csv(index=False), *(json.dumps(decision.to_dict()) for decision in decisions)]
                messages += [decision.message or "" for decision in decisions]
        # Counts describe the view too: "N passages from M pages" is never the full index's.
        described = f"({len(view.chunks):,} passages from {len(visible_pages):,} pages)"
        assert all(described in message for message in messages if "passages from" in message)
        # The question itself may name a secret word (the caller typed it); everything else must not.
        for text in sorted(texts, key=len, reverse=True):  # longest first: one question may contain another
            outputs = [output.replace(text, "").replace(json.dumps(text)[1:-1], "") for output in outputs]
        assert not [mark for output in outputs for mark in leaks(output, hidden_pages)]

        # No score depends on restricted text: the view scores exactly like a corpus without the hidden pages.
        alone = Path(folder) / "alone"
        alone.mkdir()
        for path in visible_pages:
            (alone / path).write_text((root / path).read_text())
        clean = build_index(alone, embedder=HashEmbedder(), reranker=reranker, exclude=())
        clean_retrieved = clean.retrieve(texts)
        expected = score_table(frame, clean_retrieved)
        assert set(QPP_SIGNALS) <= set(table.columns)  # the query-performance predictors are compared too
        pd.testing.assert_frame_equal(table, expected, check_exact=False, rtol=1e-9, atol=1e-12)
        # So is every diagnostic the signals read (corpus score, clarity, perturbation stability, ...), key by key.
        for name, keys in (("dense", DENSE_KEYS), ("bm25_raw", BM25_KEYS), ("bm25_stopwords", BM25_KEYS)):
            for ours, theirs in zip(retrieved[name], clean_retrieved[name]):
                assert list(ours.info) == list(theirs.info) == list(keys)
                np.testing.assert_allclose(
                    list(ours.info.values()), list(theirs.info.values()), rtol=1e-9, atol=1e-12, err_msg=name
                )


def test_dense_search_returns_k_allowed_chunks_under_a_restrictive_filter(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    # 30 restricted pages about cookies, 5 public pages about something else: a post-filtered top-10 would be empty.
    pages = [("restricted", [["cookie", "cookie", "header"]])] * 30 + [("public", [["docker", "worker"]])] * 5
    write_corpus(root, pages, front_matter=True)
    index = build_index(root, embedder=HashEmbedder(), exclude=())
    dense_only = index.dense.search(["cookie header"], k=10)[0]
    assert all(chunk_id.startswith(tuple(f"doc{n:02d}" for n in range(30))) for chunk_id in dense_only.chunk_ids)
    result = index.restrict("public").dense.search(["cookie header"], k=5)[0]
    assert len(result) == 5
    assert {chunk_id[:5] for chunk_id in result.chunk_ids} == {f"doc{n:02d}" for n in range(30, 35)}
    assert len(index.restrict("public").dense.search(["cookie header"], k=10)[0]) == 5  # only 5 exist


def test_bm25_statistics_come_from_the_visible_chunks_only(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    pages = [("restricted", [["cookie"] * 5])] * 4 + [("public", [["cookie", "docker"]]), ("public", [["worker"]])]
    write_corpus(root, pages, front_matter=True)
    index = build_index(root, embedder=HashEmbedder(), exclude=())
    view = index.restrict(["public"])
    reference = BM25Retriever.from_chunks(view.chunks, variant="stopwords")
    ours = view.bm25["bm25_stopwords"].search(["cookie"])[0]
    np.testing.assert_allclose(ours.scores, reference.search(["cookie"])[0].scores)
    full = index.bm25["bm25_stopwords"].search(["cookie"])[0]
    public_id = next(chunk_id for chunk_id in ours.chunk_ids)
    assert ours.scores[0] != dict(zip(full.chunk_ids, full.scores))[public_id]  # IDF differs: restricted text counted


def test_secret_word_on_a_restricted_page_is_found_only_with_access(fastapi_slice, embedder, tmp_path):
    import shutil

    root = tmp_path / "docs"
    shutil.copytree(fastapi_slice, root)
    shutil.copytree(fastapi_slice.parent / "docs_src", tmp_path / "docs_src")
    (root / "internal-notes.md").write_text(
        "---\naccess_level: restricted\n---\n# Incident runbook\n\nThe failover password is quenzalbrik. "
        "Rotate it after every incident.\n",
        encoding="utf-8",
    )
    index = build_index(root, embedder=embedder, exclude=())
    question = ["What is the quenzalbrik failover password?"]
    for allowed, found in ((["public"], False), (["public", "restricted"], True)):
        retrieved = index.retrieve(question, allowed_levels=allowed)
        hit = any(
            chunk_id.startswith("internal-notes.md") for results in retrieved.values() for chunk_id in results[0].chunk_ids
        )
        assert hit is found, allowed
        bm25 = retrieved["bm25_stopwords"][0]
        assert (bm25.chunk_ids[:1] == ("internal-notes.md#0",)) is found
    view = index.restrict("public")
    decision = ThresholdGate("dense_top1", 0.99).bind(CorpusDescription.from_index(view)).decide(
        {name: lists[0] for name, lists in view.retrieve(question).items()}, query=question[0]
    )
    assert decision.action == "refuse"
    assert "Incident runbook" not in decision.message and "internal-notes" not in decision.message


def test_levels_come_from_front_matter_then_the_map_then_the_default(tmp_path):
    map_path = tmp_path / "access.csv"
    map_path.write_text("path_glob,level\nadvanced/secret.md,restricted\nadvanced/,internal\nnowhere/*,internal\n")
    policy = AccessPolicy.from_options(access_map=map_path, default="public")
    assert policy.rules == (("advanced/secret.md", "restricted"), ("advanced/*", "internal"), ("nowhere/*", "internal"))
    assert policy.level_of_page("advanced/secret.md") == "restricted"  # first match wins
    assert policy.level_of_page("advanced/deep/page.md") == "internal"  # * crosses folders
    assert policy.level_of_page("tutorial/index.md") == "public"
    assert policy.level_of_page("advanced/x.md", {"access_level": "public"}) == "public"  # front matter first
    assert AccessPolicy(default="staff").level_of_page("a.md") == "staff"
    assert policy.to_dict()["access_map"] == str(map_path) and len(policy.to_dict()["access_map_sha256"]) == 64

    class Page:
        def __init__(self, path):
            self.doc_path, self.metadata = path, {}

    with pytest.raises(AccessMapError, match="access.csv: row\\(s\\) 'advanced/secret.md', 'nowhere/\\*' match no page"):
        policy.levels([Page("advanced/a.md"), Page("b.md")])
    used = AccessPolicy(policy.rules[:2], source=str(map_path))
    assert used.levels([Page("advanced/a.md"), Page("advanced/secret.md")]) == ["internal", "restricted"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("glob,level\na,b\n", "missing column.*path_glob"),
        ("path_glob,level\n,internal\n", "line 2: empty path_glob"),
        ("path_glob,level\nadvanced/,in ternal\n", "line 2: access level 'in ternal'"),
    ],
)
def test_bad_access_maps_name_the_file_and_line(tmp_path, text, message):
    path = tmp_path / "map.csv"
    path.write_text(text)
    with pytest.raises(AccessMapError, match=message) as error:
        load_access_map(path)
    assert str(path) in str(error.value)
    with pytest.raises(AccessMapError, match="not found"):
        load_access_map(tmp_path / "missing.csv")


def test_parse_levels():
    assert parse_levels("internal, public,public") == ("internal", "public")
    assert parse_levels(["public"]) == ("public",)
    for bad in ("", " , ", []):
        with pytest.raises(ValueError, match="at least one"):
            parse_levels(bad)
    with pytest.raises(ValueError, match="letters, digits"):
        parse_levels("public;internal")


def test_a_view_of_everything_is_the_index_itself(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    write_corpus(root, [("public", [["cookie"]]), ("public", [["docker"]])], front_matter=False)
    index = build_index(root, embedder=HashEmbedder(), exclude=())
    assert index.restrict("public") is index
    with pytest.raises(ValueError, match="no chunk .* visible at access level.*internal.*has level.*public"):
        index.restrict("internal")


def test_ask_binds_the_gate_to_the_callers_view(tmp_path):
    from ragcal.gates import ask

    root = tmp_path / "docs"
    root.mkdir()
    write_corpus(root, [("restricted", [["cookie", "header"]]), ("public", [["docker", "worker"]])], front_matter=True)
    index = build_index(root, embedder=HashEmbedder(), exclude=())
    gate = ThresholdGate("dense_top1", 1.5).bind(CorpusDescription.from_index(index))  # refuses everything
    decisions, table = ask(gate, index, ["cookie header"], allowed_levels="public")
    assert decisions[0].action == "refuse"
    assert not leaks(decisions[0].message + table.to_csv(), {"doc00.md"})
    decisions, _ = ask(gate, index, ["cookie header"])  # the whole index: the restricted page is the closest
    assert "zqhead00x" in decisions[0].message


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_a_view_keeps_the_approximate_index_kind(tmp_path, kind):
    root = tmp_path / "docs"
    root.mkdir()
    pages = [("restricted" if n % 3 == 0 else "public", [[VOCABULARY[n % len(VOCABULARY)], "cookie"]]) for n in range(30)]
    write_corpus(root, pages, front_matter=True)
    index = build_index(root, embedder=HashEmbedder(), exclude=(), options=IndexOptions(dense_index=kind))
    view = index.restrict("public")
    assert view.dense.index_spec.kind == kind and view.config["dense_index"] == kind
    result = view.dense.search(["cookie"], k=5)[0]
    assert len(result) == 5 and all(int(chunk_id[3:5]) % 3 for chunk_id in result.chunk_ids)


def test_a_level_that_no_page_has_is_named(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    write_corpus(root, [("public", [["cookie"]]), ("internal", [["docker"]])], front_matter=True)
    index = build_index(root, embedder=HashEmbedder(), exclude=())
    with pytest.warns(AccessWarning, match="internl occur on no page"):
        view = index.restrict("public,internl")
    assert {chunk.doc_path for chunk in view.chunks} == {"doc00.md"}  # fails closed
    map_path = tmp_path / "m.csv"
    map_path.write_text("path_glob,level\ndoc01.md,internal\n")
    assert AccessPolicy.from_options(access_map=map_path).source == str(map_path.resolve())
