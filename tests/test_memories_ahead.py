"""``memories_at_once``: an llm-mode method on a server builds several conversations' memories at
once; the backbone's ``concurrency`` bounds their requests together; what the run logs and the
memories it stores are the ones a serial run produces."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fakes.chat_server import FakeChatServer
from fakes.llm import Jittered, make_backbone, without_timings
from run_helpers import FIXTURE, compose_config, fixture_overrides, read_records, stable

from benchmarks.pipeline.memories_ahead import builds_ahead
from benchmarks.pipeline.run import run
from memsys.llm.flow import RequestFlow
from memsys.llm.types import Completion, LLMRequest

pytestmark = pytest.mark.usefixtures("no_env_overrides")

CONVERSATIONS = ("tiny-a", "tiny-b", "tiny-c")


class Slow:
    """A provider answering every request after ``delay_s``."""

    model_id = "slow"
    endpoint = "slow://"

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def generate(self, request: LLMRequest, timeout_s: float) -> Completion:
        time.sleep(self.delay_s)
        return Completion(text="ok", prompt_tokens=1, completion_tokens=1)


class InProcess(Slow):
    """A model running in this process (llama.cpp, vLLM)."""

    in_process = True


@pytest.fixture
def slow_server() -> Iterator[FakeChatServer]:
    """A server answering each request validly after half a second, so requests overlap."""
    with FakeChatServer(latency_s=0.5, schema_replies=True) as running:
        yield running


def test_requests_from_several_flows_share_the_backbones_slots() -> None:
    """Three flows of eight requests each on a backbone of concurrency 2: never more than two
    requests at the provider at once (each flow alone would send eight)."""
    provider = Jittered(Slow(0.02))
    backbone = make_backbone(provider, concurrency=2)  # type: ignore[arg-type]
    replies: list[int] = []

    def chain(flow_number: int) -> None:
        with RequestFlow[int](backbone) as flow:
            for i in range(8):
                message = {"role": "user", "content": f"flow {flow_number} request {i}"}
                flow.submit(i, LLMRequest((message,)))
            replies.extend(tag for tag, _ in flow)

    threads = [threading.Thread(target=chain, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(replies) == 24
    assert provider.peak_in_flight == 2


def three_conversations(folder: Path) -> Path:
    """A LoCoMo file of three copies of the tiny conversation, each with its own words (so that
    no request of one is a cached reply of another); returns the data folder."""
    (tiny,) = json.loads((FIXTURE / "locomo" / "tiny_conversation.json").read_text())
    copies = []
    for name in CONVERSATIONS:
        copy = json.loads(json.dumps(tiny))
        copy["sample_id"] = name
        for key, turns in copy["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                for turn in turns:
                    turn["text"] = f"{turn['text']} ({name})"
        copies.append(copy)
    (folder / "locomo").mkdir(parents=True)
    (folder / "locomo" / "three.json").write_text(json.dumps(copies))
    return folder


def run_against(
    server: FakeChatServer, tmp_path: Path, at_once: int, concurrency: int
) -> dict[str, Any]:
    data = tmp_path / "data"
    if not data.exists():
        three_conversations(data)
    folder = tmp_path / f"at_once_{at_once}_concurrency_{concurrency}"
    overrides = [
        *fixture_overrides(folder / "runs", folder / "cache"),
        f"data_dir={data}",
        "dataset.file=locomo/three.json",
        "method=hingemem_llm",
        "answer=none",
        "backbone=openai_server",
        "backbone.provider.model=fake",
        f"backbone.provider.base_url={server.base_url}",
        "backbone.provider.api_key_env=null",
        f"backbone.concurrency={concurrency}",
        f"memories_at_once={at_once}",
        "batch_size=1",  # its query analysis at retrieval: one request at a time
    ]
    before = server.peak_in_flight
    server.peak_in_flight = 0
    summary = run(compose_config(overrides))
    summary["peak_in_flight"], server.peak_in_flight = server.peak_in_flight, before
    summary["memories"] = {  # a memory's report may time its construction: timings left out
        path.name: without_timings(json.loads(path.read_text())["payload"])
        for path in sorted((folder / "cache" / "memories").rglob("*.json"))
    }
    return summary


def test_memories_built_at_once_are_the_ones_built_one_at_a_time(
    tmp_path: Path, slow_server: FakeChatServer
) -> None:
    """HingeMem (llm) asks one request per session: one memory at a time keeps two requests out
    (the fixture has two sessions), three at once up to six; the records and the stored memories
    are the same, and concurrency still bounds the requests out across the memories."""
    serial = run_against(slow_server, tmp_path, at_once=1, concurrency=8)
    together = run_against(slow_server, tmp_path, at_once=3, concurrency=8)
    bounded = run_against(slow_server, tmp_path, at_once=3, concurrency=2)
    assert serial["construction"]["built"] == together["construction"]["built"] == 3
    assert serial["peak_in_flight"] == 2
    assert together["peak_in_flight"] > 2
    assert bounded["peak_in_flight"] == 2
    assert len(serial["memories"]) == 3
    assert serial["memories"] == together["memories"] == bounded["memories"]
    records = [
        [stable(record) for record in read_records(Path(summary["run_dir"]))]
        for summary in (serial, together, bounded)
    ]
    assert [record["conversation_id"] for record in records[0]] == [
        name for name in CONVERSATIONS for _ in range(6)
    ]
    assert records[0] == records[1] == records[2]


def test_a_model_in_this_process_builds_one_memory_at_a_time() -> None:
    """llama.cpp in process serves one request at a time and must not be left on a daemon
    thread at exit: the setting does not apply (nor to lite methods, which call no LLM)."""

    def harness(provider: Slow, construction_key: str | None) -> Any:
        services = SimpleNamespace(backbone=make_backbone(provider))  # type: ignore[arg-type]
        return SimpleNamespace(
            services=services, settings=SimpleNamespace(construction_key=construction_key)
        )

    assert builds_ahead(harness(Slow(0), "backbone")) is True
    assert builds_ahead(harness(Slow(0), None)) is False
    assert builds_ahead(harness(InProcess(0), "backbone")) is False
