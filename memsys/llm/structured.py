"""Schema-validated LLM extraction over many units, with one retry and a counted fallback.

The one helper of every method that asks the LLM for JSON (FraCom, CAST, HingeMem). The
``extraction: llm`` pipelines ask the construction backbone for JSON once per unit (an
utterance, a message, a scene, a session, a question). Small models return garbage often enough
that a method has to survive it, and the tables have to show how often it happened, counted the
same way for every method so that fallback rates compare. :func:`ask_json_many` does that:

1. every unit asked at once (up to the backbone's concurrency), each reply parsed by a
   :class:`~memsys.llm.jsonout.JSONReplyParser` and then checked by the method's ``accept``
   (e.g. "every argument occurs in the sentence"), which returns the converted value, ``None``
   to reject it, or :class:`Rejected` to reject it saying why;
2. every rejected unit (a failed request included) asked once more as soon as its reply is
   rejected, as a *new* request: the original messages, the rejected reply and
   :data:`RETRY_NOTE` saying what was wrong (a repeated identical request would only be served
   the same reply from the response cache);
3. units rejected twice come back as ``None``: the caller runs its substitute (a lite extractor,
   the rules) on them and the :class:`ExtractionReport` counts them as fallbacks.

A tripped backbone breaker (:class:`~memsys.llm.errors.BackboneUnavailableError`) or a
replay-mode cache miss is not caught: then the backbone is down (or a prompt changed) and the run
must stop rather than silently turn into a lite run.

The segmenters (:mod:`memsys.segment.base`: ``Segmenter.ask``/``ask_many``) make plain calls
with no retry and meter them in a :class:`~memsys.segment.base.SegmentationCost`: its
``llm_calls``, ``failed_calls``, ``prompt_tokens`` and ``completion_tokens`` are this report's
``calls``, ``request_errors``, ``prompt_tokens`` and ``completion_tokens``, and the sum of its
``fallbacks`` (by kind) is this report's ``fallbacks``; with no retry, ``retried`` and
``accepted_retry`` would be 0.
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
#: What :data:`RETRY_NOTE` says of a reply that ``accept`` rejected with a bare ``None``.
REJECTED = "it did not take its content from the given text"
#: The longest :class:`Rejected` reason a retry note quotes (a reason may hold a piece of the
#: reply).
MAX_PROBLEM_CHARS = 200


@dataclass(frozen=True)
class Rejected:
    """What ``accept`` returns to reject a reply and say why: ``reason`` completes
    :data:`RETRY_NOTE`'s "That reply could not be used: ..." (a lower-case clause)."""

    reason: str


#: ``accept(index, value)``: the value the method keeps, or ``None``/:class:`Rejected`.
Accept = Callable[[int, Any], T | Rejected | None]


@dataclass
class ExtractionReport:
    """What one LLM extraction stage cost and how often it had to fall back.

    ``accepted_first``/``accepted_retry`` count units whose first/second reply was used;
    ``fallbacks`` the units handed to the method's substitute (a lite extractor, rules);
    ``request_errors`` replies that never came (the request failed for good); ``parse`` the JSON
    parser's outcome counts over all replies; ``prompt_tokens``/``completion_tokens`` include
    cached replies (the method's cost).
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
    accept: Accept[T],
    max_tokens: int,
    report: ExtractionReport,
    grammar: Mapping[str, Any] | None = None,
) -> list[T | None]:
    """The accepted value of each prompt's JSON reply, ``None`` where both tries failed.

    ``accept(index, value)`` gets schema-valid JSON and returns what the method keeps, or
    ``None`` or :class:`Rejected` to reject it (counted under ``problems['rejected']``).
    ``grammar`` is the schema sent to the provider to constrain decoding when it differs from
    the ``schema`` replies are validated against (e.g. a stricter one); by default ``schema``.
    """
    with PendingJSON(
        backbone, prompts, schema=schema, max_tokens=max_tokens, report=report, grammar=grammar
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
        grammar: Mapping[str, Any] | None = None,
    ) -> None:
        self._started = time.perf_counter()
        self._prompts = [tuple(prompt) for prompt in prompts]
        self._parser = JSONReplyParser(schema)
        sent = schema if grammar is None else grammar
        self._params = SamplingParams(max_tokens=max_tokens, json_schema=sent)
        self._report = report
        self._flow = RequestFlow[tuple[int, int]](backbone)
        report.units += len(self._prompts)
        for index, prompt in enumerate(self._prompts):
            self._send(index, 1, prompt)

    def results(self, accept: Accept[T]) -> list[T | None]:
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
    accept: Accept[T],
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
    if value is None or isinstance(value, Rejected):
        reason = value.reason[:MAX_PROBLEM_CHARS] if isinstance(value, Rejected) else REJECTED
        return None, _problem(report, "rejected", reason)
    return value, None


def _problem(report: ExtractionReport, kind: str, description: str) -> str:
    report.problems[kind] = report.problems.get(kind, 0) + 1
    return description
