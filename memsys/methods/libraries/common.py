"""What the library adapters share: the batches a conversation is fed in, the provenance of each
memory the library writes, and the memory as JSON.

**Batches and perspectives.** Mem0's LoCoMo evaluation (the protocol behind the published Mem0
and LangMem numbers that ES-Mem, HingeMem and CAST quote) keeps one memory per speaker, but feeds
the two libraries differently:

* ``perspectives: speakers`` is how it fed Mem0 (``evaluation/src/memzero/add.py``): each
  speaker's memory gets the whole conversation from that speaker's side (their turns as ``user``
  messages, the other's as ``assistant``), a session at a time, in batches of 2 messages;
* ``perspectives: own`` is how it fed LangMem (``evaluation/src/langmem.py``): each speaker's
  memory gets only that speaker's own turns, as ``user`` messages, one per call
  (``batch_size: 1``). The evaluation fed the turns as one stream with no session breaks; here a
  batch never spans two sessions, which with ``batch_size: 1`` changes nothing;
* ``perspectives: single`` keeps one memory, fed the whole conversation from the first
  speaker's side (as ``speakers`` does for that speaker).

Each perspective's batches go in turn order; a question searches every perspective's memory.

**Provenance.** A library extracts facts from a whole batch and does not say which message a
fact came from, so a memory's turn ids are those of the batch that wrote it. When the library
later rewrites a memory from a new batch (Mem0's ``UPDATE``, a LangMem patch), the memory keeps
its earlier turn ids and gains the new batch's, since its text now draws on both; a deleted
memory is gone. Its timestamp is the date of the session that last wrote it (what Mem0's own
metadata holds after an update).
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import ModuleType
from typing import Any

from memsys.base import EXTRACTION_MODES, MemorySystem, Services, check_choices
from memsys.embed import Embedder
from memsys.types import Conversation, MemoryItem, Question, Retrieval, Session, Turn

#: How a conversation is fed (see the module docstring): one memory per speaker, fed both sides
#: (``speakers``) or only the speaker's own turns (``own``); or one memory, from the first
#: speaker's side (``single``).
PERSPECTIVES = ("speakers", "own", "single")
#: The project name, for the install hint of a missing extra.
PROJECT = "memsys-bench"
#: How many memories one listing of a library's store may return (Mem0's ``get_all`` lists 100
#: by default, LangGraph's ``search`` 10): all of them.
LIST_LIMIT = 1_000_000


class MissingExtraError(ImportError):
    """An optional library that a method needs is not installed."""


def require(module: str, extra: str, package: str) -> ModuleType:
    """Import ``module`` of the optional ``package``, or say which extra installs it.

    >>> require("json", "mem0", "mem0ai").__name__
    'json'
    >>> require("no_such_module_x", "mem0", "mem0ai")
    Traceback (most recent call last):
    ...
    memsys.methods.libraries.common.MissingExtraError: this method needs the optional package mem0ai (not installed: No module named 'no_such_module_x'); install it with: pip install 'memsys-bench[mem0]'
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingExtraError(
            f"this method needs the optional package {package} (not installed: {error}); "
            f"install it with: pip install '{PROJECT}[{extra}]'"
        ) from error


@dataclass(frozen=True)
class Batch:
    """Consecutive turns of one session fed to one speaker's memory in one library call."""

    perspective: str
    session: Session
    turns: tuple[Turn, ...]
    position: int

    @property
    def turn_ids(self) -> tuple[str, ...]:
        return tuple(turn.turn_id for turn in self.turns)

    def messages(self, render: Callable[[Turn, Session], str]) -> list[dict[str, str]]:
        """The batch as chat messages from its perspective: the perspective speaker's turns
        are ``user`` messages, everyone else's ``assistant`` ones."""
        return [
            {
                "role": "user" if turn.speaker == self.perspective else "assistant",
                "content": render(turn, self.session),
            }
            for turn in self.turns
        ]


def embedding_dims(embedder: Embedder) -> int:
    """The length of the harness embedder's vectors (what a library's store is configured with)."""
    return len(embedder.encode(["dimension probe"])[0])


def speakers_of(conversation: Conversation) -> tuple[str, ...]:
    """The conversation's speakers: as the dataset names them, else in order of first turn."""
    return conversation.speakers or tuple(dict.fromkeys(t.speaker for t in conversation.turns))


