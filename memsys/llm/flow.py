"""Requests sent as soon as they are known, their replies handled as they arrive.

:meth:`Backbone.complete_many` fits requests that are all known up front. Construction is often
a set of chains instead: ES-Mem's stage 1 asks about turn t + 1 once turn t is answered, a
rejected reply is asked again, a session's second stage starts when its first ends. Sent in
``complete_many`` rounds, each round waits for its slowest request and the chains that are done
leave their slots empty. A :class:`RequestFlow` keeps the backbone's ``concurrency`` slots busy
with whatever is ready, and hands every reply back on the caller's thread, so that the caller's
processing (parsing, embedding, deciding the next request) needs no locks and stays
deterministic: which requests are made, and what is made of each reply, does not depend on the
order in which replies arrive. Each reply is handed back at its chain depth
(:mod:`memsys.llm.chain`), measured, never acted on.

A provider that batches natively (in-process vLLM) gets every request known when the caller
waits as one ``complete_many`` call: rounds are what it is fast at.
"""

from __future__ import annotations

import itertools
import math
import queue
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Generic, TypeVar

from memsys.llm import chain
from memsys.llm.backbone import Backbone
from memsys.llm.errors import LLMRequestError
from memsys.llm.pool import POLL_S
from memsys.llm.providers.base import BatchProvider
from memsys.llm.slots import Key
from memsys.llm.types import LLMRequest, LLMResponse

Tag = TypeVar("Tag")
#: A reply, or the error of a request that failed for good (the caller falls back).
Outcome = LLMResponse | LLMRequestError
#: A request waiting to go out: its tag, itself, the chain depth it was sent from, and its key
#: for a backbone slot.
_Item = tuple[Tag, LLMRequest, int, Key]
#: The place, in the run's order, of the memory this thread builds (0 unless several are built
#: at once): among requests of equal priority, an earlier memory's get the backbone's slots first.
_MEMORY_RANK: ContextVar[int] = ContextVar("memory_rank", default=0)


def building(rank: int) -> None:
    """This thread builds the memory at place ``rank`` of the run's order."""
    _MEMORY_RANK.set(rank)


class RequestFlow(Generic[Tag]):
    """Requests tagged by the caller, at most ``backbone.settings.concurrency`` in flight.

    :meth:`next` returns the next reply to arrive with its tag. A request that fails for good
    comes back as its :class:`LLMRequestError`; any other error (a tripped breaker, a replay
    miss) is raised: the run must stop. Use as a context manager: leaving it early (an error,
    Ctrl-C) drops the requests not sent and leaves the running ones to finish on daemon threads
    unread, as an abandoned ``complete_many`` does (a model running in this process is waited
    for).
    """

    def __init__(self, backbone: Backbone) -> None:
        self._backbone = backbone
        self._batching = isinstance(backbone.provider, BatchProvider)
        self._todo: queue.PriorityQueue[tuple[float, int, _Item[Tag] | None]] = (
            queue.PriorityQueue()
        )
        self._submitted = itertools.count()  # ties go to the earlier request
        self._done: queue.SimpleQueue[tuple[Tag, int, Outcome | BaseException]] = (
            queue.SimpleQueue()
        )
        self._held: list[_Item[Tag]] = []
        self._deepest = 0  # the deepest reply handed back (memsys.llm.chain)
        self._workers: list[threading.Thread] = []
        self._closed = threading.Event()
        self.pending = 0

    def submit(self, tag: Tag, request: LLMRequest, priority: float = 0) -> None:
        """Send ``request`` as soon as a slot is free (a batching provider: at the next wait).

        Waiting requests go out lowest ``priority`` first, then in the order submitted: a
        chain's next request should not queue behind a batch that nothing waits on. Across the
        flows sharing the backbone, so do they for its slots, then the earlier memory's first
        (:func:`building`).
        """
        self.pending += 1
        submitted = next(self._submitted)
        key = (priority, _MEMORY_RANK.get(), submitted)
        item = (tag, request, chain.depth(), key)
        if self._batching:
            self._held.append(item)
            return
        self._todo.put((priority, submitted, item))
        if len(self._workers) < min(self.pending, self._backbone.settings.concurrency):
            worker = threading.Thread(target=self._serve, name="llm_flow", daemon=True)
            self._workers.append(worker)
            worker.start()

    def next(self) -> tuple[Tag, Outcome]:
        """The next reply to arrive and its tag (waking every :data:`POLL_S` so that signal
        handlers run); at least one request must be pending."""
        if self.pending < 1:
            raise RuntimeError("no request is pending")
        if self._batching and self._done.empty():
            self._send_held()
        while True:
            try:
                tag, parent, outcome = self._done.get(timeout=POLL_S)
            except queue.Empty:
                continue
            self.pending -= 1
            if isinstance(outcome, BaseException) and not isinstance(outcome, LLMRequestError):
                raise outcome
            cached = isinstance(outcome, LLMResponse) and outcome.cached
            depth = chain.reply_depth(parent, cached)
            self._deepest = max(self._deepest, depth)
            chain.handling(depth)
            return tag, outcome

    def __iter__(self) -> Iterator[tuple[Tag, Outcome]]:
        """Every reply, including those of requests submitted while iterating; after the last,
        the thread's chain depth is the deepest reply's (or what it was, if deeper)."""
        before = chain.depth()
        while self.pending:
            yield self.next()
        chain.handling(max(before, self._deepest))

    def _serve(self) -> None:
        while not self._closed.is_set():
            *_, item = self._todo.get()
            if item is None or self._closed.is_set():
                return
            tag, request, parent, key = item
            try:
                chain.handling(parent)  # the provider sees the request's chain as the caller's
                outcome: Outcome | BaseException = self._backbone.complete(
                    request.messages, request.params, cancelled=self._closed, key=key
                )
            except BaseException as error:  # handed to the caller, as an executor does
                outcome = error
            self._done.put((tag, parent, outcome))

    def _send_held(self) -> None:
        """A batching provider's round: everything submitted so far, in one engine call."""
        held, self._held = self._held, []
        requests = [request for _, request, _, _ in held]
        outcomes = self._backbone.complete_many(requests, return_exceptions=True)
        for (tag, _, parent, _), outcome in zip(held, outcomes, strict=True):
            self._done.put((tag, parent, outcome))

    def close(self) -> None:
        """Stop the workers: idle ones at once, busy ones after their request (a model running
        in this process is waited for)."""
        self._closed.set()
        for _ in self._workers:
            self._todo.put((-math.inf, next(self._submitted), None))
        if getattr(self._backbone.provider, "in_process", False):
            for worker in self._workers:
                worker.join()

    def __enter__(self) -> RequestFlow[Tag]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
