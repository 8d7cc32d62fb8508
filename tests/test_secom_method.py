"""SeCom as a memory method: segments per session, compressed index texts, original texts out.

The self-information compressor runs the real embedded SmolLM2 model (a few hundred tokens);
embeddings come from the hashing stand-in for MiniLM.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest
from dialogues import build_conversation
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from segment_fakes import hashing_embedder, rule_backbone

from benchmarks.data.paths import REPO_ROOT
from memsys.base import Services
from memsys.compression import (
    LLMLINGUA2_MODEL,
    Compressor,
    CompressorUnavailableError,
    LLMLingua2Compressor,
    SelfInformationCompressor,
)
from memsys.kvstore import SQLiteKV
from memsys.methods.secom import SeCom
from memsys.segment.embedding import EmbeddingSegmenter
from memsys.segment.secom import SeComSegmenter
from memsys.segment.texttiling import TextTilingSegmenter
from memsys.tokens import TokenCounter
from memsys.types import Conversation, Question

CONF = REPO_ROOT / "conf"

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


@pytest.fixture(scope="module")
def self_info() -> SelfInformationCompressor:
    return SelfInformationCompressor(rate=0.75)


def services(tokens: TokenCounter, cache_dir: Path | None = None, backbone: Any = None) -> Services:
    return Services(hashing_embedder(), tokens, backbone, cache_dir=cache_dir)


def compose_method(*overrides: str) -> Any:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides)).method


class MarkerCompressor(Compressor):
    """Index text = ``marker<i>`` only: shows which text the retriever ranks."""

    kind = "marker"

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def compress_many(self, texts: Sequence[str]) -> list[str]:
        return [f"marker{i}" for i in range(len(texts))]


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
    assert report["compression"]["texts_compressed"] == len(memory.segments)
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
    last = len(memory.segments) - 1
    (hit,) = system.retrieve(memory, question(f"marker{last}")).items
    assert "marker" not in hit.text and hit.text == memory.segments[last].text


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
        segmenter={"_target_": "memsys.segment.secom.SeComSegmenter", "extraction": "llm"},
        extraction="llm",
        compression="none",
    )
    assert system.uses_llm and isinstance(system.segmenter, SeComSegmenter)
    memory = system.construct(conversation)
    assert len(provider.requests) == 2  # one call per session
    assert "[Exchange 0]: Ann: Our dog Biscuit" in provider.requests[0].messages[-1]["content"]
    segmentation = memory.report["segmentation"]
    assert segmentation["llm_calls"] == 2 and segmentation["fallbacks"] == {"fixed_chunks": 2}
    # fixed chunks of 3 exchanges = 6 turns: session 1 (9 turns) -> 6 + 3, session 2 -> 4
    assert [len(s.turn_ids) for s in memory.segments] == [6, 3, 4]
    assert system.construction_identity()["construction_model"] == backbone.model_id


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
    assert bm25.retriever == "bm25" and bm25.construction_config() == plain.construction_config()
    no_denoise = instantiate(compose_method("method=secom_no_denoise"), services=services(tokens))
    assert no_denoise.construction_config()["compression"] == {"kind": "none"}
    lingua = instantiate(compose_method("method=secom_llmlingua2"), services=services(tokens))
    assert lingua.compressor.identity() == {
        "kind": "llmlingua2",
        "rate": 0.75,
        "model": LLMLINGUA2_MODEL,
    }


# --- the compressors ----------------------------------------------------------------------------

PARAGRAPH = (
    "Ann: I think that maybe we should probably go to the new Italian restaurant on Friday.\n"
    "Ben: Yes, the one next to the library serves handmade ravioli with black truffle.\n"
    "Ann: Great, I will book a table for seven o'clock and tell Carla about it."
)


def test_self_information_keeps_about_rate_of_the_tokens_in_order(
    self_info: SelfInformationCompressor, tokens: TokenCounter
) -> None:
    (compressed,) = self_info.compress_many([PARAGRAPH])
    ratio = tokens.count(compressed) / tokens.count(PARAGRAPH)
    assert 0.7 <= ratio <= 0.85
    kept_lines = compressed.split("\n")
    assert len(kept_lines) == 3  # lines are kept, each shortened
    for kept, original in zip(kept_lines, PARAGRAPH.split("\n"), strict=True):
        words = iter(original.split())
        assert all(word in words for word in kept.split())  # a subsequence: order preserved
    dropped = set(PARAGRAPH.split()) - set(compressed.split())
    assert dropped & {"the", "to", "a", "that", "about"}  # predictable words go first
    assert all(word in compressed for word in ("Italian", "ravioli", "Carla"))


def test_self_information_scores_words_by_their_tokens(
    self_info: SelfInformationCompressor,
) -> None:
    words = self_info.score_words("Ben: handmade ravioli\nAnn: yes")
    assert [w.line for w in words] == [0, 0, 0, 1, 1]
    assert all(w.tokens >= 1 and w.information > 0 for w in words)
    tokens = self_info.model().tokenize(b"Ben: handmade ravioli\nAnn: yes", add_bos=False)
    assert sum(w.tokens for w in words) == len(tokens) - 1  # the newline belongs to no word
    assert self_info.compress_many([""]) == [""]


def test_long_texts_are_scored_in_windows_from_bos(self_info: SelfInformationCompressor) -> None:
    tokens = self_info.model().tokenize(PARAGRAPH.encode(), add_bos=False)
    whole = self_info.token_information(tokens)
    windowed = SelfInformationCompressor(rate=0.75, n_ctx=16)
    windowed = windowed.token_information(tokens)
    assert len(tokens) > 40 and windowed.shape == whole.shape
    assert windowed[:15] == pytest.approx(whole[:15], rel=1e-3, abs=1e-3)  # same context
    assert windowed[15] != pytest.approx(whole[15], rel=1e-3)  # a new window: only BOS before


def test_rate_one_keeps_everything_and_results_are_cached(tmp_path: Path) -> None:
    store = SQLiteKV(tmp_path / "compressions.sqlite", table="compressions")
    whole = SelfInformationCompressor(rate=1.0, store=store)
    assert whole.compress_many([PARAGRAPH, PARAGRAPH]) == [PARAGRAPH, PARAGRAPH]
    assert whole.texts_compressed == 1
    fresh = SelfInformationCompressor(rate=1.0, store=store)
    assert fresh.compress_many([PARAGRAPH]) == [PARAGRAPH]
    assert fresh.texts_compressed == 0 and fresh._model is None  # served from SQLite
    with pytest.raises(ValueError, match="rate"):
        SelfInformationCompressor(rate=0.0)


class RecordingPromptCompressor:
    """Stands in for llmlingua's PromptCompressor and records how it was built and called."""

    built: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, **kwargs: Any) -> None:
        self.built.append(kwargs)

    def compress_prompt(self, text: str, *, rate: float) -> dict[str, Any]:
        return {
            "compressed_prompt": " ".join(text.split()[: max(1, int(len(text.split()) * rate))])
        }


