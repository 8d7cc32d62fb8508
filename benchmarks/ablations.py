"""The ablation-effect table: does every ablation change what the reader sees?

A paper's ablation removes one component; if removing it leaves the reader's context unchanged,
the harness is not running the component the paper describes (or the component does nothing on
this data), and either way the reader deserves to know. ``run`` runs every method's config and
each of its lite ablations and variants (the configs of its paper whose registry block names
the ``ablations`` grid: :mod:`benchmarks.registry`) retrieval only, as
``conf/ablations.yaml`` says; ``table`` reduces each run to one compact record per question (the
reader's context as turn ids in the order shown, its tokens, evidence recall) in
``results/ablations/<config>.jsonl.gz``, and from those alone writes ``results/ablations.json``
and ``results/ablations.md`` (so a test can rebuild the committed table from committed records).

    python -m benchmarks.ablations run [--methods cast,fracom] [--workers 2]
    python -m benchmarks.ablations table
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from benchmarks import registry
from benchmarks.data.paths import REPO_ROOT
from benchmarks.runlog import latest_records
from benchmarks.settings import CONF, compose_config

SPEC = CONF / "ablations.yaml"
OUT = REPO_ROOT / "results"
#: Below this share of changed contexts an ablation needs a written explanation.
EXPLAIN_BELOW = 0.05


@dataclass(frozen=True)
class Variant:
    """One row of the table: a method config, the method it varies, its overrides."""

    method: str
    config: str
    overrides: tuple[str, ...]
    description: str


def load_spec(path: Path = SPEC) -> dict[str, Any]:
    """``conf/ablations.yaml`` as plain data."""
    return yaml.safe_load(path.read_text())


def description(config: str) -> str:
    """The first sentence of a method YAML's opening comment: what the config is (one source of
    truth for the table and the config)."""
    lines = (CONF / "method" / f"{config}.yaml").read_text().splitlines()
    comment = []
    for line in lines:
        if not line.startswith("#") or line == registry.MARKER:
            break
        comment.append(line.lstrip("#").strip())
    text = " ".join(comment)
    return text.split(". ")[0].rstrip(".") + "." if text else ""


def variants(spec: dict[str, Any], methods: Sequence[str] | None = None) -> list[Variant]:
    """Every method of the spec, then the configs of its paper that the registry puts in the
    ``ablations`` grid, by name, skipped ones included."""
    rows = []
    for method, extra in spec["methods"].items():
        if methods and method not in methods:
            continue
        for name in registry.ablation_rows(method):
            overrides = (*spec["overrides"], f"method={name}", *extra)
            rows.append(Variant(method, name, tuple(overrides), description(name)))
    return rows


def compose_run(variant: Variant, extra: Sequence[str] = ()) -> Any:
    return compose_config([*variant.overrides, *extra])


def run_all(spec: dict[str, Any], methods: Sequence[str] | None, extra: Sequence[str]) -> None:
    """Run (or resume) every variant that can run here; write its compact records."""
    from benchmarks.run import run  # the runner pulls in every service; only `run` needs it

    for variant in variants(spec, methods):
        if variant.config in spec.get("skip", {}):
            print(f"skip {variant.config}: {spec['skip'][variant.config]}", file=sys.stderr)
            continue
        print(f"run {variant.config}", file=sys.stderr)
        summary = run(compose_run(variant, extra))
        write_records(variant, REPO_ROOT / summary["run_dir"], OUT / "ablations")


def write_records(variant: Variant, run_dir: Path, folder: Path) -> Path:
    """The run's records reduced to what the table needs, one line per question."""
    lines = (run_dir / "predictions.jsonl").read_text().splitlines()
    records = latest_records((json.loads(line) for line in lines if line.strip()), "question_id")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{variant.config}.jsonl.gz"
    header = {"config": variant.config, "run": run_dir.name, "overrides": list(variant.overrides)}
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.write(json.dumps(header) + "\n")
        for record in records.values():
            compact = {
                "question_id": record["question_id"],
                "category": record["category"],
                "context": record["retrieved_turn_ids"],
                "context_tokens": record["context_tokens"],
                "evidence_recall": record["evidence_recall"],
                **({"trace": record["trace"]} if record.get("trace") else {}),
            }
            out.write(json.dumps(compact) + "\n")
    return path


