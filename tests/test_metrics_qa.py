"""QA scorers pinned by hand-computed cases, properties, and the CLI end to end."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.metrics.jsonl import InputError
from benchmarks.metrics.qa import (
    QAPrediction,
    bleu1,
    f1_locomo,
    f1_set,
    main,
    normalize_category,
    normalize_locomo_answer,
    read_predictions,
    score_predictions,
)
from memsys.types import LOCOMO_CATEGORIES

REPO_ROOT = Path(__file__).resolve().parents[1]


# --- f1_locomo -------------------------------------------------------------------------------


def test_normalize_matches_locomo_steps() -> None:
    assert normalize_locomo_answer("The cat, and a DOG!") == "cat dog"
    assert normalize_locomo_answer("  Anna's   band-mate ") == "annas bandmate"
    assert normalize_locomo_answer("the an a and") == ""


def test_f1_locomo_stems_and_counts_multisets() -> None:
    assert f1_locomo("running dogs", "run dog", "single_hop") == 1.0
    # Counter intersection: cat x1, dog x1 -> precision = recall = 2/3.
    assert f1_locomo("cat cat dog", "cat dog dog", "temporal") == pytest.approx(2 / 3)
    assert f1_locomo("The cat sat", "a cat sat down", "single_hop") == pytest.approx(0.8)


def test_f1_locomo_multi_hop_splits_on_commas() -> None:
    # Gold parts "Rome" (best 1.0) and "Oslo" (best 0.0) -> 0.5.
    assert f1_locomo("Paris, Rome", "Rome, Oslo", "multi_hop") == 0.5
    # One gold part, best prediction part matches it exactly.
    assert f1_locomo("Paris, Rome", "Rome", "multi_hop") == 1.0
    # Plain F1 on the same pair: commas removed, "paris rome" vs "rome" -> 2/3.
    assert f1_locomo("Paris, Rome", "Rome", "single_hop") == pytest.approx(2 / 3)
    # Gold "pottery class" vs prediction parts: best is "pottery" (p=1, r=1/2 -> 2/3);
    # gold "painting" matches exactly -> mean (2/3 + 1) / 2.
    assert f1_locomo("pottery, painting", "pottery class, painting", 1) == pytest.approx(5 / 6)


def test_f1_locomo_open_domain_cuts_gold_at_semicolon() -> None:
    gold = "hiking; walking in the woods"
    assert f1_locomo("hiking", gold, "open_domain") == 1.0
    assert f1_locomo("hiking", gold, 3) == 1.0
    # Without the cut: gold stems hike, walk, in, wood -> p = 1, r = 1/4 -> 0.4.
    assert f1_locomo("hiking", gold, "single_hop") == pytest.approx(0.4)


@pytest.mark.parametrize(
    ("prediction", "expected"),
    [
        ("No information available.", 1.0),
        ("That was NOT MENTIONED in the chat", 1.0),
        ("It is not mentioned.", 1.0),
        ("I don't know", 0.0),
        ("a red car", 0.0),
        ("", 0.0),
    ],
)
def test_f1_locomo_adversarial_phrases(prediction: str, expected: float) -> None:
    assert f1_locomo(prediction, "a red car", "adversarial") == expected
    assert f1_locomo(prediction, "a red car", 5) == expected


def test_f1_locomo_empty_and_int_answers() -> None:
    assert f1_locomo("", "Paris", "single_hop") == 0.0
    assert f1_locomo("Paris", "", "single_hop") == 0.0
    assert f1_locomo("", "", "multi_hop") == 0.0
    assert f1_locomo("the", "the", "temporal") == 0.0  # both normalize to nothing
    assert f1_locomo("2022", 2022, 2) == 1.0
    assert f1_locomo("3", 3, 1) == 1.0


def test_f1_locomo_longmemeval_categories_use_plain_f1() -> None:
    assert f1_locomo("Paris, Rome", "Rome", "multi_session") == pytest.approx(2 / 3)
    assert f1_locomo("hiking", "hiking; walking", "knowledge_update") == pytest.approx(2 / 3)
    assert f1_locomo("not mentioned", "Rome", "single_session_user") == 0.0


def test_category_codes_and_names_agree() -> None:
    for code, name in LOCOMO_CATEGORIES.items():
        assert normalize_category(code) == name
        pair = ("Paris, Rome; not mentioned", "Rome, Oslo; Paris")
        assert f1_locomo(*pair, code) == f1_locomo(*pair, name)


@pytest.mark.parametrize("category", [0, 6, True, None, 1.0])
def test_invalid_category_raises(category: object) -> None:
    with pytest.raises(ValueError, match="category"):
        f1_locomo("a", "a", category)  # type: ignore[arg-type]


# --- f1_set ----------------------------------------------------------------------------------


def test_f1_set_uses_token_sets_without_stemming() -> None:
    assert f1_set("cat cat dog", "cat dog dog") == 1.0
    assert f1_set("running", "run") == 0.0
    # Articles stay: {the, cat} vs {cat} -> p = 1/2, r = 1 -> 2/3.
    assert f1_set("The cat", "cat") == pytest.approx(2 / 3)


def test_f1_set_separators() -> None:
    assert f1_set("Cat. Dog! Bird? Fish,", "cat dog bird fish") == 1.0
    assert f1_set("cat;", "cat") == 0.0  # only . , ! ? are separators
    assert f1_set("don't", "dont") == 0.0


def test_f1_set_empty_and_int() -> None:
    assert f1_set("", "anything") == 0.0
    assert f1_set("anything", "") == 0.0
    assert f1_set("...", "x") == 0.0
    assert f1_set("", "") == 0.0
    assert f1_set("2022", 2022) == 1.0


# --- bleu1 -----------------------------------------------------------------------------------


def test_bleu1_hand_computed() -> None:
    assert bleu1("Paris", "paris") == 1.0
    # Hypothesis paris, in, may, "." vs reference paris: p1 = 1/4, no brevity penalty.
    assert bleu1("Paris in May.", "paris") == 0.25
    # Hypothesis of 1 token vs reference of 4: p1 = 1, BP = exp(1 - 4/1).
    assert bleu1("paris", "Paris in May.") == pytest.approx(math.exp(-3))
    assert bleu1("london", "paris") == 0.0
    assert bleu1("2022", 2022) == 1.0


def test_bleu1_tokenizer_splits_sentences_and_contractions() -> None:
    # "paris." mid-text is split like punkt + word_tokenize: went, to, paris, ., then, rome.
    assert bleu1("went to paris. then rome", "paris") == pytest.approx(1 / 6)
    # "don't" -> do, n't (Treebank contraction rule): p1 = 1/2.
    assert bleu1("don't", "do") == 0.5


@pytest.mark.parametrize(("prediction", "answer"), [("", "x"), ("x", ""), ("", ""), ("  ", "x")])
def test_bleu1_empty_is_zero_without_warnings(prediction: str, answer: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert bleu1(prediction, answer) == 0.0


# --- properties ------------------------------------------------------------------------------

TEXT = st.text(alphabet=st.sampled_from(list("abc de,.;!?'-")), max_size=30)


@settings(max_examples=150, deadline=None)
@given(prediction=TEXT, answer=TEXT, category=st.sampled_from([1, 2, 3, 4, 5, "multi_session"]))
def test_scores_lie_in_unit_interval(prediction: str, answer: str, category: int | str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for value in (
            f1_locomo(prediction, answer, category),
            f1_set(prediction, answer),
            bleu1(prediction, answer),
        ):
            assert 0.0 <= value <= 1.0


@settings(max_examples=100, deadline=None)
@given(text=TEXT)
def test_identical_text_scores_one_when_it_has_tokens(text: str) -> None:
    if normalize_locomo_answer(text):
        assert f1_locomo(text, text, "single_hop") == pytest.approx(1.0)
    if text.translate(str.maketrans(".,!?", "    ")).split():
        assert f1_set(text, text) == 1.0


@settings(max_examples=100, deadline=None)
@given(a=TEXT, b=TEXT)
def test_f1_set_is_symmetric(a: str, b: str) -> None:
    assert f1_set(a, b) == pytest.approx(f1_set(b, a))


# --- aggregation -----------------------------------------------------------------------------

ITEMS = [
    QAPrediction("q1", "temporal", "May 2023", "May 2023"),
    QAPrediction("q2", "single_hop", "a dog", "a cat"),
    QAPrediction("q3", "adversarial", "Not mentioned.", "red car", "red car"),
    QAPrediction("q4", "adversarial", "a red car", "blue car", "red car"),
]


def test_score_predictions_excludes_adversarial_by_default() -> None:
    report = score_predictions(ITEMS)
    assert report["adversarial"] == "exclude"
    assert report["n"] == 4
    # f1_set: q1 = 1, q2: {a, dog} vs {a, cat} = 1/2 -> mean 0.75 over 2.
    assert report["f1_set"]["n"] == 2
    assert report["f1_set"]["mean"] == pytest.approx(0.75)
    # The policy applies to f1_locomo too: q1 = 1, q2 = 0 (only "a" overlaps, removed).
    assert report["f1_locomo"]["n"] == 2
    assert report["f1_locomo"]["mean"] == pytest.approx(0.5)
    # Category 5 by LoCoMo's refusal rule: q3 = 1 (refusal), q4 = 0.
    assert report["f1_locomo"]["per_category"]["adversarial"] == {"mean": 0.5, "n": 2}
    per_category = report["f1_set"]["per_category"]
    assert list(per_category) == ["adversarial", "single_hop", "temporal"]
    # Adversarial items compare against adversarial_answer: q3 = 0, q4 {a, red, car} = 0.8.
    assert per_category["adversarial"] == {"mean": pytest.approx(0.4), "n": 2}


def test_score_predictions_include_policy() -> None:
    report = score_predictions(ITEMS, adversarial="include")
    assert report["f1_set"]["n"] == 4
    assert report["f1_set"]["mean"] == pytest.approx((1 + 0.5 + 0 + 0.8) / 4)
    assert report["bleu1"]["n"] == 4


def test_adversarial_reference_falls_back_to_answer() -> None:
    item = QAPrediction("q", "adversarial", "red car", "red car")
    assert score_predictions([item], adversarial="include")["f1_set"]["mean"] == 1.0


def test_score_predictions_empty_and_bad_policy() -> None:
    report = score_predictions([])
    assert report["f1_set"] == {"mean": None, "n": 0, "per_category": {}}
    with pytest.raises(ValueError, match="adversarial"):
        score_predictions(ITEMS, adversarial="skip")  # type: ignore[arg-type]


# --- input file and CLI ----------------------------------------------------------------------


def _write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _record(**fields: object) -> str:
    return json.dumps(fields)


def _run_cli(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.metrics.qa", "--pred", str(path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )


GOOD_LINES = [
    _record(id="q1", category=2, prediction="7 May 2023", answer="7 May 2023"),
    _record(id="q2", category=1, prediction="Paris, Rome", answer="Rome, Oslo"),
    _record(id="q3", category=4, prediction="3", answer=3),
    _record(id="q4", category=5, prediction="Not mentioned", answer="x", adversarial_answer="red"),
    _record(id="q5", category="multi_session", prediction="two", answer=2),
]


def test_cli_prints_one_json_object(tmp_path: Path) -> None:
    path = _write_lines(tmp_path / "pred.jsonl", GOOD_LINES)
    completed = _run_cli(path)
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert set(report) == {"adversarial", "n", "f1_locomo", "f1_set", "bleu1"}
    assert report["n"] == 5
    assert report["f1_locomo"]["per_category"]["multi_hop"] == {"mean": 0.5, "n": 1}
    assert report["f1_locomo"]["per_category"]["adversarial"] == {"mean": 1.0, "n": 1}
    # Category 5 is left out of every overall mean by default, f1_locomo's included.
    assert report["f1_locomo"]["mean"] == pytest.approx((1 + 0.5 + 1 + 0) / 4)
    assert report["f1_locomo"]["n"] == report["f1_set"]["n"] == 4
    assert report["bleu1"]["per_category"]["single_hop"] == {"mean": 1.0, "n": 1}


def test_cli_reports_malformed_line(tmp_path: Path) -> None:
    path = _write_lines(tmp_path / "pred.jsonl", [GOOD_LINES[0], '{"id": "q2", "category": 1,'])
    completed = _run_cli(path)
    assert completed.returncode == 2
    assert f"{path}:2: not valid JSON" in completed.stderr
    assert completed.stdout == ""


def test_cli_include_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write_lines(tmp_path / "pred.jsonl", GOOD_LINES)
    assert main(["--pred", str(path), "--adversarial", "include"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["adversarial"] == "include"
    assert report["f1_set"]["n"] == 5


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        (_record(id="q9", category=2, answer="x"), "missing key 'prediction'"),
        (_record(id="q9", category=7, prediction="x", answer="x"), "unknown LoCoMo category"),
        (_record(id="q9", category=2, prediction=None, answer="x"), "'prediction' must be"),
        (_record(id="q1", category=2, prediction="x", answer="x"), "id 'q1' repeats line 1"),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_read_predictions_names_file_and_line(tmp_path: Path, bad_line: str, message: str) -> None:
    path = _write_lines(tmp_path / "pred.jsonl", [GOOD_LINES[0], "", bad_line])
    with pytest.raises(InputError, match=message) as raised:
        read_predictions(path)
    assert str(raised.value).startswith(f"{path}:3: ")


def test_cli_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--pred", str(tmp_path / "absent.jsonl")]) == 2
    assert "absent.jsonl" in capsys.readouterr().err


def test_cli_reads_locomo_category_5_rows_without_an_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """LoCoMo's own convention: a category-5 row has ``adversarial_answer`` and no ``answer``."""
    lone = _record(id="q6", category=5, prediction="Not mentioned", adversarial_answer="red")
    path = _write_lines(tmp_path / "pred.jsonl", [*GOOD_LINES, lone])
    (item,) = [p for p in read_predictions(path) if p.question_id == "q6"]
    assert (item.answer, item.adversarial_answer) == ("red", "red")
    assert main(["--pred", str(path), "--adversarial", "include"]) == 0
    assert json.loads(capsys.readouterr().out)["f1_set"]["n"] == 6
    no_gold = _record(id="q7", category=5, prediction="x")
    with pytest.raises(InputError, match="missing key 'answer'"):
        read_predictions(_write_lines(tmp_path / "bad.jsonl", [no_gold]))


def test_a_runs_predictions_file_is_read_by_its_question_id_key(tmp_path: Path) -> None:
    """A run's predictions.jsonl names the id ``question_id``; the scorer reads it as it stands,
    and a repeated id is still named."""
    lines = [
        json.dumps(
            {"question_id": "c:q0", "category": "temporal", "prediction": "2022", "answer": 2022}
        ),
        json.dumps(
            {"question_id": "c:q1", "category": "single_hop", "prediction": "x", "answer": "y"}
        ),
    ]
    read = read_predictions(_write_lines(tmp_path / "run.jsonl", lines))
    assert [(p.question_id, p.answer) for p in read] == [("c:q0", "2022"), ("c:q1", "y")]
    repeated = _write_lines(tmp_path / "repeat.jsonl", [lines[0], lines[0]])
    with pytest.raises(InputError, match=r"id 'c:q0' repeats line 1"):
        read_predictions(repeated)
