"""HingeMem's memory statistics beside the paper's Table 4, and its adaptive stop's context sizes.

``build`` constructs (or loads from the runner's memory cache, ``.cache/memories``) the memory of
each conversation from a Hydra method config and writes one JSON file under
``results/hingemem_stats/``: per conversation the node counts per element and the hyperedges
(Table 4's rows) with how they were built (LLM replies used, retried, fallen back to lite); with
``--retrieval``, per question the plan's type, the candidates, the items the adaptive stop kept,
and the context tokens (runner's renderer, budget 2048) of the adaptive and the fixed top-k
contexts. LLM replies go through the shared response cache (``.cache/llm_responses.sqlite``),
so an interrupted ``llm`` build resumes where it stopped. ``report`` renders
``results/hingemem_stats.md`` from those files only (and, with ``--run``, from runner output).

    .venv/bin/python scripts/hingemem_stats.py build --config hingemem --retrieval
    .venv/bin/python scripts/hingemem_stats.py build --config hingemem_llm --conversations conv-26 \\
        --sessions 3 --override method.construction.max_tokens=768
    .venv/bin/python scripts/hingemem_stats.py report --run hingemem=results/runs/<run id> ...
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from hydra.utils import instantiate
from omegaconf import OmegaConf

from benchmarks.answering.context import render_context
from benchmarks.config.compose import compose_config
from benchmarks.config.services import backbone_config, embedder_config
from benchmarks.data import load_locomo
from benchmarks.data.paths import REPO_ROOT
from benchmarks.pipeline.memory_store import MemoryStore
from benchmarks.render import Table
from memsys.base import Services
from memsys.embed import Embedder, EmbeddingCache
from memsys.llm import Accounting, ResponseCache, build_backbone
from memsys.methods.hingemem import HingeMem
from memsys.tokens import TokenCounter

OUT = REPO_ROOT / "results" / "hingemem_stats"
REPORT = REPO_ROOT / "results" / "hingemem_stats.md"
#: papers/hingemem.txt, Table 4 (GPT-4o, LoCoMo, averages per conversation).
PAPER_TABLE4 = {"person": 12.8, "time": 59.6, "location": 34.6, "topic": 81.5, "hyperedges": 103.2}
COLUMNS = ("person", "time", "location", "topic", "hyperedges")
#: The stop table's per-question means printed without decimals, in its column order.
STOP_MEANS = ("adaptive_tokens", "fixed_k", "fixed_tokens")


def build(args: argparse.Namespace) -> None:
    cfg = compose_config([f"method={args.config}", *args.override])
    cache_dir = REPO_ROOT / cfg.cache_dir
    accounting = Accounting()
    backbone = None
    if cfg.method.extraction == "llm":
        cache = ResponseCache(cache_dir / "llm_responses.sqlite")
        backbone = build_backbone(
            backbone_config(cfg, "backbone"), cache=cache, accounting=accounting
        )
    embedder = Embedder(embedder_config(cfg), EmbeddingCache(cache_dir / "embeddings.sqlite"))
    tokens = TokenCounter()
    services = Services(
        embedder=embedder,
        tokens=tokens,
        backbone=backbone.with_stage("construction") if backbone else None,
    )
    system: HingeMem = instantiate(cfg.method, services=services, _convert_="partial")
    fixed = instantiate(
        cfg.method,
        services=services,
        retrieval={**OmegaConf.to_container(cfg.method.retrieval), "adaptive_stop": False},
        _convert_="partial",
    )
    store = MemoryStore(cache_dir / "memories")
    conversations = load_locomo()
    if args.conversations != "all":
        wanted = args.conversations.split(",")
        conversations = [c for c in conversations if c.conversation_id in wanted]
    if args.sessions is not None:  # questions then refer to missing turns: no retrieval stats
        conversations = [replace(c, sessions=c.sessions[: args.sessions]) for c in conversations]
        args.retrieval = False
    rows, questions = [], []
    for conversation in conversations:
        started = time.perf_counter()
        got = store.load_or_build(system, conversation)
        memory, loaded = got.memory, got.loaded
        rows.append(
            {
                "conversation_id": conversation.conversation_id,
                "sessions": len(conversation.sessions),
                "turns": len(conversation.turns),
                **system.statistics(memory),
                "loaded_from_cache": loaded,
                "seconds": round(time.perf_counter() - started, 2),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
        if not args.retrieval:
            continue
        system.prepare_queries(conversation.questions)
        for question in conversation.questions:
            trace = system.explain(memory, question)
            fixed_items = fixed.retrieve(memory, question).items
            adaptive_context = render_context(trace.items, tokens, args.budget)
            fixed_context = render_context(fixed_items, tokens, args.budget)
            questions.append(
                {
                    "question_id": question.question_id,
                    "category": question.category,
                    "query_type": trace.plan.query_type,
                    "plan_source": trace.plan.source,
                    "candidates": len(trace.ranked),
                    "kept": trace.kept,
                    "kept_in_budget": len(adaptive_context.items),
                    "adaptive_tokens": adaptive_context.tokens,
                    "fixed_k": len(fixed_items),
                    "fixed_tokens": fixed_context.tokens,
                }
            )
    OUT.mkdir(parents=True, exist_ok=True)
    scope = args.conversations.replace(",", "+")
    scope += f"-first{args.sessions}sessions" if args.sessions is not None else ""
    path = OUT / f"{args.config}-{scope}.json"
    payload = {
        "config": args.config,
        "overrides": args.override,
        "method": OmegaConf.to_container(cfg.method),
        "backbone": cfg.backbone.name if backbone else None,
        "budget": args.budget,
        "conversations": rows,
        "questions": questions,
        "accounting": accounting.summary(),
        "provenance": provenance(),
    }
    path.write_text(json.dumps(payload, indent=1, default=str))
    print(f"wrote {path.relative_to(REPO_ROOT)}")


def provenance() -> dict[str, Any]:
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "commit": commit,
        "python": platform.python_version(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def llm_outcomes(extraction: dict[str, Any]) -> tuple[int, int, int]:
    """Boundary-extraction replies used at the first try, after the retry, and the sessions
    that fell back to lite: from the extraction's ``ExtractionReport`` (``llm``), or from the
    counters a memory built before HingeMem's construction version 3 kept instead."""
    if "llm" in extraction:
        report = extraction["llm"]
        return report["accepted_first"], report["accepted_retry"], report["fallbacks"]
    return (
        extraction.get("llm_first_try", 0),
        extraction.get("llm_after_retry", 0),
        extraction.get("fallback_lite", 0),
    )


