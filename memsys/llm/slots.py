"""The backbone's slots: requests in flight to one endpoint, granted lowest key first, their
number adapting to the server's rate limits.

Order. With a plain semaphore, whichever waiting thread wakes first gets a freed slot, so several
memories built at once share the server evenly: they all finish their requests together, near
the end, and their local work after the last reply (composing a graph, embedding its nodes) runs
with no request left to overlap it. Granting slots lowest key first lets a request flow say what
should go first (a chain's next request before a batch nothing waits on, the memory started
first before the later ones), so memories finish one after another and each one's local work
overlaps the next ones' requests. Which requests are sent, and what is made of their replies,
does not depend on the order.

Number. A server that answers 429 (or 503) is saying that fewer requests should be in flight:
the limit shrinks by a factor (``decrease``, multiplicative, at most once per round of requests: the 429s of
requests sent before the last decrease say nothing new), and each success lets it grow by
``1 / limit`` (additive increase: one slot per round of successes), never above the configured
``concurrency`` nor below one. With no 429 the limit stays at ``concurrency``, so requests, their
order and their replies are those of a fixed pool. One :class:`Slots` per endpoint
(:class:`Limiters`), shared by every stage and backbone that sends there.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from memsys.llm.pool import POLL_S, Cancelled

#: How much a rate limit shrinks the in-flight limit by default (``retry.rate_limit_decrease``):
#: gentler than TCP's halving, since a server that admits N at once refuses the (N+1)-th and a
#: halved limit would then sit well below N.
DEFAULT_DECREASE = 0.7

#: What orders waiting requests, lowest first; requests sent outside a flow have the empty key.
Key = tuple[float, ...]


@dataclass(frozen=True)
class Ticket:
    """A granted slot: which grant it was, so a 429 on it can tell whether it was sent before
    the last decrease (:meth:`Slots.rate_limited`)."""

    grant: int


class Slots:
    """At most ``limit`` requests in flight (``limit`` between 1 and ``count``, see the module
    docstring); a freed slot goes straight to the waiting request of lowest key (ties: the one
    that waited longest)."""

    def __init__(self, count: int, decrease: float = DEFAULT_DECREASE) -> None:
        if not 0 < decrease < 1:
            raise ValueError(f"a rate limit's decrease must be in (0, 1), got {decrease}")
        if count < 1:
            raise ValueError(f"a backbone needs at least one slot, got {count}")
        self.count = count
        self.decrease = decrease
        #: When a request last succeeded (``time.monotonic()``; at first, when these were made):
        #: a backbone stops waiting out rate limits once none has for its patience.
        self.last_success = time.monotonic()
        self._limit = float(count)
        self._in_flight = 0
        self._grants = 0
        self._decreased_at = -1  # the grant number at the last decrease
        self._rate_limited_waiting = 0
        self._lock = threading.Lock()
        self._waiting: list[tuple[Key, int, threading.Event]] = []
        self._arrivals = itertools.count()

    @property
    def limit(self) -> int:
        """Requests allowed in flight now."""
        return int(self._limit)

    @property
    def rate_limited_waiting(self) -> int:
        """Requests waiting out a rate limit now (between a 429 and their next attempt)."""
        return self._rate_limited_waiting

    @contextmanager
    def held(self, key: Key, cancelled: threading.Event) -> Iterator[Ticket]:
        """Hold a slot while the body runs; waiting wakes every :data:`POLL_S` to raise
        :class:`Cancelled` when the caller gives up."""
        ticket = self._acquire(key, cancelled)
        try:
            yield ticket
        finally:
            self._release()

    def rate_limited(self, ticket: Ticket) -> None:
        """The request sent on ``ticket`` was rate limited: the limit shrinks by ``decrease``
        (multiplicative), unless a 429 of a request sent after the last decrease did already."""
        with self._lock:
            if ticket.grant > self._decreased_at:
                self._limit = max(1.0, self._limit * self.decrease)
                self._decreased_at = self._grants

    def succeeded(self) -> None:
        """A request succeeded: the limit grows by ``1 / limit`` up to ``count``."""
        with self._lock:
            self.last_success = time.monotonic()
            if self._limit >= self.count:
                return
            self._limit = min(float(self.count), self._limit + 1 / self._limit)
            self._grant_waiting()

    def lower_ceiling(self, count: int) -> None:
        """Allow at most ``count`` in flight from now on, if that is fewer than before."""
        with self._lock:
            self.count = min(self.count, count)
            self._limit = min(self._limit, float(self.count))

    @contextmanager
    def waiting_out_rate_limit(self) -> Iterator[None]:
        """Count the body as a request waiting out a rate limit (for progress bars)."""
        with self._lock:
            self._rate_limited_waiting += 1
        try:
            yield
        finally:
            with self._lock:
                self._rate_limited_waiting -= 1

    def _acquire(self, key: Key, cancelled: threading.Event) -> Ticket:
        with self._lock:
            if self._in_flight < self.limit and not self._waiting:
                return self._take()
            entry = (key, next(self._arrivals), threading.Event())
            heapq.heappush(self._waiting, entry)
        granted = entry[2]
        try:
            while not granted.wait(POLL_S):
                if cancelled.is_set():
                    raise Cancelled
        except BaseException:  # given up, or interrupted (Ctrl-C) while waiting
            with self._lock:
                if not granted.is_set():
                    self._waiting.remove(entry)
                    heapq.heapify(self._waiting)
                    raise
            self._release()  # granted as it gave up: hand the slot on
            raise
        with self._lock:
            self._grants += 1
            return Ticket(self._grants)

    def _take(self) -> Ticket:
        """Take a free slot (the lock held)."""
        self._in_flight += 1
        self._grants += 1
        return Ticket(self._grants)

    def _release(self) -> None:
        with self._lock:
            self._in_flight -= 1
            self._grant_waiting()

    def _grant_waiting(self) -> None:
        """Hand free slots to the lowest keys waiting (the lock held); a granted request counts
        as in flight at once, so no arrival can overtake it."""
        while self._waiting and self._in_flight < self.limit:
            self._in_flight += 1
            heapq.heappop(self._waiting)[2].set()


class Limiters:
    """One :class:`Slots` per endpoint, for every backbone of a run: a judge on the reader's
    server shares its limit (and its 429s), a judge on another server does not slow the reader.
    The first backbone to reach an endpoint sets its ``concurrency``; a later one asking for
    fewer lowers it (the server's most careful setting wins)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_endpoint: dict[str, Slots] = {}

    def for_endpoint(
        self, endpoint: str, concurrency: int, decrease: float = DEFAULT_DECREASE
    ) -> Slots:
        """The slots of ``endpoint``, made on first use."""
        with self._lock:
            slots = self._by_endpoint.get(endpoint)
            if slots is None:
                slots = self._by_endpoint[endpoint] = Slots(concurrency, decrease)
            else:
                slots.lower_ceiling(concurrency)
            return slots

    def status(self) -> str:
        """``endpoint limit L/N, W waiting on a rate limit`` for each endpoint that has been
        rate limited (empty when none has): what a progress bar shows."""
        parts = [
            f"{endpoint} limit {slots.limit}/{slots.count}, "
            f"{slots.rate_limited_waiting} waiting on a rate limit"
            for endpoint, slots in sorted(self._by_endpoint.items())
            if slots.limit < slots.count or slots.rate_limited_waiting
        ]
        return "; ".join(parts)
