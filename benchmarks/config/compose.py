"""A runner's config as its command line would compose it, with the resolvers and config-store
options it needs registered on import (before ``@hydra.main`` composes)."""

from __future__ import annotations

from collections.abc import Sequence

from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from benchmarks.data.paths import REPO_ROOT, resolve_path
from benchmarks.registry import KEY, PAPER_GRID, paper_grid, sweep

#: The runners' Hydra configs.
CONF = REPO_ROOT / "conf"


# ``${repo_path:...}``: a path as the runners resolve it (Hydra's folders under ``results_dir``).
OmegaConf.register_new_resolver("repo_path", lambda path: str(resolve_path(path)), replace=True)
# ``${registry:GRID}``: the grid's sweep values, comma-separated
# (:func:`benchmarks.registry.sweep`), so an experiment's sweep is derived from the registry blocks;
# registered on import, before ``@hydra.main`` composes.
OmegaConf.register_new_resolver("registry", lambda grid: ",".join(sweep(grid)), replace=True)


def register_paper_grid(store: ConfigStore) -> None:
    """Each option of the ``paper`` config group as the overlay a ``conf/paper/<name>.yaml`` would
    be."""
    for option in paper_grid().values():
        choices = {"method": option.method, **option.groups}
        defaults = [{f"override /{group}": choice} for group, choice in choices.items()]
        node = {"defaults": [*defaults, "_self_"], **option.protocol}
        store.store(group=PAPER_GRID, name=option.name, node=node, package="_global_")


# Registered on import, so every composition finds the options.
register_paper_grid(ConfigStore.instance())


def without_registry(cfg: DictConfig) -> DictConfig:
    """``cfg`` with its method's registry block (``method.registry``) taken out, in place; also
    returned. The block is data about the config, no option (:mod:`benchmarks.registry`), so it
    reaches no constructor, option check or run's ``config.yaml``."""
    method = cfg.get("method") if isinstance(cfg, DictConfig) and "method" in cfg else None
    if isinstance(method, DictConfig) and KEY in method:
        with read_write(method), open_dict(method):
            del method[KEY]
    return cfg


def compose_config(
    overrides: Sequence[str], *, config_name: str = "config", with_hydra: bool = False
) -> DictConfig:
    """A runner's config for ``overrides`` as its command line would build it (with Hydra's own node
    when ``with_hydra``), the registry block taken out."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            config_name=config_name, overrides=list(overrides), return_hydra_config=with_hydra
        )
    return without_registry(cfg)
