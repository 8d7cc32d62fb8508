"""Mem0 and LangMem as methods (memsys/methods/libraries/) and the bridge they reach the run's
backbone through (memsys/llm/bridge.py).

A rule-following model (:class:`LibraryModel`) answers the libraries' own prompts, so the tests
can check what the adapters promise: every request goes through the backbone (its cache and
accounting, so a re-run asks nothing), each memory keeps the turn ids of the batches that wrote
it (added, rewritten, deleted), nothing is sent anywhere but 127.0.0.1, and a missing extra names
its ``pip install`` command. The last tests run both libraries end to end against llama.cpp's
real OpenAI-compatible server on the tiny fixture.
"""

from __future__ import annotations

import ast
import json
import re
import socket
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from run_helpers import compose_config, fixture_overrides, read_ledger, read_records

from memsys.base import Services
from memsys.embed import Embedder
from memsys.llm import (
    Accounting,
    Backbone,
    BackboneSettings,
    Completion,
    LLMRequest,
    ProviderError,
    ResponseCache,
    RetryPolicy,
)
from memsys.llm.bridge import BackboneBridge
from memsys.methods.libraries.common import MissingExtraError, batches
from memsys.types import Conversation, Question, Session, Turn

HEADER = re.compile(r"=+ (Human|Ai) Message =+")
DAY_1, DAY_2 = datetime(2023, 5, 1), datetime(2023, 6, 1)


class LibraryModel:
    """Answers Mem0's and LangMem's prompts by rule: every ``user`` line is a fact; a fact
    saying "now" rewrites the first existing memory, one starting "Forget" deletes it."""

    model_id = "fake:library-model"
    endpoint = "fake://library-model"

    def __init__(self) -> None:
        self.calls = 0

    def generate(self, request: LLMRequest, timeout_s: float) -> Completion:
        self.calls += 1
        messages = request.messages
        text = "\n".join(message["content"] for message in messages)
        if "Personal Information Organizer" in messages[0]["content"]:  # Mem0's extraction
            lines = messages[-1]["content"].splitlines()
            facts = [line.split(": ", 2)[2] for line in lines if line.startswith("user: ")]
            return Completion(json.dumps({"facts": facts}), 100, 10, "stop")
        if "smart memory manager" in text:  # Mem0's update step
            blocks = re.findall(r"```\n\s*(.*?)\n\s*```", text, re.S)
            old, new = ast.literal_eval(blocks[-2].strip()), ast.literal_eval(blocks[-1].strip())
            return Completion(json.dumps({"memory": mem0_events(old, new)}), 100, 10, "stop")
        if "memory subroutine" in messages[0]["content"]:  # LangMem's manager
            return Completion(json.dumps(langmem_reply(messages)), 100, 10, "stop")
        return Completion("ok", 1, 1, "stop")


def mem0_events(old: list[dict[str, str]], new: list[str]) -> list[dict[str, str]]:
    events = []
    for fact in new:
        if fact.startswith("Forget") and old:
            events.append({"id": old[0]["id"], "text": old[0]["text"], "event": "DELETE"})
        elif " now " in fact and old:
            events.append({"id": old[0]["id"], "text": fact, "event": "UPDATE"})
        else:
            events.append({"id": str(len(old) + len(events)), "text": fact, "event": "ADD"})
    return events


