"""The paper grids (``conf/experiment/paper_{locomo,longmemeval}.yaml`` over the ``paper`` group's
derived options, :func:`benchmarks.registry.paper_grid`): every entry composes and validates with
each reader and carries its paper's protocol; the published-beside-measured report
(``benchmarks/published/``) from hand-written run directories; and every entry end to end against
llama.cpp's real OpenAI-compatible server on the tiny fixture.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes.llmlingua import build_tiny_llmlingua2, offline_cl100k
from report_helpers import config, record, write_run
from run_helpers import (
    FIXTURE,
    compose_config,
    compose_with_hydra,
    fixture_overrides,
    read_records,
    sweep_values,
)

from benchmarks import registry
from benchmarks.pipeline.run import run
from benchmarks.pipeline.settings import check_method_options, validate
from benchmarks.published import Line, build_paper_report, main, render_paper_markdown
from benchmarks.runs.folders import ReportError

EXPERIMENTS = {"paper_locomo": "locomo", "paper_longmemeval": "longmemeval"}
ENTRIES = sorted(registry.sweep("paper"))
READERS = ["qwen2.5-3b", "llama3.2-3b", "gpt-4o-mini"]
#: Each method's paper setting: its method config, context order and adversarial policy.
PAPER_SETTINGS = {
    "esmem": ("esmem_llm", "time", "exclude"),
    "secom": ("secom_llmlingua2_llm", "time", "exclude"),
    "hingemem": ("hingemem_llm", "time", "include"),
    "fracom": ("fracom_llm", "time", "exclude"),
    "cast": ("cast_llm", "rank", "exclude"),
}
#: ES-Mem's K per reader (Appendix B), from the backbone configs.
ESMEM_TOP_EVENTS = {"qwen2.5-3b": 5, "llama3.2-3b": 5, "gpt-4o-mini": 10}


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_each_grid_sweeps_every_entry_over_the_three_readers(experiment: str) -> None:
    params = compose_with_hydra([f"+experiment={experiment}"]).hydra.sweeper.params
    assert sorted(sweep_values(params.paper)) == ENTRIES
    assert sweep_values(params.backbone) == READERS


@pytest.mark.parametrize("experiment", EXPERIMENTS)
@pytest.mark.parametrize("entry", ENTRIES)
def test_every_grid_entry_composes_and_validates(experiment: str, entry: str) -> None:
    """Validation checks the config, not credentials: no API key is needed to pass it."""
    for reader in READERS:
        cfg = compose_config([f"+experiment={experiment}", f"paper={entry}", f"backbone={reader}"])
        settings = validate(cfg)
        check_method_options(cfg.method)
        assert settings.dataset == EXPERIMENTS[experiment]
        assert (settings.template, settings.context_budget) == ("uniform", 4096)
        assert settings.subset.name == "full" and settings.subset.max_questions is None
        assert settings.subset.conversations is None and settings.judge_enabled
        assert cfg.judge.backbone.name == "gpt-4o-mini" and cfg.backbone.name == reader


def test_every_paper_has_its_setting_here() -> None:
    assert sorted(PAPER_SETTINGS) == sorted(registry.papers())


@pytest.mark.parametrize("entry", PAPER_SETTINGS)
def test_each_method_entry_is_its_papers_configuration_and_protocol(entry: str) -> None:
    method, order, adversarial = PAPER_SETTINGS[entry]
    cfg = compose_with_hydra(["+experiment=paper_locomo", f"paper={entry}"])
    assert cfg.hydra.runtime.choices.method == method
    assert cfg.method.extraction == "llm"
    assert (cfg.answer.order, cfg.adversarial) == (order, adversarial)


def test_secom_entry_uses_llmlingua2_and_mpnet() -> None:
    cfg = compose_config(["+experiment=paper_locomo", "paper=secom"])
    assert (cfg.method.compression, cfg.method.compression_rate) == ("llmlingua2", 0.75)
    assert cfg.embedder.model == "sentence-transformers/multi-qa-mpnet-base-dot-v1"


@pytest.mark.parametrize("reader", READERS)
def test_esmem_entry_takes_k_from_the_reader(reader: str) -> None:
    cfg = compose_config(["+experiment=paper_locomo", "paper=esmem", f"backbone={reader}"])
    assert cfg.method.retrieval.top_events == ESMEM_TOP_EVENTS[reader]


# ---------------------------------------------------------------------------------------------
# The report, from hand-written runs

ESMEM = {"_target_": "memsys.methods.esmem.ESMem", "extraction": "llm"}
HINGEMEM = {"_target_": "memsys.methods.hingemem.HingeMem", "extraction": "llm"}
CAST = {"_target_": "memsys.methods.cast.CAST", "extraction": "llm"}
FULL = {"name": "full", "conversations": None, "max_questions": None}
JUDGE = {"enabled": True, "backbone": {"name": "gpt-4o-mini"}}


def paper_run(method: dict, reader: str, **changes: Any) -> dict:
    """A config.yaml of a paper-grid run on full LoCoMo, judged by gpt-4o-mini."""
    answer = {"template": "uniform", "context_budget": 4096, "max_tokens": 32, "order": "time"}
    return (
        config(
            method,
            backbone={"name": reader, "provider": {"_target_": "fake"}},
            judge=JUDGE,
            subset=FULL,
            answer=answer,
            embedder={"model": "all-MiniLM-L6-v2", "batch_size": 32},
        )
        | changes
    )


def locomo_records(f1: list[float]) -> list[dict]:
    """Scored questions, single-hop, with one adversarial question scoring 1 after them."""
    records = [record(index, "single_hop", value) for index, value in enumerate(f1)]
    return [*records, record(len(f1), "adversarial", 1.0)]


def line(lines: list[Line], row: str, column: str, backbone: str | None = None) -> Line:
    """The report line of one published cell."""
    found = [
        found
        for found in lines
        if found.cell.row == row
        and found.cell.column == column
        and backbone in (None, found.cell.backbone)
    ]
    assert len(found) == 1, [f.cell for f in found]
    return found[0]


def test_report_sets_published_beside_measured_and_marks_what_differs(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_run(runs, "esmem-qwen", paper_run(ESMEM, "qwen2.5-3b"), locomo_records([0.5, 0.25]))
    hinge = paper_run(HINGEMEM, "gpt-4o-mini")  # the harness default protocol, not HingeMem's
    write_run(runs, "hinge-mini", hinge, locomo_records([0.5, 0.5]))
    cast_smoke = paper_run(CAST, "gpt-4o-mini", subset={**FULL, "name": "smoke"})
    write_run(runs, "cast-smoke", cast_smoke, locomo_records([1.0]))  # another subset: not read
    report = build_paper_report(runs, dataset="locomo", subset="full")

    esmem = line(report.lines, "ES-Mem (Ours)", "Overall / F1", "Qwen2.5-3B")
    assert esmem.cell.value == 30.86 and esmem.cell.score == "f1_set"
    assert esmem.run is not None and esmem.run.directory.name == "esmem-qwen"
    assert esmem.measured is not None and esmem.measured.mean == pytest.approx(0.375)
    assert esmem.measured.n == 2  # adversarial questions out of ES-Mem's Overall
    assert esmem.differences == (  # same reader, builder, subset, embedder and protocol
        "context budget 4096 harness tokens (paper: none stated; top K = 5 or 10 events "
        "(Appendix B))",
        "reader prompt: the harness's uniform template (paper: its own)",
    )
    assert line(report.lines, "ES-Mem (Ours)", "Overall / F1", "GPT-4o-mini").run is None  # not run

    hingemem = line(report.lines, "HingeMem (Cat. ✗)", "Overall / J", "gpt-4o")
    assert hingemem.run is not None and hingemem.run.directory.name == "hinge-mini"
    marks = " | ".join(hingemem.differences)
    assert "reader gpt-4o-mini (paper: gpt-4o)" in marks
    assert "memory built by gpt-4o-mini (paper: gpt-4o)" in marks
    assert "adversarial questions excluded in Overall (paper: included)" in marks
    assert "judge gpt-4o-mini" in marks and "embedder all-MiniLM-L6-v2" in marks
    assert line(report.lines, "HingeMem (Cat. ✗)", "Overall / F1").cell.score == "f1_locomo"
    assert line(report.lines, "CAST", "locomo_time / J").run is None

    markdown = render_paper_markdown(report)
    assert (
        "| ES-Mem | Table 1 | ES-Mem (Ours) | Overall / F1 | Qwen2.5-3B | f1_set · overall | 30.86 | 37.50 ["
        in (markdown)
    )
    assert "≠ reader gpt-4o-mini (paper: gpt-4o)" in markdown
    assert "FraCom: 0 of 660 cells shown; left out: 660 on other datasets" in markdown


def test_report_marks_lite_extraction_another_subset_and_order(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    lite = paper_run({**CAST, "extraction": "lite"}, "gpt-4o-mini")
    lite["subset"] = {**FULL, "conversations": 1}
    write_run(runs, "cast-lite", lite, locomo_records([0.5]))
    report = build_paper_report(runs, dataset="locomo", subset="full")
    cast = line(report.lines, "CAST", "locomo_time / J")
    assert cast.run is not None
    marks = " | ".join(cast.differences)
    assert "lite extraction, no LLM (paper: an LLM builds the memory)" in marks
    assert "subset full (conversations=1): NOT the paper's" in marks
    assert "context order time (paper: rank)" in marks


def test_the_entrys_own_settings_win_and_a_tie_they_do_not_break_is_an_error(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    lite = paper_run({**ESMEM, "extraction": "lite"}, "qwen2.5-3b")
    write_run(runs, "a-lite", lite, locomo_records([0.0]))
    write_run(runs, "b-llm", paper_run(ESMEM, "qwen2.5-3b"), locomo_records([1.0]))
    report = build_paper_report(runs, dataset="locomo", subset="full")
    assert (
        line(report.lines, "ES-Mem (Ours)", "Overall / F1", "Qwen2.5-3B").run.directory.name
        == "b-llm"
    )  # type: ignore[union-attr]
    write_run(runs, "c-llm", paper_run(ESMEM, "qwen2.5-3b", seed=1), locomo_records([1.0]))
    with pytest.raises(ReportError, match=r"both stand for paper entry esmem .* differ in seed"):
        build_paper_report(runs, dataset="locomo", subset="full")


def test_longmemeval_report_reads_accuracy_per_question_type(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_config = paper_run(ESMEM, "gpt-4o-mini", dataset={"name": "longmemeval", "variant": "s"})
    records = [record(0, "temporal_reasoning", 1.0), record(1, "multi_session", 1.0)]
    records[1]["scores"]["judge_acc"] = 0.0
    write_run(runs, "esmem-lme", run_config, records)
    report = build_paper_report(runs, dataset="longmemeval_s", subset="full")
    temporal = line(report.lines, "ES-Mem (Ours)", "Temporal (n=133)")
    assert temporal.cell.scope == "temporal_reasoning" and temporal.measured is not None
    assert (temporal.measured.mean, temporal.measured.n) == (1.0, 1)
    overall = line(report.lines, "ES-Mem (Ours)", "Overall (N=500)")
    assert overall.measured is not None and overall.measured.mean == 0.5
    assert any("LongMemEval's per-type" in found for found in overall.differences)


def test_cli_writes_the_report_without_runs_showing_the_published_numbers(tmp_path: Path) -> None:
    out = tmp_path / "results" / "paper_locomo"
    assert main(["--runs", str(tmp_path / "none"), "--out", str(out)]) == 0
    markdown = (out.parent / "paper_locomo.md").read_text()
    assert "No measured numbers: no finished run" in markdown
    assert (
        "| ES-Mem | Table 1 | ES-Mem (Ours) | Overall / F1 | Qwen2.5-3B | f1_set · overall | 30.86 | not run"
        in (markdown)
    )
    assert "| cast | CAST | not run |" in markdown


# ---------------------------------------------------------------------------------------------
# End to end


def fixture_turns() -> list[str]:
    """The tiny conversation's turn texts: the corpus the tiny LLMLingua-2 tokenizer learns."""
    conversation = json.loads((FIXTURE / "locomo" / "tiny_conversation.json").read_text())[0]
    sessions = conversation["conversation"]
    return [
        f"{turn['speaker']}: {turn['text']}"
        for turns in sessions.values()
        if isinstance(turns, list)
        for turn in turns
    ]


