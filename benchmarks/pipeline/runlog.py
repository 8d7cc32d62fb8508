"""Append-only JSONL of per-item results (questions, dialogues) that survives ``kill -9``.

Each record is one fsynced ``write`` of a full line; opening the log drops a partial last line,
so a resumed run loses and duplicates nothing. A failed write is cut back off and raised as
:class:`ResultsWriteError`; a complete line that is not a record is :class:`DamagedLogError`. A
``retryable`` record is superseded by a later one for its id (:func:`latest_records`); stray
and duplicate ids are refused by :meth:`RecordLog.check_ids` (docs/running.md)."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from benchmarks.data.digests import recorded_digests
from benchmarks.data.paths import shown_path
from memsys.files import replace_file, write_all

#: A run's question ids, written when it finishes: the rows its log may hold.
QUESTIONS_FILE = "questions.json"


def read_question_set(run_dir: Path) -> list[str] | None:
    """The question ids a finished invocation of the run wrote to :data:`QUESTIONS_FILE`, or
    None where none has (an older run, or one never finished)."""
    path = run_dir / QUESTIONS_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


class RunInProgressError(RuntimeError):
    """Another process is writing the same run directory."""


class ResultsWriteError(RuntimeError):
    """A run's file could not be written (mostly a full disk); what is logged stays whole, so a
    rerun resumes."""

    def __init__(self, path: Path, cause: OSError) -> None:
        self.path = path
        remedy = "fix that"
        if cause.errno in (errno.ENOSPC, errno.EDQUOT):
            remedy = "free space"
        elif cause.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            remedy = "make its folder writable (or set results_dir=... to a writable folder)"
        super().__init__(
            f"cannot write {shown_path(path)}: {cause.strerror or cause}; {remedy} and rerun: "
            "the records already written are kept and the run resumes"
        )


_START_OVER = ", or delete the file to start the run over"
#: What to do about a damaged line of a log keyed by each key (and what deleting it undoes).
_REMEDY = {
    "question_id": f"delete that line to ask its question again{_START_OVER}",
    "id": f"delete that line to segment its dialogue again{_START_OVER}",
    "started": "delete that line (which forgets that invocation's cost) and rerun",
}


class DamagedLogError(ValueError):
    """A complete line of a run log that is not a record: damage, not a write cut by a kill
    (that leaves a partial last line, which opening the log drops)."""

    def __init__(self, path: Path, line: int, key: str) -> None:
        self.path, self.line = path, line
        remedy = _REMEDY.get(key, f"delete that line to redo its record{_START_OVER}")
        super().__init__(
            f"{shown_path(path)}:{line}: corrupt record, not a JSON object with a {key!r} "
            f"(damaged?): {remedy}"
        )


class ForeignRowsError(ValueError):
    """Lines of a run's log that the run does not own: a question outside its question set, or
    a second record for a question already settled. One line per row (file, line, why)."""

    def __init__(self, path: Path, problems: Sequence[tuple[int, str]]) -> None:
        self.path, self.problems = path, list(problems)
        shown = shown_path(path)
        lines = [f"{shown}:{line}: {why}" for line, why in problems[:MAX_NAMED_ROWS]]
        if len(problems) > MAX_NAMED_ROWS:
            lines.append(f"{shown}: {len(problems) - MAX_NAMED_ROWS} more such lines")
        super().__init__(
            "\n".join(lines) + "\nthe run refuses rows that are not its own (run folders merged "
            "or copied?): delete those lines, or move the file away to start the run over"
        )


#: Rows a :class:`ForeignRowsError` names one by one (the rest are counted).
MAX_NAMED_ROWS = 10


@contextmanager
def exclusive(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir`` for one process: two runs of one config would both answer the pending
    questions and log them twice. The lock dies with its process, ``kill -9`` included."""
    try:
        handle = (run_dir / ".lock").open("a")
    except OSError as error:
        raise ResultsWriteError(run_dir / ".lock", error) from error
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as error:
        handle.close()
        raise RunInProgressError(
            f"{run_dir} is being written by another process running the same config; wait for "
            "it to finish (or stop it and run again: the run resumes)"
        ) from error
    try:
        yield
    finally:
        handle.close()


