"""A scriptable OpenAI-compatible chat server with no model behind it.

For fault-injection tests and throughput benchmarks of the HTTP path (and as a stand-in for
``vllm serve`` when testing the launch script): it answers
``POST /v1/chat/completions`` with a valid completion that echoes the last message after a fixed
latency, or, following a script of actions queued by the test, with a 400, a 429, a 500, a hang,
a dropped connection, malformed JSON or a JSON object without choices; or as a hostile server
would: trickling its reply a byte at a time (``trickle``), streaming a chunked body without end
(``endless``), a 401 whose body echoes the request's ``Authorization`` header (``echo_auth``), a
reply that is not UTF-8 (``bad_utf8``), token counts that are not numbers (``bad_usage``), or a
reply of ``huge_chars`` characters whatever ``max_tokens`` says (``huge``); or a 429 whose quota is
used up (``quota``, OpenAI's ``insufficient_quota``). Each of these ends by itself within
``hang_s`` seconds, or when the server stops. As an overloaded server: ``max_in_flight`` admits
that many requests at once and answers the others 429 with ``Retry-After: retry_after``;
``limit_every`` answers every that-many-th request 429 the same way (a rate limit whatever the
load). With ``schema_replies``
an ``ok`` reply is instead one the request's caller can use (:func:`usable_reply`): the smallest
instance of the request's JSON schema, or for a request without one a plain reply that the
methods' text parsers accept, so that a construction benchmark makes the requests a method makes
with a good model rather than its retry and fallback requests. Rules keyed on a
request's content (:meth:`FakeChatServer.on`) script one question of a run to fail for good, or a
judge to reply with garbage, whatever order a concurrent client sends them in. It records how
many requests it saw and their ``Authorization`` headers, so a test can prove a key was sent
without it being stored.

Test and benchmark infrastructure, not part of the library: it lives in ``tests/fakes`` and is
imported as ``fakes.chat_server`` (``tests/`` on ``sys.path``). Its usable replies come from the
library (:func:`memsys.llm.schema_reply.usable_text`), which the plan's scripted backbone shares.

Run standalone (prints ``READY <base url>`` once listening)::

    PYTHONPATH=tests python -m fakes.chat_server --latency 0.2 [--schema-replies]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, get_args

from memsys.llm.schema_reply import usable_text

Action = Literal[
    "ok",
    "400",
    "429",
    "quota",
    "500",
    "503",
    "hang",
    "drop",
    "malformed",
    "empty",
    "trickle",
    "endless",
    "echo_auth",
    "bad_utf8",
    "bad_usage",
    "huge",
]
ACTIONS: tuple[str, ...] = get_args(Action)


@dataclass
class Rule:
    """Answer requests whose messages contain every one of ``contains`` with ``action``.

    ``remaining`` counts the requests it still applies to (``None``: all of them); ``reply``
    replaces the echo in an ``ok`` completion (a judge's garbage verdict, say).
    """

    contains: tuple[str, ...]
    action: Action
    remaining: int | None
    reply: str | None

    def take(self, text: str) -> bool:
        """Whether this rule answers a request with this text (using up one of its times)."""
        if self.remaining == 0 or not all(part in text for part in self.contains):
            return False
        if self.remaining is not None:
            self.remaining -= 1
        return True


class FakeChatServer:
    """A local server on 127.0.0.1; use as a context manager or call start/stop.

    ``latency_s`` delays every ``ok`` reply; ``hang_s`` bounds a ``hang`` (it also ends when the
    server stops); ``schema_replies`` answers ``ok`` with :func:`usable_reply` instead of an echo. A request gets the action of the first content rule (:meth:`on`) that matches
    it; otherwise actions queued with :meth:`script` apply to the next requests in arrival order;
    once the queue is empty every request gets ``ok``.
    """

    def __init__(
        self,
        latency_s: float = 0.0,
        hang_s: float = 30.0,
        port: int = 0,
        *,
        schema_replies: bool = False,
        huge_chars: int = 2_000_000,
        max_in_flight: int | None = None,
        limit_every: int | None = None,
        retry_after: str = "1",
    ) -> None:
        self.latency_s = latency_s
        self.max_in_flight = max_in_flight
        self.limit_every = limit_every
        self.retry_after = retry_after
        #: Requests answered 429 for overload (``max_in_flight``, ``limit_every``).
        self.rate_limited = 0
        self._admitted = 0
        self.hang_s = hang_s
        self.huge_chars = huge_chars
        self.schema_replies = schema_replies
        self.authorization_headers: list[str] = []
        self.request_count = 0
        #: The most ``ok`` requests answered at once (their latency overlapping).
        self.peak_in_flight = 0
        self._in_flight = 0
        self._actions: deque[str] = deque()
        self._rules: list[Rule] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self._httpd.daemon_threads = True
        self._httpd.request_queue_size = 256
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (ends in ``/v1``)."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def script(self, *actions: Action) -> None:
        """Queue actions for the next requests."""
        unknown = set(actions) - set(ACTIONS)
        if unknown:
            raise ValueError(f"unknown actions {sorted(unknown)}; known: {ACTIONS}")
        with self._lock:
            self._actions.extend(actions)

    def on(
        self,
        contains: str | Sequence[str],
        action: Action = "ok",
        *,
        times: int | None = None,
        reply: str | None = None,
    ) -> None:
        """Answer requests whose messages contain ``contains`` (every one, if several) with
        ``action``, for the next ``times`` such requests or all of them; rules match in the
        order they were added."""
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; known: {ACTIONS}")
        parts = (contains,) if isinstance(contains, str) else tuple(contains)
        with self._lock:
            self._rules.append(Rule(parts, action, times, reply))

    def clear(self) -> None:
        """Forget every rule and queued action: from now on every request gets ``ok``."""
        with self._lock:
            self._rules.clear()
            self._actions.clear()

    def next_action(self, authorization: str, request: dict[str, Any]) -> tuple[str, str | None]:
        """Count a request and pick what to do with it, and the reply text for an ``ok``."""
        messages = request.get("messages") or []
        text = "\n".join(str(message.get("content", "")) for message in messages)
        with self._lock:
            self.request_count += 1
            self.authorization_headers.append(authorization)
            for rule in self._rules:
                if rule.take(text):
                    return rule.action, rule.reply
            action = self._actions.popleft() if self._actions else "ok"
        return action, usable_reply(request) if self.schema_replies and action == "ok" else None

    def admit(self) -> bool:
        """Whether an overloaded server takes this request (``max_in_flight``, ``limit_every``);
        an admitted one must be let go with :meth:`leave`."""
        with self._lock:
            refused = (self.limit_every and self.request_count % self.limit_every == 0) or (
                self.max_in_flight is not None and self._admitted >= self.max_in_flight
            )
            if refused:
                self.rate_limited += 1
                return False
            self._admitted += 1
            return True

    def leave(self) -> None:
        """An admitted request is done."""
        with self._lock:
            self._admitted -= 1

    def answering(self, delta: int) -> None:
        """Count an ``ok`` request starting (+1) or done (-1) waiting out its latency."""
        with self._lock:
            self._in_flight += delta
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)

    def serve_forever(self) -> None:
        """Serve in the calling thread until :meth:`stop` (from another thread) or Ctrl-C."""
        self._httpd.serve_forever(poll_interval=0.05)

    def start(self) -> FakeChatServer:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release hung handlers and stop serving."""
        self._stopping.set()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
        self._httpd.server_close()

    def wait_for_stop(self, seconds: float) -> None:
        """Sleep up to ``seconds``, returning early when the server stops (for hangs)."""
        self._stopping.wait(seconds)

    def __enter__(self) -> FakeChatServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def completion_body(request: dict[str, Any], reply: str | None = None) -> dict[str, Any]:
    """A valid chat completion with ``reply``, or echoing the request's last message."""
    messages = request.get("messages") or [{"content": ""}]
    text = f"echo: {messages[-1].get('content', '')}" if reply is None else reply
    prompt_words = sum(len(str(message.get("content", "")).split()) for message in messages)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_words,
            "completion_tokens": len(text.split()),
            "total_tokens": prompt_words + len(text.split()),
        },
    }


