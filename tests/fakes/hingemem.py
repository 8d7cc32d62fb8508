"""What the HingeMem tests share: a two-session conversation written for its element changes
(people, times, places, topics) and services over a hashing embedder."""

from __future__ import annotations

from datetime import datetime

from fakes.embed import HashingModel, plain_words
from memsys.base import Services
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.nlp import NLP
from memsys.types import Conversation, Question, Session, Turn

DAY1 = datetime(2023, 5, 8, 13, 56)
DAY2 = datetime(2023, 6, 20, 10, 0)


def session(index: int, when: datetime, lines: list[tuple[str, str]]) -> Session:
    sid = f"session_{index}"
    turns = tuple(
        Turn(f"D{index}:{i}", sid, i - 1, speaker, text, when)
        for i, (speaker, text) in enumerate(lines, 1)
    )
    return Session(sid, when, when.strftime("%-I:%M %p on %-d %B, %Y"), turns)


def tiny_conversation() -> Conversation:
    first = session(
        1,
        DAY1,
        [
            ("Alice", "Hi Bob! I went to a pottery class yesterday and made a blue bowl."),
            ("Bob", "Nice! Pottery sounds relaxing. Was the pottery class hard?"),
            ("Alice", "A little, but the teacher was patient and the clay was fun."),
            ("Bob", "By the way, my sister Carla moved to Paris last week."),
            ("Alice", "Paris! Does Carla like her new apartment in Paris?"),
            ("Bob", "She loves it, the apartment has a view of the river."),
        ],
    )
    second = session(
        2,
        DAY2,
        [
            ("Bob", "Hey Alice, I adopted a puppy named Max yesterday!"),
            ("Alice", "A puppy! What breed is Max?"),
            ("Bob", "Max is a golden retriever and loves the park."),
            ("Alice", "I finished my pottery course and fired a vase last month."),
        ],
    )
    questions = (
        Question(
            "tiny:q0",
            "tiny",
            "When did Alice go to the pottery class?",
            "7 May 2023",
            "temporal",
            ("D1:1",),
        ),
        Question("tiny:q1", "tiny", "Where did Carla move?", "Paris", "single_hop", ("D1:4",)),
        Question("tiny:q2", "tiny", "What pets does Bob have?", "a puppy", "single_hop", ("D2:1",)),
    )
    return Conversation("tiny", (first, second), questions, ("Alice", "Bob"))


def hashing_services(nlp: NLP) -> Services:
    """Services whose embedder hashes plain words: fast and deterministic (the slow test uses
    MiniLM)."""
    model = HashingModel(256, plain_words)
    embedder = Embedder(EmbedderConfig(model="hashing-test"), EmbeddingCache(), model=model)
    return Services(embedder=embedder, tokens=None, nlp=nlp)  # type: ignore[arg-type]
