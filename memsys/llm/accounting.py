"""Token and latency accounting per pipeline stage.

Methods differ wildly in how many LLM calls their memory construction costs; the comparison
tables report that cost next to accuracy. Every backbone call appends one :class:`CallRecord`;
:meth:`Accounting.summary` aggregates them per stage (construction, answering, judging) into
plain JSON to be written with each run's results. Records hold counts and timings only, never a
prompt, a reply or a credential. With a ``ledger`` file each record is also appended there as it
happens, so a run directory's cost covers every invocation of a resumed run, killed ones included.
A request about to be sent to a provider is first booked as ``sent``: one that a kill (or an
abandoned batch) left without a record is counted as ``interrupted`` (the provider may have
billed it; its tokens are unknown).
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class CallRecord:
    """One backbone call: ``attempts`` includes retries; ``ok`` is False when it failed.

    ``request_id`` matches the call's ``sent`` line (None for cache hits); ``interrupted`` marks a
    sent request that never finished (made up when a ledger is read); ``cut`` a reply the
    provider cut at its length cap (a server that ignored ``max_tokens``).
    """

    stage: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool
    attempts: int
    ok: bool
    request_id: str | None = None
    interrupted: bool = False
    cut: bool = False


class Accounting:
    """Thread-safe log of :class:`CallRecord`, shared by every stage view of one backbone."""

    def __init__(self, ledger: str | os.PathLike[str] | None = None) -> None:
        self._lock = threading.Lock()
        self._records: list[CallRecord] = []
        self._listeners: list[Callable[[CallRecord], None]] = []
        self.ledger = Path(ledger) if ledger is not None else None

    def sent(self, stage: str, model: str) -> str:
        """Book a request about to go to a provider; its :class:`CallRecord` follows with the
        returned id. Until then, a reader of the ledger counts it as interrupted."""
        request_id = uuid.uuid4().hex
        self._append({"sent": request_id, "stage": stage, "model": model})
        return request_id

    def record(self, call: CallRecord) -> None:
        """Add one call (and append it to the ledger)."""
        with self._lock:
            self._records.append(call)
            listeners = list(self._listeners)
        self._append(_without_defaults(call))
        for listener in listeners:
            listener(call)

    @contextmanager
    def listening(self, listener: Callable[[CallRecord], None]) -> Iterator[None]:
        """Hand each call recorded while the body runs to ``listener``, on the thread that made
        it: a progress bar counts answers as they come back, not when their batch is logged."""
        with self._lock:
            self._listeners.append(listener)
        try:
            yield
        finally:
            with self._lock:
                self._listeners.remove(listener)

    def _append(self, line: dict[str, Any]) -> None:
        if self.ledger is None:
            return
        with self._lock, self.ledger.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(line, sort_keys=True) + "\n")

    @classmethod
    def from_ledger(cls, path: str | os.PathLike[str]) -> Accounting:
        """Every call a ledger holds, plus one interrupted call per request sent and never
        recorded (a partial last line, cut by a kill, is skipped)."""
        accounting = cls()
        unfinished: dict[str, dict[str, Any]] = {}
        if Path(path).exists():
            for line in Path(path).read_text(encoding="utf-8").splitlines():
                try:
                    fields = json.loads(line)
                    if "sent" in fields:
                        unfinished[fields["sent"]] = fields
                        continue
                    call = CallRecord(**fields)
                except (json.JSONDecodeError, TypeError):
                    continue
                accounting._records.append(call)
                unfinished.pop(call.request_id or "", None)
        accounting._records.extend(
            CallRecord(
                stage=sent["stage"],
                model=sent["model"],
                prompt_tokens=0,
                completion_tokens=0,
                latency_s=0.0,
                cached=False,
                attempts=1,
                ok=False,
                request_id=request_id,
                interrupted=True,
            )
            for request_id, sent in unfinished.items()
        )
        return accounting

    def totals(self) -> dict[str, int]:
        """Calls, cache hits and failures so far: the cheap part of :meth:`summary`, for a
        progress line."""
        with self._lock:
            records = self._records
            return {
                "calls": len(records),
                "cache_hits": sum(call.cached for call in records),
                "failed": sum(not call.ok for call in records),
            }

    def records(self) -> list[CallRecord]:
        """A snapshot of all calls so far, in completion order."""
        with self._lock:
            return list(self._records)

    def summary(self) -> dict[str, Any]:
        """Per-stage and total aggregates, JSON-serializable.

        ``calls`` counts every request; ``cache_hits`` those answered from the cache;
        ``interrupted`` those sent and never finished (killed; counted in ``failed`` too);
        ``cut`` replies cut at the provider's length cap;
        ``provider_*_tokens`` only tokens actually sent to a provider in this run (what it
        cost now), while ``prompt_tokens``/``completion_tokens`` include cached replies (what the
        method costs). ``latency_s`` sums wall time over calls.
        """
        records = self.records()
        stages = sorted({call.stage for call in records})
        return {
            "stages": {
                stage: _aggregate([call for call in records if call.stage == stage])
                for stage in stages
            },
            "total": _aggregate(records),
        }

    def to_jsonable(self) -> dict[str, Any]:
        """Summary plus every call record, for a run's result directory."""
        return {
            **self.summary(),
            "calls": [dataclasses.asdict(call) for call in self.records()],
        }


