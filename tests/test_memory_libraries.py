"""Mem0 and LangMem as methods (memsys/methods/libraries/): what they build on the rule-following
model of :mod:`fakes.libraries`.

The tests check what the adapters promise: each library is fed as Mem0's LoCoMo evaluation fed
it, every request goes through the backbone (its cache and accounting, so a re-run asks
nothing), each memory keeps the turn ids of the batches that wrote it (added, rewritten,
deleted), nothing is sent anywhere but 127.0.0.1, and a missing extra names its ``pip install``
command. The last tests run both libraries end to end against llama.cpp's real
OpenAI-compatible server on the tiny fixture. The bridge is tested in test_library_bridge.py,
failures and unusable replies in test_library_failures.py.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from fakes.libraries import (
    DAY_2,
    LIBRARIES,
    LibraryModel,
    conversation,
    method_class,
    services,
)
from run_helpers import compose_config, fixture_overrides, read_ledger, read_records

from memsys.base import Services
from memsys.embed import Embedder
from memsys.llm import ResponseCache
from memsys.methods.libraries.common import MissingExtraError, batches
from memsys.types import Question

# ---------------------------------------------------------------------------------------------
# The adapters, on the rule-following model


def test_batches_feed_each_speaker_the_whole_conversation_two_turns_at_a_time() -> None:
    """Mem0's feeding (``speakers``): both sides, the speaker as ``user``, 2 turns a call."""
    plan = batches(conversation(), 2, "speakers")
    assert [(b.perspective, b.turn_ids) for b in plan] == [
        ("Ann", ("D1:1", "D1:2")),
        ("Bob", ("D1:1", "D1:2")),
        ("Ann", ("D2:1", "D2:2")),
        ("Bob", ("D2:1", "D2:2")),
    ]
    roles = [m["role"] for m in plan[1].messages(lambda turn, session: turn.text)]
    assert roles == ["assistant", "user"]  # Bob's side: Bob is the user


def test_own_batches_feed_each_speaker_only_their_own_turns_one_at_a_time() -> None:
    """LangMem's feeding (``own``): a speaker's memory gets that speaker's turns as ``user``
    messages, one a call: as many calls as ``speakers`` in twos, each half the size."""
    plan = batches(conversation(), 1, "own")
    assert [(b.perspective, b.turn_ids) for b in plan] == [
        ("Ann", ("D1:1",)),
        ("Bob", ("D1:2",)),
        ("Ann", ("D2:1",)),
        ("Bob", ("D2:2",)),
    ]
    assert all(
        [m["role"] for m in batch.messages(lambda turn, session: turn.text)] == ["user"]
        for batch in plan
    )
    assert len(plan) == len(batches(conversation(), 2, "speakers"))


#: (library, its settings, the turns of Ann's rewritten memory): LangMem's default feeding gives
#: a memory only its speaker's turns; fed as Mem0 is, each batch's two turns.
FEEDINGS = [
    ("mem0", {}, ("D1:1", "D1:2", "D2:1", "D2:2")),
    ("langmem", {}, ("D1:1", "D2:1")),
    ("langmem", {"perspectives": "speakers", "batch_size": 2}, ("D1:1", "D1:2", "D2:1", "D2:2")),
]


@pytest.mark.parametrize(("library", "settings", "rome"), FEEDINGS)
def test_memories_keep_the_turns_that_wrote_them(
    library: str, settings: dict[str, Any], rome: tuple[str, ...], embedder: Embedder
) -> None:
    """Added from a batch: its turns; rewritten by a later batch: both batches' turns;
    deleted (Mem0): gone. Then saved, loaded and searched by the library's own search. LangMem
    skips and counts the batch on which trustcall's repair fails (an invalid tool call)."""
    method = method_class(library)(
        services(embedder, ResponseCache.disabled(), LibraryModel()), **settings
    )
    memory = method.construct(conversation())
    by_side = {(r.perspective, r.text): r.turn_ids for r in memory.records}
    assert by_side[("Ann", "I now live in Rome.")] == rome
    assert ("Ann", "I live in Paris.") not in by_side  # rewritten
    assert memory.stats["events"]["add"] >= 2 and memory.stats["events"]["update"] == 1
    if library == "mem0":
        assert ("Bob", "I play chess.") not in by_side  # deleted when Bob said to forget it
        assert memory.stats["events"]["delete"] == 1
        assert memory.stats["unparseable_replies"] == 0
    else:
        bob = ("D1:1", "D1:2") if settings else ("D1:2",)
        assert by_side[("Bob", "I play chess.")] == bob
        # the model answers trustcall's two repair requests with prose: counted, then the
        # repair step fails on the batch, which is skipped and counted
        assert memory.stats["unparseable_replies"] == 2
        assert memory.stats["library_errors"] == 1
        assert "tool_call_id" in memory.stats["library_error_examples"][0]
    loaded = method.load_memory(json.loads(json.dumps(method.dump_memory(memory))))
    question = Question("q", "tiny", "Where does Ann live now?", "Rome", "single_hop")
    items = method.retrieve(loaded, question).items
    assert items and items[0].text == "Ann's memory: I now live in Rome."
    assert items[0].turn_ids == rome
    assert items[0].timestamp == DAY_2 and items[0].kind == "memory"


