"""Parity of ``python -m benchmarks.metrics.ranking`` with LongMemEval's own retrieval code.

    python scripts/check_longmemeval_parity.py [--variant s|oracle] [--questions N] [--seed S]

For N questions, it writes rankings files (random, near-perfect and truncated rankings of the
official corpus, at turn and at session granularity), scores each with the harness's CLI
(``--out``), and compares every value per question with what the official code computes on the
same rankings: ``eval_utils.py`` run as it stands and ``run_retrieval.py``'s
``process_item_flat_index``, from ``data/evaluators/longmemeval/`` (the rest of that file needs
GPUs and retrieval models). The skip rule is compared too. Prints the counts and the largest
difference; exits 1 on any mismatch. The official code is executed here, in this check only; the
harness reimplements it (``benchmarks/metrics/longmemeval_official.py``).
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.data.paths import resolve_data_dir
from benchmarks.metrics import ranking
from benchmarks.metrics.longmemeval_official import CUTOFFS

ARCHIVES = {
    "s": "longmemeval_s_cleaned_lme_jsons.tar.xz",
    "oracle": "longmemeval_oracle_lme_jsons.tar.xz",
}
KINDS = ("random", "near-perfect", "truncated")


def official_namespace() -> dict[str, Any]:
    """The official functions, executed from the evaluator files. numpy 2 removed ``asfarray``,
    which eval_utils calls: a stand-in module gives it back with its old meaning."""
    numpy = np
    if not hasattr(np, "asfarray"):
        numpy = type("numpy_with_asfarray", (), {})()
        for name in ("sum", "log2", "arange"):
            setattr(numpy, name, getattr(np, name))
        numpy.asfarray = lambda values: np.asarray(values, dtype=float)  # type: ignore[attr-defined]
    folder = resolve_data_dir() / "evaluators" / "longmemeval"
    tree = ast.parse((folder / "eval_utils.py").read_text(encoding="utf-8"))
    tree.body = [node for node in tree.body if not isinstance(node, ast.Import)]
    retrieval = ast.parse((folder / "run_retrieval.py").read_text(encoding="utf-8"))
    tree.body += [
        node
        for node in retrieval.body
        if isinstance(node, ast.FunctionDef) and node.name == "process_item_flat_index"
    ]
    namespace: dict[str, Any] = {"np": numpy}
    exec(compile(tree, "longmemeval-official", "exec"), namespace)
    return namespace


def official_corpus(item: dict[str, Any], granularity: str, ns: dict[str, Any]) -> list[str]:
    """run_retrieval.py's corpus ids for one question."""
    ids: list[str] = []
    for sid, session, date in zip(
        item["haystack_session_ids"], item["haystack_sessions"], item["haystack_dates"], strict=True
    ):
        ids += ns["process_item_flat_index"](session, granularity, sid, date)[1]
    return ids


def official_metrics(
    corpus_ids: list[str], ranking_: list[int], granularity: str, ns: dict[str, Any]
) -> dict[str, dict[str, float]]:
    """What run_retrieval.py records for one ranking of corpus positions."""
    correct = list({doc for doc in corpus_ids if "answer" in doc})
    metrics: dict[str, dict[str, float]] = {"session": {}, "turn": {}}
    for k in CUTOFFS:
        names = (f"recall_any@{k}", f"recall_all@{k}", f"ndcg_any@{k}")
        values = ns["evaluate_retrieval"](ranking_, correct, corpus_ids, k=k)
        metrics[granularity] |= dict(zip(names, map(float, values), strict=True))
        if granularity == "turn":
            values = ns["evaluate_retrieval_turn2session"](ranking_, correct, corpus_ids, k=k)
            metrics["session"] |= dict(zip(names, map(float, values), strict=True))
    return {level: found for level, found in metrics.items() if found}


def official_skipped(item: dict[str, Any]) -> bool:
    """The main loop's rule: _abs questions, and those with no user turn marked has_answer."""
    user_turns = [t for s in item["haystack_sessions"] for t in s if t["role"] == "user"]
    return "_abs" in item["question_id"] or not any(t.get("has_answer") for t in user_turns)


