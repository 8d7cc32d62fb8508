"""Render a retrieval as the reader's context: budgeted best-first, shown in time or rank order.

A method ranks its items; the harness keeps them in rank order while they fit the token budget,
then shows the kept ones in the order the run resolved (:func:`benchmarks.pipeline.settings.context_order`:
the method's own, :attr:`memsys.base.MemorySystem.context_order`, unless ``answer.order``
overrides it): oldest first under their session dates (``order="time"``, every method but
CAST), so those contexts look the same to the reader and differ only in what was retrieved; or
best first (``order="rank"``), each item under its date wherever the date changes, for a method
whose paper hands the reader its ranked list (CAST's fused order, §3.3.3). Token counts are the
sum of the memoized counts of each rendered line (headers included), which keeps a budget check
at a few dictionary lookups per question.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from memsys.types import MemoryItem


class CountsTokens(Protocol):
    def count(self, text: str) -> int: ...


@dataclass(frozen=True)
class RenderedContext:
    """The context text, the items it shows (time order) and its size in harness tokens."""

    text: str
    items: tuple[MemoryItem, ...]
    tokens: int
    dropped: int

    @property
    def turn_ids(self) -> tuple[str, ...]:
        """Source turns of the items actually shown to the reader."""
        return tuple(dict.fromkeys(t for item in self.items for t in item.turn_ids))


def date_header(timestamp: datetime | None) -> str:
    """``[8 May 2023, 1:56 pm]``; items without a date go under ``[undated]``.

    >>> date_header(datetime(2023, 5, 8, 13, 56))
    '[8 May 2023, 1:56 pm]'
    """
    if timestamp is None:
        return "[undated]"
    clock = timestamp.strftime("%I:%M %p").lstrip("0").lower()
    return f"[{timestamp.day} {timestamp:%B %Y}, {clock}]"


def render_context(
    items: Sequence[MemoryItem], tokens: CountsTokens, budget: int, order: str = "time"
) -> RenderedContext:
    """Keep items best-first within ``budget`` tokens, render them in ``order`` with dates.

    An item that does not fit is skipped and later (smaller) ones may still fit. A date header
    costs its tokens once per run of items under it: once per date in time order; in rank
    order, again wherever the date changes from the item shown before.
    """
    kept: list[tuple[int, MemoryItem]] = []
    shown_headers: set[str] = set()
    previous: str | None = None
    used = 0
    for rank, item in enumerate(items):
        header = date_header(item.timestamp)
        new_header = header != previous if order == "rank" else header not in shown_headers
        cost = tokens.count(item.text) + (tokens.count(header) if new_header else 0)
        if used + cost > budget:
            continue
        kept.append((rank, item))
        shown_headers.add(header)
        previous = header
        used += cost
    if order == "time":
        kept.sort(key=lambda pair: (pair[1].timestamp or datetime.min, pair[1].position, pair[0]))
    lines: list[str] = []
    previous = None
    for _, item in kept:
        header = date_header(item.timestamp)
        if header != previous:
            lines.append(header)
            previous = header
        lines.append(item.text)
    shown = tuple(item for _, item in kept)
    return RenderedContext("\n".join(lines), shown, used, len(items) - len(kept))
