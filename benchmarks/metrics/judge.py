"""``judge_acc``: an LLM grades each answer, through the same backbone interface as everything.

A run scores every answer under each protocol in ``judge.protocols`` (one cached verdict each);
``judge_acc`` is the dataset's own (``dataset.judge_protocol``). A protocol named after an
evaluator is that evaluator's judge, its prompt read out of the evaluator's own source file
(:mod:`benchmarks.metrics.official_prompts`; the project holds no copy); the project's own
readings have names of their own:

* ``longmemeval`` — LongMemEval's judge (``evaluate_qa.py``): the official template of the
  question's type, ``template.format(question, answer, response)``, sent as the one user message
  with temperature 0 and at most :data:`LONGMEMEVAL_REPLY_TOKENS` reply tokens, no JSON; the
  verdict is ``'yes' in reply.strip().lower()``, so every reply is a verdict. Questions of other
  datasets (LoCoMo) get the template the official code uses for single-session-user,
  single-session-assistant and multi-session questions. LongMemEval's own protocol.
* ``mem0`` — mem0's judge (``evaluation/metrics/llm_judge.py``): ``ACCURACY_PROMPT`` formatted
  with ``question``, ``gold_answer`` and ``generated_answer``, the one user message, temperature
  0, JSON: mem0 asks for OpenAI's JSON-object mode, here :data:`MEM0_REPLY_SCHEMA` (an object
  with a string ``label``, what mem0's reading needs); mem0 sets no reply cap, here
  :data:`MEM0_REPLY_TOKENS`. The verdict is ``label == "CORRECT"``, the reply read as mem0 reads
  it (:class:`Mem0LabelReader`). LoCoMo's own protocol.
* ``strict`` — the project's: CORRECT or WRONG as JSON, rejecting vague, partial or hedged
  answers: the same gold fact, complete, or WRONG. Not from a paper: it brackets mem0's generous
  grading from above.
* ``longmemeval_json`` — the project's rewording of LongMemEval's per-type rules, asked as JSON
  ``{"answer": "yes"|"no"}``; on other datasets its standard rule.

``_abs`` (abstention) questions get LongMemEval's official abstention template and reading under
every protocol (mem0's code never meets one: LoCoMo has none).

A reply that can fail to parse (mem0's, the project's JSON) and does is asked again, up a ladder
of new requests (so the cache cannot hand back the same bad reply): the prompt, the prompt with a
reminder after the bad reply, then the prompt sampled with seeds 3, 4, ...
(:data:`RESAMPLE_TEMPERATURE`). This is the harness's, not an evaluator's: mem0's script stops on
such a reply. One run sends at most :data:`ATTEMPTS_PER_RUN` of them to the model; a rung whose
reply is cached and unparseable is passed over at no cost, so a rerun asks new rungs instead of
failing on the old replies. When that fails too, or the call itself fails, the verdict is a
counted failure (``correct is None``), never a silent 0 or 1; the next run asks again, until
:data:`MAX_ATTEMPTS` rungs have been tried and the failure is final.

``python -m benchmarks.metrics.judge --show-prompt ...`` prints the message the judge model
receives for one answer (:func:`main`).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import re
import string
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.data import sources
from benchmarks.metrics import official_prompts
from memsys.llm.backbone import Backbone
from memsys.llm.errors import LLMError
from memsys.llm.jsonout import JSONReplyParser
from memsys.llm.types import LLMRequest, LLMResponse, Message, SamplingParams
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
RETRY_REMINDER = "Your reply was not the JSON asked for. Reply with the JSON object only."
#: Requests one run sends to the model for one verdict (cached rungs are not counted).
ATTEMPTS_PER_RUN = 2
#: How a verdict's error starts when the judge's request failed for good (the server, not the
#: model's reply): the run is then incomplete (:func:`lost_to_a_failed_call`).
CALL_FAILED = "judge call failed:"

#: Rungs of the ladder in all; a verdict still unparseable after them is a final failure.
MAX_ATTEMPTS = 6
#: Sampling temperature of rungs 3 and up (rung ``n`` has seed ``n``): greedy decoding would
#: repeat the reply that could not be parsed.
RESAMPLE_TEMPERATURE = 0.7
#: mem0's ``extract_json`` (``mem0/memory/utils.py``): the reply stripped, then the content of
#: its first code fence (optionally tagged ``json``) if it has one, else all of it.
MEM0_FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.DOTALL)


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
    """The one user message of a verdict; ``prefix`` is the length of its template's text
    before the first field, the same for every answer graded with that template, declared as
    the request's shared prefix (an in-process model evaluates it once)."""

    text: str
    prefix: int
    reply: ReplyFormat


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
    """A judge protocol: its prompt builder, the words a table header uses for it, what its
    messages are made of (``texts``: its templates, or its evaluator file's pinned sha256) and
    how its replies are read, and the official text it reads (called when a :class:`Judge`
    takes it up, so a missing or altered evaluator file stops the run before any work)."""

    build: Callable[[Question, str], JudgePrompt]
    description: str
    texts: Callable[[], tuple[str, ...]]
    reply: ReplyFormat
    official_text: Callable[[], object] | None = None

    def version(self) -> str:
        """A digest of everything that decides this protocol's verdicts (its texts, reply
        format and the abstention prompt every protocol shares): a run's identity holds it, so
        changing a protocol's prompt makes a new run instead of resuming one graded otherwise."""
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
    """Every verdict entry of a record: the dataset's protocol's, then the others'."""
    primary = [record["judging"]] if record.get("judging") else []
    return primary + list((record.get("other_judgings") or {}).values())


