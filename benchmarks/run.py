"""``python -m benchmarks.run [method=...] [backbone=...] [dataset=...] [subset=...]``.

For each conversation: construct the memory (or load it from the memory cache), then for each
question not yet in the run's log: retrieve, render the context, answer, judge, score, and append
one JSON line. The run directory is named by a hash of the config (minus locations), so running
the same config again resumes; ``metrics.json`` is rewritten from the log at the end.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import hydra
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from benchmarks.answering.context import render_context
from benchmarks.answering.prompts import answer_messages
from benchmarks.cli import run_or_exit
from benchmarks.data import iter_longmemeval, load_locomo
from benchmarks.data.paths import REPO_ROOT, resolve_data_dir
from benchmarks.memory_store import MemoryStore
from benchmarks.metrics.judge import Judge, Verdict
from benchmarks.metrics.qa import QAPrediction, score_prediction
from benchmarks.metrics.retrieval import evidence_recall
from benchmarks.ranking import ranking_metrics
from benchmarks.runlog import RecordLog, exclusive, summarize_invocations
from benchmarks.settings import (
    ConfigError,
    RunSettings,
    check_method_options,
    run_id,
    run_identity,
    validate,
)
from benchmarks.subsets import select
from benchmarks.summary import format_summary, summarize_run
from memsys.base import MemorySystem, Services
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.llm.accounting import Accounting
from memsys.llm.backbone import Backbone
from memsys.llm.cache import ResponseCache
from memsys.llm.errors import LLMError
from memsys.llm.factory import build_backbone
from memsys.llm.replay import open_response_cache
from memsys.llm.types import LLMRequest, LLMResponse, SamplingParams
from memsys.tokens import TokenCounter
from memsys.types import Conversation, Question

log = logging.getLogger("benchmarks.run")


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
    log: RecordLog

    def close(self) -> None:
        """Close the SQLite caches, so that the files are whole on disk when a run ends."""
        self.response_cache.close()
        self.services.embedder.cache.close()


def resolve_path(path: str) -> Path:
    """Relative paths are relative to the repository root (Hydra may run jobs elsewhere)."""
    candidate = Path(path).expanduser()
    return candidate if candidate.is_absolute() else REPO_ROOT / candidate


def conversations_source(
    settings: RunSettings, data_dir: Path
) -> Callable[[], Iterable[Conversation]]:
    """A factory of fresh conversation streams for the configured dataset."""
    if settings.dataset == "locomo":
        return lambda: load_locomo(str(data_dir), settings.dataset_file or "")
    return lambda: iter_longmemeval(settings.variant, data_dir)  # type: ignore[arg-type]


def build_harness(cfg: DictConfig, settings: RunSettings, run_dir: Path) -> Harness:
    """Instantiate services, method, answerer and judge from config."""
    cache_dir = resolve_path(cfg.cache_dir)
    accounting = Accounting(ledger=run_dir / "llm_calls.jsonl")
    response_cache = open_response_cache(
        cache_dir, settings.llm_cache_mode, OmegaConf.select(cfg, "llm_cache_journal")
    )
    embedder = Embedder(
        EmbedderConfig(model=cfg.embedder.model, batch_size=cfg.embedder.batch_size),
        EmbeddingCache(cache_dir / "embeddings.sqlite"),
    )
    needs_llm = settings.template is not None or OmegaConf.select(cfg, "method.extraction") == "llm"
    backbone = (
        build_backbone(cfg.backbone, cache=response_cache, accounting=accounting)
        if needs_llm
        else None
    )
    services = Services(
        embedder=embedder,
        tokens=TokenCounter(),
        backbone=backbone.with_stage("construction") if backbone else None,
        cache_dir=cache_dir,
    )
    system = instantiate_method(cfg.method, services)
    judge = None
    if settings.judge_enabled and backbone is not None:
        judge_backbone = backbone
        if cfg.judge.backbone is not None:
            judge_backbone = build_backbone(
                cfg.judge.backbone, cache=response_cache, accounting=accounting
            )
        judge = Judge(judge_backbone)
    return Harness(
        settings=settings,
        system=system,
        services=services,
        answerer=backbone,
        judge=judge,
        accounting=accounting,
        response_cache=response_cache,
        memories=MemoryStore(cache_dir / "memories"),
        log=RecordLog(run_dir / "predictions.jsonl"),
    )


def instantiate_method(method: DictConfig, services: Services) -> MemorySystem[Any]:
    """The configured method; a bad option is a :class:`ConfigError` naming its key."""
    check_method_options(method)
    try:
        return instantiate(method, services=services, _convert_="partial")
    except Exception as error:  # Hydra wraps the method's own error; name the key it came from
        cause = error.__cause__ or error
        raise ConfigError(
            "method", f"cannot instantiate {method.get('_target_')}: {cause}"
        ) from error


def answer_batch(
    harness: Harness, memory: Any, questions: Sequence[Question], session_of: dict[str, str]
) -> list[dict[str, Any]]:
    """Retrieve, answer, judge and score a batch of questions; one record each, in order.

    ``session_of`` maps the conversation's turn ids to session ids (LongMemEval's session-level
    retrieval metrics).
    """
    settings = harness.settings
    prepared = []
    harness.system.prepare_queries(questions)
    for question in questions:
        started = time.perf_counter()
        retrieval = harness.system.retrieve(memory, question)
        retrieved_s = time.perf_counter() - started
        context = render_context(retrieval.items, harness.services.tokens, settings.context_budget)
        messages = (
            answer_messages(settings.template, question, context.text, seed=settings.seed)
            if settings.template
            else None
        )
        prepared.append(
            (
                question,
                retrieval,
                context,
                messages,
                retrieved_s,
                time.perf_counter() - started - retrieved_s,
            )
        )

    replies: list[LLMResponse | LLMError | None] = [None] * len(prepared)
    if harness.answerer is not None and settings.template:
        params = SamplingParams(max_tokens=settings.answer_max_tokens)
        requests = [LLMRequest(tuple(messages), params) for _, _, _, messages, _, _ in prepared]
        replies = list(
            harness.answerer.complete_many(requests, stage="answering", return_exceptions=True)
        )

    verdicts: dict[int, Verdict] = {}
    if harness.judge is not None:
        answered = [i for i, reply in enumerate(replies) if isinstance(reply, LLMResponse)]
        graded = harness.judge.grade_many([(prepared[i][0], replies[i].text) for i in answered])  # type: ignore[union-attr]
        verdicts = dict(zip(answered, graded, strict=True))

    records = []
    for i, (question, retrieval, context, _, retrieved_s, render_s) in enumerate(prepared):
        record = build_record(
            question, retrieval, context, replies[i], verdicts.get(i), retrieved_s, render_s
        )
        if settings.dataset == "longmemeval":
            record["ranking"] = ranking_metrics(question, retrieval, session_of)
        records.append(record)
    return records


def build_record(
    question, retrieval, context, reply, verdict, retrieved_s, render_s
) -> dict[str, Any]:
    """One question's JSON line: prediction, gold, provenance, costs and every score."""
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
        "latency_s": {"retrieve": round(retrieved_s, 6), "render": round(render_s, 6)},
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
    if verdict is not None:
        record["scores"]["judge_acc"] = None if verdict.correct is None else float(verdict.correct)
        record["judging"] = {
            "prompt_tokens": verdict.prompt_tokens,
            "completion_tokens": verdict.completion_tokens,
            "latency_s": round(verdict.latency_s, 6),
            "attempts": verdict.attempts,
            "error": verdict.error,
        }
    return record


