"""§2.2: each session cut into topical segments of whole exchanges by the configured segmenter.

The segmenter sees a session as its exchanges (``speaker: text`` lines each), zero-shot, and
returns exchange spans; a segment therefore never splits an exchange. The LLM segmenter is
:mod:`.segmenter` (Figure 6's prompt); lite runs use a segmenter that makes no call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memsys.compression import exchanges, render_turns
from memsys.segment.base import (
    CostMeter,
    DialogueText,
    Segmenter,
    labels_from_gaps,
    segments_from_labels,
)
from memsys.types import Session, Turn


@dataclass(frozen=True)
class SegmentSpan:
    """One segment before compression: its session date and its exchanges."""

    timestamp: datetime | None
    exchanges: tuple[tuple[Turn, ...], ...]

    @property
    def turns(self) -> tuple[Turn, ...]:
        return tuple(turn for exchange in self.exchanges for turn in exchange)


def segment_sessions(
    segmenter: Segmenter, sessions: Sequence[Session], turns_per_exchange: int
) -> tuple[list[SegmentSpan], dict[str, Any]]:
    """Every session's segments in order, and what segmenting cost (LLM calls, fallbacks)."""
    grouped = [exchanges(session.turns, turns_per_exchange) for session in sessions]
    texts = [[render_turns(exchange) for exchange in groups] for groups in grouped]
    segmenter.prepare(texts)
    meter = CostMeter(segmenter.embedder)
    # Sessions are segmented independently of each other: their LLM calls go out together.
    decided = segmenter.segment_many([DialogueText(tuple(t)) for t in texts], meter)
    spans = []
    for session, groups, boundaries in zip(sessions, grouped, decided, strict=True):
        labels = labels_from_gaps(len(groups), set(boundaries.gaps))
        spans += [
            SegmentSpan(session.timestamp, tuple(groups[first : last + 1]))
            for first, last in segments_from_labels(labels)
        ]
    return spans, meter.finish().to_json()
