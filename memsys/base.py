"""The plugin contract: a memory method is ``construct`` plus ``retrieve``, nothing else.

The runner does batching, caching, resuming, answering and scoring without knowing a method's
internals. A method receives its services (embedder, token counter, construction LLM) by
injection, declares what its memory depends on (:meth:`MemorySystem.construction_config`) so
that constructed memories can be cached and shared across answering backbones, and turns its
memory into plain JSON and back (no pickle) so the cache is portable and inspectable.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from memsys.embed import Embedder
from memsys.llm.backbone import Backbone
from memsys.nlp import NLP
from memsys.tokens import TokenCounter
from memsys.types import Conversation, MemoryItem, Question, Retrieval

MemoryT = TypeVar("MemoryT")

#: How a method builds its memory: with its paper's LLM prompts, or their non-LLM substitutes.
EXTRACTION_MODES = ("lite", "llm")
#: How a method's kept items reach the reader: oldest first under their session dates, or in
#: the method's own rank order, best first (:mod:`benchmarks.answering.context` renders both).
CONTEXT_ORDERS = ("time", "rank")


def check_choices(*options: tuple[str, Any, Sequence[Any]]) -> None:
    """Each ``(name, value, allowed)``: a ValueError naming the option whose value is not allowed.

    >>> check_choices(("extraction", "llm", EXTRACTION_MODES))
    >>> check_choices(("fusion", "mix", ("rerank", "slot3")))
    Traceback (most recent call last):
    ...
    ValueError: fusion must be one of ('rerank', 'slot3'), got 'mix'
    """
    for name, value, allowed in options:
        if value not in allowed:
            raise ValueError(f"{name} must be one of {tuple(allowed)}, got {value!r}")


@dataclass(frozen=True)
class Services:
    """What methods may use: injected, never global.

    ``backbone`` is the construction LLM (booked to the ``construction`` stage); ``None`` when the
    run has none (``extraction: lite`` methods and baselines never call it). ``nlp`` is the
    spaCy pipeline and date resolver of the lite extractors, loaded on first use. ``cache_dir``
    is where a method may keep persistent caches of its own (SQLite files, e.g. SeCom's
    compressed texts); ``None`` keeps them in memory for the process.
    """

    embedder: Embedder
    tokens: TokenCounter
    backbone: Backbone | None = None
    nlp: NLP = field(default_factory=NLP)
    cache_dir: Path | None = None


class MemorySystem(ABC, Generic[MemoryT]):
    """Base class of every method and baseline."""

    #: Bump when construction logic changes, so cached memories are rebuilt.
    construction_version: ClassVar[int] = 1
    #: Whether ``construct`` calls the LLM (its model then becomes part of the memory's identity);
    #: methods with an ``extraction`` option set it per instance (``extraction == "llm"``).
    uses_llm: bool = False
    #: The order its items reach the reader in (one of :data:`CONTEXT_ORDERS`): ``time`` unless
    #: the method's paper hands the reader its ranked list. A class fact, read without building
    #: the method, so a run's identity can record it (``answer.order=method``, the default).
    context_order: ClassVar[str] = "time"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuse an unknown :attr:`context_order` when the class is defined, not mid-run."""
        super().__init_subclass__(**kwargs)
        check_choices(("context_order", cls.context_order, CONTEXT_ORDERS))

    def __init__(self, services: Services) -> None:
        self.services = services

    @abstractmethod
    def construct(self, conversation: Conversation) -> MemoryT:
        """Build the memory of one conversation."""

    @abstractmethod
    def retrieve(self, memory: MemoryT, question: Question) -> Retrieval:
        """Items for the reader, best first, each with the turn ids it came from."""

    def prepare_queries(self, questions: Sequence[Question]) -> None:
        """Batch per-question work (e.g. query embeddings) before ``retrieve`` is called on each.

        The runner calls it once per batch; the default does nothing.
        """

    def prepare_retrieval(self, memory: MemoryT, questions: Sequence[Question]) -> None:
        """Batch per-question work that needs the memory (e.g. an LLM filtering each question's
        candidates), after :meth:`prepare_queries` and before ``retrieve``; default: nothing.
        """

    @abstractmethod
    def construction_config(self) -> dict[str, Any]:
        """Every setting that changes what :meth:`construct` builds (JSON values)."""

    @abstractmethod
    def dump_memory(self, memory: MemoryT) -> dict[str, Any]:
        """The memory as JSON-serializable data."""

    @abstractmethod
    def load_memory(self, payload: dict[str, Any]) -> MemoryT:
        """Inverse of :meth:`dump_memory`."""

    def construction_identity(self) -> dict[str, Any]:
        """What a cached memory is keyed by: class, version, config, embedder, construction LLM."""
        identity = {
            "method": f"{type(self).__module__}.{type(self).__qualname__}",
            "version": self.construction_version,
            "config": self.construction_config(),
            "embedder": self.services.embedder.config.identity,
        }
        if self.uses_llm:
            backbone = self.services.backbone
            identity["construction_model"] = backbone.model_id if backbone else None
        return identity


def item_to_json(item: MemoryItem) -> dict[str, Any]:
    """A memory item as JSON (timestamps in ISO 8601)."""
    return {
        "text": item.text,
        "turn_ids": list(item.turn_ids),
        "timestamp": item.timestamp.isoformat() if item.timestamp else None,
        "position": item.position,
        "score": item.score,
        "kind": item.kind,
    }


def item_from_json(data: dict[str, Any]) -> MemoryItem:
    """Inverse of :func:`item_to_json`."""
    timestamp = data.get("timestamp")
    return MemoryItem(
        text=data["text"],
        turn_ids=tuple(data["turn_ids"]),
        timestamp=datetime.fromisoformat(timestamp) if timestamp else None,
        position=int(data.get("position", 0)),
        score=float(data.get("score", 0.0)),
        kind=data.get("kind", "turn"),
    )
