"""Time the vectorized segmentation scorer on SuperDialSeg's test set and check it against nltk.

Scores all test dialogues against seeded random predictions, reports the best wall time over
several repeats (the scorer's target is under a second) and the largest absolute difference from
nltk's ``pk`` / ``windowdiff`` (target 1e-12).

Usage: ``python scripts/bench_segmentation_scoring.py [--dataset superdialseg] [--repeats 7]``
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import numpy as np
from nltk.metrics.segmentation import pk as nltk_pk
from nltk.metrics.segmentation import windowdiff as nltk_windowdiff

from benchmarks.data import SEGMENTATION_DATASETS, load_segmentation
from benchmarks.metrics.segmentation import score_segmentation

TARGET_SECONDS = 1.0
TARGET_DIFFERENCE = 1e-12


def random_predictions(
    references: Sequence[Sequence[int]], seed: int
) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Pair each reference with random labels at that dialogue's own boundary rate."""
    rng = np.random.default_rng(seed)
    pairs = []
    for reference in references:
        rate = (sum(reference) + 1) / len(reference)
        prediction = tuple(int(v) for v in rng.random(len(reference)) < rate)
        pairs.append((tuple(reference), prediction))
    return pairs


def nltk_difference(pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> tuple[float, int]:
    """Largest |ours − nltk| over Pk and WindowDiff, and how many dialogues nltk could score."""
    scores = score_segmentation(pairs)
    largest, compared = 0.0, 0
    for index, (reference, prediction) in enumerate(pairs):
        k = int(scores.window[index])
        if len(reference) < k:  # too short for nltk (n = 1); see the scorer's docstring
            continue
        ref = "".join(map(str, reference[:-1])) + "0"
        hyp = "".join(map(str, prediction[:-1])) + "0"
        largest = max(
            largest,
            abs(scores.pk[index] - nltk_pk(ref, hyp, k=k)),
            abs(scores.wd[index] - nltk_windowdiff(ref, hyp, k)),
        )
        compared += 1
    return largest, compared


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print a short report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=SEGMENTATION_DATASETS, default="superdialseg")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    dialogues = load_segmentation(args.dataset, split="test")
    pairs = random_predictions([d.boundary_labels for d in dialogues], args.seed)
    timings = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        means = score_segmentation(pairs).means()
        timings.append(time.perf_counter() - start)
    best = min(timings)

    start = time.perf_counter()
    largest, compared = nltk_difference(pairs)
    nltk_seconds = time.perf_counter() - start

    n_utterances = sum(len(reference) for reference, _ in pairs)
    print(
        f"{args.dataset} test: {len(pairs)} dialogues, {n_utterances} utterances, seed {args.seed}"
    )
    print(
        f"scoring, best of {args.repeats}: {best * 1000:.2f} ms (target < {TARGET_SECONDS:.0f} s)"
    )
    print(f"nltk pk + windowdiff loop (with one scoring pass): {nltk_seconds * 1000:.1f} ms")
    print(f"max |ours - nltk| over pk and wd: {largest:.3g} on {compared} dialogues")
    print("means: " + ", ".join(f"{key}={value:.4f}" for key, value in means.items() if key != "n"))
    ok = best < TARGET_SECONDS and largest <= TARGET_DIFFERENCE
    print("OK" if ok else "FAILED: slower than target or disagrees with nltk")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
