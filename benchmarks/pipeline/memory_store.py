"""Constructed memories cached on disk, keyed by what built them, checked before trust.

The key hashes the method's construction identity and the conversation's content; files are
JSON with the payload's sha256 beside it, written atomically through a ``.part`` file, named by
hashes only (never the dataset's id), and keep what their construction cost (:data:`COST_KEYS`;
``None`` in files written before costs were recorded). Names and layout: docs/running.md.
A ``.part`` older than :data:`STALE_PART_S` is a killed writer's and is removed on opening."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsys.base import MemorySystem, undeclared_services
from memsys.files import replace_file
from memsys.types import Conversation
from memsys.usage import EMBEDDER, LLM, PARSER, Usage, recording

log = logging.getLogger(__name__)

#: Age after which a ``.part`` file is taken for a dead writer's: a live one writes in seconds.
STALE_PART_S = 3600.0
#: An id that the older file names could hold as it is (LoCoMo's ``conv-26``, LongMemEval's
#: ``gpt4_7a0daae1``): the only ids whose older memory files are looked for.
_PLAIN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
#: A construction's cost as a memory file keeps it: LLM requests, texts embedded, texts parsed.
COST_KEYS = {LLM: "llm_requests", EMBEDDER: "texts_embedded", PARSER: "texts_parsed"}


@dataclass(frozen=True)
class Got:
    """A conversation's memory as the store hands it over: whether from disk, its serialized size
    and its cost (:data:`COST_KEYS`; None for older files)."""

    memory: Any
    loaded: bool
    size_bytes: int
    cost: dict[str, int] | None


def construction_cost(usage: Usage) -> dict[str, int]:
    """What a construction asked of the services, under :data:`COST_KEYS`' names."""
    return {name: usage.amounts[service] for service, name in COST_KEYS.items()}


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace: the form every content hash here is taken of."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def conversation_digest(conversation: Conversation) -> str:
    """sha256 of the conversation's sessions and turns (questions excluded: they do not shape memory)."""
    sessions = [
        [
            session.session_id,
            session.date_text,
            [[t.turn_id, t.speaker, t.text] for t in session.turns],
        ]
        for session in conversation.sessions
    ]
    return hashlib.sha256(
        canonical_json([conversation.conversation_id, sessions]).encode()
    ).hexdigest()


@dataclass
class MemoryStore:
    """A folder of memory files, one per (construction identity, conversation)."""

    root: Path
    rebuilt_corrupt: int = 0

    def __post_init__(self) -> None:
        _remove_stale_parts(self.root)

    def key(self, system: MemorySystem[Any], conversation: Conversation) -> str:
        identity = canonical_json(
            {
                "system": system.construction_identity(),
                "conversation": conversation_digest(conversation),
            }
        )
        return hashlib.sha256(identity.encode()).hexdigest()

    def path(self, system: MemorySystem[Any], conversation: Conversation) -> Path:
        """Where the memory is stored: a name of hashes, whatever the conversation's id."""
        named = hashlib.sha256(conversation.conversation_id.encode(errors="surrogatepass"))
        return (
            self._folder(system)
            / f"{named.hexdigest()[:16]}-{self.key(system, conversation)[:16]}.json"
        )

    def _folder(self, system: MemorySystem[Any]) -> Path:
        return self.root / type(system).__name__.lower()

    def _older_path(self, system: MemorySystem[Any], conversation: Conversation) -> Path | None:
        """The name an older version stored the memory under, for a plain id only."""
        if not _PLAIN_ID.fullmatch(conversation.conversation_id):
            return None
        key = self.key(system, conversation)[:16]
        return self._folder(system) / f"{conversation.conversation_id}-{key}.json"

    def load_or_build(self, system: MemorySystem[Any], conversation: Conversation) -> Got:
        """The memory, from disk or built now (an undeclared service used in building it raises
        before it is stored)."""
        path = self.path(system, conversation)
        envelope = self._read(path, conversation.conversation_id)
        if envelope is None and (older := self._older_path(system, conversation)) is not None:
            envelope = self._read(older, None)
            if envelope is not None:
                self._store(path, conversation.conversation_id, envelope)
        if envelope is not None:
            payload = envelope["payload"]
            memory = system.load_memory(payload)
            return Got(memory, True, _size(payload), envelope.get("cost"))
        with recording() as used:
            memory = system.construct(conversation)
        undeclared_services(system, used)
        payload = system.dump_memory(memory)
        cost = construction_cost(used)
        self._store(path, conversation.conversation_id, {"payload": payload, "cost": cost})
        return Got(memory, False, _size(payload), cost)

    def _store(self, path: Path, conversation_id: str, envelope: dict[str, Any]) -> None:
        try:
            self._write(path, conversation_id, envelope["payload"], envelope.get("cost"))
        except OSError as error:
            log.warning("could not store memory file %s (%s); keeping it in RAM only", path, error)

    def _read(self, path: Path, conversation_id: str | None) -> dict[str, Any] | None:
        """The envelope of ``path`` (payload and cost); None when absent, corrupt, or (with
        ``conversation_id``) another conversation's."""
        if not path.exists():
            return None
        try:
            envelope = json.loads(path.read_text(encoding="utf-8"))
            payload_text = canonical_json(envelope["payload"])
            if hashlib.sha256(payload_text.encode()).hexdigest() != envelope["sha256"]:
                raise ValueError("checksum mismatch")
            if conversation_id is not None and envelope["conversation_id"] != conversation_id:
                raise ValueError(f"holds conversation {envelope['conversation_id']!r}")
        except (ValueError, KeyError, TypeError) as error:
            log.warning("memory file %s is corrupt (%s); rebuilding", path, error)
            self.rebuilt_corrupt += 1
            return None
        return envelope

    def _write(
        self,
        path: Path,
        conversation_id: str,
        payload: dict[str, Any],
        cost: dict[str, int] | None,
    ) -> None:
        digest = hashlib.sha256(canonical_json(payload).encode()).hexdigest()
        envelope = {"conversation_id": conversation_id, "sha256": digest, "payload": payload}
        if cost is not None:
            envelope["cost"] = cost
        document = json.dumps(envelope, ensure_ascii=False)
        replace_file(path, document.encode("utf-8"))


def _size(payload: dict[str, Any]) -> int:
    """A payload's serialized size: UTF-8 bytes of its canonical JSON."""
    return len(canonical_json(payload).encode("utf-8"))


def _remove_stale_parts(root: Path) -> None:
    """Delete the ``.part`` files under ``root`` older than :data:`STALE_PART_S`."""
    cutoff = time.time() - STALE_PART_S
    for part in root.glob("*/*.part"):
        try:
            if part.stat().st_mtime < cutoff:
                part.unlink()
                log.info("removed %s, left by a writer that did not finish", part)
        except FileNotFoundError:
            pass  # another process removed it first
