"""How far the judge agrees with itself (``judge.repeats`` > 1: mean, spread, unanimous share,
Fleiss' κ) and across protocols (``judge.protocols``: raw agreement and Cohen's κ per pair); what
each figure is over: docs/scoring.md, "Judge repeats and protocol agreement".

κ is None where chance agreement is 1 (every verdict the same): agreement is then total but κ
is undefined.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks.metrics.aggregate import OTHER_JUDGE_PREFIX


def fleiss_kappa(counts: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' κ of items each rated by the same number of raters: ``counts[i][j]`` raters put
    item ``i`` in category ``j``. None without items or where chance agreement is 1.

    >>> round(fleiss_kappa([[3, 0], [0, 3], [2, 1]]), 6)
    0.55
    """
    if not counts:
        return None
    raters = sum(counts[0])
    if raters < 2 or any(sum(row) != raters for row in counts):
        raise ValueError(f"every item needs the same number (>= 2) of ratings, got {counts!r}")
    items = len(counts)
    observed = statistics.fmean(
        (sum(n * n for n in row) - raters) / (raters * (raters - 1)) for row in counts
    )
    shares = [sum(row[j] for row in counts) / (items * raters) for j in range(len(counts[0]))]
    chance = sum(share * share for share in shares)
    return None if chance == 1 else (observed - chance) / (1 - chance)


def cohen_kappa(pairs: Sequence[tuple[bool, bool]]) -> float | None:
    """Cohen's κ of two raters' yes/no verdicts on the same items. None without items or where
    chance agreement is 1.

    >>> round(cohen_kappa([(True, True)] * 20 + [(True, False)] * 5 + [(False, True)] * 10
    ...                   + [(False, False)] * 15), 6)
    0.4
    """
    if not pairs:
        return None
    total = len(pairs)
    observed = sum(a == b for a, b in pairs) / total
    yes_a = sum(a for a, _ in pairs) / total
    yes_b = sum(b for _, b in pairs) / total
    chance = yes_a * yes_b + (1 - yes_a) * (1 - yes_b)
    return None if chance == 1 else (observed - chance) / (1 - chance)


def repeat_summary(repeats: Sequence[Sequence[bool | None]]) -> dict[str, Any] | None:
    """Agreement of one protocol's repeated verdicts (one sequence per answer, one verdict per
    repeat; None: no verdict). Over the answers with every repeat's verdict: the mean and the
    sample standard deviation of the repeats' accuracies, the unanimous share and Fleiss' κ.
    None without repeats.

    >>> summary = repeat_summary([[True, True], [True, False], [False, False], [True, None]])
    >>> summary["answers"], summary["mean"], round(summary["std"], 3), summary["unanimous"]
    (3, 0.5, 0.236, 0.6666666666666666)
    """
    if not repeats or len(repeats[0]) < 2:
        return None
    complete = [list(verdicts) for verdicts in repeats if None not in verdicts]
    count = len(repeats[0])
    if not complete:
        return {"repeats": count, "answers": 0, "mean": None, "std": None,
                "unanimous": None, "fleiss_kappa": None}  # fmt: skip
    accuracies = [statistics.fmean(row[r] for row in complete) for r in range(count)]
    return {
        "repeats": count,
        "answers": len(complete),
        "mean": statistics.fmean(accuracies),
        "std": statistics.stdev(accuracies),
        "unanimous": statistics.fmean(len(set(row)) == 1 for row in complete),
        "fleiss_kappa": fleiss_kappa([[sum(row), count - sum(row)] for row in complete]),
    }


def first_verdicts(record: Mapping[str, Any]) -> dict[str, bool]:
    """A record's verdict per protocol, its first repeat's, where it has one: the dataset's own
    protocol (``judging``) and the others (``other_judgings``)."""
    repeated = record.get("judge_repeats") or {}
    scores = record.get("scores") or {}
    names = {}
    if (record.get("judging") or {}).get("protocol"):  # records before protocols: none
        names[record["judging"]["protocol"]] = "judge_acc"
    for protocol in record.get("other_judgings") or {}:
        names[protocol] = f"{OTHER_JUDGE_PREFIX}{protocol}"
    found = {}
    for protocol, score_name in names.items():
        if protocol in repeated:
            verdict = repeated[protocol][0]
        else:
            score = scores.get(score_name)
            verdict = None if score is None else score == 1.0
        if verdict is not None:
            found[protocol] = verdict
    return found


def protocol_agreement(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """For each pair of protocols the records were graded under (in the order first met): the
    answers both graded, raw agreement and Cohen's κ."""
    verdicts = [first_verdicts(record) for record in records]
    protocols = list(dict.fromkeys(name for found in verdicts for name in found))
    rows = []
    for a, b in itertools.combinations(protocols, 2):
        pairs = [(found[a], found[b]) for found in verdicts if a in found and b in found]
        rows.append(
            {
                "protocols": [a, b],
                "answers": len(pairs),
                "agreement": statistics.fmean(x == y for x, y in pairs) if pairs else None,
                "cohen_kappa": cohen_kappa(pairs),
            }
        )
    return rows


def judge_repeats(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """:func:`repeat_summary` per protocol of the records' ``judge_repeats``."""
    by_protocol: dict[str, list[list[bool | None]]] = {}
    for record in records:
        for protocol, verdicts in (record.get("judge_repeats") or {}).items():
            by_protocol.setdefault(protocol, []).append(list(verdicts))
    summaries = {name: repeat_summary(found) for name, found in by_protocol.items()}
    return {name: summary for name, summary in summaries.items() if summary is not None}
