"""Memories built ahead: several conversations' memories under construction at once.

One conversation's LLM construction rarely fills a server's slots, so the next conversations'
memories are built meanwhile; the backbone's slots go to the memory started first, so each memory
is the one a serial run builds (docs/running.md). Only construction that calls an LLM on a server
builds ahead: local computation gains nothing from threads, and an in-process model must not be
left running on a daemon thread at exit."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from typing import Generic, TypeVar

from benchmarks.pipeline.harness import Built, Harness, get_memory
from memsys.llm import flow
from memsys.llm.pool import wait_for
from memsys.nlp import ParseProcess
from memsys.types import Conversation

Memory = TypeVar("Memory")
#: What the caller pairs with each conversation (the questions it still has to answer).
Pending = TypeVar("Pending")


def builds_ahead(harness: Harness) -> bool:
    """Whether this run's memories may be built several at once (see the module docstring)."""
    backbone = harness.services.backbone
    return (
        harness.settings.construction_key is not None
        and backbone is not None
        and not getattr(backbone.provider, "in_process", False)
    )


class MemoriesAhead(Generic[Memory]):
    """Each ``(conversation, pending questions)`` with ``build(conversation)``, in order, with up to
    ``at_once`` builds under way on daemon threads; ``building`` names those not in yet."""

    def __init__(self, build: Callable[[Conversation], Memory], at_once: int) -> None:
        self._build = build
        self._at_once = at_once
        self.building: list[str] = []

    @classmethod
    def of_run(cls, harness: Harness) -> MemoriesAhead[Built]:
        """The run's memories, ``memories_at_once`` at a time where :func:`builds_ahead` (spaCy
        parsing in a process of its own), else one at a time."""
        ahead = builds_ahead(harness)
        nlp = harness.services.nlp
        if ahead and nlp.process is None:
            nlp.process = ParseProcess()
        at_once = harness.settings.memories_at_once if ahead else 1
        return MemoriesAhead(lambda conversation: get_memory(harness, conversation), at_once)

    def __call__(
        self, work: Iterable[tuple[Conversation, Pending]]
    ) -> Iterator[tuple[Conversation, Pending, Memory]]:
        if self._at_once == 1:
            for conversation, pending in work:
                self.building = [conversation.conversation_id]
                memory = self._build(conversation)
                self.building = []
                yield conversation, pending, memory
            return
        started: deque[tuple[Conversation, Pending, Future[Memory]]] = deque()
        source = enumerate(work)
        for rank, (conversation, pending) in source:
            started.append((conversation, pending, self._start(conversation, rank)))
            if len(started) == self._at_once:
                break
        while started:
            conversation, pending, future = started.popleft()
            memory = wait_for(future)
            self.building.remove(conversation.conversation_id)
            for rank, (following, its_pending) in source:  # starts as this one is handed on
                started.append((following, its_pending, self._start(following, rank)))
                break
            yield conversation, pending, memory

    def _start(self, conversation: Conversation, rank: int) -> Future[Memory]:
        future: Future[Memory] = Future()
        future.set_running_or_notify_cancel()

        def build() -> None:
            flow.building(rank)  # its requests before the later memories' (memsys.llm.slots)
            try:
                future.set_result(self._build(conversation))
            except BaseException as error:  # raised on the caller's thread, as an executor does
                future.set_exception(error)

        self.building.append(conversation.conversation_id)
        name = f"memory_{conversation.conversation_id}"
        threading.Thread(target=build, name=name, daemon=True).start()
        return future
