"""A memory's footprint: what it stores and what building it cost, per conversation.

What each ``memories.jsonl`` line holds: docs/running.md. A run logs one line per conversation
as soon as its memory is got, so an interrupted run keeps what it measured and a resumed one
measures only the memories it has not; ``metrics.json`` summarizes the file
(:func:`summarize_footprints`: mean and max per conversation).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.pipeline.memory_store import COST_KEYS, Got
from benchmarks.pipeline.runlog import RecordLog
from memsys.base import MemorySystem
from memsys.tokens import TokenCounter

#: The run folder's footprint log, one line per conversation.
FOOTPRINT_FILE = "memories.jsonl"
#: What is stored, per conversation.
STORED_KEYS = ("items", "tokens", "bytes")


def footprint(
    system: MemorySystem[Any], conversation_id: str, got: Got, tokens: TokenCounter
) -> dict[str, Any]:
    """One conversation's footprint line."""
    texts = system.stored_texts(got.memory)
    return {
        "conversation_id": conversation_id,
        "items": len(texts),
        "tokens": sum(tokens.count(text) for text in texts),
        "bytes": got.size_bytes,
        "construction": got.cost,
    }


class FootprintLog:
    """``memories.jsonl`` of a run: each conversation's footprint, logged once."""

    def __init__(self, run_dir: Path) -> None:
        self.log = RecordLog(run_dir / FOOTPRINT_FILE, key="conversation_id")

    def note(self, lines: Iterable[dict[str, Any]]) -> None:
        """Log the lines of conversations not logged yet."""
        self.log.append(line for line in lines if line["conversation_id"] not in self.log)

    def summary(self) -> dict[str, Any] | None:
        """:func:`summarize_footprints` of every line logged; None when there is none."""
        return summarize_footprints(self.log.records())


def summarize_footprints(lines: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Mean and max per conversation of each stored quantity and each construction cost (over
    the memories whose cost was recorded: ``costed`` of ``conversations``).

    >>> summarize_footprints([
    ...     {"items": 2, "tokens": 10, "bytes": 100, "construction": {"llm_requests": 1}},
    ...     {"items": 4, "tokens": 30, "bytes": 300, "construction": None},
    ... ])["items"]
    {'mean': 3.0, 'max': 4}
    """
    if not lines:
        return None
    costed = [line["construction"] for line in lines if line.get("construction") is not None]
    summary: dict[str, Any] = {"conversations": len(lines), "costed": len(costed)}
    for key in STORED_KEYS:
        summary[key] = _mean_max([line[key] for line in lines])
    for key in COST_KEYS.values():
        values = [cost.get(key, 0) for cost in costed]
        summary[key] = _mean_max(values) if values else None
    return summary


def _mean_max(values: Sequence[int]) -> dict[str, Any]:
    return {"mean": round(sum(values) / len(values), 3), "max": max(values)}
