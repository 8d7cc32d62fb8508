"""Test doubles shared by the LLM tests: a scripted provider, a backbone factory, a free port.

Imported as a plain module: pytest puts ``tests/`` on ``sys.path`` (rootdir-relative imports,
no ``tests/__init__.py``).
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from collections.abc import Sequence

from memsys.llm import (
    Accounting,
    Backbone,
    BackboneSettings,
    Completion,
    LLMRequest,
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


def make_backbone(
    provider: ScriptedProvider, cache: ResponseCache | None = None, concurrency: int = 4
) -> Backbone:
    return Backbone(
        provider,
        cache=cache if cache is not None else ResponseCache.disabled(),
        accounting=Accounting(),
        settings=BackboneSettings(concurrency=concurrency, retry=FAST_RETRY),
    )


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
