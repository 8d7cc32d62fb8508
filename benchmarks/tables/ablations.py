"""The ablation-effect table: does every ablation change what the reader sees?

If removing a paper's component leaves the reader's context unchanged, the harness is not running
the component the paper describes (or it does nothing on this data); either way the reader
deserves to know. The runs are ``memsys-bench run -m +experiment=ablations``'s sweep (each
method's own config and the configs of its paper in the registry's ``ablations`` grid, retrieval
only); this module reads their folder (:func:`benchmarks.runs.folders.load_runs`), puts each run
on its config's row and writes ``results/ablations.{json,md}``. A change is told apart as one of
the context's turn *set* or of its *order* alone: evidence recall counts a set, so an order-only
change (CAST's episodic half only reorders the semantic top-k) cannot move it.

    memsys-bench ablations [--runs results/ablations_runs] [--out results/ablations]
    memsys-bench ablations --sweep [--methods cast,fracom]   # the configs to run, for method=
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from benchmarks import registry
from benchmarks.config.compose import CONF, compose_config
from benchmarks.data.paths import REPO_ROOT, shown_path
from benchmarks.pipeline.settings import declared_context_order
from benchmarks.render import Document, Footnotes, Table
from benchmarks.runs.folders import ReportError, Run, in_repo, load_runs, lookup
from benchmarks.tables.notes import note
from benchmarks.tables.report.header import code_versions

SPEC = CONF / "ablations.yaml"
#: The Hydra overlay whose sweep is the table's runs (``conf/experiment/ablations.yaml``).
EXPERIMENT = "+experiment=ablations"
OUT = REPO_ROOT / "results" / "ablations"
#: Below this share of changed contexts (set or order) an ablation needs a written explanation.
EXPLAIN_BELOW = 0.05


@dataclass(frozen=True)
class Variant:
    """One row of the table: a method config, the method it varies, what it is."""

    method: str
    config: str
    description: str


def load_spec(path: Path = SPEC) -> dict[str, Any]:
    """``conf/ablations.yaml`` as plain data, with its ``methods``: each ``role: method`` config
    of the registry's ``ablations`` grid, in paper order."""
    spec = yaml.safe_load(path.read_text())
    found = registry.entries()
    spec["methods"] = [e.config for e in found if e.role == "method" and "ablations" in e.grids]
    return spec


def variants(spec: dict[str, Any], methods: Sequence[str] | None = None) -> list[Variant]:
    """Every method of the spec (or of ``methods``), then the other configs of its paper in the
    ``ablations`` grid, by name; each described by its registry block's ``about``."""
    about = {e.config: e.about for e in registry.entries()}
    chosen = [m for m in spec["methods"] if not methods or m in methods]
    return [Variant(m, c, about[c]) for m in chosen for c in registry.ablation_rows(m)]


def runs_by_config(runs_dir: Path) -> dict[str, Run]:
    """The finished runs of the overlay's setting under ``runs_dir``, by the config each ran
    (two runs of one config are an error: move the older aside)."""
    setting = compose_config([EXPERIMENT])
    where = {"subset.conversations": setting.subset.conversations, "answer.template": None}
    found: dict[str, Run] = {}
    for run in load_runs(runs_dir, setting.dataset.name, setting.subset.name, where):
        entry = registry.entry_of(run.config["method"])
        config = entry.config if entry else run.directory.name
        if config in found:
            twice = f"{found[config].directory.name} and {run.directory.name}"
            raise ReportError(f"{runs_dir}: runs {twice} both ran {config}; move one aside")
        found[config] = run
    return found


def contexts(run: Run) -> dict[str, list[str]]:
    """Each question's reader context as turn ids in the order shown."""
    return {str(r["question_id"]): r["retrieved_turn_ids"] for r in run.records}


def context_changes(
    mine: dict[str, list[str]], base: dict[str, list[str]]
) -> tuple[float, float] | None:
    """Over the questions both hold: the share whose context holds other turns than ``base``'s
    (a set change), and the share holding the same turns in another order (order only); None
    when they share no question.

    >>> context_changes({"q1": ["D2", "D1"], "q2": ["D4"]}, {"q1": ["D1", "D2"], "q2": ["D3"]})
    (0.5, 0.5)
    """
    pairs = [(mine[q], base[q]) for q in mine if q in base]
    if not pairs:
        return None
    moved = sum(set(a) != set(b) for a, b in pairs)
    reordered = sum(set(a) == set(b) and a != b for a, b in pairs)
    return moved / len(pairs), reordered / len(pairs)


def row_note(changes: tuple[float, float] | None, explanation: str | None) -> str | None:
    """The explanation a row owes (below :data:`EXPLAIN_BELOW` of contexts changed, set or
    order) or carries, after the order-only note where its changes are all of order."""
    notes = [note("ablations.order_only")] if changes and not changes[0] and changes[1] else []
    if changes is not None and sum(changes) < EXPLAIN_BELOW:
        notes.append(explanation or note("ablations.unexplained"))
    elif explanation:
        notes.append(explanation)
    return ". ".join(notes) or None


def mean(values: Sequence[float | None]) -> float | None:
    """The mean of the known values (a question without evidence has no recall); None for none."""
    known = [value for value in values if value is not None]
    return sum(known) / len(known) if known else None


def measured(run: Run, base: Run | None, explanation: str | None) -> dict[str, Any]:
    """A run's row: its means, unrounded (the markdown rounds each once), and against its
    method's own run (``base``; None for that run itself) the shares of changed contexts."""
    records = run.records
    changes = None if base is None else context_changes(contexts(run), contexts(base))
    row = {
        "status": "run",
        "run": run.directory.name,
        "questions": len(records),
        "evidence_recall": mean([r["evidence_recall"] for r in records]),
        "evidence_recall_all_retrieved": mean(
            [r.get("evidence_recall_all_retrieved") for r in records]
        ),
        "context_tokens": mean([r["context_tokens"] for r in records]),
        "set_changed": None if changes is None else changes[0],
        "order_only": None if changes is None else changes[1],
        "depth": trace_summary(records),
        "note": None if base is None else row_note(changes, explanation),
    }
    return {key: value for key, value in row.items() if value not in (None, {})}


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
            why = spec.get("explanations", {}).get(variant.config)
            row |= measured(runs[variant.config], base, why)
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


def shown_order(run: Run) -> str:
    """The order a run showed its contexts in: its ``answer.order`` (a run's config leaves out
    the default, ``method``: the order its class declares)."""
    order = lookup(run.config, "answer.order", "method")
    return declared_context_order(run.config["method"]["_target_"]) if order == "method" else order


def trace_summary(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per trace ``group`` (and ``all`` over several): questions and the mean / median / p90 /
    max of every numeric trace field (HingeMem: candidate-set size, hyperedges kept)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for trace in (record["trace"] for record in records if record.get("trace")):
        groups.setdefault(str(trace.get("group", "all")), []).append(trace)
    if len(groups) > 1:
        groups["all"] = [trace for traces in groups.values() for trace in traces]
    elif groups:
        groups = {"all": next(iter(groups.values()))}
    summary = {}
    for group, traces in sorted(groups.items()):
        numeric = {k for t in traces for k, v in t.items() if isinstance(v, int | float)}
        summary[group] = {"questions": len(traces)}
        for field in sorted(numeric - {"group"}):
            array = np.asarray([float(t.get(field, 0)) for t in traces])
            stats = (array.mean(), np.median(array), np.percentile(array, 90), array.max())
            summary[group][field] = [round(float(value), 3) for value in stats]
    return summary


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
