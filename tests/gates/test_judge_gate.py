"""A gate on a judge signal: it cuts passages by the judge, and its file refuses another judge.

The judge here is a plain object of the :class:`ragcal.judges.Judge` protocol whose
probabilities are written out per passage, so every expected value is read off
the table below.
"""

import json

import numpy as np
import pytest
from conftest import write

from ragcal.access import AccessPolicy
from ragcal.gates import GateFileError, ThresholdGate
from ragcal.gates.files import PROVENANCE_KEYS, check_provenance, index_options, save_gate
from ragcal.judges import JUDGE, Judge, JudgeReader, judge_config, judge_results, load_judge
from ragcal.retrieval.base import RetrievalResult
from ragcal.retrieval.index import IndexOptions, build_index


class TableJudge:
    """P(answers) looked up by passage text (0.0 for a passage not in the table)."""

    trained_on = frozenset()

    def __init__(self, probabilities, *, name="table-judge"):
        self.probabilities = dict(probabilities)
        self.name = name
        self.fingerprint = f"{name}@" + ",".join(f"{key}={value}" for key, value in sorted(self.probabilities.items()))

    def score(self, questions, passages):
        return np.array([self.probabilities.get(passage, 0.0) for passage in passages], dtype=np.float64)


TEXTS = {f"page.md#{n}": f"passage {n}" for n in range(6)}


def results_for(judge, dense_ids, *, depth=10):
    dense = RetrievalResult("dense", tuple(dense_ids), np.linspace(0.9, 0.4, len(dense_ids)))
    return {"dense": dense, JUDGE: judge_results(judge, ["a question"], [dense], TEXTS, depth=depth)[0]}


def test_a_judge_top1_gate_passes_on_only_the_passages_the_judge_accepts():
    judge = TableJudge({"passage 0": 0.2, "passage 1": 0.9, "passage 2": 0.65, "passage 3": 0.6, "passage 4": 0.1})
    assert isinstance(judge, Judge)
    gate = ThresholdGate("judge_top1", 0.6)
    decision = gate.decide(results_for(judge, [f"page.md#{n}" for n in range(5)]))
    assert decision.action == "answer" and decision.score == 0.9
    # In the judge's order, each at least the bar (0.6 itself included); the dense first passage (0.2) is cut.
    assert decision.passages == (("page.md#1", 0.9), ("page.md#2", 0.65), ("page.md#3", 0.6))
    capped = ThresholdGate("judge_top1", 0.6, max_passages=2).decide(
        results_for(judge, [f"page.md#{n}" for n in range(5)])
    )
    assert capped.passages == (("page.md#1", 0.9), ("page.md#2", 0.65))


def test_a_judge_top1_gate_refuses_when_no_passage_clears_the_bar():
    judge = TableJudge({"passage 0": 0.5, "passage 1": 0.3})
    decision = ThresholdGate("judge_top1", 0.6).decide(results_for(judge, ["page.md#0", "page.md#1"]))
    assert decision.action == "refuse" and decision.score == 0.5 and decision.passages == ()


def test_the_judge_reads_only_its_depth_of_the_dense_list():
    judge = TableJudge({"passage 0": 0.1, "passage 1": 0.2, "passage 5": 0.99})
    decision = ThresholdGate("judge_top1", 0.15).decide(results_for(judge, [f"page.md#{n}" for n in range(6)], depth=2))
    assert decision.score == 0.2 and decision.passages == (("page.md#1", 0.2),)  # passage 5 lies below the depth


def test_nothing_retrieved_is_refused():
    decision = ThresholdGate("judge_top1", 0.6).decide(results_for(TableJudge({}), []))
    assert decision.action == "refuse" and np.isnan(decision.score) and decision.passages == ()


# --------------------------------------------------------------------------- provenance


MODEL = {"model_fingerprint": "minilm@1", "chunker": "headings"}


@pytest.mark.parametrize(
    "config, message",
    [
        ({}, "fitted with judge a@1 but the index uses no judge; a threshold on another judge's scale is wrong: "
             "pass the gate's --judge, or fit again"),
        ({"judge": "b", "judge_fingerprint": "b@2", "judge_depth": 10}, "but the index uses b@2; a threshold on"),
        ({"judge": "a", "judge_fingerprint": "a@1", "judge_depth": 5},
         "fitted over the top 10 passages but the index's judge reads 5; pass the gate's --judge-depth 10"),
    ],
)
def test_a_gate_reading_the_judge_view_refuses_another_judge(config, message):
    provenance = {**MODEL, "judge": "a", "judge_fingerprint": "a@1", "judge_depth": 10}
    with pytest.raises(GateFileError, match="^gate.json: .*" + message.replace("?", r"\?").replace(".", r"\.")):
        check_provenance(provenance, {**MODEL, **config}, source="gate.json", retrievers=("dense", JUDGE))
    check_provenance(provenance, {**MODEL, **config}, source="gate.json", retrievers=("dense",))  # reads no judge


