"""What the runners' command lines do with an error a user can act on: one line, exit status 2.

A traceback would only bury such a message (credentials in it masked); anything else is a bug
and keeps its traceback. In a multirun with :class:`RunnerCallback` a failed job is noted in
``failed_jobs.jsonl`` and the sweep goes on, ending with one line per failed job, exit status 2."""

from __future__ import annotations

import faulthandler
import json
import os
import shlex
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig

from benchmarks.config.values import ConfigError
from benchmarks.data.digests import DataChangedError
from benchmarks.data.errors import DataMissingError, DatasetError
from benchmarks.pipeline.ray_pool import ExecutorUnavailableError
from benchmarks.pipeline.runlog import (
    DamagedLogError,
    ForeignRowsError,
    ResultsWriteError,
    RunInProgressError,
)
from memsys.base import UndeclaredServiceError
from memsys.compression import CompressorUnavailableError
from memsys.gguf import ModelFileError
from memsys.kvstore import CacheError
from memsys.llm.errors import BackboneUnavailableError, CacheMissError, ProviderUnavailableError
from memsys.llm.redact import install_log_redaction, redact, redact_file

T = TypeVar("T")
#: Where a multirun notes its failed jobs, in its sweep folder.
FAILED_JOBS_FILE = "failed_jobs.jsonl"


class ConfChangedError(RuntimeError):
    """``conf/`` changed under a running sweep (:class:`benchmarks.pipeline.run.SweepGuard`)."""


class IncompleteRunError(RuntimeError):
    """A run ended with questions or judge probes whose request failed for good: its files are
    written and marked incomplete, and the command exits non-zero so no script or sweep takes it for
    done."""


CLEAR_ERRORS = (
    ConfigError,
    ConfChangedError,
    DataMissingError,
    DatasetError,
    BackboneUnavailableError,
    ProviderUnavailableError,
    ModelFileError,
    CacheMissError,
    RunInProgressError,
    ResultsWriteError,
    DamagedLogError,
    ForeignRowsError,
    CacheError,
    CompressorUnavailableError,
    UndeclaredServiceError,
    IncompleteRunError,
    ExecutorUnavailableError,
    DataChangedError,
)


class Terminated(SystemExit):
    """SIGTERM: exits like Ctrl-C, through the run's cleanup."""


def run_or_exit(run: Callable[[DictConfig], T], cfg: DictConfig) -> T | None:
    """``run(cfg)``; on a clear error, print ``error: <message>`` and exit 2 (or, in a multirun
    going past failed jobs, note the job and return None). SIGTERM exits like Ctrl-C, and a native
    crash prints every thread's stack."""
    faulthandler.enable()
    os.environ.setdefault("PYTHONFAULTHANDLER", "1")  # the same in spawned worker processes
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    failures = _failed_jobs_file()
    try:
        return run(cfg)
    except CLEAR_ERRORS as error:
        print_error(str(error))
        if failures is None:
            sys.exit(2)
        _note_failed_job(failures, str(error))
    except (KeyboardInterrupt, Terminated) as stop:
        print(
            "interrupted: what was logged is kept; run the same command again to resume: "
            + rerun_command(),
            file=sys.stderr,
        )
        sys.exit(stop.code if isinstance(stop, Terminated) else 130)
    except Exception as error:  # a bug: its traceback, and the sweep goes on
        if failures is None:
            raise
        traceback.print_exc()
        _note_failed_job(failures, f"{type(error).__name__}: {error}")
    return None


def rerun_command() -> str:
    """The command that runs this job again (a multirun's job: with its own overrides only),
    any credential in it masked."""
    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        hydra = HydraConfig.get()
        command = shlex.join(["memsys-bench", "run", *hydra.overrides.task])
    else:
        command = shlex.join(getattr(sys, "orig_argv", sys.argv))
    shown = redact(command)
    return shown if shown == command else f"{shown} (with the credentials masked here)"


def print_error(message: str) -> None:
    """``error: <message>`` on stderr, each line of it, credentials masked."""
    for line in redact(message).splitlines() or [""]:
        print(f"error: {line}", file=sys.stderr)


def _terminate(number: int, frame: Any) -> None:
    raise Terminated(128 + number)


def _failed_jobs_file() -> Path | None:
    """Where this job notes its failure, when it runs in a multirun that goes on past failed
    jobs (:class:`RunnerCallback` installed); None otherwise."""
    if not HydraConfig.initialized():
        return None
    hydra = HydraConfig.get()
    installed = any(
        str(callback.get("_target_", "")).endswith("cli.RunnerCallback")
        for callback in (hydra.callbacks or {}).values()
    )
    if hydra.mode != RunMode.MULTIRUN or not installed:
        return None
    return Path(hydra.runtime.cwd) / hydra.sweep.dir / FAILED_JOBS_FILE


def _note_failed_job(path: Path, message: str) -> None:
    hydra = HydraConfig.get()
    entry = {"job": hydra.job.num, "overrides": list(hydra.overrides.task), "error": message}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:  # one append per line: jobs may run at once
        handle.write(redact(json.dumps(entry)) + "\n")


class RunnerCallback(Callback):
    """Hydra callback of the runners: makes Hydra's folder first (an unwritable one is one
    ``error:`` line), and in a multirun clears failed-job notes at the start and reports them at the
    end, exit 2."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        _make_folder(Path(config.hydra.run.dir))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _make_folder(Path(config.hydra.sweep.dir))
        _sweep_file(config).unlink(missing_ok=True)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        path = _sweep_file(config)
        if not path.exists():
            return
        failed = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        print(
            f"error: {len(failed)} job(s) of this sweep failed (the others ran; run the sweep "
            f"again to retry them, finished runs resume; list: {path}):",
            file=sys.stderr,
        )
        for entry in sorted(failed, key=lambda entry: entry["job"]):
            first = entry["error"].splitlines()[0] if entry["error"] else ""
            print(
                f"error:   #{entry['job']} {' '.join(entry['overrides'])}: {first}", file=sys.stderr
            )
        sys.exit(2)


def _make_folder(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        print_error(str(ResultsWriteError(path, error)))
        sys.exit(2)


def _sweep_file(config: DictConfig) -> Path:
    return Path(config.hydra.runtime.cwd) / config.hydra.sweep.dir / FAILED_JOBS_FILE


def hydra_saved_files() -> list[Path]:
    """The files Hydra wrote for this job before the task ran (``.hydra/*.yaml``, a multirun's
    ``multirun.yaml``); empty outside a Hydra app."""
    if not HydraConfig.initialized():
        return []
    hydra = HydraConfig.get()
    files: list[Path] = []
    if hydra.output_subdir is not None:
        files += sorted((Path(hydra.runtime.output_dir) / hydra.output_subdir).glob("*.yaml"))
    if hydra.mode == RunMode.MULTIRUN:
        files.append(Path(hydra.runtime.cwd) / hydra.sweep.dir / "multirun.yaml")
    return [path for path in files if path.is_file()]


def redact_run_outputs() -> None:
    """From now on, and in what Hydra wrote already, no URL credential: the runners' first step
    (the library masks what it writes and logs, :mod:`memsys.llm.redact`; Hydra's saved files are
    the runners')."""
    install_log_redaction()
    for path in hydra_saved_files():
        redact_file(path)
