"""``memsys-bench results status``: is every committed table's every row still what today's code
and configs give?

The committed tables and where their runs are: ``results/ledger.yaml`` (a table waiting on work
is declared ``pending`` there, with its reason). For a table whose runs are here, each run its
markdown shows (the run ids of its rows) is:

* ``fresh`` — produced by today's method source (the fingerprint of the method, what it imports
  of ``memsys/``, and the harness's packer and per-question scorers:
  :func:`benchmarks.pipeline.provenance.method_source`) under a config its name composes to today;
* ``restamped`` — fresh by a behavioural check across a refactor (:mod:`benchmarks.runs.restamps`);
* ``stale-code`` — the source changed since (rebuild it, or ``results restamp`` it);
* ``stale-config`` — its method's settings are no longer any config of that method's (a renamed
  key, :data:`RENAMED_KEYS`, is mapped, not counted as a change);
* ``partial`` — unfinished (no ``metrics.json``); ``missing`` — not in the runs folder.

A page measured by a command rather than built from runs (the paper grid's cost plan) is declared
``measured``, with the command, date and code.

Exit 1 on any row that is not fresh or restamped; a pending table, or one whose runs folder is not
in this checkout (Table 1's: ``make check-table1`` reproduces it instead), is listed, not failed.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf

from benchmarks import registry
from benchmarks.config.compose import CONF, compose_config
from benchmarks.data.paths import REPO_ROOT
from benchmarks.pipeline.provenance import method_source, recorded_method_source
from benchmarks.runs.folders import read_records
from benchmarks.runs.restamps import carried_source, read_restamps
from benchmarks.runs.segmentation import configured_segmenter

LEDGER = REPO_ROOT / "results" / "ledger.yaml"
#: Method keys renamed since runs were logged (dotted, below ``method``): old name → today's.
RENAMED_KEYS = {"retrieval.routing": "retrieval.candidate_rule"}
#: States that pass.
PASSING = ("fresh", "restamped")
RUN_ID = re.compile(r"\b[0-9a-f]{12}\b")
#: Registry roles of configs that are not what a row's plain name stands for.
VARIANT_ROLES = ("variant", "ablation")


@dataclass(frozen=True)
class RowState:
    """One run a table shows, and what it is against today."""

    table: str
    run: str
    state: str
    detail: str = ""


def table_run_ids(text: str, csv: bool = False) -> list[str]:
    """The run ids a rendered table shows: 12-hex tokens in its table rows (not its notes), or
    in a csv table's rows (not its ``#`` setting lines, as the frontier's).

    >>> table_run_ids("| A | 0.5 | 0a1b2c3d4e5f |\\n2. run 0a1b2c3d4e5f: recorded ffffffffffff")
    ['0a1b2c3d4e5f']
    >>> table_run_ids("# code 0a1b2c3d4e5f\\nmethod,run\\nA,ffffffffffff", csv=True)
    ['ffffffffffff']
    """
    lines = text.splitlines()
    rows = (
        [line for line in lines if not line.startswith("#")]
        if csv
        else [line for line in lines if line.startswith("|")]
    )
    ids = (RUN_ID.findall(line) for line in rows)
    return list(dict.fromkeys(found for line in ids for found in line))


@functools.cache
def method_configs(target: str) -> dict[str, dict[str, Any]]:
    """Every ``conf/method`` config of ``target`` (its own or, through its ``defaults``, a
    parent's: :attr:`benchmarks.registry.Entry.target`), composed as a run composes it (registry
    out)."""
    found = {}
    for entry in sorted(registry.entries(), key=lambda entry: entry.config):
        if entry.target != target:
            continue
        node = OmegaConf.to_container(
            compose_config([f"method={entry.config}"]).method, resolve=True
        )
        assert isinstance(node, dict)
        found[entry.config] = node
    return found


def renamed(method: dict[str, Any]) -> dict[str, Any]:
    """A run's method settings with renamed keys under today's names.

    >>> renamed({"retrieval": {"routing": "intersect", "rerank": True}})
    {'retrieval': {'rerank': True, 'candidate_rule': 'intersect'}}
    """
    settings = copy.deepcopy(method)
    for old, new in RENAMED_KEYS.items():
        *parents, leaf = old.split(".")
        node = settings
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and leaf in node:
            node[new.rsplit(".", 1)[-1]] = node.pop(leaf)
    return settings


def config_state(method: dict[str, Any], grid: str | None = None) -> tuple[bool, str]:
    """Whether a run's method settings are one of today's configs of its method, and which (or
    how the nearest differs). The config must be one the table's row names stand for: one of the
    table's ``grid`` (the registry grid that builds it), or without a grid a method's or a
    baseline's, not a variant's."""
    settings = renamed(method)
    configs = method_configs(settings["_target_"])
    for name, composed in configs.items():
        if composed == settings:
            declared = registry.entry(CONF / "method" / f"{name}.yaml")
            if grid is not None and grid not in declared.grids:
                return False, f"it is {name}, which the {grid} grid does not run"
            if grid is None and declared.role in VARIANT_ROLES:
                return (
                    False,
                    f"it is the {declared.role} {name}, not what its row's name stands for",
                )
            return True, name
    if not configs:
        return False, f"no config of {settings['_target_']} today"
    name, _ = nearest_config(settings)
    return False, f"nearest config {name}: {changes(settings, configs[name])}"


def nearest_config(method: dict[str, Any]) -> tuple[str, list[str]]:
    """Today's config of the method (a run's settings, renamed keys mapped) whose settings differ
    from ``method`` in the fewest top-level keys, and those keys."""
    settings = renamed(method)
    configs = method_configs(settings["_target_"])
    name = nearest_of(settings, configs)
    return name, differing_keys(settings, configs[name])


def nearest_of(settings: dict[str, Any], configs: dict[str, dict[str, Any]]) -> str:
    """The name of the config among ``configs`` that differs from ``settings`` in the fewest
    top-level keys."""
    return min(configs, key=lambda found: len(differing_keys(settings, configs[found])))


def differing_keys(settings: dict[str, Any], today: dict[str, Any]) -> list[str]:
    """The top-level keys whose values differ between a run's settings and a config's today."""
    keys = sorted(set(today) | set(settings))
    return [k for k in keys if today.get(k, "—") != settings.get(k, "—")]


def changes(settings: dict[str, Any], today: dict[str, Any]) -> str:
    """How a run's settings differ from a config's today, key by key (values as YAML writes
    them: ``null``, not Python's ``None``)."""

    def shown(config: dict[str, Any], key: str) -> str:
        return "—" if key not in config else "null" if config[key] is None else str(config[key])

    return ", ".join(
        f"{k}: {shown(settings, k)} (today {shown(today, k)})"
        for k in differing_keys(settings, today)
    )


def segmenter_state(segmenter: dict[str, Any]) -> tuple[bool, str]:
    """Whether a segmentation run's segmenter settings are one of today's ``conf/segmenter``
    configs, which (or how the nearest of the same class differs)."""
    configs = {
        path.stem: configured_segmenter(path.stem)
        for path in sorted((CONF / "segmenter").glob("*.yaml"))
    }
    configs = {n: c for n, c in configs.items() if c["_target_"] == segmenter["_target_"]}
    for name, today in configs.items():
        if today == segmenter:
            return True, name
    if not configs:
        return False, f"no segmenter config of {segmenter['_target_']} today"

    name = nearest_of(segmenter, configs)
    return False, f"nearest segmenter config {name}: {changes(segmenter, configs[name])}"


def run_state(table: str, directory: Path, grid: str | None = None) -> RowState:
    """The state of one run a table shows (``grid``: the registry grid the table is built from)."""
    run = directory.name
    if not (directory / "config.yaml").is_file():
        return RowState(table, run, "missing", f"not in {directory.parent}")
    if not (directory / "metrics.json").is_file():
        return RowState(table, run, "partial", "unfinished (no metrics.json)")
    config = yaml.safe_load((directory / "config.yaml").read_text())
    if "segmenter" in config:  # a segmentation run (benchmarks.pipeline.segment)
        metrics = json.loads((directory / "metrics.json").read_text())
        recorded = metrics.get("provenance", {}).get("method_source")
        now = method_source(config["segmenter"]["_target_"])
        same, detail = segmenter_state(config["segmenter"])
    else:
        recorded = recorded_method_source(read_records(directory / "invocations.jsonl"))
        now = method_source(config["method"]["_target_"])
        same, detail = config_state(config["method"], grid)
    carried, stamps = carried_source(recorded, read_restamps(directory)) if recorded else (None, [])
    code_moved = recorded is not None and now is not None and carried != now
    if not same:  # rebuilt under today's config, which brings today's code with it
        also = f"; and its code: recorded {recorded}, now {now}" if code_moved else ""
        return RowState(table, run, "stale-config", f"{detail}{also}")
    if code_moved:
        return RowState(table, run, "stale-code", f"recorded {recorded}, now {now}")
    return RowState(table, run, "restamped" if stamps else "fresh", detail)


def table_states(table: str, entry: dict[str, Any], root: Path) -> list[RowState] | str:
    """The rows of one ledger entry (paths relative to ``root``), or why they are not checked."""
    for kind in ("pending", "measured"):  # waits on work; counted by a command, not from runs
        if kind in entry:
            return f"{kind}: {entry[kind]}"
    runs = root / entry["runs"]
    if not runs.is_dir():
        return f"runs not in this checkout ({entry['runs']}): {entry.get('absent', 'rebuild to check')}"
    shown = table_run_ids((root / table).read_text(), csv=table.endswith(".csv"))
    grid = entry.get("grid")
    return [run_state(table, runs / run, grid) for run in shown]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="memsys-bench results status",
        description="Every committed table's rows against today's code and configs "
        "(results/ledger.yaml); exit 1 on a stale, partial or missing row.",
    )
    parser.add_argument("--ledger", type=Path, default=LEDGER)
    parser.add_argument("--verbose", action="store_true", help="print every row, not only failures")
    args = parser.parse_args(argv)
    ledger = yaml.safe_load(args.ledger.read_text())["tables"]
    root = args.ledger.resolve().parent.parent  # the ledger lies in results/
    failing = 0
    for table, entry in ledger.items():
        states = table_states(table, entry, root)
        if isinstance(states, str):
            print(f"{table}: {states}")
            continue
        counts: dict[str, int] = {}
        for row in states:
            counts[row.state] = counts.get(row.state, 0) + 1
        summary = ", ".join(f"{count} {state}" for state, count in sorted(counts.items()))
        print(f"{table}: {len(states)} runs: {summary}")
        for row in states:
            if row.state not in PASSING or args.verbose:
                print(f"  {row.run} {row.state}: {row.detail}")
        failing += sum(row.state not in PASSING for row in states)
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
