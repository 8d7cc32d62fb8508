"""The plan (``python -m benchmarks.plan``) counts the calls a real run makes, prices them as
configured, and the scripted backbone drives every ``extraction: llm`` pipeline end to end."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import jsonschema
import pytest
from run_helpers import CONF, FIXTURE, compose_config, fixture_overrides

from benchmarks import registry
from benchmarks.pipeline.run import run
from benchmarks.plan import (
    Extent,
    Price,
    Rates,
    StageCount,
    Throughput,
    arguments,
    cost,
    main,
    make_plan,
    parse_rates,
    scale_factors,
    script_backbones,
    sweep,
    warm_caches,
)
from benchmarks.plan.costs import Growth, LocalWork, growth_exponent
from benchmarks.plan.render import markdown
from memsys.files import available_cores
from memsys.llm.providers.scripted import ScriptedConfig, prompt_tokens
from memsys.llm.types import LLMRequest, SamplingParams
from memsys.tokens import TokenCounter

LLM_METHODS = sorted(path.stem for path in (CONF / "method").glob("*_llm.yaml"))
#: Pipelines that still do not use every scripted reply as it came, and why: the smallest
#: instance of a schema (memsys/llm/schema_reply.py) breaks a rule the schema does not state.
#: Any other fallback is a regression. docs/plan.md says what each does to the counts.
SCRIPTED_FALLBACKS = {
    # An utterance (or a question) for which the lite parser finds propositions must get at
    # least one; the minimal reply has none: retried once, then the lite extractor.
    "fracom_llm": ("report.retried", "report.fallbacks"),
    # OpenIE must keep a triple where spaCy finds one; a summary needs three words: the minimal
    # replies have no triple and the summary "x" (retried once, then the lite ones).
    "cast_llm": ("openie.retried", "openie.fallbacks", "summaries.retried", "summaries.fallbacks"),
}


def tiny(tmp_path: Path, *extra: str) -> list[str]:
    """Overrides of a run on the tiny fixture, in ``tmp_path``."""
    return [*fixture_overrides(tmp_path / "results", tmp_path / "cache"), *extra]


def test_the_plan_counts_the_calls_and_tokens_of_a_real_run(tmp_path: Path) -> None:
    """HingeMem in llm mode calls the LLM at every stage (construction, its query plans at
    retrieval, answering, judging): the plan's numbers are the run's, stage by stage."""
    overrides = tiny(tmp_path, "method=hingemem_llm", "judge=gpt-4o-mini")
    cfg = compose_config(overrides)
    script_backbones(cfg)
    ran = run(cfg)["accounting"]["stages"]
    plan = make_plan(overrides, rates=Rates(), work_dir=tmp_path / "plan")
    (row,) = plan.rows
    assert set(row.stages) == set(ran) == {"construction", "retrieval", "answering", "judging"}
    for stage, counted in ran.items():
        planned = row.stages[stage]
        assert planned.calls == counted["calls"] > 0, stage
        assert planned.prompt_tokens == counted["prompt_tokens"] > 0, stage
        assert planned.completion_bound == counted["completion_tokens"], stage
    assert row.stages["judging"].backbone == "gpt-4o-mini"
    assert row.stages["construction"].backbone == "smollm2-135m"
    assert not plan.scaled and row.scale == dict.fromkeys(row.scale, 1.0)


def test_a_retrieval_only_plan_counts_the_texts_a_run_embeds_and_parses(tmp_path: Path) -> None:
    """CAST parses and embeds while it builds: the plan's texts are the run's, after the
    content cache (a second row of the same texts embeds none); its local hours divide by the
    run's workers where each has a machine, and but for the embedding where they share cores."""
    overrides = tiny(tmp_path, "method=cast", "answer=none", "workers=2")
    ran = run(compose_config(overrides))["invocation"]
    plan = make_plan(overrides, rates=Rates(), work_dir=tmp_path / "plan")
    (row,) = plan.rows
    assert row.local.encoded == ran["embedding"]["encoded"] > 0
    assert row.local.parsed == ran["parsing"]["parsed"] > 0
    assert row.measurement.workers == 2
    assert row.measurement.shared_cores == available_cores()
    assert row.local.hours(2) == pytest.approx(row.local.hours() / 2)  # a machine each
    embedding, rest = row.local.encode_seconds, row.local.seconds - row.local.encode_seconds
    on_shared_cores = (embedding + rest / min(2, available_cores())) / 3600
    assert row.local.hours(2, cores=available_cores()) == pytest.approx(on_shared_cores)
    warm = make_plan(
        overrides, rates=Rates(), work_dir=tmp_path / "warm", warm_from=tmp_path / "cache"
    )
    assert warm.rows[0].local.encoded == 0 and warm.rows[0].local.parsed == 0
    assert "texts embedded / parsed (k)" in markdown(plan)


