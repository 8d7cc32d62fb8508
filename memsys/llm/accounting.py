"""Token and latency accounting per pipeline stage.

Methods differ wildly in how many LLM calls their memory construction costs; the comparison
tables report that cost next to accuracy. Every backbone call appends one :class:`CallRecord`;
:meth:`Accounting.summary` aggregates them per stage (construction, answering, judging) into
plain JSON to be written with each run's results. Records hold counts and timings only, never a
prompt, a reply or a credential. With a ``ledger`` file each record is also appended there as it
happens, so a run directory's cost covers every invocation of a resumed run, killed ones included.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CallRecord:
    """One backbone call: ``attempts`` includes retries; ``ok`` is False when it failed."""

    stage: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool
    attempts: int
    ok: bool


class Accounting:
    """Thread-safe log of :class:`CallRecord`, shared by every stage view of one backbone."""

    def __init__(self, ledger: str | os.PathLike[str] | None = None) -> None:
        self._lock = threading.Lock()
        self._records: list[CallRecord] = []
        self.ledger = Path(ledger) if ledger is not None else None

    def record(self, call: CallRecord) -> None:
        """Add one call (and append it to the ledger)."""
        with self._lock:
            self._records.append(call)
            if self.ledger is not None:
                with self.ledger.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(dataclasses.asdict(call), sort_keys=True) + "\n")

    @classmethod
    def from_ledger(cls, path: str | os.PathLike[str]) -> Accounting:
        """Every call a ledger holds (a partial last line, cut by a kill, is skipped)."""
        accounting = cls()
        if Path(path).exists():
            for line in Path(path).read_text(encoding="utf-8").splitlines():
                try:
                    accounting._records.append(CallRecord(**json.loads(line)))
                except (json.JSONDecodeError, TypeError):
                    continue
        return accounting

    def records(self) -> list[CallRecord]:
        """A snapshot of all calls so far, in completion order."""
        with self._lock:
            return list(self._records)

    def summary(self) -> dict[str, Any]:
        """Per-stage and total aggregates, JSON-serializable.

        ``calls`` counts every request; ``cache_hits`` those answered from the cache;
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


def _aggregate(records: list[CallRecord]) -> dict[str, Any]:
    fresh = [call for call in records if call.ok and not call.cached]
    latency = sum(call.latency_s for call in records)
    return {
        "calls": len(records),
        "cache_hits": sum(call.cached for call in records),
        "failed": sum(not call.ok for call in records),
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
    }
