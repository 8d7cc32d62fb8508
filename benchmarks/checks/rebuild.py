"""``memsys-bench results rebuild [TABLE...]``: rebuild exactly the rows ``results status`` finds
stale or partial, then re-render their tables.

A stale run's folder moves to the cache (``<cache_dir>/superseded/``) before its rerun starts, and
is deleted once the rerun finishes; so an interrupted rebuild leaves a partial run, which the
next ``rebuild`` resumes. Which config each row reruns under: docs/tables.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from benchmarks.checks.ledger import LEDGER, PASSING, RowState, nearest_config, table_states
from benchmarks.checks.restamp import RestampError, rebuilt_config
from benchmarks.config.compose import compose_config
from benchmarks.pipeline.run import run

#: Where a stale run waits while its rerun is built (below the cache folder).
SUPERSEDED = "superseded"


@dataclass(frozen=True)
class Step:
    """One row to rebuild: its state, its run folder, and what its last build cost."""

    row: RowState
    directory: Path
    cost: str


def last_cost(directory: Path) -> str:
    """What the run cost when it was last built (``metrics.json``), or how far a partial run got."""
    metrics = directory / "metrics.json"
    if not metrics.is_file():
        logged = directory / "predictions.jsonl"
        lines = sum(1 for _ in logged.open()) if logged.is_file() else 0
        return f"resumes a partial run ({lines} records logged)"
    invocations = json.loads(metrics.read_text()).get("invocations", {})
    wall, workers = invocations.get("wall_s"), invocations.get("workers", 1)
    if wall is None:
        return "cost not recorded"
    return f"last built in {wall:,.0f} s on {workers} worker{'s' * (workers > 1)}"


def plan(ledger: dict[str, Any], root: Path, tables: Sequence[str]) -> dict[str, list[Step]]:
    """The rows to rebuild per table (``tables``: all with runs here when empty)."""
    unknown = sorted(set(tables) - set(ledger))
    if unknown:
        raise SystemExit(f"error: not in the ledger: {', '.join(unknown)}")
    found: dict[str, list[Step]] = {}
    for table in tables or ledger:
        states = table_states(table, ledger[table], root)
        if isinstance(states, str):
            print(f"{table}: {states} (not rebuilt)")
            continue
        runs = root / ledger[table]["runs"]
        steps = [
            Step(row, runs / row.run, last_cost(runs / row.run))
            for row in states
            if row.state not in PASSING
        ]
        if steps:
            found[table] = steps
    return found


def rerun_config(step: Step, overrides: Sequence[str], cache_dir: Path) -> DictConfig:
    """The config a row is rebuilt under: its own (same run id), or for a ``stale-config`` row
    with today's settings of its nearest config."""
    source = step.directory
    if not (source / "config.yaml").is_file():
        source = cache_dir / SUPERSEDED / step.directory.name
    locations = [f"results_dir={step.directory.parent}", f"cache_dir={cache_dir}", *overrides]
    cfg = rebuilt_config(source, locations)
    if step.row.state == "stale-config":
        method = OmegaConf.to_container(cfg.method, resolve=True)  # the run's own, as read
        assert isinstance(method, dict)
        nearest, differing = nearest_config(method)
        if not differing:  # today's config, in a grid or role its row's name does not stand for
            raise RestampError(f"{step.row.run}: {step.row.detail}: choose its config by hand")
        OmegaConf.set_struct(cfg, False)
        cfg.method = compose_config([f"method={nearest}"]).method
    return cfg


def rebuild_row(step: Step, overrides: Sequence[str], cache_dir: Path) -> None:
    """Rerun one row: its stale folder set aside first (same run id), deleted once it finished."""
    cfg = rerun_config(step, overrides, cache_dir)
    aside = cache_dir / SUPERSEDED / step.directory.name
    if step.row.state == "stale-code" and step.directory.is_dir():
        aside.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(aside, ignore_errors=True)
        step.directory.rename(aside)
    summary = run(cfg)
    if Path(summary["run_dir"]).name != step.directory.name:
        shutil.rmtree(step.directory, ignore_errors=True)  # a stale-config row's old run
    shutil.rmtree(aside, ignore_errors=True)


def render(entry: dict[str, Any], root: Path) -> None:
    """Re-render a table with its ledger entry's ``render`` command (``memsys-bench`` words)."""
    command = [sys.executable, "-m", "benchmarks.console", *entry["render"]]
    subprocess.run(command, cwd=root, check=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="memsys-bench results rebuild",
        description="Rerun every stale or partial row of the named tables (default: all), then "
        "re-render them; prints the plan and its measured costs first; resumes when run again.",
    )
    parser.add_argument("tables", nargs="*", help="ledger keys, e.g. results/table1.md")
    parser.add_argument("--ledger", type=Path, default=LEDGER)
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache"), help="the caches")
    parser.add_argument("--dry-run", action="store_true", help="print the plan only")
    args = parser.parse_args(argv)
    ledger = yaml.safe_load(args.ledger.read_text())["tables"]
    root = args.ledger.resolve().parent.parent  # the ledger lies in results/
    steps = plan(ledger, root, args.tables)
    for table, rows in steps.items():
        print(f"{table}: {len(rows)} row(s) to rebuild")
        for step in rows:
            print(f"  {step.row.run} {step.row.state}: {step.cost}")
    if args.dry_run or not steps:
        return 0
    cache_dir = args.cache_dir.resolve()
    for table, rows in steps.items():
        overrides = ledger[table].get("overrides", [])
        try:
            for step in rows:
                print(f"rebuild {step.row.run} ({table})", file=sys.stderr)
                rebuild_row(step, overrides, cache_dir)
        except RestampError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        render(ledger[table], root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
