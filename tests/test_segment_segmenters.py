"""Every segmenter on hand-made dialogues: the label contract, costs, and config instantiation."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from fakes.embed import hashing_embedder
from fakes.segment import PETS_THEN_COOKING, PETS_THEN_COOKING_LABELS, rule_backbone
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

import benchmarks.pipeline.segment  # noqa: F401  (registers the dataset=... options)
from benchmarks.data.paths import REPO_ROOT
from memsys.llm.types import LLMRequest
from memsys.methods.esmem.segmenter import ESMemSegmenter
from memsys.methods.secom.segmenter import SeComSegmenter
from memsys.segment import Segmenter, labels_from_gaps, segments_from_labels
from memsys.segment.embedding import EmbeddingSegmenter
from memsys.segment.texttiling import TextTilingSegmenter
from memsys.segment.texttiling_superdialseg import SuperDialSegTextTilingSegmenter

CONF = REPO_ROOT / "conf"
SEGMENTER_CONFIGS = sorted(path.stem for path in (CONF / "segmenter").glob("*.yaml"))


def garbage(request: LLMRequest) -> str:
    return "Sure! Here is what I think about this conversation."


def build_all() -> dict[str, Callable[[], Segmenter]]:
    backbone, _ = rule_backbone(garbage)
    return {
        "texttiling": lambda: TextTilingSegmenter(),
        "texttiling_superdialseg": lambda: SuperDialSegTextTilingSegmenter(),
        "embedding": lambda: EmbeddingSegmenter(embedder=hashing_embedder()),
        "esmem_lite": lambda: ESMemSegmenter(extraction="lite", embedder=hashing_embedder()),
        "esmem_llm": lambda: ESMemSegmenter(embedder=hashing_embedder(), backbone=backbone),
        "secom": lambda: SeComSegmenter(backbone=backbone),
    }


@pytest.mark.parametrize("name", sorted(build_all()))
@pytest.mark.parametrize("length", [1, 2, 3, 8])
def test_labels_are_one_per_utterance_binary_last_zero(name: str, length: int) -> None:
    segmenter = build_all()[name]()
    result = segmenter.segment(PETS_THEN_COOKING[:length])
    assert len(result.labels) == length
    assert set(result.labels) <= {0, 1}
    assert result.labels[-1] == 0
    assert result.cost.seconds >= 0
    json.dumps(result.cost.to_json())
    json.dumps(dict(result.details))
    if result.annotations:
        assert len(result.annotations) == length


@pytest.mark.parametrize("name", sorted(build_all()))
def test_speakers_are_accepted_and_checked(name: str) -> None:
    segmenter = build_all()[name]()
    speakers = ["A", "B"] * 4
    assert len(segmenter.segment(PETS_THEN_COOKING, speakers).labels) == 8
    with pytest.raises(ValueError, match="speakers"):
        segmenter.segment(PETS_THEN_COOKING, speakers[:3])
    with pytest.raises(ValueError, match="no utterances"):
        segmenter.segment([])


def test_lite_segmenters_find_the_switch_and_cost_no_llm_call() -> None:
    for segmenter in (
        EmbeddingSegmenter(embedder=hashing_embedder()),
        ESMemSegmenter(extraction="lite", embedder=hashing_embedder()),
    ):
        result = segmenter.segment(PETS_THEN_COOKING)
        assert result.labels[3] == 1, type(segmenter).__name__
        assert sum(result.labels) <= 2
        assert result.cost.llm_calls == 0
        assert result.cost.texts_embedded == len(PETS_THEN_COOKING)
        assert segmenter.segment(PETS_THEN_COOKING).cost.texts_embedded == 0  # cached


def test_prepare_embeds_in_one_batch_without_changing_labels() -> None:
    embedder = hashing_embedder()
    segmenter = EmbeddingSegmenter(embedder=embedder)
    segmenter.prepare([PETS_THEN_COOKING, PETS_THEN_COOKING[:4]])
    assert embedder.model_calls == 1
    assert segmenter.segment(PETS_THEN_COOKING).labels == PETS_THEN_COOKING_LABELS
    assert embedder.model_calls == 1


def test_missing_services_are_named() -> None:
    with pytest.raises(ValueError, match="needs an embedder"):
        EmbeddingSegmenter()
    with pytest.raises(ValueError, match="needs an LLM backbone"):
        ESMemSegmenter(embedder=hashing_embedder())
    with pytest.raises(ValueError, match="no lite mode"):
        SeComSegmenter(extraction="lite", backbone=rule_backbone(garbage)[0])  # type: ignore[arg-type]


def test_label_helpers() -> None:
    assert labels_from_gaps(4, {0, 2}) == (1, 0, 1, 0)
    assert segments_from_labels((1, 0, 1, 0)) == [(0, 0), (1, 2), (3, 3)]
    with pytest.raises(ValueError, match="outside"):
        labels_from_gaps(3, {2})


def test_identity_names_the_model_only_for_llm_segmenters() -> None:
    backbone, _ = rule_backbone(garbage)
    assert "model" not in TextTilingSegmenter().identity()
    assert ESMemSegmenter(embedder=hashing_embedder(), backbone=backbone).identity()["model"] == (
        "fake:rules"
    )


@pytest.mark.parametrize("name", SEGMENTER_CONFIGS)
def test_every_segmenter_config_instantiates(name: str) -> None:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="segment", overrides=[f"segmenter={name}", "dataset=tiage"])
    assert cfg.dataset.name == "tiage"
    backbone, _ = rule_backbone(garbage)
    segmenter = instantiate(cfg.segmenter, embedder=hashing_embedder(), backbone=backbone)
    assert isinstance(segmenter, Segmenter)
    assert segmenter.uses_llm == (cfg.segmenter.get("extraction", "lite") == "llm")
