"""The data model every loader produces and every method consumes.

Frozen dataclasses so that memories, caches and runs can hash and compare them, and so that no
method can quietly edit the data it is evaluated on. Turn ids are stable across runs (LoCoMo's
`dia_id` such as ``D3:7``; LongMemEval ``<session_id>:<index>``): evidence recall is computed
from them without any LLM.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

#: LoCoMo's integer categories, as the dataset's own evaluation code reads them.
LOCOMO_CATEGORIES: dict[int, str] = {
    1: "multi_hop",
    2: "temporal",
    3: "open_domain",
    4: "single_hop",
    5: "adversarial",
}

#: LongMemEval's question types, normalized to identifiers.
LONGMEMEVAL_CATEGORIES: dict[str, str] = {
    "single-session-user": "single_session_user",
    "single-session-assistant": "single_session_assistant",
    "single-session-preference": "single_session_preference",
    "multi-session": "multi_session",
    "temporal-reasoning": "temporal_reasoning",
    "knowledge-update": "knowledge_update",
}


@dataclass(frozen=True, slots=True)
class Turn:
    """One utterance of a conversation.

    ``text`` is what a reader sees. For a LoCoMo image turn it is the utterance followed by
    ``" [shares an image: <caption>]"``; the bare caption is also kept in ``image_caption``.
    ``has_answer`` is LongMemEval's per-turn evidence flag (``None`` where the data has none).
    """

    turn_id: str
    session_id: str
    index: int
    speaker: str
    text: str
    timestamp: datetime | None = None
    image_caption: str | None = None
    has_answer: bool | None = None


@dataclass(frozen=True, slots=True)
class Session:
    """A dated block of consecutive turns; ``date_text`` keeps the dataset's original string."""

    session_id: str
    timestamp: datetime | None
    date_text: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True, slots=True)
class Question:
    """A QA item with its normalized category and its evidence.

    ``evidence`` holds turn ids, ``evidence_sessions`` session ids (LongMemEval's
    ``answer_session_ids``; for LoCoMo the sessions of the evidence turns). For LoCoMo category-5
    (adversarial) items ``answer`` is the dataset's ``adversarial_answer`` (the answer the
    question presupposes); where the item also carries an ``answer`` it is in ``original_answer``.
    """

    question_id: str
    conversation_id: str
    question: str
    answer: str
    category: str
    evidence: tuple[str, ...] = ()
    evidence_sessions: tuple[str, ...] = ()
    question_date: datetime | None = None
    category_code: int | None = None
    adversarial_answer: str | None = None
    original_answer: str | None = None
    is_abstention: bool = False


@dataclass(frozen=True, slots=True)
class Conversation:
    """A multi-session history and the questions asked about it.

    LoCoMo has ten conversations with many questions each; a LongMemEval instance is one
    question with its own haystack, so it becomes a conversation with a single question.
    """

    conversation_id: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]
    speakers: tuple[str, ...] = ()
    metadata: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def turns(self) -> tuple[Turn, ...]:
        """All turns in time order (sessions are stored in time order)."""
        return tuple(turn for session in self.sessions for turn in session.turns)


@dataclass(frozen=True, slots=True)
class SegmentationDialogue:
    """A dialogue for topic segmentation.

    ``boundary_labels[i] == 1`` means utterance ``i`` ends a topic segment; the last label is
    always 0 (SuperDialSeg's convention, see METRICS.md). ``speakers`` is empty when unknown.
    """

    dialogue_id: str
    utterances: tuple[str, ...]
    boundary_labels: tuple[int, ...]
    speakers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.utterances) != len(self.boundary_labels):
            raise ValueError(
                f"dialogue {self.dialogue_id}: {len(self.utterances)} utterances but "
                f"{len(self.boundary_labels)} labels"
            )
        if self.speakers and len(self.speakers) != len(self.utterances):
            raise ValueError(f"dialogue {self.dialogue_id}: speakers do not match utterances")


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One unit a method hands the reader: its text and the turns it came from.

    ``turn_ids`` is the provenance that makes retrieval measurable without an LLM;
    ``timestamp`` (the source session's date) dates the rendered context and ``position`` (the
    index of its first source turn in the conversation) orders items within one session.
    """

    text: str
    turn_ids: tuple[str, ...]
    timestamp: datetime | None = None
    position: int = 0
    score: float = 0.0
    kind: str = "turn"


@dataclass(frozen=True, slots=True)
class Retrieval:
    """What ``retrieve`` returns: items best first, as the method ranked them, and optionally a
    flat JSON ``trace`` of how they were chosen (recorded with the question; ``group`` names the
    bucket the ablation table reports it under, numbers are measures).

    ``ranking`` is for the ranking metrics only and never reaches the reader: the turns the
    method ranks below its items, best first, as deep as its scores go (every unit of its
    memory), so that a metric at a cut-off deeper than the items is the method's and not the
    items' depth. ``None``: the method ranks no deeper than its items (the stored ranking then
    ends with them and a metric past its depth is not computable).
    """

    items: tuple[MemoryItem, ...]
    trace: dict[str, Any] | None = None
    ranking: tuple[str, ...] | None = None

    @property
    def turn_ids(self) -> tuple[str, ...]:
        """Every source turn id, once, in rank order."""
        return ranking_of(self.items)

    @property
    def ranked_turn_ids(self) -> tuple[str, ...]:
        """The items' turns, then :attr:`ranking`'s, each once: what the ranking metrics score."""
        return tuple(dict.fromkeys((*self.turn_ids, *(self.ranking or ()))))


def ranking_of(items: Iterable[MemoryItem]) -> tuple[str, ...]:
    """The turn ids of ``items`` (a method's deeper ranking, best first), each once."""
    return tuple(dict.fromkeys(turn_id for item in items for turn_id in item.turn_ids))