def test_texts_shared_across_conversations_scale_by_distinct_content(tmp_path: Path) -> None:
    """LongMemEval's haystacks share sessions: a second conversation with the first's texts
    costs the content cache nothing, so the plan scales embedded texts by distinct texts, not
    turns, and meets the run's count exactly."""
    conversation = json.loads((FIXTURE / "locomo" / "tiny_conversation.json").read_text())[0]
    twin = {**conversation, "sample_id": "tiny-2"}
    data = tmp_path / "data" / "locomo"
    data.mkdir(parents=True)
    (data / "twins.json").write_text(json.dumps([conversation, twin]))
    overrides = [*fixture_overrides(tmp_path / "results", tmp_path / "cache"),
                 f"data_dir={tmp_path / 'data'}", "dataset.file=locomo/twins.json",
                 "method=turn_rag_dense", "answer=none"]  # fmt: skip
    ran = run(compose_config(overrides))["invocation"]
    plan = make_plan(overrides, rates=Rates(), work_dir=tmp_path / "plan", conversations=1)
    (row,) = plan.rows
    assert (plan.sample.turns, plan.full.turns) == (8, 16)
    assert plan.sample.distinct_texts == plan.full.distinct_texts == 8
    assert row.local.encoded == ran["embedding"]["encoded"] > 0  # not twice it


def test_the_plan_never_writes_a_response_cache(tmp_path: Path) -> None:
    """Scripted replies must not be served for a real model: the plan's response cache is off,
    and warming copies the caches of facts about texts, never the replies or the memories."""
    shared = tmp_path / "shared"
    shared.mkdir()
    for name in ("embeddings.sqlite", "llm_responses.sqlite"):
        with sqlite3.connect(shared / name) as connection:
            connection.execute("CREATE TABLE kv (key TEXT)")
    before = (shared / "llm_responses.sqlite").read_bytes()
    work = tmp_path / "plan"
    make_plan(tiny(tmp_path, "method=secom_llm"), rates=Rates(), work_dir=work, warm_from=shared)
    assert (work / "cache" / "embeddings.sqlite").exists()
    assert not list(work.rglob("llm_responses.sqlite*"))
    assert (shared / "llm_responses.sqlite").read_bytes() == before
    with pytest.raises(ValueError, match="shared cache"):
        warm_caches(shared, shared)


@pytest.mark.parametrize("method", LLM_METHODS)
def test_every_llm_pipeline_runs_end_to_end_on_scripted_replies(
    tmp_path: Path, method: str
) -> None:
    """No answer or verdict fails, no reply is unparseable, and the only fallbacks are the
    known ones of :data:`SCRIPTED_FALLBACKS`."""
    overrides = tiny(tmp_path, f"method={method}", "+subset.max_sessions=1")
    plan = make_plan(overrides, rates=Rates(), work_dir=tmp_path / "plan")
    (row,) = plan.rows
    assert row.stages["construction"].calls > 0
    assert row.stages["answering"].calls == row.measurement.sample.questions > 0
    known = SCRIPTED_FALLBACKS.get(method, ())
    unknown = [path for path in row.measurement.fallbacks if not path.endswith(known)]
    assert not unknown, f"{method} fell back on scripted replies: {row.measurement.fallbacks}"


