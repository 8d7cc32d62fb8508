"""A small SQLite key-value store that several processes of one sweep can share.

Both caches (LLM responses, sentence embeddings) need the same thing: durable get/put by a
content hash, safe when Hydra multirun starts several workers on one file. SQLite in WAL mode
gives concurrent readers and serialized writers without a server; ``INSERT OR IGNORE`` makes a
race between two writers of the same key harmless (both computed the same value).

Caches hold hours of LLM replies, so a damaged one is repaired, never trusted and never fatal.
A file SQLite reports damaged (not a database, a malformed page, a TEXT value that is not UTF-8),
whenever that shows (at open, read, count, write or delete), is quarantined: every row that can
still be read and passes its digest is copied into a fresh file (built as ``<name>.salvage``), the
damaged one is moved aside (``<name>.corrupt``) and the fresh one put in its place; only
unreadable rows are lost, and the operation then runs on the fresh file. Processes sharing the
file take turns at this under a lock (``<name>.lock``); one that finds the file already replaced
just reopens it, as every process does before its next operation. Every row carries a digest of its key and value, and a
row that fails it is deleted and read as a miss, so the caller recomputes it. Rows written before
digests existed (``NULL``) are still served; callers check that values decode and
:meth:`SQLiteKV.discard` those that do not. A full disk is no error either: the values are
not cached (one warning) and the run goes on. Other errors of the file (a read-only or unwritable
folder, an I/O error, a lock held past the busy timeout) are raised as :class:`CacheError`, which
names the file and what to do.

WAL needs a local filesystem (not NFS): for jobs on several machines sharing one folder, the
``shards`` layout (:mod:`memsys.kvshards`) gives each process a file of its own.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

log = logging.getLogger(__name__)

#: How long a writer waits for another process's transaction before giving up.
BUSY_TIMEOUT_S = 60.0
#: Pause between tries of a journal-mode switch that found the file locked.
WAL_RETRY_S = 0.05
#: SQLite's default limit on host parameters in one statement is 999 on old builds.
_MAX_PARAMS = 900
#: Rows copied per transaction when salvaging a damaged file.
_SALVAGE_BATCH = 500
#: Bytes of a key the salvage scan's skip search works on (the keys here are 64 hex digits).
_KEY_WIDTH = 64

T = TypeVar("T")


def switch_to_wal(connection: sqlite3.Connection, timeout_s: float = BUSY_TIMEOUT_S) -> None:
    """Put the file in WAL mode, trying again while another process holds it.

    Two processes opening a new file at once both ask for the switch; each holds a shared lock
    and wants an exclusive one, and SQLite answers one of them "database is locked" at once,
    without its busy timeout (it would deadlock otherwise). Found under load: a worker of a cold
    ``workers=2`` run died so on the parse cache. A file already in WAL mode needs no switch.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() != "wal":
                connection.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(WAL_RETRY_S)


class CacheError(RuntimeError):
    """A cache file cannot be opened or written (not damage, which is repaired): the message
    names the file and what to do."""

    def __init__(self, path: Path, cause: BaseException) -> None:
        self.path = path
        super().__init__(
            f"cache file {path}: {cause}; check that {path.parent} is writable and its disk has "
            "room (or set cache_dir=..., MEMSYS_CACHE_DIR, to another folder) and rerun: the "
            "run resumes"
        )


#: ``(device, inode)`` of a file: tells whether another process has replaced it.
Identity = tuple[int, int]


