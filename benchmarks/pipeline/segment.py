"""``python -m benchmarks.pipeline.segment segmenter=NAME dataset=dialseg711|tiage|superdialseg [limit=N]``.

Runs one segmenter over one split of a dialogue-segmentation set, appends each dialogue's labels
to ``labels.jsonl`` (resumable: the run directory is a hash of the config minus locations,
``limit`` and ``seed``) and prints the metrics with bootstrap intervals (docs/tables.md).

The ``dataset`` options are registered in Hydra's config store by :func:`register_datasets`,
not written to ``conf/dataset/``, where they would become choices of the QA runner too."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from benchmarks.config.services import backbone_config, embedder_config
from benchmarks.config.values import ConfigError
from benchmarks.data import SEGMENTATION_DATASETS, load_segmentation
from benchmarks.data.segmentation import PRIMARY_SOURCES, SPLIT_ALIASES
from benchmarks.metrics.segmentation import METRIC_NAMES, score_segmentation
from benchmarks.metrics.stats import bootstrap_ci
from benchmarks.pipeline.cli import redact_run_outputs, run_or_exit
from benchmarks.pipeline.packed import LABELS, predictions_file, unpack
from benchmarks.pipeline.provenance import provenance
from benchmarks.pipeline.runlog import RecordLog, exclusive, write_atomically
from benchmarks.pipeline.settings import (
    CACHE_MODES,
    LOCATION_KEYS,
    Paths,
    cache_folder,
    drop_embedder_default,
    drop_server_locations,
    run_id,
    run_paths,
)
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.kvshards import open_kv
from memsys.llm.accounting import Accounting
from memsys.llm.factory import BackboneConfig, build_backbone
from memsys.llm.redact import redact
from memsys.llm.replay import open_response_cache
from memsys.segment import Segmentation, Segmenter
from memsys.segment.build import segmenter_from_config, target_class
from memsys.types import SegmentationDialogue

#: Keys that do not change any label: where things live, how to show them, what to report (and,
#: inside the backbone, where its server is: :func:`~benchmarks.pipeline.settings.drop_server_locations`).
IDENTITY_EXCLUDED = (*LOCATION_KEYS, "limit", "seed", "prepare_batch")


#: Names these options as this runner's in Hydra's config store: they replace ``conf/dataset/``'s
#: choices for it (``memsys-bench segment --help`` lists only these).
PROVIDER = "benchmarks.pipeline.segment"


def register_datasets(store: ConfigStore) -> None:
    """Add ``dataset=<name>`` options ``{name, split: test}`` for every segmentation set."""
    for name in SEGMENTATION_DATASETS:
        store.store(
            group="dataset", name=name, node={"name": name, "split": "test"}, provider=PROVIDER
        )


register_datasets(ConfigStore.instance())


@dataclass(frozen=True)
class SegmentSettings:
    """Everything the runner reads, validated and typed (the segmenter's options are its
    constructor's to check: its config stays a node, instantiated with the services)."""

    dataset: str
    split: str
    limit: int | None
    seed: int
    uses_llm: bool
    prepare_batch: int
    llm_cache_mode: str
    embedder: EmbedderConfig
    #: The LLM segmenter's model; None for a lite segmenter, which calls none.
    backbone: BackboneConfig | None
    paths: Paths
    progress: bool


def _select(cfg: DictConfig, key: str) -> Any:
    value = OmegaConf.select(cfg, key, throw_on_missing=False, default="<absent>")
    if value == "<absent>":
        raise ConfigError(key, "missing")
    return value


def _count(cfg: DictConfig, key: str, *, allow_none: bool = False, minimum: int = 1) -> Any:
    value = _select(cfg, key)
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(key, f"expected an integer >= {minimum}, got {value!r}")
    return value


def validate(cfg: DictConfig) -> SegmentSettings:
    """Check every key the runner reads; raise :class:`ConfigError` naming the first bad one."""
    dataset = _select(cfg, "dataset.name")
    if dataset not in SEGMENTATION_DATASETS:
        expected = list(SEGMENTATION_DATASETS)
        raise ConfigError("dataset.name", f"expected one of {expected}, got {dataset!r}")
    split = str(_select(cfg, "dataset.split"))
    split = SPLIT_ALIASES.get(split, split)
    if (dataset, split) not in PRIMARY_SOURCES:
        splits = sorted(s for d, s in PRIMARY_SOURCES if d == dataset)
        raise ConfigError("dataset.split", f"{dataset} has splits {splits}, not {split!r}")
    if not OmegaConf.select(cfg, "segmenter._target_"):
        raise ConfigError("segmenter._target_", "missing: pick one, e.g. segmenter=texttiling")
    extraction = OmegaConf.select(cfg, "segmenter.extraction", default="lite")
    if extraction not in ("llm", "lite"):
        raise ConfigError("segmenter.extraction", f"expected llm or lite, got {extraction!r}")
    llm_cache_mode = _select(cfg, "llm_cache_mode")
    if llm_cache_mode not in CACHE_MODES:
        raise ConfigError("llm_cache_mode", f"expected one of {list(CACHE_MODES)}")
    backbone = backbone_config(cfg, "backbone") if extraction == "llm" else None
    return SegmentSettings(
        dataset=dataset,
        split=split,
        limit=_count(cfg, "limit", allow_none=True),
        seed=_count(cfg, "seed", minimum=0),
        uses_llm=extraction == "llm",
        prepare_batch=_count(cfg, "prepare_batch"),
        llm_cache_mode=llm_cache_mode,
        embedder=embedder_config(cfg),
        backbone=backbone,
        paths=run_paths(cfg),
        progress=bool(_select(cfg, "progress")),
    )


def segment_identity(cfg: DictConfig, settings: SegmentSettings) -> dict[str, Any]:
    """The resolved config minus :data:`IDENTITY_EXCLUDED`, plus the segmenter class's
    ``version`` (so a behaviour change starts a new run); the backbone only if it is used."""
    resolved = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(resolved, dict)
    identity = {key: value for key, value in resolved.items() if key not in IDENTITY_EXCLUDED}
    identity["dataset"] = {"name": settings.dataset, "split": settings.split}
    try:
        segmenter_class = target_class(cfg.segmenter)
    except Exception as error:  # not importable
        raise ConfigError(
            "segmenter._target_", f"cannot import {cfg.segmenter._target_}"
        ) from error
    identity["segmenter_version"] = segmenter_class.version
    drop_embedder_default(identity)
    drop_server_locations(identity)
    if not settings.uses_llm:
        identity.pop("backbone", None)
    return identity


def dialogue_record(dialogue: SegmentationDialogue, result: Segmentation) -> dict[str, Any]:
    """One dialogue's JSON line: the predicted labels first, then cost and diagnostics."""
    record: dict[str, Any] = {
        "id": dialogue.dialogue_id,
        "labels": list(result.labels),
        "n_utterances": len(dialogue.utterances),
        "cost": result.cost.to_json(),
        "details": dict(result.details),
    }
    if result.annotations:
        record["annotations"] = [dict(annotation) for annotation in result.annotations]
    return record


def summarize(
    dialogues: Sequence[SegmentationDialogue], predictions: Sequence[Sequence[int]], seed: int
) -> dict[str, Any]:
    """Mean of every metric over dialogues, with a 95% bootstrap interval (dialogues resampled)."""
    scores = score_segmentation(
        [(d.boundary_labels, p) for d, p in zip(dialogues, predictions, strict=True)]
    )
    summary: dict[str, Any] = scores.means()
    summary["ci95"] = {}
    for name in METRIC_NAMES:
        interval = bootstrap_ci(getattr(scores, name), seed=seed)
        summary["ci95"][name] = [round(interval.low, 6), round(interval.high, 6)]
    return summary


def fell_back(record: dict[str, Any]) -> bool:
    """Whether a dialogue's labels are (partly) a non-LLM substitute's: its record counts a
    fallback in some LLM stage. Tables mark rows where this holds for many dialogues."""
    return any(record["cost"].get("fallbacks", {}).values())


def total_cost(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Sum of the per-dialogue costs (fallbacks summed by kind)."""
    totals: Counter[str] = Counter()
    fallbacks: Counter[str] = Counter()
    for record in records:
        cost = record["cost"]
        fallbacks.update(cost.get("fallbacks", {}))
        totals.update({k: v for k, v in cost.items() if isinstance(v, int | float)})
    result: dict[str, Any] = {key: round(value, 6) for key, value in sorted(totals.items())}
    result["fallbacks"] = dict(sorted(fallbacks.items()))
    return result


def embedding_counts(segmenter: Segmenter) -> dict[str, int]:
    """Texts this invocation sent to the embedding model (batch ``prepare`` included; cache hits
    are free), and in how many model calls."""
    embedder = segmenter.embedder
    if embedder is None:
        return {"texts_encoded": 0, "model_calls": 0}
    return {"texts_encoded": embedder.texts_encoded, "model_calls": embedder.model_calls}


def build_segmenter(
    cfg: DictConfig, settings: SegmentSettings, accounting: Accounting
) -> Segmenter:
    """The configured segmenter with its services: the cached embedder, the backbone if used."""
    cache_dir = cache_folder(settings.paths)
    embedder = Embedder(
        settings.embedder,
        EmbeddingCache(cache_dir / "embeddings.sqlite"),
        onnx_dir=cache_dir / "onnx",
    )
    backbone = None
    if settings.backbone is not None:
        cache = open_response_cache(
            cache_dir, settings.llm_cache_mode, settings.paths.llm_cache_journal
        )
        backbone = build_backbone(settings.backbone, cache=cache, accounting=accounting)
        backbone = backbone.with_stage("segmentation")
    try:
        segmenter = segmenter_from_config(cfg.segmenter, embedder=embedder, backbone=backbone)
    except Exception as error:  # the constructor's own error; name the key
        target = cfg.segmenter._target_
        raise ConfigError("segmenter", f"cannot instantiate {target}: {error}") from error
    return segmenter


def window_diff(reference: Sequence[int], prediction: Sequence[int]) -> float:
    """WindowDiff of one dialogue, as the benchmark scores it (for SeCom's reflection)."""
    return float(score_segmentation([(reference, prediction)]).wd[0])


def fit_if_needed(
    segmenter: Segmenter, data_dir: Path, cache_dir: Path, run_dir: Path
) -> dict[str, Any] | None:
    """Train on the annotated split the segmenter asks for; the report goes to training.json."""
    request = segmenter.training_request()
    if request is None:
        return None
    training = load_segmentation(request.dataset, request.split, data_dir)[: request.dialogues]
    store = open_kv(cache_dir / "segmenter_guidance.sqlite", table="guidance")
    report = segmenter.fit(training, window_diff=window_diff, store=store)
    write_atomically(run_dir / "training.json", json.dumps(report, indent=2, sort_keys=True))
    return report


def run(cfg: DictConfig) -> dict[str, Any]:
    """Segment (or resume) one configuration's dialogues; return and write the metrics."""
    started = time.perf_counter()
    redact_run_outputs()
    settings = validate(cfg)
    identity = segment_identity(cfg, settings)
    run_dir = settings.paths.results_dir / run_id(identity)
    run_dir.mkdir(parents=True, exist_ok=True)
    with exclusive(run_dir):
        return segment_in(run_dir, cfg, settings, identity, started)


def segment_in(
    run_dir: Path,
    cfg: DictConfig,
    settings: SegmentSettings,
    identity: dict[str, Any],
    started: float,
) -> dict[str, Any]:
    """:func:`run` once ``run_dir`` is held by this process."""
    (run_dir / "config.yaml").write_text(redact(OmegaConf.to_yaml(OmegaConf.create(identity))))
    data_dir, cache_dir = settings.paths.data_dir, settings.paths.cache_dir
    split = load_segmentation(settings.dataset, settings.split, data_dir)
    dialogues = split[: settings.limit] if settings.limit else split
    accounting = Accounting()
    segmenter = build_segmenter(cfg, settings, accounting)
    if predictions_file(run_dir, LABELS).suffix == ".gz":  # a committed, packed run resumed
        unpack(run_dir, LABELS)
    labels = RecordLog(run_dir / LABELS, key="id")
    pending = [d for d in dialogues if d.dialogue_id not in labels]
    if pending:
        fit_if_needed(segmenter, data_dir, cache_dir, run_dir)
    bar = tqdm(
        total=len(dialogues),
        initial=len(dialogues) - len(pending),
        desc=f"{settings.dataset} {run_dir.name}",
        unit="dlg",
        disable=not settings.progress,
        file=sys.stderr,
    )
    for start in range(0, len(pending), settings.prepare_batch):
        chunk = pending[start : start + settings.prepare_batch]
        segmenter.prepare([d.utterances for d in chunk])
        for dialogue in chunk:
            result = segmenter.segment(dialogue.utterances, dialogue.speakers)
            labels.append([dialogue_record(dialogue, result)])
            bar.update(1)
    bar.close()

    records = [labels[d.dialogue_id] for d in dialogues]
    summary: dict[str, Any] = {
        "dataset": settings.dataset,
        "split": settings.split,
        "segmenter": cfg.segmenter._target_,
        "extraction": "llm" if settings.uses_llm else "lite",
        **summarize(dialogues, [r["labels"] for r in records], settings.seed),
        "dialogues_in_split": len(split),
        "limit": settings.limit,
        "segmented_now": len(pending),
        "wall_s": round(time.perf_counter() - started, 3),
        "cost": total_cost(records),
        "dialogues_with_fallback": sum(fell_back(record) for record in records),
        "embedding": embedding_counts(segmenter),
        "replies": segmenter.reply_counts(),
        "accounting": accounting.summary(),
        "repaired_bytes": labels.repaired_bytes,
        "run_dir": str(run_dir),
        "provenance": labels_provenance(run_dir, cfg.segmenter._target_, len(pending)),
    }
    if (run_dir / "training.json").exists():
        summary["training"] = json.loads((run_dir / "training.json").read_text())
    write_references(run_dir / "references.jsonl", dialogues)
    write_atomically(run_dir / "metrics.json", json.dumps(summary, indent=2, sort_keys=True))
    return summary


def labels_provenance(run_dir: Path, segmenter: str, segmented_now: int) -> dict[str, Any]:
    """The code that segmented: this invocation's provenance where it segmented dialogues, else what
    the metrics it rewrites recorded (empty where none: unknown, not stale)."""
    written = run_dir / "metrics.json"
    if segmented_now or not written.exists():
        return provenance(segmenter)
    return dict(json.loads(written.read_text()).get("provenance", {}))


def write_references(path: Path, dialogues: Sequence[SegmentationDialogue]) -> None:
    """Gold labels of the selected dialogues, in the scorer CLI's format."""
    lines = (
        json.dumps({"id": d.dialogue_id, "labels": list(d.boundary_labels)}) for d in dialogues
    )
    write_atomically(path, "".join(f"{line}\n" for line in lines))


@hydra.main(version_base="1.3", config_path="../../conf", config_name="segment")
def main(cfg: DictConfig) -> None:
    """Hydra entry point: run, print the metrics JSON, exit 2 on a clear configuration error."""
    summary = run_or_exit(run, cfg)
    if summary is None:  # a multirun's job failed, and the sweep goes on
        return
    shown = ("dataset", "split", "segmenter", "extraction", *METRIC_NAMES, "n", "ci95", "run_dir")
    print(json.dumps({key: summary[key] for key in shown}, indent=2))


if __name__ == "__main__":
    main()
