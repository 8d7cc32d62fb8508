"""An in-process OpenAI-compatible endpoint in front of a harness :class:`Backbone` and
:class:`~memsys.embed.Embedder`, for memory libraries that only speak to an OpenAI-style server.

Mem0 and LangMem (:mod:`memsys.methods.libraries`) build their memories with their own OpenAI
clients. Pointed at this bridge (``http://127.0.0.1:<port>/v1``), every chat request they send
becomes one :meth:`Backbone.complete` call: served from the run's response cache when it was
asked before, otherwise sent to the run's construction model, and booked to the backbone's stage
like every other method's calls (calls, tokens, latency). ``/v1/embeddings`` answers from the
harness embedder (and its embedding cache). Nothing leaves the machine: the server listens on
127.0.0.1 only.

What the bridge translates (:mod:`memsys.llm.openai_wire`), because a :class:`Backbone` request
is plain messages and :class:`~memsys.llm.types.SamplingParams`:

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
import json
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from memsys.embed import Embedder
from memsys.llm.backbone import Backbone
from memsys.llm.openai_wire import (
    BridgeError,
    completion_body,
    offered_tools,
    request_schema,
    sampling_params,
    to_backbone_messages,
    tool_call_schema,
    usable_reply,
    with_tools_note,
)


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
        tools = offered_tools(body)
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
