"""How many round trips in a row a request waited for: its chain depth.

No schedule can finish a construction in fewer than ``depth × latency`` seconds when its longest
chain of requests, each sent only after the previous one's reply was read, is ``depth`` long
(``scripts/bench_construction.py`` reports it beside the other lower bounds). The depth is
carried by the code that reads replies, not guessed from a method's structure: each thread holds
the depth of the reply it is handling (:func:`depth`, 0 before any); a request it sends is one
deeper, unless its reply comes from the response cache (no round trip). A
:class:`~memsys.llm.flow.RequestFlow` hands each reply back with its own depth while the caller
handles it, so ES-Mem's turn t + 1, asked while turn t's reply is read, is one deeper than turn
t, and chains interleaved on one flow do not lengthen one another; once every reply of a flow
has been read, the thread's depth is the deepest of them (what follows may use any). Every
construction request goes through a flow (:mod:`memsys.llm.structured`); a bare
``Backbone.complete`` or ``complete_many`` leaves the depth as it was. A request
that waits on several replies counts from the one being handled when it is sent, so the measured
depth can only fall short of the true one: the bound it gives stays a lower bound.

Only measurement reads it: it changes no request and no reply.
"""

from __future__ import annotations

from contextvars import ContextVar

#: Each thread's own (a new thread starts at 0): the depth of the reply it is handling.
_DEPTH: ContextVar[int] = ContextVar("request_chain_depth", default=0)


def depth() -> int:
    """The depth of the reply this thread is handling (0: none); a request it sends now is
    ``depth() + 1`` deep."""
    return _DEPTH.get()


def handling(reply_depth: int) -> None:
    """This thread now handles a reply ``reply_depth`` deep (a worker sending a request for a
    caller: the caller's depth; work that waits on no reply read before: 0)."""
    _DEPTH.set(reply_depth)


def reply_depth(parent: int, cached: bool) -> int:
    """The depth of a reply to a request sent at ``parent``: one round trip more, none from the
    response cache."""
    return parent if cached else parent + 1
