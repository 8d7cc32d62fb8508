"""``python -m benchmarks.plan +experiment=paper_locomo``: what a sweep will cost, before it runs.

For every point of an experiment's sweep (Hydra's ``hydra.sweeper.params`` merged with the
command line's sweep overrides, as ``-m`` does), the plan runs the real construction, retrieval,
answering and judging code of the runner (:mod:`benchmarks.harness`) against the scripted
backbone (:mod:`memsys.llm.providers.scripted`), which answers at once with replies the callers
can use. So the LLM calls per stage and their prompts are the ones a run makes, counted exactly;
completion tokens are bounded by each request's ``max_tokens`` and estimated as a share of it.
Tokens are priced per backbone name (:data:`PRICES`) and timed at an assumed throughput
(:data:`THROUGHPUTS`); both, and the shares, are options.

No model, GPU or key is needed. Nothing reaches the shared caches: the plan works in a throwaway
directory with the response cache off, its embedding, parse and compression caches copied from
the shared ones first (read only) so that texts embedded before are not embedded again.

A plan over a sample (``--conversations N``) scales each stage to the whole subset: construction
by the ratio of turns, the per-question stages by the ratio of questions; the output says so.
A memory that several rows share (same method settings and construction model) is built, and
billed, once: in the first row, as in a sweep that shares its memory cache.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import shutil
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from benchmarks.cli import CLEAR_ERRORS
from benchmarks.data.paths import REPO_ROOT, resolve_data_dir, shown_path
from benchmarks.harness import (
    Harness,
    answer_conversation,
    build_harness,
    construct_memory,
    new_construction_counts,
    resolve_path,
)
from benchmarks.run import conversations_source
from benchmarks.settings import BACKBONE_KEYS, RunSettings, compose_config, validate
from benchmarks.subsets import select
from benchmarks.summary import failure_counts
from memsys.llm.providers.scripted import ScriptedConfig
from memsys.structured import ExtractionReport
from memsys.types import Conversation

#: Pipeline stages in the order the tables show them (as booked by the backbone's accounting).
STAGES = ("construction", "retrieval", "answering", "judging")
#: Harness tokenizer named in every output: prompt tokens are counted with it.
TOKENIZER_NOTE = (
    "Prompt tokens are counted with the harness tokenizer (SmolLM2's BPE, memsys/tokens.py) on "
    "the real prompts, plus 3 tokens a message and 3 for the reply of a chat template; a "
    "provider's own tokenizer may count a few percent differently."
)
#: Caches that hold facts about texts, not replies: copied into the plan's throwaway directory.
WARM_CACHES = ("embeddings.sqlite", "parses.sqlite", "compressions.sqlite")


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens."""

    prompt: float
    completion: float


@dataclass(frozen=True)
class Throughput:
    """Tokens per second one backbone sustains over a run's concurrent requests."""

    prompt: float
    completion: float


#: Price per backbone ``name``; a name not listed pays :data:`DEFAULT_BACKBONE`'s price.
#: Self-hosted models cost nothing per token (their cost is the GPU hours).
PRICES: dict[str, Price] = {
    "gpt-4o-mini": Price(0.15, 0.60),  # OpenAI's list price, per 1M input / output tokens
    "qwen2.5-3b": Price(0.0, 0.0),
    "llama3.2-3b": Price(0.0, 0.0),
    "smollm2-135m": Price(0.0, 0.0),
    "llamacpp-server": Price(0.0, 0.0),
    "openai-server": Price(0.0, 0.0),
}
#: Assumed throughputs (not measured here): an API at the backbone's 16 concurrent requests;
#: a 3B model served by vLLM on one H100 at 32; SmolLM2 in process on two CPU cores.
THROUGHPUTS: dict[str, Throughput] = {
    "gpt-4o-mini": Throughput(prompt=50_000, completion=1_500),
    "qwen2.5-3b": Throughput(prompt=20_000, completion=2_000),
    "llama3.2-3b": Throughput(prompt=20_000, completion=2_000),
    "smollm2-135m": Throughput(prompt=400, completion=40),
}
DEFAULT_BACKBONE = "gpt-4o-mini"
#: Share of ``max_tokens`` a reply is expected to use, per stage (a guess: a short answer, a
#: one-word JSON verdict, JSON extractions about half their budget).
COMPLETION_SHARES: dict[str, float] = {
    "construction": 0.5,
    "retrieval": 0.5,
    "answering": 0.3,
    "judging": 0.25,
}


