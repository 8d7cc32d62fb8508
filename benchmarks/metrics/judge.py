"""``judge_acc``: an LLM grades each answer, through the same backbone interface as everything.

Two instruction sets, written in this project's words, keeping the sources' label sets, output
formats and grading rules:

* LoCoMo — mem0-style grading: CORRECT or WRONG, generous on wording and on date formats, as JSON
  ``{"label": ...}``.
* LongMemEval — the official per-type rules: a yes/no verdict; temporal reasoning tolerates
  off-by-one day counts; knowledge updates accept the updated answer even beside older
  information; preference questions are graded against a rubric; ``_abs`` questions are correct
  when the response recognises the question as unanswerable. As JSON ``{"answer": "yes"|"no"}``.

A reply that is not the expected JSON is asked again once with a reminder (a new request, so the
cache cannot hand back the same bad reply); if that fails too, or the call itself fails, the
verdict is a counted failure (``correct is None``), never a silent 0 or 1.
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


@dataclass(frozen=True)
class Verdict:
    """``correct`` is None when no verdict could be obtained (``error`` says why).

    Token counts and latency add up over the attempts.
    """

    correct: bool | None
    reply: str
    attempts: int
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0


def judge_prompt(question: Question, prediction: str) -> tuple[str, dict[str, Any]]:
    """The grading instruction for ``question`` and the JSON schema of its verdict."""
    fields = {"question": question.question, "gold": question.answer, "prediction": prediction}
    if question.category in {"single_hop", "multi_hop", "temporal", "open_domain", "adversarial"}:
        return LOCOMO_INSTRUCTION.format(**fields), LOCOMO_SCHEMA
    if question.is_abstention:
        return LME_ABSTENTION.format(**fields), YES_NO_SCHEMA
    if question.category == "single_session_preference":
        return LME_PREFERENCE.format(**fields), YES_NO_SCHEMA
    extra = {"temporal_reasoning": LME_TEMPORAL_EXTRA, "knowledge_update": LME_UPDATE_EXTRA}
    return LME_STANDARD.format(extra=extra.get(question.category, ""), **fields), YES_NO_SCHEMA


class Judge:
    """Grades answers through a backbone; parse counts are kept for the run summary."""

    def __init__(self, backbone: Backbone, *, max_tokens: int = 32) -> None:
        self.backbone = backbone
        self.max_tokens = max_tokens
        self.parsers = {
            "locomo": JSONReplyParser(LOCOMO_SCHEMA),
            "yes_no": JSONReplyParser(YES_NO_SCHEMA),
        }

    def grade_many(self, items: Sequence[tuple[Question, str]]) -> list[Verdict]:
        """One verdict per (question, prediction), in order; failures are verdicts too."""
        prompts = [judge_prompt(question, prediction) for question, prediction in items]
        first = [[{"role": "user", "content": text}] for text, _ in prompts]
        replies = self._ask(first, prompts)
        verdicts = [
            self._verdict(reply, schema, 1)
            for reply, (_, schema) in zip(replies, prompts, strict=True)
        ]
        retry = [
            i for i, verdict in enumerate(verdicts) if verdict.correct is None and verdict.reply
        ]
        if retry:
            second = [
                [
                    *first[i],
                    {"role": "assistant", "content": verdicts[i].reply},
                    {"role": "user", "content": RETRY_REMINDER},
                ]
                for i in retry
            ]
            for i, reply in zip(retry, self._ask(second, [prompts[i] for i in retry]), strict=True):
                earlier = verdicts[i]
                verdict = self._verdict(reply, prompts[i][1], 2)
                verdicts[i] = dataclasses.replace(
                    verdict,
                    prompt_tokens=verdict.prompt_tokens + earlier.prompt_tokens,
                    completion_tokens=verdict.completion_tokens + earlier.completion_tokens,
                    latency_s=verdict.latency_s + earlier.latency_s,
                )
        return verdicts

    def _ask(
        self, conversations: list[list[Message]], prompts: Sequence[tuple[str, dict[str, Any]]]
    ) -> list[LLMResponse | LLMError]:
        requests = [
            LLMRequest(
                tuple(messages), SamplingParams(max_tokens=self.max_tokens, json_schema=schema)
            )
            for messages, (_, schema) in zip(conversations, prompts, strict=True)
        ]
        return self.backbone.complete_many(requests, stage="judging", return_exceptions=True)

    def _verdict(
        self, reply: LLMResponse | LLMError, schema: dict[str, Any], attempts: int
    ) -> Verdict:
        if isinstance(reply, LLMError):
            return Verdict(None, "", attempts, f"judge call failed: {reply}")
        parser = self.parsers["locomo" if schema is LOCOMO_SCHEMA else "yes_no"]
        parsed = parser.parse(reply.text)
        cost = {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "latency_s": reply.latency_s,
        }
        if not parsed.ok:
            return Verdict(
                None, reply.text, attempts, f"unparseable verdict: {parsed.error}", **cost
            )
        value = parsed.value.get("label", parsed.value.get("answer"))
        return Verdict(value in {"CORRECT", "yes"}, reply.text, attempts, **cost)
