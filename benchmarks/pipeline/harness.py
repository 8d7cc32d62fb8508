"""One run's machinery, shared by the serial runner and its worker processes: build the
services, method, answerer and judge from config; construct (or load) a conversation's memory;
retrieve, answer, judge and score its questions into one JSON record each.

Nothing here writes the run's log: the process that holds the run directory does
(:mod:`benchmarks.pipeline.run`), so worker processes (:mod:`benchmarks.pipeline.workers`) can use all of it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from benchmarks.answering.context import RenderedContext, render_context
from benchmarks.answering.prompts import answer_messages
from benchmarks.config.values import ConfigError
from benchmarks.metrics.aggregate import OTHER_JUDGE_PREFIX
from benchmarks.metrics.coverage import answer_coverage
from benchmarks.metrics.judge import Verdict, judging_entry, judgings, lost_to_a_failed_call
from benchmarks.metrics.judging import Judge
from benchmarks.metrics.qa import QAPrediction, score_prediction
from benchmarks.metrics.ranking import OfficialIds
from benchmarks.metrics.retrieval import evidence_recall
from benchmarks.pipeline.footprint import footprint
from benchmarks.pipeline.memory_store import MemoryStore
from benchmarks.pipeline.settings import RunSettings, cache_folder, check_method_options
from memsys.base import MemorySystem, Services
from memsys.embed import Embedder, EmbeddingCache
from memsys.llm.accounting import Accounting, latency_percentiles
from memsys.llm.backbone import Backbone
from memsys.llm.cache import ResponseCache
from memsys.llm.errors import LLMError
from memsys.llm.factory import BackboneConfig, build_backbone
from memsys.llm.replay import open_response_cache
from memsys.llm.slots import Limiters
from memsys.llm.types import LLMRequest, LLMResponse, Message, SamplingParams
from memsys.nlp import NLP, ParseCache
from memsys.tokens import TokenCounter
from memsys.types import Conversation, Question, Retrieval


@dataclass
class Harness:
    """Everything one run shares: services, the method, its judge, the stores."""

    settings: RunSettings
    system: MemorySystem[Any]
    services: Services
    answerer: Backbone | None
    judge: Judge | None
    accounting: Accounting
    response_cache: ResponseCache
    memories: MemoryStore
    limiters: Limiters = field(default_factory=Limiters)

    def close(self) -> None:
        """Close the SQLite caches, so that the files are whole on disk when a run ends, and stop
        the parse process, if any."""
        self.response_cache.close()
        self.services.embedder.cache.close()
        self.services.nlp.close()

    def work_counts(self) -> dict[str, dict[str, Any]]:
        """What this process's embedder and parser have done so far (texts asked, texts they
        had to process, seconds), for the invocation ledger."""
        return {"embedding": self.services.embedder.counts(), "parsing": self.services.nlp.counts()}


def build_harness(settings: RunSettings, run_dir: Path) -> Harness:
    """Instantiate services, method, answerer and judge from the run's validated settings."""
    cache_dir = cache_folder(settings.paths)
    accounting = Accounting(ledger=run_dir / "llm_calls.jsonl")
    response_cache = open_response_cache(
        cache_dir,
        settings.llm_cache_mode,
        settings.paths.llm_cache_journal,
        settings.paths.llm_replies,
    )
    embedder = Embedder(
        settings.embedder,
        EmbeddingCache(cache_dir / "embeddings.sqlite"),
        onnx_dir=cache_dir / "onnx",
    )

    limiters = Limiters()  # one in-flight limit per endpoint: reader, builder and judge share it

    def build(config: BackboneConfig) -> Backbone:
        return build_backbone(
            config, cache=response_cache, accounting=accounting, limiters=limiters
        )

    backbone = build(settings.backbone) if settings.backbone is not None else None
    builder = backbone
    if settings.construction_key == "construction.backbone":
        assert settings.construction_backbone is not None  # validate built it
        builder = build(settings.construction_backbone)
    services = Services(
        embedder=embedder,
        tokens=TokenCounter(),
        backbone=builder.with_stage("construction") if builder else None,
        nlp=NLP(cache=ParseCache(cache_dir / "parses.sqlite")),
        cache_dir=cache_dir,
    )
    system = instantiate_method(settings.method, services)
    judge = None
    if settings.judges and backbone is not None:
        judge_backbone = backbone
        if settings.judge_backbone is not None:
            judge_backbone = build(settings.judge_backbone)
        judge = Judge(
            judge_backbone,
            protocols=settings.judge_protocols,
            repeats=settings.judge_repeats,
            repeat_temperature=settings.judge_repeat_temperature,
        )
    return Harness(
        settings=settings,
        system=system,
        services=services,
        answerer=backbone,
        judge=judge,
        accounting=accounting,
        response_cache=response_cache,
        memories=MemoryStore(cache_dir / "memories"),
        limiters=limiters,
    )


