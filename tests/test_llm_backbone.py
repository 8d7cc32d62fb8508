"""Backbone behaviour with a scripted in-memory provider: retries, breaker, batching, accounting."""

from __future__ import annotations

import json

import pytest
from fakes.llm import BatchingProvider, ScriptedProvider, ask, make_backbone

from memsys.llm import (
    BackboneUnavailableError,
    LLMRequest,
    LLMRequestError,
    ProviderError,
    ResponseCache,
    SamplingParams,
    TransientProviderError,
)


def test_transient_errors_are_retried_and_counted() -> None:
    provider = ScriptedProvider([TransientProviderError("429"), TransientProviderError("500")])
    backbone = make_backbone(provider)
    reply = backbone.complete(ask("hi"), stage="answering")
    assert reply.text == "echo: hi"
    assert not reply.cached
    assert provider.calls == 3
    summary = backbone.accounting.summary()["stages"]["answering"]
    assert summary["retries"] == 2
    assert summary["failed"] == 0


def test_permanent_error_is_not_retried() -> None:
    provider = ScriptedProvider([ProviderError("HTTP 400: bad request")])
    backbone = make_backbone(provider)
    with pytest.raises(LLMRequestError, match="400"):
        backbone.complete(ask("hi"))
    assert provider.calls == 1


def test_exhausted_retries_raise_naming_the_request() -> None:
    provider = ScriptedProvider([TransientProviderError("boom")] * 3)
    backbone = make_backbone(provider)
    with pytest.raises(LLMRequestError, match=r"after 3 attempt.*boom") as raised:
        backbone.complete(ask("which request?"))
    assert "which request?" in str(raised.value)


def test_breaker_stops_the_run_after_consecutive_failures() -> None:
    provider = ScriptedProvider([ProviderError("HTTP 401: invalid key")] * 10)
    backbone = make_backbone(provider)
    for _ in range(2):
        with pytest.raises(LLMRequestError):
            backbone.complete(ask("hi"))
    with pytest.raises(BackboneUnavailableError, match=r"3 consecutive requests.*401"):
        backbone.complete(ask("hi"))
    calls = provider.calls
    with pytest.raises(BackboneUnavailableError):
        backbone.with_stage("judging").complete(ask("later"))
    assert provider.calls == calls, "a tripped breaker must fail fast, without calling out"


def test_a_success_resets_the_failure_streak() -> None:
    error = ProviderError("HTTP 400")
    backbone = make_backbone(ScriptedProvider([error, error, None, error, error]))
    outcomes = []
    for _ in range(5):
        try:
            backbone.complete(ask("hi"))
            outcomes.append("ok")
        except LLMRequestError:
            outcomes.append("failed")
    assert outcomes == ["failed", "failed", "ok", "failed", "failed"]


def test_complete_many_keeps_order_and_bounds_concurrency() -> None:
    provider = ScriptedProvider(delay_s=0.02)
    backbone = make_backbone(provider, concurrency=4)
    requests = [LLMRequest(ask(f"q{i}")) for i in range(24)]
    replies = backbone.complete_many(requests, stage="construction")
    assert [reply.text for reply in replies] == [f"echo: q{i}" for i in range(24)]
    assert provider.peak_in_flight == 4
    assert backbone.accounting.summary()["stages"]["construction"]["calls"] == 24


def test_complete_many_return_exceptions_puts_errors_in_place() -> None:
    provider = ScriptedProvider([ProviderError("bad")])
    backbone = make_backbone(provider, concurrency=1)
    outcomes = backbone.complete_many(
        [LLMRequest(ask("a")), LLMRequest(ask("b"))], return_exceptions=True
    )
    assert isinstance(outcomes[0], LLMRequestError)
    assert outcomes[1].text == "echo: b"


def test_complete_many_raises_first_failure_by_default() -> None:
    backbone = make_backbone(ScriptedProvider([ProviderError("bad")]), concurrency=1)
    with pytest.raises(LLMRequestError, match="bad"):
        backbone.complete_many([LLMRequest(ask("a")), LLMRequest(ask("b"))])


def test_batch_provider_gets_all_misses_in_one_call(tmp_path) -> None:
    provider = BatchingProvider()
    backbone = make_backbone(provider, cache=ResponseCache(tmp_path / "cache.sqlite"))
    backbone.complete(ask("q1"))
    replies = backbone.complete_many([LLMRequest(ask(f"q{i}")) for i in range(5)])
    assert [reply.cached for reply in replies] == [False, True, False, False, False]
    assert provider.batches == [4]


def test_accounting_is_per_stage_and_json_serializable(tmp_path) -> None:
    provider = ScriptedProvider()
    backbone = make_backbone(provider, cache=ResponseCache(tmp_path / "cache.sqlite"))
    construction = backbone.with_stage("construction")
    construction.complete(ask("fact"))
    construction.complete(ask("fact"))
    backbone.with_stage("answering").complete(ask("question"), SamplingParams(max_tokens=8))
    summary = json.loads(json.dumps(backbone.accounting.to_jsonable()))
    built = summary["stages"]["construction"]
    assert built["calls"] == 2
    assert built["cache_hits"] == 1
    assert built["prompt_tokens"] == 10
    assert built["provider_prompt_tokens"] == 5
    assert summary["stages"]["answering"]["completion_tokens"] == 2
    assert summary["total"]["calls"] == 3
    assert len(summary["calls"]) == 3
