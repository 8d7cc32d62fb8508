"""LoCoMo (Maharana et al., ACL 2024): ``locomo/locomo10.json`` -> :class:`Conversation` objects.

Where the file is irregular the loader takes a reading and says so in the notes it returns:
sessions are the ``session_<n>`` lists, image turns keep their caption, an adversarial item's gold
answer is its ``adversarial_answer``, ids and categories are strict, and evidence ids that name no
turn are dropped and reported, never fatal (docs/data.md)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.data.errors import DatasetError, checked_id, text_field
from memsys.types import LOCOMO_CATEGORIES, Conversation, Question, Session, Turn

LOCOMO_FILE = "locomo/locomo10.json"
SESSION_DATE_FORMAT = "%I:%M %p on %d %B, %Y"
_SESSION_KEY = re.compile(r"session_(\d+)")
_EVIDENCE_TOKEN = re.compile(r"D:?(\d{1,9}):(\d{1,9})")  # int() refuses thousands of digits


def read_locomo(path: Path) -> tuple[list[Conversation], list[str]]:
    """Parse the LoCoMo file; return the conversations and notes on every irregular record."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DatasetError(path, None, f"not valid JSON ({error})") from error
    if not isinstance(raw, list):
        raise DatasetError(path, None, "expected a JSON list of conversations")
    notes: list[str] = []
    conversations = [_read_conversation(path, index, item, notes) for index, item in enumerate(raw)]
    first_record: dict[str, int] = {}
    for index, conversation in enumerate(conversations):
        first = first_record.setdefault(conversation.conversation_id, index)
        if first != index:
            raise DatasetError(
                path,
                f"#{index}",
                f"sample_id {conversation.conversation_id!r} repeats record #{first}: ids must "
                "be unique (a results line names its conversation by it); rename one of the two",
            )
    return conversations, notes


def _read_conversation(path: Path, index: int, item: Any, notes: list[str]) -> Conversation:
    record = f"#{index}"
    try:
        sample_id = checked_id(
            path, record, "sample_id", text_field(path, record, item, "sample_id")
        )
        record = sample_id
        body = item["conversation"]
        speakers = (
            text_field(path, record, body, "speaker_a"),
            text_field(path, record, body, "speaker_b"),
        )
        sessions = _read_sessions(path, sample_id, body)
        known_turns = {turn.turn_id for session in sessions for turn in session.turns}
        questions = tuple(
            _read_question(path, sample_id, number, qa, known_turns, notes)
            for number, qa in enumerate(item["qa"])
        )
    except (KeyError, TypeError, AttributeError) as error:
        raise DatasetError(path, record, f"missing or malformed field {error}") from error
    return Conversation(sample_id, sessions, questions, speakers)


def _read_sessions(path: Path, sample_id: str, body: dict[str, Any]) -> tuple[Session, ...]:
    numbers = sorted(int(m.group(1)) for key in body if (m := _SESSION_KEY.fullmatch(key)))
    return tuple(_read_session(path, sample_id, number, body) for number in numbers)


def _read_session(path: Path, sample_id: str, number: int, body: dict[str, Any]) -> Session:
    session_id = f"session_{number}"
    record = f"{sample_id}/{session_id}"
    date_text = body.get(f"{session_id}_date_time")
    if not isinstance(date_text, str):
        raise DatasetError(path, record, f"missing {session_id}_date_time")
    try:
        timestamp = datetime.strptime(date_text, SESSION_DATE_FORMAT)
    except ValueError as error:
        raise DatasetError(path, record, f"bad session date {date_text!r}") from error
    turns = []
    for index, raw_turn in enumerate(body[session_id]):
        turn_record = f"{record} turn {index}"
        try:
            caption = raw_turn.get("blip_caption")
            text = text_field(path, turn_record, raw_turn, "text")
            if caption:
                text = f"{text} [shares an image: {caption}]"
            turns.append(
                Turn(
                    turn_id=text_field(path, turn_record, raw_turn, "dia_id"),
                    session_id=session_id,
                    index=index,
                    speaker=text_field(path, turn_record, raw_turn, "speaker"),
                    text=text,
                    timestamp=timestamp,
                    image_caption=caption,
                )
            )
        except (KeyError, TypeError, AttributeError) as error:
            raise DatasetError(path, turn_record, f"malformed turn ({error})") from error
    return Session(session_id, timestamp, date_text, tuple(turns))


def _read_question(
    path: Path,
    sample_id: str,
    number: int,
    qa: dict[str, Any],
    known_turns: set[str],
    notes: list[str],
) -> Question:
    question_id = f"{sample_id}:q{number}"
    code = qa["category"]
    # By type too: True == 1 and 1.0 == 1, but neither is a category code.
    if type(code) is not int or code not in LOCOMO_CATEGORIES:
        expected = f"one of the integer codes {sorted(LOCOMO_CATEGORIES)}"
        raise DatasetError(path, question_id, f"category: expected {expected}, got {code!r}")
    category = LOCOMO_CATEGORIES[code]
    adversarial = qa.get("adversarial_answer")
    if category == "adversarial":
        if adversarial is None:
            raise DatasetError(path, question_id, "category 5 item without adversarial_answer")
        answer = text_field(path, question_id, qa, "adversarial_answer", numbers=True)
        original = (
            None
            if qa.get("answer") is None
            else text_field(path, question_id, qa, "answer", numbers=True)
        )
    else:
        answer, original = text_field(path, question_id, qa, "answer", numbers=True), None
    evidence = _parse_evidence(question_id, qa["evidence"], known_turns, notes)
    # an evidence turn id reads "D<session>:<turn>": "D3:7" is in session_3
    sessions = tuple(dict.fromkeys(f"session_{t[1:].split(':', 1)[0]}" for t in evidence))
    return Question(
        question_id=question_id,
        conversation_id=sample_id,
        question=text_field(path, question_id, qa, "question"),
        answer=answer,
        category=category,
        evidence=evidence,
        evidence_sessions=sessions,
        category_code=code,
        adversarial_answer=None if adversarial is None else str(adversarial),
        original_answer=original,
    )


def _parse_evidence(
    question_id: str, raw_ids: list[str], known_turns: set[str], notes: list[str]
) -> tuple[str, ...]:
    """Read evidence strings leniently; report what could not be resolved to a real turn."""
    resolved: list[str] = []
    for raw in raw_ids:
        kept, dropped = [], []
        for token in filter(None, re.split(r"[;,\s]+", str(raw))):
            match = _EVIDENCE_TOKEN.fullmatch(token)
            turn_id = f"D{int(match.group(1))}:{int(match.group(2))}" if match else None
            (kept if turn_id in known_turns else dropped).append(turn_id or token)
        if kept != [raw]:
            dropped_text = f", dropped {dropped}" if dropped else ""
            notes.append(f"{question_id}: evidence {raw!r} read as {kept}{dropped_text}")
        resolved.extend(kept)
    return tuple(dict.fromkeys(resolved))