#: The percentiles a latency distribution is reported at (plus its maximum).
LATENCY_PERCENTILES = (50, 95, 99)


def latency_percentiles(seconds: Sequence[float]) -> dict[str, Any]:
    """``n``, ``p50``, ``p95``, ``p99`` and ``max`` of some durations (numpy's linear
    interpolation between order statistics), or ``{"n": 0}`` for none: a mean hides the slow
    tail a user of a memory system waits on.

    >>> latency_percentiles([0.1, 0.2, 0.3, 0.4, 1.0])
    {'n': 5, 'p50': 0.3, 'p95': 0.88, 'p99': 0.976, 'max': 1.0}
    """
    if not seconds:
        return {"n": 0}
    values = np.asarray(seconds, dtype=np.float64)
    found = np.percentile(values, LATENCY_PERCENTILES)
    return {
        "n": len(values),
        **{f"p{p}": round(float(v), 6) for p, v in zip(LATENCY_PERCENTILES, found, strict=True)},
        "max": round(float(values.max()), 6),
    }


def _aggregate(records: list[CallRecord]) -> dict[str, Any]:
    fresh = [call for call in records if call.ok and not call.cached]
    latency = sum(call.latency_s for call in records)
    return {
        "calls": len(records),
        "cache_hits": sum(call.cached for call in records),
        "failed": sum(not call.ok for call in records),
        "interrupted": sum(call.interrupted for call in records),
        "cut": sum(call.cut for call in records),
        "retries": sum(call.attempts - 1 for call in records if call.attempts > 0),
        "prompt_tokens": sum(call.prompt_tokens for call in records),
        "completion_tokens": sum(call.completion_tokens for call in records),
        "provider_prompt_tokens": sum(call.prompt_tokens for call in fresh),
        "provider_completion_tokens": sum(call.completion_tokens for call in fresh),
        "latency_s": round(latency, 6),
        "mean_latency_s": round(latency / len(records), 6) if records else 0.0,
        "mean_provider_latency_s": (
            round(sum(call.latency_s for call in fresh) / len(fresh), 6) if fresh else 0.0
        ),
        # Over the requests a provider answered (cache hits and failures apart).
        "provider_latency_s": latency_percentiles([call.latency_s for call in fresh]),
    }


def _without_defaults(call: CallRecord) -> dict[str, Any]:
    """A ledger line: the call's fields, leaving out ``interrupted`` (only made up on reading),
    a ``cut`` that is False and a missing ``request_id`` (cache hits), so ledgers stay as they
    were for them."""
    fields = dataclasses.asdict(call)
    fields.pop("interrupted")
    if not fields["cut"]:
        fields.pop("cut")
    if fields["request_id"] is None:
        fields.pop("request_id")
    return fields
