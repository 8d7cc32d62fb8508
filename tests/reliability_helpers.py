"""What the reliability tests share: backbone overrides for the scripted OpenAI-compatible
server (the ``server`` fixture in conftest), the question texts of the tiny fixture, and
helpers that read a run directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fakes.chat_server import FakeChatServer
from fakes.llm import without_timings
from run_helpers import (
    read_ledger,
)

from benchmarks.metrics.official_prompts import mem0_accuracy_prompt

#: One llama.cpp thread: on shared cores, more threads spin against each other and run slower.
EMBEDDED_ONE_THREAD = "backbone.provider.n_threads=1"


def stages(run_dir: Path) -> list[str]:
    return [call["stage"] for call in read_ledger(run_dir)]


def memory_payloads(cache: Path) -> dict[str, Any]:
    """Constructed memories under a cache folder by path, without construction timings."""
    return {
        str(path.relative_to(cache)): without_timings(json.loads(path.read_text())["payload"])
        for path in sorted((cache / "memories").rglob("*.json"))
    }


# A backbone that fails in the middle of a run: an OpenAI-compatible fake server, scripted per
# question, stands in for vLLM or OpenAI.

#: The first line of mem0's judge prompt (LoCoMo's protocol), read from the evaluator's file.
JUDGE = mem0_accuracy_prompt().strip().splitlines()[0]
QUESTIONS = {
    "dog": "What is the name of Ana's dog?",
    "bowl": "When did Ben make his first bowl?",
    "activities": "Which activities do Ana and Ben do in their free time?",
    "beach": "Would Ana enjoy a trip to a dog-friendly beach?",
    "cat": "What is the name of Ben's cat?",
    "5k": "How long did Ana take to run the 5k?",
}
CORRECT = '{"label": "CORRECT"}'


def server_backbone(server: FakeChatServer, api_key_env: str = "null") -> list[str]:
    """Overrides for ``backbone=openai_server`` at the fake server, with quick retries."""
    return [
        "backbone=openai_server",
        "backbone.provider.model=fake",
        f"backbone.provider.base_url={server.base_url}",
        f"backbone.provider.api_key_env={api_key_env}",
        "backbone.concurrency=4",
        "backbone.retry.request_timeout_s=2",
        "+backbone.retry.max_attempts=2",
        "+backbone.retry.initial_backoff_s=0.001",
        "+backbone.retry.max_backoff_s=0.01",
    ]


def by_question(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    names = {text: name for name, text in QUESTIONS.items()}
    return {names[record["question"]]: record for record in records}
