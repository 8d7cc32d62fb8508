"""A run's config, checked up front so a bad value fails with the key that holds it, and turned
into typed settings (:class:`RunSettings`: every model as a :class:`~memsys.llm.BackboneConfig`,
the embedder, the method, the paths): the Hydra node is read here, and in :func:`run_identity`,
only. The library (``memsys``) takes the typed values and never sees a config node."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from hydra.utils import get_class
from omegaconf import DictConfig, ListConfig, OmegaConf

from benchmarks.answering.prompts import TEMPLATES
from benchmarks.config.compose import CONF
from benchmarks.config.services import backbone_config, embedder_config
from benchmarks.config.values import (
    ConfigError,
    check_options,
    choice_at,
    number_at,
    plain,
    positive_int,
    value_at,
)
from benchmarks.data.paths import resolve_data_dir, resolve_path
from benchmarks.data.specs import DATASET_SPECS, DatasetSpec
from benchmarks.metrics.judge import PROTOCOLS
from benchmarks.pipeline.subsets import SubsetSpec
from benchmarks.registry import KEY as REGISTRY_KEY
from memsys.base import CONTEXT_ORDERS, MemorySystem
from memsys.embed import BACKENDS, EmbedderConfig
from memsys.kvshards import LAYOUTS, LayoutMismatchError, claim_layout
from memsys.llm.factory import BackboneConfig

#: Keys of where things live, how to show them and how many processes work: not run identity.
LOCATION_KEYS = (
    "data_dir",
    "cache_dir",
    "cache_sharing",
    "results_dir",
    "llm_cache_mode",
    "llm_cache_journal",
    "llm_replies",
    "progress",
    "workers",
    "memories_at_once",
    "executor",
    "hydra",
)
#: Where a backbone's server is: not identity, so a run resumes against a server that moved.
SERVER_LOCATION_KEYS = ("base_url", "base_url_env", "api_key_env")
#: The backbones a run may call: the reader, and the construction model's and judge's own.
BACKBONE_KEYS = ("backbone", "construction.backbone", "judge.backbone")
CACHE_MODES = ("readwrite", "replay", "recorded", "off")
#: ``answer.order``: ``method`` (each method's own order), or one of :data:`CONTEXT_ORDERS`.
ANSWER_ORDERS = ("method", *CONTEXT_ORDERS)


@dataclass(frozen=True)
class Paths:
    """Where a run reads and writes; none of it is part of the run's identity."""

    data_dir: Path
    cache_dir: Path
    #: The cache folder's layout (:data:`memsys.kvshards.LAYOUTS`).
    cache_sharing: str
    results_dir: Path
    #: The file that records every LLM reply used (``llm_cache_journal``); None for none.
    llm_cache_journal: str | None
    #: ``recorded`` mode's replies file (``llm_replies``), resolved; None for none.
    llm_replies: Path | None


#: Where a run's work is done (``conf/executor/``): this machine, or a Ray cluster.
EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Executor:
    """``executor``: ``local`` (``workers`` processes here) or ``ray`` (``workers`` Ray actors
    on the cluster at ``address``, a local one started for the run where it is None)."""

    name: str = "local"
    address: str | None = None
    workers: int = 1
    cpus_per_worker: int = 1
    max_restarts: int = 3