def instantiate_method(
    method: DictConfig | Mapping[str, Any], services: Services
) -> MemorySystem[Any]:
    """The configured method (its config node, or :attr:`RunSettings.method`); a bad option is
    a :class:`ConfigError` naming its key."""
    check_method_options(method)
    try:
        return instantiate(method, services=services, _convert_="partial")
    except Exception as error:  # Hydra wraps the method's own error; name the key it came from
        cause = error.__cause__ or error
        raise ConfigError(
            "method", f"cannot instantiate {method.get('_target_')}: {cause}"
        ) from error


def answer_batch(
    harness: Harness,
    memory: Any,
    questions: Sequence[Question],
    official_ids: OfficialIds | None,
    turn_texts: Mapping[str, str],
) -> list[dict[str, Any]]:
    """Retrieve, answer, judge and score a batch of questions; one record each, in order.
    ``official_ids`` (LongMemEval) maps turns to the official corpus ids rankings are stored in;
    ``turn_texts`` tells which turns a cut item still shows."""
    settings = harness.settings
    harness.system.prepare_queries(questions)
    harness.system.prepare_retrieval(memory, questions)
    prepared = [prepare(harness, memory, question, turn_texts) for question in questions]

    replies: list[LLMResponse | LLMError | None] = [None] * len(prepared)
    if harness.answerer is not None and settings.template:
        params = SamplingParams(max_tokens=settings.answer_max_tokens)
        requests = [LLMRequest(p.messages or (), params) for p in prepared]
        replies = list(
            harness.answerer.complete_many(requests, stage="answering", return_exceptions=True)
        )

    verdicts: dict[int, dict[str, tuple[Verdict, ...]]] = {}
    if harness.judge is not None:
        answered = [i for i, reply in enumerate(replies) if isinstance(reply, LLMResponse)]
        graded = harness.judge.grade_repeated(
            [(prepared[i].question, replies[i].text) for i in answered]  # type: ignore[union-attr]
        )
        verdicts = dict(zip(answered, graded, strict=True))

    records = []
    for i, p in enumerate(prepared):
        record = build_record(p, replies[i], verdicts.get(i))
        if official_ids is not None:
            record["ranking"] = official_ids.rankings(p.retrieval)
        records.append(record)
    return records


@dataclass(frozen=True)
class Prepared:
    """One question ready for the reader: what was retrieved, what fits the budget, the answer
    prompt (``None`` for a retrieval-only run) and the seconds retrieval and rendering took."""

    question: Question
    retrieval: Retrieval
    context: RenderedContext
    messages: tuple[Message, ...] | None
    retrieved_s: float
    render_s: float


