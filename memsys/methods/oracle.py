"""``OracleEvidence``: the reader is handed exactly the gold evidence, a ceiling for every method.

Not a memory system one could deploy (it reads the question's gold evidence), so it lives apart
from the baselines and is never the "best baseline" a method is tested against. A table row for
it shows how far each method is from perfect retrieval with the same reader and context budget:
the gap that better retrieval could close, and, below it, what the reader fails on even with the
evidence in hand.

``unit: turns`` hands over the evidence turns (LoCoMo's ``evidence``, LongMemEval's
``has_answer`` turns); ``unit: sessions`` every turn of the evidence sessions (LongMemEval's
``answer_session_ids``, the granularity its paper's oracle setting uses). A question without
evidence at that unit (LoCoMo's adversarial items may have none) gets an empty context.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from memsys.base import MemorySystem, Services, item_from_json, item_to_json
from memsys.methods.baselines import turn_item
from memsys.types import Conversation, MemoryItem, Question, Retrieval

UNITS = ("turns", "sessions")


@dataclass(frozen=True)
class OracleMemory:
    """Every turn as an item, with the session each came from."""

    items: tuple[MemoryItem, ...]
    sessions: tuple[str, ...]


class OracleEvidence(MemorySystem[OracleMemory]):
    """Every turn is stored; retrieval returns the question's gold evidence, oldest first."""

    def __init__(self, services: Services, unit: Literal["turns", "sessions"] = "turns") -> None:
        super().__init__(services)
        if unit not in UNITS:
            raise ValueError(f"unit must be one of {list(UNITS)}, got {unit!r}")
        self.unit = unit

    def construct(self, conversation: Conversation) -> OracleMemory:
        turns = conversation.turns
        return OracleMemory(
            tuple(turn_item(turn, i) for i, turn in enumerate(turns)),
            tuple(turn.session_id for turn in turns),
        )

    def retrieve(self, memory: OracleMemory, question: Question) -> Retrieval:
        if self.unit == "turns":
            gold = set(question.evidence)
            kept = [item for item in memory.items if gold & set(item.turn_ids)]
        else:
            sessions = set(question.evidence_sessions)
            kept = [
                item
                for item, session in zip(memory.items, memory.sessions, strict=True)
                if session in sessions
            ]
        return Retrieval(tuple(kept), ranking=())  # the rest: unranked, closing the ranking

    def construction_config(self) -> dict[str, Any]:
        return {}

    def dump_memory(self, memory: OracleMemory) -> dict[str, Any]:
        return {
            "items": [item_to_json(item) for item in memory.items],
            "sessions": list(memory.sessions),
        }

    def load_memory(self, payload: dict[str, Any]) -> OracleMemory:
        items = tuple(item_from_json(item) for item in payload["items"])
        return OracleMemory(items, tuple(payload["sessions"]))

    def stored_texts(self, memory: OracleMemory) -> list[str]:
        return [item.text for item in memory.items]
