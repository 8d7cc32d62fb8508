"""``scripts/serve_vllm.sh`` with a stand-in ``vllm`` executable (vLLM has no CPU build)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fakes.llm import free_port

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "serve_vllm.sh"


def fake_vllm(bin_dir: Path, body: str) -> dict[str, str]:
    """An environment whose ``vllm`` runs ``body`` (bash; ``$port`` is the requested port)."""
    bin_dir.mkdir()
    executable = bin_dir / "vllm"
    executable.write_text(
        textwrap.dedent(
            """\
            #!/usr/bin/env bash
            while [[ $# -gt 0 ]]; do [[ $1 == --port ]] && port=$2; shift; done
            """
        )
        + body
        + "\n"
    )
    executable.chmod(0o755)
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'tests'}",
        "VLLM_STARTUP_TIMEOUT": "30",
    }


def test_waits_until_the_server_answers(tmp_path: Path) -> None:
    env = fake_vllm(
        tmp_path / "bin",
        f'sleep 0.5; exec {sys.executable} -m fakes.chat_server --port "$port"',
    )
    port = free_port()
    done = subprocess.run(
        ["bash", str(SCRIPT), "Qwen/Qwen2.5-3B-Instruct", str(port)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    pid = int((tmp_path / f"vllm-{port}.pid").read_text())
    try:
        assert done.returncode == 0, done.stderr
        assert f"serving Qwen/Qwen2.5-3B-Instruct at http://127.0.0.1:{port}/v1" in done.stdout
    finally:
        os.kill(pid, signal.SIGTERM)


def test_reports_a_server_that_dies_during_startup(tmp_path: Path) -> None:
    env = fake_vllm(tmp_path / "bin", 'echo "CUDA out of memory" >&2; exit 1')
    done = subprocess.run(
        ["bash", str(SCRIPT), "some/model", str(free_port())],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "exited before answering" in done.stderr and "CUDA out of memory" in done.stderr


@pytest.mark.skipif(
    any((Path(d) / "vllm").exists() for d in os.environ["PATH"].split(os.pathsep)),
    reason="a real vllm is on PATH",
)
def test_without_vllm_says_how_to_install_it(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(SCRIPT), "some/model"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 1 and "memsys-bench[vllm]" in done.stderr


def test_usage_without_arguments() -> None:
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 2 and "serve_vllm.sh MODEL [PORT]" in done.stderr
