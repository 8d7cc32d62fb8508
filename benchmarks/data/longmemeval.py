"""LongMemEval (Wu et al., ICLR 2025), oracle and S variants, read lazily from per-question archives.

S unpacks to about 265 MB, so :func:`iter_longmemeval` streams the ``tar.xz`` one instance at a
time, in archive order. A haystack that repeats a session id keeps each copy: the n-th is
``<session_id>#<n>`` (:func:`dataset_session_id` gives the dataset's id back). Types are strict,
so a ``null`` is an error naming its record. The reconstructed and missing items: docs/data.md."""

from __future__ import annotations

import json
import lzma
import tarfile
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from benchmarks.data.errors import DatasetError, checked_id, text_field
from benchmarks.data.paths import data_file
from memsys.types import LONGMEMEVAL_CATEGORIES, Conversation, Question, Session, Turn

Variant = Literal["oracle", "s"]
ARCHIVES: dict[str, str] = {
    "oracle": "longmemeval/longmemeval_oracle_lme_jsons.tar.xz",
    "s": "longmemeval/longmemeval_s_cleaned_lme_jsons.tar.xz",
}
RECONSTRUCTED_S = "longmemeval/62_7e00a6cb.reconstructed.json.xz"
MISSING_UPSTREAM = {"s": ("gpt4_7a0daae1",), "oracle": ()}
DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"
#: Separates a repeated session's dataset id from its copy number (no dataset id contains it).
COPY_MARK = "#"


def iter_longmemeval(
    variant: Variant,
    data_dir: str | Path | None = None,
    question_ids: Iterable[str] | None = None,
) -> Iterator[Conversation]:
    """Yield the instances of one variant, one at a time, optionally only the given ids."""
    if variant not in ARCHIVES:
        raise ValueError(
            f"unknown LongMemEval variant {variant!r}; expected one of {list(ARCHIVES)}"
        )
    wanted = None if question_ids is None else set(question_ids)
    archive = data_file(ARCHIVES[variant], data_dir)
    extra = None
    if variant == "s":
        extra = "lme_jsons/62_7e00a6cb.json", data_file(RECONSTRUCTED_S, data_dir)
    members: dict[str, str] = {}  # question id (from a file name, then a record) -> member
    for name, content, source in _members(archive, extra):
        question_id = Path(name).stem.split("_", 1)[1]
        _check_unique(members, question_id, name, source)
        if wanted is not None and question_id not in wanted:
            continue
        try:
            item = json.loads(content)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise DatasetError(source, name, f"not valid JSON ({error})") from error
        conversation = parse_instance(
            item, source=f"{source}:{name}", reconstructed=source != archive
        )
        if conversation.conversation_id != question_id:
            _check_unique(members, conversation.conversation_id, name, source)
        yield conversation


def _check_unique(members: dict[str, str], question_id: str, name: str, source: Path) -> None:
    """Remember that archive member ``name`` holds ``question_id``; a second member holding it
    is an error naming both."""
    first = members.setdefault(question_id, name)
    if first != name:
        raise DatasetError(
            source,
            name,
            f"question_id {question_id!r} repeats member {first}: ids must be unique (a results "
            "line names its question by it); remove one of the two",
        )


def longmemeval_notes(variant: Variant) -> list[str]:
    """What differs from the official release, for stats and run reports."""
    notes = [f"{qid}: missing upstream; not in this release" for qid in MISSING_UPSTREAM[variant]]
    if variant == "s":
        notes.append("7e00a6cb: reconstructed item (see the data README)")
    return notes


def _members(archive: Path, extra: tuple[str, Path] | None) -> Iterator[tuple[str, bytes, Path]]:
    """Stream the archive's JSON members in order, merging ``extra`` at its name's place."""
    try:
        with tarfile.open(archive, "r|xz") as tar:
            for member in tar:
                if not member.isfile() or not member.name.endswith(".json"):
                    continue
                if extra is not None and extra[0] < member.name:
                    yield extra[0], _read_xz(extra[1]), extra[1]
                    extra = None
                handle = tar.extractfile(member)
                if handle is None:
                    raise DatasetError(archive, member.name, "unreadable archive member")
                yield member.name, handle.read(), archive
    except (tarfile.TarError, lzma.LZMAError, EOFError) as error:
        raise DatasetError(archive, None, f"corrupt or truncated archive ({error})") from error
    if extra is not None:
        yield extra[0], _read_xz(extra[1]), extra[1]


