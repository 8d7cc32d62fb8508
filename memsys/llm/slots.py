"""The backbone's ``concurrency`` slots, granted to waiting requests in the order of their keys.

With a plain semaphore, whichever waiting thread wakes first gets a freed slot, so several
memories built at once share the server evenly: they all finish their requests together, near
the end, and their local work after the last reply (composing a graph, embedding its nodes) runs
with no request left to overlap it. Granting slots lowest key first lets a request flow say what
should go first (a chain's next request before a batch nothing waits on, the memory started
first before the later ones), so memories finish one after another and each one's local work
overlaps the next ones' requests. Which requests are sent, and what is made of their replies,
does not depend on the order.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from memsys.llm.pool import POLL_S, Cancelled

#: What orders waiting requests, lowest first; requests sent outside a flow have the empty key.
Key = tuple[float, ...]


class Slots:
    """``count`` slots: a freed slot goes straight to the waiting request of lowest key (ties:
    the one that waited longest)."""

    def __init__(self, count: int) -> None:
        self._free = count
        self._lock = threading.Lock()
        self._waiting: list[tuple[Key, int, threading.Event]] = []
        self._arrivals = itertools.count()

    @contextmanager
    def held(self, key: Key, cancelled: threading.Event) -> Iterator[None]:
        """Hold a slot while the body runs; waiting wakes every :data:`POLL_S` to raise
        :class:`Cancelled` when the caller gives up."""
        self._acquire(key, cancelled)
        try:
            yield
        finally:
            self._release()

    def _acquire(self, key: Key, cancelled: threading.Event) -> None:
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return
            entry = (key, next(self._arrivals), threading.Event())
            heapq.heappush(self._waiting, entry)
        granted = entry[2]
        while not granted.wait(POLL_S):
            if not cancelled.is_set():
                continue
            with self._lock:
                if not granted.is_set():
                    self._waiting.remove(entry)
                    heapq.heapify(self._waiting)
                    raise Cancelled
            self._release()  # granted as it gave up: hand the slot on
            raise Cancelled

    def _release(self) -> None:
        with self._lock:
            if self._waiting:
                heapq.heappop(self._waiting)[2].set()  # the slot passes on without being freed
            else:
                self._free += 1