def test_dollars_follow_the_configured_prices() -> None:
    """Prompt tokens at the prompt price; completion tokens at the completion price, all of the
    bound or the stage's share of it; a backbone the table does not name pays the default
    (gpt-4o-mini's list price); a self-hosted one pays nothing but takes time."""
    count = StageCount(calls=10, prompt_tokens=2_000_000, completion_bound=1_000_000)
    rates = Rates(
        prices={"gpt-4o-mini": Price(0.15, 0.60), "qwen2.5-3b": Price(0.0, 0.0)},
        throughputs={"gpt-4o-mini": Throughput(prompt=1000, completion=100)},
        completion_shares={"answering": 0.5},
    )
    api = cost(count, "answering", "gpt-4o-mini", rates)
    assert api.dollars_bound == pytest.approx(2 * 0.15 + 1 * 0.60)
    assert api.dollars_estimate == pytest.approx(2 * 0.15 + 0.5 * 0.60)
    assert api.completion_estimate == 500_000
    assert api.hours == pytest.approx((2_000_000 / 1000 + 500_000 / 100) / 3600)
    assert cost(count, "answering", "some-api", rates).dollars_bound == api.dollars_bound
    hosted = cost(count, "answering", "qwen2.5-3b", rates)
    assert hosted.dollars_bound == hosted.dollars_estimate == 0 and hosted.hours > 0


def test_prices_throughputs_and_shares_come_from_the_command_line() -> None:
    args = arguments(
        ["--price", "gpt-4o-mini=0.3,1.2", "--throughput", "qwen2.5-3b=500",
         "--completion-share", "judging=1"]
    )  # fmt: skip
    rates = parse_rates(args)
    assert rates.price("gpt-4o-mini") == Price(0.3, 1.2)
    assert rates.price("llama3.2-3b") == Price(0.0, 0.0)
    assert rates.throughput("qwen2.5-3b").completion == 500
    assert rates.completion_shares["judging"] == 1.0


def test_a_sample_scales_construction_by_turns_and_the_rest_by_questions() -> None:
    factors = scale_factors(Extent(2, 100, 40), Extent(10, 1000, 200))
    assert factors == {"construction": 10.0, "retrieval": 5.0, "answering": 5.0, "judging": 5.0,
                       "encoded": 10.0, "parsed": 10.0}  # fmt: skip
    shared = scale_factors(Extent(2, 100, 40, 90), Extent(10, 1000, 200, 270))
    assert (shared["construction"], shared["encoded"], shared["parsed"]) == (10.0, 3.0, 3.0)
    work = LocalWork(encoded=90, parsed=30, seconds=100, encode_seconds=20, parse_seconds=10)
    assert work.scaled(10.0, 3.0, 2.0) == LocalWork(270, 60, 70 * 10 + 20 * 3 + 10 * 2, 60, 20)
    assert StageCount(3, 30, 6).scaled(10.0) == StageCount(30, 300, 60)


def test_cache_work_scales_along_the_samples_growth_curve() -> None:
    """Texts that recur across haystacks (Heaps' law, β < 1) scale below the ratio of distinct
    turn texts; texts each haystack has anew (β = 1) scale with it; a flat curve not at all."""
    assert growth_exponent([100, 400, 1600], [50, 100, 200]) == pytest.approx(0.5)
    assert growth_exponent([100, 200, 300], [100, 200, 300]) == pytest.approx(1.0)
    assert growth_exponent([100, 200], [80, 80]) == 0.0
    assert growth_exponent([100], [80]) == 1.0  # one point: no curve, linear
    assert growth_exponent([100, 200], [0, 0]) == 1.0  # nothing new: the factor scales zero
    sample, full = Extent(3, 300, 3, 100), Extent(30, 3000, 30, 1600)
    growth = Growth(seen=(25, 50, 100), encoded=(500, 1000, 2000), parsed=(50, 71, 100))
    factors = scale_factors(sample, full, growth)
    assert factors["encoded"] == pytest.approx(16.0)
    assert factors["parsed"] == pytest.approx(16**0.5, rel=0.01)


