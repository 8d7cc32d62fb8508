"""Calibrate HingeMem lite's ``topic_shift_threshold`` on TIAGE train+dev gold topic boundaries.

Why: the lite extractor (``memsys/methods/hingemem/lite.py``) opens a new hyperedge on a
"topic shift" when a turn's embedding has cosine < ``topic_shift_threshold`` with the normalized
sum of the embeddings of the current segment's turns so far. The default 0.5 was read off
percentiles on LoCoMo conv-26, which is test data. This script picks it on data that is no test
set: TIAGE's train and dev splits (never test), with their gold topic segmentation.

For each dialogue, every utterance after the first gets the same statistic the extractor
computes: cosine between its embedding and the normalized sum of the embeddings of the current
*gold* segment's utterances (segment start .. previous utterance), labelled 1 when the utterance
starts a new gold segment. A boundary is predicted when cosine < t; the reported threshold
maximizes boundary F1 (pooled over utterances, ties -> lowest t) over t = 0.05..0.95 step 0.01.

Two variants: ``all`` scores every utterance after the first; ``min2`` scores only utterances
whose current gold segment already holds >= 2 utterances, as the extractor never fires a shift
before a segment has ``min_segment_turns`` = 2 turns. Two embedding inputs: ``plain`` embeds the
utterance text; ``speaker`` embeds ``"A: text"`` / ``"B: text"`` (TIAGE has no speaker names;
its PersonaChat dialogues alternate), like the extractor's ``f"{speaker}: {text}"``. The keyword
condition of the extractor's rule is ignored. Embeddings: the harness embedder (MiniLM, from
``conf/embedder/minilm.yaml``) with the shared embedding cache (``$MEMSYS_CACHE_DIR`` or
``.cache``/embeddings.sqlite).

    nice .venv/bin/python scripts/calibrate_topic_shift.py
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import OmegaConf
from scipy.stats import rankdata

from benchmarks.data.paths import REPO_ROOT
from benchmarks.data.segmentation import load_segmentation
from benchmarks.render import Table
from memsys.embed import Embedder, EmbedderConfig, EmbeddingCache
from memsys.types import SegmentationDialogue

COMMAND = "nice .venv/bin/python scripts/calibrate_topic_shift.py"
OUT_DIR = REPO_ROOT / "results" / "calibration"
CURRENT = 0.5
GRID = tuple(round(k / 100, 2) for k in range(5, 96))
MODES = ("plain", "speaker")
VARIANTS = {"all": 1, "min2": 2}  # variant -> utterances the gold segment must already hold
PERCENTILES = (10, 25, 50)


def embed_texts(dialogue: SegmentationDialogue, mode: str) -> list[str]:
    """The texts embedded for one dialogue: the utterances, or ``"A: ..."``/``"B: ..."``."""
    if mode == "plain":
        return list(dialogue.utterances)
    return [f"{'AB'[i % 2]}: {u}" for i, u in enumerate(dialogue.utterances)]


def dialogue_statistics(
    vectors: np.ndarray, boundary_labels: Sequence[int]
) -> tuple[list[float], list[int], list[int]]:
    """Per utterance after the first: (cosine to its gold segment's centre, starts-a-segment
    label, utterances already in the current segment). ``boundary_labels[i] == 1`` means
    utterance ``i`` ends a segment, so utterance ``i + 1`` starts one."""
    cosines: list[float] = []
    labels: list[int] = []
    prior: list[int] = []
    segment_sum = vectors[0].astype(np.float64)
    segment_size = 1
    for i in range(1, len(vectors)):
        vector = vectors[i].astype(np.float64)
        centre = segment_sum / max(float(np.linalg.norm(segment_sum)), 1e-12)
        cosines.append(float(centre @ vector))
        starts = int(boundary_labels[i - 1] == 1)
        labels.append(starts)
        prior.append(segment_size)
        if starts:
            segment_sum, segment_size = vector.copy(), 1
        else:
            segment_sum, segment_size = segment_sum + vector, segment_size + 1
    return cosines, labels, prior


def scores_at(cosines: np.ndarray, labels: np.ndarray, threshold: float) -> dict[str, float]:
    """Boundary precision, recall and F1 when a boundary is predicted at cosine < threshold."""
    predicted = cosines < threshold
    true_positives = int(np.sum(predicted & (labels == 1)))
    n_predicted, n_gold = int(predicted.sum()), int(labels.sum())
    precision = true_positives / n_predicted if n_predicted else 0.0
    recall = true_positives / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "threshold": threshold,
        "f1": round(f1, 4),
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "predicted": n_predicted,
    }


def calibrate(cosines: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """The best threshold on the grid, the scores at the current 0.5, percentiles, the ROC AUC of
    low cosine as a boundary detector and the F1 of predicting a boundary everywhere."""
    grid = [scores_at(cosines, labels, t) for t in GRID]
    best = max(grid, key=lambda row: (row["f1"], -row["threshold"]))
    n_pos, n_neg = int(labels.sum()), int((labels == 0).sum())
    ranks = rankdata(-cosines)  # low cosine ranks high
    auc = (ranks[labels == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    rate = n_pos / len(labels)

    def percentiles(values: np.ndarray) -> dict[str, float]:
        return {f"p{p}": round(float(np.percentile(values, p)), 4) for p in PERCENTILES}

    return {
        "utterances": len(labels),
        "boundaries": int(labels.sum()),
        "best": best,
        "at_current": scores_at(cosines, labels, CURRENT),
        "roc_auc": round(float(auc), 4),
        "f1_all_boundary": round(2 * rate / (1 + rate), 4),
        "percentiles": {
            "boundary": percentiles(cosines[labels == 1]),
            "non_boundary": percentiles(cosines[labels == 0]),
        },
    }


def run(splits: Sequence[str], modes: Sequence[str]) -> dict[str, Any]:
    """All numbers of the calibration, for the JSON file."""
    embedder_cfg = OmegaConf.load(REPO_ROOT / "conf" / "embedder" / "minilm.yaml")
    cache_dir = Path(os.environ.get("MEMSYS_CACHE_DIR", ".cache"))
    cache_dir = cache_dir if cache_dir.is_absolute() else REPO_ROOT / cache_dir
    embedder = Embedder(
        EmbedderConfig.from_node(embedder_cfg),
        EmbeddingCache(cache_dir / "embeddings.sqlite"),
    )
    data = {split: load_segmentation("tiage", split=split) for split in splits}
    result: dict[str, Any] = {
        "dataset": "tiage",
        "splits": list(splits),
        "embedder": str(embedder_cfg.model),
        "rule": "boundary predicted when cosine(turn, normalized sum of gold segment so far) < t",
        "grid": [GRID[0], GRID[-1], 0.01],
        "current_threshold": CURRENT,
        "dialogues": {split: len(dialogues) for split, dialogues in data.items()},
        "utterances": {
            split: sum(len(d.utterances) for d in dialogues) for split, dialogues in data.items()
        },
        "modes": {},
    }
    for mode in modes:
        # per split: concatenated (cosine, label, prior) over its dialogues
        columns: dict[str, tuple[list[float], list[int], list[int]]] = {}
        for split, dialogues in data.items():
            cos_all: list[float] = []
            lab_all: list[int] = []
            prior_all: list[int] = []
            for index, dialogue in enumerate(dialogues, start=1):
                vectors = embedder.encode(embed_texts(dialogue, mode))
                cosines, labels, prior = dialogue_statistics(vectors, dialogue.boundary_labels)
                cos_all += cosines
                lab_all += labels
                prior_all += prior
                if index % 50 == 0 or index == len(dialogues):
                    print(f"[{mode}] {split}: {index}/{len(dialogues)} dialogues", flush=True)
            columns[split] = (cos_all, lab_all, prior_all)
        mode_result: dict[str, Any] = {}
        for variant, minimum in VARIANTS.items():
            pooled_parts = []
            per_split = {}
            for split, (cos_list, lab_list, prior_list) in columns.items():
                keep = np.asarray(prior_list) >= minimum
                cosines = np.asarray(cos_list)[keep]
                labels = np.asarray(lab_list)[keep]
                pooled_parts.append((cosines, labels))
                per_split[split] = calibrate(cosines, labels)
            pooled = calibrate(
                np.concatenate([c for c, _ in pooled_parts]),
                np.concatenate([lab for _, lab in pooled_parts]),
            )
            mode_result[variant] = {"pooled": pooled, "per_split": per_split}
        result["modes"][mode] = mode_result
    print(f"embedder: {embedder.counts()}", file=sys.stderr)
    return result


def render(result: dict[str, Any]) -> str:
    """The Markdown summary."""
    splits = "+".join(result["splits"])
    lines = [
        f"# HingeMem lite `topic_shift_threshold`: calibration on TIAGE {splits} (not test)",
        "",
        f"Statistic: cosine between an utterance's {result['embedder']} embedding and the "
        "normalized sum of its gold segment's previous utterances (the lite extractor's rule, "
        "keyword condition ignored); boundary predicted when cosine < t; t on "
        f"{result['grid'][0]}..{result['grid'][1]} step 0.01, best = max pooled boundary F1. "
        "Variant `all`: every utterance after the first; `min2`: only utterances whose gold "
        "segment already has >= 2 utterances (the extractor's `min_segment_turns`). Mode "
        "`plain`: utterance text; `speaker`: `A: `/`B: ` prefixed, like the extractor's "
        "`speaker: text`. F1 all-boundary: predicting a boundary at every scored utterance; "
        "AUC: ROC AUC of low cosine as a boundary score.",
        "",
        "Dialogues: "
        + ", ".join(f"{s} {n}" for s, n in result["dialogues"].items())
        + "; utterances: "
        + ", ".join(f"{s} {n}" for s, n in result["utterances"].items())
        + ".",
        "",
    ]

    def prf(row: dict[str, float]) -> str:
        return f"{row['f1']:.3f} / {row['precision']:.3f} / {row['recall']:.3f}"

    def pct(values: dict[str, float]) -> str:
        return " / ".join(f"{values[f'p{p}']:.3f}" for p in PERCENTILES)

    pooled_rows, per_split_rows = [], []
    for mode, variants in result["modes"].items():
        for variant, blocks in variants.items():
            stats = blocks["pooled"]
            pooled_rows.append(
                [
                    mode,
                    variant,
                    stats["utterances"],
                    stats["boundaries"],
                    f"{stats['best']['threshold']:.2f}",
                    prf(stats["best"]),
                    prf(stats["at_current"]),
                    f"{stats['f1_all_boundary']:.3f}",
                    f"{stats['roc_auc']:.3f}",
                    pct(stats["percentiles"]["boundary"]),
                    pct(stats["percentiles"]["non_boundary"]),
                ]
            )
            per_split_rows.append(
                [
                    mode,
                    variant,
                    *(
                        f"{s['best']['threshold']:.2f} ({s['best']['f1']:.3f})"
                        for s in blocks["per_split"].values()
                    ),
                ]
            )
    header = ["mode", "variant", "scored", "boundaries", "best t", "F1 / P / R at best"]
    header += ["F1 / P / R at 0.5", "F1 all-boundary", "AUC", "boundary p10/p25/p50"]
    header += ["non-boundary p10/p25/p50"]
    pooled = Table(header, pooled_rows, align="llrrrllrrll")
    per_split = Table(["mode", "variant", *result["splits"]], per_split_rows)
    lines += [
        *pooled.markdown_lines(),
        "",
        "Best threshold per split (F1), as a stability check:",
        "",
        *per_split.markdown_lines(),
        "",
        "Numbers: `results/calibration/topic_shift.json`. Command:",
        "",
        "```",
        COMMAND,
        "```",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", default="train,dev", help="TIAGE splits (not test)")
    parser.add_argument("--modes", default=",".join(MODES), help="plain and/or speaker")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)
    splits = args.splits.split(",")
    if "test" in splits:
        parser.error("calibrating on the test split defeats the purpose")
    modes = args.modes.split(",")
    if unknown := set(modes) - set(MODES):
        parser.error(f"unknown modes {sorted(unknown)}")
    result = run(splits, modes)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "topic_shift.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "topic_shift.md").write_text(render(result))
    print((args.out / "topic_shift.md").read_text())


if __name__ == "__main__":
    main()
