"""TurnRAG over exchanges: SeCom's turn-level unit, a turn and its reply, beside one utterance.

Hand-written conversations (LoCoMo-style ids ``D<session>:<i>``); BM25 rankings are exact, the
dense retriever runs on the hashing stand-in for MiniLM.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fakes.dialogues import build_conversation
from fakes.embed import hashing_embedder
from hydra.utils import instantiate

from benchmarks.config.compose import compose_config
from benchmarks.metrics.retrieval import evidence_recall
from memsys.base import Services
from memsys.compression import IdentityCompressor, Passage
from memsys.methods.baselines import TurnRAG, turn_item
from memsys.tokens import TokenCounter
from memsys.types import Conversation, MemoryItem, Question

MAY, JUNE = datetime(2023, 5, 8), datetime(2023, 6, 1)
FIRST = [
    ("Ann", "Where did you go on holiday?"),
    ("Ben", "We sailed around Crete for two weeks."),
    ("Ann", "My sister adopted a kitten."),
    ("Ben", "What is the kitten called?"),
    ("Ann", "Pickle, because of his green eyes."),
]
SECOND = [("Ben", "I started a pottery class."), ("Ann", "Send me a photo of your first bowl!")]


@pytest.fixture(scope="module")
def conversation() -> Conversation:
    return build_conversation([(MAY, FIRST), (JUNE, SECOND)], ("Ann", "Ben"))


def services(tmp_path: Path | None = None) -> Services:
    return Services(hashing_embedder(), TokenCounter(), cache_dir=tmp_path)


def compose_method(*overrides: str) -> Any:
    return compose_config(list(overrides)).method


def test_exchange_items_pair_turns_within_each_session(conversation: Conversation) -> None:
    system = TurnRAG(services(), unit="exchange", retriever="bm25")
    items = system.construct(conversation).items
    assert [item.turn_ids for item in items] == [
        ("D1:1", "D1:2"),
        ("D1:3", "D1:4"),
        ("D1:5",),  # a session's trailing odd turn stands alone; no pair crosses sessions
        ("D2:1", "D2:2"),
    ]
    assert [item.position for item in items] == [0, 2, 4, 5]  # index of the first turn
    assert [item.timestamp for item in items] == [MAY, MAY, MAY, JUNE]
    assert {item.kind for item in items} == {"exchange"}
    assert items[0].text == (
        "Ann: Where did you go on holiday?\nBen: We sailed around Crete for two weeks."
    )


def test_utterance_items_and_memory_keys_are_unchanged(conversation: Conversation) -> None:
    plain = TurnRAG(services(), retriever="bm25")
    turns = conversation.turns
    assert plain.construct(conversation).items == tuple(
        turn_item(turn, i) for i, turn in enumerate(turns)
    )
    assert plain.construction_config() == {}  # cached utterance memories keep their keys
    exchange = TurnRAG(services(), unit="exchange", retriever="bm25")
    assert exchange.construction_config() == {"unit": "exchange"}
    with pytest.raises(ValueError, match="unit must be one of"):
        TurnRAG(services(), unit="session")


def test_an_exchange_carries_the_evidence_of_both_its_turns(conversation: Conversation) -> None:
    """The question's words are in the reply (D1:2), its evidence is the request (D1:1): the
    best utterance misses it, the best exchange holds it."""
    asked = Question("tiny:q", "tiny", "Who sailed around Crete?", "", "single_hop", ("D1:1",))

    def best(unit: str) -> MemoryItem:
        system = TurnRAG(services(), unit=unit, retriever="bm25", top_k=1)
        (item,) = system.retrieve(system.construct(conversation), asked).items
        return item

    assert best("utterance").turn_ids == ("D1:2",)
    assert evidence_recall(asked.evidence, best("utterance").turn_ids) == 0.0
    assert best("exchange").turn_ids == ("D1:1", "D1:2")
    assert evidence_recall(asked.evidence, best("exchange").turn_ids) == 1.0


def test_pairing_is_by_position_also_where_roles_are_named() -> None:
    """LongMemEval's sessions: user + assistant where a session opens with the user and
    alternates; one that opens with the assistant pairs its greeting with the user's request
    (the reading SeCom's own exchanges take; 5 of 948 oracle sessions)."""
    usual = [("user", "Plan a trip to Oslo."), ("assistant", "Day one: the fjord.")]
    greeting = [("assistant", "Hello!"), ("user", "Recommend a novel."), ("assistant", "Dune.")]
    roles = build_conversation([(MAY, usual), (JUNE, greeting)], ("user", "assistant"))
    items = TurnRAG(services(), unit="exchange", retriever="bm25").construct(roles).items
    speakers = [[line.split(":")[0] for line in item.text.split("\n")] for item in items]
    assert speakers == [["user", "assistant"], ["assistant", "user"], ["assistant"]]


def test_memory_round_trips_and_dense_retrieval_runs(
    conversation: Conversation, tmp_path: Path
) -> None:
    system = instantiate(compose_method("method=turn_rag_dense_exchange"), services=services())
    assert isinstance(system, TurnRAG) and system.unit == "exchange"
    assert system.retriever == "dense" and system.top_k is None
    memory = system.construct(conversation)
    loaded = system.load_memory(system.dump_memory(memory))
    assert loaded.items == memory.items
    asked = Question("tiny:q", "tiny", "What is the kitten called?", "", "single_hop")
    hits = system.retrieve(loaded, asked).items
    assert len(hits) == 4 and all(len(hit.turn_ids) in (1, 2) for hit in hits)


def test_configs_differ_from_their_utterance_twins_by_the_unit_alone() -> None:
    for retriever in ("dense", "bm25"):
        plain = dict(compose_method(f"method=turn_rag_{retriever}"))
        exchange = dict(compose_method(f"method=turn_rag_{retriever}_exchange"))
        assert "unit" not in plain  # the utterance configs' run ids are unchanged
        assert exchange == {**plain, "unit": "exchange"}


class Recording(IdentityCompressor):
    """The identity compressor, recording the passages it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.passages: list[Passage] = []

    def compress_many(self, passages: Sequence[Passage]) -> list[str]:
        self.passages += passages
        return super().compress_many(passages)


def test_denoised_exchanges_are_compressed_one_exchange_each(
    conversation: Conversation, tmp_path: Path
) -> None:
    config = compose_method("method=turn_rag_bm25_denoised", "+method.unit=exchange")
    system = instantiate(config, services=services(tmp_path))
    assert system.construction_config()["unit"] == "exchange"
    assert system.construction_config()["compression"]["kind"] == "self_info"
    system.compressor = recording = Recording()
    memory = system.construct(conversation)
    assert [p.markers for p in recording.passages] == [
        ("Ann:", "Ben:"),
        ("Ann:", "Ben:"),
        ("Ann:",),
        ("Ben:", "Ann:"),
    ]
    assert memory.index_texts == tuple(item.text for item in memory.items)
