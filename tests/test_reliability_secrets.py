"""No credential in anything the harness writes; where a server is is no part of a run's
identity."""

from __future__ import annotations

import base64
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakes.chat_server import FakeChatServer
from reliability_helpers import (
    CORRECT,
    JUDGE,
    QUESTIONS,
    server_backbone,
)
from run_helpers import (
    compose_config,
    fixture_overrides,
)

from benchmarks.data.paths import REPO_ROOT
from benchmarks.pipeline.run import run
from benchmarks.pipeline.settings import run_id, run_identity
from memsys.llm.providers.openai_compat import OpenAICompatConfig
from memsys.llm.redact import RedactFilter, redact

pytestmark = pytest.mark.usefixtures("no_env_overrides")

# No credential in anything the harness writes.

PLANTED_KEY = "sk-planted-RELIABILITY-7c1d9e3f5a2b4c6d8e0f"


def test_no_api_key_in_any_file_a_full_cli_run_writes(
    tmp_path: Path, server: FakeChatServer
) -> None:
    server.on(QUESTIONS["dog"], "500")  # an error message in the log, too
    server.on(JUDGE, reply=CORRECT)
    hydra_dir = tmp_path / "hydra"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.pipeline.run",
            *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
            "method=turn_rag_bm25",
            *server_backbone(server, api_key_env="OPENAI_API_KEY"),
            f"hydra.run.dir={hydra_dir}",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OPENAI_API_KEY": PLANTED_KEY},
    )
    assert result.returncode == 2, result.stderr  # the failed question: the run is incomplete
    assert "error: incomplete run" in result.stderr  # with its rerun command, no secret in it
    assert "failures: answer 1, judge 0" in result.stdout
    assert server.authorization_headers, "the backbone never reached the server"
    assert set(server.authorization_headers) == {f"Bearer {PLANTED_KEY}"}, "the key was sent"
    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    names = {path.name for path in written}
    assert {"predictions.jsonl", "metrics.json", "llm_calls.jsonl", "config.yaml"} <= names
    assert "llm_responses.sqlite" in names and (hydra_dir / ".hydra" / "config.yaml").exists()
    for path in written:
        assert PLANTED_KEY.encode() not in path.read_bytes(), path
    assert PLANTED_KEY not in result.stdout + result.stderr


# No credential from an endpoint URL (user info or a key in the query) in anything written, yet
# the request goes out with it; and where the server is is no part of a run's identity.

URL_SECRET = "SECRET-in-url-5e8b0c2d"


def with_credentials(base_url: str) -> str:
    """``base_url`` with basic-auth user info and a key in the query, both holding the secret."""
    return base_url.replace("http://", f"http://user:{URL_SECRET}@") + f"?api_key={URL_SECRET}"


def at_server(server: FakeChatServer, base_url: str) -> list[str]:
    """:func:`server_backbone` with ``base_url`` (quoted for Hydra) in place of the server's."""
    overrides = server_backbone(server)
    return [item.replace(server.base_url, f"'{base_url}'") for item in overrides]


@pytest.mark.parametrize("source", ["override", "VLLM_BASE_URL", "multirun"])
def test_no_url_credential_in_any_file_or_output_of_a_cli_run(
    tmp_path: Path, server: FakeChatServer, source: str
) -> None:
    server.on(QUESTIONS["dog"], "500")  # an error message naming the endpoint, too
    server.on(JUDGE, reply=CORRECT)
    secret_url = with_credentials(server.base_url)
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if source == "VLLM_BASE_URL":  # openai_server reads it in place of backbone.provider.base_url
        environment["VLLM_BASE_URL"] = secret_url
        backbone = at_server(server, "http://127.0.0.1:9/v1")
    else:
        backbone = at_server(server, secret_url)
    hydra_dir = tmp_path / "hydra"
    # A sweep: Hydra's launcher prints each job's overrides before the job runs.
    sweep = source == "multirun"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.pipeline.run",
            *(["--multirun"] if sweep else []),
            *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
            "method=turn_rag_bm25",
            *backbone,
            f"hydra.{'sweep' if sweep else 'run'}.dir={hydra_dir}",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
    )
    assert result.returncode == 2, result.stderr  # the failed question: the run is incomplete
    assert "error: incomplete run" in result.stderr  # with its rerun command, no secret in it
    assert "failures: answer 1, judge 0" in result.stdout
    basic = "Basic " + base64.b64encode(f"user:{URL_SECRET}".encode()).decode()
    assert set(server.authorization_headers) == {basic}, "the real URL was not used"
    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert {"run.log", "overrides.yaml", "hydra.yaml"} <= {path.name for path in written}
    for path in written:
        assert URL_SECRET.encode() not in path.read_bytes(), path
    assert URL_SECRET not in result.stdout + result.stderr


