"""``judge_acc``: an LLM grades each answer, through the same backbone interface as everything.

Every answer is scored under each protocol in ``judge.protocols``; ``judge_acc`` is the
dataset's own. What each protocol sends and how its reply becomes a verdict: docs/scoring.md,
"Judge protocols"; asking the model is :mod:`benchmarks.metrics.judging`'s."""

from __future__ import annotations

import argparse
import hashlib
import json
import string
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.data import sources
from benchmarks.metrics import official_prompts
from memsys.types import LOCOMO_CATEGORIES, LONGMEMEVAL_CATEGORIES, Question

#: The judge model of the scorer command lines (``python -m benchmarks.metrics.qa --judge``) when
#: ``--judge-backbone`` names none: the harness's default backbone, a conf/backbone/ name.
DEFAULT_JUDGE_BACKBONE = "embedded"

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
#: mem0's judge asks for OpenAI's JSON-object mode (any object); the nearest request every
#: provider here takes is a schema. This one holds only what mem0's reading needs, an object with
#: a string ``label``: a grammar (llama.cpp) then allows exactly ``{"label": "..."}``, so the
#: one-sentence explanation the prompt asks for first is not written there.
MEM0_REPLY_SCHEMA = {
    "type": "object",
    "properties": {"label": {"type": "string"}},
    "required": ["label"],
}
#: mem0 sets no reply cap; a bound is needed. Room for the prompt's one-sentence explanation
#: inside the JSON object; a reply cut short is unparseable and climbs the ladder.
MEM0_REPLY_TOKENS = 128
#: LongMemEval's own ``max_tokens``.
LONGMEMEVAL_REPLY_TOKENS = 10
#: The official template LongMemEval's code uses for single-session-user, single-session-assistant
#: and multi-session questions: the one the ``longmemeval`` protocol gives other datasets'.
OTHER_DATASETS_TYPE = "single-session-user"
#: The project's normalized LongMemEval categories back to LongMemEval's own spelling.
LONGMEMEVAL_TYPES = {normalized: own for own, normalized in LONGMEMEVAL_CATEGORIES.items()}

LME_STANDARD = """You are given a question, its correct answer, and a model's response. Say yes \
if the response contains the correct answer, otherwise no. A response that is equivalent to the \
correct answer, or that contains every intermediate step needed to reach it, also gets yes. A \
response with only part of the required information gets no."""
LME_TEMPORAL_EXTRA = (
    " Do not penalize off-by-one errors in a number of days: if the question asks for a number "
    "of days, weeks or months and the response is off by one (say 19 days for 18), it is correct."
)
LME_UPDATE_EXTRA = (
    " If the response mentions earlier information together with the updated answer, it is "
    "correct as long as the updated answer is the one required."
)
LME_STANDARD_FIELDS = """

Question: {question}

Correct answer: {gold}

Model response: {prediction}

Is the model response correct? Reply with JSON only: {{"answer": "yes"}} or {{"answer": "no"}}."""
LME_PREFERENCE = """You are given a question, a rubric describing the desired personalized \
response, and a model's response. Say yes if the response satisfies the rubric, otherwise no. \
The response need not cover every point of the rubric; it is correct as long as it recalls and \
uses the user's personal information correctly.

Question: {question}

Rubric: {gold}

Model response: {prediction}

Does the response satisfy the rubric? Reply with JSON only: {{"answer": "yes"}} or {{"answer": "no"}}."""
#: LongMemEval's question types whose rule adds to the standard one (``longmemeval_json``).
LME_EXTRAS = {"temporal_reasoning": LME_TEMPORAL_EXTRA, "knowledge_update": LME_UPDATE_EXTRA}
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
#: How a verdict's error starts when the judge's request failed for good (the server, not the
#: model's reply): the run is then incomplete (:func:`lost_to_a_failed_call`).
CALL_FAILED = "judge call failed:"


@dataclass(frozen=True)
class ReplyFormat:
    """How a verdict is asked for and read: the reader (a key of :attr:`Judge.parsers`), the
    request's JSON schema (None: free text) and reply cap (None: the judge's ``max_tokens``)."""

    reader: str
    schema: Mapping[str, Any] | None = field(hash=False)
    max_tokens: int | None


LONGMEMEVAL_REPLY = ReplyFormat("yes_no", None, LONGMEMEVAL_REPLY_TOKENS)
MEM0_REPLY = ReplyFormat("mem0_label", MEM0_REPLY_SCHEMA, MEM0_REPLY_TOKENS)
LABEL_JSON_REPLY = ReplyFormat("label_json", LOCOMO_SCHEMA, None)
YES_NO_JSON_REPLY = ReplyFormat("yes_no_json", YES_NO_SCHEMA, None)


