"""Files and the machine: writing files so that a full disk or a kill never leaves a cut one
behind, and how many cores this process may use."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until all of ``data`` is written: a filling disk writes short first."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def replace_with(path: Path, write: Callable[[Path], object]) -> None:
    """Replace ``path`` by what ``write(temporary)`` writes to a temporary file beside it, in one
    rename (parents created): a reader sees the old file or the new one, never part of either.
    The temporary ``.<name>.<pid>.<thread>.part`` is removed when the write fails (the error is
    raised as it is)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        write(temporary)
        with open(temporary, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with suppress(OSError):
            temporary.unlink(missing_ok=True)
        raise


def replace_file(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` (see :func:`replace_with`)."""

    def write(temporary: Path) -> None:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, data)
        finally:
            os.close(fd)

    replace_with(path, write)


def available_cores() -> int:
    """The cores this process may run on (a container's or ``taskset``'s share, not the host's)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
