"""The judge at work: :class:`Judge` asks a backbone for each answer's verdict under a protocol of
:mod:`benchmarks.metrics.judge` and reads the reply as that protocol's evaluator reads it.

An unparseable reply is asked again up a ladder of new requests (so the cache cannot hand back
the same bad reply), at most :data:`ATTEMPTS_PER_RUN` per run and :data:`MAX_ATTEMPTS` in all;
past that, or when the call fails, the verdict is a counted failure (``correct is None``), never
a silent 0 or 1 (docs/running.md, "Rate limits and incomplete runs"; repeats: docs/scoring.md)."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.metrics.judge import (
    CALL_FAILED,
    LABEL_JSON_REPLY,
    LOCOMO_SCHEMA,
    LONGMEMEVAL_REPLY,
    MEM0_REPLY,
    PROTOCOLS,
    YES_NO_JSON_REPLY,
    YES_NO_SCHEMA,
    JudgePrompt,
    Verdict,
    check_protocols,
    judge_prompt,
)
from memsys.llm.backbone import Backbone
from memsys.llm.errors import LLMError
from memsys.llm.jsonout import JSONReplyParser
from memsys.llm.types import LLMRequest, LLMResponse, Message, SamplingParams
from memsys.types import Question

RETRY_REMINDER = "Your reply was not the JSON asked for. Reply with the JSON object only."
#: Requests one run sends to the model for one verdict (cached rungs are not counted).
ATTEMPTS_PER_RUN = 2
#: Rungs of the ladder in all; a verdict still unparseable after them is a final failure.
MAX_ATTEMPTS = 6
#: Sampling temperature of rungs 3 and up (rung ``n`` has seed ``n``): greedy decoding would
#: repeat the reply that could not be parsed.
RESAMPLE_TEMPERATURE = 0.7
#: Seed offset between repeats: far above any rung (:data:`MAX_ATTEMPTS`), so no two requests of
#: one verdict's repeats and rungs share a seed.
REPEAT_SEED_STRIDE = 1000
#: mem0's ``extract_json`` (``mem0/memory/utils.py``): the reply stripped, then the content of
#: its first code fence (optionally tagged ``json``) if it has one, else all of it.
MEM0_FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.DOTALL)


def ladder_request(
    prompt: JudgePrompt,
    rung: int,
    last_reply: str,
    max_tokens: int,
    repeat: int = 0,
    repeat_temperature: float | None = None,
) -> LLMRequest:
    """Rung ``rung`` of the ladder: rung 2 quotes ``last_reply``, the reply of rung 1;
    ``max_tokens`` caps a reply whose format sets none; a ``repeat`` > 0 shifts the seed and samples
    rungs 1-2 at ``repeat_temperature``."""
    messages: list[Message] = [{"role": "user", "content": prompt.text}]
    reply = prompt.reply
    params = SamplingParams(max_tokens=reply.max_tokens or max_tokens, json_schema=reply.schema)
    if rung == 2:
        messages += [
            {"role": "assistant", "content": last_reply},
            {"role": "user", "content": RETRY_REMINDER},
        ]
    elif rung > 2:
        params = dataclasses.replace(params, temperature=RESAMPLE_TEMPERATURE, seed=rung)
    if repeat:
        seed = REPEAT_SEED_STRIDE * repeat + (rung if rung > 2 else 0)
        params = dataclasses.replace(params, seed=seed)
        if rung <= 2 and repeat_temperature is not None:
            params = dataclasses.replace(params, temperature=repeat_temperature)
    return LLMRequest(tuple(messages), params, shared_prefix=prompt.prefix)


class _CountedReader:
    """A reader that counts its replies' outcomes (:attr:`OUTCOMES`) across threads."""

    OUTCOMES: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(self.OUTCOMES, 0)

    def counts(self) -> dict[str, int]:
        """Outcome counts so far (JSON-serializable)."""
        with self._lock:
            return dict(self._counts)

    def _count(
        self, outcome: str, verdict: bool | None, error: str | None
    ) -> tuple[bool | None, str | None]:
        with self._lock:
            self._counts[outcome] += 1
        return verdict, error


