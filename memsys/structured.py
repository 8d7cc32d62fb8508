"""Schema-validated LLM extraction over many units, with one retry and a counted fallback.

The ``extraction: llm`` pipelines ask the construction backbone for JSON once per unit (an
utterance, a message, a scene). Small models return garbage often enough that a method has to
survive it, and the tables have to show how often it happened. :func:`ask_json_many` does that
the same way for every method:

1. all units in one :meth:`~memsys.llm.backbone.Backbone.complete_many` batch, each reply parsed
   by a :class:`~memsys.llm.jsonout.JSONReplyParser` and then checked by the method's ``accept``
   (e.g. "every argument occurs in the sentence"), which returns the converted value or ``None``;
2. every rejected unit asked once more in a second batch, as a *new* request: the original
   messages, the rejected reply and a note saying what was wrong (a repeated identical request
   would only be served the same reply from the response cache);
3. units rejected twice come back as ``None``: the caller runs its lite extractor on them and the
   :class:`ExtractionReport` counts them as fallbacks.

A tripped backbone breaker (:class:`~memsys.llm.errors.BackboneUnavailableError`) is not caught:
then the backbone is down and the run must stop rather than silently turn into a lite run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from memsys.llm.backbone import Backbone
from memsys.llm.errors import LLMError
from memsys.llm.jsonout import JSONReplyParser
from memsys.llm.types import LLMRequest, LLMResponse, Message, SamplingParams

T = TypeVar("T")

RETRY_NOTE = (
    "That reply could not be used: {problem}. Answer again, following the instructions above, "
    "with only JSON in the form they give."
)


@dataclass
class ExtractionReport:
    """What one LLM extraction stage cost and how often it had to fall back.

    ``accepted_first``/``accepted_retry`` count units whose first/second reply was used;
    ``fallbacks`` the units handed to the lite extractor; ``request_errors`` replies that never
    came (the request failed for good); ``parse`` the JSON parser's outcome counts over all
    replies; ``prompt_tokens``/``completion_tokens`` include cached replies (the method's cost).
    """

    units: int = 0
    calls: int = 0
    accepted_first: int = 0
    retried: int = 0
    accepted_retry: int = 0
    fallbacks: int = 0
    request_errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    parse: dict[str, int] = field(default_factory=dict)
    problems: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON for a memory file or a statistics table."""
        return {
            "units": self.units,
            "calls": self.calls,
            "accepted_first": self.accepted_first,
            "retried": self.retried,
            "accepted_retry": self.accepted_retry,
            "fallbacks": self.fallbacks,
            "request_errors": self.request_errors,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 3),
            "parse": dict(sorted(self.parse.items())),
            "problems": dict(sorted(self.problems.items())),
        }


def ask_json_many(
    backbone: Backbone,
    prompts: Sequence[Sequence[Message]],
    *,
    schema: Mapping[str, Any],
    accept: Callable[[int, Any], T | None],
    max_tokens: int,
    report: ExtractionReport,
) -> list[T | None]:
    """The accepted value of each prompt's JSON reply, ``None`` where both tries failed.

    ``accept(index, value)`` gets schema-valid JSON and returns what the method keeps, or
    ``None`` to reject it (counted under ``problems['rejected']``).
    """
    started = time.perf_counter()
    parser = JSONReplyParser(schema)
    params = SamplingParams(max_tokens=max_tokens, json_schema=schema)
    results: list[T | None] = [None] * len(prompts)
    report.units += len(prompts)
    first = _ask(backbone, [tuple(p) for p in prompts], params, report)
    retry: dict[int, tuple[Message, ...]] = {}
    for index, reply in enumerate(first):
        value, problem = _judge(index, reply, parser, accept, report)
        if problem is None:
            results[index] = value
            report.accepted_first += 1
            continue
        reply_text = reply.text if isinstance(reply, LLMResponse) else ""
        retry[index] = (
            *prompts[index],
            {"role": "assistant", "content": reply_text},
            {
                "role": "user",
                "content": RETRY_NOTE.format(problem=problem),
            },
        )
    report.retried += len(retry)
    second = _ask(backbone, list(retry.values()), params, report)
    for index, reply in zip(retry, second, strict=True):
        value, problem = _judge(index, reply, parser, accept, report)
        if problem is None:
            results[index] = value
            report.accepted_retry += 1
        else:
            report.fallbacks += 1
    for name, count in parser.counts().items():
        report.parse[name] = report.parse.get(name, 0) + count
    report.seconds += time.perf_counter() - started
    return results


def _ask(
    backbone: Backbone,
    prompts: Sequence[tuple[Message, ...]],
    params: SamplingParams,
    report: ExtractionReport,
) -> list[LLMResponse | LLMError]:
    if not prompts:
        return []
    requests = [LLMRequest(prompt, params) for prompt in prompts]
    replies = backbone.complete_many(requests, return_exceptions=True)
    report.calls += len(requests)
    for reply in replies:
        if isinstance(reply, LLMResponse):
            report.prompt_tokens += reply.prompt_tokens
            report.completion_tokens += reply.completion_tokens
    return replies


def _judge(
    index: int,
    reply: LLMResponse | LLMError,
    parser: JSONReplyParser,
    accept: Callable[[int, Any], T | None],
    report: ExtractionReport,
) -> tuple[T | None, str | None]:
    """The accepted value, or ``None`` and what was wrong (also counted by kind)."""
    if not isinstance(reply, LLMResponse):
        report.request_errors += 1
        return None, _problem(report, "request_error", f"the request failed: {reply}")
    parsed = parser.parse(reply.text)
    if not parsed.ok:
        return None, _problem(report, "bad_json", "it was not valid JSON of the requested form")
    value = accept(index, parsed.value)
    if value is None:
        return None, _problem(report, "rejected", "it did not take its content from the given text")
    return value, None


def _problem(report: ExtractionReport, kind: str, description: str) -> str:
    report.problems[kind] = report.problems.get(kind, 0) + 1
    return description