def _read_xz(path: Path) -> bytes:
    try:
        return lzma.decompress(path.read_bytes())
    except lzma.LZMAError as error:
        raise DatasetError(path, None, f"corrupt xz file ({error})") from error


def parse_instance(item: Any, *, source: str | Path, reconstructed: bool = False) -> Conversation:
    """Turn one LongMemEval instance into a one-question :class:`Conversation`."""
    raw_id = item.get("question_id") if isinstance(item, dict) else None
    record = "?" if raw_id is None else str(raw_id)
    try:
        question_id = checked_id(source, record, "question_id", item["question_id"])
        question_type = str(item["question_type"])
        if question_type not in LONGMEMEVAL_CATEGORIES:
            raise DatasetError(source, record, f"unknown question_type {question_type!r}")
        ids, dates, bodies = (
            item["haystack_session_ids"],
            item["haystack_dates"],
            item["haystack_sessions"],
        )
        if not len(ids) == len(dates) == len(bodies):
            raise DatasetError(source, record, "haystack ids, dates and sessions differ in length")
        sessions = sorted(
            (
                _parse_session(source, record, sid, date, body)
                for sid, date, body in zip(
                    _copy_ids(source, record, ids), dates, bodies, strict=True
                )
            ),
            key=lambda session: session.timestamp,
        )
        evidence = tuple(t.turn_id for s in sessions for t in s.turns if t.has_answer)
        question = Question(
            question_id=question_id,
            conversation_id=question_id,
            question=text_field(source, record, item, "question"),
            answer=text_field(source, record, item, "answer", numbers=True),
            category=LONGMEMEVAL_CATEGORIES[question_type],
            evidence=evidence,
            evidence_sessions=tuple(str(s) for s in item["answer_session_ids"]),
            question_date=_parse_date(source, record, item["question_date"]),
            is_abstention="_abs" in question_id,
        )
    except (KeyError, TypeError, AttributeError) as error:
        raise DatasetError(source, record, f"missing or malformed field {error}") from error
    metadata = {"reconstructed": "true"} if reconstructed else {}
    return Conversation(question_id, tuple(sessions), (question,), ("user", "assistant"), metadata)


def _copy_ids(source: str | Path, record: str, ids: Iterable[Any]) -> list[str]:
    """Haystack session ids, each repeat numbered (``sid``, ``sid#2``, ...)."""
    seen: dict[str, int] = {}
    numbered = []
    for raw in ids:
        session_id = str(raw)
        if COPY_MARK in session_id:
            raise DatasetError(source, record, f"session id {session_id!r} contains {COPY_MARK!r}")
        seen[session_id] = seen.get(session_id, 0) + 1
        copy = seen[session_id]
        numbered.append(session_id if copy == 1 else f"{session_id}{COPY_MARK}{copy}")
    return numbered


def dataset_session_id(session_id: str) -> str:
    """The dataset's id of a haystack session (a repeated session's copy number dropped).

    >>> dataset_session_id("sharegpt_x_0#2"), dataset_session_id("answer_1")
    ('sharegpt_x_0', 'answer_1')
    """
    return session_id.split(COPY_MARK, 1)[0]


def _parse_session(
    source: str | Path, record: str, session_id: Any, date: Any, body: Any
) -> Session:
    session_id = str(session_id)
    timestamp = _parse_date(source, record, date)
    turns = tuple(
        Turn(
            turn_id=f"{session_id}:{index}",
            session_id=session_id,
            index=index,
            speaker=text_field(source, f"{record} session {session_id} turn {index}", turn, "role"),
            text=text_field(source, f"{record} session {session_id} turn {index}", turn, "content"),
            timestamp=timestamp,
            has_answer=turn.get("has_answer"),
        )
        for index, turn in enumerate(body)
    )
    return Session(session_id, timestamp, str(date), turns)


def _parse_date(source: str | Path, record: str, text: Any) -> datetime:
    try:
        return datetime.strptime(str(text), DATE_FORMAT)
    except ValueError as error:
        raise DatasetError(source, record, f"bad date {text!r}") from error
