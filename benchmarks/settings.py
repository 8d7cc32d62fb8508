"""A run's config, checked up front so a bad value fails with the key that holds it."""

from __future__ import annotations

import hashlib
import inspect
import json
import types
import typing
from dataclasses import dataclass
from typing import Any

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from benchmarks.answering.context import CONTEXT_ORDERS
from benchmarks.answering.prompts import TEMPLATES
from benchmarks.subsets import SubsetSpec

#: Keys that say where things live, how to display them or how many processes do the work: not
#: part of a run's identity.
LOCATION_KEYS = (
    "data_dir",
    "cache_dir",
    "results_dir",
    "llm_cache_mode",
    "llm_cache_journal",
    "progress",
    "workers",
    "hydra",
)
DATASETS = {"locomo": (None,), "longmemeval": ("s", "oracle")}
_ABSENT = object()
CACHE_MODES = ("readwrite", "replay", "off")


class ConfigError(ValueError):
    """A config value is missing or invalid; the message starts with its key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"config key '{key}': {message}")
        self.key = key


@dataclass(frozen=True)
class RunSettings:
    """The validated knobs the runner reads (the method and backbones stay config nodes)."""

    dataset: str
    variant: str | None
    dataset_file: str | None
    subset: SubsetSpec
    template: str | None
    context_budget: int
    #: How the kept items reach the reader: ``time`` (oldest first) or ``rank`` (best first).
    context_order: str
    answer_max_tokens: int
    judge_enabled: bool
    adversarial: str
    batch_size: int
    seed: int
    llm_cache_mode: str
    #: Whether the run needs a backbone: it answers, or its method extracts with an LLM.
    calls_llm: bool
    workers: int


def _get(cfg: DictConfig, key: str) -> Any:
    try:
        value = OmegaConf.select(cfg, key, throw_on_missing=False, default=_ABSENT)
    except OmegaConfBaseException as error:  # e.g. an interpolation that does not resolve
        raise ConfigError(key, f"cannot resolve: {error}") from error
    if value is _ABSENT:
        raise ConfigError(key, "missing")
    return value


def _positive_int(
    cfg: DictConfig, key: str, *, allow_none: bool = False, allow_zero: bool = False
) -> Any:
    value = _get(cfg, key)
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if allow_zero else 1):
        kind = "a non-negative" if allow_zero else "a positive"
        raise ConfigError(
            key, f"expected {kind} integer{' or null' if allow_none else ''}, got {value!r}"
        )
    return value


def _choice(cfg: DictConfig, key: str, choices: tuple[Any, ...]) -> Any:
    value = _get(cfg, key)
    # By type too: 1 == True and 0.0 == False, but neither is a valid boolean setting.
    if not any(type(value) is type(choice) and value == choice for choice in choices):
        raise ConfigError(key, f"expected one of {list(choices)}, got {value!r}")
    return value


def validate(cfg: DictConfig) -> RunSettings:
    """Check every key the runner reads; raise :class:`ConfigError` naming the first bad one."""
    dataset = _choice(cfg, "dataset.name", tuple(DATASETS))
    variant = None if dataset == "locomo" else _choice(cfg, "dataset.variant", DATASETS[dataset])
    if not OmegaConf.select(cfg, "method._target_"):
        raise ConfigError("method._target_", "missing: pick a method, e.g. method=turn_rag_dense")
    if not OmegaConf.select(cfg, "backbone.provider._target_"):
        raise ConfigError(
            "backbone.provider._target_", "missing: pick a backbone, e.g. backbone=embedded"
        )
    subset = SubsetSpec(
        name=str(_get(cfg, "subset.name")),
        conversations=_positive_int(cfg, "subset.conversations", allow_none=True),
        max_questions=_positive_int(cfg, "subset.max_questions", allow_none=True),
        # Optional key (only `regression` sets it), so older subset configs keep their run ids.
        max_sessions=_positive_int(cfg, "subset.max_sessions", allow_none=True)
        if OmegaConf.select(cfg, "subset.max_sessions") is not None
        else None,
        seed=_positive_int(cfg, "seed", allow_zero=True),
    )
    template = _choice(cfg, "answer.template", (*TEMPLATES, None))
    calls_llm = template is not None or OmegaConf.select(cfg, "method.extraction") == "llm"
    workers = _positive_int(cfg, "workers")
    if workers > 1 and calls_llm:
        raise ConfigError(
            "workers",
            f"expected 1 for a run that calls an LLM, got {workers}: worker processes are for "
            "retrieval-only runs of lite methods (answer=none); LLM calls are concurrent already, "
            "batch_size at a time",
        )
    return RunSettings(
        dataset=dataset,
        variant=variant,
        dataset_file=str(_get(cfg, "dataset.file")) if dataset == "locomo" else None,
        subset=subset,
        template=template,
        context_budget=_positive_int(cfg, "answer.context_budget"),
        context_order=_choice(cfg, "answer.order", CONTEXT_ORDERS),
        answer_max_tokens=_positive_int(cfg, "answer.max_tokens", allow_zero=True),
        judge_enabled=_choice(cfg, "judge.enabled", (True, False)),
        adversarial=_choice(cfg, "adversarial", ("exclude", "include")),
        batch_size=_positive_int(cfg, "batch_size"),
        seed=subset.seed,
        llm_cache_mode=_choice(cfg, "llm_cache_mode", CACHE_MODES),
        calls_llm=calls_llm,
        workers=workers,
    )


def run_identity(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config minus locations: what a run's results depend on.

    With ``answer=none`` nothing is answered or judged, so the judge is left out, and so is the
    backbone unless the method builds its memory with it (``extraction: llm``): one
    retrieval-only run of a lite method serves every backbone.
    """
    resolved = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(resolved, dict)
    identity = {key: value for key, value in resolved.items() if key not in LOCATION_KEYS}
    # The default order was the only one before the key existed: runs logged then keep their ids.
    if identity.get("answer", {}).get("order") == "time":
        identity["answer"].pop("order")
    drop_embedder_default(identity)
    if identity.get("answer", {}).get("template") is None:
        identity.pop("judge", None)
        if identity.get("method", {}).get("extraction") != "llm":
            identity.pop("backbone", None)
    return identity


