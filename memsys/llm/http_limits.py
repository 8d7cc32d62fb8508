"""One deadline and one size cap per HTTP attempt, whatever the server does.

httpx applies a timeout to each socket operation: connect, each write, each read. A server that
trickles a byte a second, or streams a chunked body without end, never lets one read time out,
so a request would hang for ever. :func:`attempt_limits` sets, for the requests the calling
thread makes inside it, a deadline covering connect, headers and the whole body, and a cap on
the bytes received: every socket operation of the attempt waits at most until the deadline, and
a read past the cap ends the attempt. The limits live in the connection pool's network backend
(:class:`LimitedBackend`), so they hold on reused keep-alive connections too; they are read from
a context variable, so threads sharing one client each keep their own.

Only what this module raises tells a timeout or an oversize reply apart from other failures:
the caller checks :attr:`Attempt.expired` and :attr:`Attempt.oversize` after an error.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpcore2
import httpx2
from httpcore2 import NetworkBackend, NetworkStream


@dataclass
class Attempt:
    """The limits of one attempt and what happened to them."""

    deadline: float
    max_bytes: int
    received: int = 0
    oversize: bool = False

    @property
    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return time.monotonic() >= self.deadline

    def bound(self, timeout: float | None, error: type[Exception]) -> float:
        """``timeout`` shortened to the time left; ``error`` once none is left."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise error("the attempt's deadline has passed")
        return left if timeout is None else min(timeout, left)


_ATTEMPT: ContextVar[Attempt | None] = ContextVar("http_attempt", default=None)


def _bounded(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` cut to what the current attempt has left (unchanged outside an attempt)."""
    attempt = _ATTEMPT.get()
    return timeout if attempt is None else attempt.bound(timeout, error)


@contextmanager
def attempt_limits(timeout_s: float, max_bytes: int) -> Iterator[Attempt]:
    """Bound the requests made inside to ``timeout_s`` seconds from now and ``max_bytes``
    received (headers included)."""
    attempt = Attempt(time.monotonic() + timeout_s, max_bytes)
    token = _ATTEMPT.set(attempt)
    try:
        yield attempt
    finally:
        _ATTEMPT.reset(token)


class LimitedStream(NetworkStream):
    """A connection whose reads and writes honour the current thread's :class:`Attempt`."""

    def __init__(self, stream: NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        attempt = _ATTEMPT.get()
        if attempt is None:
            return self._stream.read(max_bytes, timeout)
        data = self._stream.read(max_bytes, attempt.bound(timeout, httpcore2.ReadTimeout))
        attempt.received += len(data)
        if attempt.received > attempt.max_bytes:
            attempt.oversize = True
            raise httpcore2.ReadError(f"reply larger than {attempt.max_bytes} bytes")
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        timeout = _bounded(timeout, httpcore2.WriteTimeout)
        self._stream.write(buffer, timeout)

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> NetworkStream:
        timeout = _bounded(timeout, httpcore2.ConnectTimeout)
        return LimitedStream(self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class LimitedBackend(NetworkBackend):
    """Opens :class:`LimitedStream` connections; connecting honours the attempt's deadline."""

    def __init__(self, backend: NetworkBackend) -> None:
        self._backend = backend

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> NetworkStream:
        timeout = _bounded(timeout, httpcore2.ConnectTimeout)
        stream = self._backend.connect_tcp(host, port, timeout, local_address, socket_options)
        return LimitedStream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> NetworkStream:
        timeout = _bounded(timeout, httpcore2.ConnectTimeout)
        return LimitedStream(self._backend.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def limited_transport(limits: httpx2.Limits) -> httpx2.HTTPTransport:
    """An HTTP transport whose connections honour :func:`attempt_limits`.

    httpx2 takes no network backend, so the one of its connection pool (a proxy's pool too) is
    wrapped after the fact; the tests of the deadline fail if a new version moves it.
    """
    transport = httpx2.HTTPTransport(limits=limits)
    pool = transport._pool
    if not isinstance(pool, httpcore2.ConnectionPool) or not hasattr(pool, "_network_backend"):
        raise RuntimeError("httpcore2's connection pool changed: cannot bound requests")
    pool._network_backend = LimitedBackend(pool._network_backend)
    return transport
