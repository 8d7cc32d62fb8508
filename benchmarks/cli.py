"""What the runners' command lines do with an error a user can act on: one line, exit status 2.

A wrong key, a config folder edited under a running sweep, a missing dataset, a backbone that
is down, a replay that diverged from its recording, a full results disk or a damaged run log is
the user's to fix; a traceback would only bury the message. Anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
from collections.abc import Callable
from typing import TypeVar

from omegaconf import DictConfig

from benchmarks.data.errors import DataMissingError, DatasetError
from benchmarks.runlog import DamagedLogError, ResultsWriteError, RunInProgressError
from benchmarks.settings import ConfigError
from memsys.llm.errors import BackboneUnavailableError, CacheMissError, ProviderUnavailableError

T = TypeVar("T")


class ConfChangedError(RuntimeError):
    """``conf/`` changed under a running sweep (:class:`benchmarks.run.SweepGuard`)."""


CLEAR_ERRORS = (
    ConfigError,
    ConfChangedError,
    DataMissingError,
    DatasetError,
    BackboneUnavailableError,
    ProviderUnavailableError,
    CacheMissError,
    RunInProgressError,
    ResultsWriteError,
    DamagedLogError,
)


def run_or_exit(run: Callable[[DictConfig], T], cfg: DictConfig) -> T:
    """``run(cfg)``; on a clear error, print ``error: <message>`` to stderr and exit 2.

    SIGTERM exits like Ctrl-C, through the run's cleanup (caches closed, cost logged); so does
    SIGINT sent to a run started in the background, where the shell had it ignored. A crash in
    native code (llama.cpp, torch, onnxruntime) prints every thread's Python stack to stderr, so
    that a segfault names where it happened.
    """
    faulthandler.enable()
    os.environ.setdefault("PYTHONFAULTHANDLER", "1")  # the same in spawned worker processes
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return run(cfg)
    except CLEAR_ERRORS as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
