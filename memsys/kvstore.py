"""A small SQLite key-value store that several processes of one sweep can share.

Both caches (LLM responses, sentence embeddings) need the same thing: durable get/put by a
content hash, safe when Hydra multirun starts several workers on one file. SQLite in WAL mode
gives concurrent readers and serialized writers without a server; ``INSERT OR IGNORE`` makes a
race between two writers of the same key harmless (both computed the same value).

Caches hold hours of LLM replies, so a damaged one is repaired, never trusted and never fatal:
a file that is not an SQLite database is moved aside (``<name>.corrupt``) and a fresh one
started; every row carries a digest of its key and value, and a row that fails it is deleted and
read as a miss, so the caller recomputes it. Rows written before digests existed (``NULL``) are
still served; callers check that values decode and :meth:`SQLiteKV.discard` those that do not.

WAL needs a local filesystem (not NFS): on a cluster, put the file on node-local or shared
storage that supports POSIX locks.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: How long a writer waits for another process's transaction before giving up.
BUSY_TIMEOUT_S = 60.0
#: SQLite's default limit on host parameters in one statement is 999 on old builds.
_MAX_PARAMS = 900


class SQLiteKV:
    """Durable ``str -> bytes`` mapping in one table of one SQLite file.

    One connection per process, opened lazily, so an instance created before ``fork`` (for
    example by a multiprocessing pool) opens its own connection in the child instead of sharing
    the parent's. Threads of one process share the connection under a lock. ``corrupt_rows``
    counts rows dropped as corrupt by this instance; ``moved_aside`` is where an unreadable file
    was moved at open (``None`` if it was fine).
    """

    def __init__(self, path: str | os.PathLike[str], table: str = "kv") -> None:
        if not table.isidentifier():
            raise ValueError(f"table name must be an identifier, got {table!r}")
        self.path = Path(path)
        self.table = table
        self.corrupt_rows = 0
        self.moved_aside: Path | None = None
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._pid: int | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._connection is not None and self._pid == os.getpid():
            return self._connection
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            connection = self._open()
        except sqlite3.DatabaseError as error:
            # Plain DatabaseError is SQLITE_NOTADB or SQLITE_CORRUPT; its subclasses (locked,
            # busy, I/O, ...) say nothing about the file's content and are raised as they are.
            if type(error) is not sqlite3.DatabaseError:
                raise
            self.moved_aside = _move_aside(self.path)
            log.warning(
                "%s is not a readable SQLite database (%s): moved it to %s, starting a fresh one",
                self.path,
                error,
                self.moved_aside,
            )
            connection = self._open()
        self._connection, self._pid = connection, os.getpid()
        return connection

    def _open(self) -> sqlite3.Connection:
        """Connect, and create the table or add the ``digest`` column to an older one."""
        connection = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_S, check_same_thread=False, isolation_level=None
        )
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            if "digest" not in self._columns(connection):
                connection.execute("BEGIN IMMEDIATE")  # one process migrates, the others wait
                connection.execute(
                    f"CREATE TABLE IF NOT EXISTS {self.table} "
                    "(key TEXT PRIMARY KEY, value BLOB NOT NULL, digest TEXT) WITHOUT ROWID"
                )
                if "digest" not in self._columns(connection):
                    connection.execute(f"ALTER TABLE {self.table} ADD COLUMN digest TEXT")
                connection.execute("COMMIT")
        except BaseException:
            connection.close()
            raise
        return connection

    def _columns(self, connection: sqlite3.Connection) -> set[str]:
        return {row[1] for row in connection.execute(f"PRAGMA table_info({self.table})")}

    def get(self, key: str) -> bytes | None:
        """The stored value, or ``None`` (also for a row that failed its digest)."""
        return self.get_many([key]).get(key)

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """Stored values of those ``keys`` that are present and intact."""
        found: dict[str, bytes] = {}
        corrupt: list[tuple[str, Any]] = []
        with self._lock:
            connection = self._connect()
            for start in range(0, len(keys), _MAX_PARAMS):
                chunk = keys[start : start + _MAX_PARAMS]
                marks = ",".join("?" * len(chunk))
                rows = connection.execute(
                    f"SELECT key, value, digest FROM {self.table} WHERE key IN ({marks})", chunk
                )
                for key, value, digest in rows:
                    if isinstance(value, bytes) and digest in (None, _digest(key, value)):
                        found[key] = value
                    else:
                        corrupt.append((key, value))
            self._drop(connection, corrupt, "failed its checksum")
        return found

    def discard(self, key: str, value: bytes, reason: str) -> None:
        """Delete a row whose ``value`` the caller could not decode (if it still holds it)."""
        with self._lock:
            self._drop(self._connect(), [(key, value)], reason)

    def _drop(
        self, connection: sqlite3.Connection, rows: list[tuple[str, Any]], reason: str
    ) -> None:
        """Delete corrupt rows, unless another writer has replaced them meanwhile."""
        if not rows:
            return
        connection.executemany(f"DELETE FROM {self.table} WHERE key = ? AND value IS ?", rows)
        self.corrupt_rows += len(rows)
        log.warning(
            "%s: dropped %d corrupt row(s) (%s), e.g. key %s; recomputing",
            self.path,
            len(rows),
            reason,
            rows[0][0],
        )

    def put_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        """Store items in one transaction; an existing key keeps its first value."""
        rows = [(key, value, _digest(key, value)) for key, value in items]
        if not rows:
            return
        with self._lock:
            connection = self._connect()
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.executemany(
                    f"INSERT OR IGNORE INTO {self.table} (key, value, digest) VALUES (?, ?, ?)",
                    rows,
                )
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

    def put(self, key: str, value: bytes) -> None:
        """Store one item; an existing key keeps its first value."""
        self.put_many([(key, value)])

    def close(self) -> None:
        """Close this process's connection (the last one to close folds the WAL into the file);
        a later call reopens it."""
        with self._lock:
            if self._connection is not None and self._pid == os.getpid():
                self._connection.close()
            self._connection = None

    def integrity(self) -> dict[str, Any]:
        """What this instance found damaged and repaired, for a run's summary."""
        return {
            "corrupt_rows": self.corrupt_rows,
            "moved_aside": None if self.moved_aside is None else str(self.moved_aside),
        }

    def __len__(self) -> int:
        with self._lock:
            return self._connect().execute(f"SELECT COUNT(*) FROM {self.table}").fetchone()[0]


