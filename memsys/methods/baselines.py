"""Plain baselines every method must beat: no history, recent history, turn and session RAG.

* ``ZeroHistory`` — the reader sees no memory (what the backbone knows or guesses).
* ``FullHistory`` — every turn, most recent first, so the context budget keeps the latest ones.
* ``TurnRAG`` — each turn (``speaker: text``) is an item; BM25 or dense top-k.
* ``SessionRAG`` — each session is one item (its turns joined); BM25 or dense top-k.

All share :class:`ItemMemory`: a list of items, with retrieval indexes kept for the memory's
lifetime (not serialized: they are cheap to rebuild from cached vectors). The ranked baselines
build theirs when a memory is constructed or loaded, so that embedding the items counts as
construction and a question's retrieve latency is the search alone, as for the other methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memsys.base import MemorySystem, Services, item_from_json, item_to_json
from memsys.retrievers import RETRIEVER_KINDS, Retriever, build_retriever
from memsys.types import Conversation, MemoryItem, Question, Retrieval, Session, Turn


class ItemMemory:
    """A conversation's memory as a flat list of items."""

    def __init__(self, items: tuple[MemoryItem, ...]) -> None:
        self.items = items
        self._retrievers: dict[str, Retriever] = {}

    def retriever(self, kind: str, system: MemorySystem[Any]) -> Retriever:
        """The index of ``kind`` over the items' texts, built once."""
        if kind not in self._retrievers:
            texts = [item.text for item in self.items]
            self._retrievers[kind] = build_retriever(kind, texts, system.services.embedder)
        return self._retrievers[kind]


def turn_item(turn: Turn, position: int) -> MemoryItem:
    """One turn as a memory item, ``speaker: text``."""
    return MemoryItem(f"{turn.speaker}: {turn.text}", (turn.turn_id,), turn.timestamp, position)


def session_item(session: Session, position: int) -> MemoryItem:
    """One session as a memory item: its turns, one per line."""
    text = "\n".join(f"{turn.speaker}: {turn.text}" for turn in session.turns)
    turn_ids = tuple(turn.turn_id for turn in session.turns)
    return MemoryItem(text, turn_ids, session.timestamp, position, kind="session")


class ItemMemorySystem(MemorySystem[ItemMemory]):
    """Shared (de)serialization for the item-list baselines."""

    def dump_memory(self, memory: ItemMemory) -> dict[str, Any]:
        return {"items": [item_to_json(item) for item in memory.items]}

    def load_memory(self, payload: dict[str, Any]) -> ItemMemory:
        return ItemMemory(tuple(item_from_json(item) for item in payload["items"]))


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
        return Retrieval(tuple(newest_first))

    def construction_config(self) -> dict[str, Any]:
        return {}


class _RankedItems(ItemMemorySystem):
    """Top-k items by a BM25 or dense retriever."""

    def __init__(self, services: Services, *, retriever: str = "dense", top_k: int = 10) -> None:
        super().__init__(services)
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {top_k}")
        if retriever not in RETRIEVER_KINDS:
            raise ValueError(f"unknown retriever {retriever!r}; expected one of {RETRIEVER_KINDS}")
        self.retriever = retriever
        self.top_k = top_k

    def indexed(self, memory: ItemMemory) -> ItemMemory:
        """``memory`` with its retrieval index built (items embedded, for dense)."""
        memory.retriever(self.retriever, self)
        return memory

    def load_memory(self, payload: dict[str, Any]) -> ItemMemory:
        return self.indexed(super().load_memory(payload))

    def prepare_queries(self, questions: Sequence[Question]) -> None:
        """Embed a batch's questions in one model call (the cache then serves ``retrieve``)."""
        if self.retriever == "dense":
            self.services.embedder.encode([question.question for question in questions])

    def retrieve(self, memory: ItemMemory, question: Question) -> Retrieval:
        hits = memory.retriever(self.retriever, self).search(question.question, self.top_k)
        items = tuple(
            MemoryItem(item.text, item.turn_ids, item.timestamp, item.position, score, item.kind)
            for item, score in ((memory.items[index], score) for index, score in hits)
        )
        return Retrieval(items)

    def construction_config(self) -> dict[str, Any]:
        return {}


class TurnRAG(_RankedItems):
    """Turn-level retrieval-augmented generation."""

    def construct(self, conversation: Conversation) -> ItemMemory:
        turns = enumerate(conversation.turns)
        return self.indexed(ItemMemory(tuple(turn_item(turn, i) for i, turn in turns)))


class SessionRAG(_RankedItems):
    """Session-level retrieval-augmented generation."""

    def construct(self, conversation: Conversation) -> ItemMemory:
        items, position = [], 0
        for session in conversation.sessions:
            items.append(session_item(session, position))
            position += len(session.turns)
        return self.indexed(ItemMemory(tuple(items)))
