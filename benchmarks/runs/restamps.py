"""Re-stamps: a run's method fingerprint carried over a refactor that a behavioural check proved
harmless.

A row is stale when its method's source has changed since its run was produced
(:func:`benchmarks.runs.rows.mark_stale`). Moving code, or adding what changes no
output (a footprint hook), changes the fingerprint too; recomputing hours of runs for that proves
nothing. ``memsys-bench results restamp RUN`` (:mod:`benchmarks.checks.restamp`) recomputes a
sample of the run's records with today's code and, when every one is identical, appends a stamp
to the run's ``restamps.jsonl``: the fingerprint it was produced under, the one it was checked
under, and what the check compared. A stamp bridges exactly that pair, so any later change to the
method makes the run stale again until it is checked again.
"""

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