def read_items(variant: str, limit: int, seed: int) -> list[dict[str, Any]]:
    """``limit`` questions of the archive, drawn with ``seed`` (all when limit >= its size)."""
    archive = resolve_data_dir() / "longmemeval" / ARCHIVES[variant]
    with tarfile.open(archive, "r|xz") as tar:
        items = [
            json.loads(tar.extractfile(member).read())  # type: ignore[union-attr]
            for member in tar
            if member.isfile() and member.name.endswith(".json")
        ]
    return random.Random(seed).sample(items, min(limit, len(items)))


def make_ranking(corpus_ids: list[str], kind: str, rng: random.Random) -> list[int]:
    """A random permutation, a near-perfect one (gold first, one gold entry moved a few ranks
    down), or the first third of a random one."""
    order = list(range(len(corpus_ids)))
    rng.shuffle(order)
    if kind == "truncated":
        return order[: len(order) // 3]
    if kind == "near-perfect":
        gold = [i for i in order if "answer" in corpus_ids[i]]
        order = gold + [i for i in order if "answer" not in corpus_ids[i]]
        if gold and len(order) > 1:
            order.insert(rng.randint(1, min(12, len(order) - 1)), order.pop(0))
    return order


def as_dataset_id(corpus_id: str) -> str:
    """The dataset's form of a relabelled id (a ranking may give either)."""
    return corpus_id.replace("noans", "answer")


def check(variant: str, questions: int, seed: int) -> tuple[int, int, float, list[str]]:
    """(questions, values compared, largest difference, mismatches)."""
    ns = official_namespace()
    rng = random.Random(seed)
    items = read_items(variant, questions, seed)
    compared, largest, mismatches = 0, 0.0, []
    with tempfile.TemporaryDirectory() as folder:
        for granularity in ("turn", "session"):
            for kind in KINDS:
                expected: dict[str, Any] = {}
                rankings_file = Path(folder) / f"{granularity}-{kind}.jsonl"
                with rankings_file.open("w", encoding="utf-8") as handle:
                    for item in items:
                        corpus_ids = official_corpus(item, granularity, ns)
                        order = make_ranking(corpus_ids, kind, rng)
                        expected[item["question_id"]] = (
                            "skipped"
                            if official_skipped(item)
                            else official_metrics(corpus_ids, order, granularity, ns)
                        )
                        line = {
                            "question_id": item["question_id"],
                            "granularity": granularity,
                            "ranked_ids": [as_dataset_id(corpus_ids[i]) for i in order],
                        }
                        handle.write(json.dumps(line) + "\n")
                out = Path(folder) / f"{granularity}-{kind}.scores.jsonl"
                argv = ["--rankings", str(rankings_file), "--variant", variant, "--out", str(out)]
                if ranking.main(argv) != 0:
                    return len(items), compared, largest, [f"{rankings_file.name}: CLI failed"]
                for line in map(json.loads, out.read_text(encoding="utf-8").splitlines()):
                    want = expected[line["question_id"]]
                    where = f"{line['question_id']} ({granularity}, {kind})"
                    if want == "skipped" or "skipped" in line:
                        if (want == "skipped") != ("skipped" in line):
                            mismatches.append(f"{where}: skip rule differs")
                        continue
                    for level, metrics in want.items():
                        for name, value in metrics.items():
                            difference = abs(line[level][name] - value)
                            largest = max(largest, difference)
                            compared += 1
                            if difference != 0.0:
                                mismatches.append(
                                    f"{where} {level} {name}: {line[level][name]} vs {value}"
                                )
    return len(items), compared, largest, mismatches


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=sorted(ARCHIVES), default="s")
    parser.add_argument("--questions", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    n, compared, largest, mismatches = check(args.variant, args.questions, args.seed)
    for line in mismatches[:20]:
        print(f"MISMATCH {line}")
    print(
        f"LongMemEval-{args.variant}: {n} questions x {len(KINDS)} ranking kinds x 2 granularities; "
        f"{compared} values compared, largest difference {largest:.1e}, {len(mismatches)} mismatches"
    )
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
