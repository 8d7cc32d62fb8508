"""The paper grid: its entries (the ``paper`` group's options in the dataset's experiment config),
each composed as its runs are, and each entry's one run per reader among the finished runs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from omegaconf import DictConfig, OmegaConf

from benchmarks.config.compose import compose_config
from benchmarks.runs.conditions import differing_keys
from benchmarks.runs.folders import ReportError, Run, lookup
from benchmarks.runs.naming import method_name

#: The report's dataset → the experiment config holding its paper grid.
GRIDS = {"locomo": "paper_locomo", "longmemeval_s": "paper_longmemeval"}

#: Settings a run of a grid entry has when it is that entry's run (the paper setting as the
#: harness expresses it); used to pick between runs of one method and reader.
ENTRY_KEYS = (
    "method.extraction",
    "answer.order",
    "adversarial",
    "answer.context_budget",
    "embedder.model",
)


@dataclass(frozen=True, eq=False)
class Entry:
    """One entry of the paper grid (``paper=<name>``), composed as its runs are."""

    name: str
    config: DictConfig

    @property
    def method_config(self) -> str:
        """The ``conf/method`` config the entry selects."""
        return str(self.config.hydra.runtime.choices.method)

    @cached_property
    def method(self) -> str:
        """The method's display name, as report rows name it."""
        node = OmegaConf.to_container(self.config.method, resolve=True)
        assert isinstance(node, dict)
        return method_name(node)

    def setting(self, key: str) -> Any:
        """A resolved value of the entry's config."""
        return OmegaConf.select(self.config, key)


def compose_grid_config(overrides: Sequence[str]) -> DictConfig:
    """The runner's config for ``overrides``, with Hydra's (for the group choices)."""
    return compose_config(overrides, with_hydra=True)


def grid_entries(dataset: str) -> list[Entry]:
    """The entries of the dataset's paper grid, in sweep order."""
    if dataset not in GRIDS:
        raise ReportError(f"--dataset must be one of {list(GRIDS)}, got {dataset!r}")
    experiment = f"+experiment={GRIDS[dataset]}"
    sweep = compose_grid_config([experiment]).hydra.sweeper.params.paper
    names = [name.strip() for name in str(sweep).split(",")]
    return [Entry(name, compose_grid_config([experiment, f"paper={name}"])) for name in names]


def entry_runs(entry: Entry, runs: Sequence[Run]) -> dict[str, Run]:
    """The entry's run per reader (``backbone.name``)."""
    readers: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        answered = lookup(run.config, "answer.template", None) is not None
        if answered and method_name(run.config.get("method", {})) == entry.method:
            readers[str(lookup(run.config, "backbone.name", "?"))].append(run)
    return {reader: pick_run(entry, reader, group) for reader, group in readers.items()}


def setting_differences(entry: Entry, run: Run) -> list[str]:
    """The :data:`ENTRY_KEYS` in which a run differs from its grid entry."""
    return [key for key in ENTRY_KEYS if lookup(run.config, key, None) != entry.setting(key)]


def pick_run(entry: Entry, reader: str, group: Sequence[Run]) -> Run:
    """The one run of the entry with this reader; the entry's own settings win a tie, and a tie
    they do not break is an error rather than a silent pick."""
    if len(group) > 1:
        group = [run for run in group if not setting_differences(entry, run)] or group
    if len(group) > 1:
        first, second = group[0], group[1]
        keys = ", ".join(differing_keys(first.config, second.config)) or "nothing"
        raise ReportError(
            f"runs {first.directory.name} and {second.directory.name} both stand for paper "
            f"entry {entry.name} with reader {reader}; their configs differ in {keys} (narrow "
            "with --where KEY=VALUE)"
        )
    return group[0]
