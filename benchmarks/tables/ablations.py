"""The ablation-effect table: does every ablation change what the reader sees?

If removing a component leaves the reader's context unchanged, the harness is not running what
the paper describes (or it does nothing on this data). A change is one of the context's turn
*set* or of its *order* alone (evidence recall cannot see the latter): docs/tables.md, "Ablations".

    memsys-bench ablations [--runs results/ablations_runs] [--out results/ablations]
    memsys-bench ablations --sweep [--methods cast,fracom]   # the configs to run, for method="""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.config.compose import compose_config
from benchmarks.data.paths import REPO_ROOT, shown_path
from benchmarks.render import Document, Footnotes, Table
from benchmarks.runs.ablations import (
    EXPERIMENT,
    load_spec,
    measured,
    runs_by_config,
    shown_order,
    variants,
)
from benchmarks.runs.folders import Run, in_repo
from benchmarks.tables.notes import note
from benchmarks.tables.report.header import code_versions

OUT = REPO_ROOT / "results" / "ablations"
#: Below this share of changed contexts (set or order) an ablation needs a written explanation.
EXPLAIN_BELOW = 0.05


def row_note(changes: tuple[float, float] | None, explanation: str | None) -> str | None:
    """The explanation a row owes (below :data:`EXPLAIN_BELOW` of contexts changed, set or
    order) or carries, after the order-only note where its changes are all of order."""
    notes = [note("ablations.order_only")] if changes and not changes[0] and changes[1] else []
    if changes is not None and sum(changes) < EXPLAIN_BELOW:
        notes.append(explanation or note("ablations.unexplained"))
    elif explanation:
        notes.append(explanation)
    return ". ".join(notes) or None


def summarize(spec: dict[str, Any], runs: dict[str, Run]) -> dict[str, Any]:
    """Per row of :func:`variants`: its run's measures, or why it has none."""
    rows = []
    for variant in variants(spec):
        row: dict[str, Any] = {
            "method": variant.method,
            "config": variant.config,
            "description": variant.description,
        }
        if variant.config in runs:
            base = None if variant.config == variant.method else runs.get(variant.method)
            row |= measured(runs[variant.config], base)
            changes = (row["set_changed"], row["order_only"]) if "set_changed" in row else None
            why = spec.get("explanations", {}).get(variant.config)
            if base is not None and (said := row_note(changes, why)):
                row["note"] = said
        elif variant.config in spec.get("skip", {}):
            row |= {"status": "skipped", "note": spec["skip"][variant.config]}
        else:
            row |= {"status": "not run", "note": note("ablations.not_run")}
        rows.append(row)
    orders = {method: shown_order(runs[method]) for method in spec["methods"] if method in runs}
    counts = sorted({row["questions"] for row in rows if row["status"] == "run"})
    return {
        "sample": spec["sample"],
        "questions": "/".join(map(str, counts)) or "0",
        "code": code_versions(list(runs.values())),
        "explain_below": EXPLAIN_BELOW,
        "context_orders": orders,
        "traces": spec.get("traces", {}),
        "rows": rows,
    }


def depth_blocks(rows: Sequence[dict[str, Any]], legends: dict[str, str]) -> list[list[str]]:
    """Per method with traced configs, their distributions per group under the method's legend
    (``conf/ablations.yaml``'s ``traces``)."""
    traced = [row for row in rows if row.get("depth")]
    blocks = [[f"## {note('ablations.depth_title')}", "", note("ablations.depth_caption")]]
    for method in dict.fromkeys(row["method"] for row in traced):
        mine = [row for row in traced if row["method"] == method]
        fields = sorted({f for r in mine for g in r["depth"].values() for f in g} - {"questions"})
        body = [
            [f"`{row['config']}`", group, stats["questions"]]
            + [" / ".join(f"{v:g}" for v in stats[f]) if f in stats else "—" for f in fields]
            for row in mine
            for group, stats in row["depth"].items()
        ]
        caption = [legends[method]] if method in legends else []
        header = ["Config", "Group", "Questions", *fields]
        blocks.append(Table(header, body, title=method, caption=caption).markdown_lines(level=3))
    return blocks if traced else []


def to_markdown(summary: dict[str, Any], runs_dir: str) -> str:
    """One block per method, its own config first; the setting in one line under the title,
    the rest in numbered notes after the tables."""
    by_order: dict[str, list[str]] = {}
    for method, order in summary["context_orders"].items():
        by_order.setdefault(order, []).append(method)
    shown = "; ".join(f"{order} for {', '.join(found)}" for order, found in by_order.items())
    notes = Footnotes(
        [
            ("order", note("ablations.order", shown=shown)),
            *((key, note(f"ablations.{key}")) for key in ("evidence", "retrieved", "tokens")),
            ("changes", note("ablations.changes", explain=summary["explain_below"])),
            ("runs", note("ablations.runs", runs=runs_dir)),
        ]
    )
    setting = note(
        "ablations.setting",
        questions=summary["questions"],
        sample=summary["sample"],
        code=summary["code"],
    )
    blocks = [effects_table(summary["rows"], notes)]
    blocks += depth_blocks(summary["rows"], summary["traces"])
    return Document(note("ablations.title"), [setting], blocks, notes).to_markdown()


def effects_table(rows: Sequence[dict[str, Any]], notes: Footnotes) -> Table:
    """One row per config: what the reader's context holds, and how much of it changed."""
    mark = notes.mark
    header = [f"Method{mark('order')}", "Config", "What it is", f"Run{mark('runs')}"]
    header += [f"Ev. recall{mark('evidence')}", f"All retrieved{mark('retrieved')}"]
    header += [f"Ctx tok{mark('tokens')}", f"Set changed{mark('changes')}"]
    header += [f"Order only{mark('changes')}", "Note"]
    body = []
    for row in rows:
        cells = [row.get("run", "—")]
        if row["status"] != "run":
            cells += ["—"] * 5 + [f"{row['status']}: {row['note']}"]
        else:
            recalls = (row.get(k) for k in ("evidence_recall", "evidence_recall_all_retrieved"))
            cells += ["—" if value is None else f"{value:.3f}" for value in recalls]
            cells.append(f"{row['context_tokens']:.1f}")
            for share in (row.get("set_changed"), row.get("order_only")):
                unknown = "(reference)" if row["config"] == row["method"] else "—"
                cells.append(unknown if share is None else f"{share:.1%}")
            cells.append(row.get("note", ""))
        body.append([row["method"], f"`{row['config']}`", row["description"], *cells])
    return Table(header, body)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="memsys-bench ablations", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=Path, help="run folder (default: the overlay's)")
    parser.add_argument("--out", type=Path, default=OUT, help="written as .json and .md")
    parser.add_argument("--methods", default="", help="comma-separated methods (default: all)")
    parser.add_argument(
        "--sweep", action="store_true", help="print the configs to run (skips left out) and stop"
    )
    args = parser.parse_args(argv)
    spec = load_spec()
    if args.sweep:
        chosen = variants(spec, [m for m in args.methods.split(",") if m] or None)
        print(",".join(v.config for v in chosen if v.config not in spec.get("skip", {})))
        return 0
    runs_dir = in_repo(args.runs or Path(compose_config([EXPERIMENT]).results_dir))
    summary = summarize(spec, runs_by_config(runs_dir))
    args.out.with_suffix(".json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    args.out.with_suffix(".md").write_text(to_markdown(summary, shown_path(runs_dir)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