def test_the_server_location_is_no_part_of_a_run_id() -> None:
    def identity_at(port: int) -> dict[str, Any]:
        url = f"http://127.0.0.1:{port}/v1"
        return run_identity(
            compose_config(
                [
                    "backbone=openai_server",
                    "backbone.provider.model=fake",
                    f"backbone.provider.base_url={url}",
                    f"backbone.provider.api_key_env=KEY_{port}",
                    "judge=qwen2.5-3b",
                    f"judge.backbone.provider.base_url={url}",
                    f"judge.backbone.provider.base_url_env=JUDGE_URL_{port}",
                ]
            )
        )

    first, second = identity_at(8000), identity_at(8001)
    assert run_id(first) == run_id(second)
    assert first["backbone"]["provider"]["model"] == "fake", "what answers stays in it"
    assert "base_url" not in first["backbone"]["provider"]
    assert "base_url" not in first["judge"]["backbone"]["provider"]


def test_backbones_without_a_server_keep_their_run_ids() -> None:
    """Run ids do not depend on server locations: results logged at one address resume at
    another. (Judged runs were re-pinned when answers began to be graded under several judge
    protocols, and again when the identity began to hold each protocol's prompt version, as
    mem0 and longmemeval became their evaluators' own texts: their records changed;
    retrieval-only ids never moved, until TurnRAG's depth became every item, ``top_k: null``,
    issue 62.)"""
    pinned = {
        ("method=turn_rag_bm25",): "3a4243598318",
        ("method=turn_rag_bm25", "judge=embedded"): "09975031c42b",
        ("method=turn_rag_bm25", "backbone=qwen2.5-3b-inprocess"): "1e133593f4d8",
        ("method=turn_rag_bm25", "answer=none"): "8ce7ad7853b1",
    }
    # The runs were pinned on the smoke subset of 40 questions, its size until it became 20.
    for overrides, expected in pinned.items():
        config = compose_config([*overrides, "subset.max_questions=40"])
        assert run_id(run_identity(config)) == expected, overrides


def test_a_rerun_against_a_server_on_another_port_resumes(
    tmp_path: Path, server: FakeChatServer
) -> None:
    fixture = [*fixture_overrides(tmp_path / "runs", tmp_path / "cache"), "method=turn_rag_bm25"]
    server.on(QUESTIONS["dog"], "500")
    server.on(JUDGE, reply=CORRECT)
    first = run(compose_config([*fixture, *server_backbone(server)]))
    with FakeChatServer() as moved:
        moved.on(JUDGE, reply=CORRECT)
        second = run(compose_config([*fixture, *server_backbone(moved)]))
        assert moved.request_count > 0, "the failed question was asked again, at the new port"
    assert second["run_dir"] == first["run_dir"]
    assert second["invocation"]["retried"] == 1
    assert second["failures"] == {"answer": 0, "judge": 0}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://user:pw@host:8000/v1", "http://***@host:8000/v1"),
        ("POST https://u:p@w@host/v1/chat 200", "POST https://***@host/v1/chat 200"),
        ("url=http\\://user\\:pw@host\\:1/v1 seed=0", "url=http\\://***@host\\:1/v1 seed=0"),
        ("'http://h/v1?api_key=K&x=1#f'", "'http://h/v1?api_key=***&x=1#f'"),
        ("http://h/v1?x=1&Token=T", "http://h/v1?x=1&Token=***"),
        ("http://127.0.0.1:9/v1,mail=a@b.c/x", "http://127.0.0.1:9/v1,mail=a@b.c/x"),
        ("see http://h/v1?keys=1, or mail a@b.c", "see http://h/v1?keys=1, or mail a@b.c"),
    ],
)
def test_redact_masks_the_credentials_of_every_url(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_log_records_and_the_endpoint_show_no_url_credential(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret_url = with_credentials("http://127.0.0.1:9/v1")
    provider = OpenAICompatConfig(model="m", base_url=secret_url, api_key_env=None).build()
    assert URL_SECRET not in provider.endpoint and "127.0.0.1:9/v1" in provider.endpoint
    caplog.handler.addFilter(RedactFilter())
    try:
        raise ValueError(f"cannot reach {secret_url}")
    except ValueError:
        logging.getLogger("benchmarks.test").exception("request to %s failed", secret_url)
    assert caplog.records and URL_SECRET not in caplog.text
