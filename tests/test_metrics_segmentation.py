"""Segmentation scores: hand cases, equality with nltk and sklearn, properties, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.metrics.segmentation import pk as nltk_pk
from nltk.metrics.segmentation import windowdiff as nltk_windowdiff
from sklearn.metrics import f1_score

from benchmarks.metrics.jsonl import InputError
from benchmarks.metrics.segmentation import (
    main,
    read_label_pairs,
    score_segmentation,
    window_size,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
Labels = list[int]
#: Means of a dialogue without boundaries on either side: no window errors, binary F1 0
#: (zero_division), macro F1 (1 + 0) / 2.
NO_BOUNDARY_MEANS = {"pk": 0.0, "wd": 0.0, "f1": 0.0, "f1_macro": 0.5, "score": 0.5, "n": 1}


def _forced(labels: Labels) -> Labels:
    return [*labels[:-1], 0]


def _as_string(labels: Labels) -> str:
    return "".join(str(label) for label in _forced(labels))


def _random_pairs(
    rng: np.random.Generator, count: int, max_length: int
) -> list[tuple[Labels, Labels]]:
    """Random dialogues with varied lengths and boundary densities (all-zero ones included)."""
    pairs = []
    for _ in range(count):
        n = int(rng.integers(1, max_length + 1))
        ref_density, pred_density = rng.uniform(0, 0.6, size=2)
        pairs.append(
            (
                (rng.random(n) < ref_density).astype(int).tolist(),
                (rng.random(n) < pred_density).astype(int).tolist(),
            )
        )
    return pairs


def _assert_matches_nltk(pairs: list[tuple[Labels, Labels]]) -> int:
    """Pk and WindowDiff equal nltk's to 1e-12 for every dialogue with n >= k; returns checked."""
    scores = score_segmentation(pairs)
    checked = 0
    for index, (reference, prediction) in enumerate(pairs):
        k = window_size(len(reference), sum(_forced(reference)))
        assert scores.window[index] == k
        if len(reference) < k:  # too short for nltk; covered by its own test
            continue
        ref, hyp = _as_string(reference), _as_string(prediction)
        assert abs(scores.pk[index] - nltk_pk(ref, hyp, k=k)) <= 1e-12
        assert abs(scores.wd[index] - nltk_windowdiff(ref, hyp, k)) <= 1e-12
        checked += 1
    return checked


# --- window ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "boundaries", "expected"),
    [
        (12, 2, 2),  # 12 / 3 / 2 = 2
        (10, 1, 2),  # 2.5 rounds to even 2
        (14, 1, 4),  # 3.5 rounds to even 4
        (6, 0, 3),
        (1, 0, 2),  # never below 2
        (40, 0, 20),
    ],
)
def test_window_size(n: int, boundaries: int, expected: int) -> None:
    assert window_size(n, boundaries) == expected


# --- hand-computed ---------------------------------------------------------------------------


def test_hand_computed_dialogue() -> None:
    # n = 6, one reference boundary -> k = round(1.5) = 2; windows [i, i+2) for i = 0..4:
    # ref counts 0,1,1,0,0 vs pred 1,1,0,0,0 -> 2 differing windows of 5.
    scores = score_segmentation([([0, 0, 1, 0, 0, 0], [0, 1, 0, 0, 0, 0])])
    assert scores.window.tolist() == [2]
    assert scores.pk.tolist() == [0.4]
    assert scores.wd.tolist() == [0.4]
    assert scores.f1.tolist() == [0.0]
    # Class 0: 5 true, 5 predicted, 4 agree -> F1 0.8; macro (0.8 + 0) / 2.
    assert scores.f1_macro.tolist() == [pytest.approx(0.4)]
    assert scores.score.tolist() == [pytest.approx((0 + 0.6 + 0.6) / 4)]


def test_windowdiff_differs_from_pk_on_counts() -> None:
    # Both sides have a boundary in the first window, but two on the predicted side.
    scores = score_segmentation([([0, 1, 0, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0, 0])])
    # n = 8, one boundary -> k = 2; windows 0..6: ref counts 1,1,0,.. pred 2,1,0,..
    assert scores.pk.tolist() == [0.0]
    assert scores.wd.tolist() == [pytest.approx(1 / 7)]
    # Binary: TP 1, true 1, predicted 2 -> 2/3.
    assert scores.f1.tolist() == [pytest.approx(2 / 3)]


def test_perfect_prediction() -> None:
    labels = [0, 0, 1, 0, 1, 0, 0, 0]
    scores = score_segmentation([(labels, labels)])
    assert scores.means() == {
        "pk": 0.0,
        "wd": 0.0,
        "f1": 1.0,
        "f1_macro": 1.0,
        "score": 1.0,
        "n": 1,
    }


