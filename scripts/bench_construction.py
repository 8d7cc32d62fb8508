"""Construction at the server's speed: each ``_llm`` method's memory built against a fake server,
its wall time set against the lower bound no schedule can beat.

    .venv/bin/python scripts/bench_construction.py [--conversations conv-26 | all] [--methods ...]
        [--latency 0.2] [--concurrency 32] [--at-once 4] [--json figures.json]

The server (``tests/fakes/chat_server.py``, its own process) answers every request after exactly
``--latency`` seconds with a reply the method can use (``--schema-replies``: the smallest
instance of the request's JSON schema, or a plain reply its text parser accepts), so a method
makes the requests it makes with a good model, not its retry and fallback ones. Each method
builds the conversations' memories with the ``openai_server`` backbone at ``--concurrency``,
``--at-once`` memories under construction at a time as a run builds them
(:mod:`benchmarks.pipeline.memories_ahead`, ``memories_at_once``; the default is the runner's),
in a fresh temporary cache directory (no reply, embedding or parse is cached; the embedding model
and the spaCy pipeline are loaded beforehand and shared, spaCy parsing on its own process as in
a run that builds ahead, :class:`memsys.nlp.ParseProcess`; the server's connections are opened
beforehand, as a run opens them once for all its conversations). One row per method: all the
conversations together.

The lower bound (``bound s``) is the largest of three, each measured in the same run:

* ``calls s`` = ``calls × latency / concurrency``: every slot busy all the time (``calls``: the
  requests sent; ``retries`` counts the attempts the backbone repeated after a transient failure);
* ``chain s`` = ``depth × latency``: ``depth`` is the longest chain of requests each sent only
  after the previous one's reply was read, carried from each reply to the requests sent while it
  is handled (:mod:`memsys.llm.chain`; the provider records the deepest request it sends);
* ``CPU s`` = the CPU seconds of construction (``CPU total s``: every thread of the process,
  embedding, the method's own code and the client's share of each request, building, sending
  and reading it; and the parse process's parsing) divided by the cores the process may use.
  Two kinds of local work may overlap (a parse on one core beside a request's bookkeeping on
  the other), so no sum of per-kind wall times is a bound; but no schedule runs ``C``
  CPU-seconds on ``n`` cores in under ``C / n`` seconds, so this is a true lower bound on this
  machine (the fake server's own CPU, a real server's, is left out; it takes cores from the
  method here, which only lengthens the wall time). It is not always reachable: Python code
  holds the GIL, so the CPU seconds of this process's Python threads add up on one core.

``wall / bound`` is the figure the project targets at <= 1.25 (``bound by`` names the largest
term). ``busy`` is the wall time during which at least one request was in flight; the rest
(``idle``) is local work with no request out. ``request`` is a request's mean round trip as the
method sees it (the server's latency plus the client's and the server's overhead); ``embed`` and
``parse`` are the wall seconds the embedding model and the spaCy pipeline ran (overlapping
requests or not). SeCom is built with ``compression=none``: its offline compressor runs a local
model and is not construction's LLM traffic (only its segmentation calls are).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
#: The fake chat server is test infrastructure, not part of the package: tests/fakes/chat_server.py,
#: run as ``python -m fakes.chat_server`` with tests/ on the server process's path (explicitly here,
#: as pytest puts it there for the tests).
SERVER_PATH = os.pathsep.join([str(REPO), str(REPO / "tests")])


from benchmarks.config.compose import compose_config  # noqa: E402
from benchmarks.config.services import backbone_config, embedder_config  # noqa: E402
from benchmarks.data import load_locomo  # noqa: E402
from benchmarks.pipeline.harness import instantiate_method  # noqa: E402
from benchmarks.pipeline.memories_ahead import MemoriesAhead  # noqa: E402
from benchmarks.render import Table, markdown_row  # noqa: E402
from memsys.base import Services  # noqa: E402
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache  # noqa: E402
from memsys.llm import Accounting, Backbone, Completion, LLMRequest, ResponseCache, chain  # noqa: E402
from memsys.llm.factory import build_backbone  # noqa: E402
from memsys.nlp import NLP, ParseCache, ParseProcess, load_pipeline  # noqa: E402
from memsys.tokens import TokenCounter  # noqa: E402
from memsys.types import Conversation  # noqa: E402

METHODS = ("esmem_llm", "secom_llm", "hingemem_llm", "cast_llm", "fracom_llm")
#: Per-method overrides: what the benchmark leaves out of construction (module docstring).
OVERRIDES = {"secom_llm": ["method.compression=none"]}


class TimedProvider:
    """A provider that records when each of its requests was in flight, and the deepest request
    chain it served (:mod:`memsys.llm.chain`)."""

    def __init__(self, provider: Any) -> None:
        self._provider = provider
        self._lock = threading.Lock()
        self.intervals: list[tuple[float, float]] = []
        self.depth = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._provider, name)

    def generate(self, request: LLMRequest, timeout_s: float) -> Completion:
        depth = chain.depth() + 1  # the sending thread runs at its caller's depth
        with self._lock:
            self.depth = max(self.depth, depth)
        started = time.perf_counter()
        try:
            return self._provider.generate(request, timeout_s)
        finally:
            with self._lock:
                self.intervals.append((started, time.perf_counter()))


def busy_seconds(intervals: Sequence[tuple[float, float]]) -> float:
    """The length of the union of ``intervals``: time with at least one request in flight.

    >>> busy_seconds([(0.0, 1.0), (0.5, 2.0), (3.0, 4.0)])
    3.0
    """
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


@dataclass(frozen=True)
class Figures:
    """One method's construction of a set of conversations."""

    method: str
    conversations: str
    at_once: int
    calls: int
    depth: int
    calls_s: float
    chain_s: float
    cpu_total_s: float
    cpu_s: float
    wall_s: float
    busy_s: float
    request_s: float
    retries: int
    embed_s: float
    parse_s: float

    @property
    def bounds(self) -> dict[str, float]:
        """The three lower bounds by name (module docstring)."""
        return {"calls": self.calls_s, "chain": self.chain_s, "CPU": self.cpu_s}

    @property
    def bound_s(self) -> float:
        return max(self.bounds.values())

    @property
    def wall_per_bound(self) -> float:
        return self.wall_s / self.bound_s if self.bound_s else 0.0

    def cells(self) -> list[Any]:
        """The figures as :data:`TABLE`'s row shows them."""
        bounds = (self.calls_s, self.chain_s, self.cpu_total_s, self.cpu_s, self.bound_s)
        return [
            self.method,
            self.conversations,
            self.at_once,
            self.calls,
            self.depth,
            *(f"{value:.1f}" for value in (*bounds, self.wall_s)),
            f"{self.wall_per_bound:.2f}",
            max(self.bounds, key=self.bounds.__getitem__),
            *(f"{value:.1f}" for value in (self.busy_s, self.wall_s - self.busy_s)),
            f"{self.request_s:.3f}",
            self.retries,
            *(f"{value:.1f}" for value in (self.embed_s, self.parse_s)),
        ]


