"""The public audit of LoCoMo's answer key (``locomo/audit/errors_conv_<c>.json``), read as a
second key beside the published one, never in its place.

How the audited key scores a question (:class:`AuditedKey`): docs/scoring.md, "LoCoMo's audited
key". Entries are matched by position and checked against the question text, so an audit of
another revision of the file is refused rather than misapplied."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from benchmarks.data import load_locomo
from benchmarks.data.errors import DataMissingError, DatasetError, text_field
from benchmarks.data.paths import data_file

AUDIT_DIR = "locomo/audit"
#: Where the audit's files come from (``locomo/audit/README.md`` in the data folder).
AUDIT_SOURCE = "dial481/locomo-audit at commit 9493fb4b4af4256ed17a18e8fd0b3cfdeec29539"
AUDIT_FILES = tuple(f"{AUDIT_DIR}/errors_conv_{index}.json" for index in range(10))
ERROR_TYPES = (
    "WRONG_CITATION",
    "HALLUCINATION",
    "TEMPORAL_ERROR",
    "ATTRIBUTION_ERROR",
    "AMBIGUOUS",
    "INCOMPLETE",
)
#: Errata whose ``correct_answer`` is not an answer (two readings argued), see the module doc.
NO_AUDITED_ANSWER = frozenset({"AMBIGUOUS"})
#: Errata that leave the published answer standing (only its cited evidence is wrong); every
#: other error type disputes the answer.
ANSWER_STANDS = frozenset({"WRONG_CITATION"})
#: The auditors' ceiling for a perfect system scored against the published key: the share of
#: questions of categories 1-4 whose published answer they do not dispute, as their README gives it.
AUDITORS_CEILING = 0.9357
_AUDIT_ID = re.compile(r"locomo_(\d+)_qa(\d+)")


@dataclass(frozen=True)
class Erratum:
    """One audited question, under the harness's question id (``conv-26:q1``)."""

    question_id: str
    error_type: str
    question: str
    published_answer: str
    audited_answer: str | None
    audited_evidence: tuple[str, ...]


@dataclass(frozen=True)
class AuditedKey:
    """The audited answer and evidence of one question (the published ones where no erratum)."""

    answer: str | None
    evidence: tuple[str, ...]
    error_type: str | None


def read_errata(paths: Iterable[Path], conversation_ids: list[str]) -> dict[str, Erratum]:
    """Every erratum in ``paths``, keyed by the harness question id; ``conversation_ids`` are the
    dataset's sample ids in file order (index ``c`` of ``locomo_<c>_qa<q>``)."""
    errata: dict[str, Erratum] = {}
    for path in paths:
        if not path.is_file():
            raise DataMissingError(path)
        try:
            entries = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise DatasetError(path, None, f"not valid JSON ({error})") from error
        if not isinstance(entries, list):
            raise DatasetError(path, None, "expected a list of errata")
        for position, entry in enumerate(entries):
            erratum = _read_erratum(path, position, entry, conversation_ids)
            if erratum.question_id in errata:
                raise DatasetError(path, entry["question_id"], "question listed twice")
            errata[erratum.question_id] = erratum
    return errata


def _read_erratum(path: Path, position: int, entry: object, conversation_ids: list[str]) -> Erratum:
    if not isinstance(entry, dict):
        raise DatasetError(path, position, "expected an object")
    audit_id = text_field(path, str(position), entry, "question_id")
    match = _AUDIT_ID.fullmatch(audit_id)
    if match is None or int(match.group(1)) >= len(conversation_ids):
        raise DatasetError(path, audit_id, "question_id: expected locomo_<conversation>_qa<n>")
    error_type = text_field(path, audit_id, entry, "error_type")
    if error_type not in ERROR_TYPES:
        raise DatasetError(path, audit_id, f"error_type {error_type!r} not one of {ERROR_TYPES}")
    evidence = entry.get("correct_evidence")
    if not isinstance(evidence, list) or not all(isinstance(turn, str) for turn in evidence):
        raise DatasetError(path, audit_id, "correct_evidence: expected a list of turn ids")
    conversation = conversation_ids[int(match.group(1))]
    return Erratum(
        question_id=f"{conversation}:q{match.group(2)}",
        error_type=error_type,
        question=text_field(path, audit_id, entry, "question"),
        published_answer=text_field(path, audit_id, entry, "golden_answer", numbers=True),
        audited_answer=(
            None
            if error_type in NO_AUDITED_ANSWER
            else text_field(path, audit_id, entry, "correct_answer", numbers=True)
        ),
        audited_evidence=tuple(dict.fromkeys(evidence)),
    )


def load_errata(data_dir: str | None = None) -> dict[str, Erratum]:
    """The audit's errata, checked against LoCoMo's questions: a mismatched or missing question is a
    :class:`DatasetError`."""
    everything = load_locomo(data_dir)
    order = [conversation.conversation_id for conversation in everything]
    questions = {q.question_id: q for c in everything for q in c.questions}
    paths = [data_file(name, data_dir) for name in AUDIT_FILES]
    errata = read_errata(paths, order)
    for erratum in errata.values():
        question = questions.get(erratum.question_id)
        if question is None or question.question.strip() != erratum.question.strip():
            raise DatasetError(
                paths[order.index(erratum.question_id.split(":")[0])],
                erratum.question_id,
                "the audit's question differs from the dataset's: an audit of another revision",
            )
    return errata


def audited_key(
    question_id: str, answer: str, evidence: Iterable[str], errata: Mapping[str, Erratum]
) -> AuditedKey:
    """The audited reading of one question given its published ``answer`` and ``evidence``."""
    erratum = errata.get(question_id)
    if erratum is None:
        return AuditedKey(answer, tuple(evidence), None)
    return AuditedKey(erratum.audited_answer, erratum.audited_evidence, erratum.error_type)


def published_key_ceiling(
    questions: Iterable[tuple[str, str]], errata: Mapping[str, Erratum]
) -> dict[str, tuple[int, int]]:
    """Per category of ``questions`` (``(question_id, category)`` pairs; the adversarial category,
    which the audit does not cover, left out): how many questions' published answer the audit
    does not dispute (no erratum, or one of :data:`ANSWER_STANDS`), and how many questions.
    A system that answers every question as the auditors read it scores at most that share
    against the published key (the auditors' ceiling, :data:`AUDITORS_CEILING` over the whole
    dataset).

    >>> errata = {"c:q1": Erratum("c:q1", "HALLUCINATION", "q?", "a", "b", ())}
    >>> published_key_ceiling([("c:q0", "temporal"), ("c:q1", "temporal")], errata)
    {'temporal': (1, 2)}
    """
    counts: dict[str, list[int]] = {}
    for question_id, category in dict(questions).items():
        if category == "adversarial":
            continue
        erratum = errata.get(question_id)
        stands = erratum is None or erratum.error_type in ANSWER_STANDS
        tally = counts.setdefault(category, [0, 0])
        tally[0] += stands
        tally[1] += 1
    return {category: (stands, total) for category, (stands, total) in counts.items()}