@dataclass(frozen=True)
class RunSettings:
    """Everything the runner reads, validated and typed: after :func:`validate` nothing reads the
    config node. The identity is the resolved config's (:func:`run_identity`), so typing moves no
    run id."""

    dataset: str
    variant: str | None
    dataset_file: str | None
    subset: SubsetSpec
    template: str | None
    context_budget: int
    #: ``time`` (oldest first) or ``rank`` (best first), as :func:`context_order` resolves it.
    context_order: str
    answer_max_tokens: int
    judge_enabled: bool
    #: The judge protocols every answer is scored under, the dataset's own first.
    judge_protocols: tuple[str, ...]
    #: Whether the run grades the probe set: :mod:`benchmarks.metrics.judge_probes`.
    judge_probes: bool
    #: Verdicts asked per answer and protocol (``judge.repeats``); 1 is the evaluators' protocol.
    judge_repeats: int
    #: The temperature of repeats 2..N; None: the protocol's own.
    judge_repeat_temperature: float | None
    adversarial: str
    batch_size: int
    seed: int
    llm_cache_mode: str
    #: ``construction.backbone`` or ``backbone`` (``construction=same``); None for a lite method.
    construction_key: str | None
    workers: int
    #: Memories an llm-mode method on a server builds at once (:mod:`benchmarks.pipeline.memories_ahead`).
    memories_at_once: int
    #: The method's resolved config: what the harness instantiates.
    method: dict[str, Any]
    embedder: EmbedderConfig
    #: The reader; None when the run neither answers nor builds with it (:attr:`needs_reader`).
    backbone: BackboneConfig | None
    #: The model that builds llm-mode memories; None for a lite method.
    construction_backbone: BackboneConfig | None
    #: The judge's own model (``judge.backbone``); None when the reader judges or nothing is judged.
    judge_backbone: BackboneConfig | None
    paths: Paths
    #: Progress bars on stderr.
    progress: bool
    executor: Executor = Executor()

    @property
    def worker_count(self) -> int:
        """Processes building memories and answering: ``workers`` here, or the Ray actors."""
        return self.executor.workers if self.executor.name == "ray" else self.workers

    @property
    def spread(self) -> bool:
        """Whether other processes (local workers or Ray actors) build the memories."""
        return self.worker_count > 1 or self.executor.name == "ray"

    @property
    def spec(self) -> DatasetSpec:
        """The dataset's traits (:mod:`benchmarks.data.specs`)."""
        return DATASET_SPECS[self.dataset]

    @property
    def needs_reader(self) -> bool:
        """Whether ``backbone`` is called: it answers, or it builds the memory."""
        return self.template is not None or self.construction_key == "backbone"

    @property
    def judges(self) -> bool:
        """Whether answers are judged (there are none with ``answer=none``)."""
        return self.template is not None and self.judge_enabled

    @property
    def calls_llm(self) -> bool:
        """Whether the run needs a backbone: it answers, or its method extracts with an LLM."""
        return self.template is not None or self.construction_key is not None


def validate(cfg: DictConfig) -> RunSettings:
    """Check every key the runner reads; raise :class:`ConfigError` naming the first bad one."""
    check_known_keys(cfg)
    dataset = choice_at(cfg, "dataset.name", tuple(DATASET_SPECS))
    spec = DATASET_SPECS[dataset]
    variant = (
        None if None in spec.variants else choice_at(cfg, "dataset.variant", tuple(spec.variants))
    )
    if not OmegaConf.select(cfg, "method._target_"):
        raise ConfigError("method._target_", "missing: pick a method, e.g. method=turn_rag_dense")
    if not OmegaConf.select(cfg, "backbone.provider._target_"):
        raise ConfigError(
            "backbone.provider._target_", "missing: pick a backbone, e.g. backbone=embedded"
        )
    subset = SubsetSpec(
        name=str(value_at(cfg, "subset.name")),
        conversations=positive_int(cfg, "subset.conversations", allow_none=True),
        max_questions=positive_int(cfg, "subset.max_questions", allow_none=True),
        # Optional key (only `regression` sets it), so older subset configs keep their run ids.
        max_sessions=positive_int(cfg, "subset.max_sessions", allow_none=True)
        if OmegaConf.select(cfg, "subset.max_sessions") is not None
        else None,
        seed=positive_int(cfg, "seed", allow_zero=True),
    )
    if OmegaConf.select(cfg, "embedder.backend") is not None:
        choice_at(cfg, "embedder.backend", BACKENDS)
    template = choice_at(cfg, "answer.template", (*TEMPLATES, None))
    judged = template is not None and choice_at(cfg, "judge.enabled", (True, False))
    construction_key = construction_backbone_key(cfg)
    knobs: dict[str, Any] = dict(
        dataset=dataset,
        variant=variant,
        dataset_file=str(value_at(cfg, "dataset.file")) if spec.reads_file else None,
        subset=subset,
        template=template,
        context_budget=positive_int(cfg, "answer.context_budget"),
        context_order=context_order(cfg),
        answer_max_tokens=positive_int(cfg, "answer.max_tokens", allow_zero=True),
        judge_enabled=choice_at(cfg, "judge.enabled", (True, False)),
        judge_protocols=judge_protocols(cfg) if judged else (),
        judge_probes=choice_at(cfg, "judge.probes", (True, False)) if judged else False,
        **judge_repeats(cfg, judged),
        adversarial=choice_at(cfg, "adversarial", ("exclude", "include")),
        batch_size=positive_int(cfg, "batch_size"),
        seed=subset.seed,
        llm_cache_mode=choice_at(cfg, "llm_cache_mode", CACHE_MODES),
        construction_key=construction_key,
        workers=positive_int(cfg, "workers"),
        memories_at_once=positive_int(cfg, "memories_at_once"),
    )
    # The backbones the run calls, each checked (a retrieval-only lite run serves every backbone).
    needs_reader = template is not None or construction_key == "backbone"
    reader = backbone_config(cfg, "backbone") if needs_reader else None
    builder = reader if construction_key == "backbone" else None
    if construction_key == "construction.backbone":
        builder = backbone_config(cfg, construction_key)
    own_judge = judged and value_at(cfg, "judge.backbone", None) is not None
    settings = RunSettings(
        **knobs,
        method=resolved_method(cfg),
        embedder=embedder_config(cfg),
        backbone=reader,
        construction_backbone=builder,
        judge_backbone=backbone_config(cfg, "judge.backbone") if own_judge else None,
        paths=run_paths(cfg),
        progress=choice_at(cfg, "progress", (True, False)),
        executor=executor_settings(cfg),
    )
    replies = settings.paths.llm_replies
    if settings.llm_cache_mode == "recorded" and (replies is None or not replies.is_file()):
        found = "not set" if replies is None else f"no file {replies}"
        raise ConfigError("llm_replies", f"llm_cache_mode=recorded needs a replies file: {found}")
    if settings.spread and settings.calls_llm:
        key = "executor" if settings.executor.name == "ray" else "workers"
        got = "ray" if key == "executor" else settings.workers
        raise ConfigError(
            key,
            f"expected {'local' if key == 'executor' else 1} for a run that calls an LLM, got "
            f"{got}: worker processes are for retrieval-only runs of lite methods (answer=none); "
            "LLM calls are concurrent already, batch_size at a time",
        )
    return settings


