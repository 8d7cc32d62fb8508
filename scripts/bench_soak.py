"""Soak: many requests through one backbone, checking that nothing grows but the work done.

    .venv/bin/python scripts/bench_soak.py [--requests 5000] [--concurrency 64] [--latency 0.02]
                                           [--max-in-flight N] [--check] [--json out.json]

One ``Backbone`` (the OpenAI-compatible provider, a SQLite response cache, the accounting) sends
``--warmup`` requests (not measured: connections opened, threads started), then ``--requests``
distinct requests at ``--concurrency`` to the fake server in its own process
(``tests/fakes/chat_server.py``, answering after ``--latency`` seconds; ``--max-in-flight``
makes it an overloaded server answering 429 beyond that many). After each thousand replies it
samples this process's resident memory, its open file descriptors and the time; the report sets
the last thousand against the first. Targets (``--check`` exits 1 on a miss): resident memory
grows under 10% from the end of the first thousand to the end of the last, open descriptors
do not grow, and the last thousand's throughput is within 10% of the first's.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench_construction import fake_server  # noqa: E402

from memsys.llm import (  # noqa: E402
    Accounting,
    Backbone,
    BackboneSettings,
    LLMRequest,
    ResponseCache,
    RetryPolicy,
)
from memsys.llm.accounting import CallRecord  # noqa: E402
from memsys.llm.providers.openai_compat import OpenAICompatConfig  # noqa: E402

#: Replies between two samples.
SAMPLE_EVERY = 1000


def rss_mb() -> float:
    """This process's resident memory now (``VmRSS``), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def soak(
    base_url: str, count: int, concurrency: int, cache_dir: Path, warmup: int
) -> list[dict[str, float]]:
    """Send ``warmup`` requests (connections opened, threads started, the cache created), then
    ``count`` more; one sample per :data:`SAMPLE_EVERY` of those replies (and one before)."""
    provider = OpenAICompatConfig(model="fake", base_url=base_url, api_key_env=None).build()
    backbone = Backbone(
        provider,
        cache=ResponseCache(cache_dir / "responses.sqlite"),
        accounting=Accounting(ledger=cache_dir / "llm_calls.jsonl"),
        settings=BackboneSettings(concurrency=concurrency, retry=RetryPolicy()),
    )
    requests = [
        LLMRequest(({"role": "user", "content": f"soak request {n}: " + "x" * 400},))
        for n in range(warmup + count)
    ]
    backbone.complete_many(requests[:warmup], stage="warmup")
    samples = [{"replies": 0, "t": time.perf_counter(), "rss_mb": rss_mb(), "fds": open_fds()}]
    replies = 0

    def listener(call: CallRecord) -> None:
        nonlocal replies
        replies += 1
        if replies % SAMPLE_EVERY == 0:
            now = time.perf_counter()
            samples.append({"replies": replies, "t": now, "rss_mb": rss_mb(), "fds": open_fds()})

    with backbone.accounting.listening(listener):
        backbone.complete_many(requests[warmup:], stage="soak")
    backbone.cache.close()
    failed = backbone.accounting.totals()["failed"]
    if failed:
        raise RuntimeError(f"{failed} request(s) failed for good")
    return samples


def report(samples: list[dict[str, float]]) -> dict[str, Any]:
    """The first and last thousand set side by side, with the targets."""
    first, last = samples[1], samples[-1]
    first_rate = SAMPLE_EVERY / (samples[1]["t"] - samples[0]["t"])
    last_rate = SAMPLE_EVERY / (samples[-1]["t"] - samples[-2]["t"])
    figures = {
        "requests": int(last["replies"]),
        "rss_mb_after_first_thousand": round(first["rss_mb"], 1),
        "rss_mb_after_last_thousand": round(last["rss_mb"], 1),
        "rss_growth": round(last["rss_mb"] / first["rss_mb"] - 1, 4),
        "fds_after_first_thousand": int(first["fds"]),
        "fds_after_last_thousand": int(last["fds"]),
        "first_thousand_per_s": round(first_rate, 1),
        "last_thousand_per_s": round(last_rate, 1),
        "throughput_ratio": round(last_rate / first_rate, 3),
        "per_thousand": [
            {
                "replies": int(b["replies"]),
                "per_s": round(SAMPLE_EVERY / (b["t"] - a["t"]), 1),
                "rss_mb": round(b["rss_mb"], 1),
                "fds": int(b["fds"]),
            }
            for a, b in itertools.pairwise(samples)
        ],
    }
    figures["targets_met"] = {
        "rss_growth_under_10pct": figures["rss_growth"] < 0.10,
        "no_fd_growth": figures["fds_after_last_thousand"] <= figures["fds_after_first_thousand"],
        "throughput_within_10pct": abs(figures["throughput_ratio"] - 1) <= 0.10,
    }
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.02, help="the server's seconds a reply")
    parser.add_argument("--max-in-flight", type=int, default=None, help="429 beyond this many")
    parser.add_argument("--warmup", type=int, default=500, help="requests sent before the clock")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    if args.requests < 2 * SAMPLE_EVERY:
        parser.error(f"--requests must be at least {2 * SAMPLE_EVERY}")
    flags = ["--max-in-flight", str(args.max_in_flight)] if args.max_in_flight else []
    with (
        fake_server(args.latency, *flags) as base_url,
        tempfile.TemporaryDirectory() as scratch,
    ):
        samples = soak(base_url, args.requests, args.concurrency, Path(scratch), args.warmup)
    figures = report(samples)
    print(json.dumps(figures, indent=1))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 1 if args.check and not all(figures["targets_met"].values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
