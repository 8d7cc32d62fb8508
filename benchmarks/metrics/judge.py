"""``judge_acc``: an LLM grades each answer, through the same backbone interface as everything.

Three protocols, written in this project's words, keeping the sources' label sets, output
formats and grading rules; a run scores every answer under each protocol in ``judge.protocols``
(one cached verdict each), and ``judge_acc`` is the dataset's own (``dataset.judge_protocol``):

* ``mem0`` — mem0-style grading: CORRECT or WRONG, generous on wording and on date formats, as
  JSON ``{"label": ...}``. LoCoMo's own protocol.
* ``strict`` — CORRECT or WRONG, rejecting vague, partial or hedged answers: the same gold fact,
  complete, or WRONG. Not from a paper: it brackets the generous grading from above.
* ``longmemeval`` — the official per-type rules: a yes/no verdict; temporal reasoning tolerates
  off-by-one day counts; knowledge updates accept the updated answer even beside older
  information; preference questions are graded against a rubric. As JSON ``{"answer": "yes"|"no"}``.
  LongMemEval's own protocol; on other datasets its standard rule.

``_abs`` (abstention) questions have one rule under every protocol: correct when the response
recognises the question as unanswerable (LongMemEval's).

A reply that is not the expected JSON is asked again, up a ladder of new requests (so the cache
cannot hand back the same bad reply): the prompt, the prompt with a reminder after the bad reply,
then the prompt sampled with seeds 3, 4, ... (:data:`RESAMPLE_TEMPERATURE`). One run sends at most
:data:`ATTEMPTS_PER_RUN` of them to the model; a rung whose reply is cached and unparseable is
passed over at no cost, so a rerun asks new rungs instead of failing on the old replies. When
that fails too, or the call itself fails, the verdict is a counted failure (``correct is None``),
never a silent 0 or 1; the next run asks again, until :data:`MAX_ATTEMPTS` rungs have been
tried and the failure is final.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memsys.llm.backbone import Backbone
from memsys.llm.errors import LLMError
from memsys.llm.jsonout import JSONReplyParser
from memsys.llm.types import LLMRequest, LLMResponse, Message, SamplingParams
from memsys.types import Question

LOCOMO_SCHEMA = {
    "type": "object",
    "properties": {"label": {"enum": ["CORRECT", "WRONG"]}},
    "required": ["label"],
}
YES_NO_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"enum": ["yes", "no"]}},
    "required": ["answer"],
}

LOCOMO_INSTRUCTION = """Grade an answer to a question about a conversation as CORRECT or WRONG.
You are given the question, the gold answer, and a generated answer.
Be generous: the generated answer is CORRECT when it refers to the same thing as the gold \
answer, even if it is longer or worded differently. For questions about time, the same date or \
period written in another format (for example "May 7th" and "7 May 2023") is CORRECT.

Question: {question}
Gold answer: {gold}
Generated answer: {prediction}

Reply with JSON only: {{"label": "CORRECT"}} or {{"label": "WRONG"}}."""

LME_STANDARD = """You are given a question, its correct answer, and a model's response. Say yes \
if the response contains the correct answer, otherwise no. A response that is equivalent to the \
correct answer, or that contains every intermediate step needed to reach it, also gets yes. A \
response with only part of the required information gets no.{extra}

Question: {question}

Correct answer: {gold}

Model response: {prediction}

Is the model response correct? Reply with JSON only: {{"answer": "yes"}} or {{"answer": "no"}}."""
LME_TEMPORAL_EXTRA = (
    " Do not penalize off-by-one errors in a number of days: if the question asks for a number "
    "of days, weeks or months and the response is off by one (say 19 days for 18), it is correct."
)
LME_UPDATE_EXTRA = (
    " If the response mentions earlier information together with the updated answer, it is "
    "correct as long as the updated answer is the one required."
)
LME_PREFERENCE = """You are given a question, a rubric describing the desired personalized \
response, and a model's response. Say yes if the response satisfies the rubric, otherwise no. \
The response need not cover every point of the rubric; it is correct as long as it recalls and \
uses the user's personal information correctly.

Question: {question}

Rubric: {gold}

Model response: {prediction}

Does the response satisfy the rubric? Reply with JSON only: {{"answer": "yes"}} or {{"answer": "no"}}."""
LME_ABSTENTION = """You are given a question that cannot be answered from the conversation, an \
explanation of why, and a model's response. Say yes if the response recognises that the question \
cannot be answered, for example by saying the information is incomplete or that other \
information is given but not the one asked for; otherwise no.

Question: {question}

Explanation: {gold}

Model response: {prediction}

