"""The short ``--help`` of a Hydra app (``memsys-bench run --help``), read from its configs.

Hydra's own help prints the whole composed config; this one fits a screen (groups, ``+``
overlays, plain keys) and is read from ``conf/`` and the config store, so a new config shows up
without an edit here."""

from __future__ import annotations

import importlib
import json
import textwrap
from collections.abc import Iterable

from hydra import initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

from benchmarks.config.compose import CONF

#: Choices shown per group before the rest is counted, and the width lines are wrapped to.
SHOWN_CHOICES = 8
WIDTH = 92


def usage(name: str, module: str, config: str) -> str:
    """``memsys-bench <name> --help`` for the Hydra app ``module`` with primary config ``config``."""
    importlib.import_module(module)
    primary = OmegaConf.load(CONF / f"{config}.yaml")
    defaults = dict(selected_groups(primary.defaults))
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        groups = {
            group: own_choices(group, module) or loader.get_group_options(group)
            for group in defaults
        }
        overlays = {
            group: loader.get_group_options(group)
            for group in loader.list_groups("")
            if group not in defaults and overlay_of(group, set(defaults))
        }
    keys = {
        key: value
        for key, value in OmegaConf.to_container(primary, resolve=False).items()
        if key not in ("defaults", "hydra") and not isinstance(value, (dict, list))
    }
    lines = [
        f"usage: memsys-bench {name} [-m] [GROUP=CHOICE ...] [+OVERLAY=CHOICE] [KEY=VALUE ...]",
        "",
        f"The Hydra app {module} (conf/{config}.yaml): every argument goes to",
        "Hydra unchanged, as with `python -m`. -m (--multirun) sweeps comma-separated values.",
        "",
        "config groups (default first):",
    ]
    for group, options in groups.items():
        default = defaults[group]
        lines.append(_wrapped(group, [default, *(o for o in options if o != default)]))
    if overlays:
        lines += ["", "overlays (+GROUP=CHOICE):"]
        lines += [_wrapped(group, options) for group, options in overlays.items()]
    settings = "  ".join(f"{key}={_shown(value)}" for key, value in keys.items())
    lines += [
        "",
        "keys (KEY=VALUE):",
        textwrap.fill(
            settings, WIDTH, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False
        ),
        "",
        "Hydra's flags: --cfg job (the composed config), --info defaults (the defaults tree),",
        "--hydra-help (all of them). Hydra's own app help (every choice, the whole config):",
        f"python -m {module} --help",
    ]
    return "\n".join(lines)


def selected_groups(defaults: Iterable[object]) -> Iterable[tuple[str, str]]:
    """``(group, default)`` of each plain entry of a defaults list (not ``_self_``, not an
    ``override`` of Hydra's own groups)."""
    for entry in defaults:
        if isinstance(entry, DictConfig):
            for key, value in entry.items():
                if " " not in str(key):
                    yield str(key), str(value)


def own_choices(group: str, module: str) -> list[str]:
    """The choices ``module`` stored in Hydra's config store for ``group`` (its ``provider``),
    which replace ``conf/<group>/``'s for that app (the segmentation sets for ``segment``)."""
    store = ConfigStore.instance()
    if group not in store.repo:
        return []
    names = (name.removesuffix(".yaml") for name in store.list(group))
    return sorted(name for name in names if store.load(f"{group}/{name}.yaml").provider == module)


def defaults_lists(group: str) -> Iterable[Iterable[object]]:
    """The defaults list of each of ``group``'s configs: its files under ``conf/`` and the nodes
    stored in Hydra's config store (the ``paper`` group's options are only there)."""
    for path in (CONF / group).glob("*.yaml"):
        yield OmegaConf.load(path).get("defaults", [])
    store = ConfigStore.instance()
    for name in store.list(group) if group in store.repo else ():
        if name.endswith(".yaml"):  # the rest are subgroups (Hydra's own ``hydra/launcher``)
            yield OmegaConf.create(store.load(f"{group}/{name}").node).get("defaults", [])


def overlay_of(group: str, app_groups: set[str]) -> bool:
    """Whether ``group``'s configs override groups of this app, and only those."""
    overridden = set()
    for defaults in defaults_lists(group):
        for entry in defaults:
            if isinstance(entry, DictConfig):
                overridden |= {
                    str(key).removeprefix("override ").lstrip("/")
                    for key in entry
                    if str(key).startswith("override ")
                }
    return bool(overridden) and overridden <= app_groups


def _wrapped(group: str, options: list[str]) -> str:
    rest = len(options) - SHOWN_CHOICES
    where = f" (conf/{group}/)" if (CONF / group).is_dir() else ""  # else only in the store
    more = [f"... {rest} more{where}"] if rest > 0 else []
    return textwrap.fill(
        " | ".join([*options[:SHOWN_CHOICES], *more]),
        WIDTH,
        initial_indent=f"  {group:<14}",
        subsequent_indent=" " * 16,
        break_on_hyphens=False,
    )


def _shown(value: object) -> str:
    """A value as it is written on the command line (``null``, ``true``)."""
    return value if isinstance(value, str) else json.dumps(value)