def batches(conversation: Conversation, size: int, perspectives: str) -> list[Batch]:
    """Every library call of a construction, in order: session by session, each perspective's
    batches of ``size`` turns in turn order (``own``: of the perspective's own turns only).

    >>> from datetime import datetime
    >>> day = datetime(2023, 5, 1)
    >>> turns = tuple(Turn(f"D1:{i}", "s1", i, "AB"[i % 2], "hi", day) for i in range(3))
    >>> conversation = Conversation("c", (Session("s1", day, "1 May", turns),), (), ("A", "B"))
    >>> [(b.perspective, b.turn_ids) for b in batches(conversation, 2, "speakers")]
    [('A', ('D1:0', 'D1:1')), ('A', ('D1:2',)), ('B', ('D1:0', 'D1:1')), ('B', ('D1:2',))]
    >>> [(b.perspective, b.turn_ids) for b in batches(conversation, 1, "own")]
    [('A', ('D1:0',)), ('A', ('D1:2',)), ('B', ('D1:1',))]
    """
    speakers = speakers_of(conversation)
    whose = speakers[:1] if perspectives == "single" else speakers
    position = {turn.turn_id: i for i, turn in enumerate(conversation.turns)}
    found = []
    for session in conversation.sessions:
        for perspective in whose:
            fed = session.turns
            if perspectives == "own":
                fed = tuple(turn for turn in fed if turn.speaker == perspective)
            for start in range(0, len(fed), size):
                turns = fed[start : start + size]
                found.append(Batch(perspective, session, turns, position[turns[0].turn_id]))
    return found


@dataclass(frozen=True)
class Remembered:
    """One memory the library holds at the end of construction, with its provenance."""

    memory_id: str
    perspective: str
    text: str
    turn_ids: tuple[str, ...]
    timestamp: datetime | None
    position: int

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.memory_id,
            "perspective": self.perspective,
            "text": self.text,
            "turn_ids": list(self.turn_ids),
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "position": self.position,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Remembered:
        timestamp = data.get("timestamp")
        return Remembered(
            data["id"],
            data["perspective"],
            data["text"],
            tuple(data["turn_ids"]),
            datetime.fromisoformat(timestamp) if timestamp else None,
            int(data["position"]),
        )


@dataclass
class Source:
    """Where a memory came from while it is built: the turns of every batch that wrote it, the
    date of the session that last wrote it, and the earliest of those batches' positions."""

    turn_ids: list[str]
    timestamp: datetime | None
    position: int


@dataclass
class Provenance:
    """Which turns each memory came from, kept from the library's own add/update/delete events
    (see the module docstring); ``events`` counts them."""

    sources: dict[str, Source] = field(default_factory=dict)
    events: Counter[str] = field(default_factory=Counter)

    def written(self, memory_id: str, batch: Batch) -> None:
        """``batch`` added ``memory_id`` or rewrote it (its turn ids joined to the earlier ones)."""
        source = self.sources.get(memory_id)
        self.events["update" if source else "add"] += 1
        if source is None:
            self.sources[memory_id] = Source(
                list(batch.turn_ids), batch.session.timestamp, batch.position
            )
            return
        source.turn_ids.extend(t for t in batch.turn_ids if t not in source.turn_ids)
        source.timestamp = batch.session.timestamp
        source.position = min(source.position, batch.position)

    def deleted(self, memory_id: str) -> None:
        self.events["delete"] += 1
        self.sources.pop(memory_id, None)

    def remembered(self, memory_id: str, perspective: str, text: str) -> Remembered:
        """A final memory with its provenance (no turn ids when no event named it)."""
        source = self.sources.get(memory_id)
        if source is None:
            self.events["unmapped"] += 1
            return Remembered(memory_id, perspective, text, (), None, 0)
        return Remembered(
            memory_id, perspective, text, tuple(source.turn_ids), source.timestamp, source.position
        )


class LibraryMemory:
    """A conversation's memories as the library left them, with provenance; ``index`` is the
    library's live search structure over them (rebuilt on load, never serialized)."""

    def __init__(self, records: Sequence[Remembered], stats: dict[str, Any]) -> None:
        self.records = tuple(records)
        self.stats = stats
        self.by_id = {record.memory_id: record for record in self.records}
        self.index: Any = None