Does the model recognise the question as unanswerable? Reply with JSON only: \
{{"answer": "yes"}} or {{"answer": "no"}}."""
RETRY_REMINDER = "Your reply was not the JSON asked for. Reply with the JSON object only."
#: Every prompt states its instruction before this, the first field: what precedes it is the
#: same for every answer graded under one protocol (and LongMemEval question type), and is
#: declared as the request's shared prefix (an in-process model evaluates it once).
INSTRUCTION_END = "Question: "
#: Requests one run sends to the model for one verdict (cached rungs are not counted).
ATTEMPTS_PER_RUN = 2
#: Rungs of the ladder in all; a verdict still unparseable after them is a final failure.
MAX_ATTEMPTS = 6
#: Sampling temperature of rungs 3 and up (rung ``n`` has seed ``n``): greedy decoding would
#: repeat the reply that could not be parsed.
RESAMPLE_TEMPERATURE = 0.7


@dataclass(frozen=True)
class Verdict:
    """``correct`` is None when no verdict could be obtained (``error`` says why).

    ``attempts`` counts the rungs tried, ``asked`` those sent to the model in this run (the rest
    came from the cache); ``final`` says a failure will not be asked again (every rung tried).
    Token counts and latency add up over the attempts.
    """

    correct: bool | None
    reply: str
    attempts: int
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    asked: int = 0
    final: bool = False
    #: The verdict of another protocol with the same prompt: its cost is booked there.
    shared: bool = False


STRICT_INSTRUCTION = """Grade an answer to a question about a conversation as CORRECT or WRONG, \
strictly. You are given the question, the gold answer, and a generated answer.
The generated answer is CORRECT only when it states the specific fact of the gold answer, \
complete: the same person, thing, number, date or event. It is WRONG when it is vague or \
generic, gives only part of the gold answer, hedges between several candidates, adds a claim \
that contradicts the gold answer, or does not answer. Other wording of the same specific fact \
is CORRECT; for questions about time, the same date in another format is CORRECT, a different or \
vaguer period is WRONG.

Question: {question}
Gold answer: {gold}
Generated answer: {prediction}

Reply with JSON only: {{"label": "CORRECT"}} or {{"label": "WRONG"}}."""
#: LongMemEval's question types whose official rule adds to the standard one.
LME_EXTRAS = {"temporal_reasoning": LME_TEMPORAL_EXTRA, "knowledge_update": LME_UPDATE_EXTRA}


def _mem0_prompt(fields: dict[str, str], category: str) -> tuple[str, dict[str, Any]]:
    return LOCOMO_INSTRUCTION.format(**fields), LOCOMO_SCHEMA


def _strict_prompt(fields: dict[str, str], category: str) -> tuple[str, dict[str, Any]]:
    return STRICT_INSTRUCTION.format(**fields), LOCOMO_SCHEMA


def _longmemeval_prompt(fields: dict[str, str], category: str) -> tuple[str, dict[str, Any]]:
    if category == "single_session_preference":
        return LME_PREFERENCE.format(**fields), YES_NO_SCHEMA
    return LME_STANDARD.format(extra=LME_EXTRAS.get(category, ""), **fields), YES_NO_SCHEMA


#: Every judge protocol by name: its prompt builder and the words a table header uses for it.
PROTOCOLS = {
    "mem0": (_mem0_prompt, "mem0-style CORRECT/WRONG instruction, generous on wording"),
    "strict": (
        _strict_prompt,
        "strict CORRECT/WRONG instruction: vague, partial or hedged is WRONG",
    ),
    "longmemeval": (
        _longmemeval_prompt,
        "LongMemEval's per-type yes/no instructions (other datasets: its standard rule)",
    ),
}
#: The one rule for ``_abs`` questions, whatever the protocol (for table headers).
ABSTENTION_RULE = "_abs questions: correct when the answer recognises them as unanswerable"


def judge_prompt(question: Question, prediction: str, protocol: str) -> tuple[str, dict[str, Any]]:
    """The grading instruction for ``question`` under ``protocol`` and its verdict's schema."""
    fields = {"question": question.question, "gold": question.answer, "prediction": prediction}
    if question.is_abstention:
        return LME_ABSTENTION.format(**fields), YES_NO_SCHEMA
    build, _ = PROTOCOLS[protocol]
    return build(fields, question.category)


def check_protocols(protocols: Sequence[str]) -> None:
    """Raise ``ValueError`` naming an unknown protocol."""
    unknown = [name for name in protocols if name not in PROTOCOLS]
    if unknown:
        raise ValueError(f"unknown judge protocol(s) {unknown}; known: {sorted(PROTOCOLS)}")


def judging_entry(protocol: str, verdict: Verdict) -> dict[str, Any]:
    """A verdict's cost and outcome as logged (``shared``: the cost is on another protocol's)."""
    return {
        "protocol": protocol,
        "prompt_tokens": verdict.prompt_tokens,
        "completion_tokens": verdict.completion_tokens,
        "latency_s": round(verdict.latency_s, 6),
        "attempts": verdict.attempts,
        "asked": verdict.asked,
        "error": verdict.error,
        **({"final": True} if verdict.final else {}),
        **({"shared": True} if verdict.shared else {}),
    }


