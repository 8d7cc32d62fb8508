"""The plan as a page (one row per sweep point, totals per billed model, the fallbacks, the
assumptions) and as JSON (everything behind the page, with each measurement before scaling)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any

from benchmarks.plan.build import Plan, Row
from benchmarks.plan.costs import GPU_ENCODE_RATE, STAGES
from benchmarks.render import Table

#: Harness tokenizer named in every output: prompt tokens are counted with it.
TOKENIZER_NOTE = (
    "Prompt tokens are counted with the harness tokenizer (SmolLM2's BPE, memsys/tokens.py) on "
    "the real prompts, plus 3 tokens a message and 3 for the reply of a chat template; a "
    "provider's own tokenizer may count a few percent differently."
)


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
        "texts embedded / parsed (k)",
        "local hours: 1 process / workers / GPU",
    ]
    table = Table(header, [row_cells(row, keys) for row in plan.rows])
    lines = [f"# Plan: `{plan.command}`", "", *scope_lines(plan), "", *table.markdown_lines()]
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
        "(per question one answer and `judge.repeats` verdicts per judge protocol, replies being "
        "usable); "
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
        f"{row.local.encoded / 1e3:,.1f} / {row.local.parsed / 1e3:,.1f}",
        local_hours(row),
    ]


def local_hours(row: Row) -> str:
    """The row's CPU-side wall hours in one process, on its workers, and with a GPU embedding."""
    local, workers, cores = row.local, row.measurement.workers, row.measurement.shared_cores
    return (
        f"{local.hours():,.2f} / {local.hours(workers, cores=cores):,.2f} ({workers}) / "
        f"{local.hours(workers, cores=cores, gpu=True):,.2f}"
    )


def totals_by_model(plan: Plan) -> list[str]:
    """Calls, tokens, hours and dollars summed per billed backbone over the grid."""
    totals: dict[str, Counter[str]] = {}
    for row in plan.rows:
        for stage in row.stages.values():
            total = totals.setdefault(stage.backbone, Counter())
            for name in ("calls", "prompt_tokens", "completion_estimate", "completion_bound",
                         "hours", "dollars_estimate", "dollars_bound"):  # fmt: skip
                total[name] += getattr(stage, name)
    grand: Counter[str] = Counter()
    body = []
    for backbone, total in sorted(totals.items()):
        grand.update(total)
        body.append(total_cells(backbone, total))
    body.append(total_cells("**all**", grand))
    header = ["model", "calls", "prompt tok (M)", "completion tok (M) est. / bound"]
    header += ["hours (est.)", "$ est. / bound"]
    return Table(header, body, title="Totals per model (every stage it serves)").markdown_lines()


def total_cells(label: str, total: Mapping[str, float]) -> list[str]:
    return [
        label,
        f"{total['calls']:,.0f}",
        millions(total["prompt_tokens"]),
        f"{millions(total['completion_estimate'])} / {millions(total['completion_bound'])}",
        f"{total['hours']:,.1f}",
        f"{total['dollars_estimate']:,.2f} / {total['dollars_bound']:,.2f}",
    ]


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
    lines.append(
        "* `texts embedded / parsed`: the texts the embedder and spaCy processed on the sample "
        "after the content caches (each distinct text once: a text some earlier row or run "
        "embedded is free), scaled by distinct turn texts along the sample's own growth curve "
        "(Heaps' law, texts ∝ distinct turn texts^β, β fitted over the sample's conversations: "
        "haystacks that share sessions, facts or entities share what the caches absorb; the "
        "`scale` of `--json` gives the factors). `local hours`: the wall time this machine spent "
        "building the sample's memories and retrieving (its embedding and parsing seconds scaled "
        "as their texts, the rest by turns), in one process, on the "
        "run's workers (`workers`: they share this machine's cores, and one process already "
        "embeds on all of them, so only the rest divides, by workers up to the cores; "
        "`executor.workers`: a machine each, everything divides) and with the "
        f"embedding on a GPU at {GPU_ENCODE_RATE:,.0f} texts/s (MiniLM on an H100, "
        "results/bench.md); measured against cold runs in docs/longmemeval-at-scale.md."
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
                    "local": asdict(row.measurement.local),
                    "growth": asdict(row.measurement.growth),
                    "workers": row.measurement.workers,
                    "shared_cores": row.measurement.shared_cores,
                },
                "local": asdict(row.local),
                "stand_ins": row.stand_ins,
            }
            for row in plan.rows
        ],
    }
