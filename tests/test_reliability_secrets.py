"""No credential in anything the harness writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from reliability_helpers import (
    CORRECT,
    JUDGE,
    QUESTIONS,
    server_backbone,
)
from run_helpers import (
    fixture_overrides,
)

from benchmarks.data.paths import REPO_ROOT
from memsys.llm.fake_server import FakeChatServer

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
            "benchmarks.run",
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
    assert result.returncode == 0, result.stderr
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
