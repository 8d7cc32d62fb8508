"""The sweep and the config of each of its points as the plan runs it: Hydra's multirun crossed
as ``-m`` does, models that make no LLM call stood in for (:data:`STAND_INS`), every backbone
scripted, the caches in the plan's throwaway directory and the subset cut to a sample."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from benchmarks.config.compose import compose_config
from benchmarks.pipeline.settings import BACKBONE_KEYS
from memsys.llm.providers.scripted import ScriptedConfig


@dataclass(frozen=True)
class StandIn:
    """A model the plan swaps for one at hand when the config asks for it: it makes no LLM
    call, so the calls stay the same; ``why`` says what the swap may change."""

    key: str
    value: str
    override: str
    why: str


#: SeCom's paper setting loads two Hugging Face models that are not shipped offline, and
#: LLMLingua-2 is slow on a CPU; neither is an LLM call.
STAND_INS = (
    StandIn(
        "method.compression",
        "llmlingua2",
        "method.compression=none",
        "LLMLingua-2 only compresses the indexed copy (segments reach the reader whole): ranking "
        "may differ, calls do not",
    ),
    StandIn(
        "embedder.model",
        "sentence-transformers/multi-qa-mpnet-base-dot-v1",
        "embedder=minilm",
        "MPNet only ranks: which segments fill the context may differ, calls do not",
    ),
)


@dataclass(frozen=True)
class Sweep:
    """A multirun's points (one override list each) and its axes (keys with several values)."""

    points: list[list[str]]
    axes: list[str]

    def label(self, point: Sequence[str]) -> dict[str, str]:
        """The point's values on the axes (its overrides when nothing varies): a row's name."""
        values = dict(line.split("=", 1) for line in point)
        return {axis: values[axis] for axis in self.axes} or {"config": " ".join(point)}


def sweep(overrides: Sequence[str]) -> Sweep:
    """The multirun ``-m`` makes of ``overrides``: the experiment's ``hydra.sweeper.params``, each
    replaced by a command-line override of the same key, crossed (Hydra's basic sweeper)."""
    parser = OverridesParser.create()
    base = compose_overrides(fixed_overrides(overrides), hydra=True)
    swept = OmegaConf.select(base, "hydra.sweeper.params")
    # resolved: a sweep may be derived (``${registry:table1}``, benchmarks.pipeline.settings)
    params = OmegaConf.to_container(swept, resolve=True) if swept is not None else {}
    assert isinstance(params, dict)
    lines = [f"{key}={value}" for key, value in params.items()] + list(overrides)
    choices: dict[str, list[str]] = {}
    for override in parser.parse_overrides(lines):
        key = override.get_key_element()
        values = (
            list(override.sweep_string_iterator())
            if override.is_sweep_override()
            else [override.get_value_element_as_str()]
        )
        choices[key] = [f"{key}={value}" for value in values]
    points = [list(point) for point in itertools.product(*choices.values())]
    return Sweep(points, [key for key, values in choices.items() if len(values) > 1])


def fixed_overrides(overrides: Sequence[str]) -> list[str]:
    """The overrides that are not sweeps (``key=a,b``): what every point shares."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    return [o.input_line for o in parsed if not o.is_sweep_override()]


def compose_overrides(overrides: Sequence[str], *, hydra: bool = False) -> DictConfig:
    """The runner's config for ``overrides`` (with Hydra's own node when ``hydra``)."""
    return compose_config(overrides, with_hydra=hydra)


def planned_config(
    point: Sequence[str], work_dir: Path, stand_ins: bool
) -> tuple[DictConfig, list[str]]:
    """The config of one sweep point as the plan runs it (stand-ins applied, backbones scripted,
    caches in ``work_dir``), and the stand-ins used."""
    cfg = compose_overrides(point)
    used = [s for s in STAND_INS if stand_ins and OmegaConf.select(cfg, s.key) == s.value]
    if used:
        cfg = compose_overrides([*point, *(s.override for s in used)])
    script_backbones(cfg)
    locations = {
        "cache_dir": str(work_dir / "cache"),
        "results_dir": str(work_dir / "runs"),
        "llm_cache_mode": "off",
        "llm_cache_journal": None,
        "progress": False,
    }
    for key, value in locations.items():
        OmegaConf.update(cfg, key, value, merge=False)
    return cfg, [f"{s.override}: {s.why}" for s in used]


def script_backbones(cfg: DictConfig) -> None:
    """Give every backbone of ``cfg`` (reader, construction model, judge) the scripted provider,
    keeping the rest of its config (its name prices it; method settings read from it hold)."""
    for key in BACKBONE_KEYS:
        node = OmegaConf.select(cfg, key)
        if node is not None:
            provider = {"_target_": f"{ScriptedConfig.__module__}.ScriptedConfig"}
            provider["model"] = str(node.name)
            OmegaConf.update(cfg, f"{key}.provider", provider, merge=False)


def sampled(cfg: DictConfig, conversations: int | None) -> DictConfig:
    """``cfg`` with its subset cut to the first ``conversations`` (``None``: as it is)."""
    configured = OmegaConf.select(cfg, "subset.conversations")
    if conversations is None or (configured is not None and configured <= conversations):
        return cfg
    cut = copy.deepcopy(cfg)
    cut.subset.conversations = conversations
    return cut
