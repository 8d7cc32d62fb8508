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
A change is told apart as a change of the context's turn *set* or of its *order* alone: evidence
recall counts a set, so an order-only change (CAST's episodic half, which Algorithm 2 lets only
reorder the semantic top-k) cannot move it, and only a reader can show its effect.

    python -m benchmarks.tables.ablations run [--methods cast,fracom] [--configs fracom_theta08] [--workers 2]
    python -m benchmarks.tables.ablations table
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
from benchmarks.config.compose import CONF, compose_config
from benchmarks.data.paths import REPO_ROOT
from benchmarks.pipeline.runlog import latest_records
from benchmarks.pipeline.settings import context_order
from benchmarks.render import Document, Footnotes, Table
from benchmarks.tables.notes import note

SPEC = CONF / "ablations.yaml"
OUT = REPO_ROOT / "results"
#: Below this share of changed contexts (set or order) an ablation needs a written explanation.
EXPLAIN_BELOW = 0.05
#: The note on a row whose changes are all of order: what evidence recall cannot show.
ORDER_ONLY_NOTE = note("ablations.order_only")


@dataclass(frozen=True)
class Variant:
    """One row of the table: a method config, the method it varies, its overrides."""

    method: str
    config: str
    overrides: tuple[str, ...]
    description: str


def load_spec(path: Path = SPEC) -> dict[str, Any]:
    """``conf/ablations.yaml`` as plain data, with its ``methods``: each ``role: method`` config
    of the registry's ``ablations`` grid (:func:`benchmarks.registry.members`, paper order) and
    the overrides its rows take beside the spec's (its ``method_overrides``, none by default)."""
    spec = yaml.safe_load(path.read_text())
    extra = spec.pop("method_overrides", None) or {}
    methods = [
        e.config for e in registry.entries() if e.role == "method" and "ablations" in e.grids
    ]
    unknown = sorted(set(extra) - set(methods))
    if unknown:
        raise ValueError(f"{path}: method_overrides names {unknown}, not methods of the table")
    spec["methods"] = {method: list(extra.get(method, [])) for method in methods}
    return spec


def description(config: str) -> str:
    """The ``about`` sentence of a method YAML's registry block: what the config is (one source
    of truth for the table and the config)."""
    return registry.entry(CONF / "method" / f"{config}.yaml").about


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


def run_all(
    spec: dict[str, Any],
    methods: Sequence[str] | None,
    extra: Sequence[str],
    configs: Sequence[str] | None = None,
) -> None:
    """Run (or resume) every variant that can run here (or only ``configs``); write its compact
    records."""
    from benchmarks.pipeline.run import (
        run,  # the runner pulls in every service; only `run` needs it
    )

    chosen = variants(spec, methods)
    unknown = set(configs or ()) - {variant.config for variant in chosen}
    if unknown:
        raise SystemExit(f"error: --configs names no ablation row: {', '.join(sorted(unknown))}")
    for variant in chosen:
        if configs and variant.config not in configs:
            continue
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
                "evidence_recall_all_retrieved": record.get("evidence_recall_all_retrieved"),
                **({"trace": record["trace"]} if record.get("trace") else {}),
            }
            out.write(json.dumps(compact) + "\n")
    return path