@pytest.mark.parametrize("library", LIBRARIES)
def test_construction_is_counted_and_a_rebuild_asks_the_model_nothing(
    library: str, embedder: Embedder, tmp_path: Path
) -> None:
    """Every request goes through the backbone: accounted to the construction stage, and
    stored in the response cache, so the same memory built again (new method, same cache)
    sends nothing to the model and comes out the same."""
    cache = ResponseCache(tmp_path / "llm.sqlite")
    provider = LibraryModel()
    first_services = services(embedder, cache, provider)
    first = method_class(library)(first_services).construct(conversation())
    accounting = first_services.backbone.accounting  # type: ignore[union-attr]
    summary = accounting.summary()["stages"]["construction"]
    assert summary["calls"] - summary["cache_hits"] == provider.calls > 0
    assert summary["prompt_tokens"] > 0
    asked = provider.calls
    again = method_class(library)(services(embedder, cache, provider)).construct(conversation())
    assert provider.calls == asked
    texts = lambda memory: [(r.perspective, r.text, r.turn_ids) for r in memory.records]  # noqa: E731
    assert texts(again) == texts(first)


@pytest.mark.parametrize("library", LIBRARIES)
def test_nothing_is_sent_beyond_this_machine(
    library: str, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Telemetry off, every connection to 127.0.0.1 (the bridge)."""
    method = method_class(library)(services(embedder, ResponseCache.disabled(), LibraryModel()))
    addresses: list[Any] = []
    connect = socket.socket.connect

    def recording(self: socket.socket, address: Any) -> Any:
        addresses.append(address)
        if not (isinstance(address, tuple) and address[0] in ("127.0.0.1", "localhost")):
            raise OSError(f"test forbids connecting to {address}")
        return connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", recording)
    method.construct(conversation())
    assert addresses and all(address[0] == "127.0.0.1" for address in addresses)
    if library == "mem0":
        telemetry = sys.modules["mem0.memory.telemetry"]
        assert telemetry.MEM0_TELEMETRY is False


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_missing_library_names_the_pip_command(
    library: str, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    method = method_class(library)(services(embedder, ResponseCache.disabled(), LibraryModel()))
    monkeypatch.setitem(sys.modules, library, None)  # importing it now fails
    with pytest.raises(MissingExtraError, match=rf"pip install 'memsys-bench\[{library}\]'"):
        method.construct(conversation())


@pytest.mark.parametrize("library", LIBRARIES)
def test_there_is_no_lite_mode_and_no_build_without_a_backbone(
    library: str, embedder: Embedder
) -> None:
    cls = method_class(library)
    with pytest.raises(ValueError, match="no lite mode"):
        cls(services(embedder, ResponseCache.disabled(), LibraryModel()), extraction="lite")
    bare = cls(Services(embedder=embedder, tokens=None))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no construction backbone"):
        bare.construct(conversation())


# ---------------------------------------------------------------------------------------------
# End to end: llama.cpp's OpenAI-compatible server builds and answers


@pytest.mark.slow
@pytest.mark.timeout(3600)  # SmolLM2 behind the server: Mem0's prompts are ~1,600 tokens a call
@pytest.mark.parametrize("library", LIBRARIES)
def test_runs_end_to_end_against_llama_cpp_server(
    library: str, llama_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tiny fixture's first session, built and answered by SmolLM2 behind llama.cpp's
    server: the run finishes, its construction calls are in the ledger, retrieved turn ids are
    the conversation's, and the same run on a fresh memory cache asks the server nothing."""
    pytest.importorskip(library, reason=f"the optional extra [{library}] is not installed")
    from benchmarks.pipeline.run import run

    monkeypatch.delenv("MEMBENCH_DATA", raising=False)
    overrides = [
        *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
        f"method={library}",
        "backbone=llamacpp_server",
        f"backbone.provider.base_url={llama_server}",
        "judge=none",
        "+subset.max_sessions=1",
        "method.max_tokens=256",  # the test server's context is 2048 tokens
    ]
    summary = run(compose_config(overrides))
    run_dir = Path(summary["run_dir"])
    records = read_records(run_dir)
    assert records and all(isinstance(r["prediction"], str) for r in records)
    turns = {f"D1:{i}" for i in range(1, 20)}
    assert all(set(r["retrieved_turn_ids"]) <= turns for r in records if "retrieved_turn_ids" in r)
    built = [line for line in read_ledger(run_dir) if line.get("stage") == "construction"]
    # fresh calls (two identical requests in one build, e.g. the same fact from both sides,
    # are asked once: the second is a cache hit)
    assert built and not all(line.get("cached") for line in built)

    again = [*overrides, f"cache_dir={tmp_path / 'cache'}", f"results_dir={tmp_path / 'again'}"]
    memories = tmp_path / "cache" / "memories"
    for path in sorted(memories.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    rerun_dir = Path(run(compose_config(again))["run_dir"])
    rebuilt = [line for line in read_ledger(rerun_dir) if line.get("stage") == "construction"]
    assert len(rebuilt) == len(built) and all(line.get("cached") for line in rebuilt)