@dataclass(frozen=True)
class Rates:
    """Prices, throughputs and completion shares a plan is costed at."""

    prices: Mapping[str, Price] = field(default_factory=lambda: dict(PRICES))
    throughputs: Mapping[str, Throughput] = field(default_factory=lambda: dict(THROUGHPUTS))
    completion_shares: Mapping[str, float] = field(default_factory=lambda: dict(COMPLETION_SHARES))

    def price(self, backbone: str) -> Price:
        return self.prices.get(backbone, self.prices[DEFAULT_BACKBONE])

    def throughput(self, backbone: str) -> Throughput:
        return self.throughputs.get(backbone, self.throughputs[DEFAULT_BACKBONE])


@dataclass(frozen=True)
class StandIn:
    """A model the plan swaps for one at hand when the config asks for it: it makes no LLM
    call, so the calls stay the same; ``why`` says what the swap may change."""

    key: str
    value: str
    override: str
    why: str


#: SeCom's paper setting loads two Hugging Face models that are not shipped offline, and
#: LLMLingua-2 is slow on a CPU; neither is an LLM call.
STAND_INS = (
    StandIn(
        "method.compression",
        "llmlingua2",
        "method.compression=none",
        "LLMLingua-2 only compresses the indexed copy (segments reach the reader whole): ranking "
        "may differ, calls do not",
    ),
    StandIn(
        "embedder.model",
        "sentence-transformers/multi-qa-mpnet-base-dot-v1",
        "embedder=minilm",
        "MPNet only ranks: which segments fill the context may differ, calls do not",
    ),
)


@dataclass(frozen=True)
class Extent:
    """How much of a dataset a run covers."""

    conversations: int = 0
    turns: int = 0
    questions: int = 0

    def add(self, conversation: Conversation) -> Extent:
        return Extent(
            self.conversations + 1,
            self.turns + len(conversation.turns),
            self.questions + len(conversation.questions),
        )


@dataclass(frozen=True)
class StageCount:
    """One stage's calls and tokens as counted (completion: the ``max_tokens`` bound)."""

    calls: float = 0
    prompt_tokens: float = 0
    completion_bound: float = 0

    def scaled(self, factor: float) -> StageCount:
        return StageCount(
            self.calls * factor, self.prompt_tokens * factor, self.completion_bound * factor
        )


@dataclass
class Measurement:
    """What one sweep point cost on its sample, as the scripted run counted it."""

    stages: dict[str, StageCount]
    backbones: dict[str, str]
    sample: Extent
    context_tokens: int
    fallbacks: dict[str, int]
    seconds: float


@dataclass(frozen=True)
class StagePlan:
    """One stage of one row, scaled to the whole subset and costed."""

    backbone: str
    calls: float
    prompt_tokens: float
    completion_bound: float
    completion_estimate: float
    hours: float
    dollars_bound: float
    dollars_estimate: float


@dataclass
class Row:
    """One sweep point: its overrides, its stages' plan, and how it was measured."""

    point: dict[str, str]
    stages: dict[str, StagePlan]
    measurement: Measurement
    scale: dict[str, float]
    stand_ins: list[str]

    def total(self, name: str) -> float:
        return sum(getattr(stage, name) for stage in self.stages.values())


# -- The sweep -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sweep:
    """A multirun's points (one override list each) and its axes (keys with several values)."""

    points: list[list[str]]
    axes: list[str]

    def label(self, point: Sequence[str]) -> dict[str, str]:
        """The point's values on the axes (its overrides when nothing varies): a row's name."""
        values = dict(line.split("=", 1) for line in point)
        return {axis: values[axis] for axis in self.axes} or {"config": " ".join(point)}


