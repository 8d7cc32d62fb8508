"""Graph statistics and construction cost of the FraCom and CAST memories.

``build`` constructs each method's memory per conversation from its Hydra config
(``conf/method/{fracom,cast}*.yaml``), timed, with a fresh in-memory embedding cache (so the
seconds include every embedding the construction needs: a cold build) and, in ``llm`` mode, a
fresh response cache and the configured backbone (so calls and tokens are real). It writes one
JSON file per (method, mode, scope) under ``results/graph_stats/``. ``report`` renders
``results/graph_stats.md`` from those files only.

    .venv/bin/python scripts/graph_stats.py build --mode lite                       # all LoCoMo
    .venv/bin/python scripts/graph_stats.py build --mode lite --conversations conv-26 --sessions 3
    .venv/bin/python scripts/graph_stats.py build --mode llm --conversations conv-26 --sessions 3
    .venv/bin/python scripts/graph_stats.py report
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from hydra.utils import instantiate

from benchmarks.config.compose import compose_config
from benchmarks.config.services import backbone_config, embedder_config
from benchmarks.data import load_locomo
from benchmarks.data.paths import REPO_ROOT
from benchmarks.render import Table
from memsys.base import Services
from memsys.embed import Embedder, EmbeddingCache
from memsys.llm import Accounting, ResponseCache, build_backbone
from memsys.types import Conversation

OUT = REPO_ROOT / "results" / "graph_stats"
REPORT = REPO_ROOT / "results" / "graph_stats.md"
METHODS = {
    "fracom": {"lite": "fracom", "llm": "fracom_llm"},
    "cast": {"lite": "cast", "llm": "cast_llm"},
}


def truncated(conversation: Conversation, sessions: int | None) -> Conversation:
    """The conversation's first ``sessions`` sessions (all when ``None``)."""
    if sessions is None:
        return conversation
    return dataclasses.replace(conversation, sessions=conversation.sessions[:sessions])


def build(args: argparse.Namespace) -> None:
    conversations = load_locomo()
    if args.conversations != "all":
        wanted = set(args.conversations.split(","))
        conversations = [c for c in conversations if c.conversation_id in wanted]
    scope = "all" if args.conversations == "all" else args.conversations.replace(",", "+")
    if args.sessions is not None:
        scope += f"-first{args.sessions}sessions"
    for method in args.methods.split(","):
        config_name = METHODS[method][args.mode]
        cfg = compose_config([f"method={config_name}", f"backbone={args.backbone}"])
        rows = []
        with tempfile.TemporaryDirectory() as folder:
            accounting = Accounting()
            backbone = None
            if args.mode == "llm":
                cache = ResponseCache(Path(folder) / "llm.sqlite")
                backbone = build_backbone(
                    backbone_config(cfg, "backbone"), cache=cache, accounting=accounting
                )
            for conversation in conversations:
                conversation = truncated(conversation, args.sessions)
                embedder = Embedder(embedder_config(cfg), EmbeddingCache())
                services = Services(
                    embedder=embedder,
                    tokens=None,  # type: ignore[arg-type]
                    backbone=backbone.with_stage("construction") if backbone else None,
                )
                system = instantiate(cfg.method, services=services, _convert_="partial")
                before = len(accounting.records())
                started = time.perf_counter()
                memory = system.construct(conversation)
                seconds = time.perf_counter() - started
                calls = accounting.records()[before:]
                row = {
                    "conversation": conversation.conversation_id,
                    "sessions": len(conversation.sessions),
                    "turns": len(conversation.turns),
                    "seconds": round(seconds, 2),
                    "texts_embedded": embedder.texts_encoded,
                    "llm_calls": len(calls),
                    "prompt_tokens": sum(c.prompt_tokens for c in calls),
                    "completion_tokens": sum(c.completion_tokens for c in calls),
                    "llm_seconds": round(sum(c.latency_s for c in calls), 2),
                    "statistics": memory.statistics(),
                }
                if method == "fracom":
                    row["propositions_by_source"] = _count(p.source for p in memory.propositions)
                else:
                    row["scenes"] = len(memory.scenes)
                    row["summaries_by_source"] = _count(s.summary_source for s in memory.scenes)
                    row["mean_messages_per_scene"] = round(
                        sum(len(s.positions) for s in memory.scenes) / max(1, len(memory.scenes)), 2
                    )
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "statistics"}), flush=True)
        OUT.mkdir(parents=True, exist_ok=True)
        result = {
            "method": method,
            "config": config_name,
            "mode": args.mode,
            "scope": scope,
            "backbone": cfg.backbone.name if args.mode == "llm" else None,
            "machine": f"{platform.machine()}, Python {platform.python_version()}",
            "created": time.strftime("%Y-%m-%d %H:%M:%S"),
            "conversations": rows,
        }
        path = OUT / f"{method}-{args.mode}-{scope}.json"
        path.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {path.relative_to(REPO_ROOT)}")


def _count(values: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items()))


