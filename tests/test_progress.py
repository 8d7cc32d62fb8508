"""The question bar moves as questions are answered, not when their batch is logged (issue 50:
"0q for over five minutes while answers were being produced"), and names the stage the run is
in. Each test drives a run on the tiny fixture with progress on, through a tqdm that records
what the bars show, and reads the log's length at each count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakes.chat_server import FakeChatServer
from reliability_helpers import CORRECT, JUDGE, server_backbone
from run_helpers import compose_config, fixture_overrides
from tqdm import tqdm

from benchmarks.pipeline import progress
from benchmarks.pipeline import run as runner
from benchmarks.pipeline.progress import STAGES

pytestmark = pytest.mark.usefixtures("no_env_overrides")

QUESTIONS = 6  # tiny-1:q0..q5, one conversation, one batch


class Shown:
    """What the bars showed, in order: ``("stage", description)``, ``("count", description, n,
    lines logged)``, ``("status", description, text)``."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.events: list[tuple[Any, ...]] = []

    def logged(self) -> int:
        return len(self.log.read_text().splitlines()) if self.log.exists() else 0

    def bar_class(self) -> type[tqdm]:
        shown = self

        class Recording(tqdm):  # type: ignore[misc]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                shown.events.append(("stage", self.desc))

            def set_description_str(self, desc: str | None = None, refresh: bool = True) -> None:
                super().set_description_str(desc, refresh)
                shown.events.append(("stage", self.desc))

            def update(self, n: float | None = 1) -> bool | None:
                moved = super().update(n)
                if n:
                    shown.events.append(("count", self.desc, self.n, shown.logged()))
                return moved

            def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
                super().set_postfix_str(s, refresh)
                shown.events.append(("status", self.desc, s))

            @classmethod
            def write(cls, s: str, **kwargs: Any) -> None:
                shown.events.append(("stage", s))

        return Recording

    def stages(self) -> list[str]:
        """The stages named, in order, each once per stretch."""
        named = [
            next(stage for stage in (*STAGES, "retrieving") if stage in text)
            for kind, text, *_ in self.events
            if kind == "stage"
        ]
        return [stage for i, stage in enumerate(named) if i == 0 or named[i - 1] != stage]

    def counts(self) -> list[tuple[int, int]]:
        """The question bar's counts (not the probes'), each with the lines logged then."""
        return [
            (n, logged)
            for kind, desc, *rest in self.events
            if kind == "count" and "judge probes" not in desc
            for n, logged in [rest]
        ]

    def statuses(self) -> list[str]:
        """The question bar's statuses."""
        return [
            event[2]
            for event in self.events
            if event[0] == "status" and "judge probes" not in event[1]
        ]


def shown_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *overrides: str) -> Shown:
    runs = tmp_path / "runs"
    cfg = compose_config(
        [*fixture_overrides(runs, tmp_path / "cache"), *overrides, "progress=true"]
    )
    run_dir = runs / runner.run_id(runner.run_identity(cfg))
    shown = Shown(run_dir / "predictions.jsonl")
    monkeypatch.setattr(progress, "tqdm", shown.bar_class())
    monkeypatch.setattr(runner, "tqdm", shown.bar_class())
    runner.run(cfg)
    return shown


def test_answers_count_as_they_come_back_then_verdicts_and_stages_in_order(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: FakeChatServer
) -> None:
    server.on(JUDGE, reply=CORRECT)
    shown = shown_run(
        monkeypatch,
        tmp_path,
        "method=turn_rag_bm25",
        *server_backbone(server),
        "judge.probes=true",
    )
    # one count per answer, each before the batch (all six questions) reached the log
    assert shown.counts() == [(n, 0) for n in range(1, QUESTIONS + 1)]
    assert shown.stages() == list(STAGES)
    assert shown.statuses()[-1].startswith(f"tiny-1 · judged {QUESTIONS} · memories 1 built")


def test_a_run_without_a_reader_counts_each_logged_batch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    shown = shown_run(monkeypatch, tmp_path, "method=turn_rag_bm25", "answer=none", "batch_size=2")
    assert shown.counts() == [(2, 2), (4, 4), (6, 6)]
    assert shown.stages() == ["building memories", "retrieving", "report"]
    assert "judged" not in shown.statuses()[-1]


def test_a_resumed_run_counts_the_questions_logged_before(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    retrieval = ("method=turn_rag_bm25", "answer=none", "batch_size=2")
    shown_run(monkeypatch, tmp_path, *retrieval)
    again = shown_run(monkeypatch, tmp_path, *retrieval)
    assert again.counts() == [(QUESTIONS, QUESTIONS)]
    assert again.stages() == ["building memories", "report"]