@dataclass(frozen=True)
class JudgePrompt:
    """The one user message of a verdict; ``prefix``, the template's text before its first field, is
    declared as the request's shared prefix."""

    text: str
    prefix: int
    reply: ReplyFormat


@dataclass(frozen=True)
class Verdict:
    """``correct`` is None when no verdict could be obtained (``error`` says why). ``attempts``
    counts the rungs tried, ``asked`` those sent in this run; ``final``: a failure not asked again.
    Tokens and latency add up over the attempts."""

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


def fixed_head(template: str) -> int:
    """Characters that ``template`` formats to before its first replacement field.

    >>> fixed_head("Q: {}\\n\\nA: {}")
    3
    """
    head = 0
    for literal, name, _, _ in string.Formatter().parse(template):
        head += len(literal)
        if name is not None:
            break
    return head


def _official_yes_no(template: str, question: Question, prediction: str) -> JudgePrompt:
    """A LongMemEval template, filled as ``get_anscheck_prompt`` fills it."""
    text = template.format(question.question, question.answer, prediction)
    return JudgePrompt(text, fixed_head(template), LONGMEMEVAL_REPLY)


def _longmemeval_prompt(question: Question, prediction: str) -> JudgePrompt:
    by_type, _ = official_prompts.longmemeval_templates()
    template = by_type[LONGMEMEVAL_TYPES.get(question.category, OTHER_DATASETS_TYPE)]
    return _official_yes_no(template, question, prediction)


def _mem0_prompt(question: Question, prediction: str) -> JudgePrompt:
    template = official_prompts.mem0_accuracy_prompt()
    text = template.format(
        question=question.question, gold_answer=question.answer, generated_answer=prediction
    )
    return JudgePrompt(text, fixed_head(template), MEM0_REPLY)


def _project_prompt(
    template: str, question: Question, prediction: str, reply: ReplyFormat
) -> JudgePrompt:
    text = template.format(question=question.question, gold=question.answer, prediction=prediction)
    return JudgePrompt(text, fixed_head(template), reply)


def _strict_prompt(question: Question, prediction: str) -> JudgePrompt:
    return _project_prompt(STRICT_INSTRUCTION, question, prediction, LABEL_JSON_REPLY)


def _longmemeval_json_prompt(question: Question, prediction: str) -> JudgePrompt:
    if question.category == "single_session_preference":
        template = LME_PREFERENCE
    else:
        template = LME_STANDARD + LME_EXTRAS.get(question.category, "") + LME_STANDARD_FIELDS
    return _project_prompt(template, question, prediction, YES_NO_JSON_REPLY)


