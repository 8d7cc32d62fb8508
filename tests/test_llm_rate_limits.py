"""A rate limit slows a run and never costs it a request: real overloaded HTTP servers on
127.0.0.1 (one that admits 4 requests in flight, one that refuses every second request), a
server whose quota is used up, one that rate-limits everything, and one that is down."""

from __future__ import annotations

import dataclasses
import random
import socket
import threading
import time
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest
from fakes.chat_server import FakeChatServer
from fakes.llm import FAST_RETRY

from memsys.llm import (
    Accounting,
    Backbone,
    BackboneSettings,
    BackboneUnavailableError,
    LLMRequest,
    ResponseCache,
    RetryPolicy,
)
from memsys.llm.pool import Cancelled
from memsys.llm.providers.openai_compat import OpenAICompatConfig, retry_after_s
from memsys.llm.slots import Limiters, Slots, Ticket

#: Quick retries for failures (two attempts); rate limits wait what the server asks.
QUICK = dataclasses.replace(FAST_RETRY, max_attempts=2, request_timeout_s=5.0)


def backbone(base_url: str, concurrency: int = 32, retry: RetryPolicy = QUICK) -> Backbone:
    provider = OpenAICompatConfig(model="fake", base_url=base_url, api_key_env=None).build()
    return Backbone(
        provider,
        cache=ResponseCache(None, mode="off"),
        accounting=Accounting(),
        settings=BackboneSettings(concurrency=concurrency, retry=retry),
    )


def requests(count: int) -> list[LLMRequest]:
    return [LLMRequest(({"role": "user", "content": f"question {n}"},)) for n in range(count)]


