"""``judge.repeats``: N verdicts per answer, each its own request; their spread, unanimity and
Fleiss' κ; and the agreement between protocols (Cohen's κ)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from fakes.llm import Recorder
from run_helpers import compose_config, fixture_overrides, read_records
from sklearn.metrics import cohen_kappa_score

from benchmarks.config.values import ConfigError
from benchmarks.metrics.agreement import (
    cohen_kappa,
    fleiss_kappa,
    protocol_agreement,
    repeat_summary,
)
from benchmarks.metrics.judge import Verdict
from benchmarks.metrics.judging import Judge
from benchmarks.pipeline.harness import failed, repeat_mean
from benchmarks.pipeline.run import run
from benchmarks.pipeline.settings import run_identity, validate
from benchmarks.tables.report.cli import main as report_main
from memsys.types import Question

QUESTION = Question("q", "c", "Where?", "Lisbon", "multi_session")


def test_repeat_one_is_the_single_verdicts_request_and_the_others_differ_by_seed() -> None:
    single = Recorder(["yes"])
    Judge(single, protocols=("longmemeval",)).grade_many([(QUESTION, "Lisbon")])  # type: ignore[arg-type]
    repeated = Recorder(["yes", "no", "yes"])
    judge = Judge(repeated, protocols=("longmemeval",), repeats=3)  # type: ignore[arg-type]
    ((found,),) = [list(item.values()) for item in judge.grade_repeated([(QUESTION, "Lisbon")])]
    assert [verdict.correct for verdict in found] == [True, False, True]
    assert repeated.sent[0] == single.sent[0]  # byte-identical: the same cache key
    assert [r.params.seed for r in repeated.sent] == [0, 1000, 2000]
    assert [r.params.temperature for r in repeated.sent] == [0.0, 0.0, 0.0]
    assert all(r.messages == single.sent[0].messages for r in repeated.sent)


def test_repeat_temperature_samples_repeats_two_to_n_only() -> None:
    recorder = Recorder(["yes"] * 3)
    Judge(recorder, protocols=("longmemeval",), repeats=3, repeat_temperature=0.7).grade_repeated(  # type: ignore[arg-type]
        [(QUESTION, "Lisbon")]
    )
    assert [r.params.temperature for r in recorder.sent] == [0.0, 0.7, 0.7]
    assert [r.params.seed for r in recorder.sent] == [0, 1000, 2000]


def test_a_repeats_unreadable_reply_climbs_its_own_ladder() -> None:
    locomo = Question("q", "c", "Where?", "Lisbon", "single_hop")
    recorder = Recorder(['{"label": "CORRECT"}', "garbage", '{"label": "WRONG"}'])
    judge = Judge(recorder, protocols=("mem0",), repeats=2)  # type: ignore[arg-type]
    ((found,),) = [list(item.values()) for item in judge.grade_repeated([(locomo, "Lisbon")])]
    assert [verdict.correct for verdict in found] == [True, False]
    assert [verdict.attempts for verdict in found] == [1, 2]
    retry = recorder.sent[2]  # repeat 2's second rung: the reminder, at repeat 2's seed
    assert retry.params.seed == 1000 and len(retry.messages) == 3


def test_probe_grading_asks_one_repeat_whatever_repeats_says() -> None:
    recorder = Recorder(["yes"])
    judge = Judge(recorder, protocols=("longmemeval",), repeats=4)  # type: ignore[arg-type]
    assert [v["longmemeval"].correct for v in judge.grade_many([(QUESTION, "x")])] == [True]
    assert len(recorder.sent) == 1


def test_a_records_score_is_the_mean_of_its_repeats_and_a_failed_repeat_is_retried() -> None:
    assert repeat_mean([True, False, True, None]) == pytest.approx(2 / 3)
    assert repeat_mean([None, None]) is None
    assert repeat_mean([False]) == 0.0
    failing = Verdict(None, "", 1, error="judge call failed: HTTP 500", asked=1)
    record = {"judging": {"protocol": "mem0", "error": None},
              "repeat_judgings": [{"protocol": "mem0", "repeat": 2, "error": failing.error}]}  # fmt: skip
    assert failed(record)
    record["repeat_judgings"][0]["error"] = None
    assert not failed(record)


def test_fleiss_kappa_matches_the_worked_example_of_fleiss_1971() -> None:
    # Fleiss (1971) as worked on Wikipedia: 10 items, 14 raters, 5 categories, κ = 0.210.
    counts = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0],
              [2, 2, 8, 1, 1], [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2],
              [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]  # fmt: skip
    assert fleiss_kappa(counts) == pytest.approx(0.20993070, abs=1e-7)
    assert fleiss_kappa([[3, 0], [3, 0]]) is None  # chance agreement 1: undefined
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa([[2, 0], [1, 0]])


def test_cohen_kappa_matches_scikit_learn() -> None:
    rng = random.Random(7)
    for _ in range(20):
        a = [rng.random() < 0.6 for _ in range(50)]
        b = [x if rng.random() < 0.7 else not x for x in a]
        assert cohen_kappa(list(zip(a, b, strict=True))) == pytest.approx(
            cohen_kappa_score(a, b), abs=1e-12
        )
    assert cohen_kappa([(True, True), (True, True)]) is None


def test_repeat_summary_and_protocol_agreement_read_the_records() -> None:
    summary = repeat_summary([[True, True, True], [False, False, False], [True, False, True]])
    assert summary is not None
    assert summary["unanimous"] == pytest.approx(2 / 3)
    assert summary["mean"] == pytest.approx(5 / 9)
    assert summary["std"] == pytest.approx(0.19245009, abs=1e-8)  # accuracies 2/3, 1/3, 2/3
    assert summary["fleiss_kappa"] == pytest.approx(fleiss_kappa([[3, 0], [0, 3], [2, 1]]))
    records = [
        {"judging": {"protocol": "mem0"}, "scores": {"judge_acc": 1.0, "judge_acc_strict": 0.0},
         "other_judgings": {"strict": {"protocol": "strict"}}},
        {"judging": {"protocol": "mem0"}, "scores": {"judge_acc": 1.0, "judge_acc_strict": 1.0},
         "other_judgings": {"strict": {"protocol": "strict"}}},
        {"judging": {"protocol": "mem0"}, "scores": {"judge_acc": None, "judge_acc_strict": 1.0},
         "other_judgings": {"strict": {"protocol": "strict"}}},
    ]  # fmt: skip
    ((pair,),) = [protocol_agreement(records)]
    assert pair == {"protocols": ["mem0", "strict"], "answers": 2, "agreement": 0.5,
                    "cohen_kappa": 0.0}  # fmt: skip


def test_repeats_keep_run_ids_at_one_and_bad_values_name_their_key() -> None:
    base = run_identity(compose_config(["answer=uniform"]))
    assert run_identity(compose_config(["judge.repeats=1"])) == base
    assert run_identity(compose_config(["judge.repeats=3"]))["judge"]["repeats"] == 3
    for overrides, key in [
        (["judge.repeats=0"], "judge.repeats"),
        (["judge.repeat_temperature=0.7"], "judge.repeat_temperature"),
        (["judge.repeats=2", "judge.repeat_temperature=-1"], "judge.repeat_temperature"),
    ]:
        with pytest.raises(ConfigError) as raised:
            validate(compose_config(overrides))
        assert raised.value.key == key


@pytest.mark.parametrize("temperature", [None, 0.7])
def test_repeated_verdicts_end_to_end_with_the_embedded_judge(
    tmp_path: Path, temperature: float | None
) -> None:
    overrides = [
        *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
        "judge.repeats=3",
        "judge.protocols=[strict]",
    ]
    if temperature is not None:
        overrides.append(f"judge.repeat_temperature={temperature}")
    summary = run(compose_config(overrides))
    records = read_records(Path(summary["run_dir"]))
    found = summary["judge_agreement"]["repeats"]["mem0"]
    assert found["repeats"] == 3 and found["answers"] <= len(records) == 6
    for record in records:
        verdicts = record["judge_repeats"]["mem0"]
        assert len(verdicts) == 3 and len(record["repeat_judgings"]) == 2 * 2  # two protocols
        assert record["scores"]["judge_acc"] == repeat_mean(verdicts)
    if temperature is None:  # greedy llama.cpp: every repeat gives the first one's verdict
        assert found["unanimous"] == 1.0 and found["std"] == 0.0
    assert summary["judge_agreement"]["repeat_temperature"] == temperature
    (pair,) = summary["judge_agreement"]["protocols"]
    assert pair["protocols"] == ["mem0", "strict"] and pair["answers"] <= 6

    out = tmp_path / "table"
    argv = ["--runs", str(tmp_path / "runs"), "--dataset", "locomo", "--subset", "full"]
    assert report_main([*argv, "--out", str(out)]) == 0
    table = out.with_suffix(".md").read_text()
    line = next(line for line in table.splitlines() if line.startswith("| ") and "3 |" in line)
    assert f"| {found['answers']} |" in line and f"{found['mean']:.3f}" in line
    assert "mem0 vs strict" in table
    departure = "A DEPARTURE FROM THE OFFICIAL PROTOCOL"
    assert (departure in table) == (temperature is not None)
