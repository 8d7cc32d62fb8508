"""``memsys-bench inspect --serve``: the inspector as a small local web server over run folders,
for sets too large for one page (full LoCoMo across a table's runs, LongMemEval-S).

It serves the inspector's page without data and the JSON routes its script asks, all from
:class:`~benchmarks.inspection.index.Index`; nothing else. The routes, and why it is safe by
default (loopback, ``Host`` checked against DNS rebinding, no URL names a file, every text put
into the page as text): docs/inspector.md.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from benchmarks.inspection.index import Index
from benchmarks.inspection.page import render_page

#: Names a local browser uses for this machine.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
#: What the page may load: its own inline script and style, and requests to this server.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; img-src 'self'"
)


class InspectorServer(ThreadingHTTPServer):
    """The server: its index, its page, and the ``Host`` values it answers."""

    daemon_threads = True

    def __init__(self, index: Index, host: str, port: int, allow_hosts: Iterable[str] = ()):
        super().__init__((host, port), Handler)
        self.index = index
        self.page = render_page(None, index.title).encode("utf-8")
        bound = self.server_address[1]
        names = {*LOOPBACK_NAMES, host, *allow_hosts}
        self.allowed_hosts = {f"{name}:{bound}" for name in names} | set(allow_hosts)
        if bound == 80:  # a browser leaves the default port out of Host
            self.allowed_hosts |= names

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{shown}:{port}/"


class Handler(BaseHTTPRequestHandler):
    """GET only; the routes of the module docstring."""

    server: InspectorServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: one line per request would bury the server's own lines."""

    def do_GET(self) -> None:
        if self.headers.get("Host", "") not in self.server.allowed_hosts:
            self._send(403, b"forbidden: unknown Host", "text/plain; charset=utf-8")
            return
        url = urlsplit(self.path)
        query = {key: values[0] for key, values in parse_qs(url.query).items()}
        index = self.server.index
        if url.path == "/":
            self._send(200, self.server.page, "text/html; charset=utf-8")
        elif url.path == "/api/runs":
            self._json(index.heading())
        elif url.path == "/api/index":
            body, zipped = index.listing_bytes()
            if "gzip" in self.headers.get("Accept-Encoding", ""):
                self._send(200, zipped, "application/json", encoding="gzip")
            else:
                self._send(200, body, "application/json")
        elif url.path == "/api/question":
            self._json(index.question(query.get("id", "")))
        elif url.path == "/api/diff":
            self._json(index.diff(query.get("a", ""), query.get("b", "")))
        else:
            self._send(404, b"not found", "text/plain; charset=utf-8")

    def _json(self, data: Any) -> None:
        if data is None:
            self._send(404, b"null", "application/json")
        else:
            body = json.dumps(data, ensure_ascii=False).encode("utf-8")
            self._send(200, body, "application/json")

    def _send(
        self, status: int, body: bytes, content_type: str, encoding: str | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if encoding is not None:
            self.send_header("Content-Encoding", encoding)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)


def serve(index: Index, host: str, port: int, allow_hosts: Iterable[str] = ()) -> None:
    """Serve until Ctrl-C, printing the URL to open."""
    server = InspectorServer(index, host, port, allow_hosts)
    questions = len(index.questions)
    print(
        f"serving {len(index.runs)} runs, {questions} questions at {server.url} (Ctrl-C stops)",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.server_close()
