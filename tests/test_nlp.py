from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
import zlib
from datetime import datetime
from pathlib import Path

import pytest

from memsys.kvstore import SQLiteKV
from memsys.nlp import NLP, ParseCache, ParseProcess, annotations, load_pipeline, resolve_time

TURNS = [
    "Caroline went to the LGBTQ support group yesterday and it was powerful.",
    "I moved from Sweden four years ago; my kids love the beach near Boston.",
    "Yeah, we gave up on the bitter war over the garden. Bye Melanie!",
]


def test_pipeline_finds_people_places_and_dates() -> None:
    nlp = NLP()
    labels = {(e.text, e.label) for e in nlp.entities("Ben met Melanie in Boston last Friday.")}
    assert ("Boston", "GPE") in labels and ("last Friday", "DATE") in labels
    assert nlp.identity.endswith("-3.8.0")
    assert nlp.parse(["Hi there."])[0] is nlp.parse(["Hi there."])[0]  # parsed once


def test_memo_keeps_only_the_most_recently_used_texts() -> None:
    nlp = NLP(memo_size=2)
    first = nlp.parse(["One.", "Two."])
    assert nlp.parse(["One."])[0] is first[0]  # "One." is now the most recent
    nlp.parse(["Three.", "Three."])  # evicts "Two." (least recent), keeps "One."
    assert nlp.parse(["One."])[0] is first[0]
    assert nlp.parse(["Two."])[0] is not first[1]  # parsed again
    assert len(nlp._docs) == 2


def test_parse_cache_serves_a_fresh_process_the_same_parses(tmp_path: Path, nlp: NLP) -> None:
    path = tmp_path / "parses.sqlite"
    writer = NLP(cache=ParseCache(path), pipeline=nlp.pipeline)
    expected = [annotations(doc) for doc in writer.parse([*TURNS, TURNS[0]])]
    counts = writer.counts()
    assert (counts["requested"], counts["parsed"]) == (4, 3) and counts["parse_seconds"] > 0
    assert all(doc.tensor.size == 0 for doc in writer.parse(TURNS))  # kept without the tensor
    reader = NLP(cache=ParseCache(path))  # its own pipeline: a vocabulary without the strings
    assert [annotations(doc) for doc in reader.parse([*TURNS, TURNS[0]])] == expected
    assert (reader.counts()["requested"], reader.counts()["parsed"]) == (4, 0)


def test_a_parse_process_gives_the_parses_made_here(nlp: NLP) -> None:
    process = ParseProcess(min_texts=1)
    try:
        apart = NLP(pipeline=nlp.pipeline, process=process)
        docs = apart.parse(TURNS)
    finally:
        process.close()
    assert [annotations(doc) for doc in docs] == [annotations(doc) for doc in nlp.parse(TURNS)]
    assert all(doc.tensor.size == 0 for doc in docs)


def test_a_dead_parse_process_leaves_the_parsing_here(
    nlp: NLP, caplog: pytest.LogCaptureFixture
) -> None:
    """A parse process killed (out of memory, say) does not hang or fail the run: the parses
    are made here instead, the same ones."""
    process = ParseProcess(min_texts=1)
    try:
        apart = NLP(pipeline=nlp.pipeline, process=process)
        apart.parse(TURNS[:1])
        for child in multiprocessing.active_children():
            os.kill(child.pid, signal.SIGKILL)
        docs = apart.parse(TURNS[1:])
    finally:
        process.close()
    assert "the parse process died" in caplog.text
    assert [annotations(doc) for doc in docs] == [annotations(doc) for doc in nlp.parse(TURNS[1:])]


