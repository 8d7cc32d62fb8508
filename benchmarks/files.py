"""Writing files so that a full disk or a kill never leaves a cut one behind."""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until all of ``data`` is written: a filling disk writes short first."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def replace_file(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one rename (parents created): a reader sees the old
    file or the new one, never part of either. The temporary ``.<name>.<pid>.part`` beside it is
    removed when the write fails (an ``OSError``, raised as it is)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        with suppress(OSError):
            temporary.unlink(missing_ok=True)
        raise
