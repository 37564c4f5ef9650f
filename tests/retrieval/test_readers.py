"""Passage readers: steps after retrieval that add a view (a judge is one); the index and the candidates run them alike."""

from __future__ import annotations

import numpy as np
import pytest

from ragcal.importers.candidates import read_candidates_jsonl
from ragcal.candidate_scoring import score_candidates
from ragcal.retrieval.base import RetrievalResult
from ragcal.retrieval.index import IndexOptions, build_index
from ragcal.retrieval.readers import PassageReader, apply_readers, check_readers, readers_config
from ragcal.scoring import index_arguments


class LengthReader:
    """Not a judge: scores the first ``depth`` dense passages by their length, longest first."""

    name = "length"

    def __init__(self, depth=2):
        self.depth = depth
        self.calls = []

    def config(self):
        return {"length_depth": self.depth}

    def __call__(self, queries, retrieved, texts, *, check_leakage=True):
        self.calls.append((list(queries), check_leakage))
        out = []
        for result in retrieved["dense"]:
            ids = result.chunk_ids[: self.depth]
            lengths = np.array([len(texts[chunk_id]) for chunk_id in ids], dtype=float)
            order = np.argsort(-lengths, kind="stable")
            out.append(RetrievalResult(self.name, tuple(ids[i] for i in order), lengths[order]))
        return out


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def corpus(tmp_path):
    write(tmp_path / "docs" / "cookies.md", "# Cookies\n\nSet a cookie with response.set_cookie on the response object.\n")
    write(tmp_path / "docs" / "cors.md", "# CORS\n\nCORSMiddleware lets browsers call the API.\n")
    return tmp_path / "docs"


def test_check_readers_refuses_what_is_not_a_reader_and_names_taken_twice():
    reader = LengthReader()
    assert isinstance(reader, PassageReader)
    assert check_readers([reader], "f") == (reader,)
    assert check_readers(None, "f") == ()
    with pytest.raises(TypeError, match="The 'readers' parameter of build_index must be a sequence of passage readers"):
        check_readers(["judge/"], "build_index")
    with pytest.raises(ValueError, match="'length' is named twice"):
        check_readers([reader, LengthReader()], "f")
    with pytest.raises(ValueError, match="'length' is named twice"):
        check_readers([reader], "f", taken=("dense", "length"))


def test_apply_readers_runs_in_order_and_checks_one_result_per_query():
    class Short(LengthReader):
        name = "short"

        def __call__(self, queries, retrieved, texts, *, check_leakage=True):
            return []

    dense = [RetrievalResult("dense", ("a.md#0",), np.array([0.5]))]
    retrieved = {"dense": dense}
    reader = LengthReader(depth=1)
    assert apply_readers([reader], ["q"], retrieved, {"a.md#0": "abc"}, check_leakage=False) is retrieved
    assert retrieved["length"][0].scores.tolist() == [3.0] and reader.calls == [(["q"], False)]
    with pytest.raises(ValueError, match="reader .short. returned 0 results for 1 queries"):
        apply_readers([Short()], ["q"], retrieved, {"a.md#0": "abc"})
    assert readers_config([reader, Short(3)]) == {"length_depth": 3}  # a later reader's key wins


def test_the_index_runs_any_reader_records_it_and_keeps_it_in_views(corpus, embedder):
    reader = LengthReader(depth=2)
    plain = build_index(corpus, embedder=embedder)
    index = build_index(corpus, embedder=embedder, readers=[reader])
    assert index.retriever_names[-1] == "length" and "length" not in plain.retriever_names
    assert index.config["length_depth"] == 2 and "length_depth" not in plain.config
    retrieved = index.retrieve(["How do I set a cookie?"], check_leakage=False)
    texts = {chunk.chunk_id: chunk.text for chunk in index.chunks}
    lengths = sorted((len(texts[chunk_id]) for chunk_id in retrieved["dense"][0].chunk_ids[:2]), reverse=True)
    assert retrieved["length"][0].scores.tolist() == lengths
    assert reader.calls == [(["How do I set a cookie?"], False)]
    with pytest.raises(ValueError, match="'dense' is named twice"):
        build_index(corpus, embedder=embedder, readers=[type("Dense", (LengthReader,), {"name": "dense"})()])


def test_build_index_takes_its_options_as_one_object(corpus, embedder):
    with pytest.raises(TypeError, match="The 'options' parameter of build_index must be an IndexOptions"):
        build_index(corpus, embedder=embedder, options={"chunker": "fixed"})
    with pytest.raises(ValueError, match="chunker"):
        IndexOptions(chunker="sentences")
    fixed = build_index(corpus, embedder=embedder, options=IndexOptions(chunker="fixed", window=5, persist=False))
    assert fixed.config["chunker"] == "fixed" and fixed.config["window"] == 5 and len(fixed.chunks) > 2


def test_index_arguments_turns_flat_settings_into_build_index_arguments(corpus, embedder):
    arguments = index_arguments({"chunker": "fixed", "window": 30, "exclude": ["cors.md"], "judge": None})
    assert arguments["options"] == IndexOptions(chunker="fixed", window=30)
    assert arguments["exclude"] == ("cors.md",) and arguments["readers"] == () and arguments["reranker"] is None
    index = build_index(corpus, **{**arguments, "embedder": embedder})
    assert {chunk.doc_path for chunk in index.chunks} == {"cookies.md"}
    with pytest.raises(ValueError, match="unknown judge_path"):
        index_arguments({"judge_path": "x"})


def test_candidates_run_the_same_readers(tmp_path, embedder):
    path = write(
        tmp_path / "c.jsonl",
        '{"id": "q1", "query": "set a cookie", "answerable": true, "slice": "answerable", "passages": '
        '[{"id": "p1", "text": "Set a cookie with response.set_cookie.", "gold": true}, '
        '{"id": "p2", "text": "CORS lets browsers call the API."}]}\n'
        '{"id": "q2", "query": "bake bread", "answerable": false, "slice": "unrelated", "passages": '
        '[{"id": "p2", "text": "CORS lets browsers call the API."}]}\n',
    )
    reader = LengthReader(depth=1)
    scores = score_candidates(read_candidates_jsonl(path), embedder=embedder, readers=[reader])
    assert scores.config["length_depth"] == 1 and len(scores.retrieved["length"]) == 2
    assert reader.calls[0][1] is True  # measuring: leakage checks stay on
