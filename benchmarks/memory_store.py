"""Constructed memories cached on disk, keyed by what built them, checked before trust.

Key = sha256 of the method's construction identity (class, version, config, embedder,
construction model) and the conversation's content, so a sweep over answering backbones or prompts
reuses memories and any change to what builds them rebuilds. Files are JSON (no pickle) with the
payload's sha256 beside it; a file that fails to parse or whose checksum does not match is
rebuilt, never trusted. Writes go to a temporary ``.part`` file renamed into place (atomic on
POSIX); a write that fails (a full disk) removes its ``.part`` and the run goes on with the memory
in RAM. A ``.part`` left by a killed writer is removed when a store opens, once it is older than
:data:`STALE_PART_S`: younger ones may belong to a live writer in another process of the sweep.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsys.base import MemorySystem
from memsys.files import replace_file
from memsys.types import Conversation

log = logging.getLogger(__name__)

#: Age after which a ``.part`` file is taken for a dead writer's: a live one writes in seconds.
STALE_PART_S = 3600.0


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
        method = type(system).__name__.lower()
        return (
            self.root
            / method
            / f"{conversation.conversation_id}-{self.key(system, conversation)[:16]}.json"
        )

    def load_or_build(
        self, system: MemorySystem[Any], conversation: Conversation
    ) -> tuple[Any, bool]:
        """The memory and whether it came from disk."""
        path = self.path(system, conversation)
        payload = self._read(path)
        if payload is not None:
            return system.load_memory(payload), True
        memory = system.construct(conversation)
        try:
            self._write(path, system.dump_memory(memory))
        except OSError as error:
            log.warning("could not store memory file %s (%s); keeping it in RAM only", path, error)
        return memory, False

    def _read(self, path: Path) -> Any:
        if not path.exists():
            return None
        try:
            envelope = json.loads(path.read_text(encoding="utf-8"))
            payload_text = canonical_json(envelope["payload"])
            if hashlib.sha256(payload_text.encode()).hexdigest() != envelope["sha256"]:
                raise ValueError("checksum mismatch")
        except (ValueError, KeyError, TypeError) as error:
            log.warning("memory file %s is corrupt (%s); rebuilding", path, error)
            self.rebuilt_corrupt += 1
            return None
        return envelope["payload"]

    def _write(self, path: Path, payload: dict[str, Any]) -> None:
        digest = hashlib.sha256(canonical_json(payload).encode()).hexdigest()
        document = json.dumps({"sha256": digest, "payload": payload}, ensure_ascii=False)
        replace_file(path, document.encode("utf-8"))


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
