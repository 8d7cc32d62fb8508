"""Concurrent LLM requests that a Ctrl-C or SIGTERM can abandon at once.

``ThreadPoolExecutor`` joins its threads when the interpreter exits and ``shutdown`` waits for
the running ones, so a run told to stop waits out every request in flight: up to the request
timeout times the retry attempts (minutes, with a hanging server). Here the threads are daemons
and the caller never joins them: when the caller is interrupted, the calls not started are
dropped, the running ones are told to stop (``cancelled``) at their next retry, and the process
exits without waiting for a reply that nobody will read. A model running in this process is the
exception: its call is waited for (one generation), since the interpreter must not exit while
native code runs on a daemon thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as WaitTimeout
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

#: How often a waiting caller wakes up. A signal sent to the process may be delivered to any
#: thread, and a thread blocked on a lock never sees it; the caller must run Python code now and
#: then for its handler (Ctrl-C, SIGTERM) to run.
POLL_S = 0.2


class Cancelled(Exception):
    """Raised inside a worker whose batch was abandoned; nobody reads it."""


class AbandonablePool(Generic[Item, Result]):
    """Run ``work(item, cancelled)`` for each item on up to ``workers`` daemon threads.

    ``futures`` holds one future per item, in order; :meth:`abandon` drops the items not
    started and sets ``cancelled`` so that running calls can give up between attempts.
    """

    def __init__(
        self,
        work: Callable[[Item, threading.Event], Result],
        items: Sequence[Item],
        workers: int,
        name: str = "llm",
    ) -> None:
        self.cancelled = threading.Event()
        self.futures: list[Future[Result]] = [Future() for _ in items]
        self._work = work
        self._queue: queue.SimpleQueue[tuple[Item, Future[Result]]] = queue.SimpleQueue()
        for item, future in zip(items, self.futures, strict=True):
            self._queue.put((item, future))
        self._threads = [
            threading.Thread(target=self._serve, name=f"{name}_{number}", daemon=True)
            for number in range(max(1, min(workers, len(items))))
        ]
        for thread in self._threads:
            thread.start()

    def _serve(self) -> None:
        while not self.cancelled.is_set():
            try:
                item, future = self._queue.get_nowait()
            except queue.Empty:
                return
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(self._work(item, self.cancelled))
            except BaseException as error:  # handed to the waiting caller, as an executor does
                future.set_exception(error)

    def abandon(self, *, wait: bool) -> None:
        """Stop: cancel every call not started and tell the running ones to give up; with
        ``wait``, return once they have."""
        self.cancelled.set()
        for future in self.futures:
            future.cancel()
        if wait:
            for thread in self._threads:
                thread.join()


def wait_for(future: Future[Result]) -> Result:
    """``future.result()``, waking every :data:`POLL_S` so that signal handlers run."""
    while True:
        try:
            return future.result(timeout=POLL_S)
        except WaitTimeout:  # the builtin TimeoutError from Python 3.11 on
            continue