def test_last_label_is_forced_to_zero() -> None:
    forced = score_segmentation([([0, 1, 0, 1], [1, 0, 0, 1])])
    plain = score_segmentation([([0, 1, 0, 0], [1, 0, 0, 0])])
    assert forced.means() == plain.means()


@pytest.mark.parametrize("reference", [[0], [1]])
@pytest.mark.parametrize("prediction", [[0], [1]])
def test_one_utterance_dialogue(reference: Labels, prediction: Labels) -> None:
    # n = 1 < k = 2: compared as a whole; both labels are forced to 0.
    scores = score_segmentation([(reference, prediction)])
    assert scores.means() == NO_BOUNDARY_MEANS


def test_too_short_dialogue_equals_nltk_at_window_n() -> None:
    scores = score_segmentation([([1], [0])])
    assert scores.window.tolist() == [2]
    assert scores.pk[0] == nltk_pk("0", "0", k=1)
    assert scores.wd[0] == nltk_windowdiff("0", "0", 1)


def test_two_utterances_use_one_window() -> None:
    # n = 2, k = 2: the only window is the whole dialogue; the last label is forced to 0.
    scores = score_segmentation([([1, 0], [0, 0]), ([1, 0], [1, 1])])
    assert scores.pk.tolist() == [1.0, 0.0]
    assert scores.wd.tolist() == [1.0, 0.0]


