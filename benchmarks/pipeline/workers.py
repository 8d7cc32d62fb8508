"""``workers=N``: construct memories and answer a run's questions in N worker processes.

Each worker builds its own harness from the run's validated settings; the parent alone writes the
log, in a serial run's order, so results do not depend on how many workers produced them
(docs/running.md, "Workers")."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import resource
import signal
import sys
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from benchmarks.pipeline.harness import (
    ConstructionCounts,
    Harness,
    answer_conversation,
    build_harness,
    construct_memory,
)
from benchmarks.pipeline.settings import RunSettings
from memsys.files import available_cores
from memsys.types import Conversation

#: One unit of work: a conversation and the ids of its questions not logged yet.
Task = tuple[Conversation, list[str]]
#: A worker process and the parent's end of its pipe.
Worker = tuple[multiprocessing.process.BaseProcess, Connection]


def peak_rss_mb() -> int:
    """This process's peak resident memory so far, in MB (Linux reports KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


@dataclass
class Outcome:
    """A worker's reply to one task: the records, and what producing them cost."""

    records: list[dict[str, Any]]
    construction: ConstructionCounts
    work: dict[str, dict[str, float]]
    rebuilt_corrupt: int
    pid: int
    peak_rss_mb: int


@dataclass
class Failure:
    """A worker's reply when its task raised: where, and the traceback."""

    conversation_id: str
    pid: int
    traceback: str


class WorkerError(RuntimeError):
    """A worker raised, or died, while working on a conversation."""