class SQLiteKV:
    """Durable ``str -> bytes`` mapping in one table of one SQLite file.

    One connection per process, opened lazily, so an instance created before ``fork`` (for
    example by a multiprocessing pool) opens its own connection in the child instead of sharing
    the parent's. Threads of one process share the connection under a lock. ``corrupt_rows``
    counts rows dropped as corrupt by this instance; ``moved_aside`` is where it last moved a
    damaged file (``None`` if it found none), ``salvaged_rows`` how many rows it copied from
    such files into fresh ones.
    """

    def __init__(self, path: str | os.PathLike[str], table: str = "kv") -> None:
        if not table.isidentifier():
            raise ValueError(f"table name must be an identifier, got {table!r}")
        self.path = Path(path)
        self.table = table
        self.corrupt_rows = 0
        self.moved_aside: Path | None = None
        self.salvaged_rows = 0
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._pid: int | None = None
        self._identity: Identity | None = None
        self._warned_full = False

    def _connect(self) -> sqlite3.Connection:
        """This process's connection, reopened when another process has replaced the file."""
        if self._connection is not None and self._pid == os.getpid():
            if _identity(self.path) == self._identity:
                return self._connection
            self._disconnect()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Taken before opening: a file replaced meanwhile then reads as changed and is reopened.
        identity = _identity(self.path)
        try:
            connection = self._open(self.path)
        except sqlite3.DatabaseError as error:
            if not _is_damage(error):
                raise
            self._quarantine(identity, error)
            identity = _identity(self.path)
            connection = self._open(self.path)
        self._connection, self._pid = connection, os.getpid()
        self._identity = identity or _identity(self.path)
        return connection

    def _disconnect(self) -> None:
        if self._connection is not None and self._pid == os.getpid():
            self._connection.close()
        self._connection = None

    def _run(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """``operation`` on this process's connection; if it finds the file damaged, once more
        on the fresh file that replaces it."""
        with self._lock:
            try:
                try:
                    return operation(self._connect())
                except sqlite3.DatabaseError as error:
                    if not _is_damage(error):
                        raise
                    self._quarantine(self._identity, error)
                return operation(self._connect())
            except sqlite3.OperationalError as error:
                if _is_full(error) or _is_damage(error):
                    raise
                raise CacheError(self.path, error) from error
            except OSError as error:  # its folder cannot be made
                raise CacheError(self.path, error) from error

    def _quarantine(self, damaged: Identity | None, error: sqlite3.DatabaseError) -> None:
        """Move the damaged file aside and salvage its readable rows into a fresh one, unless
        another process has already replaced it (then the next connect opens its fresh file)."""
        self._disconnect()
        with _exclusive(self.path.with_name(f"{self.path.name}.lock")):
            if damaged is None or _identity(self.path) != damaged:
                return
            # Built under another name, so that no process ever opens a half-salvaged file.
            fresh = self.path.with_name(f"{self.path.name}.salvage")
            _remove_database(fresh)  # left by a salvage that was killed
            with closing(self._open(fresh)) as target:
                salvaged, dropped = _salvage(self.path, target, self.table)
            moved = _move_aside(self.path)
            fresh.replace(self.path)
        self.moved_aside = moved
        self.salvaged_rows += salvaged
        self.corrupt_rows += dropped
        log.warning(
            "%s is damaged (%s): moved it to %s; a fresh file holds its %d readable row(s) "
            "(%d corrupt one(s) dropped)",
            self.path,
            error,
            moved,
            salvaged,
            dropped,
        )

    def _open(self, path: Path) -> sqlite3.Connection:
        """Connect, and create the table or add the ``digest`` column to an older one."""
        connection = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_S, check_same_thread=False, isolation_level=None
        )
        try:
            switch_to_wal(connection)
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
        return self._run(lambda connection: self._read(connection, keys))

    def _read(self, connection: sqlite3.Connection, keys: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        corrupt: list[tuple[str, Any]] = []
        for start in range(0, len(keys), _MAX_PARAMS):
            chunk = keys[start : start + _MAX_PARAMS]
            marks = ",".join("?" * len(chunk))
            rows = connection.execute(
                f"SELECT key, value, digest FROM {self.table} WHERE key IN ({marks})", chunk
            )
            for key, value, digest in rows:
                if isinstance(value, bytes) and digest in (None, row_digest(key, value)):
                    found[key] = value
                else:
                    corrupt.append((key, value))
        self._drop(connection, corrupt, "failed its checksum")
        return found

    def discard(self, key: str, value: bytes, reason: str) -> None:
        """Delete a row whose ``value`` the caller could not decode (if it still holds it)."""
        self._run(lambda connection: self._drop(connection, [(key, value)], reason))

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
        """Store items in one transaction; an existing key keeps its first value. On a full
        disk they are not stored: a cache that cannot grow must not stop the run."""
        rows = [(key, value, row_digest(key, value)) for key, value in items]
        if not rows:
            return
        try:
            self._run(lambda connection: _insert(connection, self.table, rows))
        except sqlite3.OperationalError as error:
            if not _is_full(error):
                raise
            if not self._warned_full:
                self._warned_full = True
                log.warning("%s: %s; new values are not cached", self.path, error)

    def put(self, key: str, value: bytes) -> None:
        """Store one item; an existing key keeps its first value."""
        self.put_many([(key, value)])

    def close(self) -> None:
        """Close this process's connection (the last one to close folds the WAL into the file);
        a later call reopens it."""
        with self._lock:
            self._disconnect()

    def integrity(self) -> dict[str, Any]:
        """What this instance found damaged and repaired, for a run's summary;
        ``salvaged_rows`` only when it moved a file aside."""
        if self.moved_aside is None:
            return {"corrupt_rows": self.corrupt_rows, "moved_aside": None}
        return {
            "corrupt_rows": self.corrupt_rows,
            "moved_aside": str(self.moved_aside),
            "salvaged_rows": self.salvaged_rows,
        }

    def __len__(self) -> int:
        count = f"SELECT COUNT(*) FROM {self.table}"
        return self._run(lambda connection: connection.execute(count).fetchone()[0])


def content_key(namespace: str, text: str) -> str:
    """The key of ``text`` under ``namespace`` (a model, a pipeline, a compressor's settings):
    sha256 of both, so a cache holds each text once per namespace.

    >>> content_key("all-MiniLM-L6-v2", "hi")[:12]
    '77f6df7678df'
    """
    return hashlib.sha256(f"{namespace}\x00{text}".encode()).hexdigest()


def row_digest(key: str, value: bytes) -> str:
    """Checksum of one row (against damage, not tampering: it sits beside the value)."""
    return hashlib.blake2b(key.encode() + b"\0" + value, digest_size=16).hexdigest()


def _is_damage(error: sqlite3.DatabaseError) -> bool:
    """Whether ``error`` is about the file's content: plain ``DatabaseError`` is SQLITE_CORRUPT
    or SQLITE_NOTADB (its subclasses, locked, busy, I/O, ..., are not), or a TEXT value that is
    not UTF-8."""
    return type(error) is sqlite3.DatabaseError or (
        isinstance(error, sqlite3.OperationalError) and "Could not decode to UTF-8" in str(error)
    )


def _is_full(error: sqlite3.OperationalError) -> bool:
    """SQLITE_FULL (its message: ``sqlite_errorcode`` needs Python 3.11)."""
    return "database or disk is full" in str(error)


def _identity(path: Path) -> Identity | None:
    try:
        status = path.stat()
    except FileNotFoundError:
        return None
    return status.st_dev, status.st_ino


@contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing), across processes."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield  # closing the file releases the lock


