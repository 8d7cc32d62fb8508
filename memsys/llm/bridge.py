"""An in-process OpenAI-compatible endpoint in front of a harness :class:`Backbone` and
:class:`~memsys.embed.Embedder`, for memory libraries that only speak to an OpenAI-style server.

Mem0 and LangMem (:mod:`memsys.methods.libraries`) build their memories with their own OpenAI
clients. Pointed at this bridge (``http://127.0.0.1:<port>/v1``), every chat request they send
becomes one :meth:`Backbone.complete` call: served from the run's response cache when it was
asked before, otherwise sent to the run's construction model, and booked to the backbone's stage
like every other method's calls (calls, tokens, latency). ``/v1/embeddings`` answers from the
harness embedder (and its embedding cache). Nothing leaves the machine: the server listens on
127.0.0.1 only.

What the bridge translates, because a :class:`Backbone` request is plain messages and
:class:`~memsys.llm.types.SamplingParams`:

* ``response_format``: ``json_object`` becomes the schema ``{"type": "object"}``, ``json_schema``
  its schema (a grammar in llama.cpp, ``response_format`` on a served model);
* ``tools``: the harness's providers take no tool definitions, so tool calling is done the way
  llama.cpp's server does it for a model without a native tool-call format (its "generic"
  format): the tools and their argument schemas are described in the system message, the reply
  is constrained to ``{"tool_calls": [{"name": ..., "arguments": {...}}]}`` (or, where the
  request allows a plain reply, ``{"response": "..."}``) and handed back as OpenAI
  ``tool_calls``, whose ids are drawn from the request, the reply and the call's index (unique
  within a thread, and the same on a re-run, so a later prompt that names them is served from
  the cache). Earlier assistant tool calls are rendered in the same JSON form, tool results as
  user messages;
* message content given as parts is joined into text; ``developer`` messages are ``system``.

A request that fails for good (or a tripped breaker, or a replay-mode cache miss) is answered
with HTTP 400, which OpenAI clients do not retry, and kept in :attr:`BackboneBridge.failure`: a
library may log and swallow the error, so the caller checks :meth:`BackboneBridge.raise_failure`
after each library call (and when the library call raised) and stops rather than build a memory
with holes in it. Anything else that fails while serving a request (the embedder, say) is
answered with HTTP 500 and kept the same way; the libraries' clients are built not to retry.

A reply the library cannot use is counted (:attr:`BackboneBridge.unparseable_replies`), since a
library may swallow it silently: a reply to a request with a schema (``response_format``, or
tools) that holds no JSON, and a reply to a request that requires a tool call that holds none.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from memsys.embed import Embedder
from memsys.llm.backbone import Backbone
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


class BackboneBridge:
    """The endpoint; a context manager (or call :meth:`start` / :meth:`stop`).

    ``backbone`` answers ``/v1/chat/completions`` (``None``: chat requests are refused, for a
    retrieval-only use), ``embedder`` answers ``/v1/embeddings`` (``None``: refused).
    ``default_max_tokens`` applies to a chat request that names no limit. ``model`` is the name
    ``/v1/models`` lists (clients must send some model name; the bridge ignores it).
    ``socket_timeout_s`` bounds each read and write on a client's connection (not the
    backbone's work, which its own retry policy times), so that an idle or stalled connection
    does not hold a handler thread for ever.
    """

    def __init__(
        self,
        backbone: Backbone | None,
        embedder: Embedder | None = None,
        *,
        model: str = "harness",
        default_max_tokens: int = 1024,
        socket_timeout_s: float = 600.0,
    ) -> None:
        self.backbone = backbone
        self.embedder = embedder
        self.model = model
        self.default_max_tokens = default_max_tokens
        #: The first request that failed for good (see the module docstring).
        self.failure: BaseException | None = None
        #: Chat requests served (cached or not) and texts embedded, for tests and reports.
        self.chat_requests = 0
        self.embedded_texts = 0
        #: Replies served that the library cannot use (see the module docstring).
        self.unparseable_replies = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self, socket_timeout_s))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (ends in ``/v1``)."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> BackboneBridge:
        """Serve on a daemon thread."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, name="backbone-bridge", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> BackboneBridge:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def raise_failure(self) -> None:
        """Raise the first failure, if a request failed since the bridge started."""
        if self.failure is not None:
            raise self.failure

    def record_failure(self, error: BaseException) -> None:
        """Keep ``error`` for :meth:`raise_failure` unless an earlier one is kept."""
        with self._lock:
            self.failure = self.failure or error

    # -- the two endpoints ----------------------------------------------------------------------

    def chat(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """An OpenAI chat completion for ``body`` (a ``/v1/chat/completions`` request)."""
        if self.backbone is None:
            raise BridgeError("this bridge has no backbone: chat requests are refused")
        tools = _offered_tools(body)
        messages = to_backbone_messages(body.get("messages") or [])
        schema = request_schema(body)
        allow_plain = body.get("tool_choice") in (None, "auto")
        if tools:
            messages = with_tools_note(messages, tools, allow_plain)
            schema = tool_call_schema(tools, allow_plain)
        params = sampling_params(body, self.default_max_tokens, schema)
        try:
            reply = self.backbone.complete(messages, params)
        except Exception as error:
            self.record_failure(error)
            raise BridgeError(f"the backbone failed: {error}") from error
        unusable = bool(tools or schema) and not usable_reply(reply.text, tools, allow_plain)
        with self._lock:
            self.chat_requests += 1
            self.unparseable_replies += unusable
        context = json.dumps(messages, ensure_ascii=False, sort_keys=True)
        return completion_body(reply, tools, self.model, context)

    def embed(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """An OpenAI embeddings response for ``body`` (float or base64 encoding)."""
        if self.embedder is None:
            raise BridgeError("this bridge has no embedder: embedding requests are refused")
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            raise BridgeError("input must be a string or a list of strings")
        vectors = np.asarray(self.embedder.encode(texts), dtype=np.float32)
        with self._lock:
            self.embedded_texts += len(texts)
        base64_encoded = body.get("encoding_format") == "base64"
        data = [
            {
                "object": "embedding",
                "index": index,
                "embedding": (
                    base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
                    if base64_encoded
                    else [float(value) for value in vector]
                ),
            }
            for index, vector in enumerate(vectors)
        ]
        return {
            "object": "list",
            "data": data,
            "model": str(body.get("model") or self.model),
            "usage": {"prompt_tokens": 0, "total_tokens": 0},
        }


# -- requests -----------------------------------------------------------------------------------


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


def _offered_tools(body: Mapping[str, Any]) -> list[dict[str, Any]]:
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
    memsys.llm.bridge.BridgeError: tools A and B define X differently
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


# -- replies ------------------------------------------------------------------------------------


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


def _handler_for(bridge: BackboneBridge, socket_timeout_s: float) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in separate writes
        timeout = socket_timeout_s

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                model = {"id": bridge.model, "object": "model", "owned_by": "memsys"}
                self._send(200, {"object": "list", "data": [model]})
            else:
                self._send(404, _error(f"no route {self.path}"))

        def do_POST(self) -> None:
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError as error:
                self._send(400, _error(f"not a JSON request: {error}"))
                return
            try:
                if self.path.rstrip("/").endswith("/chat/completions"):
                    payload = bridge.chat(body)
                elif self.path.rstrip("/").endswith("/embeddings"):
                    payload = bridge.embed(body)
                else:
                    self._send(404, _error(f"no route {self.path}"))
                    return
            except BridgeError as error:
                self._send(400, _error(str(error)))
                return
            except Exception as error:  # the embedder's, or the bridge's own: stop the build
                bridge.record_failure(error)
                self._send(500, _error(f"{type(error).__name__}: {error}", "server_error"))
                return
            self._send(200, payload)

        def _send(self, status: int, payload: Mapping[str, Any]) -> None:
            data = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind}}
