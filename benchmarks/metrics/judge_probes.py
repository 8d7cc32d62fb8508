"""The judge's probe set: answers whose right verdict is known, graded under every protocol.

A judge read as accuracy must accept right answers and reject wrong ones; the probes measure both
on the run's own questions, so every table can say how far its Judge columns can be trusted. The
probes and the questions that get none: docs/scoring.md, "Judge probes"."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.metrics.judge import Verdict, lost_to_a_failed_call
from benchmarks.metrics.judging import Judge
from benchmarks.metrics.qa import SENTENCE_END, STEMMER, normalize_locomo_answer
from memsys.types import Conversation, Question

#: A run's graded probes, in its directory.
PROBES_FILE = "judge_probes.json"
#: What each probe's verdict should be: the gold answer accepted, the others rejected.
EXPECTED = {"gold": True, "other_question": False, "distractor": False}
MIN_WORDS, MAX_WORDS = 4, 40
#: Words that carry no topic ("may" stays: it is a month).
FUNCTION_WORDS = frozenset(
    """i me my we our you your he him his she her it its they them their is are was were be been
    being am do does did have has had of in on at to for from with by about as into over after
    before than then so but or not no yes what when where who whom which why how that this
    these those there here will would can could should just also very really""".split()  # noqa: SIM905
)


@dataclass(frozen=True)
class Probe:
    """One answer to grade whose right verdict is :data:`EXPECTED` for its ``kind``."""

    question: Question
    kind: str
    prediction: str

    @property
    def probe_id(self) -> str:
        return f"{self.question.question_id}:{self.kind}"


def content_words(text: str) -> frozenset[str]:
    """Stemmed content words of ``text`` (see the module docstring).

    >>> sorted(content_words("She went to the LGBTQ support group on 7 May 2023."))
    ['2023', '7', 'group', 'lgbtq', 'may', 'support', 'went']
    """
    words = normalize_locomo_answer(text).split()
    return frozenset(
        STEMMER.stem(word)
        for word in words
        if word not in FUNCTION_WORDS and (len(word) > 1 or word.isdigit())
    )


def probe_eligible(question: Question) -> bool:
    """Whether the question's gold answer is an answer a probe can be built around."""
    return (
        question.category != "adversarial"
        and not question.is_abstention
        and bool(content_words(question.answer))
    )


@dataclass(frozen=True)
class Sentence:
    """A candidate distractor: a sentence of a turn, its session and its content words."""

    session_id: str
    text: str
    words: frozenset[str]


def candidate_sentences(conversation: Conversation) -> list[Sentence]:
    """Every sentence of :data:`MIN_WORDS` to :data:`MAX_WORDS` words, its words read once."""
    return [
        Sentence(turn.session_id, sentence, content_words(sentence))
        for turn in conversation.turns
        for sentence in SENTENCE_END.split(turn.text.strip())
        if MIN_WORDS <= len(sentence.split()) <= MAX_WORDS
    ]


def distractor(
    question: Question, sentences: Sequence[Sentence], names: frozenset[str]
) -> str | None:
    """The topical, wrong sentence for ``question``, or None (also where its evidence sessions are
    unknown)."""
    if not question.evidence_sessions:
        return None
    evidence_sessions = set(question.evidence_sessions)
    asked = content_words(question.question) - names
    gold = content_words(question.answer)
    best, best_overlap = None, 0
    for sentence in sentences:
        if sentence.session_id in evidence_sessions or sentence.words & gold:
            continue
        overlap = len(sentence.words & asked)
        if overlap > best_overlap:
            best, best_overlap = sentence.text, overlap
    return best


class ProbeSet:
    """The probe set, built a conversation at a time as a run streams them, so the dataset is read
    once."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._questions: list[tuple[Question, str | None]] = []

    def add(self, conversation: Conversation) -> None:
        """Take in one conversation's eligible questions and their distractors."""
        eligible = [q for q in conversation.questions if probe_eligible(q)]
        if not eligible:
            return
        sentences = candidate_sentences(conversation)
        names = frozenset(word for name in conversation.speakers for word in content_words(name))
        self._questions += [(q, distractor(q, sentences, names)) for q in eligible]

    def collect(self, conversations: Iterable[Conversation]) -> Iterator[Conversation]:
        """``conversations``, each taken in on its way past."""
        for conversation in conversations:
            self.add(conversation)
            yield conversation

    def probes(self) -> list[Probe]:
        """Every probe of the questions taken in, in their order; a kind with no candidate (no
        unrelated answer in the category, no topical sentence) is left out."""
        pool = [question for question, _ in self._questions]
        answers = {q.question_id: content_words(q.answer) for q in pool}
        probes = []
        for question, topical in self._questions:
            probes.append(Probe(question, "gold", question.answer))
            other = other_answer(question, pool, answers, self.seed)
            if other is not None:
                probes.append(Probe(question, "other_question", other))
            if topical is not None:
                probes.append(Probe(question, "distractor", topical))
        return probes