def test_the_same_judge_passes_and_a_gate_without_judge_provenance_is_refused_a_judge_view():
    same = {**MODEL, "judge": "a", "judge_fingerprint": "a@1", "judge_depth": 10}
    check_provenance(same, same, retrievers=(JUDGE,))
    with pytest.raises(GateFileError, match=r"fitted with judge \(none recorded\) but the index uses a@1"):
        check_provenance(MODEL, same, retrievers=(JUDGE,))


def test_gate_files_keep_the_judge_and_rebuild_it(tmp_path):
    assert {"judge", "judge_fingerprint", "judge_depth"} <= set(PROVENANCE_KEYS)
    provenance = {**MODEL, "judge": "judges/mine", "judge_fingerprint": "mine@1", "judge_depth": 7, "other": 1}
    path = save_gate(tmp_path / "gate.json", ThresholdGate("judge_top1", 0.5), provenance=provenance)
    kept = json.loads(path.read_text())["provenance"]
    assert kept == {key: provenance[key] for key in ("model_fingerprint", "chunker", "judge", "judge_fingerprint",
                                                     "judge_depth")}
    assert index_options(kept)["judge"] == "judges/mine" and index_options(kept)["judge_depth"] == 7
    assert "judge" not in index_options(MODEL)


def test_load_judge_keeps_a_judge_object_and_refuses_anything_else():
    judge = TableJudge({"passage 0": 0.5})
    assert load_judge(judge) is judge
    with pytest.raises(TypeError, match="The 'judge' parameter of load_judge must be a Judge"):
        load_judge(3)
    assert judge_config(judge, depth=4) == {"judge": "table-judge", "judge_fingerprint": judge.fingerprint,
                                            "judge_depth": 4}


# --------------------------------------------------------------------------- the index


@pytest.fixture
def small_corpus(tmp_path):
    write(tmp_path / "docs" / "cookies.md", "# Cookies\n\nSet a cookie with response.set_cookie on the response.\n")
    write(tmp_path / "docs" / "cors.md", "# CORS\n\nCORSMiddleware lets browsers on other origins call the API.\n")
    write(
        tmp_path / "docs" / "secret.md",
        "---\naccess_level: internal\n---\n# Runbook\n\nRestart the cookie service with systemctl restart.\n",
    )
    return tmp_path / "docs"


def test_the_index_adds_the_judge_view_keeps_it_in_views_and_records_it(small_corpus, embedder):
    plain = build_index(small_corpus, embedder=embedder, options=IndexOptions(access=AccessPolicy()))
    texts = {chunk.chunk_id: chunk.text for chunk in plain.chunks}
    by_page = {chunk.doc_path: chunk.chunk_id for chunk in plain.chunks}
    judge = TableJudge({texts[by_page["cookies.md"]]: 0.8, texts[by_page["secret.md"]]: 0.95})
    reader = JudgeReader(judge, depth=2)
    index = build_index(small_corpus, embedder=embedder, options=IndexOptions(access=AccessPolicy()), readers=[reader])
    assert index._saved == plain._saved and plain._saved is not None  # one saved index serves both
    assert JUDGE in index.retriever_names and JUDGE not in plain.retriever_names
    assert {key: index.config[key] for key in ("judge", "judge_fingerprint", "judge_depth")} == {
        "judge": "table-judge", "judge_fingerprint": judge.fingerprint, "judge_depth": 2
    }
    assert not any(key.startswith("judge") for key in plain.config)
    retrieved = index.retrieve(["How do I set a cookie?"])
    dense, judged = retrieved["dense"][0], retrieved[JUDGE][0]
    expected = sorted((judge.probabilities.get(texts[chunk_id], 0.0) for chunk_id in dense.chunk_ids[:2]), reverse=True)
    assert set(judged.chunk_ids) == set(dense.chunk_ids[:2]) and judged.scores.tolist() == expected
    assert judged.info["judge_at_first"] == judge.probabilities.get(texts[dense.chunk_ids[0]], 0.0)
    public = index.restrict(["public"])
    assert public.readers == (reader,) and JUDGE in public.retriever_names
    seen = public.retrieve(["How do I set a cookie?"])[JUDGE][0]
    assert by_page["secret.md"] not in seen.chunk_ids and seen.scores[0] == 0.8  # the internal runbook is never read
    assert JUDGE not in plain.retrieve(["How do I set a cookie?"])