def usable_reply(request: dict[str, Any]) -> str:
    """:func:`usable_text` for an OpenAI-style chat body (``response_format`` as the
    OpenAI-compatible provider sends it)."""
    stops = request.get("stop") or []
    return usable_text(
        str((request.get("messages") or [{}])[-1].get("content", "")),
        request_schema(request),
        [stops] if isinstance(stops, str) else stops,
    )


def request_schema(request: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a chat request constrains its reply to (``json_schema`` or llama.cpp's
    ``json_object`` form), or ``None``."""
    response_format = request.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        return (response_format.get("json_schema") or {}).get("schema")
    return response_format.get("schema")


#: Seconds between the bytes of a ``trickle`` reply and the chunks of an ``endless`` one.
DRIP_S = 0.2


def _trickle(handler: BaseHTTPRequestHandler, server: FakeChatServer, request: Any) -> None:
    """A valid reply, sent a byte every :data:`DRIP_S` (headers first), for at most
    ``hang_s``: each read returns long before any read timeout."""
    body = json.dumps(completion_body(request)).encode()
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    _drip(handler, server, (bytes([b]) for b in head + body))


def _endless(handler: BaseHTTPRequestHandler, server: FakeChatServer, request: Any) -> None:
    """A 200 with a chunked body that never ends (until ``hang_s`` or the server stops)."""
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    opening = b'{"id": "chatcmpl-fake", "choices": [{"index": 0, "message": {"content": "'
    chunks = [head, b"%x\r\n%s\r\n" % (len(opening), opening)]
    _drip(handler, server, itertools.chain(chunks, itertools.repeat(b"4\r\nmore\r\n")))


def _drip(handler: BaseHTTPRequestHandler, server: FakeChatServer, pieces: Any) -> None:
    deadline = time.monotonic() + server.hang_s
    try:
        for piece in pieces:
            if time.monotonic() >= deadline or server._stopping.is_set():
                break
            handler.wfile.write(piece)
            handler.wfile.flush()
            server.wait_for_stop(DRIP_S)
    except OSError:
        pass  # the client gave up: what a deadline is for
    handler.close_connection = True


def _echo_auth(handler: BaseHTTPRequestHandler, server: FakeChatServer, request: Any) -> None:
    """A 401 whose error message repeats the ``Authorization`` header it got."""
    echoed = handler.headers.get("Authorization", "")
    error = {"error": {"message": f"invalid credentials: {echoed}", "type": "auth"}}
    _send_raw(handler, 401, json.dumps(error).encode())


def _bad_utf8(handler: BaseHTTPRequestHandler, server: FakeChatServer, request: Any) -> None:
    """A completion whose text holds a byte that is not UTF-8."""
    body = json.dumps(completion_body(request, "BROKEN")).encode()
    _send_raw(handler, 200, body.replace(b"BROKEN", b"bro\xffken"))


def _bad_usage(handler: BaseHTTPRequestHandler, server: FakeChatServer, request: Any) -> None:
    """A completion whose ``usage`` counts are not numbers."""
    body = completion_body(request)
    body["usage"] = {"prompt_tokens": "n/a", "completion_tokens": "many", "total_tokens": None}
    _send_raw(handler, 200, json.dumps(body).encode())


def _huge(handler: BaseHTTPRequestHandler, server: FakeChatServer, request: Any) -> None:
    """A completion of ``huge_chars`` characters, whatever the request's ``max_tokens``."""
    text = ("word " * (server.huge_chars // 5 + 1))[: server.huge_chars]
    _send_raw(handler, 200, json.dumps(completion_body(request, text)).encode())


def _send_raw(handler: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.close_connection = True  # a client that stopped reading (a size cap) resets it
    with contextlib.suppress(OSError):
        handler.wfile.write(body)


HOSTILE = {
    "trickle": _trickle,
    "endless": _endless,
    "echo_auth": _echo_auth,
    "bad_utf8": _bad_utf8,
    "bad_usage": _bad_usage,
    "huge": _huge,
}


def _handler_for(server: FakeChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers
        disable_nagle_algorithm = True  # headers and body go out in separate writes

        def log_message(self, format: str, *args: Any) -> None:
            """Silence per-request logging."""

        def do_GET(self) -> None:
            """Readiness probes: ``/health`` and ``/v1/models`` answer 200, as vLLM's do."""
            if self.path in ("/health", "/v1/models"):
                models = {"object": "list", "data": [{"id": "fake", "object": "model"}]}
                self._send(200, json.dumps(models).encode())
            else:
                self._send(404, b'{"error": {"message": "not found"}}')

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            request = json.loads(self.rfile.read(length) or b"{}")
            action, reply = server.next_action(self.headers.get("Authorization", ""), request)
            if not server.admit():
                error = {"error": {"message": "overloaded: slow down", "type": "requests"}}
                self._send(429, json.dumps(error).encode(), {"Retry-After": server.retry_after})
                return
            try:
                self._answer(action, request, reply)
            finally:
                server.leave()

        def _answer(self, action: str, request: dict[str, Any], reply: str | None) -> None:
            if action == "ok":
                server.answering(+1)
                time.sleep(server.latency_s)
                server.answering(-1)
                self._send(200, json.dumps(completion_body(request, reply)).encode())
            elif action in ("400", "429", "500", "503"):
                error = {"error": {"message": f"injected {action}", "type": "fake"}}
                self._send(int(action), json.dumps(error).encode(), {"Retry-After": "0"})
            elif action == "quota":
                error = {
                    "error": {
                        "message": "You exceeded your current quota, please check your plan.",
                        "type": "insufficient_quota",
                        "code": "insufficient_quota",
                    }
                }
                self._send(429, json.dumps(error).encode())
            elif action == "malformed":
                self._send(200, b'{"id": "chatcmpl-fake", "choices": [')
            elif action == "empty":
                self._send(200, b"{}")
            elif action == "hang":
                server.wait_for_stop(server.hang_s)
                self.close_connection = True
            elif action in HOSTILE:
                HOSTILE[action](self, server, request)
            else:  # drop: close the socket without a status line
                self.close_connection = True

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

    return Handler


def main() -> None:
    """Serve until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per ok reply")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--max-in-flight", type=int, default=None, help="429 beyond this many")
    parser.add_argument("--limit-every", type=int, default=None, help="429 every n-th request")
    parser.add_argument("--retry-after", default="1", help="the 429s' Retry-After header")
    parser.add_argument("--always", choices=ACTIONS, default=None, help="answer every request so")
    parser.add_argument(
        "--schema-replies",
        action="store_true",
        help="answer with the smallest instance of each request's JSON schema (see usable_reply)",
    )
    args = parser.parse_args()
    server = FakeChatServer(
        latency_s=args.latency,
        port=args.port,
        schema_replies=args.schema_replies,
        max_in_flight=args.max_in_flight,
        limit_every=args.limit_every,
        retry_after=args.retry_after,
    )
    if args.always is not None:
        server.on("", args.always)
    print(f"READY {server.base_url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