def test_the_sweep_is_the_one_a_multirun_makes() -> None:
    """The experiment's sweep crossed; a command-line sweep of a key replaces the experiment's."""
    grid = sweep(["+experiment=paper_locomo"])
    assert grid.axes == ["paper", "backbone"]
    assert len(grid.points) == 13 * 3
    first = registry.sweep("paper")[0]  # the grid is the registry's (${registry:paper})
    assert grid.label(grid.points[0]) == {"paper": first, "backbone": "qwen2.5-3b"}
    narrowed = sweep(["+experiment=paper_locomo", "paper=esmem,cast", "backbone=gpt-4o-mini"])
    assert narrowed.axes == ["paper"]
    assert [grid.label(p)["paper"] for p in narrowed.points] == ["esmem", "cast"]
    assert all("+experiment=paper_locomo" in point for point in narrowed.points)
    (single,) = sweep(["method=esmem_llm"]).points
    assert single == ["method=esmem_llm"]


def test_scripted_replies_keep_to_the_schema_and_count_the_prompt() -> None:
    """A request with a schema gets a valid instance; prompt tokens are the harness tokenizer's
    count of the messages plus the chat template's; completion tokens the ``max_tokens`` bound."""
    schema = {
        "type": "object",
        "properties": {"label": {"enum": ["CORRECT", "WRONG"]}},
        "required": ["label"],
    }
    provider = ScriptedConfig(model="gpt-4o-mini").build()
    messages = ({"role": "system", "content": "Grade."}, {"role": "user", "content": "Paris?"})
    request = LLMRequest(messages, SamplingParams(max_tokens=48, json_schema=schema))
    completion = provider.generate(request, timeout_s=1.0)
    jsonschema.validate(json.loads(completion.text), schema)
    tokens = TokenCounter()
    assert completion.prompt_tokens == prompt_tokens(tokens, messages)
    assert completion.prompt_tokens == tokens.count("Grade.") + tokens.count("Paris?") + 3 * 2 + 3
    assert completion.completion_tokens == 48
    assert provider.model_id == "scripted:gpt-4o-mini"
    plain = provider.generate(LLMRequest(messages[1:]), timeout_s=1.0)
    assert plain.text.strip() and plain.completion_tokens == SamplingParams().max_tokens


def test_the_command_prints_and_writes_the_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rows labelled by the sweep's axis, the tokenizer named, the numbers beside the page."""
    page, numbers = tmp_path / "plan.md", tmp_path / "plan.json"
    overrides = [*tiny(tmp_path)[:3], "method=zero_history,turn_rag_bm25"]
    argv = [*overrides, "--cold", "--out", str(page), "--json", str(numbers)]
    assert main(argv) == 0
    text = page.read_text()
    assert text == capsys.readouterr().out.rstrip("\n") + "\n"
    # 6 answers, each graded under the three judge protocols
    assert "| zero_history | 0 | 0 | 6 | 18 | 0 |" in text and "| turn_rag_bm25 |" in text
    assert "harness tokenizer" in text and "Counted on the whole subset" in text
    rows = json.loads(numbers.read_text())["rows"]
    assert [row["point"] for row in rows] == [
        {"method": "zero_history"},
        {"method": "turn_rag_bm25"},
    ]


def test_the_plan_counts_every_judge_repeat(tmp_path: Path) -> None:
    """``judge.repeats=3`` asks three verdicts per answer: the plan counts three times the
    judge calls of one verdict, and the same answer calls."""
    once = make_plan(tiny(tmp_path, "judge=gpt-4o-mini"), rates=Rates(), work_dir=tmp_path / "a")
    repeated = make_plan(
        tiny(tmp_path, "judge=gpt-4o-mini", "judge.repeats=3"),
        rates=Rates(),
        work_dir=tmp_path / "b",
    )
    ((one,), (three,)) = once.rows, repeated.rows
    assert three.stages["judging"].calls == 3 * one.stages["judging"].calls == 18
    assert three.stages["answering"].calls == one.stages["answering"].calls == 6
