"""The audited LoCoMo key: every erratum lands on its question, and the key's rules hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.data import load_locomo
from benchmarks.data.errors import DatasetError
from benchmarks.data.locomo_audit import (
    AUDITORS_CEILING,
    audited_key,
    load_errata,
    published_key_ceiling,
    read_errata,
)


@pytest.fixture(scope="module")
def errata(data_dir: Path):
    return load_errata(str(data_dir))


def test_every_erratum_matches_its_question_and_published_answer(data_dir: Path, errata) -> None:
    questions = {q.question_id: q for c in load_locomo(str(data_dir)) for q in c.questions}
    assert len(errata) == 156  # the audit README's count
    turns = {t.turn_id for c in load_locomo(str(data_dir)) for s in c.sessions for t in s.turns}
    for question_id, erratum in errata.items():
        question = questions[question_id]
        assert erratum.published_answer == question.answer, question_id
        assert set(erratum.audited_evidence) <= turns, question_id


def test_the_key_replaces_only_what_the_audit_disputes(errata) -> None:
    citation = errata["conv-26:q1"]  # WRONG_CITATION: the answer stands, the evidence moves
    key = audited_key("conv-26:q1", "2022", ["D1:12"], errata)
    assert (key.answer, key.evidence, key.error_type) == ("2022", ("D1:14",), "WRONG_CITATION")
    assert citation.audited_answer == "2022"
    ambiguous = next(e for e in errata.values() if e.error_type == "AMBIGUOUS")
    key = audited_key(ambiguous.question_id, ambiguous.published_answer, [], errata)
    assert key.answer is None and key.evidence == ambiguous.audited_evidence
    untouched = audited_key("conv-26:q0", "7 May 2023", ["D1:3"], errata)
    assert (untouched.answer, untouched.evidence, untouched.error_type) == (
        "7 May 2023",
        ("D1:3",),
        None,
    )


def test_the_published_keys_ceiling_over_the_whole_dataset_is_the_auditors(
    data_dir: Path, errata
) -> None:
    """The auditors report 93.57% on categories 1-4: the 1,540 questions less the 99 whose
    published answer an erratum other than WRONG_CITATION disputes."""
    questions = [
        (q.question_id, q.category) for c in load_locomo(str(data_dir)) for q in c.questions
    ]
    ceiling = published_key_ceiling(questions, errata)
    assert ceiling == {  # adversarial questions, which the audit does not cover, left out
        "multi_hop": (254, 282),
        "temporal": (295, 321),
        "open_domain": (87, 96),
        "single_hop": (805, 841),
    }
    stands, total = (sum(counts) for counts in zip(*ceiling.values(), strict=True))
    assert (stands, total) == (1441, 1540)
    assert round(stands / total, 4) == AUDITORS_CEILING


def _entry(**overrides) -> dict:
    entry = {
        "question_id": "locomo_0_qa1",
        "question": "q?",
        "golden_answer": "a",
        "category": 2,
        "error_type": "HALLUCINATION",
        "cited_evidence": ["D1:1"],
        "correct_evidence": ["D1:2"],
        "reasoning": "",
        "correct_answer": "b",
    }
    return {**entry, **overrides}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"question_id": "conv-26_qa1"}, "question_id"),
        ({"question_id": "locomo_7_qa1"}, "question_id"),  # no 8th conversation
        ({"error_type": "TYPO"}, "error_type"),
        ({"correct_evidence": "D1:2"}, "correct_evidence"),
        ({"correct_answer": None}, "correct_answer"),
    ],
)
def test_a_malformed_erratum_names_file_and_record(tmp_path: Path, overrides, message) -> None:
    path = tmp_path / "errors_conv_0.json"
    path.write_text(json.dumps([_entry(**overrides)]))
    with pytest.raises(DatasetError, match=message) as raised:
        read_errata([path], ["conv-26"] * 7)
    assert str(path) in str(raised.value)


def test_an_audit_of_another_revision_is_refused(tmp_path: Path, data_dir: Path) -> None:
    copy = tmp_path / "data"
    (copy / "locomo" / "audit").mkdir(parents=True)
    (copy / "locomo" / "locomo10.json").symlink_to(data_dir / "locomo" / "locomo10.json")
    for index in range(10):
        entries = [] if index else [_entry(question="Not the dataset's question?")]
        (copy / "locomo" / "audit" / f"errors_conv_{index}.json").write_text(json.dumps(entries))
    with pytest.raises(DatasetError, match="another revision"):
        load_errata(str(copy))
