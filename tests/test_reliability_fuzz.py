"""Fuzzed dataset files and configs."""

from __future__ import annotations

import copy
import functools
import io
import json
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf import DictConfig, OmegaConf
from run_helpers import (
    CONF,
    FIXTURE,
    compose_config,
    fixture_overrides,
)

from benchmarks.answering.prompts import TEMPLATES
from benchmarks.config.values import ConfigError
from benchmarks.data import DatasetError, iter_longmemeval, read_locomo
from benchmarks.data.longmemeval import parse_instance
from benchmarks.data.paths import REPO_ROOT
from benchmarks.data.segmentation import (
    read_dts_hub,
    read_superdialseg_json,
    read_tiage_official,
    read_topic_id_txt,
)
from benchmarks.pipeline.harness import instantiate_method
from benchmarks.pipeline.run import run
from benchmarks.pipeline.segment import validate as segment_validate
from benchmarks.pipeline.settings import CACHE_MODES, validate
from memsys.base import Services
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache

pytestmark = pytest.mark.usefixtures("no_env_overrides")

# Fuzzed dataset files and configs: a damaged file loads, or raises DatasetError naming the file
# (and, inside a list of records, the record); a bad value is a ConfigError naming its key.
# Never a bare KeyError, TypeError, AttributeError, IndexError or ValueError.

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-3, 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=5,
)
FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def locations(document: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) inside a JSON document, depth first."""
    found: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict | list):
            for key in list(node) if isinstance(node, dict) else range(len(node)):
                found.append((node, key))
                walk(node[key])

    walk(document)
    return found


@st.composite
def damaged(draw: st.DrawFn, document: Any) -> Any:
    """``document`` with one to four damages: a key or item dropped, a value set to null,
    replaced by a value of another type, or a string or list truncated."""
    document = copy.deepcopy(document)
    for _ in range(draw(st.integers(1, 4))):
        spots = locations(document)
        if not spots:
            break
        container, key = spots[draw(st.integers(0, len(spots) - 1))]
        value = container[key]
        damage = draw(st.sampled_from(["drop", "null", "retype", "truncate"]))
        if damage == "drop":
            del container[key]
        elif damage == "null":
            container[key] = None
        elif damage == "truncate" and isinstance(value, str | list) and value:
            container[key] = value[: draw(st.integers(0, len(value) - 1))]
        else:
            container[key] = draw(JSON_VALUES)
    return document


@st.composite
def damaged_bytes(draw: st.DrawFn, content: bytes) -> bytes:
    """``content`` cut short, with a byte changed, or with random bytes spliced in."""
    position = draw(st.integers(0, len(content) - 1))
    damage = draw(st.sampled_from(["cut", "flip", "splice"]))
    if damage == "cut":
        return content[:position]
    if damage == "flip":
        return (
            content[:position]
            + bytes([content[position] ^ draw(st.integers(1, 255))])
            + (content[position + 1 :])
        )
    return content[:position] + draw(st.binary(min_size=1, max_size=8)) + content[position:]


def loads_or_names(load: Callable[[Path], Any], path: Path, *, record: bool) -> None:
    """``load(path)`` succeeds, or fails with a DatasetError naming ``path`` (and a record)."""
    try:
        load(path)
    except DatasetError as error:
        assert str(path) in str(error)
        assert error.record is not None or not record, f"no record named: {error}"


TINY_LOCOMO = json.loads((FIXTURE / "locomo" / "tiny_conversation.json").read_text())


@FUZZ
@given(document=damaged(TINY_LOCOMO))
def test_fuzzed_locomo_records(tmp_path: Path, document: Any) -> None:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(document))
    loads_or_names(read_locomo, path, record=True)


@FUZZ
@given(content=damaged_bytes(json.dumps(TINY_LOCOMO).encode()) | JSON_VALUES.map(json.dumps))
def test_fuzzed_locomo_file(tmp_path: Path, content: bytes | str) -> None:
    path = tmp_path / "locomo.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    loads_or_names(read_locomo, path, record=False)


LME_ITEM = {
    "question_id": "q1_abs",
    "question_type": "temporal-reasoning",
    "question": "How many days passed between the two trips?",
    "answer": 3,
    "question_date": "2023/05/30 (Tue) 23:40",
    "haystack_dates": ["2023/05/01 (Mon) 10:00", "2023/04/01 (Sat) 09:00"],
    "haystack_session_ids": ["answer_1", "filler_2"],
    "haystack_sessions": [
        [
            {"role": "user", "content": "I went to Porto.", "has_answer": True},
            {"role": "assistant", "content": "Lovely!"},
        ],
        [{"role": "user", "content": "Any bread tips?"}],
    ],
    "answer_session_ids": ["answer_1"],
}


@FUZZ
@given(item=damaged(LME_ITEM) | JSON_VALUES)
def test_fuzzed_longmemeval_item(item: Any) -> None:
    source = "longmemeval/longmemeval_oracle_lme_jsons.tar.xz:lme_jsons/2_q1_abs.json"
    try:
        parse_instance(item, source=source)
    except DatasetError as error:
        assert str(error).startswith(f"{source}: record ")


def lme_archive(data_dir: Path, member: bytes) -> None:
    folder = data_dir / "longmemeval"
    folder.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        info = tarfile.TarInfo("lme_jsons/2_q1_abs.json")
        info.size = len(member)
        tar.addfile(info, io.BytesIO(member))
    (folder / "longmemeval_oracle_lme_jsons.tar.xz").write_bytes(buffer.getvalue())


@settings(FUZZ, max_examples=50)
@given(member=damaged_bytes(json.dumps(LME_ITEM).encode()))
def test_fuzzed_longmemeval_archive_member(tmp_path: Path, member: bytes) -> None:
    lme_archive(tmp_path, member)
    try:
        list(iter_longmemeval("oracle", tmp_path))
    except DatasetError as error:
        assert "lme_jsons/2_q1_abs.json" in str(error) and error.record is not None


SEGMENTATION_FILES: dict[str, tuple[Callable[[Path], Any], Any]] = {
    "dts_hub": (
        read_dts_hub,
        [
            {
                "dial_id": 4,
                "utterances": ["hi", "hello", "cats?"],
                "segments": [2, 1],
                "set": "test",
            },
            {"dial_id": 5, "utterances": ["a", "b"], "segments": [2], "set": "dev"},
        ],
    ),
    "tiage": (read_tiage_official, {"7": [["hi", "-1"], ["how are you", "0"], ["cats!", "1"]]}),
    "superdialseg": (
        lambda path: read_superdialseg_json(path, "tiage"),
        {
            "dial_data": {
                "tiage": [
                    {
                        "dial_id": "d1",
                        "turns": [
                            {"utterance": "hi", "role": "user", "segmentation_label": 0},
                            {"utterance": "cats?", "role": "agent", "segmentation_label": 1},
                            {"utterance": "dogs.", "role": "user", "segmentation_label": 0},
                        ],
                    }
                ]
            }
        },
    ),
}


@pytest.mark.parametrize("name", sorted(SEGMENTATION_FILES))
def test_fuzzed_segmentation_json(tmp_path: Path, name: str) -> None:
    reader, document = SEGMENTATION_FILES[name]

    @FUZZ
    @given(content=damaged(document).map(json.dumps) | damaged_bytes(json.dumps(document).encode()))
    def check(content: str | bytes) -> None:
        path = tmp_path / f"{name}.json"
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        loads_or_names(reader, path, record=False)

    check()


TOPIC_ID_TXT = b"call_id_0\n0 hi there\n0 hello\n1 cats?\ncall_id_1\n-1 only one\n"


@FUZZ
@given(content=damaged_bytes(TOPIC_ID_TXT))
def test_fuzzed_topic_id_txt(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "segmentation.txt"
    path.write_bytes(content)
    loads_or_names(read_topic_id_txt, path, record=False)


NOT_AN_INT = (
    st.booleans()
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.sampled_from(["${missing.key}", "12", "1e3", ""])
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), max_size=2)
)
NOT_A_CHOICE = NOT_AN_INT | st.integers() | st.none()
#: Runner keys and values of a wrong type or out of range for them.
WRONG_RUN_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "answer.context_budget": NOT_AN_INT | st.none() | st.integers(max_value=0),
    "answer.max_tokens": NOT_AN_INT | st.none() | st.integers(max_value=-1),
    "subset.max_questions": NOT_AN_INT | st.integers(max_value=0),
    "subset.conversations": NOT_AN_INT | st.integers(max_value=0),
    "batch_size": NOT_AN_INT | st.none() | st.integers(max_value=0),
    "seed": NOT_AN_INT | st.none() | st.integers(max_value=-1),
    "adversarial": NOT_A_CHOICE.filter(lambda value: value not in ("exclude", "include")),
    "llm_cache_mode": NOT_A_CHOICE.filter(lambda value: value not in CACHE_MODES),
    "answer.template": NOT_A_CHOICE.filter(lambda value: value not in (*TEMPLATES, None)),
    "judge.enabled": NOT_A_CHOICE.filter(lambda value: not isinstance(value, bool)),
}


@pytest.fixture(scope="module")
def base_config() -> DictConfig:
    return compose_config(["method=turn_rag_bm25"])


def with_value(cfg: DictConfig, key: str, value: Any) -> DictConfig:
    changed = copy.deepcopy(cfg)
    OmegaConf.update(changed, key, value, merge=False, force_add=True)
    return changed


@settings(FUZZ, max_examples=200)
@given(data=st.data())
def test_fuzzed_run_keys_are_config_errors_naming_the_key(
    base_config: DictConfig, data: st.DataObject
) -> None:
    key = data.draw(st.sampled_from(sorted(WRONG_RUN_VALUES)))
    value = data.draw(WRONG_RUN_VALUES[key])
    with pytest.raises(ConfigError) as raised:
        validate(with_value(base_config, key, value))
    assert raised.value.key == key


NOT_A_NUMBER = (
    st.booleans()
    | st.text(max_size=8)
    | st.sampled_from(["${missing.key}", "12", ""])
    | st.lists(st.integers(), max_size=2)
)
NOT_A_NAME = st.booleans() | st.integers() | st.floats() | st.sampled_from(["???"])
#: Settings of a backbone (under ``backbone`` and ``judge.backbone``) and wrong values for them.
WRONG_BACKBONE_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "concurrency": NOT_AN_INT | st.integers(max_value=0),
    "retry": st.text(max_size=4) | st.integers() | st.lists(st.integers(), max_size=2),
    "retry.max_attempts": NOT_AN_INT | st.none() | st.integers(max_value=0),
    "retry.max_consecutive_failures": NOT_AN_INT | st.none() | st.integers(max_value=0),
    "retry.request_timeout_s": NOT_A_NUMBER | st.none() | st.floats(max_value=0),
    "retry.initial_backoff_s": NOT_A_NUMBER | st.floats(max_value=-0.001) | st.just(float("nan")),
    "retry.max_backoff_s": NOT_A_NUMBER | st.integers(max_value=-1),
    "retry.backoff_multiplier": NOT_A_NUMBER | st.none(),
    "retry.max_atempts": st.integers(1, 5),  # misspelled
    "provider.model": NOT_A_NAME | st.none(),
    "provider.base_url": NOT_A_NAME.filter(lambda value: value != "???"),
    "provider.json_mode": NOT_A_CHOICE.filter(
        lambda value: value not in ("json_schema", "json_object", "none")
    ),
    "provider.api_kee_env": st.just("OPENAI_API_KEY"),  # misspelled
    "provider._target_": st.sampled_from(["memsys.llm.NoSuchConfig", "", None, 3]),
}
#: A run that answers with a server backbone and judges with another.
SERVER_BACKBONES = [
    "method=turn_rag_bm25",
    "backbone=openai_server",
    "backbone.provider.model=served",
    "judge=gpt-4o-mini",
]


@functools.cache
def server_config() -> DictConfig:
    return compose_config(SERVER_BACKBONES)


@settings(FUZZ, max_examples=300)
@given(data=st.data())
def test_fuzzed_backbone_settings_are_config_errors_naming_the_key(data: st.DataObject) -> None:
    cfg = server_config()
    validate(cfg)  # the configs as shipped are fine
    key = data.draw(st.sampled_from(sorted(WRONG_BACKBONE_VALUES)))
    full_key = f"{data.draw(st.sampled_from(['backbone', 'judge.backbone']))}.{key}"
    with pytest.raises(ConfigError) as raised:
        validate(with_value(cfg, full_key, data.draw(WRONG_BACKBONE_VALUES[key])))
    assert raised.value.key == full_key
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("override", "key", "message"),
    [
        ("backbone.concurrency=-1", "backbone.concurrency", "expected a positive integer"),
        ("+backbone.retry.max_attempts=0", "backbone.retry.max_attempts", "got 0"),
        ("+backbone.retry.max_atempts=3", "backbone.retry.max_atempts", "max_attempts"),
        ("backbone.retry.request_timeout_s=-1", "backbone.retry.request_timeout_s", "positive"),
        ("backbone.provider.model=???", "backbone.provider.model", "missing"),
        ("judge.backbone.retry.max_attempts=0", "judge.backbone.retry.max_attempts", "got 0"),
    ],
)
def test_a_wrong_backbone_setting_fails_before_any_run_directory(
    tmp_path: Path, override: str, key: str, message: str
) -> None:
    overrides = [*fixture_overrides(tmp_path / "runs", tmp_path / "cache"), *SERVER_BACKBONES]
    with pytest.raises(ConfigError, match=message) as raised:
        run(compose_config([*overrides, override]))
    assert raised.value.key == key
    assert not (tmp_path / "runs").exists()


def test_a_wrong_backbone_setting_is_one_line_from_the_cli(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.pipeline.run",
            *fixture_overrides(tmp_path / "runs", tmp_path / "cache"),
            *SERVER_BACKBONES,
            "+backbone.retry.max_atempts=3",
            f"hydra.run.dir={tmp_path / 'hydra'}",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: config key 'backbone.retry.max_atempts': ")
    assert len(result.stderr.splitlines()) == 1 and not (tmp_path / "runs").exists()


def test_a_run_that_calls_no_llm_does_not_check_the_backbone() -> None:
    """Retrieval-only runs serve every backbone, configured or not."""
    cfg = compose_config(["answer=none", "backbone=openai_server", "backbone.concurrency=0"])
    assert validate(cfg).backbone is None  # no reader: its settings are not the run's


def test_the_segmenter_backbone_is_checked_when_it_is_used() -> None:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            config_name="segment",
            overrides=["segmenter=esmem", "backbone=openai_server", "backbone.provider.model=m"],
        )
    segment_validate(cfg)
    with pytest.raises(ConfigError) as raised:
        segment_validate(with_value(cfg, "backbone.retry.max_attempts", 0))
    assert raised.value.key == "backbone.retry.max_attempts"
    lite = with_value(cfg, "segmenter.extraction", "lite")  # the backbone is not used
    segment_validate(with_value(lite, "backbone.retry.max_attempts", 0))


#: Options of two methods (one a baseline, one with many numeric knobs) and wrong values.
WRONG_METHOD_VALUES: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "turn_rag_bm25": {
        "top_k": NOT_AN_INT | st.integers(max_value=0),  # null: every item (its config's value)
        "retriever": NOT_A_CHOICE.filter(lambda value: value not in ("bm25", "dense")),
    },
    "cast": {
        "top_k": NOT_AN_INT | st.none() | st.integers(max_value=0),
        "window": NOT_AN_INT | st.none(),
        "max_gap_days": st.text(max_size=4) | st.none() | st.lists(st.floats(), max_size=2),
        "fusion": NOT_A_CHOICE.filter(lambda value: value not in ("rerank", "slot3")),
    },
}


@pytest.mark.parametrize("method", sorted(WRONG_METHOD_VALUES))
def test_fuzzed_method_options_are_config_errors_naming_the_key(method: str) -> None:
    cfg = compose_config([f"method={method}"])
    services = Services(embedder=Embedder(EmbedderConfig(), EmbeddingCache()), tokens=None)  # type: ignore[arg-type]
    instantiate_method(cfg.method, services)  # the config as shipped is fine

    @settings(FUZZ, max_examples=100)
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        option = data.draw(st.sampled_from(sorted(WRONG_METHOD_VALUES[method])))
        value = data.draw(WRONG_METHOD_VALUES[method][option])
        changed = with_value(cfg, f"method.{option}", value)
        try:
            validate(changed)  # the runner's own keys are untouched
        except ConfigError as error:  # but the settings hold the method resolved: an option
            # that does not resolve (``${missing.key}``) is named there already
            assert error.key == f"method.{option}" and "cannot resolve" in str(error)
            return
        with pytest.raises(ConfigError) as raised:
            instantiate_method(changed.method, services)
        error = raised.value
        assert error.key == f"method.{option}" or (error.key == "method" and option in str(error))

    check()
