"""Retry policy and the consecutive-failure breaker.

Retries use exponential backoff with full jitter (delay drawn uniformly from zero to the
exponential cap), which spreads a burst of 429s from many concurrent workers instead of having
them retry in lockstep. The breaker turns "the endpoint is down" into one clear error after a
configured number of failed requests in a row, instead of a run that spends hours failing every
question.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass

from memsys.llm.errors import BackboneUnavailableError


@dataclass(frozen=True)
class RetryPolicy:
    """How hard one request tries, and when the whole run gives up.

    ``max_attempts`` counts the first try. ``request_timeout_s`` is one deadline per attempt,
    covering connect, headers and the whole body, however the server trickles or streams
    (:mod:`memsys.llm.http_limits`); providers that run in process ignore it.
    ``max_consecutive_failures`` requests that fail for good, with no success in between, stop
    the run.
    """

    max_attempts: int = 5
    initial_backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    backoff_multiplier: float = 2.0
    request_timeout_s: float = 120.0
    max_consecutive_failures: int = 5

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.max_consecutive_failures < 1:
            raise ValueError("max_attempts and max_consecutive_failures must be at least 1")

    def backoff_s(self, retry_index: int, rng: random.Random, retry_after_s: float | None) -> float:
        """Delay before retry number ``retry_index`` (0-based); honours a server's Retry-After."""
        cap = min(self.max_backoff_s, self.initial_backoff_s * self.backoff_multiplier**retry_index)
        delay = rng.uniform(0.0, cap)
        if retry_after_s is not None:
            delay = max(delay, min(retry_after_s, self.max_backoff_s))
        return delay


class FailureBreaker:
    """Counts requests that failed for good; trips after too many in a row.

    Shared by all threads of one backbone. Once tripped it stays tripped: every later request
    fails fast with the same message, and retry sleeps wake up early (see :attr:`tripped`).
    """

    def __init__(self, limit: int, endpoint: str) -> None:
        self.limit = limit
        self.endpoint = endpoint
        self.tripped = threading.Event()
        self._lock = threading.Lock()
        self._consecutive = 0
        self._last_error = ""

    def check(self) -> None:
        """Raise if the breaker has tripped."""
        if self.tripped.is_set():
            raise BackboneUnavailableError(self._message())

    def success(self) -> None:
        """A request succeeded: the failure streak is over."""
        with self._lock:
            self._consecutive = 0

    def failure(self, error: BaseException) -> None:
        """A request failed for good; raise if that makes too many in a row."""
        with self._lock:
            self._consecutive += 1
            self._last_error = f"{type(error).__name__}: {error}"
            if self._consecutive >= self.limit:
                self.tripped.set()
        if self.tripped.is_set():
            raise BackboneUnavailableError(self._message()) from error

    def _message(self) -> str:
        return (
            f"stopping: {self._consecutive} consecutive requests to {self.endpoint} failed "
            f"(limit {self.limit}); last error: {self._last_error}. Check that the endpoint is "
            "up and the credentials are valid, or raise backbone.retry.max_consecutive_failures."
        )
