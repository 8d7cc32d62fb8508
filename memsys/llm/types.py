"""Requests and replies that every backbone provider speaks.

Messages are OpenAI-style ``{"role": ..., "content": ...}`` mappings because every provider we
support (OpenAI, vLLM, Ollama, llama.cpp) takes that shape natively. Sampling parameters are a
frozen dataclass so that the response cache can key on all of them: anything that can change an
output is a field here, and nothing else is (no endpoint URL, no credentials).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: One chat message, e.g. ``{"role": "user", "content": "Hi"}``.
Message = Mapping[str, str]


@dataclass(frozen=True)
class SamplingParams:
    """Decoding settings. Greedy (temperature 0) by default so that runs are repeatable.

    ``json_schema`` asks the provider to constrain the output to that schema (grammar-based in
    llama.cpp and vLLM, ``response_format`` on OpenAI-compatible servers); the reply should still
    go through :mod:`memsys.llm.jsonout`, since not every server enforces it.
    """

    temperature: float = 0.0
    max_tokens: int = 256
    top_p: float = 1.0
    seed: int | None = 0
    stop: tuple[str, ...] = ()
    json_schema: Mapping[str, Any] | None = field(default=None, hash=False)


@dataclass(frozen=True)
class LLMRequest:
    """One chat completion to run: the unit of caching and of batching.

    ``shared_prefix`` is the length, in characters, of the start of the messages' contents (the
    first message's, then the next one's, ...) that many requests repeat verbatim (a fixed
    instruction; a conversation asked many questions); 0 says none. The in-process
    llama.cpp provider evaluates that prefix on its own and keeps its state for the next request
    that shares it; since that split changes the arithmetic a little, the hint is part of the
    request's cache key. Servers do their own prefix caching and ignore it.
    """

    messages: Sequence[Message]
    params: SamplingParams = SamplingParams()
    shared_prefix: int = 0

    def __post_init__(self) -> None:
        if self.shared_prefix:
            total = sum(len(message.get("content", "")) for message in self.messages)
            if not 0 < self.shared_prefix <= total:
                raise ValueError(
                    f"shared_prefix {self.shared_prefix} is outside the messages' contents "
                    f"({total} characters)"
                )


@dataclass(frozen=True)
class Completion:
    """What a provider returns for one request, before caching and timing."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None = None
    #: The provider cut the text at its cap (a server that ignored ``max_tokens``); booked in
    #: the accounting when it happens, not stored in the cache.
    cut: bool = False


@dataclass(frozen=True)
class LLMResponse:
    """A reply as callers see it.

    ``latency_s`` is the wall time of this call: the provider round trip (retries included) for
    a fresh reply, the cache lookup for a cached one. Token counts are the original call's, so a
    method's token cost is the same whether or not its replies came from the cache.
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool
    model: str
    finish_reason: str | None = None
