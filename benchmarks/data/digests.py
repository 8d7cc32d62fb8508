"""What data a run read: the sha256 of each dataset file, recorded with every invocation.

A run's identity names its dataset, not its content, so a file replaced under a run would mix
two datasets silently: a run resuming over a file whose digest changed stops before any work
(:func:`check_unchanged`). The digests stay out of the identity, so the same data under another
path keeps its run."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from benchmarks.data.paths import data_file

#: Hex digits of a file's sha256 that name it (48 bits: no two dataset releases collide).
DIGEST_LENGTH = 12
#: Bytes read at a time while hashing.
CHUNK = 1 << 20


class DataChangedError(RuntimeError):
    """A dataset file's content differs from the one a run recorded when it began."""


def file_digest(path: Path) -> str:
    """The first :data:`DIGEST_LENGTH` hex digits of ``path``'s sha256."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()[:DIGEST_LENGTH]


def dataset_digests(files: Iterable[str], data_dir: Path) -> dict[str, str]:
    """``{file: digest}`` of each dataset file (paths relative to the data folder)."""
    return {name: file_digest(data_file(name, data_dir)) for name in files}


def recorded_digests(invocations: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The digests the latest invocation that recorded any recorded (``{}`` for runs logged
    before digests were kept)."""
    recorded: dict[str, str] = {}
    for invocation in invocations:
        recorded = dict(invocation.get("data") or {}) or recorded
    return recorded


def check_unchanged(recorded: Mapping[str, str], now: Mapping[str, str], data_dir: Path) -> None:
    """Raise :class:`DataChangedError` naming each file whose digest differs from the one the
    run recorded (a file it did not record then is not compared)."""
    changed = [
        f"{data_file(name, data_dir)} (sha256 {recorded[name]}… when the run recorded it, "
        f"{digest}… now)"
        for name, digest in now.items()
        if name in recorded and recorded[name] != digest
    ]
    if changed:
        raise DataChangedError(
            f"dataset changed under this run: {'; '.join(changed)}. Its records were made from "
            "the other data: restore that file, or start the run afresh in another results_dir"
        )
