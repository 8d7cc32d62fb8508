"""A segmenter from its config node, in plain Python: the library depends on no config framework.

A ``conf/segmenter/*.yaml`` node names the segmenter's class by ``_target_`` (a dotted path) and
gives its options as the other keys; an option that is itself a node with a ``_target_``
(TextTiling's and the embedding segmenter's ``depth`` rule, SeCom's ``reflection``) is built the
same way first. That is the part of Hydra's ``instantiate`` these nodes use. Both callers build
through here, so a node means the same object to each: the segmentation runner
(``benchmarks/pipeline/segment.py``) and SeCom, which builds its configured segmenter on first use
(:attr:`memsys.methods.secom.SeCom.segmenter`). The services are injected by keyword.

The node can be a plain dict or any other mapping (an OmegaConf node resolves as it is read).
Hydra's other special keys (``_args_``, ``_partial_``, ``_recursive_``, ``_convert_``) are
refused, not ignored: no segmenter config uses them.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

from memsys.embed import Embedder
from memsys.llm.backbone import Backbone
from memsys.segment.base import Segmenter

TARGET = "_target_"


def target_class(node: Mapping[str, Any]) -> Any:
    """The class (or function) a node's ``_target_`` names, imported.

    >>> target_class({"_target_": "memsys.segment.depth.DepthRule"}).__name__
    'DepthRule'
    """
    target = node.get(TARGET)
    if not isinstance(target, str) or "." not in target:
        raise ValueError(f"a config node needs a dotted {TARGET}, got {target!r}")
    module_name, _, name = target.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as error:
        raise ImportError(f"cannot import {target}: {error}") from error


def build(node: Mapping[str, Any], **injected: Any) -> Any:
    """``target_class(node)`` called with the node's other keys (nested nodes built first) and
    ``injected``.

    >>> build({"_target_": "memsys.segment.depth.DepthRule", "cutoff": "lc"}).cutoff
    'lc'
    """
    special = sorted(key for key in node if str(key).startswith("_") and key != TARGET)
    if special:
        raise ValueError(f"{node.get(TARGET)}: unsupported config keys {special}")
    options = {str(key): _value(value) for key, value in node.items() if key != TARGET}
    return target_class(node)(**options, **injected)


def segmenter_from_config(
    node: Mapping[str, Any], *, embedder: Embedder | None, backbone: Backbone | None
) -> Segmenter:
    """The segmenter a ``conf/segmenter`` node describes, with its services."""
    segmenter = build(node, embedder=embedder, backbone=backbone)
    if not isinstance(segmenter, Segmenter):
        raise TypeError(f"{node.get(TARGET)} is not a Segmenter")
    return segmenter


def _value(value: Any) -> Any:
    """An option's value: a nested node built, a mapping or list copied as plain Python."""
    if isinstance(value, Mapping):
        return build(value) if TARGET in value else {k: _value(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_value(item) for item in value]
    return value
