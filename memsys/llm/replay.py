"""LLM replies as a readable, diffable file: recorded from a run, replayed in CI.

A :class:`ReplayJournal` attached to a :class:`~memsys.llm.cache.ResponseCache` appends every
request the run needed (served from the cache or freshly generated) with its reply, one JSON line
each. :func:`write_replay_file` turns one or more journals into the committed form: one entry per
request, sorted by key, each with the full request so that a diff of the file shows which prompt
changed (gzip-compressed where its name ends in ``.gz``, as a committed table's replies are).
:func:`seed_cache` loads such a file into a cache for ``replay`` mode, :class:`RecordedReplies`
serves one in ``recorded`` mode; the key of every entry is recomputed from its request, so a
hand-edited or corrupted entry is caught, not trusted.

``python -m memsys.llm.replay OUT JOURNAL...`` writes the journals' entries as one replay file
(how a table's shipped replies are recorded: docs/tables.md).
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from memsys.llm.cache import (
    CacheMode,
    ResponseCache,
    request_json,
    request_key,
    stored_fields,
)
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
        # split on newlines only: a reply may hold other line separators (U+2028)
        for number, line in enumerate(read_text(path).split("\n"), start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                entries[entry["key"]] = entry
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                raise ValueError(f"{path}:{number}: not a replay entry ({error})") from error
    return entries


def read_text(path: Path) -> str:
    """A replay file's text, through gzip where its name ends in ``.gz``."""
    data = path.read_bytes()
    return (gzip.decompress(data) if path.name.endswith(".gz") else data).decode("utf-8")


def write_replay_file(entries: dict[str, dict[str, Any]], path: Path) -> None:
    """The committed form: sorted by key, one entry per line, written atomically; gzip-compressed
    without a time stamp where the name ends in ``.gz``, so the same entries write the same bytes."""
    text = "".join(
        json.dumps(entries[key], ensure_ascii=False, sort_keys=True) + "\n"
        for key in sorted(entries)
    )
    data = text.encode("utf-8")
    if path.name.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    temporary = path.with_name(path.name + ".part")
    temporary.write_bytes(data)
    temporary.replace(path)


def verified_entries(path: Path) -> Iterator[tuple[str, str, LLMRequest, Completion]]:
    """Key, model, request and reply of every entry of a replay file.

    Raises ``ValueError`` naming the entry whose stored key does not match its request.
    """
    for key, entry in read_entries([path]).items():
        request = request_from_json(entry["request"])
        if request_key(entry["model"], request) != key:
            raise ValueError(f"{path}: entry {key[:12]}... does not match its request (edited?)")
        yield key, entry["model"], request, Completion(**entry["completion"])


def seed_cache(cache: ResponseCache, path: Path) -> int:
    """Put every entry of a replay file into ``cache`` (in ``readwrite`` mode); the count."""
    count = 0
    for _, model_id, request, completion in verified_entries(path):
        cache.put(model_id, request, completion)
        count += 1
    return count


class RecordedReplies(ResponseCache):
    """``recorded`` mode (``llm_cache_mode=recorded``): a shipped table's replies are the only
    cache. A request whose key is among them gets its recorded reply; any other is asked of the
    model, which the accounting books as not served from the cache (a run's count of them), and
    its reply is stored nowhere but in the journal, so that a re-recording holds it.

    Defined here rather than in :mod:`memsys.llm.cache`, which every method's source fingerprint
    covers: this mode is the harness's, not a method's.
    """

    def __init__(
        self, replies: Mapping[str, Completion], journal: ReplayJournal | None = None
    ) -> None:
        super().__init__(None, CacheMode.OFF, journal)
        self.replies = dict(replies)

    def get(self, model_id: str, request: LLMRequest) -> Completion | None:
        """The recorded reply, or ``None`` (the request is asked)."""
        key = request_key(model_id, request)
        found = self.replies.get(key)
        if found is not None and self.journal is not None:
            self.journal.record(key, model_id, request, found)
        return found

    def put(self, model_id: str, request: LLMRequest, completion: Completion) -> None:
        """A fresh reply: to the journal only."""
        if self.journal is not None:
            self.journal.record(request_key(model_id, request), model_id, request, completion)

    def __len__(self) -> int:
        return len(self.replies)


def load_recorded(path: Path) -> dict[str, Completion]:
    """A replay file's replies by request key: ``recorded`` mode's cache."""
    if not path.is_file():
        raise FileNotFoundError(f"recorded replies: no file {path}")
    return {key: completion for key, _, _, completion in verified_entries(path)}


def open_response_cache(
    cache_dir: Path,
    mode: str,
    journal: str | os.PathLike[str] | None = None,
    replies: Path | None = None,
) -> ResponseCache:
    """The runners' response cache (``<cache_dir>/llm_responses.sqlite``; in ``recorded`` mode
    the ``replies`` file's entries instead: :class:`RecordedReplies`), journaled if asked."""
    recorder = ReplayJournal(journal) if journal else None
    if mode != "recorded":
        return ResponseCache(cache_dir / "llm_responses.sqlite", mode, recorder)
    if replies is None:
        raise ValueError("cache mode 'recorded' needs a replies file (llm_replies)")
    return RecordedReplies(load_recorded(replies), recorder)


def main(argv: Sequence[str] | None = None) -> int:
    """``OUT JOURNAL...``: the journals' entries as one replay file at ``OUT``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2:
        print("usage: python -m memsys.llm.replay OUT JOURNAL...", file=sys.stderr)
        return 2
    entries = read_entries(Path(name) for name in args[1:])
    write_replay_file(entries, Path(args[0]))
    print(f"{args[0]}: {len(entries)} replies")
    return 0


if __name__ == "__main__":
    sys.exit(main())