def sweep(overrides: Sequence[str]) -> Sweep:
    """The multirun ``-m`` makes of ``overrides``: the experiment's ``hydra.sweeper.params``, each
    replaced by a command-line override of the same key, crossed (Hydra's basic sweeper)."""
    parser = OverridesParser.create()
    base = compose_overrides(fixed_overrides(overrides), hydra=True)
    swept = OmegaConf.select(base, "hydra.sweeper.params")
    params = OmegaConf.to_container(swept, resolve=False) if swept is not None else {}
    assert isinstance(params, dict)
    lines = [f"{key}={value}" for key, value in params.items()] + list(overrides)
    choices: dict[str, list[str]] = {}
    for override in parser.parse_overrides(lines):
        key = override.get_key_element()
        values = (
            list(override.sweep_string_iterator())
            if override.is_sweep_override()
            else [override.get_value_element_as_str()]
        )
        choices[key] = [f"{key}={value}" for value in values]
    points = [list(point) for point in itertools.product(*choices.values())]
    return Sweep(points, [key for key, values in choices.items() if len(values) > 1])


def fixed_overrides(overrides: Sequence[str]) -> list[str]:
    """The overrides that are not sweeps (``key=a,b``): what every point shares."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    return [o.input_line for o in parsed if not o.is_sweep_override()]


def compose_overrides(overrides: Sequence[str], *, hydra: bool = False) -> DictConfig:
    """The runner's config for ``overrides`` (with Hydra's own node when ``hydra``)."""
    return compose_config(overrides, with_hydra=hydra)


def planned_config(
    point: Sequence[str], work_dir: Path, stand_ins: bool
) -> tuple[DictConfig, list[str]]:
    """The config of one sweep point as the plan runs it: its stand-ins applied, every backbone
    scripted, caches in ``work_dir`` (response cache off). Returns the config and the stand-ins
    used."""
    cfg = compose_overrides(point)
    used = [s for s in STAND_INS if stand_ins and OmegaConf.select(cfg, s.key) == s.value]
    if used:
        cfg = compose_overrides([*point, *(s.override for s in used)])
    script_backbones(cfg)
    locations = {
        "cache_dir": str(work_dir / "cache"),
        "results_dir": str(work_dir / "runs"),
        "llm_cache_mode": "off",
        "llm_cache_journal": None,
        "progress": False,
    }
    for key, value in locations.items():
        OmegaConf.update(cfg, key, value, merge=False)
    return cfg, [f"{s.override}: {s.why}" for s in used]


def script_backbones(cfg: DictConfig) -> None:
    """Give every backbone of ``cfg`` (reader, construction model, judge) the scripted provider,
    keeping the rest of its config (its name prices it; method settings read from it hold)."""
    for key in BACKBONE_KEYS:
        node = OmegaConf.select(cfg, key)
        if node is not None:
            provider = {"_target_": f"{ScriptedConfig.__module__}.ScriptedConfig"}
            provider["model"] = str(node.name)
            OmegaConf.update(cfg, f"{key}.provider", provider, merge=False)


def sampled(cfg: DictConfig, conversations: int | None) -> DictConfig:
    """``cfg`` with its subset cut to the first ``conversations`` (``None``: as it is)."""
    configured = OmegaConf.select(cfg, "subset.conversations")
    if conversations is None or (configured is not None and configured <= conversations):
        return cfg
    cut = copy.deepcopy(cfg)
    cut.subset.conversations = conversations
    return cut


# -- Measuring one point ---------------------------------------------------------------------


def measure(cfg: DictConfig) -> Measurement:
    """Construct, retrieve, answer and judge the config's subset with its (scripted) backbones,
    exactly as :mod:`benchmarks.run` does, and count what it cost."""
    settings = validate(cfg)
    started = time.perf_counter()
    sample, context_tokens = Extent(), 0
    census: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="plan-run-") as run_dir:
        harness = build_harness(cfg, settings, Path(run_dir))
        try:
            for conversation in subset_conversations(cfg, settings):
                sample = sample.add(conversation)
                memory = construct_memory(harness, conversation, new_construction_counts())
                census.update(fallback_counts(harness.system.dump_memory(memory), "memory"))
                questions = conversation.questions
                for records in answer_conversation(harness, memory, conversation, questions):
                    context_tokens += sum(record["context_tokens"] for record in records)
                    census.update(
                        {f"{kind}.failed": n for kind, n in failure_counts(records).items() if n}
                    )
            census.update(fallback_counts(service_reports(harness), "service"))
        finally:
            harness.close()
    counted = harness.accounting.summary()["stages"]
    return Measurement(
        stages={
            stage: StageCount(c["calls"], c["prompt_tokens"], c["completion_tokens"])
            for stage, c in counted.items()
        },
        backbones=stage_backbones(cfg, settings),
        sample=sample,
        context_tokens=context_tokens,
        fallbacks=dict(sorted(census.items())),
        seconds=time.perf_counter() - started,
    )


def subset_conversations(cfg: DictConfig, settings: RunSettings) -> Iterator[Conversation]:
    """The conversations of the config's subset, as the runner reads them."""
    return select(conversations_source(settings, resolve_data_dir(cfg.data_dir)), settings.subset)


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
                  "unparseable", "invalid", "failed_calls")  # fmt: skip


