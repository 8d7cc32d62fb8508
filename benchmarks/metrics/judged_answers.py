"""Judged answers: any system's answers graded as the harness grades its own, with LongMemEval's
aggregates.

The same :class:`~benchmarks.metrics.judging.Judge` a run uses, through the runners' response
cache; the command, its inputs and outputs: docs/scoring.md (``memsys-bench score qa --judge``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from benchmarks.config.compose import compose_config
from benchmarks.config.services import backbone_config
from benchmarks.config.values import ConfigError
from benchmarks.data.errors import DataMissingError, DatasetError
from benchmarks.data.paths import REPO_ROOT, resolve_data_dir
from benchmarks.data.specs import named_spec
from benchmarks.metrics.aggregate import (
    Cell,
    cells_by_scope,
    in_overall,
    longmemeval_cells,
    plural,
    understated,
)
from benchmarks.metrics.jsonl import InputError, require
from benchmarks.metrics.judge import (
    ABSTENTION_RULE,
    DEFAULT_JUDGE_BACKBONE,
    PROTOCOLS,
    Verdict,
    judge_prompt,
    question_category,
)
from benchmarks.metrics.judging import Judge
from benchmarks.metrics.predictions import ADVERSARIAL, read_lines_by_id, text_field
from benchmarks.render import Table
from memsys.llm.accounting import Accounting
from memsys.llm.backbone import Backbone
from memsys.llm.cache import ResponseCache
from memsys.llm.factory import build_backbone
from memsys.llm.replay import open_response_cache
from memsys.types import LOCOMO_CATEGORIES, LONGMEMEVAL_CATEGORIES, Question

#: The score name a run's records give the verdict the aggregates are built from.
SCORE = "judge_acc"
#: The project's names of LongMemEval's question types.
LONGMEMEVAL_TYPES = frozenset(LONGMEMEVAL_CATEGORIES.values())
#: Questions are the resampling unit here (a line carries no conversation).
UNIT = "question"
SEED = 0
#: Where a Hydra error's message turns to the config search path.
HYDRA_SEARCH_PATH = "\nConfig search path:"


@dataclass(frozen=True)
class JudgedAnswer:
    """One line to grade: its line number, the question with its gold answer, the answer."""

    line: int
    question: Question
    prediction: str


def answer_category(value: Any) -> str:
    """The project's category of a line's ``category``: a LoCoMo code or name, or a LongMemEval
    type in either spelling; anything else is a ``ValueError`` (it picks the judge's template).

    >>> answer_category(2), answer_category("temporal-reasoning"), answer_category("multi_session")
    ('temporal', 'temporal_reasoning', 'multi_session')
    """
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"category must be a LoCoMo code 1..5 or a name, got {value!r}")
    if value in LONGMEMEVAL_TYPES:
        return str(value)
    return question_category(str(value))


def _prediction(record: dict[str, Any], path: Path, line: int) -> str:
    """The graded answer: ``prediction``, or ``hypothesis`` (LongMemEval's name for it)."""
    key = "hypothesis" if "hypothesis" in record and "prediction" not in record else "prediction"
    return text_field(record, key, path, line)


def _line_question(record: dict[str, Any], question_id: str, path: Path, line: int) -> Question:
    """The question a line of the first shape carries, its gold as a run's judge sees it."""
    try:
        category = answer_category(require(record, "category", path, line))
    except ValueError as error:
        raise InputError(path, line, str(error)) from None
    if category == ADVERSARIAL and record.get("adversarial_answer") is not None:
        gold = text_field(record, "adversarial_answer", path, line)
    else:
        gold = text_field(record, "answer", path, line)
    return Question(
        question_id=question_id,
        conversation_id=question_id,
        question=text_field(record, "question", path, line),
        answer=gold,
        category=category,
        is_abstention="_abs" in question_id,
    )


def dataset_questions(dataset: str, question_ids: Sequence[str]) -> dict[str, Question]:
    """The dataset's questions among ``question_ids``, by id (data folder: ``MEMBENCH_DATA``);
    ``dataset`` as the report names it (``locomo``, ``longmemeval_s``)."""
    spec = named_spec(dataset)
    variant = dataset.removeprefix(spec.name).removeprefix("_") or None
    wanted = set(question_ids)
    return {
        question.question_id: question
        for conversation in spec.source(variant, None, resolve_data_dir())()
        for question in conversation.questions
        if question.question_id in wanted
    }


def read_answers(path: Path, dataset: str | None = None) -> list[JudgedAnswer]:
    """The lines of ``path`` in file order; with ``dataset``, questions taken from it by id.

    Raises: InputError: a malformed line, a missing key, a repeated id, or an id not in the
    dataset."""
    lines: list[tuple[int, str, str, dict[str, Any]]] = []
    for line, question_id, record in read_lines_by_id(path):
        lines.append((line, question_id, _prediction(record, path, line), record))
    if dataset is None:
        return [
            JudgedAnswer(line, _line_question(record, question_id, path, line), prediction)
            for line, question_id, prediction, record in lines
        ]
    questions = dataset_questions(dataset, [question_id for _, question_id, _, _ in lines])
    answers = []
    for line, question_id, prediction, _ in lines:
        if question_id not in questions:
            raise InputError(path, line, f"question {question_id!r} is not in {dataset}")
        answers.append(JudgedAnswer(line, questions[question_id], prediction))
    return answers


def score_records(
    answers: Sequence[JudgedAnswer], verdicts: Sequence[Verdict]
) -> list[dict[str, Any]]:
    """Each verdict as a run's record carries it (``scores.judge_acc``, None for a failed one),
    so that :mod:`benchmarks.metrics.aggregate` aggregates it as it aggregates a run."""
    return [
        {
            "question_id": answer.question.question_id,
            "conversation_id": answer.question.question_id,
            "category": answer.question.category,
            "is_abstention": answer.question.is_abstention,
            "scores": {SCORE: None if verdict.correct is None else float(verdict.correct)},
        }
        for answer, verdict in zip(answers, verdicts, strict=True)
    ]


def verdict_line(answer: JudgedAnswer, protocol: str, verdict: Verdict) -> dict[str, Any]:
    """One ``--out`` line."""
    return {
        "question_id": answer.question.question_id,
        "category": answer.question.category,
        "protocol": protocol,
        "label": verdict.correct,
        "reply": verdict.reply,
        "error": verdict.error,
    }


def _row(scope: str, cell: Cell | None, failed: int) -> list[Any]:
    if cell is None:
        return [scope, "—", "—", 0, failed]
    return [scope, f"{cell.mean:.4f}", f"[{cell.low:.3f}, {cell.high:.3f}]", cell.n, failed]


def accuracy_table(records: Sequence[Mapping[str, Any]], *, adversarial: str) -> str:
    """Markdown: judge accuracy with its 95% interval and n, and failed verdicts, per scope."""
    records = [dict(record) for record in records]
    categories = sorted({record["category"] for record in records})
    cells = cells_by_scope(records, adversarial, categories, (SCORE,), unit=UNIT, seed=SEED)

    def failed(members: Sequence[Mapping[str, Any]]) -> int:
        return sum(member["scores"][SCORE] is None for member in members)

    overall = [record for record in records if in_overall(record, adversarial)]
    rows = [_row("overall", cells["overall"][SCORE], failed(overall))]
    for category in categories:
        members = [r for r in records if r["category"] == category]
        rows.append(_row(category, cells[category][SCORE], failed(members)))
    longmemeval = [r for r in records if r["category"] in LONGMEMEVAL_TYPES]
    if longmemeval:
        lme = longmemeval_cells(longmemeval, unit=UNIT, seed=SEED, corpora={})
        judged = [r for r in longmemeval if r["scores"][SCORE] is not None]
        average = "—" if lme.task_averaged is None else f"{lme.task_averaged:.4f}"
        scope = f"task-averaged (mean of {plural(len(lme.per_type), 'type mean')})"
        rows.append([scope, average, "—", len(judged), failed(longmemeval)])
        abstention = [r for r in longmemeval if r["is_abstention"]]
        rows.append(_row("abstention (_abs)", lme.abstention, failed(abstention)))
    header = ["scope", "judge accuracy", "95% CI", "n", "failed"]
    return "\n".join(Table(header, rows).markdown_lines())


@dataclass
class JudgeBackbone:
    """The judge's backbone, with its config name, the cache it reads and its call counts."""

    name: str
    backbone: Backbone
    cache: ResponseCache
    accounting: Accounting


def open_judge_backbone(name: str, overrides: Sequence[str]) -> JudgeBackbone:
    """``conf/backbone/<name>.yaml`` composed in the runners' config with ``overrides``, checked
    as a run checks it, on the runners' response cache (``cache_dir``, ``llm_cache_mode``)."""
    cfg = compose_config([f"backbone={name}", *overrides])
    config = backbone_config(cfg, "backbone")
    cache_dir = Path(cfg.cache_dir).expanduser()
    cache = open_response_cache(
        cache_dir if cache_dir.is_absolute() else REPO_ROOT / cache_dir,
        cfg.llm_cache_mode,
        OmegaConf.select(cfg, "llm_cache_journal"),
    )
    accounting = Accounting()
    backbone = build_backbone(config, cache=cache, accounting=accounting)
    return JudgeBackbone(str(config.name), backbone, cache, accounting)


def report(
    path: Path,
    protocol: str,
    judge: JudgeBackbone,
    records: Sequence[Mapping[str, Any]],
    *,
    adversarial: str,
) -> str:
    """What the CLI prints: protocol and judge model first, then the table and the costs."""
    failed = sum(record["scores"][SCORE] is None for record in records)
    locomo = any(record["category"] in LOCOMO_CATEGORIES.values() for record in records)
    intervals = "95% CIs resample questions (1000 resamples, seed 0)"
    if locomo:
        intervals += f"; {understated('they')}"
    calls = judge.accounting.totals()
    lines = [
        f"Judge accuracy of {path}: protocol {protocol}, judge model {judge.name} "
        f"({judge.backbone.model_id}), {plural(len(records), 'question')}",
        f"{protocol}: {PROTOCOLS[protocol].description}. {ABSTENTION_RULE}.",
        intervals + ".",
        f"Failed verdicts: {failed}, left out of every mean (a rerun asks again, up the judge's retry ladder)."
        if failed
        else "Failed verdicts: 0.",
    ]
    if locomo and any(r["category"] == ADVERSARIAL for r in records):
        kept = "included in" if adversarial == "include" else "left out of"
        lines.append(f"Category 5 (adversarial) is {kept} overall (--adversarial).")
    lines += [
        "",
        accuracy_table(records, adversarial=adversarial),
        "",
        f"Judge calls: {calls['calls']} (cache hits {calls['cache_hits']}, "
        f"failed {calls['failed']}).",
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """``qa --judge``: read, check, grade, print; an input or config error is one ``error:``
    line and exit 2, before the model is loaded."""
    try:
        answers = read_answers(args.pred, args.dataset)
        if not answers:
            raise InputError(args.pred, None, "no answers to judge")
        # Every evaluator file the judge and its prompts read, checked before the model loads.
        official = PROTOCOLS[args.judge].official_text
        if official is not None:
            official()
        for answer in answers:
            judge_prompt(answer.question, answer.prediction, args.judge)
        judge_backbone = open_judge_backbone(
            args.judge_backbone or DEFAULT_JUDGE_BACKBONE, args.overrides
        )
    except (
        InputError,
        DatasetError,
        DataMissingError,
        ConfigError,
        HydraException,
        OmegaConfBaseException,
        OSError,
    ) as error:
        # Hydra's own message ends with its search path: noise here.
        print(f"error: {str(error).split(HYDRA_SEARCH_PATH)[0]}", file=sys.stderr)
        return 2
    try:
        judge = Judge(judge_backbone.backbone, protocols=[args.judge])
        graded = judge.grade_many([(answer.question, answer.prediction) for answer in answers])
    finally:
        judge_backbone.cache.close()
    verdicts = [verdicts[args.judge] for verdicts in graded]
    records = score_records(answers, verdicts)
    print(report(args.pred, args.judge, judge_backbone, records, adversarial=args.adversarial))
    if args.out:
        with args.out.open("w", encoding="utf-8") as handle:
            for answer, verdict in zip(answers, verdicts, strict=True):
                handle.write(json.dumps(verdict_line(answer, args.judge, verdict)) + "\n")
    return 0