def executor_settings(cfg: DictConfig) -> Executor:
    """The ``executor`` group (``local`` where a config has none), each value checked."""
    name = choice_at(cfg, "executor.name", EXECUTORS) if "executor" in cfg else "local"
    if name == "local":
        return Executor()
    address = value_at(cfg, "executor.address", None)
    if address is not None and not isinstance(address, str):
        raise ConfigError(
            "executor.address", f"expected a cluster address or null, got {address!r}"
        )
    return Executor(
        name,
        address,
        positive_int(cfg, "executor.workers"),
        positive_int(cfg, "executor.cpus_per_worker"),
        positive_int(cfg, "executor.max_restarts", allow_zero=True),
    )


def check_known_keys(cfg: DictConfig) -> None:
    """Refuse a top-level key that no config under ``conf/`` declares (``+batchsize=4`` for
    ``batch_size``): it would change the run id and nothing would read it."""
    known = declared_keys(CONF / "config.yaml")
    for key in cfg:
        if key not in known:
            raise ConfigError(
                str(key),
                "unknown key: no config under conf/ declares it, and the runner reads none "
                f"such (a typo? the top-level keys are {sorted(known - {'hydra'})})",
            )


@cache
def declared_keys(primary: Path) -> frozenset[str]:
    """The top-level keys of a runner's config: those of its primary config file, its config
    groups, and those that ``# @package _global_`` overlays beside it set (experiments)."""
    config = yaml.safe_load(primary.read_text(encoding="utf-8")) or {}
    keys = {"hydra", *(key for key in config if key != "defaults")}
    for entry in config.get("defaults", []):
        if isinstance(entry, dict):
            for group in entry:
                name = str(group).removeprefix("override ").split("@", 1)[0]
                if "/" not in name:
                    keys.add(name)
    for overlay in primary.parent.rglob("*.yaml"):
        text = overlay.read_text(encoding="utf-8")
        if text.startswith("# @package _global_"):
            keys.update(key for key in (yaml.safe_load(text) or {}) if key != "defaults")
    return frozenset(keys)


def judge_repeats(cfg: DictConfig, judged: bool) -> dict[str, Any]:
    """``judge.repeats`` (a positive integer, 1 where nothing is judged) and
    ``judge.repeat_temperature`` (null, or a non-negative number, only with repeats > 1)."""
    if not judged:
        return {"judge_repeats": 1, "judge_repeat_temperature": None}
    repeats = positive_int(cfg, "judge.repeats", default=1)
    temperature = None
    if value_at(cfg, "judge.repeat_temperature", None) is not None:
        temperature = float(number_at(cfg, "judge.repeat_temperature", positive=False))
        if repeats == 1:
            raise ConfigError(
                "judge.repeat_temperature", "samples repeats 2..N: it needs judge.repeats > 1"
            )
    return {"judge_repeats": repeats, "judge_repeat_temperature": temperature}