def langmem_reply(messages: Any) -> dict[str, Any]:
    """Tool calls in the bridge's generic form: a Memory per user line, a PatchDoc of the first
    existing memory for a "now" line, a call of a tool that does not exist for a "Forget" line
    (LangMem's store manager offers no delete)."""
    session = messages[-1]["content"].split("<session_", 1)[-1]
    parts = HEADER.split(session)
    lines = [
        line.split(": ", 1)[1]
        for kind, body in zip(parts[1::2], parts[2::2], strict=True)
        if kind == "Human"
        for line in body.strip().splitlines()
        if " | " in line
    ]
    existing = re.findall(r"\b[0-9a-f]{32}\b", json.dumps([dict(m) for m in messages[:-1]]))
    calls: list[dict[str, Any]] = []
    for line in lines:
        if " now " in line and existing:
            patch = [{"op": "replace", "path": "/content", "value": line}]
            arguments = {"json_doc_id": existing[0], "planned_edits": "-", "patches": patch}
            calls.append({"name": "PatchDoc", "arguments": arguments})
        elif line.startswith("Forget"):
            calls.append({"name": "NoSuchTool", "arguments": {}})  # fails validation
        else:
            calls.append({"name": "Memory", "arguments": {"content": line}})
    return {"tool_calls": calls} if calls else {"response": "nothing to remember"}


class Failing:
    """A provider whose every request fails for good."""

    model_id = "fake:failing"
    endpoint = "fake://failing"

    def generate(self, request: LLMRequest, timeout_s: float) -> Completion:
        raise ProviderError("model gone")


def conversation() -> Conversation:
    """Ann moves from Paris to Rome; Bob gives up chess. Turn ids ``D<session>:<i>``."""
    lines = [
        (DAY_1, [("Ann", "I live in Paris."), ("Bob", "I play chess.")]),
        (DAY_2, [("Ann", "I now live in Rome."), ("Bob", "Forget the chess.")]),
    ]
    sessions = []
    for number, (day, said) in enumerate(lines, start=1):
        turns = tuple(
            Turn(f"D{number}:{i}", f"session_{number}", i - 1, speaker, text, day)
            for i, (speaker, text) in enumerate(said, start=1)
        )
        sessions.append(Session(f"session_{number}", day, f"{day:%d %B %Y}", turns))
    return Conversation("tiny", tuple(sessions), (), ("Ann", "Bob"))


def make_backbone(provider: Any, cache: ResponseCache | None = None) -> Backbone:
    retry = RetryPolicy(max_attempts=1, request_timeout_s=5.0)
    return Backbone(
        provider,
        cache=cache if cache is not None else ResponseCache.disabled(),
        accounting=Accounting(),
        settings=BackboneSettings(concurrency=1, retry=retry),
    )


def services(embedder: Embedder, cache: ResponseCache, provider: Any) -> Services:
    backbone = make_backbone(provider, cache=cache).with_stage("construction")
    return Services(embedder=embedder, tokens=None, backbone=backbone)  # type: ignore[arg-type]


def method_class(library: str) -> Any:
    pytest.importorskip(library, reason=f"the optional extra [{library}] is not installed")
    if library == "mem0":
        from memsys.methods.libraries.mem0 import Mem0

        return Mem0
    from memsys.methods.libraries.langmem import LangMem

    return LangMem


LIBRARIES = ["mem0", "langmem"]


# ---------------------------------------------------------------------------------------------
# The bridge


def test_bridge_serves_chat_json_tools_and_embeddings_through_the_backbone(
    embedder: Embedder,
) -> None:
    from openai import OpenAI

    provider = LibraryModel()
    backbone = make_backbone(provider)
    with BackboneBridge(backbone, embedder) as bridge:
        client = OpenAI(base_url=bridge.base_url, api_key="x", max_retries=0)
        reply = client.chat.completions.create(
            model="any", messages=[{"role": "user", "content": "hi"}]
        )
        assert reply.choices[0].message.content == "ok"
        tool = {
            "type": "function",
            "function": {"name": "Memory", "parameters": {"type": "object"}},
        }
        client.chat.completions.create(
            model="any",
            messages=[{"role": "user", "content": "hi"}],
            tools=[tool],
            response_format={"type": "json_object"},
        )
        vectors = client.embeddings.create(model="m", input=["one", "two"]).data
        assert len(vectors) == 2 and len(vectors[0].embedding) == embedder.encode(["x"]).shape[1]
        floats = client.embeddings.create(model="m", input="one", encoding_format="float").data
        assert floats[0].embedding == pytest.approx(vectors[0].embedding, abs=1e-6)
    assert backbone.accounting.summary()["stages"]["unspecified"]["calls"] == 2
    assert bridge.chat_requests == 2 and bridge.embedded_texts == 3


