"""ES-Mem's memory (papers/es-mem.txt §3.2): the units M_i = (b_i, s_i, r_i, t_i) (Eq. 5) and a
conversation's memory of them, stored as JSON and back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import numpy as np

from memsys.embed import Embedder


@dataclass(frozen=True)
class Event:
    """One memory unit: its turns (r_i: ``speaker: text`` lines and their ids), date (t_i),
    summary (s_i, the text embedded as the index; empty without summaries) and boundary (b_i).

    ``topics`` and ``keywords`` are what the summary is made of: in ``llm`` mode the stage-1
    annotations of the event's turns, in ``lite`` mode no topics and the event's distinctive
    words (:func:`memsys.methods.esmem.summary.distinctive_words`).
    """

    session_id: str
    timestamp: datetime | None
    position: int
    turn_ids: tuple[str, ...]
    lines: tuple[str, ...]
    topics: tuple[str, ...]
    keywords: tuple[str, ...]
    summary: str = ""
    boundary: str = ""
    boundary_source: str = ""

    def label(self) -> str:
        """What the event is about in a few words (its topics, else its keywords), as the
        boundary templates name it; empty without summaries."""
        return "; ".join(self.topics) or ", ".join(self.keywords)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["timestamp"] = self.timestamp.isoformat() if self.timestamp else None
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Event:
        timestamp = datetime.fromisoformat(data["timestamp"]) if data["timestamp"] else None
        fields = {key: tuple(data[key]) for key in ("turn_ids", "lines", "topics", "keywords")}
        return cls(
            session_id=data["session_id"],
            timestamp=timestamp,
            position=int(data["position"]),
            summary=data["summary"],
            boundary=data["boundary"],
            boundary_source=data["boundary_source"],
            **fields,
        )


class ESMemMemory:
    """A conversation's events in time order and how they were built; the summary and boundary
    vectors are embedded at construction (after loading, on first retrieval: a cache lookup)."""

    def __init__(self, events: list[Event], report: dict[str, Any]) -> None:
        self.events = events
        self.report = report
        self._vectors: dict[str, np.ndarray] = {}

    def vectors(self, level: str, embedder: Embedder) -> np.ndarray:
        """Unit vectors of every event's ``summary`` or ``boundary`` text, shape (events, dim).

        Both levels are embedded in one batch; each exists for all events or for none.
        """
        if not self._vectors:
            rows = len(self.events)
            levels = [name for name in ("summary", "boundary") if getattr(self.events[0], name)]
            vectors = embedder.encode(
                [getattr(event, name) for name in levels for event in self.events]
            )
            for offset, name in enumerate(levels):
                self._vectors[name] = vectors[offset * rows : (offset + 1) * rows]
        return self._vectors[level]

    def to_json(self) -> dict[str, Any]:
        return {"events": [event.to_json() for event in self.events], "report": self.report}

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> ESMemMemory:
        events = [Event.from_json(event) for event in payload["events"]]
        return cls(events, dict(payload["report"]))


def distinct(values: Sequence[str]) -> tuple[str, ...]:
    """Non-empty values once each (case-insensitive), first spelling and order kept.

    >>> distinct(["Pets", "pets", " ", "home  cooking", "Home cooking"])
    ('Pets', 'home cooking')
    """
    seen: dict[str, str] = {}
    for value in values:
        text = " ".join(str(value).split())
        if text and text.lower() not in seen:
            seen[text.lower()] = text
    return tuple(seen.values())