def test_retry_after_is_read_from_every_header_a_server_sends() -> None:
    in_3_s = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=3), usegmt=True)
    assert 1.5 < retry_after_s({"Retry-After": in_3_s}) <= 3.0
    assert retry_after_s({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_s({"x-ratelimit-reset-tokens": "6m0s"}) == 360.0
    assert retry_after_s({"Retry-After": "-1"}) is None
    assert retry_after_s({}) is None


def test_the_limit_shrinks_once_a_round_and_grows_back_to_the_ceiling() -> None:
    slots, never = Slots(8, decrease=0.5), threading.Event()
    tickets = []
    for _ in range(8):
        with slots.held((), never) as ticket:
            tickets.append(ticket)
    for ticket in tickets:  # eight 429s of one round: one decrease
        slots.rate_limited(ticket)
    assert slots.limit == 4
    with slots.held((), never) as later:  # a request sent after the decrease: a new round
        pass
    slots.rate_limited(later)
    assert slots.limit == 2
    slots.rate_limited(Ticket(later.grant))  # the same round again: no further decrease
    assert slots.limit == 2
    for _ in range(100):
        slots.succeeded()
    assert slots.limit == 8  # additive increase, never above the ceiling
    lowest = Slots(2, decrease=0.5)
    with lowest.held((), never) as ticket:
        pass
    lowest.rate_limited(ticket)
    with lowest.held((), never) as ticket:
        pass
    lowest.rate_limited(ticket)
    assert lowest.limit == 1  # never below one


def test_a_lowered_limit_holds_requests_back_until_it_grows() -> None:
    slots, never = Slots(2, decrease=0.5), threading.Event()
    with slots.held((), never) as ticket:
        pass
    slots.rate_limited(ticket)  # limit 1
    first = slots.held((), never)
    first.__enter__()
    waiting, given_up = threading.Event(), threading.Event()

    def second() -> None:
        try:
            with slots.held((), given_up):
                waiting.set()
        except Cancelled:
            pass

    thread = threading.Thread(target=second)
    thread.start()
    time.sleep(0.3)
    assert waiting.is_set() is False  # one in flight, limit 1: the second waits
    slots.succeeded()  # 1 + 1/1 = 2: room for it now
    assert waiting.wait(2.0) is True
    thread.join()
    first.__exit__(None, None, None)


def test_backbones_on_one_endpoint_share_one_limit() -> None:
    limiters = Limiters()
    reader = limiters.for_endpoint("http://a/v1", 32)
    assert limiters.for_endpoint("http://a/v1", 8) is reader and reader.count == 8
    assert limiters.for_endpoint("http://b/v1", 32) is not reader
    assert limiters.status() == ""  # nothing rate-limited yet
    with reader.held((), threading.Event()) as ticket:
        pass
    reader.rate_limited(ticket)
    assert limiters.status() == "http://a/v1 limit 5/8, 0 waiting on a rate limit"


@pytest.mark.parametrize(
    "overload", [{"max_in_flight": 4}, {"limit_every": 2}], ids=["admit-4", "every-second"]
)
def test_an_overloaded_server_slows_the_run_and_loses_no_request(overload: dict) -> None:
    """Concurrency 32 against a server that refuses with 429 + Retry-After: every request
    answered, none failed, though max_attempts is 2 (rate limits are not attempts)."""
    with FakeChatServer(latency_s=0.05, retry_after="0.2", **overload) as server:
        model = backbone(server.base_url)
        replies = model.complete_many(requests(60))
        assert [reply.text for reply in replies] == [f"echo: question {n}" for n in range(60)]
        totals = model.accounting.totals()
        assert totals["failed"] == 0 and server.rate_limited > 0
        if "max_in_flight" in overload:
            assert model.slots.limit < 32  # it learnt to send fewer at once


def test_admitting_4_in_flight_runs_near_the_servers_capacity() -> None:
    """100 requests of 0.1 s on 4 slots need 2.5 s; waiting out Retry-After: 1 with an adaptive
    limit stays within 1.5 times that (a fixed 32 in flight would spend most of it waiting)."""
    with FakeChatServer(latency_s=0.1, max_in_flight=4, retry_after="1") as server:
        model = backbone(server.base_url)
        started = time.monotonic()
        model.complete_many(requests(100))
        elapsed = time.monotonic() - started
    assert model.accounting.totals()["failed"] == 0
    assert elapsed < 1.5 * 100 * 0.1 / 4 + 1.0, elapsed  # + one Retry-After at the start


def test_an_exhausted_quota_stops_at_once_with_one_line() -> None:
    with FakeChatServer() as server:
        server.on("question", "quota")
        model = backbone(server.base_url)
        started = time.monotonic()
        with pytest.raises(BackboneUnavailableError, match="quota is exhausted") as stopped:
            model.complete_many(requests(10))
        assert time.monotonic() - started < 5
        assert "\n" not in str(stopped.value)
        assert server.request_count <= 10  # no request was sent twice


def test_a_server_that_rate_limits_everything_stops_the_run_after_its_patience() -> None:
    patient = dataclasses.replace(QUICK, rate_limit_patience_s=1.0)
    with FakeChatServer(max_in_flight=0, retry_after="0.2") as server:
        model = backbone(server.base_url, retry=patient)
        started = time.monotonic()
        with pytest.raises(BackboneUnavailableError, match="rate-limited a request for 1 s"):
            model.complete_many(requests(4))
        assert time.monotonic() - started < 5


def test_a_request_refused_while_others_succeed_stops_the_run_after_twice_its_patience() -> None:
    """A 429 that depends on the request itself (OpenAI's "request too large for the tokens
    per minute"): the endpoint keeps succeeding, the request is never let through."""
    patient = dataclasses.replace(QUICK, rate_limit_patience_s=0.5)
    with FakeChatServer(retry_after="0.1") as server:
        server.on("question 0", "429")
        model = backbone(server.base_url, retry=patient)
        stop = threading.Event()

        def others() -> None:  # requests that keep succeeding meanwhile
            n = 100
            while not stop.is_set():
                model.complete_many(requests(n + 1)[n:])
                n += 1

        thread = threading.Thread(target=others, daemon=True)
        thread.start()
        started = time.monotonic()
        try:
            with pytest.raises(BackboneUnavailableError, match="rate-limited a request for 1 s"):
                model.complete_many(requests(1))
        finally:
            stop.set()
        assert time.monotonic() - started < 5


def test_backoff_does_not_overflow_after_thousands_of_waits() -> None:
    assert QUICK.rate_limit_wait_s(5000, random.Random(0), None) <= QUICK.max_backoff_s


def test_a_server_that_is_down_stops_the_run_within_a_minute() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = backbone(f"http://127.0.0.1:{port}/v1", retry=RetryPolicy())
    started = time.monotonic()
    with pytest.raises(BackboneUnavailableError, match="consecutive requests"):
        model.complete_many(requests(40), return_exceptions=True)  # as a run's questions are
    assert time.monotonic() - started < 60