def fallback_counts(report: Any, path: str) -> dict[str, int]:
    """The non-zero fallback counters in a method's JSON (a memory dump: its construction
    report), by dotted path; a ``source`` naming a fallback counts 1. Lists (memory items) are
    not searched."""
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


# -- Scaling and costing ---------------------------------------------------------------------


def extent(cfg: DictConfig) -> Extent:
    """Conversations, turns and questions of the config's subset."""
    total = Extent()
    for conversation in subset_conversations(cfg, validate(cfg)):
        total = total.add(conversation)
    return total


def scale_factors(sample: Extent, full: Extent) -> dict[str, float]:
    """Per stage, the factor from the sample to the whole subset: construction by turns, the
    other stages (one request or a few per question) by questions."""
    by_turns = full.turns / sample.turns if sample.turns else 1.0
    by_questions = full.questions / sample.questions if sample.questions else 1.0
    return {stage: by_turns if stage == "construction" else by_questions for stage in STAGES}


def cost(count: StageCount, stage: str, backbone: str, rates: Rates) -> StagePlan:
    """Dollars and hours of one stage's tokens at ``rates``."""
    estimate = count.completion_bound * rates.completion_shares.get(stage, 1.0)
    price, speed = rates.price(backbone), rates.throughput(backbone)
    seconds = count.prompt_tokens / speed.prompt + estimate / speed.completion
    return StagePlan(
        backbone=backbone,
        calls=count.calls,
        prompt_tokens=count.prompt_tokens,
        completion_bound=count.completion_bound,
        completion_estimate=estimate,
        hours=seconds / 3600,
        dollars_bound=(
            count.prompt_tokens * price.prompt + count.completion_bound * price.completion
        )
        / 1e6,
        dollars_estimate=(count.prompt_tokens * price.prompt + estimate * price.completion) / 1e6,
    )


def plan_row(
    point: dict[str, str],
    measurement: Measurement,
    full: Extent,
    rates: Rates,
    stand_ins: list[str],
) -> Row:
    """A measured point scaled to ``full`` and costed."""
    scale = scale_factors(measurement.sample, full)
    stages = {
        stage: cost(
            measurement.stages[stage].scaled(scale[stage]),
            stage,
            measurement.backbones[stage],
            rates,
        )
        for stage in STAGES
        if stage in measurement.stages
    }
    return Row(point, stages, measurement, scale, stand_ins)


# -- The plan --------------------------------------------------------------------------------


@dataclass
class Plan:
    """Every row of a sweep, with what it was measured on and how long the plan took."""

    command: str
    rows: list[Row]
    full: Extent
    sample: Extent
    rates: Rates
    seconds: float = 0.0

    @property
    def scaled(self) -> bool:
        return self.sample != self.full


def make_plan(
    overrides: Sequence[str],
    *,
    rates: Rates,
    work_dir: Path,
    conversations: int | None = None,
    stand_ins: bool = True,
    warm_from: Path | None = None,
    log: Any = None,
) -> Plan:
    """Measure and cost every point of the sweep over ``overrides`` in ``work_dir``; caches
    copied from ``warm_from`` first (never written to)."""
    started = time.perf_counter()
    if warm_from is not None:
        warm_caches(warm_from, work_dir / "cache")
    rows, full, sample = [], Extent(), Extent()
    grid = sweep(overrides)
    for number, point in enumerate(grid.points, 1):
        cfg, used = planned_config(point, work_dir, stand_ins)
        run_cfg = sampled(cfg, conversations)
        measurement = measure(run_cfg)
        sample = measurement.sample
        full = sample if run_cfg is cfg else extent(cfg)  # the whole subset was measured
        rows.append(plan_row(grid.label(point), measurement, full, rates, used))
        if log is not None:
            print(
                f"[{number}/{len(grid.points)}] {' '.join(point)}: {measurement.seconds:.0f} s",
                file=log,
            )
    command = " ".join(["python -m benchmarks.plan", *overrides])
    return Plan(command, rows, full, sample, rates, time.perf_counter() - started)


