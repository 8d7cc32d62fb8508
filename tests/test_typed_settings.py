"""The run's settings are typed all the way down: :func:`validate` returns every model, the
embedder, the method and the paths as plain values, the run's machinery reads those only, and
the library layer (``memsys``) takes typed values without importing Hydra or OmegaConf."""

from __future__ import annotations

import inspect

from run_helpers import compose_config

from benchmarks.config.services import backbone_from_node
from benchmarks.data.paths import resolve_path
from benchmarks.pipeline import harness, workers
from benchmarks.pipeline.settings import Paths, validate
from memsys.embed import EmbedderConfig
from memsys.llm.backbone import BackboneSettings
from memsys.llm.factory import BackboneConfig
from memsys.llm.providers.llamacpp import LlamaCppConfig
from memsys.llm.providers.openai_compat import OpenAICompatConfig
from memsys.llm.retry import RetryPolicy


def test_validate_returns_every_model_typed() -> None:
    cfg = compose_config(
        [
            "method=fracom_llm",
            "backbone=qwen2.5-3b",
            "construction=gpt-4o-mini",
            "judge=llama3.2-3b",
            "embedder=mpnet_dot",
            "cache_dir=somewhere/cache",
        ]
    )
    settings = validate(cfg)
    assert settings.backbone is not None and settings.backbone.name == "qwen2.5-3b"
    assert isinstance(settings.backbone.provider, OpenAICompatConfig)
    assert settings.backbone.provider.model == "Qwen/Qwen2.5-3B-Instruct"
    assert settings.backbone.settings == BackboneSettings(
        concurrency=32, retry=RetryPolicy(request_timeout_s=300)
    )
    builder = settings.construction_backbone
    assert builder is not None and builder.name == "gpt-4o-mini"
    assert builder.settings.retry == RetryPolicy(max_attempts=6, request_timeout_s=60)
    assert settings.judge_backbone is not None and settings.judge_backbone.name == "llama3.2-3b"
    assert settings.embedder == EmbedderConfig(
        model="sentence-transformers/multi-qa-mpnet-base-dot-v1", normalize=False
    )
    assert settings.method["_target_"] == "memsys.methods.fracom.FraCom"
    assert settings.method["extraction"] == "llm"
    assert settings.paths.cache_dir == resolve_path("somewhere/cache")
    assert isinstance(settings.paths, Paths) and settings.paths.llm_cache_journal is None


def test_a_run_gets_only_the_models_it_calls() -> None:
    lite = validate(compose_config(["method=fracom", "answer=none"]))
    assert (lite.backbone, lite.construction_backbone, lite.judge_backbone) == (None, None, None)
    same = validate(compose_config(["method=fracom_llm", "answer=none"]))
    assert same.backbone is not None and same.construction_backbone == same.backbone
    judged_by_reader = validate(compose_config(["method=fracom"]))
    assert isinstance(judged_by_reader.backbone, BackboneConfig)
    assert isinstance(judged_by_reader.backbone.provider, LlamaCppConfig)
    assert judged_by_reader.construction_backbone is None
    assert judged_by_reader.judge_backbone is None  # the reader judges


def test_a_lone_backbone_node_reads_as_a_run_reads_it() -> None:
    cfg = compose_config(["backbone=gpt-4o-mini"])
    assert backbone_from_node(cfg.backbone) == validate(cfg).backbone


def test_the_run_machinery_reads_the_settings_not_the_config() -> None:
    assert list(inspect.signature(harness.build_harness).parameters) == ["settings", "run_dir"]
    assert list(inspect.signature(workers.WorkerPool).parameters) == [
        "workers",
        "settings",
        "run_dir",
    ]
    for module in (harness, workers):
        source = inspect.getsource(module)
        assert "cfg." not in source and "OmegaConf" not in source, module.__name__
