"""Which services a memory's construction used, recorded by the services themselves.

A cached memory is keyed by what built it (:meth:`memsys.base.MemorySystem.construction_identity`),
and a method declares the services its construction calls. A declaration by hand can be wrong;
so while a memory is built (:func:`recording`), every service notes its own use at its entry point
(:func:`record`: the embedder's ``encode``, the parser's ``parse``, the backbone's ``complete``
and ``complete_many``), and the caller compares what was used with what was declared. Each service also counts what it
was asked for (:class:`Usage`: LLM requests, texts embedded, texts parsed, cache hits included),
which is what a memory's construction cost, whatever the caches held.

Recorded per thread of control (a :class:`contextvars.ContextVar`): memories built at once in
threads, and questions retrieved meanwhile, do not see each other's use. Calls a service makes on
its own worker threads are recorded once, at the entry the method called. A limit: a method that
starts threads of its own and calls a service there is not seen (a new thread starts with an empty
context); none of the methods here does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

#: The services a construction may use, as :func:`record` names them.
EMBEDDER = "embedder"
PARSER = "parser"
LLM = "llm"
SERVICES = (EMBEDDER, PARSER, LLM)


@dataclass
class Usage:
    """What a block asked of the services: which it used, and how much of each (``amounts``:
    LLM requests, texts embedded, texts parsed)."""

    services: set[str] = field(default_factory=set)
    amounts: Counter[str] = field(default_factory=Counter)


_usage: ContextVar[Usage | None] = ContextVar("construction_usage", default=None)


@contextmanager
def recording() -> Iterator[Usage]:
    """The services used inside the block and their amounts, filled as they are called."""
    usage = Usage()
    token = _usage.set(usage)
    try:
        yield usage
    finally:
        _usage.reset(token)


def record(service: str, amount: int = 1) -> None:
    """Note that ``service`` (one of :data:`SERVICES`) is being asked for ``amount`` units (LLM
    requests, texts); nothing outside a :func:`recording` block. An amount of 0 still counts the
    service as used."""
    if service not in SERVICES:
        raise ValueError(f"unknown service {service!r}; expected one of {SERVICES}")
    usage = _usage.get()
    if usage is not None:
        usage.services.add(service)
        usage.amounts[service] += amount