def read_records(path: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A compact record file: its header and its records by question id."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        header, *rows = [json.loads(line) for line in handle if line.strip()]
    return header, {row["question_id"]: row for row in rows}


def context_changes(
    records: dict[str, dict[str, Any]], base: dict[str, dict[str, Any]]
) -> tuple[float, float] | None:
    """Over the questions both record sets hold: the share whose context holds other turns than
    ``base``'s (a set change), and the share holding the same turns in another order (order
    only); None when they share no question.

    >>> base = {"q1": {"context": ["D1", "D2"]}, "q2": {"context": ["D3"]}}
    >>> context_changes({"q1": {"context": ["D2", "D1"]}, "q2": {"context": ["D4"]}}, base)
    (0.5, 0.5)
    """
    shared = [q for q in records if q in base]
    if not shared:
        return None
    mine = [(records[q]["context"], base[q]["context"]) for q in shared]
    moved = sum(set(a) != set(b) for a, b in mine)
    reordered = sum(set(a) == set(b) and a != b for a, b in mine)
    return moved / len(shared), reordered / len(shared)


def row_note(changes: tuple[float, float] | None, explanation: str | None) -> str | None:
    """The explanation a row owes (below :data:`EXPLAIN_BELOW` of contexts changed, set or
    order) or carries, after :data:`ORDER_ONLY_NOTE` where its changes are all of order."""
    notes = []
    if changes is not None and changes[0] == 0 and changes[1] > 0:
        notes.append(ORDER_ONLY_NOTE)
    if changes is not None and sum(changes) < EXPLAIN_BELOW:
        notes.append(explanation or note("ablations.unexplained"))
    elif explanation:
        notes.append(explanation)
    return ". ".join(notes) or None


def method_orders(spec: dict[str, Any]) -> dict[str, str]:
    """The order each method's contexts are shown in, as its own config's run resolves it
    (``answer.order=method``: the order its class declares)."""
    return {
        method: context_order(compose_config([*spec["overrides"], f"method={method}", *extra]))
        for method, extra in spec["methods"].items()
    }


def summarize(spec: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Per variant: evidence recall, context tokens, and the shares of contexts whose turn set
    changed or whose order alone did."""
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
            rows.append({**row, "status": "not run", "note": note("ablations.not_run")})
            continue
        header, records = read_records(path)
        if variant.config == variant.method:
            own[variant.method] = records
        changes = (
            None
            if variant.config == variant.method
            else context_changes(records, own.get(variant.method, {}))
        )
        recalls = known(r["evidence_recall"] for r in records.values())
        before_budget = known(r.get("evidence_recall_all_retrieved") for r in records.values())
        row.update(
            status="run",
            run=header["run"],
            overrides=header["overrides"],
            questions=len(records),
            evidence_recall=rounded_mean(recalls),
            # records written before the field was kept have none: "—", not a partial mean
            evidence_recall_all_retrieved=rounded_mean(before_budget)
            if len(before_budget) == len(recalls)
            else None,
            context_tokens=round(
                sum(r["context_tokens"] for r in records.values()) / len(records), 1
            ),
            set_changed=None if changes is None else round(changes[0], 4),
            order_only=None if changes is None else round(changes[1], 4),
        )
        depth = trace_summary(records.values())
        if depth:
            row["depth"] = depth
        explained = row_note(changes, spec.get("explanations", {}).get(variant.config))
        if explained:
            row["note"] = explained
        rows.append(row)
    counts = {row.get("questions") for row in rows if row.get("status") == "run"}
    return {
        "overrides": spec["overrides"],
        "sample": spec["sample"],
        "questions": "/".join(str(c) for c in sorted(counts)) or "0",
        "explain_below": EXPLAIN_BELOW,
        "context_orders": method_orders(spec),
        "traces": spec.get("traces", {}),
        "rows": rows,
    }


def known(values: Iterable[float | None]) -> list[float]:
    """The values that are not None (a question without evidence has no recall)."""
    return [value for value in values if value is not None]


def rounded_mean(values: Sequence[float]) -> float | None:
    """The mean to 4 places, as the ablation records keep it; None for no values."""
    return round(sum(values) / len(values), 4) if values else None


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


def depth_blocks(
    rows: Sequence[dict[str, Any]], legends: dict[str, str]
) -> list[Table | list[str]]:
    """The retrieval-depth section: per method, its traced configs' distributions per group,
    under the method's legend (``conf/ablations.yaml``'s ``traces``)."""
    traced = [row for row in rows if row.get("depth")]
    if not traced:
        return []
    blocks: list[Table | list[str]] = [
        [f"## {note('ablations.depth_title')}", "", note("ablations.depth_caption")]
    ]
    for method in dict.fromkeys(row["method"] for row in traced):
        rows_of = [row for row in traced if row["method"] == method]
        fields = sorted(
            {f for row in rows_of for g in row["depth"].values() for f in g} - {"questions"}
        )
        body = [
            [
                f"`{row['config']}`",
                group,
                stats["questions"],
                *(
                    " / ".join(f"{stats[f][k]:g}" for k in ("mean", "median", "p90", "max"))
                    if f in stats
                    else "—"
                    for f in fields
                ),
            ]
            for row in rows_of
            for group, stats in row["depth"].items()
        ]
        legend = [legends[method]] if method in legends else []
        table = Table(["Config", "Group", "Questions", *fields], body, title=method, caption=legend)
        blocks.append(table.markdown_lines(level=3))
    return blocks


def orders_note(orders: dict[str, str]) -> str:
    """The note on context order: which methods' contexts are shown in which order."""
    by_order: dict[str, list[str]] = {}
    for method, order in orders.items():
        by_order.setdefault(order, []).append(method)
    shown = "; ".join(f"{order} for {', '.join(methods)}" for order, methods in by_order.items())
    return note("ablations.order", shown=shown)


def footnotes(summary: dict[str, Any]) -> Footnotes:
    """The notes after the table, each under the key its column headers mark."""
    changes = note("ablations.changes", explain=summary["explain_below"])
    plain = ("evidence", "retrieved", "tokens")
    return Footnotes(
        [
            ("order", orders_note(summary["context_orders"])),
            *((key, note(f"ablations.{key}")) for key in plain),
            ("changes", changes),
            ("records", note("ablations.records")),
        ]
    )


def to_markdown(summary: dict[str, Any]) -> str:
    """The table a reader checks: one block per method, its own config first; the setting in
    one line under the title, the rest in numbered notes after the tables."""
    notes = footnotes(summary)
    setting = note(
        "ablations.setting",
        questions=summary["questions"],
        sample=summary["sample"],
        overrides=" ".join(summary["overrides"]),
    )
    blocks = [effects_table(summary["rows"], notes)]
    blocks += depth_blocks(summary["rows"], summary.get("traces", {}))
    return Document(note("ablations.title"), [setting], blocks, notes).to_markdown()


def effects_table(rows: Sequence[dict[str, Any]], notes: Footnotes) -> Table:
    """One row per config: what the reader's context holds, and how much of it changed
    (``notes``: the footnotes its headers mark)."""
    mark = notes.mark
    header = [f"Method{mark('order')}", "Config", "What it is", f"Ev. recall{mark('evidence')}"]
    header += [f"All retrieved{mark('retrieved')}", f"Ctx tok{mark('tokens')}"]
    header += [f"Set changed{mark('changes')}", f"Order only{mark('changes')}", "Note"]
    body = []
    for row in rows:
        if row["status"] != "run":
            cells = ["—", "—", "—", "—", "—", f"{row['status']}: {row['note']}"]
        else:
            reference = row["set_changed"] is None
            cells = [
                *(
                    "—" if row.get(key) is None else f"{row[key]:.3f}"
                    for key in ("evidence_recall", "evidence_recall_all_retrieved")
                ),
                f"{row['context_tokens']:.1f}",
                "(reference)" if reference else f"{row['set_changed']:.1%}",
                "(reference)" if reference else f"{row['order_only']:.1%}",
                row.get("note", ""),
            ]
        body.append([row["method"], f"`{row['config']}`", row["description"], *cells])
    return Table(header, body)


def build_table(spec: dict[str, Any], folder: Path, out: Path) -> dict[str, Any]:
    """Write ``<out>.json`` and ``<out>.md`` from the compact records in ``folder``."""
    summary = summarize(spec, folder)
    out.with_suffix(".json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    out.with_suffix(".md").write_text(to_markdown(summary))
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.tables.ablations", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("command", choices=("run", "table"))
    parser.add_argument("--methods", default="", help="comma-separated methods (default: all)")
    parser.add_argument(
        "--configs", default="", help="comma-separated rows to (re)run (default: all)"
    )
    parser.add_argument("--workers", type=int, default=1, help="processes constructing memories")
    parser.add_argument("overrides", nargs="*", help="extra config overrides for every run")
    args = parser.parse_intermixed_args(argv)
    spec = load_spec()
    methods = [m for m in args.methods.split(",") if m] or None
    if args.command == "run":
        configs = [c for c in args.configs.split(",") if c] or None
        extra = [f"workers={args.workers}", "progress=false", *args.overrides]
        run_all(spec, methods, extra, configs)
    build_table(spec, OUT / "ablations", OUT / "ablations")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
