"""The protocols named after an evaluator are that evaluator's judge, character for character.

The expected texts come from the evaluators' own code: the official ``get_anscheck_prompt``
function node and the ``ACCURACY_PROMPT`` assignment node, taken out of the files with ``ast`` and
run here in a fresh namespace (the project itself only reads their string constants).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from fakes.llm import Recorder

from benchmarks.data import sources
from benchmarks.data.paths import REPO_ROOT, resolve_data_dir
from benchmarks.metrics import official_prompts
from benchmarks.metrics.judge import (
    LONGMEMEVAL_REPLY_TOKENS,
    MEM0_REPLY_SCHEMA,
    MEM0_REPLY_TOKENS,
    PROTOCOLS,
    judge_prompt,
    main,
)
from benchmarks.metrics.judging import MAX_ATTEMPTS, RETRY_REMINDER, Judge
from benchmarks.metrics.official_prompts import EvaluatorFileError
from memsys.types import LONGMEMEVAL_CATEGORIES, Question

pytestmark = pytest.mark.usefixtures("no_env_overrides")

LONGMEMEVAL_TYPES = tuple(LONGMEMEVAL_CATEGORIES)
#: Inputs a careless formatter would mangle: braces, quotes, unicode, newlines, fake fields.
AWKWARD = {
    "question": 'What did I say about {x} and {}?\n\nQuestion: "it\'s" — café ’東京’ 🎉',
    "answer": "{{gold}} {0} {question}\n‘quoted’ \\n tab\tend",
    "response": 'I think {generated_answer} %s {} "yes"\r\nno?\n',
}


def _official_node(path: Path, wanted: Callable[[ast.stmt], bool]) -> dict[str, object]:
    """Run one top-level statement of an evaluator file in a fresh namespace (test-only)."""
    module = ast.parse(path.read_text(encoding="utf-8"))
    (node,) = [statement for statement in module.body if wanted(statement)]
    namespace: dict[str, object] = {}
    exec(compile(ast.Module([node], type_ignores=[]), str(path), "exec"), namespace)
    return namespace


def official_anscheck() -> Callable[..., str]:
    path = resolve_data_dir() / sources.LONGMEMEVAL_JUDGE.local
    namespace = _official_node(
        path, lambda n: isinstance(n, ast.FunctionDef) and n.name == "get_anscheck_prompt"
    )
    return namespace["get_anscheck_prompt"]  # type: ignore[return-value]


def official_accuracy_prompt() -> str:
    path = resolve_data_dir() / sources.MEM0_JUDGE.local
    namespace = _official_node(
        path,
        lambda n: isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "ACCURACY_PROMPT",
    )
    return namespace["ACCURACY_PROMPT"]  # type: ignore[return-value]


def shown(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["--show-prompt", *argv]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    return captured.out


def show_args(protocol: str, question_type: str, inputs: dict[str, str]) -> list[str]:
    return [
        "--protocol",
        protocol,
        "--question-type",
        question_type,
        "--question",
        inputs["question"],
        "--answer",
        inputs["answer"],
        "--response",
        inputs["response"],
    ]


@pytest.mark.parametrize("question_type", LONGMEMEVAL_TYPES)
def test_longmemeval_prompt_is_the_official_text(
    question_type: str, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = official_anscheck()(
        question_type, AWKWARD["question"], AWKWARD["answer"], AWKWARD["response"]
    )
    assert shown(capsys, *show_args("longmemeval", question_type, AWKWARD)) == expected


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_abstention_prompt_is_the_official_text_under_every_protocol(
    protocol: str, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = official_anscheck()(
        "multi-session", AWKWARD["question"], AWKWARD["answer"], AWKWARD["response"], True
    )
    argv = show_args(protocol, "multi-session", AWKWARD)
    assert shown(capsys, *argv, "--abstention") == expected


@pytest.mark.parametrize("category", ["multi_hop", "1", "5", "single_hop"])
def test_mem0_prompt_is_the_official_text(
    category: str, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = official_accuracy_prompt().format(
        question=AWKWARD["question"],
        gold_answer=AWKWARD["answer"],
        generated_answer=AWKWARD["response"],
    )
    assert shown(capsys, *show_args("mem0", category, AWKWARD)) == expected


def test_longmemeval_on_locomo_uses_the_single_session_user_template(
    capsys: pytest.CaptureFixture[str],
) -> None:
    expected = official_anscheck()(
        "single-session-user", AWKWARD["question"], AWKWARD["answer"], AWKWARD["response"]
    )
    for category in ("multi_hop", "temporal", "2"):
        assert shown(capsys, *show_args("longmemeval", category, AWKWARD)) == expected


def test_the_shown_prompt_is_the_message_sent(capsys: pytest.CaptureFixture[str]) -> None:
    """--show-prompt prints what the judge sends: the one user message of rung 1."""
    recorder = Recorder(["yes"])
    question = Question("q", "c", "How many days?", "18", "temporal_reasoning")
    Judge(recorder, protocols=("longmemeval",)).grade_many([(question, "19 days")])  # type: ignore[arg-type]
    (request,) = recorder.sent
    inputs = {"question": "How many days?", "answer": "18", "response": "19 days"}
    printed = shown(capsys, *show_args("longmemeval", "temporal-reasoning", inputs))
    assert [dict(m) for m in request.messages] == [{"role": "user", "content": printed}]


def test_bad_protocol_or_type_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    inputs = {"question": "q", "answer": "a", "response": "r"}
    assert main(["--show-prompt", *show_args("longmemeval", "temporal_reasoning", inputs)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error: unknown question type")
    assert captured.err.count("\n") == 1
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.metrics.judge", "--show-prompt",
         *show_args("lenient", "multi_hop", inputs)],
        cwd=REPO_ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert completed.returncode == 2 and completed.stdout == ""
    assert completed.stderr.startswith("error: unknown judge protocol")
    assert completed.stderr.count("\n") == 1


def grade(protocol: str, replies: Sequence[str], question: Question) -> tuple[Recorder, object]:
    recorder = Recorder(replies)
    judge = Judge(recorder, protocols=(protocol,))  # type: ignore[arg-type]
    ((verdict,),) = [list(v.values()) for v in judge.grade_many([(question, "an answer")])]
    return recorder, verdict


LME_QUESTION = Question("q", "c", "Where?", "Lisbon", "multi_session")
LOCOMO_QUESTION = Question("q", "c", "Where?", "Lisbon", "single_hop")


@pytest.mark.parametrize(
    ("reply", "correct"),
    [("Yes.", True), ("no", False), ("The answer is yes", True), ("eyes", True), ("", False),
     ("  YES \n", True), ("No, not yes-worthy", True), ("Nope.", False)],
)  # fmt: skip
def test_longmemeval_reads_yes_as_the_official_code_does(reply: str, correct: bool) -> None:
    recorder, verdict = grade("longmemeval", [reply], LME_QUESTION)
    assert verdict.correct is correct and verdict.error is None  # type: ignore[attr-defined]
    assert correct == ("yes" in reply.strip().lower())  # the official expression
    (request,) = recorder.sent  # every reply is a verdict: no second rung
    assert request.params.max_tokens == LONGMEMEVAL_REPLY_TOKENS == 10
    assert request.params.temperature == 0.0 and request.params.json_schema is None
    assert len(request.messages) == 1 and request.messages[0]["role"] == "user"


@pytest.mark.parametrize(
    ("reply", "correct"),
    [
        ('{"label": "CORRECT"}', True),
        ('{"label": "WRONG"}', False),
        ('```json\n{"label": "CORRECT"}\n```', True),
        ('The answer names the city.\n```\n{"label": "CORRECT"}\n```\nDone.', True),
        ('  {"explanation": "same city", "label": "CORRECT"}  ', True),
        ('{"label": "correct"}', False),  # exact match, as mem0's `label == "CORRECT"`
        ('{"label": "CORRECT."}', False),
    ],
)
def test_mem0_reads_the_label_as_mem0_does(reply: str, correct: bool) -> None:
    recorder, verdict = grade("mem0", [reply], LOCOMO_QUESTION)
    assert verdict.correct is correct and verdict.error is None  # type: ignore[attr-defined]
    (request,) = recorder.sent
    assert request.params.max_tokens == MEM0_REPLY_TOKENS
    assert request.params.temperature == 0.0
    assert request.params.json_schema == MEM0_REPLY_SCHEMA
    assert len(request.messages) == 1 and request.messages[0]["role"] == "user"


def test_an_unreadable_mem0_reply_climbs_the_ladder_then_fails() -> None:
    """Garbage (or JSON without a label) is asked again with a reminder; still none: a counted
    failure this run, asked again by the next until every rung is tried."""
    recorder, verdict = grade("mem0", ["CORRECT, I think", '{"verdict": "CORRECT"}'],
                              LOCOMO_QUESTION)  # fmt: skip
    assert verdict.correct is None and verdict.attempts == 2  # type: ignore[attr-defined]
    assert "unparseable verdict" in verdict.error and not verdict.final  # type: ignore[attr-defined]
    first, second = recorder.sent
    assert [m["content"] for m in second.messages[1:]] == ["CORRECT, I think", RETRY_REMINDER]
    assert second.messages[0] == first.messages[0]
    recovered = Recorder(["nonsense", '{"label": "CORRECT"}'])
    judge = Judge(recovered, protocols=("mem0",))  # type: ignore[arg-type]
    ((verdict,),) = [list(v.values()) for v in judge.grade_many([(LOCOMO_QUESTION, "x")])]
    assert verdict.correct is True and verdict.attempts == 2
    assert judge.parsers["mem0_label"].counts() == {"clean": 1, "unparseable": 1, "invalid": 0}
    assert MAX_ATTEMPTS > 2


def test_the_shared_prefix_is_the_template_before_its_first_field() -> None:
    """mem0's example holds an earlier "Question:"; the prefix still runs to the real one."""
    prompt = judge_prompt(LOCOMO_QUESTION, "Porto", "mem0")
    template = official_prompts.mem0_accuracy_prompt()
    assert prompt.text[: prompt.prefix] == template[: template.index("{question}")]
    assert "Hawaii" in prompt.text[: prompt.prefix]
    lme = judge_prompt(LME_QUESTION, "Porto", "longmemeval")
    by_type, _ = official_prompts.longmemeval_templates()
    assert lme.text[: lme.prefix] == by_type["multi-session"].split("{}")[0]
    assert lme.text[: lme.prefix].endswith("Question: ")


