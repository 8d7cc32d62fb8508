"""Hostile dataset copies (issue 48): an id reaches no path, ids are unique, types are strict.

Each test is one case of the issue: a dataset id with ``../`` or a NUL byte, a repeated LoCoMo
``sample_id`` or LongMemEval ``question_id``, a boolean category, a ``null`` answer or content.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from run_helpers import FIXTURE, longmemeval_item, write_longmemeval_oracle

from benchmarks.data import DatasetError, iter_longmemeval, read_locomo
from benchmarks.pipeline.memory_store import MemoryStore
from memsys.base import Services
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.methods.baselines import FullHistory

TINY = json.loads((FIXTURE / "locomo" / "tiny_conversation.json").read_text())


def locomo_file(tmp_path: Path, items: list[dict[str, Any]]) -> Path:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(items))
    return path


# -- ids never reach a path ------------------------------------------------------------------


@pytest.fixture
def services() -> Services:
    embedder = Embedder(EmbedderConfig(), EmbeddingCache())
    return Services(embedder=embedder, tokens=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "sample_id", ["../../../../../elsewhere/PWNED", "/abs/PWNED", "a/b", "..", "c:\\x\\y"]
)
def test_a_conversation_id_never_reaches_a_path(
    tmp_path: Path, services: Services, sample_id: str
) -> None:
    item = copy.deepcopy(TINY[0])
    item["sample_id"] = sample_id
    (conversation,), _ = read_locomo(locomo_file(tmp_path, [item]))
    cache = tmp_path / "cache" / "memories"
    store, system = MemoryStore(cache), FullHistory(services)
    got = store.load_or_build(system, conversation)
    memory, loaded = got.memory, got.loaded
    assert not loaded
    (written,) = [path for path in tmp_path.rglob("*") if path.is_file() and path.suffix == ".json"
                  and path.name != "locomo.json"]  # fmt: skip
    assert written.parent == cache / "fullhistory"  # under the cache, in the method's folder
    assert "PWNED" not in written.name and sample_id not in written.name
    assert json.loads(written.read_text())["conversation_id"] == sample_id  # the id kept inside
    got = store.load_or_build(system, conversation)
    again, loaded = got.memory, got.loaded
    assert loaded and again.items == memory.items


def test_a_memory_file_of_another_conversation_is_not_trusted(
    tmp_path: Path, services: Services
) -> None:
    (conversation,), _ = read_locomo(locomo_file(tmp_path, TINY))
    store, system = MemoryStore(tmp_path / "memories"), FullHistory(services)
    store.load_or_build(system, conversation)
    path = store.path(system, conversation)
    envelope = json.loads(path.read_text())
    envelope["conversation_id"] = "someone-else"
    path.write_text(json.dumps(envelope))
    assert store.load_or_build(system, conversation).loaded is False
    assert store.rebuilt_corrupt == 1


def test_a_memory_cached_under_the_older_file_name_is_found_and_copied(
    tmp_path: Path, services: Services
) -> None:
    """Caches written before issue 48 named a memory ``<conversation id>-<key>.json``: for an id
    that is a plain file name it is still a hit (copied to the new name), not a rebuild."""
    (conversation,), _ = read_locomo(locomo_file(tmp_path, TINY))
    store, system = MemoryStore(tmp_path / "memories"), FullHistory(services)
    store.load_or_build(system, conversation)
    new = store.path(system, conversation)
    older = new.with_name(
        f"{conversation.conversation_id}-{store.key(system, conversation)[:16]}.json"
    )
    envelope = json.loads(new.read_text())
    del envelope["conversation_id"]  # older files did not hold it
    older.write_text(json.dumps(envelope))
    new.unlink()
    got = MemoryStore(tmp_path / "memories").load_or_build(system, conversation)
    memory, loaded = got.memory, got.loaded
    assert (loaded, new.exists()) == (True, True)
    assert len(memory.items) == len(conversation.turns)


# -- LoCoMo: unique, printable ids; a category is an integer -----------------------------------


def test_a_repeated_sample_id_names_both_records(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"record #1: sample_id 'tiny-1' repeats record #0"):
        read_locomo(locomo_file(tmp_path, [TINY[0], TINY[0]]))


def test_a_nul_byte_in_a_sample_id_is_refused(tmp_path: Path) -> None:
    item = copy.deepcopy(TINY[0])
    item["sample_id"] = "tiny\x001"
    with pytest.raises(DatasetError, match=r"record #0: field 'sample_id': .* holds the char") as e:
        read_locomo(locomo_file(tmp_path, [item]))
    assert "\x00" not in str(e.value)  # the message itself stays printable


@pytest.mark.parametrize("code", [True, 1.0, "1"])
def test_a_category_that_is_not_an_integer_code_is_refused(tmp_path: Path, code: Any) -> None:
    item = copy.deepcopy(TINY[0])
    item["qa"][0]["category"] = code
    with pytest.raises(DatasetError, match=r"record tiny-1:q0: category: expected one of the"):
        read_locomo(locomo_file(tmp_path, [item]))


# -- LongMemEval: unique ids, no null read as "None" -----------------------------------------


def lme_item(question_id: str = "q1", **changes: Any) -> dict[str, Any]:
    item = longmemeval_item(
        question_id,
        "Where did I move?",
        [{"role": "user", "content": "I moved to Lisbon.", "has_answer": True}],
    )
    item.update(changes)
    return item


def test_a_repeated_question_id_names_both_members(tmp_path: Path) -> None:
    write_longmemeval_oracle(tmp_path, {"2_q1.json": lme_item(), "3_q1.json": lme_item()})
    with pytest.raises(DatasetError, match=r"3_q1\.json: question_id 'q1' repeats member .*2_q1"):
        list(iter_longmemeval("oracle", tmp_path))


def test_a_question_id_repeated_inside_the_records_is_refused(tmp_path: Path) -> None:
    write_longmemeval_oracle(tmp_path, {"2_q1.json": lme_item(), "3_q2.json": lme_item("q1")})
    with pytest.raises(DatasetError, match=r"question_id 'q1' repeats member"):
        list(iter_longmemeval("oracle", tmp_path))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"answer": None}, r"record q1: field 'answer': expected a string or a number, got None"),
        ({"answer": True}, r"field 'answer': expected a string or a number"),
        ({"question": None}, r"field 'question': expected a string"),
        ({"question_id": "q\x001"}, r"field 'question_id': 'q\\x001' holds the character"),
    ],
)
def test_a_null_or_mistyped_field_names_its_record(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    write_longmemeval_oracle(tmp_path, {"2_q1.json": lme_item(**change)})
    with pytest.raises(DatasetError, match=message):
        list(iter_longmemeval("oracle", tmp_path))


def test_a_null_turn_content_names_its_record_session_and_turn(tmp_path: Path) -> None:
    item = lme_item()
    item["haystack_sessions"][1][0]["content"] = None
    write_longmemeval_oracle(tmp_path, {"2_q1.json": item})
    with pytest.raises(
        DatasetError, match=r"record q1 session answer_1 turn 0: field 'content': expected a str"
    ):
        list(iter_longmemeval("oracle", tmp_path))


def test_a_numeric_answer_is_still_read(tmp_path: Path) -> None:
    """32 oracle answers are counts: a number is an answer, only null and booleans are not."""
    write_longmemeval_oracle(tmp_path, {"2_q1.json": lme_item(answer=3)})
    (conversation,) = iter_longmemeval("oracle", tmp_path)
    assert conversation.questions[0].answer == "3"