def judgings(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Every verdict entry of a record: the dataset's protocol's, then the others'."""
    primary = [record["judging"]] if record.get("judging") else []
    return primary + list((record.get("other_judgings") or {}).values())


def ladder_request(
    prompt: str, schema: dict[str, Any], rung: int, last_reply: str, max_tokens: int
) -> LLMRequest:
    """Rung ``rung`` of the ladder (see the module docstring); ``last_reply`` is the reply of
    the rung below (rung 2 quotes rung 1's)."""
    messages: list[Message] = [{"role": "user", "content": prompt}]
    params = SamplingParams(max_tokens=max_tokens, json_schema=schema)
    shared = instruction_length(prompt)
    if rung == 2:
        messages += [
            {"role": "assistant", "content": last_reply},
            {"role": "user", "content": RETRY_REMINDER},
        ]
    elif rung > 2:
        params = SamplingParams(
            max_tokens=max_tokens, json_schema=schema, temperature=RESAMPLE_TEMPERATURE, seed=rung
        )
    return LLMRequest(tuple(messages), params, shared_prefix=shared)


def instruction_length(prompt: str) -> int:
    """Characters of ``prompt`` before :data:`INSTRUCTION_END` (its fixed instruction)."""
    return max(prompt.find(INSTRUCTION_END), 0)


@dataclass
class _Grading:
    """One verdict on its way up the ladder."""

    prompt: str
    schema: dict[str, Any]
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

    def next_request(self, max_tokens: int) -> LLMRequest:
        return ladder_request(self.prompt, self.schema, self.rung + 1, self.reply, max_tokens)

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
    """Grades answers through a backbone under one or more protocols; parse counts are kept for
    the run summary."""

    def __init__(
        self, backbone: Backbone, *, protocols: Sequence[str], max_tokens: int = 32
    ) -> None:
        check_protocols(protocols)
        self.backbone = backbone
        self.protocols = tuple(dict.fromkeys(protocols))
        self.max_tokens = max_tokens
        self.parsers = {
            "locomo": JSONReplyParser(LOCOMO_SCHEMA),
            "yes_no": JSONReplyParser(YES_NO_SCHEMA),
        }

    def grade_many(
        self, items: Sequence[tuple[Question, str]], *, stage: str = "judging"
    ) -> list[dict[str, Verdict]]:
        """One verdict per protocol per (question, prediction), in order; failures are verdicts
        too. Protocols that give the same prompt (abstention questions) share one grading;
        ``stage`` names the calls in the accounting."""
        by_prompt: dict[str, _Grading] = {}
        per_item = []
        for question, prediction in items:
            gradings = {}
            for protocol in self.protocols:
                prompt, schema = judge_prompt(question, prediction, protocol)
                gradings[protocol] = by_prompt.setdefault(prompt, _Grading(prompt, schema))
            per_item.append(gradings)
        pending = list(by_prompt.values())
        # Same instruction, one after another: an in-process model evaluates it once per run of
        # them (replies do not depend on the order; see LLMRequest.shared_prefix).
        pending.sort(key=lambda grading: grading.prompt[: instruction_length(grading.prompt)])
        while climbing := [grading for grading in pending if grading.climbing()]:
            requests = [grading.next_request(self.max_tokens) for grading in climbing]
            replies = self.backbone.complete_many(requests, stage=stage, return_exceptions=True)
            for grading, reply in zip(climbing, replies, strict=True):
                self._take(grading, reply)
        booked: set[int] = set()
        return [
            {protocol: _booked_once(grading, booked) for protocol, grading in gradings.items()}
            for gradings in per_item
        ]

    def _take(self, grading: _Grading, reply: LLMResponse | LLMError) -> None:
        """Record one rung's reply: a verdict, or why there is none."""
        grading.rung += 1
        if isinstance(reply, LLMError):
            grading.asked += 1
            grading.reply, grading.error = "", f"judge call failed: {reply}"
            grading.call_failed = True
            return
        grading.asked += not reply.cached
        grading.prompt_tokens += reply.prompt_tokens
        grading.completion_tokens += reply.completion_tokens
        grading.latency_s += reply.latency_s
        parser = self.parsers["locomo" if grading.schema is LOCOMO_SCHEMA else "yes_no"]
        parsed = parser.parse(reply.text)
        grading.reply = reply.text
        if not parsed.ok:
            grading.error = f"unparseable verdict: {parsed.error}"
            return
        value = parsed.value.get("label", parsed.value.get("answer"))
        grading.correct, grading.error = value in {"CORRECT", "yes"}, None
