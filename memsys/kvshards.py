"""A cache folder several machines can share: one append-only shard per writing process.

SQLite (:mod:`memsys.kvstore`) serializes writers with POSIX locks and WAL shared memory, which a
network filesystem does not give across machines; two SLURM jobs on two nodes writing one file
can corrupt it. A folder whose layout is ``shards`` stores each cache (embeddings, LLM replies,
parses, compressions) as ``<name>.shards/``, a folder of shard files, and every process appends
only to a shard of its own (``<host>-<pid>-<random>.jsonl``): there is never a second writer to
a file. Readers merge all shards: each line is one record ``{"k": key, "v": base64 value, "d":
digest}``; a line that is not yet complete (its writer is mid-write, or died there) is left for
a later scan, and a line that fails to parse or its digest is counted as corrupt and skipped, so
the caller recomputes it. A reader that misses a key rescans the shards that grew, at most every
:data:`RESCAN_S` seconds, so a job sees what other jobs computed since it started without paying
a scan per miss. Files are opened, appended and closed per batch, which is what close-to-open
consistency (NFS) needs for another machine to see the lines.

When two jobs computed one key at once, both lines exist; a reader keeps the first it indexed
(the values are the same computation; an LLM reply may differ between machines, as it may in any
two runs). The folder's layout is recorded in ``cache_layout.json`` beside the caches, so every
job that opens the folder uses the one layout its first job chose (``cache_sharing``).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from memsys.kvstore import SQLiteKV, row_digest

log = logging.getLogger(__name__)

#: The file that records a cache folder's layout (``sqlite`` or ``shards``).
LAYOUT_FILE = "cache_layout.json"
#: The layouts: one SQLite file per cache (one machine), or per-process shards (several).
LAYOUTS = ("sqlite", "shards")
#: Least seconds between two rescans of the shards that a miss triggers.
RESCAN_S = 2.0


class LayoutMismatchError(ValueError):
    """A cache folder already holds the other layout than the one asked for."""


def folder_layout(folder: Path) -> str:
    """The layout recorded for ``folder`` (``sqlite`` where none is)."""
    try:
        layout = json.loads((folder / LAYOUT_FILE).read_text(encoding="utf-8"))["layout"]
    except FileNotFoundError:
        return "sqlite"
    except (ValueError, KeyError, TypeError) as error:
        raise LayoutMismatchError(f"{folder / LAYOUT_FILE}: unreadable ({error})") from error
    if layout not in LAYOUTS:
        raise LayoutMismatchError(f"{folder / LAYOUT_FILE}: unknown layout {layout!r}")
    return layout


def claim_layout(folder: Path, layout: str) -> None:
    """Record ``layout`` for ``folder``, or check it against the one recorded.

    A folder that already holds SQLite caches (``*.sqlite``) and has no record keeps ``sqlite``:
    turning it into shards would hide what it holds.
    """
    if layout not in LAYOUTS:
        raise LayoutMismatchError(f"unknown layout {layout!r} (one of {', '.join(LAYOUTS)})")
    recorded = folder_layout(folder)
    if (folder / LAYOUT_FILE).exists() or any(folder.glob("*.sqlite")):
        if recorded != layout:
            raise LayoutMismatchError(
                f"cache folder {folder} holds the {recorded} layout, not {layout}: use "
                f"cache_sharing={recorded}, or another cache_dir"
            )
        return
    if layout == "sqlite":
        return  # the default needs no record
    folder.mkdir(parents=True, exist_ok=True)
    part = folder / f"{LAYOUT_FILE}.{secrets.token_hex(4)}.part"
    part.write_text(json.dumps({"layout": layout}) + "\n", encoding="utf-8")
    os.replace(part, folder / LAYOUT_FILE)


def open_kv(path: str | os.PathLike[str], table: str) -> SQLiteKV | ShardedKV:
    """The store of one cache, ``path`` naming its SQLite file (``<folder>/<name>.sqlite``), in
    the layout recorded for its folder."""
    path = Path(path)
    if folder_layout(path.parent) == "shards":
        return ShardedKV(path.with_suffix(".shards"), table)
    return SQLiteKV(path, table)


class ShardedKV:
    """Durable ``str -> bytes`` mapping over a folder of append-only shards (see the module).

    The same interface as :class:`~memsys.kvstore.SQLiteKV`. Values are indexed by shard and
    offset, not held in memory; ``corrupt_rows`` counts the lines skipped as damaged.
    """

    def __init__(self, folder: str | os.PathLike[str], table: str) -> None:
        self.path = Path(folder)
        self.table = table
        self.corrupt_rows = 0
        self._lock = threading.Lock()
        self._index: dict[str, tuple[Path, int, int]] = {}
        self._scanned: dict[Path, int] = {}
        self._dropped: set[tuple[Path, int]] = set()
        self._last_scan = float("-inf")
        self._own: Path | None = None
        self._pid: int | None = None

    def _own_shard(self) -> Path:
        """This process's shard (a forked child gets one of its own)."""
        if self._own is None or self._pid != os.getpid():
            host = socket.gethostname().replace(os.sep, "_") or "host"
            name = f"{host}-{os.getpid()}-{secrets.token_hex(4)}.jsonl"
            self._own, self._pid = self.path / name, os.getpid()
        return self._own

    def _scan(self) -> None:
        """Index the complete lines every shard gained since the last scan."""
        self._last_scan = time.monotonic()
        if not self.path.is_dir():
            return
        for shard in sorted(self.path.glob("*.jsonl")):
            start = self._scanned.get(shard, 0)
            try:
                if shard.stat().st_size <= start:
                    continue
                with shard.open("rb") as handle:
                    handle.seek(start)
                    data = handle.read()
            except FileNotFoundError:
                continue
            end = data.rfind(b"\n") + 1  # a line without its newline is still being written
            offset = start
            for line in data[:end].splitlines(keepends=True):
                self._index_line(shard, offset, line)
                offset += len(line)
            self._scanned[shard] = start + end

    def _index_line(self, shard: Path, offset: int, line: bytes) -> None:
        record = _decode(line)
        if record is None:
            self.corrupt_rows += 1
            log.warning("%s: skipped a damaged line at byte %d; recomputing", shard, offset)
            return
        self._index.setdefault(record[0], (shard, offset, len(line)))

    def _value(self, key: str) -> bytes | None:
        shard, offset, length = self._index[key]
        if (shard, offset) in self._dropped:
            return None
        with shard.open("rb") as handle:
            handle.seek(offset)
            record = _decode(handle.read(length))
        if record is None or record[0] != key:
            self._dropped.add((shard, offset))
            self.corrupt_rows += 1
            return None
        return record[1]

    def get(self, key: str) -> bytes | None:
        """The stored value, or ``None`` (also for a line that failed its digest)."""
        return self.get_many([key]).get(key)

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """Stored values of those ``keys`` that are present and intact."""
        with self._lock:
            missing = any(key not in self._index for key in keys)
            if missing and (time.monotonic() - self._last_scan >= RESCAN_S or not self._scanned):
                self._scan()
            found = {}
            for key in keys:
                if key in self._index and (value := self._value(key)) is not None:
                    found[key] = value
            return found

    def discard(self, key: str, value: bytes, reason: str) -> None:
        """Read ``key`` as a miss from now on in this process (shards are never rewritten)."""
        with self._lock:
            if key in self._index:
                shard, offset, _ = self._index[key]
                self._dropped.add((shard, offset))
                self.corrupt_rows += 1
                log.warning("%s: dropped key %s (%s); recomputing", self.path, key, reason)

    def put_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        """Append items to this process's shard in one write; a key already indexed keeps its
        first value. On a full disk they are not stored (one warning)."""
        with self._lock:
            lines = [_encode(key, value) for key, value in items if key not in self._index]
            if not lines:
                return
            shard = self._own_shard()
            try:
                self.path.mkdir(parents=True, exist_ok=True)
                with shard.open("ab") as handle:
                    offset = handle.tell()
                    handle.write(b"".join(lines))
            except OSError as error:
                log.warning("%s: %s; new values are not cached", self.path, error)
                return
            for line in lines:
                self._index_line(shard, offset, line)
                offset += len(line)
            self._scanned[shard] = offset

    def put(self, key: str, value: bytes) -> None:
        """Store one item; an existing key keeps its first value."""
        self.put_many([(key, value)])

    def close(self) -> None:
        """Nothing stays open between operations."""

    def integrity(self) -> dict[str, Any]:
        """Damaged lines skipped (no file is ever moved aside here)."""
        return {"corrupt_rows": self.corrupt_rows, "moved_aside": None}

    def __len__(self) -> int:
        with self._lock:
            self._scan()
            return len(self._index)


def _encode(key: str, value: bytes) -> bytes:
    record = {"k": key, "v": base64.b64encode(value).decode("ascii"), "d": row_digest(key, value)}
    return json.dumps(record, separators=(",", ":")).encode("ascii") + b"\n"


def _decode(line: bytes) -> tuple[str, bytes] | None:
    """``(key, value)`` of an intact line, ``None`` for a damaged one."""
    try:
        record = json.loads(line)
        key, value = record["k"], base64.b64decode(record["v"], validate=True)
    except (ValueError, KeyError, TypeError, binascii.Error):
        return None
    if not isinstance(key, str) or record.get("d") != row_digest(key, value):
        return None
    return key, value