@dataclass(frozen=True)
class Protocol:
    """A judge protocol: its prompt builder, header words, what its messages are made of (``texts``)
    and how its replies are read, and the official text it reads when a judge takes it up."""

    build: Callable[[Question, str], JudgePrompt]
    description: str
    texts: Callable[[], tuple[str, ...]]
    reply: ReplyFormat
    official_text: Callable[[], object] | None = None

    def version(self) -> str:
        """A digest of everything that decides this protocol's verdicts, held in a run's identity so
        a changed prompt makes a new run."""
        reply = (self.reply.reader, dict(self.reply.schema or {}), self.reply.max_tokens)
        abstention = official_prompts.pinned_sha256(sources.LONGMEMEVAL_JUDGE)
        canonical = json.dumps([self.texts(), reply, abstention], sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def _evaluator_file(source: sources.Source) -> Callable[[], tuple[str, ...]]:
    return lambda: (f"{source.local} sha256:{official_prompts.pinned_sha256(source)}",)


#: Every judge protocol by name.
PROTOCOLS = {
    "mem0": Protocol(
        _mem0_prompt,
        "mem0's ACCURACY_PROMPT verbatim: CORRECT/WRONG as JSON, generous on wording",
        _evaluator_file(sources.MEM0_JUDGE),
        MEM0_REPLY,
        official_prompts.mem0_accuracy_prompt,
    ),
    "strict": Protocol(
        _strict_prompt,
        "strict CORRECT/WRONG instruction: vague, partial or hedged is WRONG",
        lambda: (STRICT_INSTRUCTION,),
        LABEL_JSON_REPLY,
    ),
    "longmemeval": Protocol(
        _longmemeval_prompt,
        "LongMemEval's per-type yes/no prompts, verbatim (other datasets: its "
        "single-session/multi-session prompt)",
        _evaluator_file(sources.LONGMEMEVAL_JUDGE),
        LONGMEMEVAL_REPLY,
        official_prompts.longmemeval_templates,
    ),
    "longmemeval_json": Protocol(
        _longmemeval_json_prompt,
        "the project's JSON rewording of LongMemEval's per-type yes/no rules",
        lambda: (LME_STANDARD, *LME_EXTRAS.values(), LME_STANDARD_FIELDS, LME_PREFERENCE),
        YES_NO_JSON_REPLY,
    ),
}
#: The one rule for ``_abs`` questions, whatever the protocol (for table headers).
ABSTENTION_RULE = "_abs questions: LongMemEval's official abstention prompt under every protocol"


def judge_prompt(question: Question, prediction: str, protocol: str) -> JudgePrompt:
    """The message that grades ``prediction`` under ``protocol``, and how its reply is read."""
    if question.is_abstention:
        _, abstention = official_prompts.longmemeval_templates()
        return _official_yes_no(abstention, question, prediction)
    return PROTOCOLS[protocol].build(question, prediction)


def check_protocols(protocols: Sequence[str]) -> None:
    """Raise ``ValueError`` naming an unknown protocol."""
    unknown = [name for name in protocols if name not in PROTOCOLS]
    if unknown:
        raise ValueError(f"unknown judge protocol(s) {unknown}; known: {sorted(PROTOCOLS)}")


def lost_to_a_failed_call(entry: dict[str, Any]) -> bool:
    """Whether a logged judging entry has no verdict because its request failed for good (a
    rerun asks it again), not because the model's reply could not be read.

    >>> lost_to_a_failed_call({"error": "judge call failed: HTTP 500"})
    True
    >>> lost_to_a_failed_call({"error": "unparseable verdict: no JSON"})
    False
    """
    return str(entry.get("error") or "").startswith(CALL_FAILED)


def judging_entry(protocol: str, verdict: Verdict) -> dict[str, Any]:
    """A verdict's cost and outcome as logged, with the judge's raw reply (what the inspector
    shows beside the verdict; ``shared``: the cost is on another protocol's)."""
    return {
        "protocol": protocol,
        "reply": verdict.reply,
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
    """Every verdict entry of a record: the dataset's protocol's, then the others', then the
    repeats' (``judge.repeats`` > 1)."""
    primary = [record["judging"]] if record.get("judging") else []
    others = list((record.get("other_judgings") or {}).values())
    return primary + others + list(record.get("repeat_judgings") or [])


def question_category(question_type: str) -> str:
    """The project's category for a question type given as LongMemEval spells it
    (``temporal-reasoning``), or as a LoCoMo category (``multi_hop``, or its number 1..5)."""
    if question_type in LONGMEMEVAL_CATEGORIES:
        return LONGMEMEVAL_CATEGORIES[question_type]
    if question_type.isdigit() and int(question_type) in LOCOMO_CATEGORIES:
        return LOCOMO_CATEGORIES[int(question_type)]
    if question_type in LOCOMO_CATEGORIES.values():
        return question_type
    raise ValueError(
        f"unknown question type {question_type!r}; LongMemEval's: "
        f"{', '.join(LONGMEMEVAL_CATEGORIES)}; LoCoMo's: {', '.join(LOCOMO_CATEGORIES.values())} "
        "or 1..5"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``--show-prompt``: write exactly the message the judge model receives for one answer
    (rung 1), nothing else, so that it can be compared with the evaluator's own output."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.metrics.judge",
        description="Write the message the judge model receives for one answer.",
    )
    parser.add_argument("--show-prompt", action="store_true", required=True)
    parser.add_argument("--protocol", required=True, help=", ".join(PROTOCOLS))
    parser.add_argument(
        "--question-type",
        required=True,
        help="LongMemEval's spelling (temporal-reasoning, ...) or a LoCoMo category (multi_hop or 1..5)",
    )
    parser.add_argument("--abstention", action="store_true", help="an _abs question")
    parser.add_argument("--question", required=True)
    parser.add_argument("--answer", required=True, help="the gold answer (or rubric)")
    parser.add_argument("--response", required=True, help="the answer graded")
    args = parser.parse_args(argv)
    try:
        check_protocols([args.protocol])
        category = question_category(args.question_type)
        question = Question(
            "shown", "shown", args.question, args.answer, category, is_abstention=args.abstention
        )
        prompt = judge_prompt(question, args.response, args.protocol)
    except (ValueError, official_prompts.EvaluatorFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(prompt.text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
