"""What the Mem0 and LangMem tests share (tests/test_memory_libraries.py, test_library_bridge.py,
test_library_failures.py): a rule-following model that answers the libraries' own prompts, a
model that answers nothing usable, a model that always fails, the two-session conversation they
build from, and the services and backbone a method runs on."""

from __future__ import annotations

import ast
import json
import re
from datetime import datetime
from typing import Any

import pytest

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
from memsys.types import Conversation, Session, Turn

HEADER = re.compile(r"=+ (Human|Ai) Message =+")
DAY_1, DAY_2 = datetime(2023, 5, 1), datetime(2023, 6, 1)
#: The libraries, as the extras that install them are named.
LIBRARIES = ["mem0", "langmem"]


class LibraryModel:
    """Answers Mem0's and LangMem's prompts by rule: every ``user`` line is a fact; a fact
    saying "now" rewrites the first existing memory, one starting "Forget" deletes it. Keeps
    every request it was sent."""

    model_id = "fake:library-model"
    endpoint = "fake://library-model"

    def __init__(self) -> None:
        self.calls = 0
        self.requests: list[LLMRequest] = []

    def generate(self, request: LLMRequest, timeout_s: float) -> Completion:
        self.calls += 1
        self.requests.append(request)
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
    (LangMem's store manager offers no delete; trustcall's repair of it fails)."""
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


class Garbage:
    """A provider that answers every request with prose: no JSON, no tool call."""

    model_id = "fake:garbage"
    endpoint = "fake://garbage"

    def __init__(self) -> None:
        self.calls = 0

    def generate(self, request: LLMRequest, timeout_s: float) -> Completion:
        self.calls += 1
        return Completion("I am not sure what you mean.", 50, 8, "stop")


def conversation(first: str = "Ann") -> Conversation:
    """``first`` moves from Paris to Rome; Bob gives up chess. Turn ids ``D<session>:<i>``."""
    lines = [
        (DAY_1, [(first, "I live in Paris."), ("Bob", "I play chess.")]),
        (DAY_2, [(first, "I now live in Rome."), ("Bob", "Forget the chess.")]),
    ]
    sessions = []
    for number, (day, said) in enumerate(lines, start=1):
        turns = tuple(
            Turn(f"D{number}:{i}", f"session_{number}", i - 1, speaker, text, day)
            for i, (speaker, text) in enumerate(said, start=1)
        )
        sessions.append(Session(f"session_{number}", day, f"{day:%d %B %Y}", turns))
    return Conversation("tiny", tuple(sessions), (), (first, "Bob"))


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
    """The adapter of ``library`` (the test is skipped where its extra is not installed)."""
    pytest.importorskip(library, reason=f"the optional extra [{library}] is not installed")
    if library == "mem0":
        from memsys.methods.libraries.mem0 import Mem0

        return Mem0
    from memsys.methods.libraries.langmem import LangMem

    return LangMem