def judge_protocols(cfg: DictConfig) -> tuple[str, ...]:
    """The dataset's own judge protocol, then the other ones of ``judge.protocols``."""
    own = choice_at(cfg, "dataset.judge_protocol", tuple(PROTOCOLS))
    others = value_at(cfg, "judge.protocols")
    if not isinstance(others, ListConfig) or not all(name in PROTOCOLS for name in others):
        raise ConfigError(
            "judge.protocols", f"expected a list of {sorted(PROTOCOLS)}, got {others!r}"
        )
    return tuple(dict.fromkeys([own, *others]))


def construction_backbone_key(cfg: DictConfig) -> str | None:
    """Where the backbone that builds the memory is configured (see
    :attr:`RunSettings.construction_key`)."""
    if OmegaConf.select(cfg, "method.extraction") != "llm":
        return None
    own = OmegaConf.select(cfg, "construction.backbone", default=None)
    return "construction.backbone" if own is not None else "backbone"


def context_order(cfg: DictConfig) -> str:
    """``answer.order``, where ``method`` (the default) means the order the method's class declares,
    so a method whose paper hands over its ranking (CAST) runs as its paper does."""
    order = choice_at(cfg, "answer.order", ANSWER_ORDERS)
    if order != "method":
        return order
    return declared_context_order(str(value_at(cfg, "method._target_")))


def declared_context_order(target: str) -> str:
    """:attr:`MemorySystem.context_order` of the class at ``target``, read from the class alone:
    resolving a run's order must not build its method (an index, a model)."""
    try:
        method = get_class(target)
    except Exception as error:  # Hydra wraps the import error
        raise ConfigError(
            "method._target_", f"cannot import {target!r} to read its context order: {error}"
        ) from error
    if not issubclass(method, MemorySystem):
        raise ConfigError("method._target_", f"expected a MemorySystem class, got {target!r}")
    return method.context_order


