"""The ablation runs as data: the table's rows (each method's own config, then the configs of its
paper in the registry's ``ablations`` grid, ``conf/ablations.yaml``'s spec), the run of each row
(the sweep of ``memsys-bench run -m +experiment=ablations``), and what a run's contexts hold
against its method's own: the shares whose turn *set* changed and whose *order* alone did, and
the distributions of its retrieval traces. The ablation table
(:mod:`benchmarks.tables.ablations`) lays them out and words them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from benchmarks import registry
from benchmarks.config.compose import CONF, compose_config
from benchmarks.pipeline.settings import declared_context_order
from benchmarks.runs.folders import ReportError, Run, load_runs, lookup

SPEC = CONF / "ablations.yaml"
#: The Hydra overlay whose sweep is the table's runs (``conf/experiment/ablations.yaml``).
EXPERIMENT = "+experiment=ablations"


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


def mean(values: Sequence[float | None]) -> float | None:
    """The mean of the known values (a question without evidence has no recall); None for none."""
    known = [value for value in values if value is not None]
    return sum(known) / len(known) if known else None


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


def measured(run: Run, base: Run | None) -> dict[str, Any]:
    """A run's row: its unrounded means and, against its method's own run (``base``), the shares of
    changed contexts."""
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
    }
    return {key: value for key, value in row.items() if value not in (None, {})}