@dataclass
class WorkerUsage:
    """What the workers did, for the invocation ledger (empty in a serial run)."""

    work: dict[str, Counter[str]] = field(default_factory=dict)
    peak_rss_mb: dict[int, int] = field(default_factory=dict)
    rebuilt_corrupt: int = 0

    def add(self, outcome: Outcome) -> None:
        for kind, counts in outcome.work.items():
            self.work.setdefault(kind, Counter()).update(counts)
        self.peak_rss_mb[outcome.pid] = max(
            outcome.peak_rss_mb, self.peak_rss_mb.get(outcome.pid, 0)
        )
        self.rebuilt_corrupt += outcome.rebuilt_corrupt

    def work_with(self, work: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """The parent's work counts (:meth:`Harness.work_counts`) plus the workers'."""
        return {
            kind: {
                key: round(value + self.work.get(kind, Counter())[key], 3)
                for key, value in counts.items()
            }
            for kind, counts in work.items()
        }

    def total_peak_rss_mb(self) -> int:
        """Every worker's peak, summed: an upper bound on their memory in use at once."""
        return sum(self.peak_rss_mb.values())


class WorkerPool:
    """N spawned processes, one task at a time each, over a pipe apiece. Leaving it by an exception
    terminates them mid-task: what they were doing is not logged and is redone on resume."""

    def __init__(self, workers: int, settings: RunSettings, run_dir: Path) -> None:
        context = multiprocessing.get_context("spawn")  # fork would copy torch's thread pools
        threads = max(1, available_cores() // workers)
        self._workers: list[Worker] = []
        for _ in range(workers):
            ours, theirs = context.Pipe()
            process = context.Process(
                target=_serve, args=(theirs, settings, str(run_dir), threads), daemon=True
            )
            process.start()
            theirs.close()
            self._workers.append((process, ours))

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, error_type: type[BaseException] | None, *_: object) -> None:
        for process, connection in self._workers:
            if error_type is not None:
                process.terminate()
            connection.close()  # an idle worker reads end-of-file and exits
        for process, _ in self._workers:
            process.join(timeout=60)
            if process.is_alive():
                process.terminate()
                process.join()

    def map_ordered(self, tasks: Iterable[Task], window: int) -> Iterator[Outcome]:
        """:func:`map_ordered` over the pool's processes."""

        def submit(worker: Worker, task: Task) -> Connection:
            worker[1].send(task)
            return worker[1]

        def collect(busy: dict[Any, Pending]) -> list[tuple[Any, Outcome | WorkerError]]:
            finished = []
            for connection in wait(list(busy)):
                worker, conversation_id = busy[connection][1:]
                try:
                    finished.append((connection, _receive(connection, worker[0], conversation_id)))
                except WorkerError as error:
                    finished.append((connection, error))
            return finished

        return map_ordered(self._workers, tasks, window, submit, collect)


#: A task handed out: its number in task order, the worker doing it, its conversation's id.
Pending = tuple[int, Any, str]


def map_ordered(
    workers: Iterable[Any],
    tasks: Iterable[Task],
    window: int,
    submit: Callable[[Any, Task], Any],
    collect: Callable[[dict[Any, Pending]], list[tuple[Any, Outcome | WorkerError]]],
) -> Iterator[Outcome]:
    """Each task's outcome, in task order, from ``workers`` one task at a time each:
    ``submit(worker, task)`` returns a handle, ``collect(busy)`` finished handles with their outcome
    or :class:`WorkerError`. At most ``window`` tasks are out, so a stream stays streamed; a failed
    task raises in its turn."""
    tasks = iter(tasks)
    idle = list(workers)
    busy: dict[Any, Pending] = {}
    done: dict[int, Outcome | WorkerError] = {}
    handed_out = yielded = 0
    exhausted = failed = False
    while True:
        while idle and not (exhausted or failed) and handed_out - yielded < window:
            task = next(tasks, None)
            if task is None:
                exhausted = True
                break
            worker = idle.pop()
            busy[submit(worker, task)] = (handed_out, worker, task[0].conversation_id)
            handed_out += 1
        if not busy:
            return
        for handle, result in collect(busy):
            number, worker, _ = busy.pop(handle)
            done[number] = result
            if isinstance(result, WorkerError):
                failed = True
            else:
                idle.append(worker)
        while yielded in done:
            result = done.pop(yielded)
            if isinstance(result, WorkerError):
                raise result
            yield result
            yielded += 1


def _receive(
    connection: Connection, process: multiprocessing.process.BaseProcess, conversation_id: str
) -> Outcome:
    """A worker's outcome, or a :class:`WorkerError` that names the conversation and the cause."""
    try:
        reply = connection.recv()
    except EOFError:
        process.join(timeout=5)
        raise WorkerError(
            f"worker pid {process.pid} died (exit code {process.exitcode}) while working on "
            f"conversation {conversation_id}; out of memory? Try fewer workers. What was logged "
            "stays: run again to resume"
        ) from None
    if isinstance(reply, Failure):
        raise WorkerError(
            f"worker pid {reply.pid} failed on conversation {reply.conversation_id}:\n"
            f"{reply.traceback}"
        )
    return reply


def _serve(connection: Connection, settings: RunSettings, run_dir: str, threads: int) -> None:
    """A worker's life: build a harness, then answer tasks until the parent closes the pipe."""
    signal.signal(
        signal.SIGINT, signal.SIG_IGN
    )  # Ctrl-C reaches the whole group; the parent decides
    _exit_with_parent()
    limit_threads(threads)
    harness: Harness | None = None
    setup_failure = ""
    try:
        harness = build_harness(settings, Path(run_dir))
    except Exception:  # reported as the reply to the first task, where the parent listens
        setup_failure = traceback.format_exc()
    try:
        while True:
            try:
                conversation, question_ids = connection.recv()
            except EOFError:
                return
            try:
                if harness is None:
                    raise RuntimeError(f"worker setup failed:\n{setup_failure}")
                reply: Outcome | Failure = answer_task(harness, conversation, question_ids)
            except Exception:
                reply = Failure(conversation.conversation_id, os.getpid(), traceback.format_exc())
            connection.send(reply)
    finally:
        if harness is not None:
            harness.close()


def answer_task(harness: Harness, conversation: Conversation, question_ids: list[str]) -> Outcome:
    """One task: the conversation's memory, then the records of the named questions."""
    before = harness.work_counts()
    rebuilt_before = harness.memories.rebuilt_corrupt
    construction = ConstructionCounts()
    memory = construct_memory(harness, conversation, construction)
    wanted = set(question_ids)
    pending = [q for q in conversation.questions if q.question_id in wanted]
    records = [
        record
        for batch in answer_conversation(harness, memory, conversation, pending)
        for record in batch
    ]
    after = harness.work_counts()
    return Outcome(
        records=records,
        construction=construction,
        work={
            kind: {key: value - before[kind][key] for key, value in counts.items()}
            for kind, counts in after.items()
        },
        rebuilt_corrupt=harness.memories.rebuilt_corrupt - rebuilt_before,
        pid=os.getpid(),
        peak_rss_mb=peak_rss_mb(),
    )


def _exit_with_parent() -> None:
    """Linux: the kernel sends this worker SIGTERM when the parent dies, even by SIGKILL, so a
    killed run leaves no worker constructing memories nobody will log."""
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def limit_threads(threads: int) -> None:
    """Give each worker its share of the cores (torch and BLAS would each take all of them)."""
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    threadpool_limits(threads)
