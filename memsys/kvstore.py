"""A small SQLite key-value store that several processes of one sweep can share.

Both caches (LLM responses, sentence embeddings) need the same thing: durable get/put by a
content hash, safe when Hydra multirun starts several workers on one file. SQLite in WAL mode
gives concurrent readers and serialized writers without a server; ``INSERT OR IGNORE`` makes a
race between two writers of the same key harmless (both computed the same value).

WAL needs a local filesystem (not NFS): on a cluster, put the file on node-local or shared
storage that supports POSIX locks.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

#: How long a writer waits for another process's transaction before giving up.
BUSY_TIMEOUT_S = 60.0
#: SQLite's default limit on host parameters in one statement is 999 on old builds.
_MAX_PARAMS = 900


class SQLiteKV:
    """Durable ``str -> bytes`` mapping in one table of one SQLite file.

    One connection per process, opened lazily, so an instance created before ``fork`` (for
    example by a multiprocessing pool) opens its own connection in the child instead of sharing
    the parent's. Threads of one process share the connection under a lock.
    """

    def __init__(self, path: str | os.PathLike[str], table: str = "kv") -> None:
        if not table.isidentifier():
            raise ValueError(f"table name must be an identifier, got {table!r}")
        self.path = Path(path)
        self.table = table
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._pid: int | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._connection is not None and self._pid == os.getpid():
            return self._connection
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_S, check_same_thread=False, isolation_level=None
        )
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.execute(
            f"CREATE TABLE IF NOT EXISTS {self.table} "
            "(key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID"
        )
        self._connection, self._pid = connection, os.getpid()
        return connection

    def get(self, key: str) -> bytes | None:
        """The stored value, or ``None``."""
        with self._lock:
            row = (
                self._connect()
                .execute(f"SELECT value FROM {self.table} WHERE key = ?", (key,))
                .fetchone()
            )
        return None if row is None else bytes(row[0])

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """Stored values of those ``keys`` that are present."""
        found: dict[str, bytes] = {}
        with self._lock:
            connection = self._connect()
            for start in range(0, len(keys), _MAX_PARAMS):
                chunk = keys[start : start + _MAX_PARAMS]
                marks = ",".join("?" * len(chunk))
                rows = connection.execute(
                    f"SELECT key, value FROM {self.table} WHERE key IN ({marks})", chunk
                )
                found.update((key, bytes(value)) for key, value in rows)
        return found

    def put_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        """Store items in one transaction; an existing key keeps its first value."""
        rows = list(items)
        if not rows:
            return
        with self._lock:
            connection = self._connect()
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.executemany(
                    f"INSERT OR IGNORE INTO {self.table} (key, value) VALUES (?, ?)", rows
                )
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

    def put(self, key: str, value: bytes) -> None:
        """Store one item; an existing key keeps its first value."""
        self.put_many([(key, value)])

    def __len__(self) -> int:
        with self._lock:
            return self._connect().execute(f"SELECT COUNT(*) FROM {self.table}").fetchone()[0]
