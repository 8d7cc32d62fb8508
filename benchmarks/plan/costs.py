"""What the plan counts and what a count costs: the stages, a run's extent, one stage's calls and
tokens; the prices, throughputs and completion shares a plan is costed at (:class:`Rates`); one
stage's dollars and hours, and the factors that scale a sample to the whole subset."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from memsys.types import Conversation

#: Pipeline stages in the order the tables show them (as booked by the backbone's accounting).
STAGES = ("construction", "retrieval", "answering", "judging")


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens."""

    prompt: float
    completion: float


@dataclass(frozen=True)
class Throughput:
    """Tokens per second one backbone sustains over a run's concurrent requests."""

    prompt: float
    completion: float


#: Price per backbone ``name``; a name not listed pays :data:`DEFAULT_BACKBONE`'s price.
#: Self-hosted models cost nothing per token (their cost is the GPU hours).
PRICES: dict[str, Price] = {
    "gpt-4o-mini": Price(0.15, 0.60),  # OpenAI's list price, per 1M input / output tokens
    "qwen2.5-3b": Price(0.0, 0.0),
    "llama3.2-3b": Price(0.0, 0.0),
    "smollm2-135m": Price(0.0, 0.0),
    "llamacpp-server": Price(0.0, 0.0),
    "openai-server": Price(0.0, 0.0),
}

#: Assumed throughputs (not measured here): an API at the backbone's 16 concurrent requests;
#: a 3B model served by vLLM on one H100 at 32; SmolLM2 in process on two CPU cores.
THROUGHPUTS: dict[str, Throughput] = {
    "gpt-4o-mini": Throughput(prompt=50_000, completion=1_500),
    "qwen2.5-3b": Throughput(prompt=20_000, completion=2_000),
    "llama3.2-3b": Throughput(prompt=20_000, completion=2_000),
    "smollm2-135m": Throughput(prompt=400, completion=40),
}

DEFAULT_BACKBONE = "gpt-4o-mini"

#: Share of ``max_tokens`` a reply is expected to use, per stage (a guess: a short answer, a
#: one-word JSON verdict, JSON extractions about half their budget).
COMPLETION_SHARES: dict[str, float] = {
    "construction": 0.5,
    "retrieval": 0.5,
    "answering": 0.3,
    "judging": 0.25,
}


@dataclass(frozen=True)
class Rates:
    """Prices, throughputs and completion shares a plan is costed at."""

    prices: Mapping[str, Price] = field(default_factory=lambda: dict(PRICES))
    throughputs: Mapping[str, Throughput] = field(default_factory=lambda: dict(THROUGHPUTS))
    completion_shares: Mapping[str, float] = field(default_factory=lambda: dict(COMPLETION_SHARES))

    def price(self, backbone: str) -> Price:
        return self.prices.get(backbone, self.prices[DEFAULT_BACKBONE])

    def throughput(self, backbone: str) -> Throughput:
        return self.throughputs.get(backbone, self.throughputs[DEFAULT_BACKBONE])


@dataclass(frozen=True)
class Extent:
    """How much of a dataset a run covers: conversations, turns, questions and distinct turn texts
    (what the content caches grow with)."""

    conversations: int = 0
    turns: int = 0
    questions: int = 0
    distinct_texts: int = 0


@dataclass
class ExtentCount:
    """An :class:`Extent` counted conversation by conversation (turn texts by their digest)."""

    conversations: int = 0
    turns: int = 0
    questions: int = 0
    texts: set[bytes] = field(default_factory=set)

    def add(self, conversation: Conversation) -> None:
        self.conversations += 1
        self.turns += len(conversation.turns)
        self.questions += len(conversation.questions)
        self.texts.update(
            hashlib.blake2b(turn.text.encode(), digest_size=12).digest()
            for turn in conversation.turns
        )

    def extent(self) -> Extent:
        return Extent(self.conversations, self.turns, self.questions, len(self.texts))


@dataclass(frozen=True)
class StageCount:
    """One stage's calls and tokens as counted (completion: the ``max_tokens`` bound)."""

    calls: float = 0
    prompt_tokens: float = 0
    completion_bound: float = 0

    def scaled(self, factor: float) -> StageCount:
        return StageCount(
            self.calls * factor, self.prompt_tokens * factor, self.completion_bound * factor
        )


@dataclass(frozen=True)
class StagePlan:
    """One stage of one row, scaled to the whole subset and costed."""

    backbone: str
    calls: float
    prompt_tokens: float
    completion_bound: float
    completion_estimate: float
    hours: float
    dollars_bound: float
    dollars_estimate: float


#: MiniLM's encoding rate on one GPU, texts per second: the lower end of what an H100 encoded
#: LongMemEval turns at (results/bench.md, 2,100-3,200 texts/s).
GPU_ENCODE_RATE = 2100.0


