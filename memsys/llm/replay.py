"""LLM replies as a readable, diffable file: recorded from a run, replayed in CI.

A :class:`ReplayJournal` attached to a :class:`~memsys.llm.cache.ResponseCache` appends every
request the run needed (served from the cache or freshly generated) with its reply, one JSON line
each. :func:`write_replay_file` turns one or more journals into the committed form: one entry per
request, sorted by key, each with the full request so that a diff of the file shows which prompt
changed. :func:`seed_cache` loads such a file into a cache for ``replay`` mode; the key of every
entry is recomputed from its request, so a hand-edited or corrupted entry is caught, not trusted.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from memsys.llm.cache import ResponseCache, request_json, request_key, stored_fields
from memsys.llm.types import Completion, LLMRequest, SamplingParams


def request_from_json(data: dict[str, Any]) -> LLMRequest:
    """Inverse of the ``request`` field of a journal entry."""
    params = dict(data["params"])
    params["stop"] = tuple(params.get("stop") or ())
    return LLMRequest(
        tuple(data["messages"]), SamplingParams(**params), data.get("shared_prefix", 0)
    )


def entry_json(key: str, model_id: str, request: LLMRequest, completion: Completion) -> str:
    """One journal line (no trailing newline)."""
    entry = {
        "key": key,
        "model": model_id,
        "request": request_json(request),
        "completion": stored_fields(completion),
    }
    return json.dumps(entry, ensure_ascii=False, sort_keys=True)


class ReplayJournal:
    """Append-only JSONL of the requests one run used; safe across threads and processes (the
    :class:`~memsys.llm.cache.ReplyJournal` a :class:`~memsys.llm.cache.ResponseCache` records to).

    Each line is written with one ``write`` on a file opened in append mode, so lines from
    parallel sweep workers interleave whole.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._seen: set[str] = set()

    def record(self, key: str, model_id: str, request: LLMRequest, completion: Completion) -> None:
        """Append one request and its reply (once per key per process)."""
        with self._lock:
            if key in self._seen:
                return
            self._seen.add(key)
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(entry_json(key, model_id, request, completion) + "\n")


def read_entries(paths: Iterable[Path]) -> dict[str, dict[str, Any]]:
    """Entries of journals or replay files by key; a line that does not parse names its file."""
    entries: dict[str, dict[str, Any]] = {}
    for path in paths:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    entries[entry["key"]] = entry
                except (json.JSONDecodeError, KeyError, TypeError) as error:
                    raise ValueError(f"{path}:{number}: not a replay entry ({error})") from error
    return entries


def write_replay_file(entries: dict[str, dict[str, Any]], path: Path) -> None:
    """The committed form: sorted by key, one entry per line, written atomically."""
    temporary = path.with_suffix(path.suffix + ".part")
    with temporary.open("w", encoding="utf-8") as handle:
        for key in sorted(entries):
            handle.write(json.dumps(entries[key], ensure_ascii=False, sort_keys=True) + "\n")
    temporary.replace(path)


def seed_cache(cache: ResponseCache, path: Path) -> int:
    """Put every entry of a replay file into ``cache`` (in ``readwrite`` mode); the count.

    Raises ``ValueError`` naming the entry whose stored key does not match its request.
    """
    entries = read_entries([path])
    for key, entry in entries.items():
        request = request_from_json(entry["request"])
        if request_key(entry["model"], request) != key:
            raise ValueError(f"{path}: entry {key[:12]}... does not match its request (edited?)")
        cache.put(entry["model"], request, Completion(**entry["completion"]))
    return len(entries)


def open_response_cache(
    cache_dir: Path, mode: str, journal: str | os.PathLike[str] | None = None
) -> ResponseCache:
    """The runners' response cache (``<cache_dir>/llm_responses.sqlite``), journaled if asked."""
    return ResponseCache(
        cache_dir / "llm_responses.sqlite", mode, ReplayJournal(journal) if journal else None
    )
