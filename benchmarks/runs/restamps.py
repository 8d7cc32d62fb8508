"""Re-stamps: a run's method fingerprint carried over a refactor that a behavioural check proved
harmless (:mod:`benchmarks.checks.restamp`). A stamp in ``restamps.jsonl`` bridges exactly the
fingerprint a run was produced under and the one it was checked under, so any later change makes
the run stale again: docs/tables.md, "Stale rows and re-stamps"."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: A run folder's stamps, one JSON object per line.
RESTAMPS_FILE = "restamps.jsonl"


def read_restamps(directory: Path) -> list[dict[str, Any]]:
    """The stamps of a run folder, oldest first (none: an empty list)."""
    path = directory / RESTAMPS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def carried_source(recorded: str, stamps: Sequence[dict[str, Any]]) -> tuple[str, list[dict]]:
    """The fingerprint ``recorded`` is carried to by the chain of stamps that start from it, and
    the stamps of that chain.

    >>> carried_source("a", [{"recorded": "a", "now": "b"}, {"recorded": "b", "now": "c"}])[0]
    'c'
    >>> carried_source("x", [{"recorded": "a", "now": "b"}])
    ('x', [])
    """
    current, used = recorded, []
    by_recorded = {stamp["recorded"]: stamp for stamp in stamps}
    while current in by_recorded and by_recorded[current] not in used:
        stamp = by_recorded[current]
        used.append(stamp)
        current = stamp["now"]
    return current, used
