"""A predictions file as the QA scorers read it: one question per line, by id, its text fields
checked, and the category whose gold answer a line may give as ``adversarial_answer``.

Shared by the lexical scorer (:mod:`benchmarks.metrics.qa`) and the judged one
(:mod:`benchmarks.metrics.judged_answers`), and below both: ``qa``'s command line hands
``--judge`` to ``judged_answers``, so ``judged_answers`` must not import ``qa``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.metrics.jsonl import InputError, read_jsonl, require

#: LoCoMo's category 5, whose lines may carry the dataset's ``adversarial_answer``.
ADVERSARIAL = "adversarial"


def text_field(record: dict[str, Any], key: str, path: Path, line: int) -> str:
    """A string field; numbers (int answers in the data) are ``str()``-ed, anything else is an
    :class:`InputError` naming the file and line (the judged reader's fields too)."""
    value = require(record, key, path, line)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InputError(path, line, f"{key!r} must be a string or a number, got {value!r}")
    return str(value)


def read_lines_by_id(path: Path) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """``(line, question id, record)`` per line of a predictions file; the id is ``id``, or
    ``question_id`` as a run's own ``predictions.jsonl`` names it.

    Raises: InputError: a malformed line, a missing id, or an id that repeats an earlier line's."""
    seen: dict[str, int] = {}
    for line, record in read_jsonl(path):
        question_id = text_field(record, "question_id" if "id" not in record else "id", path, line)
        if question_id in seen:
            raise InputError(path, line, f"id {question_id!r} repeats line {seen[question_id]}")
        seen[question_id] = line
        yield line, question_id, record
