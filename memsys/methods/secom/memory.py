"""SeCom's memory: topical segments, each kept as the original text and its compressed index text.

The reader gets the original (§2.3, Eq. 2 ranks by ``f_Comp(M)`` but returns ``M``'s units), the
retriever reads the index text.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memsys.base import Services
from memsys.retrievers import Retriever, build_retriever
from memsys.types import MemoryItem


@dataclass(frozen=True)
class Segment:
    """One memory unit: the original text (for the reader) and its compressed index text."""

    text: str
    index_text: str
    turn_ids: tuple[str, ...]
    timestamp: datetime | None
    position: int

    def item(self, score: float) -> MemoryItem:
        """The segment as the reader gets it: the original text, never the compressed one."""
        return MemoryItem(
            self.text, self.turn_ids, self.timestamp, self.position, score, kind="segment"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "index_text": self.index_text,
            "turn_ids": list(self.turn_ids),
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "position": self.position,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Segment:
        timestamp = datetime.fromisoformat(data["timestamp"]) if data["timestamp"] else None
        return cls(
            data["text"], data["index_text"], tuple(data["turn_ids"]), timestamp, data["position"]
        )


class SeComMemory:
    """A conversation's segments in time order, the construction report, and retrieval indexes
    over the index texts (built on first use, not serialized)."""

    def __init__(self, segments: list[Segment], report: dict[str, Any]) -> None:
        self.segments = segments
        self.report = report
        self._retrievers: dict[str, Retriever] = {}

    def retriever(self, kind: str, services: Services) -> Retriever:
        """The ``kind`` index over the compressed texts, built once."""
        if kind not in self._retrievers:
            texts = [segment.index_text for segment in self.segments]
            self._retrievers[kind] = build_retriever(kind, texts, services.embedder)
        return self._retrievers[kind]

    def to_json(self) -> dict[str, Any]:
        return {"segments": [segment.to_json() for segment in self.segments], "report": self.report}

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> SeComMemory:
        return cls(
            [Segment.from_json(segment) for segment in payload["segments"]], payload["report"]
        )