def ladder_request(prompt: JudgePrompt, rung: int, last_reply: str, max_tokens: int) -> LLMRequest:
    """Rung ``rung`` of the ladder (see the module docstring); ``last_reply`` is the reply of
    the rung below (rung 2 quotes rung 1's); ``max_tokens`` caps a reply whose format sets no
    cap of its own."""
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
    return LLMRequest(tuple(messages), params, shared_prefix=prompt.prefix)


class YesNoReader:
    """LongMemEval's reading: ``'yes' in reply.strip().lower()``; every reply is a verdict."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = {"yes": 0, "no": 0}

    def read(self, text: str) -> tuple[bool | None, str | None]:
        """The verdict of one reply and, when there is none, why."""
        verdict = "yes" in text.strip().lower()
        with self._lock:
            self._counts["yes" if verdict else "no"] += 1
        return verdict, None

    def counts(self) -> dict[str, int]:
        """Outcome counts so far (JSON-serializable)."""
        with self._lock:
            return dict(self._counts)


class Mem0LabelReader:
    """mem0's reading: ``json.loads(extract_json(reply))["label"] == "CORRECT"``
    (:data:`MEM0_FENCE`). A reply mem0's script would stop on (no JSON, or JSON without a
    ``label``) has no verdict: the ladder asks again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = {"clean": 0, "unparseable": 0, "invalid": 0}

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
        return ladder_request(self.prompt, self.rung + 1, self.reply, max_tokens)

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
    """Grades answers through a backbone under one or more protocols; reply outcomes are
    counted per reader (``parsers``) for the run summary.

    Taking up a protocol named after an evaluator reads and verifies its source file: a missing
    or altered one raises :class:`~benchmarks.metrics.official_prompts.EvaluatorFileError` here,
    before any work, and only for the protocols that need it. ``max_tokens`` caps the replies of
    the project's protocols (the evaluators' have their own caps)."""

    def __init__(
        self, backbone: Backbone, *, protocols: Sequence[str], max_tokens: int = 32
    ) -> None:
        check_protocols(protocols)
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
        """One verdict per protocol per (question, prediction), in order; failures are verdicts
        too. Protocols that give the same prompt (abstention questions) share one grading;
        ``stage`` names the calls in the accounting."""
        by_prompt: dict[tuple[str, str], _Grading] = {}
        per_item = []
        for question, prediction in items:
            gradings = {}
            for protocol in self.protocols:
                prompt = judge_prompt(question, prediction, protocol)
                key = (prompt.text, prompt.reply.reader)
                gradings[protocol] = by_prompt.setdefault(key, _Grading(prompt))
            per_item.append(gradings)
        pending = list(by_prompt.values())
        # Same instruction, one after another: an in-process model evaluates it once per run of
        # them (replies do not depend on the order; see LLMRequest.shared_prefix).
        pending.sort(key=lambda grading: grading.prompt.text[: grading.prompt.prefix])
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
            grading.reply, grading.error = "", f"{CALL_FAILED} {reply}"
            grading.call_failed = True
            return
        grading.asked += not reply.cached
        grading.prompt_tokens += reply.prompt_tokens
        grading.completion_tokens += reply.completion_tokens
        grading.latency_s += reply.latency_s
        grading.reply = reply.text
        grading.correct, grading.error = self.parsers[grading.prompt.reply.reader].read(reply.text)


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
