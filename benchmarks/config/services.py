"""The services' config nodes (a backbone, its retry policy, the embedder) as the typed configs
:mod:`memsys` takes, every setting checked before anything is built."""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from benchmarks.config.values import (
    ConfigError,
    check_options,
    number_at,
    plain,
    positive_int,
    value_at,
)
from memsys.embed import EmbedderConfig
from memsys.llm.backbone import BackboneSettings
from memsys.llm.factory import BackboneConfig
from memsys.llm.retry import RetryPolicy

#: Retry settings that must be above zero (the other numbers may be zero: no backoff).
POSITIVE_RETRY_SETTINGS = ("request_timeout_s", "rate_limit_patience_s", "rate_limit_decrease")


def backbone_config(cfg: DictConfig, key: str) -> BackboneConfig:
    """The backbone at ``key`` as :mod:`memsys.llm` takes it, every setting checked (provider
    options, ``concurrency``, ``retry``) so a bad one fails before the run directory exists, not at
    the first request. Only this translation reads a backbone's config node."""
    target = value_at(cfg, f"{key}.provider._target_", None)
    try:
        provider_class = get_class(str(target))
    except Exception as error:  # Hydra wraps the import error
        raise ConfigError(
            f"{key}.provider._target_", f"expected a provider config class, got {target!r}"
        ) from error
    provider_node = value_at(cfg, f"{key}.provider")
    check_options(provider_node, f"{key}.provider", provider_class.__init__)
    concurrency = positive_int(cfg, f"{key}.concurrency", allow_none=True, default=None)
    retry = retry_policy(cfg, f"{key}.retry")
    options = {
        str(name): plain(value_at(provider_node, str(name), named=f"{key}.provider.{name}"))
        for name in provider_node
        if not str(name).startswith("_")
    }
    try:
        provider = provider_class(**options)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{key}.provider", f"{provider_class.__name__}: {error}") from error
    settings = BackboneSettings(
        concurrency=BackboneSettings().concurrency if concurrency is None else concurrency,
        retry=retry,
    )
    name = value_at(cfg, f"{key}.name", None)
    return BackboneConfig(provider, settings, None if name is None else str(name))


def backbone_from_node(node: DictConfig | Mapping[str, Any]) -> BackboneConfig:
    """:func:`backbone_config` of a lone backbone node (a composed ``conf/backbone/*.yaml``, or
    the same as a dict), for the tools that build one outside a run; errors name ``backbone``."""
    return backbone_config(OmegaConf.create({"backbone": node}), "backbone")


def retry_policy(cfg: DictConfig, key: str) -> RetryPolicy:
    """The retry settings at ``key`` (absent or null: the defaults), each a checked field of
    :class:`~memsys.llm.retry.RetryPolicy`."""
    retry = value_at(cfg, key, None)
    if retry is None:
        return RetryPolicy()
    hints = typing.get_type_hints(RetryPolicy)
    known = {field.name: hints[field.name] for field in fields(RetryPolicy)}
    if not isinstance(retry, DictConfig):
        raise ConfigError(key, f"expected a mapping with some of {list(known)}, got {retry!r}")
    values = {}
    for name in retry:
        setting = f"{key}.{name}"
        if name not in known:
            raise ConfigError(setting, f"unknown retry setting; expected one of {list(known)}")
        if known[name] is int:
            values[str(name)] = positive_int(cfg, setting)
        else:
            values[str(name)] = number_at(cfg, setting, positive=name in POSITIVE_RETRY_SETTINGS)
    try:
        return RetryPolicy(**values)
    except ValueError as error:
        raise ConfigError(key, str(error)) from error


def embedder_config(cfg: DictConfig) -> EmbedderConfig:
    """The embedder (``embedder``) as :mod:`memsys.embed` takes it; a key the node leaves out
    keeps :class:`~memsys.embed.EmbedderConfig`'s default."""
    node = value_at(cfg, "embedder")
    if not isinstance(node, DictConfig):
        raise ConfigError("embedder", f"expected a mapping, got {node!r}")
    names = {field.name for field in fields(EmbedderConfig)}
    options = {
        str(name): plain(value_at(node, str(name), named=f"embedder.{name}"))
        for name in node
        if name in names
    }
    try:
        return EmbedderConfig(**options)
    except (TypeError, ValueError) as error:
        raise ConfigError("embedder", str(error)) from error