def report(_: argparse.Namespace) -> None:
    results = [json.loads(p.read_text()) for p in sorted(OUT.glob("*.json"))]
    lines = [
        "# FraCom and CAST: graph statistics and construction cost",
        "",
        "Built by `scripts/graph_stats.py report` from `results/graph_stats/*.json` (written by",
        "`scripts/graph_stats.py build`). Seconds are wall time of `construct` on a cold",
        "embedding cache (every text the construction embeds is embedded), on a shared 2-core",
        "machine; LLM calls, tokens and seconds come from the backbone's accounting (fresh",
        "response cache). Lite mode makes no LLM call.",
        "",
    ]
    for result in results:
        lines += [f"## {result['method']} — {result['mode']} — {result['scope']}", ""]
        header = f"config `{result['config']}`"
        if result["backbone"]:
            header += f", construction backbone `{result['backbone']}`"
        lines += [header + f"; {result['machine']}; {result['created']}.", ""]
        rows = result["conversations"]
        lines += (_fracom_table if result["method"] == "fracom" else _cast_table)(rows)
        if result["mode"] == "llm":
            lines += _llm_table(result["method"], rows)
        lines.append("")
    REPORT.write_text("\n".join(lines))
    print(f"wrote {REPORT.relative_to(REPO_ROOT)}")


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """A markdown table, numeric columns right-aligned; with several rows, a last row of the
    numeric columns' means."""
    numeric = [isinstance(c, int | float) for c in rows[0]] if rows else []
    body = list(rows)
    if len(rows) > 1:
        means = [
            f"{sum(r[i] for r in rows) / len(rows):.1f}"
            if all(isinstance(r[i], int | float) for r in rows)
            else ""
            for i in range(len(header))
        ]
        body.append(["**mean**", *means[1:]])
    align = "".join("r" if number else "l" for number in numeric)
    return Table(header, body, align=align).markdown_lines()


def _fracom_table(rows: list[dict[str, Any]]) -> list[str]:
    header = [
        "conversation", "sessions", "turns", "proposition nodes", "predicate nodes",
        "argument nodes", "prop–pred edges", "prop–arg edges", "sources", "seconds",
        "texts embedded",
    ]  # fmt: skip
    cells = []
    for row in rows:
        nodes, edges = row["statistics"]["nodes"], row["statistics"]["edges"]
        sources = ", ".join(f"{k} {v}" for k, v in row["propositions_by_source"].items())
        cells.append(
            [
                row["conversation"],
                row["sessions"],
                row["turns"],
                nodes.get("proposition", 0),
                nodes.get("predicate", 0),
                nodes.get("argument", 0),
                edges.get("predicate", 0),
                edges.get("argument", 0),
                sources,
                row["seconds"],
                row["texts_embedded"],
            ]
        )
    return _table(header, cells)


def _cast_table(rows: list[dict[str, Any]]) -> list[str]:
    header = [
        "conversation", "turns", "passage nodes", "phrase nodes", "contains edges",
        "relation edges", "synonym edges", "scenes", "scenes per speaker",
        "mentioned persons", "their scenes", "msgs/scene", "summaries", "seconds",
        "texts embedded",
    ]  # fmt: skip
    cells = []
    for row in rows:
        stats = row["statistics"]
        nodes, edges, characters = stats["nodes"], stats["edges"], stats["characters"]
        speakers = {name: roles for name, roles in characters.items() if roles.get("main")}
        mentioned = {name: roles for name, roles in characters.items() if name not in speakers}
        per_speaker = ", ".join(
            f"{name} {sum(roles.values())}" for name, roles in sorted(speakers.items())
        )
        summaries = ", ".join(f"{k} {v}" for k, v in row["summaries_by_source"].items())
        cells.append(
            [
                row["conversation"],
                row["turns"],
                nodes.get("passage", 0),
                nodes.get("phrase", 0),
                edges.get("contains", 0),
                edges.get("relation", 0),
                edges.get("synonym", 0),
                row["scenes"],
                per_speaker,
                len(mentioned),
                sum(sum(roles.values()) for roles in mentioned.values()),
                row["mean_messages_per_scene"],
                summaries,
                row["seconds"],
                row["texts_embedded"],
            ]
        )
    return _table(header, cells)


def _llm_table(method: str, rows: list[dict[str, Any]]) -> list[str]:
    header = [
        "conversation", "stage", "units", "LLM calls", "accepted 1st", "retried",
        "accepted on retry", "fallbacks to lite", "parse outcomes", "prompt tokens",
        "completion tokens", "LLM seconds",
    ]  # fmt: skip
    body = []
    for row in rows:
        report = row["statistics"]["report"]
        stages = {"fragment": report} if method == "fracom" else report["llm"]
        for stage, numbers in stages.items():
            parse = ", ".join(f"{k} {v}" for k, v in numbers["parse"].items())
            body.append(
                [
                    row["conversation"],
                    stage,
                    *(numbers[key] for key in ("units", "calls", "accepted_first", "retried")),
                    numbers["accepted_retry"],
                    numbers["fallbacks"],
                    parse,
                    *(numbers[key] for key in ("prompt_tokens", "completion_tokens", "seconds")),
                ]
            )
    return ["", *Table(header, body, align="llrrrrrrlrrr").markdown_lines()]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("build", help="construct memories and write their statistics")
    make.add_argument("--mode", choices=("lite", "llm"), default="lite")
    make.add_argument("--methods", default="fracom,cast")
    make.add_argument("--conversations", default="all", help="'all' or comma-separated ids")
    make.add_argument("--sessions", type=int, default=None, help="only the first N sessions")
    make.add_argument("--backbone", default="embedded", help="conf/backbone/<name>.yaml (llm mode)")
    make.set_defaults(run=build)
    commands.add_parser("report", help="render results/graph_stats.md").set_defaults(run=report)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