def answer_pending(
    harness: Harness,
    conversations: Iterable[Conversation],
    name: str,
    progress: bool,
    construction: dict[str, Any],
) -> None:
    """Construct (or load) each memory and log every question not logged yet; count memories
    built and loaded, and construction time, into ``construction`` as it goes."""
    settings = harness.settings
    done = harness.log.done()
    bar = tqdm(desc=f"{name} questions", unit="q", disable=not progress, file=sys.stderr)
    for conversation in conversations:
        pending = [q for q in conversation.questions if q.question_id not in done]
        bar.update(len(conversation.questions) - len(pending))
        if not pending:
            continue
        started = time.perf_counter()
        bar.set_postfix_str(f"constructing {conversation.conversation_id}")
        memory, loaded = harness.memories.load_or_build(harness.system, conversation)
        construction["loaded" if loaded else "built"] += 1
        construction["seconds"] += time.perf_counter() - started
        bar.set_postfix_str(conversation.conversation_id)
        session_of = {turn.turn_id: turn.session_id for turn in conversation.turns}
        for start in range(0, len(pending), settings.batch_size):
            batch = pending[start : start + settings.batch_size]
            harness.log.append(answer_batch(harness, memory, batch, session_of))
            bar.update(len(batch))
    bar.close()


def run(cfg: DictConfig) -> dict[str, Any]:
    """Run (or resume) one configuration; return its metrics summary."""
    settings = validate(cfg)
    identity = run_identity(cfg)
    run_dir = resolve_path(cfg.results_dir) / run_id(identity)
    run_dir.mkdir(parents=True, exist_ok=True)
    with exclusive(run_dir):
        return run_in(run_dir, cfg, settings, identity)


