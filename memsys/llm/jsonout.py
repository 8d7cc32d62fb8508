"""Getting JSON out of LLM replies: extract, repair, validate, and count the failures.

Small models wrap JSON in code fences, add a sentence before or after it, or leave trailing
commas, even when asked for bare JSON (and not every server enforces a schema). The repairs
here are the ones that cannot change meaning; anything else counts as unrepairable, and the
counts are reported with a run so that a method's "LLM extraction" that silently fell back on
half its inputs is visible.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import jsonschema

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
_CLOSERS = {"{": "}", "[": "]"}


class JSONReplyError(ValueError):
    """A reply holds no JSON value that the repairs here can recover."""


def extract_json(text: str) -> tuple[Any, bool]:
    """The JSON value in ``text`` and whether it needed repair.

    Tries the text as is, then the first code-fenced block, then the first balanced object or
    array anywhere in the text; each candidate also with trailing commas removed.

    >>> extract_json('{"a": 1}')
    ({'a': 1}, False)
    >>> extract_json('Sure! ```json\\n{"a": [1, 2,],}\\n``` Hope this helps.')
    ({'a': [1, 2]}, True)
    """
    stripped = text.strip()
    candidates = [stripped]
    fenced = _FENCE.search(stripped)
    if fenced:
        candidates.append(fenced.group(1).strip())
    embedded = _first_balanced(fenced.group(1) if fenced else stripped)
    if embedded is not None:
        candidates.append(embedded)
    for candidate in candidates:
        for attempt in (candidate, _drop_trailing_commas(candidate)):
            try:
                value = json.loads(attempt)
            except json.JSONDecodeError:
                continue
            return value, attempt != stripped
    raise JSONReplyError(f"no JSON value found in reply: {text[:200]!r}")


def _structural(text: str) -> Iterator[tuple[int, str, bool]]:
    """Each character with its index and whether it is JSON structure (outside any string)."""
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            yield index, char, False
        else:
            in_string = char == '"'
            yield index, char, not in_string


def _first_balanced(text: str) -> str | None:
    """The first ``{...}`` or ``[...]`` whose brackets balance, skipping brackets in strings."""
    stack: list[str] = []
    start = 0
    for index, char, structural in _structural(text):
        if not structural:
            continue
        if char in _CLOSERS:
            if not stack:
                start = index
            stack.append(_CLOSERS[char])
        elif char in "}]" and stack:
            if stack.pop() != char:
                return None
            if not stack:
                return text[start : index + 1]
    return None


def _drop_trailing_commas(text: str) -> str:
    """Remove commas that directly precede ``}`` or ``]`` outside strings."""
    out: list[str] = []
    for _, char, structural in _structural(text):
        if structural and char in "}]":
            while out and out[-1].isspace():
                out.pop()
            if out and out[-1] == ",":
                out.pop()
        out.append(char)
    return "".join(out)


@dataclass(frozen=True)
class JSONReply:
    """Outcome of parsing one reply: ``value`` is ``None`` unless ``ok``."""

    value: Any
    ok: bool
    repaired: bool
    error: str | None = None
    #: Which count it went to: clean, repaired, unparseable or invalid.
    outcome: str = ""


class JSONReplyParser:
    """Parses replies against one JSON schema and keeps counts of the outcomes.

    Counts are ``clean`` (valid as sent), ``repaired`` (valid after repair), ``unparseable``
    (no JSON recoverable) and ``invalid`` (JSON that breaks the schema). Thread-safe, so one
    parser can serve a batched stage.

    >>> parser = JSONReplyParser({"type": "object", "required": ["name"]})
    >>> parser.parse('```json\\n{"name": "Caroline"}\\n```').value
    {'name': 'Caroline'}
    >>> parser.parse("I cannot answer that.").ok
    False
    >>> parser.counts()
    {'clean': 0, 'repaired': 1, 'unparseable': 1, 'invalid': 0}
    """

    def __init__(self, schema: Mapping[str, Any] | None = None) -> None:
        if schema is None:
            self._validator = None
        else:
            validator_class = jsonschema.validators.validator_for(schema)
            validator_class.check_schema(schema)
            self._validator = validator_class(schema)
        self._lock = threading.Lock()
        self._counts = {"clean": 0, "repaired": 0, "unparseable": 0, "invalid": 0}

    def parse(self, text: str) -> JSONReply:
        """Extract, repair and validate one reply; never raises on bad replies."""
        try:
            value, repaired = extract_json(text)
        except JSONReplyError as error:
            return self._count("unparseable", JSONReply(None, False, False, str(error)))
        if self._validator is not None:
            problem = jsonschema.exceptions.best_match(self._validator.iter_errors(value))
            if problem is not None:
                reply = JSONReply(None, False, repaired, f"schema: {problem.message}")
                return self._count("invalid", reply)
        return self._count("repaired" if repaired else "clean", JSONReply(value, True, repaired))

    def counts(self) -> dict[str, int]:
        """Outcome counts so far (JSON-serializable)."""
        with self._lock:
            return dict(self._counts)

    def _count(self, outcome: str, reply: JSONReply) -> JSONReply:
        with self._lock:
            self._counts[outcome] += 1
        return replace(reply, outcome=outcome)
