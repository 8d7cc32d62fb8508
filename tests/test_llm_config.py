"""Every backbone config composes and names a real provider; the ``ask`` command works."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from run_helpers import compose_config

from benchmarks.config.services import backbone_config
from benchmarks.config.values import ConfigError
from benchmarks.pipeline.llm_ask import CONF_DIR, compose_ask_config, main
from benchmarks.pipeline.settings import validate
from memsys.llm import Accounting, ProviderUnavailableError, ResponseCache, build_backbone

BACKBONES = sorted(path.stem for path in (CONF_DIR / "backbone").glob("*.yaml"))


def test_the_issue_backbones_exist() -> None:
    assert {"embedded", "qwen2.5-3b", "llama3.2-3b", "gpt-4o-mini"} <= set(BACKBONES)


@pytest.mark.parametrize("name", BACKBONES)
def test_every_backbone_config_instantiates(name: str) -> None:
    cfg = compose_ask_config([f"backbone={name}"])
    if OmegaConf.is_missing(cfg.backbone.provider, "model"):  # generic server config
        cfg.backbone.provider.model = "served-model"
    config = backbone_config(cfg, "backbone")
    assert callable(config.provider.build) and config.name == cfg.backbone.name
    assert config.settings.concurrency >= 1
    assert "api_key" not in cfg.backbone.provider, "keys come from the env var in api_key_env"


@pytest.mark.parametrize("judge", sorted(path.stem for path in (CONF_DIR / "judge").glob("*.yaml")))
@pytest.mark.parametrize("name", BACKBONES)
def test_every_backbone_config_passes_the_runner_checks(name: str, judge: str) -> None:
    """The runner checks every backbone setting up front: none of the shipped ones fails, as
    the answer backbone or the judge's."""
    cfg = compose_config([f"backbone={name}", f"judge={judge}"])
    if OmegaConf.is_missing(cfg.backbone.provider, "model"):  # generic server config
        cfg.backbone.provider.model = "served-model"
    settings = validate(cfg)
    assert settings.backbone is not None
    assert settings.backbone.name == cfg.backbone.name


def test_a_server_backbone_without_a_model_names_the_key() -> None:
    with pytest.raises(ConfigError, match="missing") as raised:
        validate(compose_config(["backbone=openai_server"]))
    assert raised.value.key == "backbone.provider.model"


def test_api_backbone_without_its_key_says_which_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = compose_ask_config(["backbone=gpt-4o-mini"])
    with pytest.raises(ProviderUnavailableError, match="OPENAI_API_KEY"):
        build_backbone(
            backbone_config(cfg, "backbone"),
            cache=ResponseCache.disabled(),
            accounting=Accounting(),
        )


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed")
def test_inprocess_vllm_without_vllm_says_how_to_install_or_serve() -> None:
    cfg = compose_ask_config(["backbone=qwen2.5-3b-inprocess"])
    with pytest.raises(ProviderUnavailableError, match=r"memsys-bench\[vllm\].*serve_vllm\.sh"):
        build_backbone(
            backbone_config(cfg, "backbone"),
            cache=ResponseCache.disabled(),
            accounting=Accounting(),
        )


def test_ask_prints_the_reply_then_one_json_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overrides = [f"cache.path={tmp_path / 'cache.sqlite'}", "max_tokens=16"]
    question = "What is the capital of France? Answer in one word."
    assert main([question, "backbone=embedded", *overrides]) == 0
    first = capsys.readouterr().out.strip().splitlines()
    assert main([question, *overrides]) == 0
    second = capsys.readouterr().out.strip().splitlines()
    assert "Paris" in first[0]
    stats = json.loads(first[-1])
    assert set(stats) == {"model", "prompt_tokens", "completion_tokens", "latency_s", "cached"}
    assert stats["cached"] is False and json.loads(second[-1])["cached"] is True
    assert second[:-1] == first[:-1]


def test_ask_in_replay_mode_fails_cleanly_on_a_miss(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overrides = [f"cache.path={tmp_path / 'cache.sqlite'}", "cache.mode=replay"]
    assert main(["never asked", *overrides]) == 1
    assert "replay mode" in capsys.readouterr().err