def drop_embedder_default(identity: dict[str, Any]) -> None:
    """Normalized embeddings were the only kind before ``embedder.normalize`` existed: the key at
    its default leaves the identity, so runs logged then keep their ids."""
    embedder = identity.get("embedder")
    if isinstance(embedder, dict) and embedder.get("normalize") is True:
        embedder.pop("normalize")


def run_id(identity: dict[str, Any]) -> str:
    """Short content hash of a run identity: the run directory's name."""
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def check_method_options(method: DictConfig) -> None:
    """Each option of a method config against the type its constructor declares.

    So that ``method.top_k=abc`` fails up front naming its key, instead of deep inside a run (a
    method checks ranges itself; a value of the wrong type may pass them, ``1.5 < 1`` is False).
    Scalar annotations are checked (bool, int, float, str, Literal, unions with None); containers
    and anything else are left to the constructor.
    """
    target = OmegaConf.select(method, "_target_")
    try:
        options = OmegaConf.to_container(method, resolve=True)
    except OmegaConfBaseException as error:
        raise ConfigError("method", f"cannot resolve: {error}") from error
    try:
        constructor = get_class(str(target)).__init__
        parameters = inspect.signature(constructor).parameters
        hints = typing.get_type_hints(constructor)
    except Exception:  # unimportable or unannotated: instantiation will say what is wrong
        return
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    assert isinstance(options, dict)
    for name, value in options.items():
        if str(name).startswith("_"):
            continue
        if name not in parameters:
            if takes_any:
                continue
            raise ConfigError(f"method.{name}", f"{target} has no option {name!r}")
        if name in hints and not _is_instance(value, hints[name]):
            raise ConfigError(f"method.{name}", f"expected {hints[name]}, got {value!r}")


def _is_instance(value: Any, annotation: Any) -> bool:
    """Whether ``value`` fits a scalar annotation (True for annotations not checked here)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_is_instance(value, member) for member in typing.get_args(annotation))
    if origin is typing.Literal:
        return any(type(value) is type(a) and value == a for a in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    return True