def test_bridge_turns_tool_requests_into_constrained_json_and_back() -> None:
    from memsys.llm.bridge import completion_body, tool_call_schema
    from memsys.llm.types import LLMResponse

    parameters = {"type": "object", "properties": {"x": {"$ref": "#/$defs/X"}}, "$defs": {"X": {}}}
    schema = tool_call_schema([{"name": "T", "parameters": parameters}], allow_plain=True)
    assert schema["$defs"] == {"X": {}} and len(schema["anyOf"]) == 2
    text = json.dumps({"tool_calls": [{"name": "T", "arguments": {"x": 1}}]})
    body = completion_body(LLMResponse(text, 5, 3, 0.0, False, "m"), [{"name": "T"}], "m")
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    assert choice["message"]["tool_calls"][0]["function"] == {"name": "T", "arguments": '{"x": 1}'}


def test_bridge_refuses_a_failed_request_and_keeps_the_failure_for_the_caller() -> None:
    from openai import BadRequestError, OpenAI

    backbone = make_backbone(Failing())
    with BackboneBridge(backbone) as bridge:
        client = OpenAI(base_url=bridge.base_url, api_key="x", max_retries=0)
        with pytest.raises(BadRequestError, match="model gone"):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
        with pytest.raises(Exception, match="model gone"):
            bridge.raise_failure()


# ---------------------------------------------------------------------------------------------
# The adapters, on the rule-following model


def test_batches_feed_each_speaker_the_whole_conversation_two_turns_at_a_time() -> None:
    plan = batches(conversation(), 2, "speakers")
    assert [(b.perspective, b.turn_ids) for b in plan] == [
        ("Ann", ("D1:1", "D1:2")),
        ("Bob", ("D1:1", "D1:2")),
        ("Ann", ("D2:1", "D2:2")),
        ("Bob", ("D2:1", "D2:2")),
    ]
    roles = [m["role"] for m in plan[1].messages(lambda turn, session: turn.text)]
    assert roles == ["assistant", "user"]  # Bob's side: Bob is the user


@pytest.mark.parametrize("library", LIBRARIES)
def test_memories_keep_the_turns_that_wrote_them(
    library: str, embedder: Embedder, tmp_path: Path
) -> None:
    """Added from a batch: its turns; rewritten by a later batch: both batches' turns;
    deleted (Mem0): gone. Then saved, loaded and searched by the library's own search. LangMem
    skips and counts the batch on which it fails (an invalid tool call)."""
    method = method_class(library)(services(embedder, ResponseCache.disabled(), LibraryModel()))
    memory = method.construct(conversation())
    by_side = {(r.perspective, r.text): r.turn_ids for r in memory.records}
    assert by_side[("Ann", "I now live in Rome.")] == ("D1:1", "D1:2", "D2:1", "D2:2")
    assert ("Ann", "I live in Paris.") not in by_side  # rewritten
    assert memory.stats["events"]["add"] >= 2 and memory.stats["events"]["update"] == 1
    if library == "mem0":
        assert ("Bob", "I play chess.") not in by_side  # deleted when Bob said to forget it
        assert memory.stats["events"]["delete"] == 1
    else:
        assert by_side[("Bob", "I play chess.")] == ("D1:1", "D1:2")
        assert memory.stats["library_errors"] == 1
    loaded = method.load_memory(json.loads(json.dumps(method.dump_memory(memory))))
    question = Question("q", "tiny", "Where does Ann live now?", "Rome", "single_hop")
    items = method.retrieve(loaded, question).items
    assert items and items[0].text == "Ann's memory: I now live in Rome."
    assert items[0].turn_ids == ("D1:1", "D1:2", "D2:1", "D2:2")
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
    from benchmarks.run import run

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
