"""The tables' prose as data: every note, caption and setting sentence is a keyed template in
``notes.yaml`` beside this module, so that the words are edited and reviewed as text while the
code only supplies a table's facts."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

NOTES_FILE = Path(__file__).with_name("notes.yaml")


@cache
def templates() -> dict[str, Any]:
    """``notes.yaml`` as read, once."""
    return yaml.safe_load(NOTES_FILE.read_text(encoding="utf-8"))


def template(key: str) -> Any:
    """The template (or group of templates) under a dotted key, ``report.order_words``."""
    node = templates()
    for part in key.split("."):
        node = node[part]
    return node


def note(key: str, **facts: Any) -> str:
    """The template under ``key`` filled with ``facts``.

    >>> note("report.stale_run", run="abc", recorded="1", now="2")
    'run abc: recorded 1, now 2'
    """
    return str(template(key)).format(**facts)