class RecordLog:
    """The records of one run, keyed by the field ``key`` (``question_id``, a dialogue ``id``);
    ``retryable`` picks the records a later append may supersede."""

    def __init__(
        self,
        path: Path,
        key: str = "question_id",
        retryable: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        self.path = path
        self.key = key
        self.retryable = retryable or (lambda record: False)
        self.superseded = 0  # records this instance replaced by appending another for the id
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.repaired_bytes = _drop_partial_tail(path)
        except OSError as error:
            raise ResultsWriteError(path, error) from error
        self._records: dict[str, dict[str, Any]] = {}
        #: The line of each id's record, and the lines that repeat an id already settled.
        self._lines: dict[str, int] = {}
        self.duplicates: list[tuple[int, str]] = []
        self._line_count = 0
        if path.exists():
            for self._line_count, record in enumerate(_read_lines(path, key), start=1):
                self._load(self._line_count, record)

    def _load(self, line: int, record: dict[str, Any]) -> None:
        """Take a logged record: the latest for its id, unless the one before is settled (not
        retryable): then it is a duplicate, noted and left out."""
        item_id = str(record[self.key])
        logged = self._records.get(item_id)
        if logged is not None and not self.retryable(logged):
            first = self._lines[item_id]
            self.duplicates.append((line, f"{self.key} {item_id!r} is settled on line {first}"))
            return
        self._records[item_id] = record
        self._lines[item_id] = line

    def check_ids(self, ids: Iterable[str], owner: str) -> None:
        """Refuse the log unless its records are for ``ids`` only, one settled record each: a
        :class:`ForeignRowsError` naming every line that is not."""
        known = set(ids)
        foreign = [
            (line, f"{self.key} {item_id!r} is not in {owner}")
            for item_id, line in self._lines.items()
            if item_id not in known
        ]
        problems = sorted([*foreign, *self.duplicates])
        if problems:
            raise ForeignRowsError(self.path, problems)

    def __contains__(self, item_id: str) -> bool:
        return item_id in self._records

    def __getitem__(self, item_id: str) -> dict[str, Any]:
        return self._records[item_id]

    def __len__(self) -> int:
        """Ids with a record (a superseded one counted once)."""
        return len(self._records)

    def count_on_disk(self) -> int:
        """Ids with a record in the file as it now stands: :meth:`__len__`, unless a signal
        landed between a line's write and its note here (its handler raises at any bytecode),
        so that an interrupted invocation still counts every question it logged."""
        try:
            return len({str(record[self.key]) for record in _read_lines(self.path, self.key)})
        except (OSError, DamagedLogError):
            return len(self)

    def done(self) -> set[str]:
        """Ids that need no more work: they have a record, and it is not retryable."""
        return {key for key, record in self._records.items() if not self.retryable(record)}

    def records(self) -> list[dict[str, Any]]:
        """Each id's latest record, in the order the ids were first logged."""
        return list(self._records.values())

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        """Write records durably; a record for an id already logged is an error unless the
        logged one is retryable (the new one then supersedes it). A failed write raises
        :class:`ResultsWriteError`, the records before it logged and kept."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as error:
            raise ResultsWriteError(self.path, error) from error
        try:
            for record in records:
                item_id = str(record[self.key])
                logged = self._records.get(item_id)
                if logged is not None and not self.retryable(logged):
                    raise ValueError(f"{self.path}: {self.key} {item_id} is already logged")
                line = json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"
                _append_line(fd, self.path, line.encode("utf-8"))
                self.superseded += logged is not None
                self._records[item_id] = record
                self._line_count += 1
                self._lines[item_id] = self._line_count
        finally:
            os.close(fd)


def log_invocation(invocations: RecordLog, invocation: dict[str, Any], unwinding: bool) -> None:
    """Append an invocation's cost line; a refused line is printed on stderr, and raised only if no
    other error is ``unwinding`` the run (which it would bury)."""
    try:
        invocations.append([invocation])
    except ResultsWriteError:
        line = json.dumps(invocation, sort_keys=True)
        shown = shown_path(invocations.path)
        print(f"cost of this invocation, not logged to {shown}: {line}", file=sys.stderr)
        if not unwinding:
            raise


def _append_line(fd: int, path: Path, line: bytes) -> None:
    """Write ``line`` whole and fsync it. On failure cut the file back to where the line began,
    so that it holds whole records only, and raise :class:`ResultsWriteError` naming ``path``."""
    start = os.lseek(fd, 0, os.SEEK_END)
    try:
        write_all(fd, line)
        os.fsync(fd)
    except OSError as error:
        with suppress(OSError):  # else the next open drops the partial line
            os.ftruncate(fd, start)
        raise ResultsWriteError(path, error) from error


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically, so a full disk or a kill leaves the old file; a
    failure raises :class:`ResultsWriteError`."""
    try:
        replace_file(path, text.encode("utf-8"))
    except OSError as error:
        raise ResultsWriteError(path, error) from error


def _read_lines(path: Path, key: str) -> Iterator[dict[str, Any]]:
    """The records of ``path``; a line that is not a JSON object with ``key`` is damage, an
    error naming the line (:class:`DamagedLogError`)."""
    with path.open("rb") as handle:
        for line_number, line in enumerate(handle, start=1):
            try:
                record = json.loads(line.decode("utf-8"))
            except ValueError as error:  # JSONDecodeError and UnicodeDecodeError
                raise DamagedLogError(path, line_number, key) from error
            if not isinstance(record, dict) or key not in record:
                raise DamagedLogError(path, line_number, key)
            yield record


def latest_records(records: Iterable[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    """Each ``key``'s last record, in the order the keys first appear: a retried question
    keeps its place (and so its place in a bootstrap) with its new record."""
    latest: dict[str, dict[str, Any]] = {}
    for record in records:
        latest[str(record[key])] = record
    return latest


#: The work counters an invocation logs, and the keys of each that add up across invocations.
WORK_COUNTS = {
    "embedding": ("requested", "encoded", "encode_seconds"),
    "parsing": ("requested", "parsed", "parse_seconds"),
}


def summarize_invocations(invocations: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A run's cost over its logged invocations (``invocations.jsonl``): wall time and work summed,
    the highest peak memory and worker count, the dataset digests last recorded; a kind of work some
    invocation did not log is left out rather than summed over the others."""
    return {
        "count": len(invocations),
        "questions": sum(entry["questions"] for entry in invocations),
        "wall_s": round(sum(entry["wall_s"] for entry in invocations), 1),
        "peak_rss_mb": max((entry["peak_rss_mb"] for entry in invocations), default=None),
        "construction_s": round(sum(entry["construction_s"] for entry in invocations), 1),
        "workers": max((entry.get("workers", 1) for entry in invocations), default=1),
        "data": recorded_digests(invocations),
        **{
            kind: {key: round(sum(entry[kind][key] for entry in invocations), 3) for key in keys}
            for kind, keys in WORK_COUNTS.items()
            if all(kind in entry for entry in invocations)
        },
    }


def _drop_partial_tail(path: Path) -> int:
    """Truncate ``path`` after its last newline; return how many bytes were dropped."""
    if not path.exists():
        return 0
    with path.open("rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        position = size
        while position > 0:
            step = min(4096, position)
            handle.seek(position - step)
            chunk = handle.read(step)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                end = position - step + newline + 1
                break
            position -= step
        else:
            end = 0
        if end < size:
            handle.truncate(end)
        return size - end