def warm_caches(shared: Path, cache_dir: Path) -> None:
    """Copy the shared caches of facts about texts (:data:`WARM_CACHES`) into the plan's cache
    directory, each as one consistent snapshot (SQLite's backup), the shared file opened read
    only; the response cache and memories are never copied."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    if shared.resolve() == cache_dir.resolve():
        raise ValueError(f"the plan must not work in the shared cache {shared}")
    for name in WARM_CACHES:
        if not (shared / name).exists():
            continue
        source = sqlite3.connect(f"file:{shared / name}?mode=ro", uri=True)
        target = sqlite3.connect(cache_dir / name)
        try:
            source.backup(target)
        finally:
            target.close()
            source.close()


# -- Output ----------------------------------------------------------------------------------


def millions(tokens: float) -> str:
    return f"{tokens / 1e6:,.2f}"


def markdown(plan: Plan) -> str:
    """The plan as a page: one row per sweep point, totals per billed model, the assumptions."""
    keys = list(plan.rows[0].point) if plan.rows else []
    header = [
        *keys,
        *(f"calls: {stage}" for stage in STAGES),
        "context tok / q",
        "prompt tok (M)",
        "completion tok (M) est. / bound",
        "hours (est.)",
        "$ est. / bound",
    ]
    lines = [
        f"# Plan: `{plan.command}`",
        "",
        *scope_lines(plan),
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in plan.rows:
        lines.append("| " + " | ".join(row_cells(row, keys)) + " |")
    lines += ["", *totals_by_model(plan), "", *fallback_lines(plan), "", *assumption_lines(plan)]
    return "\n".join(lines) + "\n"


def scope_lines(plan: Plan) -> list[str]:
    """What the numbers cover: exact, or scaled from a sample."""
    full, sample = plan.full, plan.sample
    whole = f"{full.conversations} conversations, {full.turns} turns, {full.questions} questions"
    if not plan.scaled:
        return [
            f"Counted on the whole subset ({whole}): calls and prompt tokens are counted, not "
            "estimated (where scripted replies fall short, see below)."
        ]
    return [
        f"**Scaled estimate.** Measured on the first {sample.conversations} of "
        f"{full.conversations} conversations (`--conversations {sample.conversations}`: "
        f"{sample.turns} turns, {sample.questions} questions), scaled to the whole "
        f"subset ({whole}): construction by the ratio of turns "
        f"(×{full.turns / sample.turns:.2f}), retrieval, answering and judging by the ratio of "
        f"questions (×{full.questions / sample.questions:.2f}). Answer and judge calls are exact "
        "(per question one answer and one verdict per judge protocol, replies being usable); "
        "the rest is an estimate."
    ]


def row_cells(row: Row, keys: Sequence[str]) -> list[str]:
    def calls(stage: str) -> str:
        plan = row.stages.get(stage)
        return f"{plan.calls:,.0f}" if plan else "0"

    return [
        *(row.point.get(key, "") for key in keys),
        *(calls(stage) for stage in STAGES),
        f"{row.measurement.context_tokens / max(1, row.measurement.sample.questions):,.0f}",
        millions(row.total("prompt_tokens")),
        f"{millions(row.total('completion_estimate'))} / {millions(row.total('completion_bound'))}",
        f"{row.total('hours'):,.1f}",
        f"{row.total('dollars_estimate'):,.2f} / {row.total('dollars_bound'):,.2f}",
    ]


def totals_by_model(plan: Plan) -> list[str]:
    """Calls, tokens, hours and dollars summed per billed backbone over the grid."""
    totals: dict[str, Counter[str]] = {}
    for row in plan.rows:
        for stage in row.stages.values():
            total = totals.setdefault(stage.backbone, Counter())
            for name in ("calls", "prompt_tokens", "completion_estimate", "completion_bound",
                         "hours", "dollars_estimate", "dollars_bound"):  # fmt: skip
                total[name] += getattr(stage, name)
    lines = [
        "## Totals per model (every stage it serves)",
        "",
        "| model | calls | prompt tok (M) | completion tok (M) est. / bound | hours (est.) "
        "| $ est. / bound |",
        "|---|---|---|---|---|---|",
    ]
    grand: Counter[str] = Counter()
    for backbone, total in sorted(totals.items()):
        grand.update(total)
        lines.append(total_line(backbone, total))
    lines.append(total_line("**all**", grand))
    return lines


def total_line(label: str, total: Mapping[str, float]) -> str:
    return (
        f"| {label} | {total['calls']:,.0f} | {millions(total['prompt_tokens'])} | "
        f"{millions(total['completion_estimate'])} / {millions(total['completion_bound'])} | "
        f"{total['hours']:,.1f} | {total['dollars_estimate']:,.2f} / "
        f"{total['dollars_bound']:,.2f} |"
    )


def fallback_lines(plan: Plan) -> list[str]:
    """Rows whose pipelines did not use a scripted reply as it came, counted on the sample."""
    lines = ["## Scripted replies not used as they came (counted, not scaled)", ""]
    found = [row for row in plan.rows if row.measurement.fallbacks]
    for row in found:
        label = " ".join(f"{k}={v}" for k, v in row.point.items())
        counts = ", ".join(f"`{path}` {n}" for path, n in row.measurement.fallbacks.items())
        lines.append(f"* {label}: {counts}")
    if not found:
        lines.append("None: every pipeline used every scripted reply.")
    lines += [
        "",
        "A retried unit costs a second request that a model whose first reply is usable does "
        "not send: where `retried` appears, the row's construction (or retrieval) calls are an "
        "upper bound (docs/plan.md says which pipelines and why).",
    ]
    return lines


def assumption_lines(plan: Plan) -> list[str]:
    """Prices, throughputs, shares, stand-ins, the tokenizer, and what the plan itself took."""
    rates = plan.rates
    backbones = sorted({stage.backbone for row in plan.rows for stage in row.stages.values()})
    lines = ["## Assumptions", "", f"* {TOKENIZER_NOTE}"]
    lines.append(
        "* Completion tokens: the bound is every request's `max_tokens`; the estimate is a share "
        "of it per stage: "
        + ", ".join(f"{s} {share:g}" for s, share in rates.completion_shares.items())
        + " (`--completion-share STAGE=F`)."
    )
    for backbone in backbones:
        price, speed = rates.price(backbone), rates.throughput(backbone)
        lines.append(
            f"* `{backbone}`: ${price.prompt:g} / ${price.completion:g} per 1M prompt / "
            f"completion tokens; {speed.prompt:,.0f} prompt and {speed.completion:,.0f} "
            "completion tokens/s (`--price`, `--throughput`)."
        )
    stand_ins = sorted({s for row in plan.rows for s in row.stand_ins})
    lines += [f"* Stand-in `{s}`." for s in stand_ins]
    lines.append(
        "* `context tok / q`: harness tokens of retrieved context per question, on the memory "
        "built from scripted replies (each answer prompt carries it)."
    )
    lines.append(
        "* Not in the rows: the judge's probe set (`benchmarks/metrics/judge_probes.py`), graded "
        "once per judge model and cached across rows: at most 3 probes per question, each one "
        "call per judge protocol (`judge.probes=false` skips it)."
    )
    measured = sum(row.measurement.seconds for row in plan.rows)
    lines.append(f"* This plan took {plan.seconds / 60:.1f} min on this machine.")
    if plan.scaled:
        whole = measured * plan.full.turns / plan.sample.turns
        lines.append(
            f"* The full plan, `{plan.command}` without `--conversations`, would take at most "
            f"about {whole / 60:.0f} min here: this sample's {measured / 60:.1f} min × the ratio "
            "of turns, an upper bound (part of a row's time does not grow with its turns)."
        )
    return lines


def to_json(plan: Plan) -> dict[str, Any]:
    """Everything behind the page, per row and stage, with the measurement before scaling."""
    return {
        "command": plan.command,
        "created": datetime.now(timezone.utc).isoformat(),
        "tokenizer": TOKENIZER_NOTE,
        "full": asdict(plan.full),
        "sample": asdict(plan.sample),
        "scaled": plan.scaled,
        "rates": asdict(plan.rates),
        "seconds": round(plan.seconds, 1),
        "rows": [
            {
                "point": row.point,
                "stages": {stage: asdict(s) for stage, s in row.stages.items()},
                "scale": row.scale,
                "measured": {
                    "stages": {stage: asdict(c) for stage, c in row.measurement.stages.items()},
                    "sample": asdict(row.measurement.sample),
                    "context_tokens": row.measurement.context_tokens,
                    "fallbacks": row.measurement.fallbacks,
                    "seconds": round(row.measurement.seconds, 1),
                },
                "stand_ins": row.stand_ins,
            }
            for row in plan.rows
        ],
    }


# -- Command line ----------------------------------------------------------------------------


def parse_rates(args: argparse.Namespace) -> Rates:
    """The default rates with the command line's ``--price``, ``--throughput`` and
    ``--completion-share`` on top."""
    rates = Rates()
    prices, speeds = dict(rates.prices), dict(rates.throughputs)
    shares = dict(rates.completion_shares)
    for name, (prompt, completion) in pairs(args.price, 2):
        prices[name] = Price(prompt, completion)
    for name, (completion, *prompt) in pairs(args.throughput, 1):
        default = rates.throughput(name).prompt
        speeds[name] = Throughput(prompt[0] if prompt else default, completion)
    for stage, (share,) in pairs(args.completion_share, 1):
        shares[stage] = share
    return Rates(prices, speeds, shares)


def pairs(options: Sequence[str], minimum: int) -> Iterator[tuple[str, list[float]]]:
    """``NAME=A[,B]`` options as ``(NAME, [A, B])``."""
    for option in options:
        name, _, values = option.partition("=")
        numbers = [float(v) for v in values.split(",") if v]
        if not name or len(numbers) < minimum:
            raise SystemExit(
                f"error: expected NAME={'A,B' if minimum == 2 else 'A'}, got {option!r}"
            )
        yield name, numbers


def arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.plan", description="What a sweep will cost, before it runs."
    )
    option = parser.add_argument
    option("overrides", nargs="*", help="Hydra overrides, as for benchmarks.run -m")
    option("--conversations", type=int, help="measure on the first N, scale to all")
    option("--out", help="the page (default results/plan_<experiment>.md)")
    option("--json", help="also write the numbers behind the page to this file")
    option("--price", action="append", default=[], metavar="NAME=IN,OUT",
           help="dollars per 1M prompt, completion tokens of backbone NAME")  # fmt: skip
    option("--throughput", action="append", default=[], metavar="NAME=OUT[,IN]",
           help="completion[, prompt] tokens/s of backbone NAME")  # fmt: skip
    option("--completion-share", action="append", default=[], metavar="STAGE=F",
           help="share of max_tokens a reply of STAGE is expected to use")  # fmt: skip
    option("--no-stand-ins", action="store_true", help="run the configs' own models")
    option("--cold", action="store_true", help="do not copy the shared caches first")
    return parser.parse_args(argv)


def default_out(overrides: Sequence[str]) -> Path:
    """``results/plan_<experiment>.md`` (``results/plan.md`` without an experiment)."""
    names = [o.split("=", 1)[1] for o in overrides if o.lstrip("+").startswith("experiment=")]
    return REPO_ROOT / "results" / (f"plan_{names[0]}.md" if names else "plan.md")


def main(argv: Sequence[str] | None = None) -> int:
    """Plan in a throwaway directory (removed after), print the page and write it (and, with
    ``--json``, the numbers behind it)."""
    args = arguments(argv)
    out = Path(args.out) if args.out else default_out(args.overrides)
    work_dir = Path(tempfile.mkdtemp(prefix="memsys-plan-"))
    try:
        shared = compose_overrides(fixed_overrides(args.overrides)).cache_dir
        plan = make_plan(
            args.overrides,
            rates=parse_rates(args),
            work_dir=work_dir,
            conversations=args.conversations,
            stand_ins=not args.no_stand_ins,
            warm_from=None if args.cold else resolve_path(str(shared)),
            log=sys.stderr,
        )
    except (*CLEAR_ERRORS, HydraException) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    page = markdown(plan)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps(to_json(plan), indent=2) + "\n", encoding="utf-8")
    print(page)
    print(f"wrote {shown_path(out)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