class LibraryMemorySystem(MemorySystem[LibraryMemory]):
    """A memory library's adapter: batches and provenance here, the library's calls in the
    subclass (:meth:`build`, :meth:`open_index`, :meth:`search`)."""

    uses_llm = True
    #: The extra that installs the library, and the library's distribution name.
    extra: str = ""
    package: str = ""

    def __init__(
        self,
        services: Services,
        *,
        extraction: str = "llm",
        batch_size: int = 2,
        perspectives: str = "speakers",
        top_k: int = 10,
        max_tokens: int = 2000,
        temperature: float = 0.0,
    ) -> None:
        super().__init__(services)
        check_choices(
            ("extraction", extraction, EXTRACTION_MODES),
            ("perspectives", perspectives, PERSPECTIVES),
        )
        if extraction != "llm":
            raise ValueError(
                f"{type(self).__name__} has no lite mode: the library builds its memory with an "
                "LLM (extraction: llm)"
            )
        for name, value in (
            ("batch_size", batch_size),
            ("top_k", top_k),
            ("max_tokens", max_tokens),
        ):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        self.extraction = extraction
        self.batch_size = batch_size
        self.perspectives = perspectives
        self.top_k = top_k
        self.max_tokens = max_tokens
        self.temperature = temperature

    # -- what a subclass provides ----------------------------------------------------------------

    def library_version(self) -> str:
        """The installed library's version (part of the memory's identity)."""
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version(self.package)
        except PackageNotFoundError:
            return "not installed"

    def build(self, conversation: Conversation) -> tuple[list[Remembered], dict[str, Any]]:
        """Run the library over the conversation's batches: its memories and statistics."""
        raise NotImplementedError

    def open_index(self, memory: LibraryMemory) -> Any:
        """The library's search structure over ``memory``'s records."""
        raise NotImplementedError

    def search(
        self, memory: LibraryMemory, query: str, perspective: str
    ) -> list[tuple[str, float]]:
        """The library's own search in one perspective's memories: ``(memory id, score)``."""
        raise NotImplementedError

    # -- the MemorySystem contract ----------------------------------------------------------------

    def construct(self, conversation: Conversation) -> LibraryMemory:
        if self.services.backbone is None:
            raise ValueError(
                f"{type(self).__name__} builds its memory with an LLM, and this run has no "
                "construction backbone"
            )
        records, stats = self.build(conversation)
        memory = LibraryMemory(records, stats)
        memory.index = self.open_index(memory)
        return memory

    def construction_config(self) -> dict[str, Any]:
        return {
            "library": f"{self.package}=={self.library_version()}",
            "batch_size": self.batch_size,
            "perspectives": self.perspectives,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }

    def dump_memory(self, memory: LibraryMemory) -> dict[str, Any]:
        return {"records": [r.to_json() for r in memory.records], "stats": memory.stats}

    def load_memory(self, payload: dict[str, Any]) -> LibraryMemory:
        records = [Remembered.from_json(data) for data in payload["records"]]
        memory = LibraryMemory(records, payload.get("stats", {}))
        memory.index = self.open_index(memory)
        return memory

    def stored_texts(self, memory: LibraryMemory) -> list[str]:
        return [record.text for record in memory.records]

    def prepare_queries(self, questions: Sequence[Question]) -> None:
        """Embed a batch's questions at once (the library's searches then hit the cache)."""
        self.services.embedder.encode([question.question for question in questions])

    def retrieve(self, memory: LibraryMemory, question: Question) -> Retrieval:
        """Each perspective's ``top_k`` memories by the library's search, merged best first."""
        hits = []
        for perspective in sorted({record.perspective for record in memory.records}):
            hits += self.search(memory, question.question, perspective)
        hits.sort(key=lambda hit: -hit[1])
        items = []
        for memory_id, score in hits:
            record = memory.by_id.get(memory_id)
            if record is not None:
                text = f"{record.perspective}'s memory: {record.text}"
                items.append(
                    MemoryItem(
                        text, record.turn_ids, record.timestamp, record.position, score, "memory"
                    )
                )
        return Retrieval(tuple(items))
