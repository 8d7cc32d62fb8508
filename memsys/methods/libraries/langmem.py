"""LangMem (LangChain, PyPI ``langmem``) as a memory method: its memory store manager
(``create_memory_store_manager``), i.e. its own memory-manager instructions, its trustcall
extraction with inserts, JSON-patch updates and deletes, and its store search, with the run's
construction backbone and the harness embedder behind them.

How it is wired (docs/methods/langmem.md):

* The manager's chat model is LangChain's ``ChatOpenAI`` pointed at a
  :class:`~memsys.llm.bridge.BackboneBridge` on 127.0.0.1, so every request goes through the run's
  construction backbone (response cache, accounting, retries; the client itself neither retries
  nor times out). LangMem calls tools; the harness's backbones take none, so the bridge asks for
  tool calls in llama.cpp's generic JSON form (:mod:`memsys.llm.bridge`). The store is
  LangGraph's ``InMemoryStore`` whose index embeds with the harness embedder (its documented
  ``embed`` callable). LangSmith tracing is off for every call (``tracing_context(enabled=False)``).
* Mem0's LoCoMo evaluation (the source of the published LangMem numbers,
  ``evaluation/src/langmem.py``) gave each speaker a LangGraph ReAct agent with LangMem's
  hot-path tools (manage and search memory), and fed each agent only that speaker's own
  messages, one per call, as ``user`` messages ``"<session date> | <speaker>: <text>"``, with no
  session breaks, the agent keeping the whole thread in its prompt. The harness uses LangMem's
  memory store manager (``create_memory_store_manager``) in place of that agent: LangMem's own
  way of forming memories from a conversation, which needs no agent and no thread. The feeding
  is the evaluation's as far as the manager allows (``perspectives: own``, ``batch_size: 1``,
  :mod:`.common`): one memory (namespace ``("memories", <speaker>)``) per speaker, its own turns
  one per call; what the manager does not take is the thread (each call sees its message, plus
  the existing memories it searches), since replaying a speaker's whole history in every call
  would make each prompt grow past a small model's context. ``perspectives: speakers`` with
  ``batch_size: 2`` feeds it as the evaluation fed Mem0 instead.
* Speaker names become namespace labels through :func:`namespace_label` (LangGraph refuses a
  label with a ``.``); memories keep the speaker's name.
* LangMem names each new memory and each prompt's session block with ``uuid4()``; the ids of
  existing memories appear in later prompts. So that a re-run sends the same requests (and is
  served from the cache), those ids are drawn from a generator seeded by the conversation while a
  memory is built (one build at a time per process). Nothing else in the library is changed.
* Retrieval is the store's own search (``InMemoryStore.search``: the query embedded, cosine over
  each memory's embedded value) in each speaker's namespace: ``top_k`` per speaker (the limit of
  LangMem's search tool and of the evaluation agent's prompt search, 10), merged by score.

Library failures: trustcall 0.0.39 (LangMem's extraction) fails in its repair step, when a
re-patch is routed to its ``patch`` node with the graph's state, with ``AttributeError:
'ExtractionState' object has no attribute 'tool_call_id'`` (under LangGraph 1.2 and 0.6 alike).
With ``repair_errors: skip`` (the default) a batch on which that error is raised is skipped and
counted (``stats.library_errors``); ``repair_errors: raise`` stops the build. Any other
exception stops the build, the bridge's failure first (the harness's own error: a replay-mode
cache miss, a tripped breaker) when there is one. Replies the library cannot use (no JSON, or no
tool call where one is required), which LangMem takes as a plain answer and stores nothing from,
are counted (``stats.unparseable_replies``).

Turn ids come from what ``manager.invoke`` writes (the keys it puts) and what disappears from the
namespace (deletes), see :mod:`.common`; LangMem, like Mem0, does not say which message of a
batch a memory came from.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from memsys.base import Services, check_choices
from memsys.embed import Embedder
from memsys.llm.bridge import BackboneBridge
from memsys.methods.libraries.common import (
    LIST_LIMIT,
    LibraryMemory,
    LibraryMemorySystem,
    Provenance,
    Remembered,
    batches,
    embedding_dims,
    require,
)
from memsys.types import Conversation, Session, Turn

#: What a batch on which trustcall's repair step fails does (see the module docstring).
REPAIR_ERRORS = ("skip", "raise")
#: Characters LangGraph refuses in a namespace label.
_UNSAFE_LABEL = re.compile(r"[.\x00]")
#: One LangMem build at a time per process: the seeded ids replace a module global.
_BUILD_LOCK = threading.Lock()


class SeededUUID:
    """The ``uuid`` module, except that ``uuid4()`` draws from a seeded generator."""

    def __init__(self, seed: str) -> None:
        self._random = random.Random(hashlib.sha256(seed.encode("utf-8")).hexdigest())
        self._lock = threading.Lock()

    def uuid4(self) -> uuid.UUID:
        with self._lock:
            return uuid.UUID(int=self._random.getrandbits(128), version=4)

    def __getattr__(self, name: str) -> Any:
        return getattr(uuid, name)


@contextmanager
def seeded_ids(module: ModuleType, seed: str) -> Iterator[None]:
    """``module.uuid.uuid4()`` seeded by ``seed`` for the duration."""
    original = module.uuid
    module.uuid = SeededUUID(seed)
    try:
        yield
    finally:
        module.uuid = original


def namespace_label(speaker: str) -> str:
    """``speaker`` as a LangGraph namespace label: as it is where LangGraph takes it, else with
    each ``.`` (or NUL) made ``_`` and a digest of the name appended (also to a name with a
    ``~``, the mark of a mapped label), so that two names never share a label.

    >>> namespace_label("Caroline")
    'Caroline'
    >>> namespace_label("Dr. Jones")
    'Dr_ Jones~9ce384fd'
    >>> namespace_label("")
    '~e3b0c442'
    """
    if speaker and not _UNSAFE_LABEL.search(speaker) and "~" not in speaker:
        return speaker
    digest = hashlib.sha256(speaker.encode("utf-8")).hexdigest()[:8]
    return f"{_UNSAFE_LABEL.sub('_', speaker)}~{digest}"


def is_repair_error(error: BaseException) -> bool:
    """Whether ``error`` is trustcall's known repair-step failure (see the module docstring)."""
    return isinstance(error, AttributeError) and "tool_call_id" in str(error)