class YesNoReader(_CountedReader):
    """LongMemEval's reading: ``'yes' in reply.strip().lower()``; every reply is a verdict."""

    OUTCOMES = ("yes", "no")

    def read(self, text: str) -> tuple[bool | None, str | None]:
        """The verdict of one reply and, when there is none, why."""
        verdict = "yes" in text.strip().lower()
        return self._count("yes" if verdict else "no", verdict, None)


class Mem0LabelReader(_CountedReader):
    """mem0's reading: ``json.loads(extract_json(reply))["label"] == "CORRECT"``; a reply mem0's
    script would stop on has no verdict, and the ladder asks again."""

    OUTCOMES = ("clean", "unparseable", "invalid")

    def read(self, text: str) -> tuple[bool | None, str | None]:
        """The verdict of one reply and, when there is none, why."""
        stripped = text.strip()
        fenced = MEM0_FENCE.search(stripped)
        try:
            value = json.loads(fenced.group(1) if fenced else stripped)
        except ValueError as error:
            return self._count("unparseable", None, f"unparseable verdict: {error}")
        if not isinstance(value, dict) or "label" not in value:
            return self._count("invalid", None, f"unparseable verdict: no label in {text[:200]!r}")
        return self._count("clean", value["label"] == "CORRECT", None)


class ProjectJSONReader:
    """The project's JSON protocols: the reply repaired and checked against ``schema``
    (:class:`~memsys.llm.jsonout.JSONReplyParser`); ``key`` holding ``accepted`` is a yes."""

    def __init__(self, schema: Mapping[str, Any], key: str, accepted: str) -> None:
        self.parser = JSONReplyParser(schema)
        self.key, self.accepted = key, accepted

    def read(self, text: str) -> tuple[bool | None, str | None]:
        """The verdict of one reply and, when there is none, why."""
        parsed = self.parser.parse(text)
        if not parsed.ok:
            return None, f"unparseable verdict: {parsed.error}"
        return parsed.value[self.key] == self.accepted, None

    def counts(self) -> dict[str, int]:
        """Outcome counts so far (JSON-serializable)."""
        return self.parser.counts()


@dataclass
class _Grading:
    """One verdict on its way up the ladder."""

    prompt: JudgePrompt
    #: Which repeat of the verdict (0-based; 0 is the protocol's one request).
    repeat: int = 0
    rung: int = 0
    asked: int = 0
    reply: str = ""
    error: str | None = None
    call_failed: bool = False
    correct: bool | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0

    def climbing(self) -> bool:
        """Whether this verdict takes the next rung in this run."""
        if self.correct is not None or self.call_failed:
            return False  # a failed call is asked again by the next run, from the bottom rung
        return self.asked < ATTEMPTS_PER_RUN and self.rung < MAX_ATTEMPTS

    def next_request(self, max_tokens: int, repeat_temperature: float | None) -> LLMRequest:
        return ladder_request(
            self.prompt, self.rung + 1, self.reply, max_tokens, self.repeat, repeat_temperature
        )

    def verdict(self) -> Verdict:
        final = self.correct is None and not self.call_failed and self.rung >= MAX_ATTEMPTS
        return Verdict(
            self.correct,
            self.reply,
            self.rung,
            self.error,
            self.prompt_tokens,
            self.completion_tokens,
            self.latency_s,
            self.asked,
            final,
        )


def _booked_once(grading: _Grading, booked: set[int]) -> Verdict:
    """``grading``'s verdict; a grading shared by several protocols books its cost on the first
    and is ``shared`` (no cost) on the others, so summed costs count each call once."""
    verdict = grading.verdict()
    if id(grading) not in booked:
        booked.add(id(grading))
        return verdict
    return dataclasses.replace(
        verdict,
        attempts=0,
        asked=0,
        prompt_tokens=0,
        completion_tokens=0,
        latency_s=0.0,
        shared=True,
    )


