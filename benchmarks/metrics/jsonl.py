"""Line-numbered JSONL reading for the scorer CLIs.

A prediction file with one bad line should fail with the file and line to fix, not with a
``KeyError`` from deep inside a scorer; every CLI reads its inputs through here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class InputError(ValueError):
    """A scorer input file has a line that cannot be used; the message says where and why."""

    def __init__(self, path: Path | str, line: int | None, message: str) -> None:
        where = f"{path}" if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {message}")
        self.path = Path(path)
        self.line = line


def read_jsonl(path: Path | str) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-blank line, 1-based.

    Args:
        path: a JSONL file, one JSON object per line.

    Returns:
        An iterator of line numbers and the decoded objects.

    Raises:
        InputError: a line is not valid JSON or not a JSON object.

    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
    ...     _ = f.write('{"id": "q1"}\\n\\n{"id": "q2"}\\n')
    >>> list(read_jsonl(f.name))
    [(1, {'id': 'q1'}), (3, {'id': 'q2'})]
    >>> os.remove(f.name)
    """
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(path, number, f"not valid JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise InputError(path, number, "expected a JSON object")
            yield number, record


def require(record: dict[str, Any], key: str, path: Path | str, line: int) -> Any:
    """``record[key]``, or an :class:`InputError` that names the file, line and missing key.

    >>> require({"id": "q1"}, "id", "pred.jsonl", 1)
    'q1'
    >>> require({"id": "q1"}, "answer", "pred.jsonl", 7)
    Traceback (most recent call last):
    ...
    benchmarks.metrics.jsonl.InputError: pred.jsonl:7: missing key 'answer'
    """
    if key not in record:
        raise InputError(path, line, f"missing key {key!r}")
    return record[key]
