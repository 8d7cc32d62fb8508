"""The OpenAI chat wire format, to and from harness requests, for :mod:`memsys.llm.bridge`.

A :class:`~memsys.llm.backbone.Backbone` request is plain messages and
:class:`~memsys.llm.types.SamplingParams`; an OpenAI chat request may carry content parts,
``developer`` messages, ``response_format`` and ``tools``. These functions translate one into the
other (the bridge's docstring says how tools are done without native tool calling) and build the
OpenAI response body from a backbone reply.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from memsys.llm.jsonout import JSONReplyError, extract_json
from memsys.llm.types import LLMResponse, SamplingParams

#: What the bridge tells the model about tools (appended to the system message).
TOOLS_NOTE = (
    "You can call the following tools. Each is given as its name, its description and the JSON "
    "schema of its arguments:\n{tools}\n\nReply with JSON only. To call tools, reply "
    '{{"tool_calls": [{{"name": <tool name>, "arguments": <arguments object>}}, ...]}}, one item '
    "per call (several calls are allowed).{plain}"
)


PLAIN_NOTE = ' To answer without calling a tool, reply {"response": <your answer as text>}.'


class BridgeError(RuntimeError):
    """A request the bridge could not serve (a malformed request, or the backbone's failure)."""


def text_of(content: Any) -> str:
    """A message's content as text: a string as is, text parts joined, anything else as JSON.

    >>> text_of([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
    'ab'
    >>> text_of(None)
    ''
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) if isinstance(part, Mapping) else str(part)
            for part in content
        )
    return json.dumps(content, ensure_ascii=False)


def to_backbone_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """OpenAI chat messages as the plain ``{"role", "content"}`` strings a backbone takes.

    >>> to_backbone_messages([{"role": "assistant", "content": None, "tool_calls": [
    ...     {"id": "call_0", "type": "function",
    ...      "function": {"name": "Memory", "arguments": '{"content": "x"}'}}]},
    ...     {"role": "tool", "tool_call_id": "call_0", "content": "done"}])
    [{'role': 'assistant', 'content': '{"tool_calls": [{"name": "Memory", "arguments": {"content": "x"}}]}'}, {'role': 'user', 'content': 'Result of tool call call_0: done'}]
    """
    converted = []
    for message in messages:
        role = str(message.get("role", "user"))
        content = text_of(message.get("content"))
        if role == "developer":
            role = "system"
        if role == "assistant" and message.get("tool_calls"):
            calls = [_call_of(call) for call in message["tool_calls"]]
            rendered = json.dumps({"tool_calls": calls}, ensure_ascii=False)
            content = f"{content}\n{rendered}" if content else rendered
        elif role in ("tool", "function"):
            name = message.get("tool_call_id") or message.get("name") or "?"
            role, content = "user", f"Result of tool call {name}: {content}"
        converted.append({"role": role, "content": content})
    return converted


def _call_of(call: Mapping[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    arguments = function.get("arguments") or "{}"
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        parsed = arguments
    return {"name": function.get("name"), "arguments": parsed}


def offered_tools(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The request's function tools (name, description, parameters), narrowed to the one a
    ``tool_choice`` names; none when ``tool_choice`` is ``"none"``."""
    choice = body.get("tool_choice")
    if choice == "none":
        return []
    tools = [
        {
            "name": str(tool["function"]["name"]),
            "description": tool["function"].get("description") or "",
            "parameters": tool["function"].get("parameters") or {"type": "object"},
        }
        for tool in body.get("tools") or []
        if tool.get("type", "function") == "function" and tool.get("function")
    ]
    if isinstance(choice, Mapping):
        named = (choice.get("function") or {}).get("name")
        tools = [tool for tool in tools if tool["name"] == named] or tools
    return tools


def request_schema(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a request's ``response_format`` asks for (``json_object``: any object).

    >>> request_schema({"response_format": {"type": "json_object"}})
    {'type': 'object'}
    >>> request_schema({}) is None
    True
    """
    response_format = body.get("response_format") or {}
    kind = response_format.get("type")
    if kind == "json_object":
        return dict(response_format.get("schema") or {"type": "object"})
    if kind == "json_schema":
        return dict((response_format.get("json_schema") or {}).get("schema") or {"type": "object"})
    return None


def with_tools_note(
    messages: list[dict[str, str]], tools: Sequence[Mapping[str, Any]], allow_plain: bool
) -> list[dict[str, str]]:
    """``messages`` with :data:`TOOLS_NOTE` appended to the first system message (or opening
    a new one)."""
    listing = json.dumps(
        [
            {"name": t["name"], "description": t["description"], "arguments": t["parameters"]}
            for t in tools
        ],
        ensure_ascii=False,
        indent=1,
    )
    note = TOOLS_NOTE.format(tools=listing, plain=PLAIN_NOTE if allow_plain else "")
    if messages and messages[0]["role"] == "system":
        first = {"role": "system", "content": f"{messages[0]['content']}\n\n{note}"}
        return [first, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]


def tool_call_schema(tools: Sequence[Mapping[str, Any]], allow_plain: bool) -> dict[str, Any]:
    """The reply schema of a tool-calling request: one or more calls, each a tool's name and
    arguments valid for its schema (``$defs`` hoisted to the root, where references resolve);
    with ``allow_plain``, a plain ``{"response": ...}`` reply as the alternative.

    Two tools that define the same name differently cannot share the root: that is refused.

    >>> schema = tool_call_schema([{"name": "Memory", "parameters": {"type": "object",
    ...     "properties": {"content": {"type": "string"}}, "required": ["content"]}}], False)
    >>> schema["properties"]["tool_calls"]["items"]["anyOf"][0]["properties"]["name"]
    {'const': 'Memory'}
    >>> tool_call_schema([{"name": "A", "parameters": {"$defs": {"X": {"type": "string"}}}},
    ...     {"name": "B", "parameters": {"$defs": {"X": {"type": "integer"}}}}], False)
    Traceback (most recent call last):
    ...
    memsys.llm.openai_wire.BridgeError: tools A and B define X differently
    """
    definitions: dict[str, Any] = {}
    defined_by: dict[str, str] = {}
    branches = []
    for tool in tools:
        parameters = dict(tool["parameters"])
        for key in ("$defs", "definitions"):
            for name, definition in (parameters.pop(key, None) or {}).items():
                if name in definitions and definitions[name] != definition:
                    raise BridgeError(
                        f"tools {defined_by[name]} and {tool['name']} define {name} differently"
                    )
                definitions[name] = definition
                defined_by.setdefault(name, str(tool["name"]))
        branches.append(
            {
                "type": "object",
                "properties": {"name": {"const": tool["name"]}, "arguments": parameters},
                "required": ["name", "arguments"],
            }
        )
    calls: dict[str, Any] = {
        "type": "object",
        "properties": {
            "tool_calls": {"type": "array", "minItems": 1, "items": {"anyOf": branches}}
        },
        "required": ["tool_calls"],
    }
    schema: dict[str, Any] = calls
    if allow_plain:
        plain = {
            "type": "object",
            "properties": {"response": {"type": "string"}},
            "required": ["response"],
        }
        schema = {"anyOf": [calls, plain]}
    if definitions:
        schema["$defs"] = definitions
    return schema


def sampling_params(
    body: Mapping[str, Any], default_max_tokens: int, schema: Mapping[str, Any] | None
) -> SamplingParams:
    """The request's sampling settings as harness :class:`SamplingParams` (greedy and
    ``default_max_tokens`` where it names none)."""
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or default_max_tokens
    stop = body.get("stop") or ()
    return SamplingParams(
        temperature=float(body["temperature"]) if body.get("temperature") is not None else 0.0,
        max_tokens=int(max_tokens),
        top_p=float(body["top_p"]) if body.get("top_p") is not None else 1.0,
        seed=int(body["seed"]) if body.get("seed") is not None else 0,
        stop=(stop,) if isinstance(stop, str) else tuple(stop),
        json_schema=schema,
    )


def parse_tool_calls(text: str) -> tuple[list[dict[str, Any]], str | None]:
    """The tool calls of a reply in the generic format and its plain answer, if any; a reply
    that is neither is returned as the plain answer (the library then sees no tool call).

    >>> parse_tool_calls('{"tool_calls": [{"name": "Memory", "arguments": {"content": "x"}}]}')
    ([{'name': 'Memory', 'arguments': {'content': 'x'}}], None)
    >>> parse_tool_calls('{"response": "hi"}')
    ([], 'hi')
    """
    value = _json_or_none(text)
    if isinstance(value, Mapping):
        calls = value.get("tool_calls")
        if isinstance(calls, list):
            kept = [
                {"name": str(call["name"]), "arguments": call.get("arguments") or {}}
                for call in calls
                if isinstance(call, Mapping) and call.get("name")
            ]
            if kept:
                return kept, None
        if isinstance(value.get("response"), str):
            return [], value["response"]
    return [], text


def usable_reply(text: str, tools: Sequence[Mapping[str, Any]], allow_plain: bool) -> bool:
    """Whether a reply to a request with a schema gives the library what it asked for: with
    tools, at least one call (or, where a plain answer is allowed, a ``{"response": ...}``);
    otherwise any JSON value.

    >>> usable_reply('{"facts": []}', [], True), usable_reply("no JSON here", [], True)
    (True, False)
    >>> tools = [{"name": "Memory"}]
    >>> usable_reply('{"response": "nothing new"}', tools, True)
    True
    >>> usable_reply('{"response": "nothing new"}', tools, False)
    False
    """
    if not tools:
        return _json_or_none(text) is not None
    if parse_tool_calls(text)[0]:
        return True
    value = _json_or_none(text)
    return allow_plain and isinstance(value, Mapping) and isinstance(value.get("response"), str)


def _json_or_none(text: str) -> Any:
    try:
        return extract_json(text)[0]
    except JSONReplyError:
        return None


def tool_call_id(context: str, text: str, index: int) -> str:
    """The id of a reply's ``index``-th tool call: a digest of the request (``context``), the
    reply and the index, so that ids differ between the replies of a thread and are the same
    on every run.

    >>> tool_call_id("request", "reply", 0) == tool_call_id("request", "reply", 0)
    True
    >>> tool_call_id("request", "reply", 0) != tool_call_id("request", "reply", 1)
    True
    """
    digest = hashlib.sha256(f"{context}\x00{text}\x00{index}".encode()).hexdigest()
    return f"call_{digest[:24]}"


def completion_body(
    reply: LLMResponse, tools: Sequence[Mapping[str, Any]], model: str, context: str = ""
) -> dict[str, Any]:
    """The OpenAI chat completion object of a backbone reply (``context``: the request, which
    the tool-call ids are drawn from with the reply)."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    finish_reason = reply.finish_reason or "stop"
    if tools:
        calls, plain = parse_tool_calls(reply.text)
        message["content"] = plain
        if calls:
            message["tool_calls"] = [
                {
                    "id": tool_call_id(context, reply.text, index),
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": json.dumps(call["arguments"], ensure_ascii=False),
                    },
                }
                for index, call in enumerate(calls)
            ]
            finish_reason = "tool_calls"
    usage = {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }
    return {
        "id": "chatcmpl-bridge",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": usage,
    }
