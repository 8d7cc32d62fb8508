"""Retry policy and the consecutive-failure breaker.

A rate limit (429 or 503, :class:`~memsys.llm.errors.RateLimitedError`) is not a failure: it is
waited out for as long as the server asks (or the backoff below when it does not say), without
counting against ``max_attempts`` or the breaker, until the endpoint has gone
``rate_limit_patience_s`` without a single success, or the request itself has been refused for
twice that; then the run stops with one line.

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
from memsys.llm.slots import DEFAULT_DECREASE

#: How many patience windows one request may wait out rate limits in all, whatever the others do.
REQUEST_PATIENCE_FACTOR = 2

#: Backoff grows no further after this many retries (``max_backoff_s`` caps it long before; the
#: bound keeps ``multiplier ** n`` finite for a request that waits out rate limits for hours).
MAX_BACKOFF_EXPONENT = 64


@dataclass(frozen=True)
class RetryPolicy:
    """How hard one request tries, and when the whole run gives up.

    ``max_attempts`` counts the first try. ``request_timeout_s`` is one deadline per attempt,
    covering connect, headers and the whole body, however the server trickles or streams
    (:mod:`memsys.llm.http_limits`); providers that run in process ignore it.
    ``max_consecutive_failures`` requests that fail for good, with no success in between, stop
    the run. Rate limits (429, 503) are not failures: a request waits them out while any request
    to the endpoint has succeeded within ``rate_limit_patience_s``, and for at most
    :data:`REQUEST_PATIENCE_FACTOR` times that since its own first refusal (a 429 that depends on
    the request itself, a "request too large for the rate limit", would otherwise be waited out
    for ever); each one shrinks the endpoint's in-flight limit by ``rate_limit_decrease``
    (:mod:`memsys.llm.slots`).
    """

    max_attempts: int = 5
    initial_backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    backoff_multiplier: float = 2.0
    request_timeout_s: float = 120.0
    max_consecutive_failures: int = 5
    rate_limit_patience_s: float = 300.0
    rate_limit_decrease: float = DEFAULT_DECREASE

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.max_consecutive_failures < 1:
            raise ValueError("max_attempts and max_consecutive_failures must be at least 1")
        if not 0 < self.rate_limit_decrease < 1:
            raise ValueError(
                f"rate_limit_decrease must be between 0 and 1, got {self.rate_limit_decrease}"
            )

    def rate_limit_wait_s(
        self, waits: int, rng: random.Random, retry_after_s: float | None
    ) -> float:
        """How long to wait out rate limit number ``waits`` (0-based) of one request: what the
        server asked for, plus up to 10% so that the requests it refused together do not come
        back together; when it named no time (or zero), :meth:`backoff_s`."""
        if retry_after_s:
            return retry_after_s * (1 + rng.uniform(0.0, 0.1))
        return self.backoff_s(waits, rng, None)

    def backoff_s(self, retry_index: int, rng: random.Random, retry_after_s: float | None) -> float:
        """Delay before retry number ``retry_index`` (0-based); honours a server's Retry-After."""
        exponent = min(retry_index, MAX_BACKOFF_EXPONENT)  # a long wait must not overflow
        cap = min(self.max_backoff_s, self.initial_backoff_s * self.backoff_multiplier**exponent)
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
        self._message_override: str | None = None

    def check(self) -> None:
        """Raise if the breaker has tripped."""
        if self.tripped.is_set():
            raise BackboneUnavailableError(self._message())

    def success(self) -> None:
        """A request succeeded: the failure streak is over."""
        with self._lock:
            self._consecutive = 0

    def trip(self, message: str) -> BackboneUnavailableError:
        """Stop the run now, for ``message`` (a quota used up, a server that has rate-limited
        every request for the whole patience window); the error to raise (the first reason
        given, if it had tripped already)."""
        with self._lock:
            if not self.tripped.is_set():
                self._message_override = message
                self.tripped.set()
        return BackboneUnavailableError(self._message())

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
        if self._message_override is not None:
            return self._message_override
        return (
            f"stopping: {self._consecutive} consecutive requests to {self.endpoint} failed "
            f"(limit {self.limit}); last error: {self._last_error}. Check that the endpoint is "
            "up and the credentials are valid, or raise backbone.retry.max_consecutive_failures."
        )
