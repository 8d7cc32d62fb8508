"""The serial runner's progress bars on stderr: questions answered as each answer comes back,
questions judged as their verdicts are logged, and the stage the run is in. The bar counts
answer calls as they return (a batch is logged only after minutes with a slow reader)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from tqdm import tqdm

from memsys.llm.accounting import Accounting, CallRecord
from memsys.llm.slots import Limiters

#: Seconds between refreshes of the progress bar's status (memories, LLM calls, failures).
TICK_S = 2.0

#: The stages a serial run goes through, in order (``judging`` only with a judge).
STAGES = ("building memories", "answering", "judging", "judge probes", "report")


def llm_calls_status(accounting: Accounting, limiters: Limiters | None = None) -> str:
    """The LLM calls made so far, for a progress bar's status, and each rate-limited endpoint's
    in-flight limit and requests waiting (:meth:`memsys.llm.slots.Limiters.status`)."""
    calls = accounting.totals()
    shown = f"LLM calls {calls['calls']} ({calls['cache_hits']} cached, {calls['failed']} failed)"
    limited = limiters.status() if limiters is not None else ""
    return f"{shown} · {limited}" if limited else shown


@contextmanager
def ticking(bar: tqdm, status: Callable[[], str], *, enabled: bool) -> Iterator[None]:
    """Refresh ``bar``'s status every :data:`TICK_S` while the body runs, so that a memory that
    takes an hour to build shows its LLM calls going by instead of a frozen bar."""
    if not enabled:
        yield
        return
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(TICK_S):
            bar.set_postfix_str(status())

    ticker = threading.Thread(target=tick, name="progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        stop.set()
        ticker.join()
        bar.set_postfix_str(status())


class QuestionBar:
    """A run's question bar: its count is the questions answered, its description the stage, its
    status the conversation, the questions judged, and what the caller adds. :meth:`listener`
    advances it at each ``answering`` call; :meth:`logged` adds the records no answer call counted
    (a retrieval-only run's)."""

    def __init__(self, name: str, *, enabled: bool, judged: bool) -> None:
        self.name = name
        self.stage = STAGES[0]
        self.subject = ""  # the conversation the stage is about
        self.judged = 0 if judged else None
        self.bar = tqdm(desc=self._description(), unit="q", disable=not enabled, file=sys.stderr)
        self._answered_unlogged = 0
        self._lock = threading.Lock()

    def _description(self) -> str:
        return f"{self.name} {self.stage}"

    def set_stage(self, stage: str, subject: str = "") -> None:
        """Enter ``stage`` (one of :data:`STAGES`, or ``retrieving`` for a run with no reader)
        for the conversation ``subject``; shown at once."""
        self.stage, self.subject = stage, subject
        self.bar.set_description_str(self._description())

    def listener(self, call: CallRecord) -> None:
        """Count a returned answer; note the judge's first call (see the class docstring)."""
        with self._lock:
            if call.stage in ("answering", "judging") and self.stage != call.stage:
                self.set_stage(call.stage, self.subject)
            if call.stage == "answering":
                self._answered_unlogged += 1
                self.bar.update(1)

    def settled(self, count: int) -> None:
        """Count questions a previous invocation logged: answered and judged already."""
        with self._lock:
            self.bar.update(count)
            if self.judged is not None:
                self.judged += count

    def logged(self, records: Sequence[dict[str, Any]]) -> None:
        """Count a logged batch (see the class docstring)."""
        with self._lock:
            self.bar.update(max(0, len(records) - self._answered_unlogged))
            self._answered_unlogged = 0
            if self.judged is not None:
                self.judged += sum("judging" in record for record in records)

    def status(self) -> str:
        """The conversation and the questions judged, for the bar's status."""
        judged = "" if self.judged is None else f"judged {self.judged}"
        return " · ".join(part for part in (self.subject, judged) if part)

    def close(self) -> None:
        """Leave the bar as it stands on stderr."""
        self.bar.close()


def show_stage(name: str, stage: str, *, enabled: bool) -> None:
    """One line for a stage with no bar of its own (``report``: the summary and metrics.json)."""
    if enabled:
        tqdm.write(f"{name} · {stage}", file=sys.stderr)