def content_key(namespace: str, text: str) -> str:
    """The key of ``text`` under ``namespace`` (a model, a pipeline, a compressor's settings):
    sha256 of both, so a cache holds each text once per namespace.

    >>> content_key("all-MiniLM-L6-v2", "hi")[:12]
    '77f6df7678df'
    """
    return hashlib.sha256(f"{namespace}\x00{text}".encode()).hexdigest()


def _digest(key: str, value: bytes) -> str:
    """Checksum of one row (against damage, not tampering: it sits beside the value)."""
    return hashlib.blake2b(key.encode() + b"\0" + value, digest_size=16).hexdigest()


def _move_aside(path: Path) -> Path:
    """Rename an unreadable database (and its WAL files) to the first free ``.corrupt`` name."""
    target = path.with_name(f"{path.name}.corrupt")
    number = 1
    while target.exists():
        target = path.with_name(f"{path.name}.{number}.corrupt")
        number += 1
    path.replace(target)
    for suffix in ("-wal", "-shm"):
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            companion.replace(target.with_name(target.name + suffix))
    return target


class OptionalStore:
    """Base of the caches that may run without a file (``_store`` is ``None`` then)."""

    _store: SQLiteKV | None

    def close(self) -> None:
        """Close the SQLite connection (reopened on next use)."""
        if self._store is not None:
            self._store.close()

    def integrity(self) -> dict[str, Any]:
        """Corrupt rows dropped and a file moved aside, if any (see :mod:`memsys.kvstore`)."""
        if self._store is None:
            return {"corrupt_rows": 0, "moved_aside": None}
        return self._store.integrity()