def run_in(
    run_dir: Path, cfg: DictConfig, settings: RunSettings, identity: dict[str, Any]
) -> dict[str, Any]:
    """:func:`run` once ``run_dir`` is held by this process."""
    started, started_at = time.perf_counter(), datetime.now(timezone.utc).isoformat()
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(identity)))
    harness = build_harness(cfg, settings, run_dir)
    conversations = select(
        conversations_source(settings, resolve_data_dir(cfg.data_dir)), settings.subset
    )
    answered_before = len(harness.log.done())
    construction: dict[str, Any] = {"built": 0, "loaded": 0, "seconds": 0.0}
    invocations = RecordLog(run_dir / "invocations.jsonl", key="started")
    try:
        answer_pending(harness, conversations, run_dir.name, cfg.progress, construction)
    finally:  # an interrupted invocation (Ctrl-C, SIGTERM, an error) logs its cost too
        harness.close()
        invocation = {
            "started": f"{started_at} pid {os.getpid()}",
            "questions": len(harness.log.done()) - answered_before,
            "wall_s": round(time.perf_counter() - started, 1),
            # The process's peak so far (a multirun's jobs in one process share it). Linux: KiB.
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "construction_s": round(construction["seconds"], 1),
            "embedding": harness.services.embedder.counts(),
        }
        invocations.append([invocation])
    records = harness.log.records()
    summary = summarize_run(records, settings)
    summary["run_dir"] = str(run_dir)
    summary["construction"] = {
        **construction,
        "corrupt_memories_rebuilt": harness.memories.rebuilt_corrupt,
    }
    summary["caches"] = {
        "llm_responses": harness.response_cache.integrity(),
        "embeddings": harness.services.embedder.cache.integrity(),
    }
    summary["invocation"] = invocation
    summary["invocations"] = summarize_invocations(invocations.records())
    summary["accounting"] = Accounting.from_ledger(run_dir / "llm_calls.jsonl").summary()
    summary["accounting"]["this_invocation"] = harness.accounting.summary()
    if harness.judge is not None:
        summary["judge_parse"] = {name: p.counts() for name, p in harness.judge.parsers.items()}
    (run_dir / "metrics.json").write_text(json.dumps(summary, indent=2, sort_keys=True))
    return summary


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Hydra entry point: run, print a one-screen summary, exit non-zero on a clear error.
    SIGTERM exits like Ctrl-C, through the run's cleanup (caches closed, cost logged)."""
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    print(format_summary(run_or_exit(run, cfg)))


if __name__ == "__main__":
    main()
