"""A backbone with no model: replies its callers can use, token counts a plan can price.

``python -m benchmarks.plan`` runs the real construction, retrieval, answering and judging code
to count the calls a run would make and the prompts it would send; only the model is missing.
This provider stands in for it. A request that carries a JSON schema gets the smallest instance
of that schema, and one without gets a plain reply that the methods' text parsers accept (both
from :func:`memsys.llm.schema_reply.usable_text`, which the tests' fake server answers with
too), so every ``extraction: llm`` pipeline takes the path it takes with a good model rather than its
retry and fallback paths, which would change the set of requests counted.

Token counts are what a plan needs, not what the reply holds: ``prompt_tokens`` counts the
messages with the harness tokenizer (:class:`~memsys.tokens.TokenCounter`, SmolLM2's BPE, not
the priced model's tokenizer) plus a chat template's overhead (:data:`TOKENS_PER_MESSAGE`,
:data:`REPLY_PRIMING_TOKENS`), and ``completion_tokens`` is the request's ``max_tokens``: the
most a model could be billed for it.

Its replies must never be served for a real model: the model id starts with ``scripted:`` (cache
keys include it), and the plan runs with the response cache off in a throwaway directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memsys.llm.schema_reply import usable_text
from memsys.llm.types import Completion, LLMRequest, Message
from memsys.tokens import TokenCounter

#: Tokens a chat template adds around each message (role marker, separators), as OpenAI's
#: token-counting recipe for its chat models reckons them.
TOKENS_PER_MESSAGE = 3
#: Tokens that open the assistant's reply (same recipe).
REPLY_PRIMING_TOKENS = 3


@dataclass(frozen=True)
class ScriptedConfig:
    """``model`` names what the scripted replies stand in for (a backbone's name): it goes into
    the model id, so memories built for two backbones stay apart as they would in a real run."""

    model: str = "scripted"

    def build(self) -> ScriptedProvider:
        """The provider (loads the harness tokenizer's vocabulary, well under a second)."""
        return ScriptedProvider(self, TokenCounter())


class ScriptedProvider:
    """Answers every request at once; thread-safe (the tokenizer holds its own lock)."""

    def __init__(self, config: ScriptedConfig, tokens: TokenCounter) -> None:
        self.model_id = f"scripted:{config.model}"
        self.endpoint = "scripted replies (no model)"
        self.tokens = tokens

    def generate(self, request: LLMRequest, timeout_s: float) -> Completion:
        """A usable reply, the prompt's harness tokens, and ``max_tokens`` as completion tokens."""
        return Completion(
            text=usable_text(
                request.messages[-1].get("content", "") if request.messages else "",
                request.params.json_schema,
                request.params.stop,
            ),
            prompt_tokens=prompt_tokens(self.tokens, request.messages),
            completion_tokens=request.params.max_tokens,
            finish_reason="stop",
        )


def prompt_tokens(tokens: TokenCounter, messages: Sequence[Message]) -> int:
    """Harness tokens of ``messages`` as a chat model reads them: each content plus
    :data:`TOKENS_PER_MESSAGE`, and :data:`REPLY_PRIMING_TOKENS` once."""
    contents = sum(tokens.count(message.get("content", "")) for message in messages)
    return contents + TOKENS_PER_MESSAGE * len(messages) + REPLY_PRIMING_TOKENS
