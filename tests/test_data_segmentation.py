from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.data import DatasetError, load_segmentation
from benchmarks.data.segmentation import (
    read_dts_hub,
    read_superdialseg_json,
    read_tiage_official,
    read_topic_id_txt,
)


def _views(dialogues):
    return [(d.utterances, d.boundary_labels) for d in dialogues]


@pytest.mark.parametrize(
    ("name", "split", "dialogues", "utterances"),
    [
        ("dialseg711", "test", 711, 19350),
        ("tiage", "train", 300, 4692),
        ("tiage", "dev", 100, 1546),
        ("tiage", "test", 100, 1564),
        ("superdialseg", "test", 1322, 17328),
        ("superdialseg", "validation", 1322, 17734),
    ],
)
def test_counts(data_dir: Path, name: str, split: str, dialogues: int, utterances: int) -> None:
    loaded = load_segmentation(name, split, data_dir)
    assert len(loaded) == dialogues
    assert sum(len(d.utterances) for d in loaded) == utterances
    assert all(d.boundary_labels[-1] == 0 for d in loaded)


def test_tiage_shifts_become_end_of_segment_labels(data_dir: Path) -> None:
    # 315 annotated topic shifts in the test split, each moved to the utterance before it.
    assert sum(sum(d.boundary_labels) for d in load_segmentation("tiage", "test", data_dir)) == 315


def test_dialseg711_copies_agree(data_dir: Path) -> None:
    folder = data_dir / "dialseg711"
    primary = _views(load_segmentation("dialseg711", "test", data_dir))
    assert (
        _views(read_topic_id_txt(folder / "superdialseg_release" / "segmentation_file_test.txt"))
        == primary
    )
    assert _views(read_dts_hub(folder / "dts_hub" / "dialseg_711.json")) == primary
    unlabeled = json.loads((folder / "tadam" / "document_en_dataset_2.json").read_text())
    assert [tuple(u) for u in unlabeled] == [utterances for utterances, _ in primary]


@pytest.mark.parametrize(
    ("split", "release_split"), [("train", "train"), ("dev", "validation"), ("test", "test")]
)
def test_tiage_copies_agree(data_dir: Path, split: str, release_split: str) -> None:
    folder = data_dir / "tiage"
    primary = _views(load_segmentation("tiage", split, data_dir))
    assert _views(read_dts_hub(folder / "dts_hub" / "tiage.json", split)) == primary
    release = read_superdialseg_json(
        folder / "superdialseg_release" / f"segmentation_file_{release_split}.json", "tiage"
    )
    assert _views(release) == primary
    assert all(set(d.speakers) <= {"user", "agent"} for d in release)


def test_unknown_split_lists_what_exists() -> None:
    with pytest.raises(ValueError, match=r"no segmentation data for dialseg711/train; available"):
        load_segmentation("dialseg711", "train")


def test_bad_txt_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "seg.txt"
    path.write_text("call_id_0\n0 hello\nx what\n")
    with pytest.raises(
        DatasetError, match=r"seg\.txt: record line 3: expected '<topic_id> <utterance>'"
    ):
        read_topic_id_txt(path)


def test_empty_dialogue_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "seg.txt"
    path.write_text("call_id_0\ncall_id_1\n0 hi\n")
    with pytest.raises(DatasetError, match=r"record call_id_0: dialogue has no utterances"):
        read_topic_id_txt(path)


def test_one_utterance_dialogue(tmp_path: Path) -> None:
    path = tmp_path / "seg.txt"
    path.write_text("call_id_0\n3 only one\n")
    (dialogue,) = read_topic_id_txt(path)
    assert dialogue.boundary_labels == (0,)


def test_tiage_malformed_pairs_name_the_dialogue(tmp_path: Path) -> None:
    path = tmp_path / "anno.json"
    path.write_text(json.dumps({"7": [["hi", "-1"], ["no label"]]}))
    with pytest.raises(
        DatasetError, match=r"anno\.json: record 7: expected \[utterance, label\] pairs"
    ):
        read_tiage_official(path)


def test_tiage_unknown_label_names_the_dialogue(tmp_path: Path) -> None:
    path = tmp_path / "anno.json"
    path.write_text(json.dumps({"3": [["hi", "-1"], ["hello", "0"], ["so, cars?", "maybe"]]}))
    with pytest.raises(DatasetError, match=r"record 3: labels must be -1, 0 or 1, got 'maybe'"):
        read_tiage_official(path)


def test_dts_hub_length_mismatch_names_the_dialogue(tmp_path: Path) -> None:
    path = tmp_path / "hub.json"
    path.write_text(
        json.dumps([{"dial_id": 4, "utterances": ["a", "b"], "segments": [3], "set": "test"}])
    )
    with pytest.raises(DatasetError, match=r"hub\.json: record 4: segment lengths"):
        read_dts_hub(path)


def test_truncated_json_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "hub.json"
    path.write_text('[{"dial_id": 4, "utter')
    with pytest.raises(DatasetError, match=r"hub\.json: not valid JSON"):
        read_dts_hub(path)
