"""What the runs of one table must share, and one run per row: runs that disagree on a
condition are an error naming the config path; runs of one method that differ only in its
settings (ablations) get variant labels; two runs left on one row are an error."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from benchmarks.runs.folders import _MISSING, ReportError, Run, lookup
from benchmarks.runs.naming import RowKey, row_key


def data_keys(dataset: dict[str, Any]) -> dict[str, Any]:
    """What names a dataset's questions: everything but the judge protocol, which only answered
    runs carry."""
    return {key: value for key, value in dataset.items() if key != "judge_protocol"}


def conditions(config: dict[str, Any]) -> dict[str, Any]:
    """The settings every row of one table must share, keyed by config path."""
    keys = ("subset", "seed", "adversarial", "answer.context_budget", "embedder.model")
    shared = {"dataset": data_keys(config.get("dataset") or {})}
    shared |= {key: lookup(config, key, None) for key in keys}
    if config.get("answer", {}).get("template") is not None:
        shared["dataset.judge_protocol"] = lookup(config, "dataset.judge_protocol", None)
        shared["answer.template"] = config["answer"]["template"]
        shared["answer.max_tokens"] = config["answer"].get("max_tokens")
        shared["judge"] = config.get("judge")
    return shared


def shared_conditions(runs: Sequence[Run]) -> dict[str, Any]:
    """The conditions of all runs, or an error naming the first config path where they differ."""
    shared: dict[str, tuple[Any, Run]] = {}
    for run in runs:
        for key, value in conditions(run.config).items():
            earlier = shared.setdefault(key, (value, run))[1]
            if shared[key][0] != value:
                path = (differing_keys(shared[key][0], value, f"{key}.") or [key])[0]
                raise ReportError(
                    f"runs disagree on {path}: {shown(earlier, path)} in {earlier.directory.name}, "
                    f"{shown(run, path)} in {run.directory.name}; one table compares one setting "
                    f"(narrow with --where {path}=...)"
                )
    return {key: value for key, (value, _) in shared.items()}


def shown(run: Run, path: str) -> str:
    """A config value for an error message."""
    value = lookup(run.config, path)
    return "absent" if value is _MISSING else repr(value)


def differing_keys(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted config paths where two configs differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            path
            for key in sorted(set(a) | set(b))
            for path in differing_keys(a.get(key), b.get(key), f"{prefix}{key}.")
        ]
    return [] if a == b else [prefix.rstrip(".")]


def with_variants(runs: Sequence[Run]) -> list[Run]:
    """Runs of one method that differ only in method settings get those settings as a variant label,
    so each keeps its own row."""
    groups: dict[RowKey, list[Run]] = defaultdict(list)
    for run in runs:
        groups[row_key(run.config)].append(run)
    labelled = []
    for group in groups.values():
        keys = sorted(
            {key for a in group for b in group for key in differing_keys(a.config, b.config)}
        )
        if len(group) == 1 or not all(key.startswith("method.") for key in keys):
            labelled += group
            continue
        for run in group:
            settings = (f"{key.rsplit('.', 1)[-1]}={lookup(run.config, key, '—')}" for key in keys)
            labelled.append(dataclasses.replace(run, variant=", ".join(settings)))
    return labelled


def check_one_run_per_row(runs: Sequence[Run]) -> None:
    """Two runs on one row would have to be picked between silently; refuse instead."""
    seen: dict[RowKey, Run] = {}
    for run in runs:
        key = row_key(run.config, run.variant)
        if key in seen:
            first = seen[key]
            keys = ", ".join(differing_keys(first.config, run.config)) or "nothing"
            raise ReportError(
                f"runs {first.directory.name} and {run.directory.name} both give the row "
                f"{key.label()}; their configs differ in {keys} (narrow with --where KEY=VALUE)"
            )
        seen[key] = run