def fake_llmlingua(monkeypatch: pytest.MonkeyPatch, prompt_compressor: type) -> None:
    module = types.ModuleType("llmlingua")
    module.PromptCompressor = prompt_compressor  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "llmlingua", module)


def test_llmlingua2_is_built_with_the_papers_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_llmlingua(monkeypatch, RecordingPromptCompressor)
    RecordingPromptCompressor.built.clear()
    compressor = LLMLingua2Compressor(rate=0.5)
    assert compressor.compress_many(["one two three four", "one two three four"]) == ["one two"] * 2
    assert RecordingPromptCompressor.built == [
        {"model_name": LLMLINGUA2_MODEL, "use_llmlingua2": True, "device_map": "cpu"}
    ]


def test_llmlingua2_missing_package_or_model_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "llmlingua", None)  # import fails as if not installed
    with pytest.raises(
        CompressorUnavailableError, match=r"pip install 'memsys-bench\[llmlingua\]'"
    ):
        LLMLingua2Compressor(rate=0.75).compress_many(["hello there"])

    class OfflineHub:
        def __init__(self, **kwargs: Any) -> None:
            raise OSError("We couldn't connect to 'https://huggingface.co' (HF_HUB_OFFLINE=1)")

    fake_llmlingua(monkeypatch, OfflineHub)
    with pytest.raises(CompressorUnavailableError) as raised:
        LLMLingua2Compressor(rate=0.75).compress_many(["hello there"])
    message = str(raised.value)
    assert LLMLINGUA2_MODEL in message and f"huggingface-cli download {LLMLINGUA2_MODEL}" in message
    assert "HF_HUB_OFFLINE" in message  # the original cause is kept
