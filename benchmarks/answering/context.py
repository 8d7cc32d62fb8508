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

Equal budget, equal opportunity: the first item that would overflow the budget is cut to the
room left (its text's longest prefix that fits, :class:`Cut`), never dropped while the budget
stays empty, and the context ends there. A cut item shows only the source turns whose whole
text survived the cut (a turn counts as shown when its text lies within the kept prefix, so a
summary or proposition cut short shows none of its turns): evidence recall credits nothing cut
away.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from memsys.types import MemoryItem


class CountsTokens(Protocol):
    def count(self, text: str) -> int: ...

    def truncate(self, text: str, max_tokens: int) -> str: ...


@dataclass(frozen=True)
class Cut:
    """The item cut to fit the budget: its place in the method's ranking, the tokens of its
    text kept and cut away, and its source turns the cut left out of the context."""

    rank: int
    tokens_kept: int
    tokens_cut: int
    turns_left_out: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """As a record stores it (``context_cut``)."""
        return {**dataclasses.asdict(self), "turns_left_out": list(self.turns_left_out)}


@dataclass(frozen=True)
class RenderedContext:
    """The context text, the items it shows (time order), its size in harness tokens, the items
    left out, and the item cut to fit (None: every shown item is whole)."""

    text: str
    items: tuple[MemoryItem, ...]
    tokens: int
    dropped: int
    cut: Cut | None = None

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
    items: Sequence[MemoryItem],
    tokens: CountsTokens,
    budget: int,
    order: str = "time",
    turn_texts: Mapping[str, str] | None = None,
) -> RenderedContext:
    """Keep items best-first within ``budget`` tokens, render them in ``order`` with dates.

    The first item that does not fit is cut to the room left (:func:`fit`) and ends the
    context; ``turn_texts`` (turn id to its text) says which of its turns survive the cut (none
    without it). A date header costs its tokens once per run of items under it: once per date
    in time order; in rank order, again wherever the date changes from the item shown before.
    """
    kept: list[tuple[int, MemoryItem]] = []
    shown_headers: set[str] = set()
    previous: str | None = None
    used = 0
    cut: Cut | None = None
    for rank, item in enumerate(items):
        header = date_header(item.timestamp)
        new_header = header != previous if order == "rank" else header not in shown_headers
        header_cost = tokens.count(header) if new_header else 0
        cost = tokens.count(item.text)
        if used + header_cost + cost > budget:
            room = budget - used - header_cost
            text = fit(tokens, item.text, room) if room > 0 else ""
            if not text.strip():
                break
            shown = tuple(
                turn for turn in item.turn_ids if (turn_texts or {}).get(turn, "\0") in text
            )
            left_out = tuple(turn for turn in item.turn_ids if turn not in shown)
            kept_tokens = tokens.count(text)
            cut = Cut(rank, kept_tokens, cost - kept_tokens, left_out)
            item, cost = dataclasses.replace(item, text=text, turn_ids=shown), kept_tokens
        kept.append((rank, item))
        shown_headers.add(header)
        previous = header
        used += header_cost + cost
        if cut is not None:
            break
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
    shown_items = tuple(item for _, item in kept)
    return RenderedContext("\n".join(lines), shown_items, used, len(items) - len(kept), cut)


def fit(tokens: CountsTokens, text: str, room: int) -> str:
    """The longest prefix of ``text`` (whitespace at its end stripped) that counts at most
    ``room`` tokens: the tokenizer's cut, shortened a token at a time where re-tokenizing the
    prefix counts more."""
    limit = room
    while limit > 0:
        kept = tokens.truncate(text, limit).rstrip()
        if tokens.count(kept) <= room:
            return kept
        limit -= 1
    return ""