class Judge:
    """Grades answers through a backbone under one or more protocols; reply outcomes are counted per
    reader (``parsers``) for the run summary. An evaluator's protocol reads and verifies its source
    file here, before any work
    (:class:`~benchmarks.metrics.official_prompts.EvaluatorFileError`)."""

    def __init__(
        self,
        backbone: Backbone,
        *,
        protocols: Sequence[str],
        max_tokens: int = 32,
        repeats: int = 1,
        repeat_temperature: float | None = None,
    ) -> None:
        check_protocols(protocols)
        if repeats < 1:
            raise ValueError(f"repeats must be a positive integer, got {repeats}")
        self.repeats, self.repeat_temperature = repeats, repeat_temperature
        self.backbone = backbone
        self.protocols = tuple(dict.fromkeys(protocols))
        for name in self.protocols:
            if PROTOCOLS[name].official_text is not None:
                PROTOCOLS[name].official_text()
        self.max_tokens = max_tokens
        self.parsers: dict[str, YesNoReader | Mem0LabelReader | ProjectJSONReader] = {
            LONGMEMEVAL_REPLY.reader: YesNoReader(),
            MEM0_REPLY.reader: Mem0LabelReader(),
            LABEL_JSON_REPLY.reader: ProjectJSONReader(LOCOMO_SCHEMA, "label", "CORRECT"),
            YES_NO_JSON_REPLY.reader: ProjectJSONReader(YES_NO_SCHEMA, "answer", "yes"),
        }

    def grade_many(
        self, items: Sequence[tuple[Question, str]], *, stage: str = "judging"
    ) -> list[dict[str, Verdict]]:
        """One verdict per protocol per (question, prediction), in order, failures included;
        protocols that give the same prompt share one grading, and there is one repeat (the probe
        set is graded so)."""
        graded = self._grade(items, stage, 1)
        return [{protocol: found[0] for protocol, found in item.items()} for item in graded]

    def grade_repeated(
        self, items: Sequence[tuple[Question, str]], *, stage: str = "judging"
    ) -> list[dict[str, tuple[Verdict, ...]]]:
        """:meth:`grade_many` with every repeat: ``repeats`` verdicts per protocol, in order."""
        return self._grade(items, stage, self.repeats)

    def _grade(
        self, items: Sequence[tuple[Question, str]], stage: str, repeats: int
    ) -> list[dict[str, tuple[Verdict, ...]]]:
        by_prompt: dict[tuple[str, str, int], _Grading] = {}
        per_item = []
        for question, prediction in items:
            gradings = {}
            for protocol in self.protocols:
                prompt = judge_prompt(question, prediction, protocol)
                gradings[protocol] = tuple(
                    by_prompt.setdefault(
                        (prompt.text, prompt.reply.reader, repeat), _Grading(prompt, repeat)
                    )
                    for repeat in range(repeats)
                )
            per_item.append(gradings)
        pending = list(by_prompt.values())
        # Same instruction, one after another: an in-process model evaluates it once per run of
        # them (replies do not depend on the order; see LLMRequest.shared_prefix).
        pending.sort(key=lambda grading: grading.prompt.text[: grading.prompt.prefix])
        while climbing := [grading for grading in pending if grading.climbing()]:
            requests = [
                grading.next_request(self.max_tokens, self.repeat_temperature)
                for grading in climbing
            ]
            replies = self.backbone.complete_many(requests, stage=stage, return_exceptions=True)
            for grading, reply in zip(climbing, replies, strict=True):
                self._take(grading, reply)
        booked: set[int] = set()
        return [
            {
                protocol: tuple(_booked_once(grading, booked) for grading in repeated)
                for protocol, repeated in gradings.items()
            }
            for gradings in per_item
        ]

    def _take(self, grading: _Grading, reply: LLMResponse | LLMError) -> None:
        """Record one rung's reply: a verdict, or why there is none."""
        grading.rung += 1
        if isinstance(reply, LLMError):
            grading.asked += 1
            grading.reply, grading.error = "", f"{CALL_FAILED} {reply}"
            grading.call_failed = True
            return
        grading.asked += not reply.cached
        grading.prompt_tokens += reply.prompt_tokens
        grading.completion_tokens += reply.completion_tokens
        grading.latency_s += reply.latency_s
        grading.reply = reply.text
        grading.correct, grading.error = self.parsers[grading.prompt.reply.reader].read(reply.text)
