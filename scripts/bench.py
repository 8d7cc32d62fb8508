"""The performance report: every benchmark of the harness, written to ``results/bench.md``.

    .venv/bin/python scripts/bench.py [--quick] [--out results/bench.md]

Sections: the machine (CPU, cores, memory, load average when the report started: figures taken
on a busy machine say so), retrieval latency (BM25 and exact FAISS over the largest LoCoMo
conversation's turns, per query, query embedding excluded), then the output of each benchmark
script as it printed it: model services (cache-hit overhead, HTTP concurrency, embedding
throughput; ``bench_llm.py``), harness overhead per question (``bench_harness.py``), the embedded
backbone against llama-cpp-python used as its docs show, and the reset-per-prompt variant
(``bench_embedded_llm.py``), SeCom's self-information compressor against llama-cpp-python scoring
the same exchanges, and the peak memory of building a conversation with SeCom and with CAST
(``bench_compression.py``),
personalized PageRank (``bench_ppr.py``), segmentation scoring
(``bench_segmentation_scoring.py``), the spaCy parse cache (``bench_parse_cache.py``), LLM
memory construction against a fixed-latency server (``bench_construction.py``), a soak of one
backbone (``bench_soak.py``) and the served inspector in headless Chromium
(``bench_inspector.py``). Each script's docstring says what it measures and how.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = (
    ("Model services", "bench_llm.py", ["--quick"]),
    (
        "Harness overhead per question (dense turn-RAG, all LoCoMo questions)",
        "bench_harness.py",
        [],
    ),
    (
        "Embedded backbone: the harness against llama-cpp-python's default use and the reset variant",
        "bench_embedded_llm.py",
        [],
    ),
    (
        "Self-information compression: SeCom's compressor against plain llama-cpp-python",
        "bench_compression.py",
        [],
    ),
    (
        "Peak memory: building conv-26 with SeCom and with CAST",
        "bench_compression.py",
        ["--memory"],
    ),
    ("Personalized PageRank on the largest LoCoMo graph (CAST)", "bench_ppr.py", []),
    ("Segmentation scoring (SuperDialSeg test)", "bench_segmentation_scoring.py", []),
    ("spaCy parse cache (LongMemEval-S turns)", "bench_parse_cache.py", []),
    (
        "Construction at the server's speed (LLM methods, full LoCoMo, 0.2 s server)",
        "bench_construction.py",
        ["--conversations", "all"],
    ),
    ("Soak: 5,000 requests at concurrency 64 (20 ms server)", "bench_soak.py", []),
    ("The served inspector at full-LoCoMo size (headless Chromium)", "bench_inspector.py", []),
)


def machine() -> list[str]:
    """What the figures were measured on."""
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [
            line.split(":", 1)[1].strip()
            for line in cpuinfo.read_text().splitlines()
            if line.startswith("model name")
        ]
        cpu = names[0] if names else cpu
    memory = ""
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        total_kb = int(meminfo.read_text().split()[1])
        memory = f", {total_kb / 2**20:.1f} GiB memory"
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    return [
        f"- CPU: {cpu}; {len(os.sched_getaffinity(0))} cores usable{memory}",
        f"- Python {platform.python_version()} on {platform.system()} {platform.release()}",
        f"- load average (1, 5, 15 min) when the report started: {load}",
        f"- date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
    ]


def percentiles(seconds: list[float]) -> str:
    ms = sorted(value * 1000 for value in seconds)
    p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
    return f"median {statistics.median(ms):.3f} ms, p90 {p90:.3f} ms, max {ms[-1]:.3f} ms"


def retrieval_latency(repeats: int) -> list[str]:
    """BM25 and FAISS search per query over the largest conversation's turns."""
    from benchmarks.data import load_locomo
    from benchmarks.data.paths import resolve_data_dir
    from memsys.bm25 import BM25Index
    from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache, VectorIndex

    conversations = load_locomo(str(resolve_data_dir()), "locomo/locomo10.json")
    largest = max(conversations, key=lambda c: len(c.turns))
    texts = [f"{turn.speaker}: {turn.text}" for turn in largest.turns]
    queries = [question.question for question in largest.questions]
    with tempfile.TemporaryDirectory() as folder:
        embedder = Embedder(EmbedderConfig(), EmbeddingCache(Path(folder) / "e.sqlite"))
        vectors = embedder.encode(texts)
        query_vectors = embedder.encode(queries)
    started = time.perf_counter()
    bm25 = BM25Index(texts)
    bm25_build = time.perf_counter() - started
    started = time.perf_counter()
    index = VectorIndex.build([str(i) for i in range(len(texts))], vectors)
    faiss_build = time.perf_counter() - started
    timings: dict[str, list[float]] = {"bm25": [], "faiss": []}
    for _ in range(repeats):
        for query, vector in zip(queries, query_vectors, strict=True):
            started = time.perf_counter()
            bm25.search(query, 10)
            timings["bm25"].append(time.perf_counter() - started)
            started = time.perf_counter()
            index.search(np.asarray(vector)[None, :], 10)
            timings["faiss"].append(time.perf_counter() - started)
    return [
        f"{largest.conversation_id}: {len(texts)} turns, {len(queries)} questions × {repeats}, top-10",
        f"- BM25 (rank-bm25 scores, numpy top-k): build {bm25_build * 1000:.1f} ms; "
        f"{percentiles(timings['bm25'])} per query",
        f"- FAISS exact inner product ({vectors.shape[1]} dims): build {faiss_build * 1000:.1f} ms; "
        f"{percentiles(timings['faiss'])} per query",
    ]


def script_output(name: str, arguments: list[str]) -> list[str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / name), *arguments],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    text = (done.stdout.strip() or done.stderr.strip()[-2000:]).splitlines()
    status = "" if done.returncode == 0 else f" (exit status {done.returncode})"
    command = " ".join(["scripts/" + name, *arguments])
    return [f"`{command}`{status}, {time.perf_counter() - started:.0f} s:", "", "```", *text, "```"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "results" / "bench.md")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    lines = ["# Performance report", "", "Written by `scripts/bench.py`.", "", "## Machine", ""]
    lines += machine()
    lines += ["", "## Retrieval latency", ""] + retrieval_latency(args.repeats)
    for title, name, arguments in SCRIPTS:
        print(f"running {name} ...", file=sys.stderr)
        lines += ["", f"## {title}", ""] + script_output(name, arguments)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
