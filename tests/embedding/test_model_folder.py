"""The embedder reads what its cache key needs from the model's folder, so a fully cached run never loads the model.

Loading MiniLM means importing sentence-transformers and transformers, about five seconds in every notebook kernel
and command that finds all its vectors in the cache. The folder's configuration files say the same thing as the
loaded model, for the packaged model (checked here against the loaded one), and say nothing (None, so the model is
loaded) for every layout they do not settle.
"""

import json
import shutil

import numpy as np
import pytest

from ragcal.embedding import Embedder, minilm, resolve_model
from ragcal.embedding.minilm import dimension_from_folder, fixed_shapes_from_folder, supports_fixed_shapes

CONFIG_FILES = (
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "1_Pooling/config.json",
)


@pytest.fixture
def config_copy(tmp_path):
    """The packaged model's configuration files, without its weights."""
    packaged = resolve_model().location
    for name in CONFIG_FILES:
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f"{packaged}/{name}", target)
    return tmp_path


def _edit(path, **changes):
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def test_the_packaged_models_folder_says_what_the_loaded_model_says(tmp_path):
    embedder = Embedder(cache_dir=tmp_path)
    key, dimension = embedder.cache_key, embedder.dimension
    assert embedder._model is None  # neither needed the model
    assert fixed_shapes_from_folder(embedder.spec.location) is True
    assert dimension == dimension_from_folder(embedder.spec.location) == 384
    model = embedder.model  # loading checks both against the folder, and passes
    assert supports_fixed_shapes(model) is True
    assert model.get_embedding_dimension() == 384
    assert embedder.cache_key == key and key.split("/")[-2] == minilm.ENCODING_SCHEME


def test_a_fully_cached_encode_never_loads_the_model(tmp_path):
    texts = ["How do I set a cookie?", "Background tasks run later."]
    vectors = Embedder(cache_dir=tmp_path).encode(texts)
    again = Embedder(cache_dir=tmp_path)
    np.testing.assert_array_equal(again.encode(texts), vectors)
    assert again.last_stats == {"cached": 2, "encoded": 0}
    assert again._model is None


def test_the_copied_configuration_settles_both(config_copy):
    assert fixed_shapes_from_folder(config_copy) is True
    assert dimension_from_folder(config_copy) == 384


@pytest.mark.parametrize(
    "edit",
    [
        "lower-case",
        "default prompt",
        "no tokenizer",
        "first module not a transformer",
        "no modules.json",
        "modules.json not a list",
        "unreadable sentence_bert_config.json",
    ],
)
def test_what_the_folder_does_not_settle_is_left_to_the_loaded_model(config_copy, edit):
    if edit == "lower-case":
        _edit(config_copy / "sentence_bert_config.json", do_lower_case=True)
    elif edit == "default prompt":
        _edit(config_copy / "config_sentence_transformers.json", prompts={"query": "q: "}, default_prompt_name="query")
    elif edit == "no tokenizer":
        for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):
            (config_copy / name).unlink()
    elif edit == "first module not a transformer":
        modules = json.loads((config_copy / "modules.json").read_text())
        modules[0]["type"] = "sentence_transformers.models.StaticEmbedding"
        (config_copy / "modules.json").write_text(json.dumps(modules))
    elif edit == "no modules.json":
        (config_copy / "modules.json").unlink()
    elif edit == "modules.json not a list":
        (config_copy / "modules.json").write_text('{"0": "Transformer"}')
    else:
        (config_copy / "sentence_bert_config.json").write_text("{not json")
    assert fixed_shapes_from_folder(config_copy) is None


@pytest.mark.parametrize("edit", ["two pooling modes", "a dense layer", "no pooling config", "dimension not a number"])
def test_a_dimension_the_folder_does_not_settle_is_left_to_the_loaded_model(config_copy, edit):
    pooling = config_copy / "1_Pooling" / "config.json"
    if edit == "two pooling modes":
        _edit(pooling, pooling_mode_cls_token=True)
    elif edit == "a dense layer":
        modules = json.loads((config_copy / "modules.json").read_text())
        modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
        modules[3]["idx"] = 3
        (config_copy / "modules.json").write_text(json.dumps(modules))
    elif edit == "no pooling config":
        pooling.unlink()
    else:
        _edit(pooling, word_embedding_dimension="384")
    assert dimension_from_folder(config_copy) is None
    assert fixed_shapes_from_folder(config_copy) is True  # the first module still settles the encoding


def test_a_folder_that_disagrees_with_its_loaded_model_is_an_error(tmp_path, monkeypatch):
    embedder = Embedder(cache_dir=tmp_path)
    assert embedder.cache_key.split("/")[-2] == minilm.ENCODING_SCHEME  # read from the folder: fixed shapes
    # A model whose loaded form is not fed fixed shapes (say, a module lower-cases that the files do not declare).
    monkeypatch.setattr(minilm, "supports_fixed_shapes", lambda model: False)
    with pytest.raises(RuntimeError, match=r"configuration files give fixed shapes = True, the loaded model False"):
        embedder.model
