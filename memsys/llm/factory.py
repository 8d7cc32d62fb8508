"""Build a :class:`~memsys.llm.backbone.Backbone` from plain typed values.

A backbone is a provider config (a dataclass of :mod:`memsys.llm.providers` whose ``build()``
loads a model or connects to a server, e.g. :class:`~memsys.llm.providers.llamacpp.LlamaCppConfig`)
and its :class:`~memsys.llm.backbone.BackboneSettings` (concurrency, retry policy). Reading them
from a config file is the harness's job (``benchmarks.config.services.backbone_config`` reads a
``conf/backbone/*.yaml`` node and checks every setting); the library takes the typed values only.
The cache and accounting are not config of the backbone: the run owns them and passes them in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from memsys.llm.accounting import Accounting
from memsys.llm.backbone import Backbone, BackboneSettings
from memsys.llm.cache import ResponseCache
from memsys.llm.providers.base import Provider
from memsys.llm.slots import Limiters


class ProviderConfig(Protocol):
    """A provider's settings: the config dataclasses of :mod:`memsys.llm.providers`."""

    def build(self) -> Provider:
        """Load the model or connect to the server."""
        ...


@dataclass(frozen=True)
class BackboneConfig:
    """One backbone as plain values: which model, and how it is called.

    >>> from memsys.llm.providers.scripted import ScriptedConfig
    >>> BackboneConfig(ScriptedConfig("tiny"), name="tiny").settings.concurrency
    8
    """

    provider: ProviderConfig
    settings: BackboneSettings = field(default_factory=BackboneSettings)
    #: The name tables show for it (``conf/backbone/*.yaml``'s ``name``); None where unnamed.
    name: str | None = None


def build_backbone(
    config: BackboneConfig,
    *,
    cache: ResponseCache,
    accounting: Accounting,
    limiters: Limiters | None = None,
) -> Backbone:
    """The backbone ``config`` describes, using the run's cache and accounting, and its
    ``limiters`` (one in-flight limit per endpoint, shared by the run's backbones)."""
    return Backbone(
        config.provider.build(),
        cache=cache,
        accounting=accounting,
        settings=config.settings,
        limiters=limiters,
    )
