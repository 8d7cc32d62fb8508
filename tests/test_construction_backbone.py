"""The construction model is its own backbone: llm-mode memories are built by it (and queries
analysed by it: it is the memory system's model), cached by it, and reused by every reader; the
reader and the judge stay separate."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.chat_server import FakeChatServer
from run_helpers import compose_config, fixture_overrides

from benchmarks.config.values import ConfigError
from benchmarks.pipeline.run import run
from benchmarks.pipeline.settings import run_id, run_identity, validate

pytestmark = pytest.mark.usefixtures("no_env_overrides")


@pytest.fixture
def builder() -> Iterator[FakeChatServer]:
    with FakeChatServer() as running:
        yield running


def at(group: str, server: FakeChatServer, model: str) -> list[str]:
    """Overrides pointing the backbone of ``group`` (``backbone`` or ``construction``) at
    ``server`` as ``model``."""
    key = "backbone" if group == "backbone" else f"{group}.backbone"
    return [
        f"{group}=openai_server",
        f"{key}.provider.model={model}",
        f"{key}.provider.base_url={server.base_url}",
        f"{key}.provider.api_key_env=null",
    ]


def test_construction_same_keeps_the_run_ids_of_before() -> None:
    for overrides in (["method=fracom_llm"], ["method=fracom_llm", "answer=none"], []):
        same = compose_config(overrides)
        assert "construction" not in run_identity(same)
        assert run_id(run_identity(same)) == run_id(
            run_identity(compose_config([*overrides, "construction=same"]))
        )


def test_a_memory_built_by_one_model_is_reused_by_every_reader(
    tmp_path: Path, builder: FakeChatServer, server: FakeChatServer
) -> None:
    common = [
        *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
        "method=fracom_llm",
        "+subset.max_sessions=1",
        "judge=none",
        *at("construction", builder, "builder"),
    ]
    first = run(compose_config([*common, *at("backbone", server, "reader-a")]))
    built = builder.request_count
    assert built > 0 and server.request_count == first["questions"], "the reader only answered"
    assert first["construction"]["built"] == 1
    # The memory system's own query analysis (FraCom's query extraction) is the builder's too.
    stages = first["accounting"]["stages"]
    assert stages["construction"]["calls"] + stages["retrieval"]["calls"] == built

    second = run(compose_config([*common, *at("backbone", server, "reader-b")]))
    assert second["run_dir"] != first["run_dir"]
    assert (second["construction"]["built"], second["construction"]["loaded"]) == (0, 1)
    assert builder.request_count == built, "the memory was built again"

    retrieval_only = [*common, "answer=none"]
    identity = run_identity(compose_config([*retrieval_only, *at("backbone", server, "x")]))
    assert "backbone" not in identity and identity["construction"]["backbone"]["name"]
    assert run_id(identity) == run_id(
        run_identity(compose_config([*retrieval_only, *at("backbone", server, "y")]))
    )


def test_the_construction_backbone_is_checked_only_when_it_builds() -> None:
    broken = ["construction=llamacpp_server", "construction.backbone.concurrency=0"]
    with pytest.raises(ConfigError) as raised:
        validate(compose_config(["method=fracom_llm", *broken]))
    assert raised.value.key == "construction.backbone.concurrency"
    validate(compose_config(["method=fracom", *broken]))  # a lite method builds with no model
