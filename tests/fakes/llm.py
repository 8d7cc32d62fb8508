"""Test doubles shared by the LLM tests: scripted and rule-driven providers, a backbone factory,
the check that concurrency changes nothing, a free port."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from memsys.llm import (
    Accounting,
    Backbone,
    BackboneSettings,
    Completion,
    LLMRequest,
    LLMResponse,
    ResponseCache,
    RetryPolicy,
)

#: Retries that take milliseconds, and a breaker that trips after three failed requests.
FAST_RETRY = RetryPolicy(
    max_attempts=3,
    initial_backoff_s=0.001,
    max_backoff_s=0.005,
    request_timeout_s=1.0,
    max_consecutive_failures=3,
)

#: :data:`FAST_RETRY` with a breaker no test's failures reach.
NO_BREAKER = dataclasses.replace(FAST_RETRY, max_consecutive_failures=1000)


class ScriptedProvider:
    """Answers each call with the next queued outcome (an error, or None for a reply), then
    echoes; records calls and peak concurrency."""

    model_id = "fake:echo"
    endpoint = "fake://echo"

    def __init__(self, errors: Sequence[Exception | None] = (), delay_s: float = 0.0) -> None:
        self.calls = 0
        self.peak_in_flight = 0
        self._errors = deque(errors)
        self._delay_s = delay_s
        self._in_flight = 0
        self._lock = threading.Lock()

    def generate(self, request: LLMRequest, timeout_s: float) -> Completion:
        with self._lock:
            self.calls += 1
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
            error = self._errors.popleft() if self._errors else None
        try:
            time.sleep(self._delay_s)
            if error is not None:
                raise error
            return Completion(f"echo: {request.messages[-1]['content']}", 5, 2, "stop")
        finally:
            with self._lock:
                self._in_flight -= 1


class BatchingProvider(ScriptedProvider):
    """A provider with native batching (like in-process vLLM)."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def generate_batch(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        self.batches.append(len(requests))
        return [self.generate(request, 1.0) for request in requests]


class Recorder:
    """A backbone that answers each request with the next scripted reply, and keeps them (the
    judge's tests: every request it sends, in order)."""

    def __init__(self, replies: Sequence[str]) -> None:
        self.replies = list(replies)
        self.sent: list[LLMRequest] = []

    def complete_many(self, requests: Sequence[LLMRequest], **_: object) -> list[LLMResponse]:
        self.sent.extend(requests)
        return [LLMResponse(self.replies.pop(0), 1, 1, 0.0, False, "m") for _ in requests]


class RuleProvider:
    """Answers each request with ``reply(request)`` after ``delay_s``; an exception from
    ``reply`` is raised. Records the requests and how many were in flight at most.

    Its model id is ``fake:<name>``; each reply counts ``tokens`` (prompt, completion)."""

    def __init__(
        self,
        reply: Callable[[LLMRequest], str],
        delay_s: float = 0.0,
        *,
        name: str = "rules",
        tokens: tuple[int, int] = (11, 3),
    ) -> None:
        self.model_id = f"fake:{name}"
        self.endpoint = f"fake://{name}"
        self.reply = reply
        self.delay_s = delay_s
        self.tokens = tokens
        self.requests: list[LLMRequest] = []
        self.peak_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()

    def generate(self, request: LLMRequest, timeout_s: float) -> Completion:
        with self._lock:
            self.requests.append(request)
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
        try:
            time.sleep(self.delay_s)
            return Completion(self.reply(request), *self.tokens, "stop")
        finally:
            with self._lock:
                self._in_flight -= 1


def make_backbone(
    provider: ScriptedProvider,
    cache: ResponseCache | None = None,
    concurrency: int = 4,
    retry: RetryPolicy = FAST_RETRY,
) -> Backbone:
    return Backbone(
        provider,
        cache=cache if cache is not None else ResponseCache.disabled(),
        accounting=Accounting(),
        settings=BackboneSettings(concurrency=concurrency, retry=retry),
    )


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Jittered:
    """Delays each request by a time drawn from its content (up to ``jitter_s``) before
    ``provider`` answers it, so that concurrent requests finish out of order, the same order on
    every run; records how many were in flight at most."""

    def __init__(self, provider: Any, jitter_s: float = 0.01) -> None:
        self.provider = provider
        self.model_id = provider.model_id
        self.endpoint = provider.endpoint
        self.peak_in_flight = 0
        self._jitter_s = jitter_s
        self._in_flight = 0
        self._lock = threading.Lock()

    def generate(self, request: LLMRequest, timeout_s: float) -> Completion:
        with self._lock:
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
        try:
            digest = hashlib.sha256(request_key(request).encode()).digest()
            time.sleep(self._jitter_s * digest[0] / 255)
            return self.provider.generate(request, timeout_s)
        finally:
            with self._lock:
                self._in_flight -= 1


def request_key(request: LLMRequest) -> str:
    """A request's messages and sampling parameters as one string (comparable, sortable)."""
    params = request.params
    return json.dumps([list(request.messages), params.max_tokens, params.stop, params.json_schema])


#: Report keys that say how a construction ran, not what it built: its timings, and how many
#: of its LLM calls the response cache answered (a resumed construction finds some there).
TIMINGS = frozenset({"seconds", "llm_seconds", "cached_calls"})


def without_timings(value: Any) -> Any:
    """``value`` (JSON) without the :data:`TIMINGS` keys at any depth."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [without_timings(item) for item in value]
    return value


def assert_concurrency_changes_nothing(
    construct: Callable[[Backbone], Any], provider: Callable[[], Any]
) -> None:
    """``construct(backbone)`` (a memory dump, JSON) is the same, timings aside, with a backbone
    of concurrency 1 and one of concurrency 8 whose replies arrive out of order; so is the set
    of requests ``provider()`` (with a ``requests`` list) was sent."""
    dumps, requests, peaks = [], [], []
    for concurrency in (1, 8):
        answering = provider()
        jittered = Jittered(answering)
        # Whether failures come in a row depends on the order replies arrive in, so the breaker
        # is kept out of it: what a construction builds is under test, not the streak.
        backbone = make_backbone(jittered, concurrency=concurrency, retry=NO_BREAKER)  # type: ignore[arg-type]
        dump = construct(backbone)
        dumps.append(json.dumps(without_timings(json.loads(json.dumps(dump)))))  # key order too
        requests.append(sorted(map(request_key, answering.requests)))
        peaks.append(jittered.peak_in_flight)
    assert peaks[0] == 1 and peaks[1] > 1, f"requests in flight at most: {peaks}"
    assert requests[0] == requests[1]
    assert dumps[0] == dumps[1]
