"""Test doubles for the segmenter tests: a hashing sentence model, a rule-driven LLM provider,
hand-made dialogues, and a tiny segmentation data directory."""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from fakes.llm import FAST_RETRY
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.llm import Accounting, Backbone, BackboneSettings, Completion, LLMRequest, ResponseCache
from memsys.segment.lexical import content_words

#: Two topics, switching after utterance 3 (label 1 on index 3).
PETS_THEN_COOKING = (
    "do you have any pets at home ?",
    "yes , two cats and a dog . the cats sleep all day .",
    "cats are lovely pets . my dog chases the cats around .",
    "our dog is old now , but the cats still play with him .",
    "what did you cook for dinner tonight ?",
    "i cooked pasta with tomato sauce and garlic .",
    "pasta with garlic sauce is my favourite dinner to cook .",
    "next time cook the sauce longer , the tomato gets sweeter .",
)
PETS_THEN_COOKING_LABELS = (0, 0, 0, 1, 0, 0, 0, 0)


class HashingModel:
    """Content words hashed into 64 dimensions, L2-normalized: a fast stand-in for MiniLM."""

    dim = 64

    def encode(self, texts: Sequence[str], **_: object) -> np.ndarray:
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in content_words(text) or ["<empty>"]:
                vectors[row, zlib.crc32(word.encode()) % self.dim] += 1.0
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def get_sentence_embedding_dimension(self) -> int:
        return self.dim


def hashing_embedder() -> Embedder:
    """An embedder over :class:`HashingModel` with an in-memory cache."""
    return Embedder(EmbedderConfig(model="hashing-test"), EmbeddingCache(), model=HashingModel())


class RuleProvider:
    """Answers each request with ``reply(request)`` after ``delay_s``; an exception from
    ``reply`` is raised. Records the requests and how many were in flight at most."""

    model_id = "fake:rules"
    endpoint = "fake://rules"

    def __init__(self, reply: Callable[[LLMRequest], str], delay_s: float = 0.0) -> None:
        self.reply = reply
        self.delay_s = delay_s
        self.requests: list[LLMRequest] = []
        self.peak_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()

    def generate(self, request: LLMRequest, timeout_s: float) -> Completion:
        with self._lock:
            self.requests.append(request)
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
        try:
            time.sleep(self.delay_s)
            return Completion(self.reply(request), prompt_tokens=11, completion_tokens=3)
        finally:
            with self._lock:
                self._in_flight -= 1


def rule_backbone(reply: Callable[[LLMRequest], str]) -> tuple[Backbone, RuleProvider]:
    """A backbone over a :class:`RuleProvider`, no cache, fast retries, one request at a time."""
    provider = RuleProvider(reply)
    backbone = Backbone(
        provider,  # type: ignore[arg-type]
        cache=ResponseCache.disabled(),
        accounting=Accounting(),
        settings=BackboneSettings(concurrency=1, retry=FAST_RETRY),
        stage="segmentation",
    )
    return backbone, provider


def user_text(request: LLMRequest) -> str:
    """The last message of a request."""
    return request.messages[-1]["content"]


def write_segmentation_data(root: Path) -> Path:
    """A data directory with a 4-dialogue DialSeg711 test file and a 3-dialogue TIAGE split each.

    Dialogue ``call_id_k`` of DialSeg711 is :data:`PETS_THEN_COOKING` (topic ids 0/1).
    """
    lines = []
    for k in range(4):
        lines.append(f"call_id_{k}")
        topic_ids = [0] * 4 + [1] * 4
        lines += [f"{t} {u}" for t, u in zip(topic_ids, PETS_THEN_COOKING, strict=True)]
    path = root / "dialseg711" / "tadam" / "en_dataset_reference_2.txt"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tiage = {
        str(k): [[u, "1" if i == 4 else "0"] for i, u in enumerate(PETS_THEN_COOKING[: 5 + k])]
        for k in range(3)
    }
    (root / "tiage" / "official").mkdir(parents=True)
    for split in ("train", "dev", "test"):
        (root / "tiage" / "official" / f"anno_{split}.json").write_text(json.dumps(tiage))
    return root
