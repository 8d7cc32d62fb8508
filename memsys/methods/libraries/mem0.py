"""Mem0 (Chhikara et al., 2025; PyPI ``mem0ai``, the open-source ``Memory`` class) as a memory
method: its own fact-extraction prompt, its own ADD / UPDATE / DELETE / NONE update step and its
own vector search, with the run's construction backbone and the harness embedder behind them.

How it is wired (docs/methods/mem0.md):

* ``Memory.from_config`` with the library's ``openai`` LLM and ``openai`` embedder, both pointed
  at a :class:`~memsys.llm.bridge.BackboneBridge` on 127.0.0.1: every chat request goes through
  the run's construction backbone (its response cache, accounting and retries), every embedding
  through the harness embedder. The vector store is the library's default kind, Qdrant, as an
  in-memory local client; the history database is SQLite in memory. Telemetry is off
  (``MEM0_TELEMETRY=False``, set before the library is imported, and checked after); the
  library's home folder (``MEM0_DIR``) is a folder under the run's cache, not ``~/.mem0``.
  The library's OpenAI clients neither retry nor time out (``max_retries=0``,
  ``timeout=None``): the backbone behind the bridge does both, and a client's resend would
  only ask the backbone the same question again.
* The conversation is added as Mem0's LoCoMo evaluation adds it (``perspectives: speakers``,
  :mod:`.common`): per speaker (``user_id``), session by session, 2 messages at a time,
  ``"<speaker>: <text>"``, with the session date as metadata.
* Mem0's fact-extraction prompt states "Today's date is <the date the library was imported>".
  That date would make every request differ from one day to the next (no re-run could be
  served from the cache) and is not the conversation's date; with ``prompt_date: session`` (the
  default) each batch gets the library's own prompt with the date of its session instead
  (``custom_fact_extraction_prompt`` set to that text, which takes the same path through the
  library as its default prompt); ``prompt_date: library`` leaves the library's prompt as is.
* Sampling: greedy (``temperature: 0``, ``top_p: 1``) like every harness call (the library's
  defaults are 0.1 and 0.1); ``max_tokens`` is the library's default (2000).
* Retrieval is the library's ``Memory.search`` (query embedding, cosine top-k, ``user_id``
  filter) over a store rebuilt from the saved memories: ``top_k`` per speaker (30, what the
  evaluation's ``run-mem0-search`` asks for), merged by score.
* A library call that raises (Mem0 does not catch a failed extraction request) raises the
  bridge's failure, the harness's own error (a replay-mode cache miss, a tripped breaker), when
  there is one. Replies Mem0 cannot parse, which it logs and drops, are counted
  (``stats.unparseable_replies``).

Turn ids come from the events ``Memory.add`` returns (see :mod:`.common`). What the library does
not tell: which of a batch's messages a fact came from (a memory carries its batch's turn ids),
and which old memory a ``NONE`` decision matched (the batch then adds no provenance).
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
import weakref
from pathlib import Path
from types import ModuleType
from typing import Any

from memsys.base import Services, check_choices
from memsys.llm.bridge import BackboneBridge
from memsys.methods.libraries.common import (
    LIST_LIMIT,
    Batch,
    LibraryMemory,
    LibraryMemorySystem,
    Provenance,
    Remembered,
    batches,
    embedding_dims,
    require,
)
from memsys.types import Conversation, Session, Turn

#: The line of Mem0's fact-extraction prompt that dates it (replaced by the session's date).
TODAY_LINE = re.compile(r"Today's date is \d{4}-\d{2}-\d{2}\.")
#: Which date the fact-extraction prompt states: the batch's session's, or the library's own
#: (the day it was imported).
PROMPT_DATES = ("session", "library")
_IMPORT_LOCK = threading.Lock()


def import_mem0(home: Path) -> ModuleType:
    """The library, imported with telemetry off and its home folder at ``home``.

    Both settings are read once, when the library is first imported: ``MEM0_TELEMETRY`` is
    forced off (and the imported flag checked), ``MEM0_DIR`` is set unless the caller set it.
    """
    with _IMPORT_LOCK:
        os.environ["MEM0_TELEMETRY"] = "False"
        if "MEM0_DIR" not in os.environ:
            home.mkdir(parents=True, exist_ok=True)
            os.environ["MEM0_DIR"] = str(home)
        mem0 = require("mem0", "mem0", "mem0ai")
        telemetry = require("mem0.memory.telemetry", "mem0", "mem0ai")
        telemetry.MEM0_TELEMETRY = False  # imported before us with it on: off from here
        telemetry.client_telemetry.posthog.disabled = True
    if os.environ.get("OPENROUTER_API_KEY"):
        raise RuntimeError(
            "OPENROUTER_API_KEY is set: Mem0's OpenAI client would send its requests to "
            "OpenRouter instead of the run's backbone; unset it for this run"
        )
    return mem0


def render_turn(turn: Turn, session: Session) -> str:
    """A message as Mem0's LoCoMo evaluation writes it."""
    return f"{turn.speaker}: {turn.text}"