def other_answer(
    question: Question,
    pool: Sequence[Question],
    answers: Mapping[str, frozenset[str]],
    seed: int,
) -> str | None:
    """A seeded pick among the same category's gold answers with no content word in common
    (``answers``: each question's gold content words, by question id)."""
    gold = answers[question.question_id]
    candidates = sorted(
        {
            other.answer
            for other in pool
            if other.category == question.category
            and other.question_id != question.question_id
            and not answers[other.question_id] & gold
        }
    )
    if not candidates:
        return None
    return random.Random(f"{seed}:{question.question_id}").choice(candidates)


def grade_probes(judge: Judge, probes: Sequence[Probe]) -> list[dict[str, Any]]:
    """Each probe with its verdict under every protocol (None: none), the protocols whose failure is
    final, and those whose request failed for good (``call_failures``)."""
    graded = judge.grade_many(
        [(probe.question, probe.prediction) for probe in probes], stage="judge_probes"
    )
    return [
        {
            "probe_id": probe.probe_id,
            "kind": probe.kind,
            "category": probe.question.category,
            "prediction": probe.prediction,
            "verdicts": {protocol: verdict.correct for protocol, verdict in verdicts.items()},
            "final_failures": [protocol for protocol, v in verdicts.items() if v.final],
            **call_failures(verdicts),
        }
        for probe, verdicts in zip(probes, graded, strict=True)
    ]


def call_failures(verdicts: Mapping[str, Verdict]) -> dict[str, list[str]]:
    """``{"call_failures": [protocols]}`` for the protocols whose judge request failed for good,
    or nothing (so probe files without failures keep their form)."""
    failed = [
        protocol
        for protocol, verdict in verdicts.items()
        if verdict.correct is None and lost_to_a_failed_call({"error": verdict.error})
    ]
    return {"call_failures": failed} if failed else {}


def probes_lost_to_failed_calls(graded: Iterable[Mapping[str, Any]]) -> int:
    """Probes that have no verdict under some protocol because its request failed for good."""
    return sum(1 for entry in graded if entry.get("call_failures"))


def probe_counts(graded: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, int]]]:
    """``{protocol: {kind: {"accepted", "graded", "failed"}}}`` over graded probes (deduplicated
    by probe id, so the same probes from several runs count once)."""
    unique = {entry["probe_id"]: entry for entry in graded}
    counts: dict[str, dict[str, dict[str, int]]] = {}
    for entry in unique.values():
        for protocol, correct in entry["verdicts"].items():
            cell = counts.setdefault(protocol, {}).setdefault(
                entry["kind"], {"accepted": 0, "graded": 0, "failed": 0}
            )
            if correct is None:
                cell["failed"] += 1
            else:
                cell["graded"] += 1
                cell["accepted"] += int(correct)
    return counts


def probes_settled(graded: Sequence[Mapping[str, Any]] | None) -> bool:
    """Whether a run's probes are all graded: a verdict under every protocol, or a final failure
    (else the next run of the config grades them again, from the cache where it can)."""
    return graded is not None and all(
        correct is not None or protocol in entry.get("final_failures", ())
        for entry in graded
        for protocol, correct in entry["verdicts"].items()
    )


def read_probes(run_dir: Path) -> list[dict[str, Any]] | None:
    """The run's graded probes; None when the file is missing or damaged (graded again)."""
    try:
        graded = json.loads((run_dir / PROBES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    well_formed = isinstance(graded, list) and all(
        isinstance(entry, dict)
        and isinstance(entry.get("probe_id"), str)
        and entry.get("kind") in EXPECTED
        and isinstance(entry.get("verdicts"), dict)
        and all(value is None or isinstance(value, bool) for value in entry["verdicts"].values())
        for entry in graded
    )
    return graded if well_formed else None
