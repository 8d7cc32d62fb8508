"""The response cache every backbone call goes through.

Keyed by a hash of everything that can change a reply (model identity, messages, sampling
parameters) and of nothing else: endpoint URLs and credentials are not part of a request here,
so they cannot leak into a key or a stored value, and the same cache serves a model however it
is reached. Three modes: ``readwrite`` (normal), ``replay`` (CI: every request must already be
cached, a miss is an error naming it) and ``off``. A stored reply that fails its checksum or does
not decode to a completion is dropped and read as a miss (see :mod:`memsys.kvstore`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Sequence
from enum import Enum
from typing import Any, Protocol

from memsys.kvshards import open_kv
from memsys.kvstore import OptionalStore
from memsys.llm.errors import CacheMissError
from memsys.llm.types import Completion, LLMRequest, Message


class CacheMode(str, Enum):
    """How the cache is used: see the module docstring."""

    READWRITE = "readwrite"
    REPLAY = "replay"
    OFF = "off"


def request_key(model_id: str, request: LLMRequest) -> str:
    """Stable content hash of one request to one model.

    Canonical JSON (sorted keys, no whitespace) so that dict ordering and tuple-vs-list
    differences do not split the cache.
    """
    payload = {"model": model_id, **request_json(request)}
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def request_json(request: LLMRequest) -> dict[str, Any]:
    """A request as plain JSON: what its cache key hashes and a replay file records.
    ``shared_prefix`` is absent at 0, so keys made before the hint existed stay valid."""
    params = request.params
    data: dict[str, Any] = {
        "messages": [dict(message) for message in request.messages],
        # the fields as they are (``asdict`` would deep-copy the JSON schema for every request)
        "params": {field.name: getattr(params, field.name) for field in dataclasses.fields(params)},
    }
    if request.shared_prefix:
        data["shared_prefix"] = request.shared_prefix
    return data


def describe_request(model_id: str, messages: Sequence[Message], limit: int = 120) -> str:
    """A short human-readable name for a request, for error messages."""
    last = messages[-1].get("content", "") if messages else ""
    preview = last if len(last) <= limit else last[: limit - 3] + "..."
    return f"model={model_id} messages={len(messages)} last={preview!r}"


class ReplyJournal(Protocol):
    """Where a cache records every reply it serves or stores. Declared here, beside its one
    caller, so that the cache does not depend on the journal's implementation
    (:class:`memsys.llm.replay.ReplayJournal`, which builds on this module)."""

    def record(self, key: str, model_id: str, request: LLMRequest, completion: Completion) -> None:
        """Record one request (``key`` is its :func:`request_key`) and its reply."""


class ResponseCache(OptionalStore):
    """Successful completions by request key, in a shared SQLite file.

    Only successful replies are ever stored: the backbone calls :meth:`put` after a provider
    returned, never for an error. With a ``journal``, every reply served or stored is also
    recorded there (the CI regression's replay file is made of journals).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        mode: CacheMode | str = CacheMode.READWRITE,
        journal: ReplyJournal | None = None,
    ) -> None:
        self.mode = CacheMode(mode)
        self.journal = journal
        if self.mode is not CacheMode.OFF and path is None:
            raise ValueError(f"cache mode {self.mode.value!r} needs a path")
        self._store = None if self.mode is CacheMode.OFF else open_kv(path, table="responses")

    @classmethod
    def disabled(cls) -> ResponseCache:
        """A cache that never stores or finds anything."""
        return cls(None, CacheMode.OFF)

    def get(self, model_id: str, request: LLMRequest) -> Completion | None:
        """The cached completion, ``None`` on a miss; in ``replay`` mode a miss raises."""
        if self._store is None:
            return None
        key = request_key(model_id, request)
        raw = self._store.get(key)
        completion = None if raw is None else decode_completion(raw)
        if completion is not None:
            if self.journal is not None:
                self.journal.record(key, model_id, request, completion)
            return completion
        if raw is not None:
            self._store.discard(key, raw, "not a stored completion")
        if self.mode is CacheMode.REPLAY:
            raise CacheMissError(
                "replay mode: request not in the cache "
                f"{self._store.path}: {describe_request(model_id, request.messages)} "
                f"key={key}"
            )
        return None

    def put(self, model_id: str, request: LLMRequest, completion: Completion) -> None:
        """Store a successful completion (no-op unless ``readwrite``)."""
        if self._store is None or self.mode is not CacheMode.READWRITE:
            return
        key = request_key(model_id, request)
        value = json.dumps(stored_fields(completion), ensure_ascii=False)
        self._store.put(key, value.encode("utf-8"))
        if self.journal is not None:
            self.journal.record(key, model_id, request, completion)

    def __len__(self) -> int:
        return 0 if self._store is None else len(self._store)


def stored_fields(completion: Completion) -> dict[str, Any]:
    """A completion as the cache and the replay journal store it: without ``cut``, which the
    accounting booked when it happened (a reply served again was not cut again)."""
    fields = dataclasses.asdict(completion)
    fields.pop("cut")
    return fields


def decode_completion(raw: bytes) -> Completion | None:
    """A stored completion, or ``None`` when ``raw`` is not one (damaged or foreign)."""
    try:
        fields = json.loads(raw.decode("utf-8"))
        completion = Completion(**fields)
    except (ValueError, TypeError):  # bad UTF-8 or JSON, not an object, missing/extra fields
        return None
    counts = (completion.prompt_tokens, completion.completion_tokens)
    valid = (
        isinstance(completion.text, str)
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts)
        and isinstance(completion.finish_reason, str | None)
    )
    return completion if valid else None