class Mem0(LibraryMemorySystem):
    """Mem0's open-source ``Memory`` (see the module docstring)."""

    extra = "mem0"
    package = "mem0ai"

    def __init__(
        self,
        services: Services,
        *,
        extraction: str = "llm",
        batch_size: int = 2,
        perspectives: str = "speakers",
        top_k: int = 30,
        max_tokens: int = 2000,
        temperature: float = 0.0,
        top_p: float = 1.0,
        prompt_date: str = "session",
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
        check_choices(("prompt_date", prompt_date, PROMPT_DATES))
        self.top_p = top_p
        self.prompt_date = prompt_date
        #: The embeddings-only bridge searches use: started on first need, stopped when the
        #: method is collected or the process exits.
        self._search_bridge: BackboneBridge | None = None
        self._search_bridge_lock = threading.Lock()

    def construction_config(self) -> dict[str, Any]:
        return {
            **super().construction_config(),
            "top_p": self.top_p,
            "prompt_date": self.prompt_date,
        }

    # -- the library -----------------------------------------------------------------------------

    def _home(self) -> Path:
        root = self.services.cache_dir or Path(tempfile.gettempdir())
        return Path(root) / "mem0_home"

    def _memory(self, mem0: ModuleType, bridge: BackboneBridge) -> Any:
        """A fresh ``Memory`` whose LLM and embedder are the bridge, with an in-memory vector
        store and history database."""
        from qdrant_client import QdrantClient

        dims = embedding_dims(self.services.embedder)
        endpoint = {"api_key": "harness-bridge", "openai_base_url": bridge.base_url}
        config = {
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "collection_name": "mem0",
                    "client": QdrantClient(location=":memory:"),
                    "path": ":memory:",  # the config asks for one; the client above is used
                    "embedding_model_dims": dims,
                },
            },
            "llm": {
                "provider": "openai",
                "config": {
                    "model": bridge.model,
                    "temperature": self.temperature,
                    "max_tokens": self.max_tokens,
                    "top_p": self.top_p,
                    **endpoint,
                },
            },
            "embedder": {
                "provider": "openai",
                "config": {
                    "model": self.services.embedder.config.model,
                    "embedding_dims": dims,
                    **endpoint,
                },
            },
            "history_db_path": ":memory:",
            "version": "v1.1",
        }
        memory = mem0.Memory.from_config(config)
        # the backbone behind the bridge retries and times out; the clients must not resend
        for part in (memory.llm, memory.embedding_model):
            part.client = part.client.with_options(timeout=None, max_retries=0)
        return memory

    def fact_prompt(self, batch: Batch) -> str | None:
        """Mem0's own fact-extraction prompt dated with the batch's session, or ``None`` (the
        library's prompt as it is) with ``prompt_date: library``."""
        if self.prompt_date == "library":
            return None
        prompts = require("mem0.configs.prompts", "mem0", "mem0ai")
        prompt = prompts.FACT_RETRIEVAL_PROMPT
        if not TODAY_LINE.search(prompt):
            raise RuntimeError("Mem0's fact-extraction prompt has no date line to set")
        date = batch.session.timestamp
        line = f"Today's date is {date:%Y-%m-%d}." if date else "Today's date is not known."
        return TODAY_LINE.sub(line, prompt)

    def build(self, conversation: Conversation) -> tuple[list[Remembered], dict[str, Any]]:
        mem0 = import_mem0(self._home())
        backbone = self.services.backbone
        embedder = self.services.embedder
        provenance = Provenance()
        plan = batches(conversation, self.batch_size, self.perspectives)
        with BackboneBridge(backbone, embedder, default_max_tokens=self.max_tokens) as bridge:
            memory = self._memory(mem0, bridge)
            try:
                for batch in plan:
                    memory.config.custom_fact_extraction_prompt = self.fact_prompt(batch)
                    metadata = {
                        "timestamp": batch.session.date_text,
                        "session": batch.session.session_id,
                    }
                    try:
                        result = memory.add(
                            batch.messages(render_turn),
                            user_id=batch.perspective,
                            metadata=metadata,
                        )
                    except Exception:
                        bridge.raise_failure()  # the harness's own error, where there is one
                        raise
                    bridge.raise_failure()
                    for event in result.get("results", []):
                        if event.get("event") in ("ADD", "UPDATE"):
                            provenance.written(str(event["id"]), batch)
                        elif event.get("event") == "DELETE":
                            provenance.deleted(str(event["id"]))
                records = []
                for perspective in dict.fromkeys(batch.perspective for batch in plan):
                    listed = memory.get_all(user_id=perspective, limit=LIST_LIMIT)["results"]
                    records += [
                        provenance.remembered(str(item["id"]), perspective, item["memory"])
                        for item in listed
                    ]
                stats = {
                    "batches": len(plan),
                    "events": dict(provenance.events),
                    "chat_requests": bridge.chat_requests,
                    "unparseable_replies": bridge.unparseable_replies,
                    "embedded_texts": bridge.embedded_texts,
                }
            finally:
                memory.db.close()
        records.sort(key=lambda r: (r.position, r.perspective, r.text, r.memory_id))
        return records, stats

    def _bridge(self) -> BackboneBridge:
        """The embeddings-only bridge of :meth:`open_index` and :meth:`search`."""
        with self._search_bridge_lock:
            if self._search_bridge is None:
                bridge = BackboneBridge(None, self.services.embedder).start()
                weakref.finalize(self, bridge.stop)  # also run at exit
                self._search_bridge = bridge
            return self._search_bridge

    def open_index(self, memory: LibraryMemory) -> Any:
        """A ``Memory`` holding ``memory``'s records, for the library's own search (which
        never reads the history database: it is closed at once)."""
        mem0 = import_mem0(self._home())
        index = self._memory(mem0, self._bridge())
        index.db.close()
        records = memory.records
        if records:
            vectors = self.services.embedder.encode([r.text.replace("\n", " ") for r in records])
            payloads = [
                {"data": r.text, "user_id": r.perspective, "created_at": None} for r in records
            ]
            index.vector_store.insert(
                vectors=[v.tolist() for v in vectors],
                payloads=payloads,
                ids=[r.memory_id for r in records],
            )
        return index

    def search(
        self, memory: LibraryMemory, query: str, perspective: str
    ) -> list[tuple[str, float]]:
        found = memory.index.search(query, user_id=perspective, limit=self.top_k)["results"]
        return [(str(hit["id"]), float(hit.get("score") or 0.0)) for hit in found]
