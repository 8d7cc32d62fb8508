"""Errors that tell a user exactly which file, and which record in it, is wrong or missing."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

FETCH_HINT = "run `make data` (or point MEMBENCH_DATA at a folder that has it)"
#: Characters no record id may hold: control characters (NUL included) and lone surrogates.
_UNPRINTABLE_ID = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")


class DatasetError(ValueError):
    """A dataset file exists but one of its records cannot be read as the format promises."""

    def __init__(self, path: Path | str, record: str | int | None, message: str) -> None:
        shown = repr(record) if _UNPRINTABLE_ID.search(str(record)) else record
        where = f"{path}" if record is None else f"{path}: record {shown}"
        super().__init__(f"{where}: {message}")
        self.path = Path(path)
        self.record = record


class DataMissingError(FileNotFoundError):
    """A dataset file is absent; the message names the path looked at and the fetch command."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(f"dataset file not found: {path}; {FETCH_HINT}")
        self.path = Path(path)


def checked_id(path: Path | str, record: str | int | None, field: str, value: Any) -> str:
    """``value`` as a record's id: a non-empty string without control characters or lone surrogates
    (ids name results, log lines and cache files); anything else is a :class:`DatasetError` naming
    the record."""
    if not isinstance(value, str) or not value:
        raise DatasetError(
            path, record, f"field {field!r}: expected a non-empty string, got {value!r:.60}"
        )
    if (bad := _UNPRINTABLE_ID.search(value)) is not None:
        raise DatasetError(
            path, record, f"field {field!r}: {value!r:.60} holds the character {bad.group()!r}"
        )
    return value


def text_field(
    path: Path | str, record: str, mapping: Any, key: str, *, numbers: bool = False
) -> str:
    """``mapping[key]`` as text: a string (or, with ``numbers``, a number), never ``null`` or a
    container read as ``"None"``; else a :class:`DatasetError` naming file, record and field."""
    if not isinstance(mapping, dict) or key not in mapping:
        raise DatasetError(path, record, f"missing field {key!r}")
    value = mapping[key]
    kinds = (str, int, float) if numbers else (str,)
    if isinstance(value, bool) or not isinstance(value, kinds):
        expected = "a string or a number" if numbers else "a string"
        raise DatasetError(path, record, f"field {key!r}: expected {expected}, got {value!r:.60}")
    return str(value)
