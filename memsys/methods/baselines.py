"""Plain baselines every method must beat: no history, recent history, turn and session RAG.

* ``ZeroHistory`` — the reader sees no memory (what the backbone knows or guesses).
* ``FullHistory`` — every turn, most recent first, so the context budget keeps the latest ones.
* ``TurnRAG`` — each turn (``speaker: text``) is an item, or with ``unit: exchange`` each
  exchange (a turn and its reply, SeCom's turn-level unit, below); ranked by BM25 or dense.
* ``SessionRAG`` — each session is one item (its turns joined); ranked by BM25 or dense.

**Depth** (``top_k``): ``None``, the configs' value, hands the reader every item best first and
lets the context budget keep what fits, as SeCom does, so a ranked baseline fills any equal
budget a table sets (docs/tables.md, "equal budget"); an integer is a fixed top-k.

All share :class:`ItemMemory`: a list of items, with retrieval indexes kept for the memory's
lifetime (not serialized: they are cheap to rebuild from cached vectors). The ranked baselines
build theirs when a memory is constructed or loaded, so that embedding the items counts as
construction and a question's retrieve latency is the search alone, as for the other methods.

**Denoised** (``compression`` other than ``none``; ``conf/method/*_denoised.yaml``): SeCom's
paper compares against turn- and session-level baselines denoised as SeCom is (papers/secom.txt
§3, "Baselines"), so that its gap to them is the granularity alone. Such a baseline indexes a
compressed copy of each item and hands the reader the original, with SeCom's compressors and its
exchange-by-exchange compression (:func:`memsys.compression.index_texts`): a session is its
exchanges of two turns, an item of TurnRAG is compressed alone (one utterance, or one exchange).

**Exchange** (``unit: exchange``; ``conf/method/turn_rag_*_exchange.yaml``): SeCom's turn-level
memory unit is an interaction turn t_j = (u_j, r_j), a user request and the agent's response
(papers/secom.txt §2.1; §3 "Baselines" (1), "each user-agent interaction"), where the harness's
turn is one utterance. An exchange item is two consecutive turns of one session, paired from the
session's first turn, a trailing odd turn an item of its own: the exchanges SeCom's segments are
made of (:func:`memsys.compression.exchanges`), so a segment is a union of exchange items. On
LoCoMo (two named speakers, no user/agent roles) that is the only order-based reading; on
LongMemEval it is a user turn and the assistant's reply wherever a session opens with the user
and alternates (942 of the 948 oracle sessions). The item's text is both turns' ``speaker: text``
lines and its provenance both turn ids, so evidence recall counts either.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from memsys.base import MemorySystem, Services, check_choices, item_from_json, item_to_json
from memsys.compression import (
    LLMLINGUA2_MODEL,
    Compressor,
    Unit,
    build_compressor,
    exchanges,
    index_texts,
    render_turns,
)
from memsys.retrievers import RETRIEVER_KINDS, Retriever, build_retriever
from memsys.types import (
    Conversation,
    MemoryItem,
    Question,
    Retrieval,
    Session,
    Turn,
    ranking_of,
)

#: TurnRAG's memory units: one utterance (the harness's turn), one exchange (the paper's turn).
TURN_UNITS: tuple[str, ...] = ("utterance", "exchange")


class ItemMemory:
    """A conversation's memory as a flat list of items, indexed by their texts or, denoised, by
    ``index_texts`` (one per item)."""

    def __init__(
        self, items: tuple[MemoryItem, ...], index_texts: tuple[str, ...] | None = None
    ) -> None:
        if index_texts is not None and len(index_texts) != len(items):
            raise ValueError(f"{len(items)} items but {len(index_texts)} index texts")
        self.items = items
        self.index_texts = index_texts
        self._retrievers: dict[str, Retriever] = {}

    def retriever(self, kind: str, system: MemorySystem[Any]) -> Retriever:
        """The index of ``kind`` over the index texts (the items' own texts by default), built
        once."""
        if kind not in self._retrievers:
            texts = self.index_texts or [item.text for item in self.items]
            self._retrievers[kind] = build_retriever(kind, texts, system.services.embedder)
        return self._retrievers[kind]


def turn_item(turn: Turn, position: int) -> MemoryItem:
    """One turn as a memory item, ``speaker: text``."""
    return MemoryItem(f"{turn.speaker}: {turn.text}", (turn.turn_id,), turn.timestamp, position)


def exchange_item(exchange: Sequence[Turn], position: int) -> MemoryItem:
    """An exchange (a turn and its reply) as one item: its ``speaker: text`` lines, both turn
    ids, its session's date."""
    turn_ids = tuple(turn.turn_id for turn in exchange)
    return MemoryItem(
        render_turns(exchange), turn_ids, exchange[0].timestamp, position, kind="exchange"
    )


def session_item(session: Session, position: int) -> MemoryItem:
    """One session as a memory item: its turns, one per line."""
    text = render_turns(session.turns)
    turn_ids = tuple(turn.turn_id for turn in session.turns)
    return MemoryItem(text, turn_ids, session.timestamp, position, kind="session")


class ItemMemorySystem(MemorySystem[ItemMemory]):
    """Shared (de)serialization for the item-list baselines."""

    def dump_memory(self, memory: ItemMemory) -> dict[str, Any]:
        payload: dict[str, Any] = {"items": [item_to_json(item) for item in memory.items]}
        if memory.index_texts is not None:
            payload["index_texts"] = list(memory.index_texts)
        return payload

    def load_memory(self, payload: dict[str, Any]) -> ItemMemory:
        items = tuple(item_from_json(item) for item in payload["items"])
        index = payload.get("index_texts")
        return ItemMemory(items, tuple(index) if index is not None else None)

    def stored_texts(self, memory: ItemMemory) -> list[str]:
        return [item.text for item in memory.items]


class ZeroHistory(ItemMemorySystem):
    """No memory at all."""

    def construct(self, conversation: Conversation) -> ItemMemory:
        return ItemMemory(())

    def retrieve(self, memory: ItemMemory, question: Question) -> Retrieval:
        return Retrieval(())

    def construction_config(self) -> dict[str, Any]:
        return {}


class FullHistory(ItemMemorySystem):
    """All turns, newest first; the harness's context budget keeps as many recent ones as fit."""

    def construct(self, conversation: Conversation) -> ItemMemory:
        return ItemMemory(tuple(turn_item(turn, i) for i, turn in enumerate(conversation.turns)))

    def retrieve(self, memory: ItemMemory, question: Question) -> Retrieval:
        newest_first = sorted(memory.items, key=lambda item: item.position, reverse=True)
        return Retrieval(tuple(newest_first), ranking=())

    def construction_config(self) -> dict[str, Any]:
        return {}


class _RankedItems(ItemMemorySystem):
    """Top-k items by a BM25 or dense retriever, over the items or their compressed copies
    (``compression`` and the options after it mean what they mean for SeCom)."""

    def __init__(
        self,
        services: Services,
        *,
        retriever: str = "dense",
        top_k: int | None = None,
        compression: str = "none",
        compression_rate: float = 0.75,
        llmlingua2_model: str = LLMLINGUA2_MODEL,
        compression_device: str = "cpu",
        compression_threads: int | None = 1,
    ) -> None:
        super().__init__(services)
        if top_k is not None and top_k < 1:
            raise ValueError(f"top_k must be at least 1 or null (every item), got {top_k}")
        if retriever not in RETRIEVER_KINDS:
            raise ValueError(f"unknown retriever {retriever!r}; expected one of {RETRIEVER_KINDS}")
        self.retriever = retriever
        self.top_k = top_k
        self.compressor: Compressor | None = None
        if compression != "none":
            self.compressor = build_compressor(
                compression,
                rate=compression_rate,
                cache_dir=services.cache_dir,
                llmlingua2_model=llmlingua2_model,
                device=compression_device,
                n_threads=compression_threads,
            )

    def indexed(self, items: Sequence[MemoryItem], units: Sequence[Unit]) -> ItemMemory:
        """A memory of ``items`` with its retrieval index built (items embedded, for dense);
        denoised, each item is indexed by its unit (its exchanges) compressed."""
        index = None if self.compressor is None else tuple(index_texts(self.compressor, units))
        memory = ItemMemory(tuple(items), index)
        memory.retriever(self.retriever, self)
        return memory

    def load_memory(self, payload: dict[str, Any]) -> ItemMemory:
        memory = super().load_memory(payload)
        memory.retriever(self.retriever, self)
        return memory

    def prepare_queries(self, questions: Sequence[Question]) -> None:
        """Embed a batch's questions in one model call (the cache then serves ``retrieve``)."""
        if self.retriever == "dense":
            self.services.embedder.encode([question.question for question in questions])

    def retrieve(self, memory: ItemMemory, question: Question) -> Retrieval:
        """The ``top_k`` best items (every item when ``None``), best first; for the ranking
        metrics, every item by the same search."""
        retriever = memory.retriever(self.retriever, self)
        every = retriever.search(question.question, len(memory.items))
        kept = every[: self.top_k]  # a slice to None keeps every item
        items = tuple(
            MemoryItem(item.text, item.turn_ids, item.timestamp, item.position, score, item.kind)
            for item, score in ((memory.items[index], score) for index, score in kept)
        )
        return Retrieval(items, ranking=ranking_of(memory.items[index] for index, _ in every))

    def construction_config(self) -> dict[str, Any]:
        """Empty for the plain baselines (their cached memories keep their keys)."""
        return {} if self.compressor is None else {"compression": self.compressor.identity()}


class TurnRAG(_RankedItems):
    """Turn-level retrieval-augmented generation, over utterances or exchanges (``unit``)."""

    def __init__(self, services: Services, *, unit: str = "utterance", **options: Any) -> None:
        super().__init__(services, **options)
        check_choices(("unit", unit, TURN_UNITS))
        self.unit = unit

    def construct(self, conversation: Conversation) -> ItemMemory:
        if self.unit == "utterance":
            turns = conversation.turns
            items = [turn_item(turn, i) for i, turn in enumerate(turns)]
            return self.indexed(items, [[(turn,)] for turn in turns])
        groups = [pair for session in conversation.sessions for pair in exchanges(session.turns)]
        starts = itertools.accumulate((len(pair) for pair in groups[:-1]), initial=0)
        items = [exchange_item(pair, start) for pair, start in zip(groups, starts, strict=True)]
        return self.indexed(items, [[pair] for pair in groups])

    def construction_config(self) -> dict[str, Any]:
        """The unit joins the key only when it is not the utterance (utterance memories keep
        the keys they had before the option existed)."""
        config = super().construction_config()
        return config if self.unit == "utterance" else {**config, "unit": self.unit}


class SessionRAG(_RankedItems):
    """Session-level retrieval-augmented generation."""

    def construct(self, conversation: Conversation) -> ItemMemory:
        items, position = [], 0
        for session in conversation.sessions:
            items.append(session_item(session, position))
            position += len(session.turns)
        return self.indexed(items, [exchanges(s.turns) for s in conversation.sessions])