def prepare(
    harness: Harness, memory: Any, question: Question, turn_texts: Mapping[str, str]
) -> Prepared:
    """Retrieve for ``question`` from ``memory`` and render its context within the budget."""
    settings = harness.settings
    started = time.perf_counter()
    retrieval = harness.system.retrieve(memory, question)
    retrieved_s = time.perf_counter() - started
    context = render_context(
        retrieval.items,
        harness.services.tokens,
        settings.context_budget,
        settings.context_order,
        turn_texts,
    )
    messages = (
        tuple(answer_messages(settings.template, question, context.text, seed=settings.seed))
        if settings.template
        else None
    )
    render_s = time.perf_counter() - started - retrieved_s
    return Prepared(question, retrieval, context, messages, retrieved_s, render_s)


def build_record(
    prepared: Prepared,
    reply: LLMResponse | LLMError | None,
    verdicts: dict[str, tuple[Verdict, ...]] | None,
) -> dict[str, Any]:
    """One question's JSON line: prediction, gold, provenance, costs and every score. ``verdicts``
    maps each judge protocol to its verdicts (one per repeat), the dataset's own first: it gives
    ``judge_acc`` and ``judging``, the others ``judge_acc_<protocol>`` and ``other_judgings``; with
    repeats, the score is their mean (docs/scoring.md, "Judge repeats")."""
    question, retrieval, context = prepared.question, prepared.retrieval, prepared.context
    record: dict[str, Any] = {
        "question_id": question.question_id,
        "conversation_id": question.conversation_id,
        "category": question.category,
        "question": question.question,
        "answer": question.answer,
        "adversarial_answer": question.adversarial_answer,
        "is_abstention": question.is_abstention,
        "evidence": list(question.evidence),
        "retrieved_turn_ids": list(context.turn_ids),
        "retrieved_items": len(retrieval.items),
        "context_items": len(context.items),
        "context_tokens": context.tokens,
        "evidence_recall": evidence_recall(question.evidence, context.turn_ids)
        if question.evidence
        else None,
        "evidence_recall_all_retrieved": (
            evidence_recall(question.evidence, retrieval.turn_ids) if question.evidence else None
        ),
        "answer_coverage": (
            None
            if question.adversarial_answer is not None or question.is_abstention
            else answer_coverage(context.text, [question.answer])
        ),
        "context": context.text,
        **({"context_cut": context.cut.to_json()} if context.cut else {}),
        "latency_s": {
            "retrieve": round(prepared.retrieved_s, 6),
            "render": round(prepared.render_s, 6),
        },
        **({"trace": retrieval.trace} if retrieval.trace else {}),
        "prediction": None,
        "failure": None,
        "scores": {},
    }
    if isinstance(reply, LLMError):
        record["failure"] = f"answer: {reply}"
    elif isinstance(reply, LLMResponse):
        record["prediction"] = reply.text.strip()
        record["answering"] = {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "latency_s": round(reply.latency_s, 6),
            "cached": reply.cached,
        }
        prediction = QAPrediction(
            question.question_id,
            question.category,
            record["prediction"],
            question.answer,
            question.adversarial_answer,
        )
        record["scores"] = score_prediction(prediction)
    for rank, (protocol, repeated) in enumerate((verdicts or {}).items()):
        first, *others = repeated
        judging = judging_entry(protocol, first)
        score = repeat_mean([verdict.correct for verdict in repeated])
        if rank == 0:
            record["scores"]["judge_acc"] = score
            record["judging"] = judging
        else:
            record["scores"][f"{OTHER_JUDGE_PREFIX}{protocol}"] = score
            record.setdefault("other_judgings", {})[protocol] = judging
        if others:
            record.setdefault("judge_repeats", {})[protocol] = [v.correct for v in repeated]
            record.setdefault("repeat_judgings", []).extend(
                {**judging_entry(protocol, verdict), "repeat": repeat}
                for repeat, verdict in enumerate(others, start=2)
            )
    return record


def repeat_mean(verdicts: Sequence[bool | None]) -> float | None:
    """A question's judge score: the mean of its repeats' verdicts (one repeat: 0.0 or 1.0);
    None when no repeat gave a verdict.

    >>> repeat_mean([True, None, False, True])
    0.6666666666666666
    """
    given = [float(verdict) for verdict in verdicts if verdict is not None]
    return sum(given) / len(given) if given else None