def _insert(connection: sqlite3.Connection, table: str, rows: list[tuple[str, bytes, Any]]) -> None:
    """``INSERT OR IGNORE`` ``(key, value, digest)`` rows in one transaction."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.executemany(
            f"INSERT OR IGNORE INTO {table} (key, value, digest) VALUES (?, ?, ?)", rows
        )
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:  # SQLite has already rolled back after some errors
            connection.execute("ROLLBACK")
        raise


def _salvage(source: Path, target: sqlite3.Connection, table: str) -> tuple[int, int]:
    """Copy the intact rows of the damaged file ``source`` into ``target``: how many were
    copied, and how many were read but dropped (key not UTF-8, digest not UTF-8 or failed)."""
    copied = dropped = 0
    batch: list[tuple[str, bytes, Any]] = []
    try:
        with closing(sqlite3.connect(source, timeout=BUSY_TIMEOUT_S)) as damaged:
            damaged.text_factory = bytes  # a damaged TEXT value must not stop the scan
            for raw in _readable_rows(damaged, table):
                row = _intact(raw)
                if row is None:
                    dropped += 1
                    continue
                batch.append(row)
                if len(batch) == _SALVAGE_BATCH:
                    _insert(target, table, batch)
                    copied, batch = copied + len(batch), []
        _insert(target, table, batch)
        copied += len(batch)
    except sqlite3.OperationalError as error:
        if not _is_full(error):
            raise
        log.warning("%s: %s; stopped salvaging after %d row(s)", source, error, copied)
    return copied, dropped


def _readable_rows(db: sqlite3.Connection, table: str) -> Iterator[tuple[Any, Any, Any]]:
    """Every row of ``table`` SQLite can still read, in key order: a scan that meets damage
    resumes past the damaged key range (see :func:`_resume_point`)."""
    try:
        columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
    except sqlite3.DatabaseError as error:
        if not _is_damage(error):
            raise
        return  # not a database: nothing can be found
    if b"key" not in columns:
        return  # the schema lost the table
    digest = "digest" if b"digest" in columns else "NULL"
    query = f"SELECT key, value, {digest} FROM {table} WHERE key >= CAST(? AS TEXT) ORDER BY key"
    start: bytes | None = b""
    while start is not None:
        last = start
        try:
            for row in db.execute(query, (start,)):
                if isinstance(row[0], bytes) and row[0] > last:
                    last = row[0]
                yield row
            return
        except sqlite3.DatabaseError as error:
            if not _is_damage(error):
                raise
            start = _resume_point(db, query, last)


def _resume_point(db: sqlite3.Connection, query: str, after: bytes) -> bytes | None:
    """The smallest key bound above ``after`` from which ``query`` reads again (``None``: none).

    Bounds are numbers of ``_KEY_WIDTH`` bytes: steps that double find one past the damage,
    then bisection finds the first bound past it, so that only the damaged range is skipped.
    """

    def readable(number: int) -> bool:
        try:
            db.execute(query, (number.to_bytes(_KEY_WIDTH, "big"),)).fetchone()
        except sqlite3.DatabaseError as error:
            if not _is_damage(error):
                raise
            return False
        return True

    base = int.from_bytes(after[:_KEY_WIDTH].ljust(_KEY_WIDTH, b"\0"), "big")
    top = 256**_KEY_WIDTH - 1
    step = 1
    while not readable(min(base + step, top)):
        if base + step >= top:
            return None
        step *= 2
    low, high = base + step // 2, min(base + step, top)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if readable(middle) else (middle, high)
    return high.to_bytes(_KEY_WIDTH, "big")


def _intact(row: tuple[Any, Any, Any]) -> tuple[str, bytes, str | None] | None:
    """A salvaged ``(key, value, digest)`` row as stored normally, or ``None`` if damaged."""
    key, value, digest = row
    try:
        key, digest = key.decode(), None if digest is None else digest.decode()
    except (AttributeError, UnicodeDecodeError):
        return None
    if not isinstance(value, bytes) or digest not in (None, row_digest(key, value)):
        return None
    return key, value, digest


def _remove_database(path: Path) -> None:
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
        path.with_name(name).unlink(missing_ok=True)


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


class KeyValueStore(Protocol):
    """What a cache needs of its store: :class:`SQLiteKV` on one machine,
    :class:`memsys.kvshards.ShardedKV` for a folder several machines share."""

    path: Path

    def get(self, key: str) -> bytes | None: ...

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]: ...

    def put(self, key: str, value: bytes) -> None: ...

    def put_many(self, items: Iterable[tuple[str, bytes]]) -> None: ...

    def discard(self, key: str, value: bytes, reason: str) -> None: ...

    def close(self) -> None: ...

    def integrity(self) -> dict[str, Any]: ...

    def __len__(self) -> int: ...


class OptionalStore:
    """Base of the caches that may run without a file (``_store`` is ``None`` then)."""

    _store: KeyValueStore | None

    def close(self) -> None:
        """Close the SQLite connection (reopened on next use)."""
        if self._store is not None:
            self._store.close()

    def integrity(self) -> dict[str, Any]:
        """Corrupt rows dropped and a damaged file moved aside, if any (see
        :mod:`memsys.kvstore`)."""
        if self._store is None:
            return {"corrupt_rows": 0, "moved_aside": None}
        return self._store.integrity()