#: The figures' table, without rows: :func:`main` prints each row as its method finishes.
TABLE = Table(
    header=[
        "method", "conversations", "at once", "calls", "depth", "calls s", "chain s",
        "CPU total s", "CPU s", "bound s", "wall s", "wall / bound", "bound by", "busy s",
        "idle s", "request s", "retries", "embed s", "parse s",
    ],
    rows=[],
    align="llrrrrrrrrrrlrrrrrr",
)  # fmt: skip


@contextmanager
def fake_server(latency_s: float, *flags: str) -> Iterator[str]:
    """The fake server in its own process (so that serving takes no time from the method's
    process), started with ``flags``; yields its base URL."""
    server = subprocess.Popen(
        [sys.executable, "-m", "fakes.chat_server", "--latency", str(latency_s), *flags],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": SERVER_PATH},
    )
    try:
        assert server.stdout is not None
        ready = server.stdout.readline().split()
        if not ready or ready[0] != "READY":
            raise RuntimeError(f"fake server did not start: {ready}")
        yield ready[1]
    finally:
        server.terminate()
        server.wait(timeout=10)


@dataclass(frozen=True)
class Shared:
    """What every build reuses: the server, the loaded models, the settings."""

    base_url: str
    concurrency: int
    at_once: int
    latency_s: float
    embedding_model: Any
    pipeline: Any
    parse_process: ParseProcess


