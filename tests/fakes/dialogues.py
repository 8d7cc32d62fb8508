"""Small hand-written conversations for method tests, built from ``(speaker, text)`` lines."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from memsys.base import Services
from memsys.embed import Embedder
from memsys.llm import Accounting
from memsys.nlp import NLP
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


def tiny_fixture() -> Conversation:
    """The runner tests' hand-written conversation (tests/fixtures/tiny, 2 sessions, 8 turns)."""
    from benchmarks.data import load_locomo
    from benchmarks.data.paths import REPO_ROOT

    (tiny,) = load_locomo(str(REPO_ROOT / "tests/fixtures/tiny"), "locomo/tiny_conversation.json")
    return tiny


def embedded_llm_services(cache: Path, embedder: Embedder, nlp: NLP) -> tuple[Services, Accounting]:
    """Services whose construction backbone is the real embedded model (conf/backbone/embedded)."""
    from benchmarks.config.compose import compose_config
    from benchmarks.config.services import backbone_config
    from memsys.llm import ResponseCache, build_backbone

    config = backbone_config(compose_config(["backbone=embedded"]), "backbone")
    accounting = Accounting()
    backbone = build_backbone(config, cache=ResponseCache(cache), accounting=accounting)
    services = Services(embedder=embedder, tokens=None, backbone=backbone, nlp=nlp)  # type: ignore[arg-type]
    return services, accounting
