"""Small hand-written conversations for method tests, built from ``(speaker, text)`` lines."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memsys.types import Conversation, Question, Session, Turn

#: One session: its date and its ``(speaker, text)`` lines.
SessionLines = tuple[datetime, Sequence[tuple[str, str]]]


def build_session(number: int, date: datetime, lines: Sequence[tuple[str, str]]) -> Session:
    """``session_<number>`` with LoCoMo-style turn ids ``D<number>:<i>`` (1-based)."""
    session_id = f"session_{number}"
    turns = tuple(
        Turn(f"D{number}:{i}", session_id, i - 1, speaker, text, date)
        for i, (speaker, text) in enumerate(lines, start=1)
    )
    return Session(session_id, date, f"{date:%d %B %Y}", turns)


def build_conversation(
    sessions: Sequence[SessionLines],
    speakers: tuple[str, str],
    questions: Sequence[Question] = (),
    conversation_id: str = "tiny",
) -> Conversation:
    """A conversation of numbered sessions (1, 2, ...) in the given order."""
    built = tuple(
        build_session(number, date, lines) for number, (date, lines) in enumerate(sessions, 1)
    )
    return Conversation(conversation_id, built, tuple(questions), speakers)
