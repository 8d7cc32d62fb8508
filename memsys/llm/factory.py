"""Build a :class:`~memsys.llm.backbone.Backbone` from a ``conf/backbone/*.yaml`` node.

A backbone config has a ``provider`` node whose ``_target_`` is a provider config dataclass
(each has a ``build()`` that loads or connects), plus optional ``concurrency`` and ``retry``
(fields of :class:`~memsys.llm.retry.RetryPolicy`). The cache and accounting are not config of
the backbone: the run owns them and passes them in.
"""

from __future__ import annotations

from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from memsys.llm.accounting import Accounting
from memsys.llm.backbone import Backbone, BackboneSettings
from memsys.llm.cache import ResponseCache
from memsys.llm.retry import RetryPolicy


def backbone_settings(config: DictConfig | dict[str, Any]) -> BackboneSettings:
    """Concurrency and retry policy from a backbone config (defaults where absent)."""
    node = OmegaConf.create(config) if isinstance(config, dict) else config
    retry = node.get("retry")
    retry_fields = OmegaConf.to_container(retry, resolve=True) if retry is not None else {}
    concurrency = node.get("concurrency")
    return BackboneSettings(
        concurrency=BackboneSettings().concurrency if concurrency is None else int(concurrency),
        retry=RetryPolicy(**retry_fields),  # type: ignore[arg-type]
    )


def build_backbone(
    config: DictConfig | dict[str, Any], *, cache: ResponseCache, accounting: Accounting
) -> Backbone:
    """The backbone a config describes, using the run's cache and accounting."""
    node = OmegaConf.create(config) if isinstance(config, dict) else config
    settings = backbone_settings(node)
    provider_config = instantiate(node.provider, _convert_="all")
    return Backbone(provider_config.build(), cache=cache, accounting=accounting, settings=settings)