def test_all_zero_labels() -> None:
    zeros = [0] * 6
    both_zero = score_segmentation([(zeros, zeros)])
    assert both_zero.means() == NO_BOUNDARY_MEANS
    # k = 3; windows [0,3) [1,4) [2,5) [3,6): the predicted boundary at 1 is in the first two.
    spurious = score_segmentation([(zeros, [0, 1, 0, 0, 0, 0])])
    assert spurious.pk.tolist() == [0.5]
    assert spurious.wd.tolist() == [0.5]
    assert spurious.f1.tolist() == [0.0]
    # Class 0: 6 true, 5 predicted, 5 agree -> 10/11; class 1 absent from the reference -> 0.
    assert spurious.f1_macro.tolist() == [pytest.approx(5 / 11)]


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        ([], "no dialogues"),
        ([([0, 1, 0], [0, 1])], "dialogue 0: 3 reference labels but 2 predicted"),
        ([([0], [0]), ([], [])], "dialogue 1: no labels"),
        ([([0, 2, 0], [0, 1, 0])], "reference labels must be 0 or 1"),
        ([([0, 1, 0], [0, -1, 0])], "predicted labels must be 0 or 1"),
    ],
)
def test_invalid_input(pairs: list[tuple[Labels, Labels]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        score_segmentation(pairs)


# --- equality with nltk and sklearn ----------------------------------------------------------


def test_pk_windowdiff_equal_nltk_on_random_labelings() -> None:
    pairs = _random_pairs(np.random.default_rng(7), count=2000, max_length=60)
    assert _assert_matches_nltk(pairs) > 1900


def test_f1_equals_sklearn_on_random_labelings() -> None:
    pairs = _random_pairs(np.random.default_rng(11), count=300, max_length=30)
    scores = score_segmentation(pairs)
    for index, (reference, prediction) in enumerate(pairs):
        y_true, y_pred = _forced(reference), _forced(prediction)
        binary = f1_score(y_true, y_pred, average="binary", zero_division=0)
        macro = f1_score(y_true, y_pred, labels=[0, 1], average="macro", zero_division=0)
        assert abs(scores.f1[index] - binary) <= 1e-12
        assert abs(scores.f1_macro[index] - macro) <= 1e-12


@pytest.mark.parametrize("dataset", ["dialseg711", "tiage", "superdialseg"])
def test_equal_nltk_on_every_test_set(dataset: str) -> None:
    data = pytest.importorskip("benchmarks.data")
    try:
        dialogues = data.load_segmentation(dataset, split="test")
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    rng = np.random.default_rng(2024)
    pairs = []
    for dialogue in dialogues:
        references = list(dialogue.boundary_labels)
        density = rng.uniform(0, 0.5)
        pairs.append((references, (rng.random(len(references)) < density).astype(int).tolist()))
    assert _assert_matches_nltk(pairs) == sum(len(ref) >= 2 for ref, _ in pairs)


# --- properties ------------------------------------------------------------------------------

LABELS = st.lists(st.integers(0, 1), min_size=1, max_size=40)


@st.composite
def label_pairs(draw: st.DrawFn) -> tuple[Labels, Labels]:
    reference = draw(LABELS)
    prediction = draw(st.lists(st.integers(0, 1), min_size=len(reference), max_size=len(reference)))
    return reference, prediction


@settings(max_examples=200, deadline=None)
@given(pairs=st.lists(label_pairs(), min_size=1, max_size=5))
def test_scores_lie_in_unit_interval(pairs: list[tuple[Labels, Labels]]) -> None:
    scores = score_segmentation(pairs)
    for values in (scores.pk, scores.wd, scores.f1, scores.f1_macro, scores.score):
        assert np.all((values >= 0) & (values <= 1))
    assert np.all(scores.pk <= scores.wd)  # a count difference is needed for a Pk error
    _assert_matches_nltk(pairs)


@settings(max_examples=200, deadline=None)
@given(reference=LABELS)
def test_perfect_prediction_scores_zero_error(reference: Labels) -> None:
    scores = score_segmentation([(reference, reference)])
    assert scores.pk[0] == 0.0
    assert scores.wd[0] == 0.0
    assert scores.f1_macro[0] in (0.5, 1.0)  # 0.5 when the boundary class is absent
    assert scores.f1[0] == (1.0 if any(_forced(reference)) else 0.0)


# --- input files and CLI ---------------------------------------------------------------------


def _write(path: Path, records: list[dict[str, object] | str]) -> Path:
    lines = [record if isinstance(record, str) else json.dumps(record) for record in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _run_cli(ref: Path, pred: Path) -> subprocess.CompletedProcess[str]:
    command = ["-m", "benchmarks.metrics.segmentation", "--ref", str(ref), "--pred", str(pred)]
    return subprocess.run([sys.executable, *command], cwd=REPO_ROOT, capture_output=True, text=True)


REFERENCE = [
    {"id": "d1", "labels": [0, 0, 1, 0, 0, 0]},
    {"id": "d2", "labels": [0]},
]


def test_cli_prints_means(tmp_path: Path) -> None:
    ref = _write(tmp_path / "ref.jsonl", REFERENCE)
    pred = _write(
        tmp_path / "pred.jsonl",
        [{"id": "d2", "labels": [1]}, {"id": "d1", "labels": [0, 1, 0, 0, 0, 0]}],
    )
    completed = _run_cli(ref, pred)
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert report == {
        "pk": pytest.approx(0.2),
        "wd": pytest.approx(0.2),
        "f1": 0.0,
        "f1_macro": pytest.approx(0.45),
        "score": pytest.approx(0.4),
        "n": 2,
    }


def test_cli_reports_malformed_line(tmp_path: Path) -> None:
    ref = _write(tmp_path / "ref.jsonl", REFERENCE)
    pred = _write(tmp_path / "pred.jsonl", [REFERENCE[0], '{"id": "d2", "labels": [0'])
    completed = _run_cli(ref, pred)
    assert completed.returncode == 2
    assert f"{pred}:2: not valid JSON" in completed.stderr


@pytest.mark.parametrize(
    ("predictions", "message"),
    [
        ([REFERENCE[0]], r"pred\.jsonl: no line for id 'd2' \(.*ref\.jsonl:2\)"),
        ([*REFERENCE, {"id": "d3", "labels": [0]}], r"pred\.jsonl:3: id 'd3' is not in"),
        (
            [{"id": "d1", "labels": [0, 1, 0]}, REFERENCE[1]],
            r"pred\.jsonl:1: id 'd1' has 3 labels but .*ref\.jsonl:1 has 6",
        ),
        ([*REFERENCE, REFERENCE[1]], r"pred\.jsonl:3: id 'd2' repeats line 2"),
        ([REFERENCE[0], {"id": "d2", "labels": [2]}], r"pred\.jsonl:2: id 'd2': labels must be"),
        ([REFERENCE[0], {"id": "d2", "labels": []}], r"pred\.jsonl:2: id 'd2': labels must be"),
        ([REFERENCE[0], {"id": "d2"}], r"pred\.jsonl:2: missing key 'labels'"),
    ],
)
def test_label_files_errors_name_file_line_and_id(
    tmp_path: Path, predictions: list[dict[str, object]], message: str
) -> None:
    ref = _write(tmp_path / "ref.jsonl", REFERENCE)
    pred = _write(tmp_path / "pred.jsonl", predictions)
    with pytest.raises(InputError, match=message):
        read_label_pairs(ref, pred)


def test_cli_error_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ref = _write(tmp_path / "ref.jsonl", REFERENCE)
    pred = _write(tmp_path / "pred.jsonl", [REFERENCE[0]])
    assert main(["--ref", str(ref), "--pred", str(pred)]) == 2
    assert "no line for id 'd2'" in capsys.readouterr().err
