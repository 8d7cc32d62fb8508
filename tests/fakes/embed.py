"""Stand-ins for MiniLM: words hashed into a few dimensions, fast and deterministic (the slow
tests use the real model); one with MiniLM's tokenizer interface and input window."""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Sequence

import numpy as np

from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.segment.lexical import content_words


def plain_words(text: str) -> list[str]:
    """Lowercased words of three letters or more, a plural -s dropped."""
    return [word.removesuffix("s") for word in re.findall(r"[a-z]{3,}", text.lower())]


class HashingModel:
    """A text's words (``words``: content words by default) hashed into ``dim`` dimensions,
    L2-normalized."""

    def __init__(
        self, dim: int = 64, words: Callable[[str], Sequence[str]] = content_words
    ) -> None:
        self.dim = dim
        self.words = words

    def encode(self, texts: Sequence[str], **_: object) -> np.ndarray:
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in self.words(text) or ["<empty>"]:
                vectors[row, zlib.crc32(word.encode()) % self.dim] += 1.0
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def get_sentence_embedding_dimension(self) -> int:
        return self.dim


def hashing_embedder() -> Embedder:
    """An embedder over :class:`HashingModel` with an in-memory cache."""
    return Embedder(EmbedderConfig(model="hashing-test"), EmbeddingCache(), model=HashingModel())


class WordTokenizer:
    """Whitespace words as tokens and two special tokens: MiniLM's tokenizer interface."""

    def num_special_tokens_to_add(self) -> int:
        return 2

    def __call__(self, text: str, **_: object) -> dict[str, list[tuple[int, int]]]:
        return {"offset_mapping": [match.span() for match in re.finditer(r"\S+", text)]}


class WindowedHashingModel(HashingModel):
    """The hashing stand-in for MiniLM with a tokenizer and an input window."""

    tokenizer = WordTokenizer()

    def __init__(self, max_seq_length: int) -> None:
        super().__init__()
        self.max_seq_length = max_seq_length


def windowed_embedder(max_seq_length: int = 256) -> Embedder:
    """An embedder over :class:`WindowedHashingModel` with an in-memory cache."""
    model = WindowedHashingModel(max_seq_length)
    return Embedder(EmbedderConfig(model="hashing-test"), EmbeddingCache(), model=model)