def run_identity(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config minus locations and what changes no record: what a run's results
    depend on. With ``answer=none`` the judge leaves it, and the backbone unless it builds the
    memory (one retrieval-only run of a lite method serves every backbone); ``construction``
    leaves it unless it names its own backbone (runs logged before the key keep their ids)."""
    resolved = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(resolved, dict)
    identity = {key: value for key, value in resolved.items() if key not in LOCATION_KEYS}
    # However the config was composed, the registry block is no option of the method.
    (identity.get("method") or {}).pop(REGISTRY_KEY, None)
    record_context_order(identity, context_order(cfg))
    drop_embedder_default(identity)
    drop_server_locations(identity)
    construction_key = construction_backbone_key(cfg)
    if construction_key != "construction.backbone":
        identity.pop("construction", None)
    drop_unused_judge_settings(identity)
    if identity.get("answer", {}).get("template") is None:
        identity.pop("judge", None)
        if construction_key != "backbone":
            identity.pop("backbone", None)
    add_judge_prompt_versions(identity)
    return identity


def record_context_order(identity: dict[str, Any], order: str) -> None:
    """Write the resolved ``order`` as ``answer.order``; ``time`` leaves it out, as it did when
    time was the only order, so runs logged before the key existed keep their ids (and a rank
    run has one id whether ``rank`` was asked for or the method declared it)."""
    answer = identity["answer"]
    if order == "time":
        answer.pop("order", None)
    else:
        answer["order"] = order


def add_judge_prompt_versions(identity: dict[str, Any]) -> None:
    """A judged run's identity holds each of its protocols' prompt version, so a run graded under a
    prompt that has since changed is not resumed as the same run."""
    judge = identity.get("judge")
    if not isinstance(judge, dict) or "protocols" not in judge:
        return
    own = identity.get("dataset", {}).get("judge_protocol")
    names = dict.fromkeys([own, *judge["protocols"]] if own else judge["protocols"])
    judge["prompt_versions"] = {
        name: PROTOCOLS[name].version() for name in names if name in PROTOCOLS
    }


def drop_unused_judge_settings(identity: dict[str, Any]) -> None:
    """Judge settings that change no record leave the identity: ``judge.probes``,
    ``judge.repeats=1``, a null ``judge.repeat_temperature``, and the protocols of a run nothing
    judges."""
    judge = identity.get("judge")
    if isinstance(judge, dict):
        judge.pop("probes", None)
        # One verdict at the protocol's temperature is every run's before repeats existed.
        if judge.get("repeats", 1) == 1:
            judge.pop("repeats", None)
        if judge.get("repeat_temperature") is None:
            judge.pop("repeat_temperature", None)
    judged = (
        isinstance(judge, dict)
        and judge.get("enabled")
        and identity.get("answer", {}).get("template") is not None
    )
    if not judged:
        if isinstance(judge, dict):
            for key in ("protocols", "repeats", "repeat_temperature"):
                judge.pop(key, None)
        identity.get("dataset", {}).pop("judge_protocol", None)


def drop_embedder_default(identity: dict[str, Any]) -> None:
    """``embedder.normalize`` and ``embedder.backend`` at their defaults leave the identity (runs
    logged before they existed keep their ids); ``embedder.device`` and ``embedder.cuda_batch_size``
    always do: where the model runs is not what it computes."""
    embedder = identity.get("embedder")
    if isinstance(embedder, dict):
        embedder.pop("device", None)
        embedder.pop("cuda_batch_size", None)
        for key, default in (("normalize", True), ("backend", "torch")):
            if (
                key in embedder
                and embedder[key] == default
                and type(embedder[key]) is type(default)
            ):
                embedder.pop(key)


def drop_server_locations(identity: dict[str, Any]) -> None:
    """Take :data:`SERVER_LOCATION_KEYS` out of each backbone's provider in ``identity``."""
    for key in BACKBONE_KEYS:
        provider = _nested(identity, f"{key}.provider")
        if isinstance(provider, dict):
            for name in SERVER_LOCATION_KEYS:
                provider.pop(name, None)


def _nested(tree: Any, path: str) -> Any:
    """``tree[a][b]...`` for ``path`` ``a.b...``, or None where a level is not a mapping."""
    for part in path.split("."):
        tree = tree.get(part) if isinstance(tree, dict) else None
    return tree


def run_id(identity: dict[str, Any]) -> str:
    """Short content hash of a run identity: the run directory's name."""
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def resolved_method(cfg: DictConfig) -> dict[str, Any]:
    """The method's config node as plain data, each option resolved (else a :class:`ConfigError`
    naming it)."""
    node = value_at(cfg, "method")
    if not isinstance(node, DictConfig):
        raise ConfigError("method", f"expected a mapping, got {node!r}")
    return {str(name): plain(value_at(node, str(name), named=f"method.{name}")) for name in node}


def cache_folder(paths: Paths) -> Path:
    """The run's cache folder, its layout recorded or checked (:func:`memsys.kvshards.claim_layout`):
    every job sharing a folder must use one layout."""
    try:
        claim_layout(paths.cache_dir, paths.cache_sharing)
    except (LayoutMismatchError, OSError) as error:
        raise ConfigError("cache_sharing", str(error)) from error
    return paths.cache_dir


def run_paths(cfg: DictConfig) -> Paths:
    """Where the run reads and writes, resolved as the runners resolve them (relative paths from
    the repository root)."""
    journal = value_at(cfg, "llm_cache_journal", None)
    sharing = value_at(cfg, "cache_sharing", "sqlite")
    if sharing not in LAYOUTS:
        raise ConfigError("cache_sharing", f"expected one of {', '.join(LAYOUTS)}, got {sharing!r}")
    replies = value_at(cfg, "llm_replies", None)
    return Paths(
        data_dir=resolve_data_dir(value_at(cfg, "data_dir", None)),
        cache_dir=resolve_path(str(value_at(cfg, "cache_dir"))),
        cache_sharing=sharing,
        results_dir=resolve_path(str(value_at(cfg, "results_dir"))),
        llm_cache_journal=None if journal is None else str(journal),
        llm_replies=None if replies is None else resolve_path(str(replies)),
    )


def check_method_options(method: DictConfig | Mapping[str, Any]) -> None:
    """Each option of a method config (its node, or :attr:`RunSettings.method`) against the type its
    constructor declares, so ``method.top_k=abc`` fails up front naming its key."""
    if not isinstance(method, DictConfig):
        method = OmegaConf.create(dict(method))
    try:
        constructor = get_class(str(OmegaConf.select(method, "_target_")))
    except Exception:  # unimportable: instantiation will say what is wrong
        constructor = None
    check_options(method, "method", constructor)