def test_the_project_holds_no_copy_of_the_official_texts() -> None:
    by_type, abstention = official_prompts.longmemeval_templates()
    texts = [*by_type.values(), abstention, official_prompts.mem0_accuracy_prompt()]
    sentences = {
        sentence.strip()
        for text in texts
        for sentence in text.replace("\n", ". ").split(". ")
        if len(sentence.strip()) > 40
    }
    roots = ["benchmarks", "memsys", "conf", "docs", "scripts", "tests", "README.md"]
    files = [
        path
        for root in roots
        for path in ([REPO_ROOT / root] if root.endswith(".md") else (REPO_ROOT / root).rglob("*"))
        if path.suffix in {".py", ".md", ".yaml", ".txt", ".json"} and path.is_file()
    ]
    for path in files:
        content = path.read_text(encoding="utf-8", errors="replace")
        copied = [sentence for sentence in sentences if sentence in content]
        assert copied == [], f"{path} copies {copied[0]!r}"


@pytest.fixture
def altered_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data folder whose mem0 evaluator file differs from the pinned one by one byte."""
    shutil.copytree(resolve_data_dir() / "evaluators", tmp_path / "evaluators")
    target = tmp_path / sources.MEM0_JUDGE.local
    data = bytearray(target.read_bytes())
    data[data.index(b"generous")] = ord("G")
    target.write_bytes(bytes(data))
    monkeypatch.setenv("MEMBENCH_DATA", str(tmp_path))
    return target


def test_an_altered_evaluator_file_stops_only_its_protocol(
    altered_data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(EvaluatorFileError) as raised:
        Judge(Recorder([]), protocols=("strict", "mem0"))  # type: ignore[arg-type]
    message = str(raised.value)
    assert "\n" not in message and str(altered_data) in message
    assert "expected sha256 ac2e242f" in message and "found " in message
    assert message.endswith("run `make data`")
    _, verdict = grade("strict", ['{"label": "CORRECT"}'], LOCOMO_QUESTION)
    assert verdict.correct is True  # type: ignore[attr-defined]
    _, verdict = grade("longmemeval", ["yes"], LME_QUESTION)
    assert verdict.correct is True  # type: ignore[attr-defined]
    inputs = {"question": "q", "answer": "a", "response": "r"}
    assert main(["--show-prompt", *show_args("mem0", "multi_hop", inputs)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == f"error: {message}\n"


def test_a_missing_evaluator_file_says_missing(
    altered_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (altered_data.parents[2] / sources.LONGMEMEVAL_JUDGE.local).unlink()
    with pytest.raises(EvaluatorFileError, match=r"evaluate_qa\.py: missing \(expected sha256 "
                       r"ecce9c4c\w+\); run `make data`$"):  # fmt: skip
        Judge(Recorder([]), protocols=("longmemeval",))  # type: ignore[arg-type]
    _, verdict = grade("strict", ['{"label": "WRONG"}'], LOCOMO_QUESTION)
    assert verdict.correct is False  # type: ignore[attr-defined]


def test_a_changed_judge_prompt_makes_a_new_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run identity holds each protocol's prompt version, so a run graded under an older
    prompt is not resumed as if it were the same run; retrieval-only runs are unaffected."""
    from benchmarks.config.compose import compose_config
    from benchmarks.metrics import judge
    from benchmarks.pipeline.settings import run_id, run_identity

    judged = compose_config(["method=turn_rag_bm25"])
    unjudged = compose_config(["method=turn_rag_bm25", "answer=none"])
    before = run_id(run_identity(judged)), run_id(run_identity(unjudged))
    assert set(run_identity(judged)["judge"]["prompt_versions"]) == {
        "mem0",
        "strict",
        "longmemeval",
    }
    monkeypatch.setattr(judge, "STRICT_INSTRUCTION", judge.STRICT_INSTRUCTION + " ")
    after = run_id(run_identity(judged)), run_id(run_identity(unjudged))
    assert after[0] != before[0] and after[1] == before[1]
