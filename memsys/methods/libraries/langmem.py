"""LangMem (LangChain, PyPI ``langmem``) as a memory method: its memory store manager
(``create_memory_store_manager``), i.e. its own memory-manager instructions, its trustcall
extraction with inserts, JSON-patch updates and deletes, and its store search, with the run's
construction backbone and the harness embedder behind them.

How it is wired (docs/methods/langmem.md):

* The manager's chat model is LangChain's ``ChatOpenAI`` pointed at a
  :class:`~memsys.llm.bridge.BackboneBridge` on 127.0.0.1, so every request goes through the run's
  construction backbone (response cache, accounting, retries). LangMem calls tools; the
  harness's backbones take none, so the bridge asks for tool calls in llama.cpp's generic JSON
  form (:mod:`memsys.llm.bridge`). The store is LangGraph's ``InMemoryStore`` whose index embeds
  with the harness embedder (its documented ``embed`` callable). LangSmith tracing is off for
  every call (``tracing_context(enabled=False)``).
* The conversation is fed as Mem0's LoCoMo evaluation fed LangMem (:mod:`.common`): one memory
  (namespace ``("memories", <speaker>)``) per speaker, session by session, 2 messages a call,
  each ``"<session date> | <speaker>: <text>"``. That evaluation drove LangMem's hot-path tools
  from a ReAct agent that also kept the whole thread in its prompt; the store manager is LangMem's
  own way of forming memories from a conversation in the background and needs no agent.
* LangMem names each new memory and each prompt's session block with ``uuid4()``; the ids of
  existing memories appear in later prompts. So that a re-run sends the same requests (and is
  served from the cache), those ids are drawn from a generator seeded by the conversation while a
  memory is built (one build at a time per process). Nothing else in the library is changed.
* Retrieval is the store's own search (``InMemoryStore.search``: the query embedded, cosine over
  each memory's embedded value) in each speaker's namespace: ``top_k`` per speaker (the limit of
  LangMem's search tool, 10), merged by score.

A batch on which the library itself raises is skipped and counted (``stats.library_errors``):
trustcall 0.0.39's repair step, which runs when a tool call fails validation (a small model
patching a memory id that does not exist), fails under LangGraph 1.x with ``AttributeError:
'ExtractionState' object has no attribute 'tool_call_id'``. A failure of the backbone itself
still stops the build.

Turn ids come from what ``manager.invoke`` writes (the keys it puts) and what disappears from the
namespace (deletes), see :mod:`.common`; LangMem, like Mem0, does not say which message of a
batch a memory came from.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from memsys.embed import Embedder
from memsys.llm.bridge import BackboneBridge
from memsys.methods.libraries.common import (
    LibraryMemory,
    LibraryMemorySystem,
    Provenance,
    Remembered,
    batches,
    require,
)
from memsys.types import Conversation, Session, Turn

#: How many memories one namespace listing may return.
LIST_LIMIT = 1_000_000
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

    def _libraries(self) -> tuple[ModuleType, ModuleType, ModuleType, Any]:
        langmem = require("langmem", "langmem", "langmem")
        extraction = require("langmem.knowledge.extraction", "langmem", "langmem")
        store = require("langgraph.store.memory", "langmem", "langmem")
        tracing = require("langsmith", "langmem", "langmem").tracing_context
        return langmem, extraction, store, tracing

    def _store(self, store_module: ModuleType) -> Any:
        dims = len(self.services.embedder.encode(["dimension probe"])[0])
        index = {"dims": dims, "embed": embed_function(self.services.embedder)}
        return store_module.InMemoryStore(index=index)

    def build(self, conversation: Conversation) -> tuple[list[Remembered], dict[str, Any]]:
        langmem, extraction, store_module, tracing_context = self._libraries()
        chat_openai = require("langchain_openai", "langmem", "langmem").ChatOpenAI
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
                max_retries=0,
            )
            manager = langmem.create_memory_store_manager(
                model, namespace=("memories", "{langgraph_user_id}"), store=store
            )
            for batch in plan:
                namespace = ("memories", batch.perspective)
                before = _keys(store, namespace)
                config = {"configurable": {"langgraph_user_id": batch.perspective}}
                try:
                    puts = manager.invoke({"messages": batch.messages(render_turn)}, config=config)
                except Exception as error:  # the library's own failure, not the backbone's
                    bridge.raise_failure()
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
                "library_errors": len(failures),
                "library_error_examples": failures[:3],
            }
        records = []
        for perspective in dict.fromkeys(batch.perspective for batch in plan):
            for item in store.search(("memories", perspective), limit=LIST_LIMIT):
                records.append(
                    provenance.remembered(item.key, perspective, memory_text(item.value))
                )
        stats["events"] = dict(provenance.events)
        records.sort(key=lambda r: (r.position, r.perspective, r.text, r.memory_id))
        return records, stats

    def open_index(self, memory: LibraryMemory) -> Any:
        """An ``InMemoryStore`` holding ``memory``'s records as LangMem stores them."""
        _, _, store_module, _ = self._libraries()
        store = self._store(store_module)
        for record in memory.records:
            value = {"kind": "Memory", "content": {"content": record.text}}
            store.put(("memories", record.perspective), record.memory_id, value)
        return store

    def search(
        self, memory: LibraryMemory, query: str, perspective: str
    ) -> list[tuple[str, float]]:
        found = memory.index.search(("memories", perspective), query=query, limit=self.top_k)
        return [(item.key, float(item.score or 0.0)) for item in found]


def _keys(store: Any, namespace: tuple[str, ...]) -> set[str]:
    return {item.key for item in store.search(namespace, limit=LIST_LIMIT)}
