"""Schema-validated LLM extraction over many units, with one retry and a counted fallback.

The ``extraction: llm`` pipelines ask the construction backbone for JSON once per unit (an
utterance, a message, a scene). Small models return garbage often enough that a method has to
survive it, and the tables have to show how often it happened. :func:`ask_json_many` does that
the same way for every method:

1. every unit asked at once (up to the backbone's concurrency), each reply parsed by a
   :class:`~memsys.llm.jsonout.JSONReplyParser` and then checked by the method's ``accept``
   (e.g. "every argument occurs in the sentence"), which returns the converted value or ``None``;
2. every rejected unit asked once more as soon as its reply is rejected, as a *new* request: the
   original messages, the rejected reply and a note saying what was wrong (a repeated identical
   request would only be served the same reply from the response cache);
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
from memsys.llm.flow import RequestFlow
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
    with PendingJSON(
        backbone, prompts, schema=schema, max_tokens=max_tokens, report=report
    ) as pending:
        return pending.results(accept)


class PendingJSON:
    """:func:`ask_json_many` in two halves: the prompts are sent when it is made, the replies
    read by :meth:`results`, so that the caller can do work the prompts do not depend on (a
    parse, an embedding) while the replies come in. Units are independent of one another and a
    unit's retry depends only on its own first reply, so every request goes out as soon as it
    is known (:class:`~memsys.llm.flow.RequestFlow`). Use as a context manager: leaving it
    early stops the requests not yet sent.
    """

    def __init__(
        self,
        backbone: Backbone,
        prompts: Sequence[Sequence[Message]],
        *,
        schema: Mapping[str, Any],
        max_tokens: int,
        report: ExtractionReport,
    ) -> None:
        self._started = time.perf_counter()
        self._prompts = [tuple(prompt) for prompt in prompts]
        self._parser = JSONReplyParser(schema)
        self._params = SamplingParams(max_tokens=max_tokens, json_schema=schema)
        self._report = report
        self._flow = RequestFlow[tuple[int, int]](backbone)
        report.units += len(self._prompts)
        for index, prompt in enumerate(self._prompts):
            self._send(index, 1, prompt)

    def results(self, accept: Callable[[int, Any], T | None]) -> list[T | None]:
        """Each unit's accepted value, ``None`` where both tries failed (see
        :func:`ask_json_many`); the retries go out as the first replies are rejected."""
        report = self._report
        results: list[T | None] = [None] * len(self._prompts)
        for (index, attempt), reply in self._flow:
            if isinstance(reply, LLMResponse):
                report.prompt_tokens += reply.prompt_tokens
                report.completion_tokens += reply.completion_tokens
            value, problem = _judge(index, reply, self._parser, accept, report)
            if problem is None:
                results[index] = value
                if attempt == 1:
                    report.accepted_first += 1
                else:
                    report.accepted_retry += 1
            elif attempt == 1:
                report.retried += 1
                self._send(index, 2, self._retry_prompt(index, reply, problem))
            else:
                report.fallbacks += 1
        for name, count in self._parser.counts().items():
            report.parse[name] = report.parse.get(name, 0) + count
        report.seconds += time.perf_counter() - self._started
        return results

    def _send(self, index: int, attempt: int, prompt: tuple[Message, ...]) -> None:
        self._report.calls += 1
        self._flow.submit((index, attempt), LLMRequest(prompt, self._params))

    def _retry_prompt(
        self, index: int, reply: LLMResponse | LLMError, problem: str
    ) -> tuple[Message, ...]:
        """The original messages, the rejected reply and a note saying what was wrong (a new
        request: the same one would only be served the same reply from the response cache)."""
        reply_text = reply.text if isinstance(reply, LLMResponse) else ""
        return (
            *self._prompts[index],
            {"role": "assistant", "content": reply_text},
            {"role": "user", "content": RETRY_NOTE.format(problem=problem)},
        )

    def __enter__(self) -> PendingJSON:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._flow.close()


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
