"""A cache file's switch to WAL mode waits out another process's lock instead of failing: two
workers opening a new cache at once (found on a cold ``workers=2`` run: a HingeMem worker died
with "database is locked" on the parse cache)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from memsys.kvstore import switch_to_wal


class Contended:
    """A connection whose switch to WAL finds the file locked ``times`` times."""

    def __init__(self, times: int, error: str = "database is locked") -> None:
        self.times, self.error, self.mode, self.switches = times, error, "delete", 0

    def execute(self, sql: str) -> Contended:
        if sql == "PRAGMA journal_mode=WAL":
            self.switches += 1
            if self.switches <= self.times:
                raise sqlite3.OperationalError(self.error)
            self.mode = "wal"
        return self

    def fetchone(self) -> tuple[str]:
        return (self.mode,)


def test_a_locked_switch_is_tried_again_until_it_succeeds() -> None:
    connection = Contended(times=3)
    switch_to_wal(connection, timeout_s=5.0)  # type: ignore[arg-type]
    assert (connection.switches, connection.mode) == (4, "wal")


def test_a_file_already_in_wal_mode_is_not_switched() -> None:
    connection = Contended(times=0)
    connection.mode = "wal"
    switch_to_wal(connection)  # type: ignore[arg-type]
    assert connection.switches == 0


def test_a_lock_held_past_the_timeout_or_another_error_is_raised() -> None:
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        switch_to_wal(Contended(times=10**6), timeout_s=0.2)  # type: ignore[arg-type]
    assert 0.2 <= time.monotonic() - started < 2.0
    other = Contended(times=1, error="disk I/O error")
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        switch_to_wal(other, timeout_s=5.0)  # type: ignore[arg-type]
    assert other.switches == 1


def test_a_real_file_switches_once_the_other_connection_lets_go(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE x (y)")
    holder.execute("BEGIN EXCLUSIVE")
    waiting = sqlite3.connect(path, timeout=0.05, isolation_level=None)
    released = time.monotonic() + 0.3

    def release() -> None:
        time.sleep(max(0.0, released - time.monotonic()))
        holder.execute("COMMIT")

    threading.Thread(target=release).start()
    switch_to_wal(waiting, timeout_s=5.0)
    assert waiting.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert time.monotonic() >= released
