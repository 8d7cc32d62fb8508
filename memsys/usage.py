"""Which services a memory's construction used, recorded by the services themselves.

A cached memory is keyed by what built it (:meth:`memsys.base.MemorySystem.construction_identity`),
and a method declares the services its construction calls. A declaration by hand can be wrong;
so while a memory is built (:func:`recording`), every service notes its own use at its entry point
(:func:`record`: the embedder's ``encode``, the parser's ``parse``, the backbone's ``complete``
and ``complete_many``), and the caller compares what was used with what was declared.

Recorded per thread of control (a :class:`contextvars.ContextVar`): memories built at once in
threads, and questions retrieved meanwhile, do not see each other's use. Calls a service makes on
its own worker threads are recorded once, at the entry the method called. A limit: a method that
starts threads of its own and calls a service there is not seen (a new thread starts with an empty
context); none of the methods here does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: The services a construction may use, as :func:`record` names them.
EMBEDDER = "embedder"
PARSER = "parser"
LLM = "llm"
SERVICES = (EMBEDDER, PARSER, LLM)

_used: ContextVar[set[str] | None] = ContextVar("construction_services_used", default=None)


@contextmanager
def recording() -> Iterator[set[str]]:
    """The set of services used inside the block, filled as they are called."""
    used: set[str] = set()
    token = _used.set(used)
    try:
        yield used
    finally:
        _used.reset(token)


def record(service: str) -> None:
    """Note that ``service`` (one of :data:`SERVICES`) is being used; nothing outside a
    :func:`recording` block."""
    if service not in SERVICES:
        raise ValueError(f"unknown service {service!r}; expected one of {SERVICES}")
    used = _used.get()
    if used is not None:
        used.add(service)