def memory_table(files: list[dict[str, Any]]) -> list[str]:
    header = ["source", "conversation", "sessions", "turns", "persons", "times", "locations"]
    header += ["topics", "hyperedges (before merge)"]
    header += ["LLM replies used (first try / after retry)", "lite fallbacks"]
    body: list[list[Any]] = []
    for data in files:
        label = data["config"] + (f" ({', '.join(data['overrides'])})" if data["overrides"] else "")
        rows = data["conversations"]
        for row in rows:
            extraction = row["stats"].get("extraction", {})
            llm, fallbacks = "-", "-"
            if extraction.get("mode") == "llm":
                first, retry, fallbacks = llm_outcomes(extraction)
                llm = f"{first} / {retry}"
            before = row["stats"].get("hyperedges_before_merge", "-")
            body.append(
                [label, row["conversation_id"], row["sessions"], row["turns"]]
                + [row[c] for c in COLUMNS[:-1]]
                + [f"{row['hyperedges']} ({before})", llm, fallbacks]
            )
        if len(rows) > 1:
            means = [f"{_mean([r[c] for r in rows]):.1f}" for c in COLUMNS]
            body.append([label, f"**mean of {len(rows)}**", "", "", *means, "", ""])
    paper = [PAPER_TABLE4[c] for c in COLUMNS]
    body.append(["paper Table 4 (GPT-4o)", "mean of 10", 27.2, 294.1, *paper, "", ""])
    return Table(header, body, align="llrrrrrrrlr").markdown_lines()


def stop_table(data: dict[str, Any]) -> list[str]:
    records = data["questions"]
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        groups[f"type: {record['query_type']}"].append(record)
        groups[f"category: {record['category']}"].append(record)
    groups["all"] = records
    header = ["group", "questions", "kept: mean", "median", "p90", "max"]
    header += ["shown within budget (mean)", "context tokens adaptive (mean)"]
    header += ["fixed top-k items", "context tokens fixed top-k (mean)"]
    body = []
    for name in sorted(groups, key=lambda g: (g != "all", g)):
        members = groups[name]
        kept = [r["kept"] for r in members]
        body.append(
            [
                name,
                len(members),
                f"{_mean(kept):.1f}",
                f"{np.median(kept):.0f}",
                f"{np.percentile(kept, 90):.0f}",
                max(kept),
                f"{_mean([r['kept_in_budget'] for r in members]):.1f}",
                *(f"{_mean([r[key] for r in members]):.0f}" for key in STOP_MEANS),
            ]
        )
    return Table(header, body, align="lrrrrrrrrr").markdown_lines()


