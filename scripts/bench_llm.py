"""Benchmarks of the model services: cache-hit overhead, HTTP concurrency, embedding throughput.

    .venv/bin/python scripts/bench_llm.py [--quick] [--check] [--json results.json]

1. Cache-hit overhead: ``Backbone.complete`` on requests already in the SQLite response cache
   (realistic 2 KB prompts, a cache of several thousand entries); target under 1 ms per call.
2. Concurrency: the OpenAI-compatible provider through ``complete_many`` against a local fake
   server (separate process) that answers every request after exactly 200 ms; with concurrency 32
   the ideal is 160 requests/s, the target at least 90% of it.
3. The harness's CPU per request against the plain ``openai`` client's, the same requests to the
   same fake server answering at once (no target: a figure for ``results/bench.md``).
4. Embedding every LoCoMo turn (5,882) with all-MiniLM-L6-v2: first-pass sentences/s, then a
   second pass on the same embedder and a third on a fresh one over the persistent cache, both
   of which must make zero model calls.

``--check`` exits with status 1 when a target is missed; ``--quick`` shrinks every workload.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench_construction import fake_server, warm_up  # noqa: E402

from benchmarks.data import load_locomo  # noqa: E402
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache  # noqa: E402
from memsys.llm import (  # noqa: E402
    Accounting,
    Backbone,
    BackboneSettings,
    Completion,
    LLMRequest,
    ResponseCache,
    SamplingParams,
)
from memsys.llm.providers.openai_compat import OpenAICompatConfig  # noqa: E402

CONTEXT = " ".join(f"[D{i}:1] Caroline said she went hiking with her friends." for i in range(40))


class InstantProvider:
    """Answers at once, so that only the cache path is measured."""

    model_id = "bench:instant"
    endpoint = "bench://instant"

    def generate(self, request: LLMRequest, timeout_s: float) -> Completion:
        return Completion("Caroline went hiking.", 600, 5, "stop")


def bench_cache_hit(workdir: Path, calls: int) -> dict[str, Any]:
    """Per-call wall time of ``complete`` when every request is a cache hit."""
    cache = ResponseCache(workdir / "responses.sqlite")
    backbone = Backbone(InstantProvider(), cache=cache, accounting=Accounting())
    requests = [
        LLMRequest(
            [
                {"role": "system", "content": f"Answer from the context.\n{CONTEXT}"},
                {"role": "user", "content": f"Question {i}: where did Caroline go?"},
            ]
        )
        for i in range(calls)
    ]
    backbone.complete_many(requests)
    timings = []
    for request in requests:
        started = time.perf_counter()
        reply = backbone.complete(request.messages, request.params)
        timings.append(time.perf_counter() - started)
        assert reply.cached
    timings.sort()
    return {
        "calls": calls,
        "cache_entries": len(cache),
        "prompt_chars": sum(len(m["content"]) for m in requests[0].messages),
        "mean_ms": round(1000 * statistics.fmean(timings), 4),
        "p50_ms": round(1000 * timings[len(timings) // 2], 4),
        "p99_ms": round(1000 * timings[int(len(timings) * 0.99)], 4),
        "target_ms": 1.0,
        "ok": statistics.fmean(timings) < 1e-3,
    }


def bench_http_concurrency(requests_total: int, concurrency: int, latency_s: float) -> dict:
    """Throughput of ``complete_many`` over HTTP against a fixed-latency fake server."""
    with fake_server(latency_s) as base_url:
        backbone = http_backbone(base_url, concurrency, ResponseCache.disabled())
        warm_up(backbone, concurrency)
        requests = [
            LLMRequest([{"role": "user", "content": f"question {i}"}])
            for i in range(requests_total)
        ]
        started = time.perf_counter()
        replies = backbone.complete_many(requests)
        elapsed = time.perf_counter() - started
    assert all(reply.text == f"echo: question {i}" for i, reply in enumerate(replies))
    ideal = concurrency / latency_s
    throughput = requests_total / elapsed
    return {
        "requests": requests_total,
        "concurrency": concurrency,
        "server_latency_s": latency_s,
        "elapsed_s": round(elapsed, 3),
        "requests_per_s": round(throughput, 1),
        "ideal_requests_per_s": round(ideal, 1),
        "fraction_of_ideal": round(throughput / ideal, 3),
        "target_fraction": 0.9,
        "ok": throughput >= 0.9 * ideal,
    }


def bench_client_cpu(workdir: Path, requests_total: int, rounds: int, concurrency: int) -> dict:
    """CPU seconds per request of the harness's request path (``complete_many`` with its
    response cache, accounting and retries) against the plain ``openai`` client's
    ``chat.completions.create`` from ``concurrency`` threads, the same requests (a
    3,000-character prompt and a JSON schema) to the same fake server answering at once; the
    two take turns, ``rounds`` each, fresh requests every time, and the median round counts."""
    from concurrent.futures import ThreadPoolExecutor

    import openai

    with fake_server(0.0) as base_url:
        client = openai.OpenAI(api_key="EMPTY", base_url=base_url, max_retries=0)
        backbone = http_backbone(
            base_url, concurrency, ResponseCache(workdir / "client_cpu.sqlite")
        )
        warm_up(backbone, concurrency)
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(lambda r: plain_create(client, r), schema_requests("warm", concurrency)))
            seconds: dict[str, list[float]] = {"plain": [], "harness": []}
            for round_number in range(rounds):
                for side in seconds:
                    requests = schema_requests(f"{side} {round_number}", requests_total)
                    started = time.process_time()
                    if side == "plain":
                        list(pool.map(lambda r: plain_create(client, r), requests))
                    else:
                        backbone.complete_many(requests)
                    seconds[side].append(time.process_time() - started)
    plain, harness = (statistics.median(seconds[side]) for side in ("plain", "harness"))
    return {
        "requests": requests_total,
        "rounds": rounds,
        "concurrency": concurrency,
        "plain_cpu_ms_per_request": round(1000 * plain / requests_total, 3),
        "harness_cpu_ms_per_request": round(1000 * harness / requests_total, 3),
        "harness_over_plain": round(harness / plain, 3),
        "ok": True,
    }


def http_backbone(base_url: str, concurrency: int, cache: ResponseCache) -> Backbone:
    """The harness's request path to the fake server at ``base_url``."""
    provider = OpenAICompatConfig(model="fake", base_url=base_url, api_key_env=None).build()
    return Backbone(
        provider,
        cache=cache,
        accounting=Accounting(),
        settings=BackboneSettings(concurrency=concurrency),
    )


