"""The bridge Mem0 and LangMem reach the run's backbone and embedder through
(memsys/llm/bridge.py): OpenAI chat completions, JSON replies, tool calls and embeddings served
from the backbone, failures kept for the caller, unusable replies counted."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from fakes.libraries import Failing, LibraryModel, make_backbone
from fakes.llm import RuleProvider

from memsys.embed import Embedder
from memsys.llm.bridge import BackboneBridge
from memsys.llm.openai_wire import BridgeError, completion_body, tool_call_schema
from memsys.llm.types import LLMResponse

MEMORY_TOOL = {"type": "function", "function": {"name": "Memory", "parameters": {"type": "object"}}}


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


def test_tool_call_ids_differ_between_calls_and_replies_and_are_the_same_on_a_rerun() -> None:
    """Ids are drawn from the request, the reply and the index: two calls of one reply, or the
    same reply to two requests, never share one; the same request and reply always give it."""
    text = json.dumps({"tool_calls": [{"name": "T", "arguments": {}}] * 2})
    reply = LLMResponse(text, 5, 3, 0.0, False, "m")

    def ids(context: str) -> list[str]:
        body = completion_body(reply, [{"name": "T"}], "m", context)
        return [call["id"] for call in body["choices"][0]["message"]["tool_calls"]]

    first = ids("request one")
    assert len(set(first)) == 2 and all(i.startswith("call_") for i in first)
    assert ids("request one") == first
    assert not set(ids("request two")) & set(first)


def test_tools_that_define_one_name_differently_are_refused() -> None:
    from openai import BadRequestError, OpenAI

    tools = [
        {"name": "A", "parameters": {"$defs": {"X": {"type": "string"}}}},
        {"name": "B", "parameters": {"$defs": {"X": {"type": "integer"}}}},
    ]
    with pytest.raises(BridgeError, match="define X differently"):
        tool_call_schema(tools, allow_plain=False)
    same = [{"name": n, "parameters": {"$defs": {"X": {"type": "string"}}}} for n in "AB"]
    assert tool_call_schema(same, allow_plain=False)["$defs"] == {"X": {"type": "string"}}
    with BackboneBridge(make_backbone(LibraryModel())) as bridge:
        client = OpenAI(base_url=bridge.base_url, api_key="x", max_retries=0)
        offered = [{"type": "function", "function": tool} for tool in tools]
        with pytest.raises(BadRequestError, match="define X differently"):
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "q"}], tools=offered
            )


class BrokenEmbedder:
    """An embedder that fails."""

    def encode(self, texts: Any) -> np.ndarray:
        raise RuntimeError("embedder down")


def test_an_embedder_failure_is_a_server_error_kept_for_the_caller() -> None:
    from openai import InternalServerError, OpenAI

    with BackboneBridge(None, BrokenEmbedder()) as bridge:  # type: ignore[arg-type]
        client = OpenAI(base_url=bridge.base_url, api_key="x", max_retries=0)
        with pytest.raises(InternalServerError, match="embedder down"):
            client.embeddings.create(model="m", input=["one"])
        with pytest.raises(RuntimeError, match="embedder down"):
            bridge.raise_failure()


#: (the request's extras, the reply, whether the library can use it)
REPLIES = [
    ({}, "just prose", True),  # no schema: any text is an answer
    ({"response_format": {"type": "json_object"}}, "just prose", False),
    ({"response_format": {"type": "json_object"}}, 'Sure: {"facts": []}', True),
    ({"tools": [MEMORY_TOOL]}, '{"response": "nothing new"}', True),
    ({"tools": [MEMORY_TOOL]}, "just prose", False),
    ({"tools": [MEMORY_TOOL], "tool_choice": "required"}, '{"response": "nothing new"}', False),
    (
        {"tools": [MEMORY_TOOL], "tool_choice": "required"},
        '{"tool_calls": [{"name": "Memory", "arguments": {}}]}',
        True,
    ),
]


@pytest.mark.parametrize(("extras", "reply", "usable"), REPLIES)
def test_replies_the_library_cannot_use_are_counted(
    extras: dict[str, Any], reply: str, usable: bool
) -> None:
    from openai import OpenAI

    with BackboneBridge(make_backbone(RuleProvider(lambda request: reply))) as bridge:
        client = OpenAI(base_url=bridge.base_url, api_key="x", max_retries=0)
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "q"}], **extras
        )
    assert bridge.chat_requests == 1
    assert bridge.unparseable_replies == (0 if usable else 1)
