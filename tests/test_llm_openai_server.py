"""The OpenAI-compatible provider end to end against llama.cpp's real server (SmolLM2-135M).

The ``llama_server`` fixture (conftest) runs ``python -m llama_cpp.server`` on a free port. The backbone is built from ``conf/backbone/llamacpp_server.yaml``
so the shipped config is exercised too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.config.services import backbone_config
from benchmarks.pipeline.llm_ask import compose_ask_config
from memsys.llm import Accounting, JSONReplyParser, LLMRequest, ResponseCache, SamplingParams
from memsys.llm.backbone import Backbone
from memsys.llm.factory import build_backbone


@pytest.fixture
def backbone(llama_server: str, tmp_path: Path) -> Backbone:
    cfg = compose_ask_config(
        ["backbone=llamacpp_server", f"backbone.provider.base_url={llama_server}"]
    )
    return build_backbone(
        backbone_config(cfg, "backbone"),
        cache=ResponseCache(tmp_path / "cache.sqlite"),
        accounting=Accounting(),
    )


def test_answers_through_the_openai_client(backbone: Backbone) -> None:
    reply = backbone.complete(
        [{"role": "user", "content": "What is the capital of France? Answer in one word."}],
        SamplingParams(max_tokens=16),
        stage="answering",
    )
    assert "Paris" in reply.text
    assert reply.prompt_tokens > 10 and reply.completion_tokens > 0
    assert reply.model == "openai-compatible:smollm2-135m"
    again = backbone.complete(
        [{"role": "user", "content": "What is the capital of France? Answer in one word."}],
        SamplingParams(max_tokens=16),
    )
    assert again.cached and again.text == reply.text
    stage = backbone.accounting.summary()["stages"]["answering"]
    assert stage["calls"] == 1 and stage["latency_s"] > 0


def test_json_schema_reaches_the_server(backbone: Backbone) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city", "country"],
    }
    reply = backbone.complete(
        [{"role": "user", "content": "Name a city and its country as JSON."}],
        SamplingParams(max_tokens=48, json_schema=schema),
    )
    parsed = JSONReplyParser(schema).parse(reply.text)
    assert parsed.ok is True, (reply.text, parsed.error)
    assert {"city", "country"} <= set(parsed.value)


def test_batched_requests_come_back_in_order(backbone: Backbone) -> None:
    questions = ["Say yes.", "Say no.", "Count to three."]
    requests = [
        LLMRequest([{"role": "user", "content": q}], SamplingParams(max_tokens=8))
        for q in questions
    ]
    replies = backbone.complete_many(requests)
    singles = [backbone.complete(request.messages, request.params) for request in requests]
    assert [reply.text for reply in replies] == [single.text for single in singles]
    assert all(single.cached for single in singles)
