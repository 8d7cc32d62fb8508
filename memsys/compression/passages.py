"""From turns to passages and back: how a memory unit is compressed, exchange by exchange.

SeCom's released code stores each exchange as ``[human]: u\\n[bot]: r`` and compresses a memory
unit (a segment, a session, a turn) as the list of its exchanges, each its own LLMLingua-2
context (the rate applies within each), with ``force_tokens=["\\n", ".", "[human]", "[bot]"]``;
the index text is the compressed exchanges joined by newlines. The harness's speakers are named
people (LoCoMo) or ``user``/``assistant`` (LongMemEval), so an exchange is its ``speaker: text``
lines and the forced markers are its own speaker labels (``Caroline:``), which keep who said
what, as ``[human]``/``[bot]`` do there, and keep the names a question asks about.
"""

from __future__ import annotations

from collections.abc import Sequence

from memsys.compression.base import Compressor, Passage
from memsys.types import Turn

#: An exchange: a turn and its reply (SeCom's user-bot exchange; see memsys.methods.secom).
TURNS_PER_EXCHANGE = 2
#: One memory unit as its exchanges, each a run of consecutive turns.
Unit = Sequence[Sequence[Turn]]


def render_turns(turns: Sequence[Turn]) -> str:
    """Turns as a reader sees them: ``speaker: text``, one per line."""
    return "\n".join(f"{turn.speaker}: {turn.text}" for turn in turns)


def exchanges(turns: Sequence[Turn], size: int = TURNS_PER_EXCHANGE) -> list[tuple[Turn, ...]]:
    """Consecutive groups of ``size`` turns from the first (a trailing odd turn stands alone)."""
    if size < 1:
        raise ValueError(f"turns per exchange must be >= 1, got {size}")
    return [tuple(turns[start : start + size]) for start in range(0, len(turns), size)]


def speaker_passage(turns: Sequence[Turn]) -> Passage:
    """An exchange as one passage: its speaker lines, its speaker labels forced."""
    markers = tuple(dict.fromkeys(f"{turn.speaker}:" for turn in turns))
    return Passage(render_turns(turns), markers)


def index_texts(compressor: Compressor, units: Sequence[Unit]) -> list[str]:
    """Each unit's index text: its exchanges compressed one by one (one batch for all units),
    joined by newlines. Without compression this is ``render_turns`` of the unit's turns."""
    passages = [speaker_passage(exchange) for unit in units for exchange in unit]
    compressed = iter(compressor.compress_many(passages))
    return ["\n".join(next(compressed) for _ in unit) for unit in units]