def test_a_parse_process_starts_only_for_a_parse_worth_its_start(nlp: NLP) -> None:
    """Starting a process costs seconds: a parse of fewer than ``min_texts`` texts is made here
    while none has started; once one has, every parse goes there."""
    process = ParseProcess(min_texts=2)
    try:
        apart = NLP(pipeline=nlp.pipeline, process=process)
        apart.parse(TURNS[:1])
        assert process.cpu_seconds == 0.0
        apart.parse(TURNS[1:])
        started = process.cpu_seconds
        assert started > 0.0
        apart.parse(["One more text, parsed there."])
        assert process.cpu_seconds > started
    finally:
        process.close()


def test_a_parse_process_started_ahead_takes_every_parse(nlp: NLP) -> None:
    process = ParseProcess()
    try:
        assert not process.takes(1)
        assert process.start() == nlp.identity
        assert process.takes(1)
    finally:
        process.close()


PARENT = """
import multiprocessing, sys, time
from memsys.nlp import ParseProcess
process = ParseProcess()
process.start()
print(*(child.pid for child in multiprocessing.active_children()), flush=True)
time.sleep(600)
"""


def test_a_parse_process_ends_when_its_run_is_killed(tmp_path: Path) -> None:
    """kill -9 of a run leaves no parse process behind holding half a gigabyte."""
    run = subprocess.Popen(
        [sys.executable, "-c", PARENT],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    assert run.stdout is not None
    (child,) = map(int, run.stdout.readline().split())
    assert alive(child)
    run.kill()
    run.wait()
    deadline = time.monotonic() + 15
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(child)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def overwrite(store: SQLiteKV, key: str, value: bytes) -> None:
    """Replace a row with an intact one (its checksum matches) holding ``value``."""
    with store._lock:
        store._connect().execute(f"DELETE FROM {store.table} WHERE key = ?", (key,))
    store.put(key, value)


def test_a_damaged_or_mismatched_parse_is_dropped_and_parsed_again(
    tmp_path: Path, nlp: NLP
) -> None:
    path = tmp_path / "parses.sqlite"
    writer = NLP(cache=ParseCache(path), pipeline=nlp.pipeline)
    writer.parse(TURNS)
    store = SQLiteKV(path, table="parses")
    first, second, third = (ParseCache.key(writer.identity, text) for text in TURNS)
    overwrite(store, first, b"not zlib")
    overwrite(store, second, zlib.compress(b"\x00 not a serialized doc"))
    overwrite(store, third, zlib.compress(writer.parse([TURNS[1]])[0].to_bytes()))  # turn 2's parse

    reader = NLP(cache=ParseCache(path), pipeline=nlp.pipeline)
    assert [annotations(doc) for doc in reader.parse(TURNS)] == [
        annotations(doc) for doc in writer.parse(TURNS)
    ]
    assert reader.counts()["parsed"] == 3 and reader.cache.integrity()["corrupt_rows"] == 3
    again = NLP(
        cache=ParseCache(path), pipeline=nlp.pipeline
    )  # the reader stored good parses in their place
    again.parse(TURNS)
    assert again.counts()["parsed"] == 0


def test_missing_pipeline_says_how_to_install() -> None:
    with pytest.raises(OSError, match="spacy download en_core_web_sm"):
        load_pipeline(("no_such_pipeline",))


@pytest.mark.parametrize(
    ("expression", "day", "granularity"),
    [
        ("yesterday", "2023-05-07", "day"),
        ("last week", "2023-05-01", "week"),
        ("two weeks ago", "2023-04-24", "week"),
        ("last year", "2022-05-08", "year"),
        ("7 May 2023", "2023-05-07", "day"),
        ("May 2023", None, "month"),
    ],
)
def test_relative_dates_resolve_against_the_session(
    expression: str, day: str | None, granularity: str
) -> None:
    resolved = resolve_time(expression, datetime(2023, 5, 8, 13, 56))
    assert resolved is not None and resolved.granularity == granularity
    if day:
        assert resolved.timestamp.date().isoformat() == day


def test_unreadable_expression_is_none() -> None:
    assert resolve_time("the sunday before", datetime(2023, 5, 8)) is None