def build(
    shared: Shared, method: str, conversations: Sequence[Conversation], scratch: Path
) -> Figures:
    """Construct the memories of ``conversations`` with ``method`` in the fresh cache dir
    ``scratch``, ``shared.at_once`` at a time."""
    overrides = [
        f"method={method}",
        "backbone=openai_server",
        "backbone.provider.model=fake",
        f"backbone.provider.base_url={shared.base_url}",
        f"backbone.concurrency={shared.concurrency}",
        f"cache_dir={scratch}",
        *OVERRIDES.get(method, []),
    ]
    cfg = compose_config(overrides)
    accounting = Accounting()
    backbone = build_backbone(
        backbone_config(cfg, "backbone"),
        cache=ResponseCache(scratch / "responses.sqlite"),
        accounting=accounting,
    )
    warm_up(backbone, shared.concurrency)
    timed = TimedProvider(backbone.provider)
    backbone.provider = timed
    embedder = Embedder(
        embedder_config(cfg),
        EmbeddingCache(scratch / "embeddings.sqlite"),
        model=shared.embedding_model,
    )
    services = Services(
        embedder=embedder,
        tokens=TokenCounter(),
        backbone=backbone.with_stage("construction"),
        nlp=NLP(
            cache=ParseCache(scratch / "parses.sqlite"),
            pipeline=shared.pipeline,
            process=shared.parse_process,
        ),
        cache_dir=scratch,
    )
    system = instantiate_method(cfg.method, services)

    def construct(conversation: Conversation) -> Any:
        chain.handling(0)  # afresh, also after another memory on this thread (--at-once 1)
        return system.construct(conversation)

    memories = MemoriesAhead(construct, shared.at_once)

    def cpu_seconds() -> float:  # this process's and its parse process's
        return time.process_time() + shared.parse_process.cpu_seconds

    started, cpu_started = time.perf_counter(), cpu_seconds()
    for _ in memories((conversation, None) for conversation in conversations):
        pass
    wall_s = time.perf_counter() - started
    cpu_total_s = cpu_seconds() - cpu_started
    sent = [r for r in accounting.records() if r.stage == "construction" and not r.cached]
    calls = len(sent)
    return Figures(
        method=method,
        conversations=names(conversations),
        at_once=shared.at_once,
        calls=calls,
        depth=timed.depth,
        calls_s=round(calls * shared.latency_s / shared.concurrency, 2),
        chain_s=round(timed.depth * shared.latency_s, 2),
        cpu_total_s=round(cpu_total_s, 2),
        cpu_s=round(cpu_total_s / len(os.sched_getaffinity(0)), 2),
        wall_s=round(wall_s, 2),
        busy_s=round(busy_seconds(timed.intervals), 2),
        request_s=round(sum(end - start for start, end in timed.intervals) / max(1, calls), 4),
        retries=sum(r.attempts for r in sent) - calls,
        embed_s=round(embedder.encode_seconds, 2),
        parse_s=round(services.nlp.parse_seconds, 2),
    )


def names(conversations: Sequence[Conversation]) -> str:
    """``conv-26``, or ``10 conversations``."""
    if len(conversations) == 1:
        return conversations[0].conversation_id
    return f"{len(conversations)} conversations"


def warm_up(backbone: Backbone, concurrency: int) -> None:
    """Open the client's connections (one per slot) before timing, as a run does once for all
    its conversations; these requests are not counted."""
    requests = [
        LLMRequest([{"role": "user", "content": f"warm up {i}"}]) for i in range(concurrency)
    ]
    backbone.complete_many(requests)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--conversations", nargs="+", default=["conv-26"], help="LoCoMo ids, or all"
    )
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--latency", type=float, default=0.2, help="server seconds per reply")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--at-once",
        type=int,
        default=compose_config([]).memories_at_once,
        help="memories under construction at a time (default: the runner's)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    os.environ.pop("VLLM_BASE_URL", None)  # it would override the fake server's URL
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    by_id = {c.conversation_id: c for c in load_locomo()}
    wanted = list(by_id) if args.conversations == ["all"] else args.conversations
    conversations = [by_id[name] for name in wanted]
    embedder = Embedder(EmbedderConfig(), EmbeddingCache())
    figures: list[Figures] = []
    pipeline, parse_process = load_pipeline(), ParseProcess()
    parse_process.start()  # as a run's first long parse starts it, while requests are out
    with fake_server(args.latency, "--schema-replies") as base_url:
        shared = Shared(
            base_url,
            args.concurrency,
            args.at_once,
            args.latency,
            embedder.model(),
            pipeline,
            parse_process,
        )
        print("\n".join(TABLE.markdown_lines()), flush=True)
        for method in args.methods:
            with tempfile.TemporaryDirectory(prefix="bench_construction_") as scratch:
                figures.append(build(shared, method, conversations, Path(scratch)))
            print(markdown_row(figures[-1].cells()), flush=True)
    if args.json:
        rows = [
            {**asdict(f), "bound_s": f.bound_s, "wall_per_bound": round(f.wall_per_bound, 3)}
            for f in figures
        ]
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
