"""What every compressor shares: passages in, index texts out, each passage compressed once.

A :class:`Passage` is what one compression call reads: the speaker lines of one exchange (or one
turn) and the speaker labels that must survive it, as SeCom's released code compresses each
``[human]: ...\\n[bot]: ...`` exchange on its own with those role markers forced
(:mod:`memsys.compression.passages` builds them from turns).
"""

from __future__ import annotations

import json
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from memsys.kvstore import SQLiteKV, content_key


class CompressorUnavailableError(RuntimeError):
    """The compressor's package or model is missing; the message says how to get it."""


@dataclass(frozen=True)
class Passage:
    """One unit of compression: its text, and the markers (speaker labels) kept whatever the
    compressor thinks of them."""

    text: str
    markers: tuple[str, ...] = ()


class Compressor(ABC):
    """Turns passages into index texts; ``texts_compressed`` and ``seconds`` count the work that
    reached a model (cache hits are free)."""

    kind: ClassVar[str]

    def __init__(self) -> None:
        self.texts_compressed = 0
        self.seconds = 0.0

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """Everything that changes an output (JSON values)."""

    @abstractmethod
    def compress_many(self, passages: Sequence[Passage]) -> list[str]:
        """The compressed texts, in order."""


class IdentityCompressor(Compressor):
    """No compression: the index text is the text (``compression: none``)."""

    kind = "none"

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def compress_many(self, passages: Sequence[Passage]) -> list[str]:
        return [passage.text for passage in passages]


class CachedCompressor(Compressor):
    """A model-based compressor whose results are cached by (identity, passage)."""

    def __init__(self, *, rate: float, store: SQLiteKV | None = None) -> None:
        super().__init__()
        if not 0.0 < rate <= 1.0:
            raise ValueError(f"compression rate must be in (0, 1], got {rate}")
        self.rate = rate
        self.store = store
        self._memory: dict[str, str] = {}
        # One caller at a time: memories built at once in threads share the local model.
        self._lock = threading.Lock()

    @abstractmethod
    def compress_new(self, passages: Sequence[Passage]) -> list[str]:
        """Compress passages that are in no cache."""

    def compress_many(self, passages: Sequence[Passage]) -> list[str]:
        """Each distinct passage reaches the model once per cache (memory, then SQLite)."""
        with self._lock:
            return self._compress_many(passages)

    def _compress_many(self, passages: Sequence[Passage]) -> list[str]:
        prefix = json.dumps(self.identity(), sort_keys=True)
        keys = [
            content_key(prefix, json.dumps([passage.text, list(passage.markers)]))
            for passage in passages
        ]
        missing = [key for key in dict.fromkeys(keys) if key not in self._memory]
        if missing and self.store is not None:
            stored = self.store.get_many(missing)
            self._memory.update((key, value.decode()) for key, value in stored.items())
        todo = {key: p for key, p in zip(keys, passages, strict=True) if key not in self._memory}
        if todo:
            started = time.perf_counter()
            fresh = dict(zip(todo, self.compress_new(list(todo.values())), strict=True))
            self.seconds += time.perf_counter() - started
            self.texts_compressed += len(fresh)
            self._memory.update(fresh)
            if self.store is not None:
                self.store.put_many((key, value.encode()) for key, value in fresh.items())
        return [self._memory[key] for key in keys]