@dataclass(frozen=True)
class LocalWork:
    """The work a run does on this machine's CPUs: texts embedded and parsed (after the content
    caches) and the seconds spent building and retrieving, of which ``encode_seconds`` and
    ``parse_seconds``."""

    encoded: float = 0
    parsed: float = 0
    seconds: float = 0
    encode_seconds: float = 0
    parse_seconds: float = 0

    def scaled(self, by_turns: float, by_encoded: float, by_parsed: float) -> LocalWork:
        """The work of a larger subset: embedding by ``by_encoded``, parsing by ``by_parsed``
        (:func:`content_factor`), the rest by ``by_turns``."""
        cached_seconds = self.encode_seconds + self.parse_seconds
        return LocalWork(
            self.encoded * by_encoded,
            self.parsed * by_parsed,
            (self.seconds - cached_seconds) * by_turns
            + self.encode_seconds * by_encoded
            + self.parse_seconds * by_parsed,
            self.encode_seconds * by_encoded,
            self.parse_seconds * by_parsed,
        )

    def hours(self, workers: int = 1, *, cores: int | None = None, gpu: bool = False) -> float:
        """Wall hours on ``workers`` processes, embedding at :data:`GPU_ENCODE_RATE` where ``gpu``.
        With ``cores`` (a local run) the embedding, already on every core, does not divide and the
        rest divides by ``min(workers, cores)``; with None (a Ray cluster) everything divides by
        ``workers``."""
        encoding = self.encoded / GPU_ENCODE_RATE if gpu else self.encode_seconds
        rest = max(self.seconds - self.encode_seconds, 0.0)
        if cores is None:
            return (encoding + rest) / workers / 3600
        return (encoding + rest / min(workers, cores)) / 3600


@dataclass(frozen=True)
class Growth:
    """The sample's cache work after each of its conversations, cumulative: distinct turn texts
    seen, texts embedded, texts parsed; the curve says how much more slowly than the texts the
    caches' work grows."""

    seen: tuple[int, ...] = ()
    encoded: tuple[float, ...] = ()
    parsed: tuple[float, ...] = ()


def growth_exponent(seen: Sequence[float], done: Sequence[float]) -> float:
    """β of Heaps' law ``done = K · seen^β``, fitted by least squares on the logarithms of the
    points where both are positive, within [0, 1]; 1 (work in proportion to the texts seen)
    where fewer than two points have distinct ``seen``."""
    points = [(math.log(s), math.log(d)) for s, d in zip(seen, done, strict=True) if s > 0 < d]
    if len({x for x, _ in points}) < 2:
        return 1.0
    xs, ys = zip(*points, strict=True)
    slope = float(np.polyfit(xs, ys, 1)[0])
    return min(max(slope, 0.0), 1.0)


def content_factor(
    sample: Extent, full: Extent, seen: Sequence[float], done: Sequence[float]
) -> float:
    """The factor from the sample's cache work to the whole subset's: the ratio of distinct turn
    texts raised to the sample's own growth exponent (:func:`growth_exponent`)."""
    if not sample.distinct_texts:
        return full.turns / sample.turns if sample.turns else 1.0
    return (full.distinct_texts / sample.distinct_texts) ** growth_exponent(seen, done)


def scale_factors(sample: Extent, full: Extent, growth: Growth = Growth()) -> dict[str, float]:
    """Per stage, the factor from the sample to the whole subset: construction by turns, the rest by
    questions, ``encoded`` and ``parsed`` by :func:`content_factor`."""
    by_turns = full.turns / sample.turns if sample.turns else 1.0
    by_questions = full.questions / sample.questions if sample.questions else 1.0
    factors = {stage: by_turns if stage == "construction" else by_questions for stage in STAGES}
    return {
        **factors,
        "encoded": content_factor(sample, full, growth.seen, growth.encoded),
        "parsed": content_factor(sample, full, growth.seen, growth.parsed),
    }


def cost(count: StageCount, stage: str, backbone: str, rates: Rates) -> StagePlan:
    """Dollars and hours of one stage's tokens at ``rates``."""
    estimate = count.completion_bound * rates.completion_shares.get(stage, 1.0)
    price, speed = rates.price(backbone), rates.throughput(backbone)
    seconds = count.prompt_tokens / speed.prompt + estimate / speed.completion
    return StagePlan(
        backbone=backbone,
        calls=count.calls,
        prompt_tokens=count.prompt_tokens,
        completion_bound=count.completion_bound,
        completion_estimate=estimate,
        hours=seconds / 3600,
        dollars_bound=(
            count.prompt_tokens * price.prompt + count.completion_bound * price.completion
        )
        / 1e6,
        dollars_estimate=(count.prompt_tokens * price.prompt + estimate * price.completion) / 1e6,
    )
