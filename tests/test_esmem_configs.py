"""Every ES-Mem config (the method and its ablations) composed, instantiated and run: top
events follow the backbone, each lite ablation changes the reader's context, and w/o raw shows
no verbatim turn."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from fakes.embed import windowed_embedder
from fakes.esmem import WordCounter, four_session_conversation, scripted, tiny_conversation
from fakes.llm import RuleProvider, make_backbone

from benchmarks.answering.context import render_context
from benchmarks.config.compose import compose_config
from memsys.base import Services
from memsys.methods.esmem import ESMem, ESMemMemory
from memsys.types import Conversation

CONF = Path(__file__).resolve().parents[1] / "conf"


ESMEM_CONFIGS = sorted(path.stem for path in (CONF / "method").glob("esmem*.yaml"))


def test_the_paper_configs_exist() -> None:
    assert {
        "esmem",
        "esmem_llm",
        "esmem_no_segmentation",
        "esmem_no_boundary",
        "esmem_no_summary",
        "esmem_no_raw",
    } <= set(ESMEM_CONFIGS)
    assert {"esmem_no_segmentation_matched", "esmem_alpha0"} <= set(ESMEM_CONFIGS)


@pytest.mark.parametrize(
    ("backbone", "top_events"), [("embedded", 5), ("qwen2.5-3b", 5), ("gpt-4o-mini", 10)]
)
def test_top_events_follows_the_backbone(backbone: str, top_events: int) -> None:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["method=esmem", f"backbone={backbone}"])
    assert cfg.method.retrieval.top_events == top_events


@pytest.mark.parametrize("name", ESMEM_CONFIGS)
def test_every_esmem_config_instantiates_and_runs(name: str) -> None:
    from hydra.utils import instantiate

    cfg = compose_config([f"method={name}"])
    backbone = make_backbone(RuleProvider(scripted), concurrency=1)  # type: ignore[arg-type]
    services = Services(windowed_embedder(), WordCounter(), backbone)  # type: ignore[arg-type]
    system = instantiate(cfg.method, services=services, _convert_="partial")
    assert isinstance(system, ESMem) and system.uses_llm == (name == "esmem_llm")
    conversation = tiny_conversation()
    payload = json.dumps(system.dump_memory(system.construct(conversation)))
    memory = system.load_memory(json.loads(payload))
    system.prepare_queries(conversation.questions)
    retrieval = system.retrieve(memory, conversation.questions[1])
    assert 0 < len(retrieval.items) <= system.options.retrieval.top_events and retrieval.turn_ids
    if name.startswith("esmem_no_segmentation"):
        assert len(memory.events) == len(conversation.turns)
    if name == "esmem_no_boundary":
        assert "boundaries" not in memory.report and not any(e.boundary for e in memory.events)
    if name == "esmem_no_raw":
        assert all(item.text.startswith("Boundary: ") for item in retrieval.items)
    else:
        assert all(item.kind == "event" for item in retrieval.items)


LITE_ABLATIONS = [
    "esmem_alpha0",
    "esmem_no_boundary",
    "esmem_no_raw",
    "esmem_no_segmentation",
    "esmem_no_segmentation_matched",
    "esmem_no_summary",
]
#: A run of this many whitespace tokens of a turn line, found in a text, is verbatim turn text.
VERBATIM_RUN = 4


def verbatim_runs(text: str, conversation: Conversation) -> set[tuple[str, ...]]:
    """The runs of ``VERBATIM_RUN`` tokens of ``text`` that occur in a turn line (``speaker:
    text``, as r_i and a template's ``Context:`` hold it) of ``conversation``. A summary's words
    are joined by ", " and a boundary head is "<words> ended. Transitioned to <words>.", so
    neither makes such a run; a turn quoted by either does."""
    found = set()
    for turn in conversation.turns:
        tokens = f"{turn.speaker}: {turn.text}".split()
        found |= {
            tuple(tokens[i : i + VERBATIM_RUN]) for i in range(len(tokens) - VERBATIM_RUN + 1)
        }
    tokens = text.split()
    return {
        tuple(tokens[i : i + VERBATIM_RUN]) for i in range(len(tokens) - VERBATIM_RUN + 1)
    } & found


def contexts(name: str, conversation: Conversation) -> tuple[ESMem, ESMemMemory, list[str]]:
    """The lite config ``name`` built on ``conversation``, and the context the reader gets for
    each question (the kept items in time order, as text)."""
    from hydra.utils import instantiate

    cfg = compose_config([f"method={name}"])
    system = instantiate(
        cfg.method, services=Services(windowed_embedder(), WordCounter()), _convert_="partial"
    )
    memory = system.construct(conversation)
    system.prepare_queries(conversation.questions)
    shown = []
    for question in conversation.questions:
        items = system.retrieve(memory, question).items
        kept = render_context(items, WordCounter(), budget=10_000).items
        shown.append("\n\n".join(item.text for item in kept))
    return system, memory, shown


@pytest.mark.parametrize("name", LITE_ABLATIONS)
def test_every_ablation_changes_the_readers_context(name: str) -> None:
    conversation = four_session_conversation()
    reference_system, reference_memory, reference = contexts("esmem", conversation)
    system, memory, shown = contexts(name, conversation)
    changed = sum(a != b for a, b in zip(shown, reference, strict=True))
    assert changed >= len(reference) // 2, f"{name} changes {changed} of {len(reference)}"
    events = memory.events
    if name == "esmem_no_summary":  # no s_i anywhere: not indexed, not in b_i
        assert not any(e.summary or e.keywords or e.topics for e in events)
        assert all(e.boundary.startswith("Context: ") for e in events)
    if name == "esmem_no_boundary":  # flat: the top K summaries of the whole memory
        question = conversation.questions[0]
        scores = (
            memory.vectors("summary", system.services.embedder)
            @ (system.services.embedder.encode([question.question])[0])
        )
        flat = np.argsort(-scores, kind="stable")[: system.options.retrieval.top_events].tolist()
        assert [j for j, _ in system.rank(memory, question)] == flat
    if name == "esmem_no_raw":
        assert all(text.startswith("Boundary: ") for text in shown)
        assert not any(verbatim_runs(text, conversation) for text in shown)
        assert all(verbatim_runs(e.boundary, conversation) for e in events)  # b_i indexed whole
        assert [system.rank(memory, q) for q in conversation.questions] == [
            reference_system.rank(reference_memory, q) for q in conversation.questions
        ]
    if name.startswith("esmem_no_segmentation"):
        assert len(events) == len(conversation.turns)
    if name == "esmem_no_segmentation_matched":  # the plain ablation, deeper
        plain, _, _ = contexts("esmem_no_segmentation", conversation)
        assert system.options.retrieval == replace(plain.options.retrieval, top_events=22)
    if name == "esmem_alpha0":  # the full method's memory, ranked by S_ctx alone
        assert system.options.retrieval == replace(reference_system.options.retrieval, alpha=0.0)
        assert system.construction_identity() == reference_system.construction_identity()
