"""Structured LLM output over many units, with one retry and a counted fallback.

The one helper of every method and segmenter that asks the LLM for something it must read: JSON
(FraCom, CAST, HingeMem, ES-Mem's topics and intents), SeCom's tagged segmentation lines, a
reflection's rubric, an event-boundary description. The ``extraction: llm`` pipelines ask the
construction backbone once per unit (an utterance, a message, a scene, a session, a dialogue, a
question). Small models return garbage often enough that a method has to survive it, and the
tables have to show how often it happened, counted the same way for every method so that
fallback rates compare. :class:`StructuredFlow` does that, under one rule:

1. every unit asked as soon as it is known (up to the backbone's concurrency), each reply read
   by the unit's ``read``, which returns the value kept, ``None`` to reject it, or
   :class:`Rejected` to reject it saying why (for JSON, :func:`json_reader` parses against a
   schema first, then the method's ``accept`` checks, e.g. "every argument occurs in the
   sentence");
2. every rejected unit (a failed request included) asked once more as soon as its reply is
   rejected, as a *new* request: the original messages, the rejected reply and
   :data:`RETRY_NOTE` saying what was wrong (a repeated identical request would only be served
   the same reply from the response cache);
3. units rejected twice come back as ``None``: the caller runs its substitute (a lite extractor,
   the rules, fixed chunks) on them and the unit's :class:`ExtractionReport` counts them as
   fallbacks.

A tripped backbone breaker (:class:`~memsys.llm.errors.BackboneUnavailableError`) or a
replay-mode cache miss is not caught: then the backbone is down (or a prompt changed) and the run
must stop rather than silently turn into a lite run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Generic, TypeVar

from memsys.llm.backbone import Backbone
from memsys.llm.errors import LLMError
from memsys.llm.flow import RequestFlow
from memsys.llm.jsonout import JSONReplyParser
from memsys.llm.types import LLMRequest, LLMResponse, Message, SamplingParams

T = TypeVar("T")
Tag = TypeVar("Tag")

RETRY_NOTE = (
    "That reply could not be used: {problem}. Answer again, following the instructions above, "
    "with only JSON in the form they give."
)
#: What :data:`RETRY_NOTE` says of a reply that ``accept`` rejected with a bare ``None``.
REJECTED = "it did not take its content from the given text"
#: What :data:`RETRY_NOTE` says of a reply that is not JSON of the requested form.
BAD_JSON = "it was not valid JSON of the requested form"
#: The longest :class:`Rejected` reason a retry note quotes (a reason may hold a piece of the
#: reply).
MAX_PROBLEM_CHARS = 200


@dataclass(frozen=True)
class Rejected:
    """What ``accept`` returns to reject a reply and say why: ``reason`` completes
    :data:`RETRY_NOTE`'s "That reply could not be used: ..." (a lower-case clause); ``kind``
    is the ``problems`` count it goes to."""

    reason: str
    kind: str = "rejected"


#: ``accept(index, value)``: the value the method keeps, or ``None``/:class:`Rejected`.
Accept = Callable[[int, Any], T | Rejected | None]
#: ``read(tag, text)``: what the reply of unit ``tag`` gives, or ``None``/:class:`Rejected`.
Read = Callable[[Any, str], Any]


@dataclass
class ExtractionReport:
    """What one LLM extraction stage cost and how often it had to fall back.

    ``accepted_first``/``accepted_retry`` count units whose first/second reply was used;
    ``fallbacks`` the units handed to the method's substitute (a lite extractor, rules);
    ``request_errors`` replies that never came (the request failed for good); ``parse`` the JSON
    parser's outcome counts over all replies (empty for replies that are not JSON);
    ``prompt_tokens``/``completion_tokens`` include cached replies (the method's cost), and
    ``cached_calls`` says how many of ``calls`` were served from the response cache.
    """

    units: int = 0
    calls: int = 0
    cached_calls: int = 0
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
        """Plain JSON for a memory file or a statistics table (the fields in order)."""
        data = asdict(self)
        data["seconds"] = round(self.seconds, 3)
        for name in ("parse", "problems"):
            data[name] = dict(sorted(data[name].items()))
        return data

    def add(self, other: ExtractionReport) -> None:
        """Add ``other``'s counts to this report's (stages summed into one record)."""
        for name, value in vars(other).items():
            if isinstance(value, dict):
                mine = getattr(self, name)
                for key, count in value.items():
                    mine[key] = mine.get(key, 0) + count
            else:
                setattr(self, name, getattr(self, name) + value)


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


def ask_many(
    backbone: Backbone,
    prompts: Sequence[Sequence[Message]],
    *,
    params: SamplingParams,
    read: Callable[[int, str], T | Rejected | None],
    report: ExtractionReport,
) -> list[T | None]:
    """What ``read(index, text)`` makes of each prompt's reply, ``None`` where both tries failed
    (units independent of one another, all asked at once)."""
    started = time.perf_counter()
    results: list[T | None] = [None] * len(prompts)
    with StructuredFlow[int](backbone) as flow:
        for index, prompt in enumerate(prompts):
            flow.submit(index, prompt, params, read=read, report=report)
        for index, value in flow:
            results[index] = value
    report.seconds += time.perf_counter() - started
    return results


def json_reader(schema: Mapping[str, Any], accept: Accept[T], report: ExtractionReport) -> Read:
    """A ``read`` for JSON replies: parsed (and repaired) against ``schema``, its outcome
    counted in ``report.parse``, then checked by ``accept(tag, value)``. Make one per stage,
    not per unit: building the schema's validator takes longer than a cached reply."""
    parser = JSONReplyParser(schema)
    for outcome in parser.counts():
        report.parse.setdefault(outcome, 0)

    def read(tag: Any, text: str) -> T | Rejected | None:
        parsed = parser.parse(text)
        report.parse[parsed.outcome] += 1
        if not parsed.ok:
            return Rejected(BAD_JSON, kind="bad_json")
        return accept(tag, parsed.value)

    return read


class StructuredFlow(Generic[Tag]):
    """Units of structured output on one :class:`~memsys.llm.flow.RequestFlow`, each asked at
    most twice under the module's rule and counted in its own :class:`ExtractionReport`.

    Iterating yields every unit once, as soon as it is decided: its value, or ``None`` after two
    rejected replies (a counted fallback). Units may be submitted while iterating (a chain: ES-Mem
    asks about turn t + 1 once turn t is read), and they go out lowest ``priority`` first. Use as
    a context manager: leaving it early stops the requests not yet sent.
    """

    def __init__(self, backbone: Backbone) -> None:
        self._flow = RequestFlow[tuple[Tag, int]](backbone)
        self._units: dict[Tag, _Unit] = {}

    def submit(
        self,
        tag: Tag,
        messages: Sequence[Message],
        params: SamplingParams,
        *,
        read: Read,
        report: ExtractionReport,
        priority: float = 0,
    ) -> None:
        """Ask for one unit; ``read`` turns a reply's text into its value (or rejects it)."""
        if tag in self._units:
            raise ValueError(f"unit {tag!r} is already under way")
        unit = _Unit(tuple(messages), params, read, report, priority)
        self._units[tag] = unit
        report.units += 1
        self._send(tag, 1, unit, unit.messages)

    def __iter__(self) -> Iterator[tuple[Tag, Any]]:
        for (tag, attempt), reply in self._flow:
            unit = self._units[tag]
            report = unit.report
            if isinstance(reply, LLMResponse):
                report.prompt_tokens += reply.prompt_tokens
                report.completion_tokens += reply.completion_tokens
                report.cached_calls += reply.cached
            value, problem = _read(tag, reply, unit.read, report)
            if problem is not None and attempt == 1:
                report.retried += 1
                self._send(tag, 2, unit, _retry_messages(unit.messages, reply, problem))
                continue
            if problem is None:
                if attempt == 1:
                    report.accepted_first += 1
                else:
                    report.accepted_retry += 1
            else:
                report.fallbacks += 1
                value = None
            del self._units[tag]
            yield tag, value

    def _send(self, tag: Tag, attempt: int, unit: _Unit, messages: tuple[Message, ...]) -> None:
        unit.report.calls += 1
        self._flow.submit((tag, attempt), LLMRequest(messages, unit.params), unit.priority)

    def __enter__(self) -> StructuredFlow[Tag]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._flow.close()


class PendingJSON:
    """:func:`ask_json_many` in two halves: the prompts are sent when it is made, the replies
    read by :meth:`results`, so that the caller can do work the prompts do not depend on (a
    parse, an embedding) while the replies come in. Units are independent of one another and a
    unit's retry depends only on its own first reply, so every request goes out as soon as it
    is known. Use as a context manager: leaving it early stops the requests not yet sent.
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
        self._report = report
        self._accept: Accept[Any] | None = None
        params = SamplingParams(
            max_tokens=max_tokens, json_schema=schema if grammar is None else grammar
        )
        self._flow = StructuredFlow[int](backbone)
        self._count = len(prompts)
        read = json_reader(schema, self._accepted, report)
        for index, prompt in enumerate(prompts):
            self._flow.submit(index, prompt, params, read=read, report=report)

    def results(self, accept: Accept[T]) -> list[T | None]:
        """Each unit's accepted value, ``None`` where both tries failed (see
        :func:`ask_json_many`); the retries go out as the first replies are rejected."""
        self._accept = accept
        results: list[T | None] = [None] * self._count
        for index, value in self._flow:
            results[index] = value
        self._report.seconds += time.perf_counter() - self._started
        return results

    def _accepted(self, index: int, value: Any) -> Any:
        assert self._accept is not None, "replies are read by results(accept)"
        return self._accept(index, value)

    def __enter__(self) -> PendingJSON:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._flow.__exit__(*exc_info)


@dataclass(frozen=True)
class _Unit:
    """One unit under way: its original messages, how to ask and read it, where to count it."""

    messages: tuple[Message, ...]
    params: SamplingParams
    read: Read
    report: ExtractionReport
    priority: float


def _read(
    tag: Any, reply: LLMResponse | LLMError, read: Read, report: ExtractionReport
) -> tuple[Any, str | None]:
    """The value a reply gives, or ``None`` and what was wrong (also counted by kind)."""
    if not isinstance(reply, LLMResponse):
        report.request_errors += 1
        return None, _problem(report, "request_error", f"the request failed: {reply}")
    value = read(tag, reply.text)
    if value is None:
        return None, _problem(report, "rejected", REJECTED)
    if isinstance(value, Rejected):
        return None, _problem(report, value.kind, value.reason[:MAX_PROBLEM_CHARS])
    return value, None


def _retry_messages(
    messages: tuple[Message, ...], reply: LLMResponse | LLMError, problem: str
) -> tuple[Message, ...]:
    """The original messages, the rejected reply and a note saying what was wrong (a new
    request: the same one would only be served the same reply from the response cache)."""
    reply_text = reply.text if isinstance(reply, LLMResponse) else ""
    return (
        *messages,
        {"role": "assistant", "content": reply_text},
        {"role": "user", "content": RETRY_NOTE.format(problem=problem)},
    )


def _problem(report: ExtractionReport, kind: str, description: str) -> str:
    report.problems[kind] = report.problems.get(kind, 0) + 1
    return description
