"""Backbone providers: one module per way of running a model, behind :class:`Provider`."""

from memsys.llm.providers.base import BatchProvider, Provider

__all__ = ["BatchProvider", "Provider"]