def runs_table(runs: list[tuple[str, Path]]) -> list[str]:
    """One row per runner output folder: evidence recall and context size from ``metrics.json``."""
    header = ["config", "run", "questions", "evidence recall (95% CI)", "all evidence shown"]
    header += ["context tokens mean", "median"]
    body = []
    for label, run_dir in runs:
        metrics = json.loads((run_dir / "metrics.json").read_text())
        recall, tokens = metrics["evidence_recall"], metrics["context_tokens"]
        body.append(
            [
                label,
                f"`{run_dir.name}`",
                metrics["questions"],
                f"{recall['mean']:.4f} ({recall['ci95'][0]:.4f}-{recall['ci95'][1]:.4f})",
                f"{recall['all_retrieved_share']:.3f}",
                f"{tokens['mean']:.1f}",
                f"{tokens['median']:.0f}",
            ]
        )
    return Table(header, body, align="llrlrrr").markdown_lines()


def category_table(run_dir: Path) -> list[str]:
    """Per LoCoMo category, from the run's ``predictions.jsonl``."""
    records = [
        json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()
    ]
    by_category: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_category[record["category"]].append(record)
    header = ["category", "questions", "evidence recall", "context tokens (mean)"]
    header += ["items retrieved (mean)", "items shown (mean)"]
    body = []
    for category, members in sorted(by_category.items()):
        recalls = [r["evidence_recall"] for r in members if r["evidence_recall"] is not None]
        body.append(
            [
                category,
                len(members),
                f"{_mean(recalls):.4f}",
                f"{_mean([r['context_tokens'] for r in members]):.0f}",
                f"{_mean([r['retrieved_items'] for r in members]):.1f}",
                f"{_mean([r['context_items'] for r in members]):.1f}",
            ]
        )
    return Table(header, body, align="lrrrrr").markdown_lines()


def report(args: argparse.Namespace) -> None:
    files = [json.loads(path.read_text()) for path in sorted(OUT.glob("*.json"))]
    lines = [
        "# HingeMem: memory statistics and adaptive-stop context sizes",
        "",
        "Built by `scripts/hingemem_stats.py` from `results/hingemem_stats/*.json` "
        "(and the runner's output where named). Lite rows make no LLM call; llm rows use the "
        "configured backbone (SmolLM2-135M here: the point is the pipeline, parsing and fallbacks, "
        "not extraction quality).",
        "",
        "## Memory statistics (paper Table 4)",
        "",
        *memory_table(files),
    ]
    for data in files:
        if data["backbone"]:
            total = data["accounting"]["total"]
            lines += [
                "",
                f"## LLM construction: {data['config']} {' '.join(data['overrides'])}, "
                f"backbone {data['backbone']}",
                "",
                f"{total['calls']} calls ({total['cache_hits']} from cache, {total['failed']} failed), "
                f"{total['prompt_tokens']} prompt + {total['completion_tokens']} completion tokens, "
                f"{total['latency_s']:.0f} s of LLM time.",
                "",
                *(
                    f"- {row['conversation_id']} ({row['sessions']} sessions): "
                    f"`{json.dumps(row['stats'], sort_keys=True)}`"
                    for row in data["conversations"]
                ),
            ]
        if data["questions"]:
            lines += [
                "",
                f"## Adaptive stop vs fixed top-{data['method']['retrieval']['top_k']}: "
                f"{data['config']} on {len(data['conversations'])} conversation(s)",
                "",
                "`kept` = hyperedges the adaptive stop keeps (before the runner's "
                f"{data['budget']}-token budget); tokens = the rendered context within the budget.",
                "",
                *stop_table(data),
            ]
    runs = [
        (run.split("=", 1)[0], REPO_ROOT / run.split("=", 1)[1])
        if "=" in run
        else (run, REPO_ROOT / run)
        for run in args.run
    ]
    if runs:
        lines += [
            "",
            "## Runner summaries (`python -m benchmarks.pipeline.run method=<config> answer=none subset=full`)",
            "",
            *runs_table(runs),
            "",
            f"Per category, {runs[0][0]}:",
            "",
            *category_table(runs[0][1]),
        ]
    REPORT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    builder = commands.add_parser("build")
    builder.add_argument("--config", default="hingemem", help="conf/method/<config>.yaml")
    builder.add_argument("--conversations", default="all", help="comma-separated ids, or all")
    builder.add_argument("--override", action="append", default=[], help="Hydra override")
    builder.add_argument("--sessions", type=int, help="only the first N sessions of each")
    builder.add_argument("--retrieval", action="store_true", help="also record per-question stops")
    builder.add_argument("--budget", type=int, default=2048)
    reporter = commands.add_parser("report")
    reporter.add_argument(
        "--run", action="append", default=[], help="[label=]runner output folder; first = detailed"
    )
    args = parser.parse_args()
    build(args) if args.command == "build" else report(args)


if __name__ == "__main__":
    main()
