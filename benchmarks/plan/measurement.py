"""One sweep point measured: the runner's real construction, retrieval, answering and judging
code (:mod:`benchmarks.pipeline.harness`) run over the config's subset with scripted backbones, its calls
and tokens counted per stage, and the scripted replies its pipelines did not use as they came."""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from benchmarks.metrics.aggregate import failure_counts
from benchmarks.pipeline.harness import (
    ConstructionCounts,
    Harness,
    answer_conversation,
    build_harness,
    construct_memory,
)
from benchmarks.pipeline.run import conversations_source
from benchmarks.pipeline.settings import RunSettings, validate
from benchmarks.pipeline.subsets import select
from benchmarks.plan.costs import Extent, ExtentCount, Growth, LocalWork, StageCount
from memsys.files import available_cores
from memsys.llm.structured import ExtractionReport
from memsys.types import Conversation


@dataclass
class Measurement:
    """What one sweep point cost on its sample, as the scripted run counted it."""

    stages: dict[str, StageCount]
    backbones: dict[str, str]
    sample: Extent
    context_tokens: int
    fallbacks: dict[str, int]
    seconds: float
    #: The CPU-side work of the sample (memories built, questions retrieved) in one process.
    local: LocalWork = field(default_factory=LocalWork)
    #: Processes the run would do that work on (``workers``, or ``executor.workers``).
    workers: int = 1
    #: The cores a local run's workers share (this machine's); ``None`` under ``executor=ray``.
    shared_cores: int | None = None
    #: The sample's texts embedded and parsed after each conversation (what scales them).
    growth: Growth = field(default_factory=Growth)


def measure(cfg: DictConfig) -> Measurement:
    """Construct, retrieve, answer and judge the config's subset with its (scripted) backbones,
    exactly as :mod:`benchmarks.pipeline.run` does, and count what it cost."""
    settings = validate(cfg)
    started = time.perf_counter()
    sample, context_tokens = ExtentCount(), 0
    census: Counter[str] = Counter()
    seen: list[int] = []
    encoded: list[float] = []
    parsed: list[float] = []
    with tempfile.TemporaryDirectory(prefix="plan-run-") as run_dir:
        harness = build_harness(settings, Path(run_dir))
        working = time.perf_counter()  # the services are built; the work starts
        try:
            for conversation in subset_conversations(settings):
                sample.add(conversation)
                memory = construct_memory(harness, conversation, ConstructionCounts())
                census.update(fallback_counts(harness.system.dump_memory(memory), "memory"))
                questions = conversation.questions
                for records in answer_conversation(harness, memory, conversation, questions):
                    context_tokens += sum(record["context_tokens"] for record in records)
                    census.update(
                        {f"{kind}.failed": n for kind, n in failure_counts(records).items() if n}
                    )
                work = harness.work_counts()
                seen.append(len(sample.texts))
                encoded.append(work["embedding"]["encoded"])
                parsed.append(work["parsing"]["parsed"])
            census.update(fallback_counts(service_reports(harness), "service"))
            work = harness.work_counts()
            local = LocalWork(
                work["embedding"]["encoded"],
                work["parsing"]["parsed"],
                time.perf_counter() - working,
                work["embedding"]["encode_seconds"],
                work["parsing"]["parse_seconds"],
            )
        finally:
            harness.close()
    counted = harness.accounting.summary()["stages"]
    return Measurement(
        stages={
            stage: StageCount(c["calls"], c["prompt_tokens"], c["completion_tokens"])
            for stage, c in counted.items()
        },
        backbones=stage_backbones(cfg, settings),
        sample=sample.extent(),
        context_tokens=context_tokens,
        fallbacks=dict(sorted(census.items())),
        seconds=time.perf_counter() - started,
        local=local,
        workers=settings.worker_count,
        shared_cores=None if settings.executor.name == "ray" else available_cores(),
        growth=Growth(tuple(seen), tuple(encoded), tuple(parsed)),
    )


def subset_conversations(settings: RunSettings) -> Iterator[Conversation]:
    """The conversations of the config's subset, as the runner reads them."""
    return select(conversations_source(settings, settings.paths.data_dir), settings.subset)


def stage_backbones(cfg: DictConfig, settings: RunSettings) -> dict[str, str]:
    """The backbone ``name`` that each stage's calls go to (and are priced by)."""
    judge = "judge.backbone" if OmegaConf.select(cfg, "judge.backbone") is not None else "backbone"
    builder = settings.construction_key or "backbone"
    keys = {
        "construction": builder,
        "retrieval": builder,
        "answering": "backbone",
        "judging": judge,
    }
    return {stage: str(OmegaConf.select(cfg, f"{key}.name")) for stage, key in keys.items()}


#: Words that mark a counter of LLM replies not used as they came: retried, replaced by a rule
#: or a lite extractor, unparseable, failed.
FALLBACK_WORDS = ("fallback", "retried", "after_retry", "request_errors", "request_failed",
                  "unparseable", "invalid", "failed_calls", "library_errors")  # fmt: skip


def fallback_counts(report: Any, path: str) -> dict[str, int]:
    """The non-zero fallback counters in a method's memory dump, by dotted path (a ``source`` naming
    a fallback counts 1; lists are not searched)."""
    found: dict[str, int] = {}
    if isinstance(report, Mapping):
        for key, value in report.items():
            found.update(fallback_counts(value, f"{path}.{key}"))
        return found
    leaf = path.rsplit(".", 1)[-1]
    if isinstance(report, int) and not isinstance(report, bool) and report > 0:
        if any(word in leaf for word in FALLBACK_WORDS):
            found[path] = report
    elif isinstance(report, str) and leaf == "source" and "fallback" in report:
        found[f"{path}={report}"] = 1
    return found


def service_reports(harness: Harness) -> dict[str, Any]:
    """What the method counted at retrieval (its :class:`ExtractionReport` and counter
    attributes: query analysis, filters) and the judge's parser outcomes."""
    reports: dict[str, Any] = {}
    for name, value in vars(harness.system).items():
        if isinstance(value, ExtractionReport):
            reports[f"retrieval.{name}"] = value.to_json()
        elif isinstance(value, Counter):
            reports[f"retrieval.{name}"] = dict(value)
    if harness.judge is not None:
        reports["judge"] = {name: p.counts() for name, p in harness.judge.parsers.items()}
    return reports


def extent(cfg: DictConfig) -> Extent:
    """Conversations, turns and questions of the config's subset."""
    total = ExtentCount()
    for conversation in subset_conversations(validate(cfg)):
        total.add(conversation)
    return total.extent()