@pytest.mark.slow
@pytest.mark.timeout(3600)  # SmolLM2 on 2 shared cores: about 70 calls of several seconds each
def test_every_grid_entry_runs_against_llama_cpp_server(
    tmp_path: Path, llama_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each entry of the LoCoMo grid with llama.cpp's server as reader and builder, on the tiny
    fixture's first session (3 questions), unjudged to save a third of the calls (the judge is the
    one part every entry shares). SeCom's LLMLingua-2 and MPNet are not available offline: its entry runs
    llmlingua's real code on a tiny local model, with MiniLM."""
    monkeypatch.delenv("MEMBENCH_DATA", raising=False)
    offline_cl100k(monkeypatch)
    tiny = build_tiny_llmlingua2(tmp_path / "tiny-xlm-roberta-large", fixture_turns())
    secom_offline = [f"method.llmlingua2_model={tiny}", "method.compression_device=cpu"]
    offline = {"secom": [*secom_offline, "embedder=minilm"]}
    overrides = [
        *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
        "+experiment=paper_locomo",
        "backbone=llamacpp_server",
        f"backbone.provider.base_url={llama_server}",
        "judge=none",
        "+subset.max_sessions=1",
    ]
    for entry in ENTRIES:
        summary = run(compose_config([*overrides, f"paper={entry}", *offline.get(entry, [])]))
        run_dir = Path(summary["run_dir"])
        records = read_records(run_dir)
        assert [r["question_id"] for r in records] == ["tiny-1:q0", "tiny-1:q3", "tiny-1:q4"]
        assert all(isinstance(r["prediction"], str) for r in records), entry
        assert json.loads((run_dir / "metrics.json").read_text())["questions"] == 3

    report = build_paper_report(tmp_path / "runs", dataset="locomo", subset="full")
    readers = {entry.name: set(runs) for entry, runs in report.runs.items()}
    assert readers == {entry: {"llamacpp-server"} for entry in ENTRIES}
