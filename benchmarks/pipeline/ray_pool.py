"""``executor=ray``: one run's conversations spread over a Ray cluster's workers.

Each worker is a Ray actor with a harness of its own; this process alone writes the log, in the
dataset's order, so records, scores and run id are a one-process run's: docs/running.md, "One
run on many machines"."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.pipeline.harness import Harness, build_harness
from benchmarks.pipeline.settings import Executor, RunSettings
from benchmarks.pipeline.workers import (
    Outcome,
    Pending,
    Task,
    WorkerError,
    answer_task,
    limit_threads,
    map_ordered,
)

#: The optional dependency group that installs Ray (pyproject.toml).
EXTRA = "distributed"


class ExecutorUnavailableError(RuntimeError):
    """``executor=ray`` without Ray installed."""


def import_ray() -> Any:
    """The ``ray`` module, or an error naming the extra that installs it."""
    try:
        import ray
    except ImportError:
        raise ExecutorUnavailableError(
            f"executor=ray needs Ray, which is not installed: pip install -e '.[{EXTRA}]' "
            "(on every machine of the cluster)"
        ) from None
    return ray


class RayWorker:
    """One Ray actor: a harness, then conversations one at a time until the run ends."""

    def __init__(self, settings: RunSettings, run_dir: str, threads: int) -> None:
        limit_threads(threads)
        self.harness: Harness = build_harness(settings, Path(run_dir))

    def answer(self, task: Task) -> Outcome:
        conversation, question_ids = task
        return answer_task(self.harness, conversation, question_ids)

    def pid(self) -> int:
        """The actor's process id (a test kills it to check that nothing is lost)."""
        return os.getpid()


class RayPool:
    """``executor.workers`` actors on the cluster at ``executor.address`` (a local instance where it
    is None) behind :class:`~.workers.WorkerPool`'s interface."""

    def __init__(self, executor: Executor, settings: RunSettings, run_dir: Path) -> None:
        self._ray = ray = import_ray()
        self._connected = not ray.is_initialized()
        if self._connected:
            ray.init(
                address=executor.address,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
        actor = ray.remote(
            num_cpus=executor.cpus_per_worker,
            max_restarts=executor.max_restarts,
            max_task_retries=executor.max_restarts,
        )(RayWorker)
        self.workers = [
            actor.remote(settings, str(run_dir), executor.cpus_per_worker)
            for _ in range(executor.workers)
        ]

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *_: object) -> None:
        for worker in self.workers:
            self._ray.kill(worker, no_restart=True)
        if self._connected:
            self._ray.shutdown()

    def map_ordered(self, tasks: Iterable[Task], window: int) -> Iterator[Outcome]:
        """:func:`~.workers.map_ordered` over the pool's actors."""
        ray = self._ray

        def submit(worker: Any, task: Task) -> Any:
            return worker.answer.remote(task)

        def collect(busy: dict[Any, Pending]) -> list[tuple[Any, Outcome | WorkerError]]:
            (ready,), _ = ray.wait(list(busy), num_returns=1)
            try:
                return [(ready, ray.get(ready))]
            except Exception as error:  # the work raised, or the actor is gone for good
                message = f"a Ray worker failed on conversation {busy[ready][2]}: {error}"
                message += "\nWhat was logged stays: run again to resume"
                return [(ready, WorkerError(message))]

        return map_ordered(self.workers, tasks, window, submit, collect)