def failed(record: dict[str, Any]) -> bool:
    """Whether a question's answer or verdict failed: the next run asks it again (a verdict until
    its failure is ``final``), so a flaky endpoint costs one rerun, not a hole in the results."""
    return bool(
        record.get("failure")
        or any(entry.get("error") and not entry.get("final") for entry in judgings(record))
    )


def lost_to_a_failed_request(record: dict[str, Any]) -> bool:
    """Whether an answer or verdict is missing because its request failed for good (the run is
    incomplete); an unreadable reply is :func:`failed` but not this."""
    return bool(record.get("failure")) or any(
        lost_to_a_failed_call(entry) for entry in judgings(record)
    )


@dataclass(frozen=True)
class Built:
    """A conversation's memory, whether it came from the memory cache, the seconds it took and
    its footprint line (:mod:`benchmarks.pipeline.footprint`)."""

    memory: Any
    loaded: bool
    seconds: float
    footprint: dict[str, Any]


@dataclass
class ConstructionCounts:
    """Memories built and loaded by one invocation, and the seconds spent getting them (summed
    over the memories: with several built at once, or in workers, not wall time)."""

    built: int = 0
    loaded: int = 0
    seconds: float = 0.0
    #: Each built memory's seconds (one conversation's construction), for the percentiles.
    built_seconds: list[float] = field(default_factory=list)
    #: Each memory's footprint line, built or loaded, for the run's ``memories.jsonl``.
    footprints: list[dict[str, Any]] = field(default_factory=list)

    def count(self, memory: Built) -> None:
        """Count one memory got."""
        if memory.loaded:
            self.loaded += 1
        else:
            self.built += 1
            self.built_seconds.append(memory.seconds)
        self.seconds += memory.seconds
        self.footprints.append(memory.footprint)

    def add(self, other: ConstructionCounts) -> None:
        """Add a worker's counts."""
        self.built += other.built
        self.loaded += other.loaded
        self.seconds += other.seconds
        self.built_seconds += other.built_seconds
        self.footprints += other.footprints

    def to_json(self) -> dict[str, Any]:
        """The counts, and the percentiles of one memory's construction time over the memories
        built (loaded ones apart)."""
        return {
            "built": self.built,
            "loaded": self.loaded,
            "seconds": self.seconds,
            "seconds_per_memory": latency_percentiles(self.built_seconds),
        }


def get_memory(harness: Harness, conversation: Conversation) -> Built:
    """``conversation``'s memory, from the memory cache or built now."""
    started = time.perf_counter()
    got = harness.memories.load_or_build(harness.system, conversation)
    seconds = time.perf_counter() - started
    line = footprint(harness.system, conversation.conversation_id, got, harness.services.tokens)
    return Built(got.memory, got.loaded, seconds, line)


def construct_memory(
    harness: Harness, conversation: Conversation, construction: ConstructionCounts
) -> Any:
    """The conversation's memory, from the memory cache or built now; counted in
    ``construction``."""
    built = get_memory(harness, conversation)
    construction.count(built)
    return built.memory


def answer_conversation(
    harness: Harness, memory: Any, conversation: Conversation, pending: Sequence[Question]
) -> Iterator[list[dict[str, Any]]]:
    """The records of ``pending`` (questions of ``conversation``), one batch at a time, so the
    caller can log each batch as soon as it is answered."""
    official_ids = (
        OfficialIds.of(conversation) if harness.settings.spec.longmemeval_scores else None
    )
    texts = turn_texts_of(conversation)
    batch_size = harness.settings.batch_size
    for start in range(0, len(pending), batch_size):
        batch = pending[start : start + batch_size]
        yield answer_batch(harness, memory, batch, official_ids, texts)


def turn_texts_of(conversation: Conversation) -> dict[str, str]:
    """Each turn's text by its id."""
    return {turn.turn_id: turn.text for s in conversation.sessions for turn in s.turns}