def read_records(path: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A compact record file: its header and its records by question id."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        header, *rows = [json.loads(line) for line in handle if line.strip()]
    return header, {row["question_id"]: row for row in rows}


def summarize(spec: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Per variant: evidence recall, context tokens, and the share of contexts changed."""
    rows = []
    own: dict[str, dict[str, dict[str, Any]]] = {}
    for variant in variants(spec):
        path = folder / f"{variant.config}.jsonl.gz"
        row: dict[str, Any] = {
            "method": variant.method,
            "config": variant.config,
            "description": variant.description,
        }
        if variant.config in spec.get("skip", {}):
            rows.append({**row, "status": "skipped", "note": spec["skip"][variant.config]})
            continue
        if not path.exists():
            rows.append({**row, "status": "not run", "note": "no records: run `make ablations`"})
            continue
        header, records = read_records(path)
        if variant.config == variant.method:
            own[variant.method] = records
        base = own.get(variant.method, {})
        recalls = [
            r["evidence_recall"] for r in records.values() if r["evidence_recall"] is not None
        ]
        shared = [q for q in records if q in base]
        changed = sum(records[q]["context"] != base[q]["context"] for q in shared)
        share = changed / len(shared) if shared and variant.config != variant.method else None
        row.update(
            status="run",
            run=header["run"],
            overrides=header["overrides"],
            questions=len(records),
            evidence_recall=round(sum(recalls) / len(recalls), 4) if recalls else None,
            context_tokens=round(
                sum(r["context_tokens"] for r in records.values()) / len(records), 1
            ),
            contexts_changed=None if share is None else round(share, 4),
        )
        depth = trace_summary(records.values())
        if depth:
            row["depth"] = depth
        explanation = spec.get("explanations", {}).get(variant.config)
        if share is not None and share < EXPLAIN_BELOW:
            row["note"] = explanation or "UNEXPLAINED: changes fewer than 5% of contexts"
        elif explanation:
            row["note"] = explanation
        rows.append(row)
    counts = {row.get("questions") for row in rows if row.get("status") == "run"}
    return {
        "overrides": spec["overrides"],
        "sample": spec["sample"],
        "questions": "/".join(str(c) for c in sorted(counts)) or "0",
        "explain_below": EXPLAIN_BELOW,
        "rows": rows,
    }


def _distribution(values: Sequence[float]) -> dict[str, float]:
    array = np.asarray(values, dtype=float)
    return {
        "mean": round(float(array.mean()), 3),
        "median": round(float(np.median(array)), 3),
        "p90": round(float(np.percentile(array, 90)), 3),
        "max": round(float(array.max()), 3),
    }


def trace_summary(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per trace ``group`` (and ``all``): questions and the distribution of every numeric trace
    field (HingeMem: candidate-set size and fraction, hyperedges kept, per query type)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if trace := record.get("trace"):
            groups.setdefault(str(trace.get("group", "all")), []).append(trace)
    if len(groups) > 1:  # one group is all there is: no separate "all"
        groups["all"] = [trace for traces in groups.values() for trace in traces]
    elif groups:
        groups = {"all": next(iter(groups.values()))}
    summary = {}
    for group, traces in sorted(groups.items()):
        fields = sorted(
            {k for t in traces for k, v in t.items() if isinstance(v, int | float) and k != "group"}
        )
        summary[group] = {
            "questions": len(traces),
            **{f: _distribution([float(t.get(f, 0)) for t in traces]) for f in fields},
        }
    return summary


def depth_markdown(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The retrieval-depth block: each traced config's distributions per group."""
    traced = [row for row in rows if row.get("depth")]
    if not traced:
        return []
    fields = sorted({f for row in traced for g in row["depth"].values() for f in g} - {"questions"})
    lines = [
        "",
        "## Retrieval depth (from each method's per-question trace)",
        "",
        "Each cell: mean / median / p90 / max over the group's questions. HingeMem: `candidates` "
        "is the candidate set routing (or, when nothing routes, the semantic neighbours) hands "
        "the rerank, `candidate_fraction` its share of all hyperedges, `kept` what the adaptive "
        "stop (or the fixed top-k) keeps, `routed` the share of questions routed by element "
        "nodes; groups are the plan's query types.",
        "",
        "| Config | Group | Questions | " + " | ".join(fields) + " |",
        "|---|---|---|" + "---|" * len(fields),
    ]
    for row in traced:
        for group, stats in row["depth"].items():
            cells = [
                " / ".join(f"{stats[f][k]:g}" for k in ("mean", "median", "p90", "max"))
                if f in stats
                else "—"
                for f in fields
            ]
            lines.append(
                f"| `{row['config']}` | {group} | {stats['questions']} | "
                + " | ".join(cells)
                + " |"
            )
    return lines


def to_markdown(summary: dict[str, Any]) -> str:
    """The table a reader checks: one block per method, its own config first."""
    lines = [
        "# Ablation effects (retrieval only, lite, LoCoMo)",
        "",
        f"- Sample: {summary['questions']} questions ({summary['sample']}); not the papers' "
        "setting (lite extraction, no reader)",
        f"- Runs: `{' '.join(summary['overrides'])}` plus each config's own overrides (CAST: "
        "`answer.order=rank`, its fused order reaches the reader)",
        "- Evidence recall: share of a question's evidence turns in the reader's context (adversarial "
        "questions included: this is retrieval, not answering)",
        "- Contexts changed: share of questions whose reader context (turn ids in the order the reader "
        "sees them) differs from the method's own config; an ablation below "
        f"{summary['explain_below']:.0%} must say why",
        "- Records: `results/ablations/<config>.jsonl.gz`; rebuild with `python -m benchmarks.ablations table`",
        "",
        "| Method | Config | What it is | Evidence recall | Context tokens | Contexts changed | Note |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in summary["rows"]:
        if row["status"] != "run":
            cells = ["—", "—", "—", f"{row['status']}: {row['note']}"]
        else:
            changed = row["contexts_changed"]
            cells = [
                f"{row['evidence_recall']:.3f}" if row["evidence_recall"] is not None else "—",
                f"{row['context_tokens']:.1f}",
                "(reference)" if changed is None else f"{changed:.1%}",
                row.get("note", ""),
            ]
        lines.append(
            f"| {row['method']} | `{row['config']}` | {row['description']} | "
            + " | ".join(cells)
            + " |"
        )
    lines += depth_markdown(summary["rows"])
    return "\n".join(lines) + "\n"


def build_table(spec: dict[str, Any], folder: Path, out: Path) -> dict[str, Any]:
    """Write ``<out>.json`` and ``<out>.md`` from the compact records in ``folder``."""
    summary = summarize(spec, folder)
    out.with_suffix(".json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    out.with_suffix(".md").write_text(to_markdown(summary))
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.ablations", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("command", choices=("run", "table"))
    parser.add_argument("--methods", default="", help="comma-separated methods (default: all)")
    parser.add_argument("--workers", type=int, default=1, help="processes constructing memories")
    parser.add_argument("overrides", nargs="*", help="extra config overrides for every run")
    args = parser.parse_intermixed_args(argv)
    spec = load_spec()
    methods = [m for m in args.methods.split(",") if m] or None
    if args.command == "run":
        run_all(spec, methods, [f"workers={args.workers}", "progress=false", *args.overrides])
    build_table(spec, OUT / "ablations", OUT / "ablations")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