def render_turn(turn: Turn, session: Session) -> str:
    """A message as Mem0's LoCoMo evaluation wrote it for LangMem."""
    return f"{session.date_text} | {turn.speaker}: {turn.text}"


def embed_function(embedder: Embedder) -> Any:
    """The store index's ``embed``: texts to vectors with the harness embedder."""

    def embed(texts: list[str]) -> list[list[float]]:
        return [vector.tolist() for vector in embedder.encode(list(texts))]

    return embed


def memory_text(value: dict[str, Any]) -> str:
    """A stored memory's text: a ``Memory``'s content, else the stored content as JSON."""
    content = value.get("content")
    if isinstance(content, dict) and isinstance(content.get("content"), str):
        return content["content"]
    return json.dumps(content, ensure_ascii=False, sort_keys=True)


class LangMem(LibraryMemorySystem):
    """LangMem's memory store manager (see the module docstring)."""

    extra = "langmem"
    package = "langmem"

    def __init__(
        self,
        services: Services,
        *,
        extraction: str = "llm",
        batch_size: int = 1,
        perspectives: str = "own",
        top_k: int = 10,
        max_tokens: int = 2000,
        temperature: float = 0.0,
        repair_errors: str = "skip",
    ) -> None:
        super().__init__(
            services,
            extraction=extraction,
            batch_size=batch_size,
            perspectives=perspectives,
            top_k=top_k,
            max_tokens=max_tokens,
            temperature=temperature,
        )
        check_choices(("repair_errors", repair_errors, REPAIR_ERRORS))
        self.repair_errors = repair_errors

    def construction_config(self) -> dict[str, Any]:
        return {**super().construction_config(), "repair_errors": self.repair_errors}

    def _libraries(self) -> tuple[ModuleType, ModuleType, ModuleType, Any, Any]:
        langmem = require("langmem", "langmem", "langmem")
        extraction = require("langmem.knowledge.extraction", "langmem", "langmem")
        store = require("langgraph.store.memory", "langmem", "langmem")
        tracing = require("langsmith", "langmem", "langmem").tracing_context
        chat_openai = require("langchain_openai", "langmem", "langmem").ChatOpenAI
        return langmem, extraction, store, tracing, chat_openai

    def _store(self, store_module: ModuleType) -> Any:
        dims = embedding_dims(self.services.embedder)
        index = {"dims": dims, "embed": embed_function(self.services.embedder)}
        return store_module.InMemoryStore(index=index)

    def build(self, conversation: Conversation) -> tuple[list[Remembered], dict[str, Any]]:
        langmem, extraction, store_module, tracing_context, chat_openai = self._libraries()
        provenance = Provenance()
        plan = batches(conversation, self.batch_size, self.perspectives)
        store = self._store(store_module)
        failures: list[str] = []
        with (
            BackboneBridge(
                self.services.backbone,
                self.services.embedder,
                default_max_tokens=self.max_tokens,
            ) as bridge,
            _BUILD_LOCK,
            seeded_ids(extraction, conversation.conversation_id),
            tracing_context(enabled=False),
        ):
            model = chat_openai(
                model=bridge.model,
                base_url=bridge.base_url,
                api_key="harness-bridge",
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                max_retries=0,  # the backbone behind the bridge retries and times out
                timeout=None,
            )
            manager = langmem.create_memory_store_manager(
                model, namespace=("memories", "{langgraph_user_id}"), store=store
            )
            for batch in plan:
                label = namespace_label(batch.perspective)
                namespace = ("memories", label)
                before = _keys(store, namespace)
                config = {"configurable": {"langgraph_user_id": label}}
                try:
                    puts = manager.invoke({"messages": batch.messages(render_turn)}, config=config)
                except Exception as error:
                    bridge.raise_failure()  # the harness's own error, where there is one
                    if self.repair_errors == "raise" or not is_repair_error(error):
                        raise
                    failures.append(f"{batch.session.session_id}/{batch.perspective}: {error!r}")
                    continue
                bridge.raise_failure()
                for put in puts:
                    provenance.written(str(put["key"]), batch)
                for key in sorted(before - _keys(store, namespace)):
                    provenance.deleted(key)
            stats = {
                "batches": len(plan),
                "chat_requests": bridge.chat_requests,
                "unparseable_replies": bridge.unparseable_replies,
                "library_errors": len(failures),
                "library_error_examples": failures[:3],
            }
        records = []
        for perspective in dict.fromkeys(batch.perspective for batch in plan):
            namespace = ("memories", namespace_label(perspective))
            for item in store.search(namespace, limit=LIST_LIMIT):
                records.append(
                    provenance.remembered(item.key, perspective, memory_text(item.value))
                )
        stats["events"] = dict(provenance.events)
        records.sort(key=lambda r: (r.position, r.perspective, r.text, r.memory_id))
        return records, stats

    def open_index(self, memory: LibraryMemory) -> Any:
        """An ``InMemoryStore`` holding ``memory``'s records as LangMem stores them."""
        store = self._store(self._libraries()[2])
        for record in memory.records:
            value = {"kind": "Memory", "content": {"content": record.text}}
            store.put(("memories", namespace_label(record.perspective)), record.memory_id, value)
        return store

    def search(
        self, memory: LibraryMemory, query: str, perspective: str
    ) -> list[tuple[str, float]]:
        namespace = ("memories", namespace_label(perspective))
        found = memory.index.search(namespace, query=query, limit=self.top_k)
        return [(item.key, float(item.score or 0.0)) for item in found]


def _keys(store: Any, namespace: tuple[str, ...]) -> set[str]:
    return {item.key for item in store.search(namespace, limit=LIST_LIMIT)}