#: A construction-sized request: a JSON schema like the methods' (a list of typed objects).
SCHEMA = {
    "type": "object",
    "properties": {
        "segments": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"start": {"type": "integer"}, "end": {"type": "integer"}},
                "required": ["start", "end"],
            },
        }
    },
    "required": ["segments"],
}


def schema_requests(tag: str, count: int) -> list[LLMRequest]:
    """``count`` distinct requests with a 3,000-character prompt and :data:`SCHEMA`."""
    params = SamplingParams(max_tokens=512, json_schema=SCHEMA)
    return [
        LLMRequest([{"role": "user", "content": f"{tag} {i} " + "turn text " * 300}], params)
        for i in range(count)
    ]


def plain_create(client: Any, request: LLMRequest) -> str:
    """One request through the ``openai`` client as its documentation shows it."""
    reply = client.chat.completions.create(
        model="fake",
        messages=[dict(message) for message in request.messages],
        max_tokens=request.params.max_tokens,
        temperature=request.params.temperature,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "reply", "schema": dict(SCHEMA), "strict": False},
        },
    )
    return reply.choices[0].message.content or ""


def bench_embedding(workdir: Path, texts: list[str]) -> dict[str, Any]:
    """First-pass throughput, then two passes that must not touch the model."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    path = workdir / "embeddings.sqlite"
    first = Embedder(EmbedderConfig(), EmbeddingCache(path))
    load_started = time.perf_counter()
    model = first.model()
    load_s = time.perf_counter() - load_started

    started = time.perf_counter()
    first.encode(texts)
    first_pass_s = time.perf_counter() - started
    calls_after_first = first.model_calls

    started = time.perf_counter()
    first.encode(texts)
    second_pass_s = time.perf_counter() - started
    second_pass_calls = first.model_calls - calls_after_first

    fresh = Embedder(EmbedderConfig(), EmbeddingCache(path), model=model)
    started = time.perf_counter()
    fresh.encode(texts)
    fresh_pass_s = time.perf_counter() - started
    return {
        "texts": len(texts),
        "unique_texts": first.texts_encoded,
        "model_load_s": round(load_s, 2),
        "first_pass_s": round(first_pass_s, 2),
        "first_pass_sentences_per_s": round(first.texts_encoded / first_pass_s, 1),
        "second_pass_s": round(second_pass_s, 4),
        "second_pass_model_calls": second_pass_calls,
        "fresh_process_pass_s": round(fresh_pass_s, 4),
        "fresh_process_model_calls": fresh.model_calls,
        "ok": second_pass_calls == 0 and fresh.model_calls == 0,
    }


def main() -> int:
    """Run all four benchmarks and print (and optionally save) their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller workloads (for CI)")
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()

    turns = [turn.text for conversation in load_locomo() for turn in conversation.turns]
    with tempfile.TemporaryDirectory(prefix="bench_llm_") as scratch:
        workdir = Path(scratch)
        figures = {
            "cache_hit": bench_cache_hit(workdir, 500 if args.quick else 5000),
            "http_concurrency": bench_http_concurrency(
                640 if args.quick else 1600, concurrency=32, latency_s=0.2
            ),
            "client_cpu": bench_client_cpu(
                workdir, 200 if args.quick else 600, rounds=3, concurrency=32
            ),
            "embedding_locomo": bench_embedding(workdir, turns[:500] if args.quick else turns),
        }
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    missed = [name for name, result in figures.items() if not result["ok"]]
    if missed:
        print(f"targets missed: {', '.join(missed)}", file=sys.stderr)
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
