"""The contract a provider fulfils: turn one request into one completion.

Providers know nothing about caching, retries or accounting (the backbone does those); they
only translate a request into their library's call and their library's failures into
:mod:`memsys.llm.errors`, marking what is worth retrying.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from memsys.llm.types import Completion, LLMRequest


@runtime_checkable
class Provider(Protocol):
    """Runs one request at a time; the backbone adds concurrency with threads.

    ``model_id`` is the model's identity for the cache key: model name and revision (or file),
    never an endpoint URL or a credential. ``endpoint`` names where requests go, for messages.
    A provider that runs the model in this process sets ``in_process = True``: an interrupted
    run then waits for its running call to return (native code must not be running when the
    interpreter exits) instead of abandoning it (see :mod:`memsys.llm.pool`).
    """

    model_id: str
    endpoint: str

    def generate(self, request: LLMRequest, timeout_s: float) -> Completion:
        """Run one request; raise :class:`~memsys.llm.errors.ProviderError` on failure."""
        ...


@runtime_checkable
class BatchProvider(Provider, Protocol):
    """A provider that is faster given many requests at once (in-process vLLM)."""

    def generate_batch(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        """Run many requests in one engine call, results in request order."""
        ...
