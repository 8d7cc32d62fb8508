"""Fault injection on the HTTP path: a local server answers 400/429/500, hangs, drops the
connection or sends malformed JSON; the client retries as configured, reports, never crashes,
and caches only successful replies."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.chat_server import FakeChatServer

from memsys.llm import (
    Accounting,
    Backbone,
    BackboneSettings,
    BackboneUnavailableError,
    LLMRequest,
    LLMRequestError,
    ResponseCache,
    RetryPolicy,
)
from memsys.llm.providers.openai_compat import OpenAICompatConfig

TINY_BACKOFF = RetryPolicy(
    max_attempts=3,
    initial_backoff_s=0.001,
    max_backoff_s=0.01,
    request_timeout_s=0.5,
    max_consecutive_failures=4,
)


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    with FakeChatServer(hang_s=5.0) as running:
        yield running


def http_backbone(
    base_url: str, cache: ResponseCache, concurrency: int = 4, retry: RetryPolicy = TINY_BACKOFF
) -> Backbone:
    provider = OpenAICompatConfig(model="fake", base_url=base_url, api_key_env=None).build()
    return Backbone(
        provider,
        cache=cache,
        accounting=Accounting(),
        settings=BackboneSettings(concurrency=concurrency, retry=retry),
    )


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize(
    "faults",
    [("429",), ("500", "500"), ("hang",), ("drop",), ("malformed",), ("empty",), ("429", "drop")],
)
def test_transient_faults_are_retried_until_success(
    server: FakeChatServer, tmp_path: Path, faults: tuple[str, ...]
) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite")
    backbone = http_backbone(server.base_url, cache)
    server.script(*faults)
    reply = backbone.complete(ask("hello"), stage="answering")
    assert reply.text == "echo: hello"
    assert server.request_count == len(faults) + 1
    stage = backbone.accounting.summary()["stages"]["answering"]
    assert (stage["retries"], stage["failed"]) == (len(faults), 0)
    assert len(cache) == 1


def test_exhausted_retries_report_the_last_error_and_cache_nothing(
    server: FakeChatServer, tmp_path: Path
) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite")
    backbone = http_backbone(server.base_url, cache)
    server.script("500", "429", "500", "malformed")  # the 429 is waited out, not an attempt
    with pytest.raises(LLMRequestError, match=r"after 4 attempt\(s\).*malformed reply"):
        backbone.complete(ask("hello"))
    assert server.request_count == 4
    assert len(cache) == 0
    assert backbone.accounting.summary()["total"]["failed"] == 1


def test_client_error_is_not_retried(server: FakeChatServer, tmp_path: Path) -> None:
    backbone = http_backbone(server.base_url, ResponseCache(tmp_path / "cache.sqlite"))
    server.script("400")
    with pytest.raises(LLMRequestError, match="HTTP 400"):
        backbone.complete(ask("hello"))
    assert server.request_count == 1


def test_dead_endpoint_stops_the_run_with_a_clear_message(
    server: FakeChatServer, tmp_path: Path
) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite")
    backbone = http_backbone(server.base_url, cache, concurrency=2)
    server.script(*["500"] * 200)
    requests = [LLMRequest(ask(f"q{i}")) for i in range(50)]
    with pytest.raises(BackboneUnavailableError) as stopped:
        backbone.complete_many(requests, return_exceptions=True)
    message = str(stopped.value)
    assert "consecutive requests" in message and server.base_url in message
    assert "HTTP 500" in message
    assert server.request_count < 3 * 50, "the run must stop instead of grinding on"
    assert len(cache) == 0


def test_connection_refused_is_reported(tmp_path: Path) -> None:
    with FakeChatServer() as stopped_soon:
        base_url = stopped_soon.base_url
    backbone = http_backbone(base_url, ResponseCache(tmp_path / "cache.sqlite"))
    with pytest.raises(LLMRequestError, match="connection error"):
        backbone.complete(ask("anyone there?"))


def test_mixed_batch_under_faults_completes_in_order(
    server: FakeChatServer, tmp_path: Path
) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite")
    # Concurrent requests take the scripted faults in arrival order, so one request may meet
    # several in a row: allow more attempts than there are faults, and no early breaker.
    patient = dataclasses.replace(TINY_BACKOFF, max_attempts=7, max_consecutive_failures=10)
    backbone = http_backbone(server.base_url, cache, concurrency=8, retry=patient)
    server.script("429", "500", "drop", "malformed", "hang", "429")
    requests = [LLMRequest(ask(f"q{i}")) for i in range(20)]
    replies = backbone.complete_many(requests)
    assert [reply.text for reply in replies] == [f"echo: q{i}" for i in range(20)]
    assert backbone.accounting.summary()["total"]["retries"] == 6
    assert len(cache) == 20
