"""LongMemEval rankings: what a run records, how records are scored, and a scorer for anyone's.

A method returns items best first, each covering turns, and for scoring its ranking of every
turn it can rank below them (:attr:`memsys.types.Retrieval.ranking`, never shown to the reader).
A record keeps that ranking in the official corpus's ids
(:mod:`benchmarks.metrics.longmemeval_official`), closed by the turns the method's memory holds
nothing of, in conversation order (the official evaluation ranks the whole corpus): ``turn``,
the user turns ``<session_id>_<j>`` at their first mention, up to the turn before a 51st
distinct session (enough for every metric at k <= 50, session level included); ``session``,
the first 50 distinct sessions; ``complete``, whether it is such a full-depth ranking; and
``method_turns``, how many of ``turn`` the method ranked itself. A method that ranks no deeper
than its items (and every record logged before full-depth rankings) stores an incomplete one:
a metric it cannot decide (a cut-off deeper than it, or MRR with no gold in it) is left out,
so a table shows it as not computable rather than as the depth's value. Reports score the
stored rankings against the dataset, so a definition can change without rebuilding a memory.

Bring your own rankings::

    python -m benchmarks.metrics.ranking --rankings FILE.jsonl [--definition official] \\
        [--variant s|oracle] [--out SCORES.jsonl]

One line per question, ``{"question_id", "granularity": "session"|"turn", "ranked_ids"}``;
session ids as in ``haystack_session_ids``, turn ids ``<session_id>_<j>`` (j the 1-based
position of the turn in its session, assistant turns counted; those are not in the official
corpus and are dropped). It prints each level's means with 95% bootstrap intervals (questions
resampled) and with ``--out`` writes one line per question: ``{"question_id", "granularity",
"turn": {...}, "session": {...}}``, or ``{"question_id", "skipped": reason}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from benchmarks.data.errors import DataMissingError, DatasetError
from benchmarks.data.longmemeval import dataset_session_id, iter_longmemeval
from benchmarks.metrics.jsonl import InputError, read_jsonl, require
from benchmarks.metrics.longmemeval_official import (
    CUTOFFS,
    DEFINITIONS,
    GRANULARITIES,
    Corpus,
    Granularity,
    RankingError,
    SessionTurns,
    metric_names,
    score,
    session_of,
    turn_id,
)
from benchmarks.metrics.stats import bootstrap_ci
from benchmarks.render import Table
from memsys.types import Conversation, Retrieval, Turn

#: Distinct sessions a stored ranking covers: the largest cut-off.
STORED_SESSIONS = max(CUTOFFS)


def official_turn_id(turn: Turn) -> str:
    """A turn's id in LongMemEval's official corpus."""
    return turn_id(dataset_session_id(turn.session_id), turn.index)


def corpus_of(conversation: Conversation) -> Corpus:
    """The official corpora of a LongMemEval instance (a one-question conversation)."""
    sessions = [
        SessionTurns(
            dataset_session_id(session.session_id),
            tuple((turn.speaker, turn.has_answer) for turn in session.turns),
        )
        for session in conversation.sessions
    ]
    return Corpus.build(conversation.conversation_id, sessions)


@dataclass(frozen=True)
class OfficialIds:
    """One conversation's turns in the official id form: what a record's rankings are made of."""

    user_turns: Mapping[str, str]
    sessions: Mapping[str, str]

    @classmethod
    def of(cls, conversation: Conversation) -> OfficialIds:
        """``sessions`` lists every turn in conversation order (what closes a ranking)."""
        turns = conversation.turns
        return cls(
            {t.turn_id: official_turn_id(t) for t in turns if t.speaker == "user"},
            {t.turn_id: t.session_id for t in turns},
        )

    def rankings(self, retrieval: Retrieval) -> dict[str, Any]:
        """The stored ranking of ``retrieval`` (see the module docstring)."""
        ranked = [turn for turn in retrieval.ranked_turn_ids if turn in self.sessions]
        method_turns = len(ranked)
        complete = retrieval.ranking is not None
        if complete:
            listed = set(ranked)
            ranked += [turn for turn in self.sessions if turn not in listed]
        turns: list[str] = []
        covered: set[str] = set()
        by_method = 0
        for position, turn in enumerate(ranked):
            if turn not in self.user_turns:
                continue
            session = dataset_session_id(self.sessions[turn])
            if session not in covered and len(covered) == STORED_SESSIONS:
                break
            covered.add(session)
            turns.append(self.user_turns[turn])
            by_method += position < method_turns
        sessions = list(dict.fromkeys(self.sessions[turn] for turn in ranked))
        return {
            "turn": turns,
            "session": [dataset_session_id(s) for s in sessions[:STORED_SESSIONS]],
            "complete": complete,
            "method_turns": by_method,
        }


def stored_turn_ranking(record: Mapping[str, Any]) -> list[str] | None:
    """A run record's stored turn ranking; None for records logged before rankings were kept
    (their ``ranking`` held metric values under a former definition)."""
    ranking = record.get("ranking")
    turns = ranking.get("turn") if isinstance(ranking, dict) else None
    return turns if isinstance(turns, list) else None


def record_scores(record: Mapping[str, Any], corpus: Corpus) -> dict[str, dict[str, float]] | None:
    """A run record's official metrics from its stored turn ranking, each level holding only the
    metrics that ranking decides (every one where it is complete); None where the definition
    skips the question or the record stored no ranking."""
    turns = stored_turn_ranking(record)
    if corpus.skipped or turns is None:
        return None
    levels = score(corpus, "turn", turns)
    if record["ranking"].get("complete"):
        return levels
    depth = {"turn": len(turns), "session": len({session_of(turn) for turn in turns})}
    return {
        level: {
            name: value for name, value in metrics.items() if decided(name, value, depth[level])
        }
        for level, metrics in levels.items()
    }


def decided(metric: str, value: float, depth: int) -> bool:
    """Whether an incomplete ranking ``depth`` entries deep (turns, or distinct sessions at the
    session level) decides ``metric``: a cut-off no deeper than it, or an MRR whose gold it holds.

    >>> decided("recall_all@10", 0.0, 5), decided("ndcg_any@5", 0.3, 5), decided("mrr", 0.0, 50)
    (False, True, False)
    """
    if metric == "mrr":
        return value > 0
    return int(metric.rsplit("@", 1)[1]) <= depth


def load_corpora(
    variant: str, question_ids: Iterable[str], data_dir: str | Path | None = None
) -> dict[str, Corpus]:
    """The official corpora of the given LongMemEval questions (one pass over the archive)."""
    wanted = set(question_ids)
    if not wanted:
        return {}
    variant_name = cast("Any", variant)
    return {
        conversation.conversation_id: corpus_of(conversation)
        for conversation in iter_longmemeval(variant_name, data_dir, wanted)
    }


@dataclass(frozen=True)
class RankingLine:
    """One line of a rankings file."""

    line: int
    question_id: str
    granularity: Granularity
    ranked_ids: tuple[str, ...]


def read_rankings(path: Path) -> list[RankingLine]:
    """Parse a rankings file; a bad line is an :class:`InputError` naming file and line."""
    lines: list[RankingLine] = []
    seen: dict[str, int] = {}
    for number, record in read_jsonl(path):
        question_id = require(record, "question_id", path, number)
        granularity = require(record, "granularity", path, number)
        ranked = require(record, "ranked_ids", path, number)
        if not isinstance(question_id, str) or not question_id:
            raise InputError(path, number, "question_id must be a non-empty string")
        if granularity not in GRANULARITIES:
            raise InputError(path, number, f"granularity must be one of {list(GRANULARITIES)}")
        if not isinstance(ranked, list) or not all(isinstance(i, str) for i in ranked):
            raise InputError(path, number, "ranked_ids must be a list of strings")
        if question_id in seen:
            raise InputError(
                path, number, f"question {question_id!r} repeats line {seen[question_id]}"
            )
        seen[question_id] = number
        lines.append(RankingLine(number, question_id, granularity, tuple(ranked)))
    return lines


def score_lines(
    path: Path, lines: Sequence[RankingLine], corpora: Mapping[str, Corpus]
) -> list[dict[str, Any]]:
    """One output object per line (see the module docstring)."""
    out = []
    for line in lines:
        corpus = corpora.get(line.question_id)
        if corpus is None:
            raise InputError(
                path, line.line, f"question {line.question_id!r} is not in the dataset"
            )
        if corpus.skipped:
            out.append({"question_id": line.question_id, "skipped": corpus.skipped})
            continue
        try:
            levels = score(corpus, line.granularity, line.ranked_ids)
        except RankingError as error:
            raise InputError(path, line.line, str(error)) from None
        out.append({"question_id": line.question_id, "granularity": line.granularity, **levels})
    return out


def _interval(values: Sequence[float], seed: int) -> str:
    ci = bootstrap_ci(values, seed=seed)
    return f"{ci.mean:.4f} [{ci.low:.3f}, {ci.high:.3f}]"


def summary_table(scored: Sequence[Mapping[str, Any]], *, seed: int = 0) -> str:
    """Markdown: per input granularity, each metric's mean [95% CI] at each level, and n."""
    parts = []
    skipped = sum("skipped" in entry for entry in scored)
    for granularity in GRANULARITIES:
        group = [e for e in scored if e.get("granularity") == granularity]
        if not group:
            continue
        levels = [level for level in ("turn", "session") if level in group[0]]
        rows = [
            [name, *(_interval([e[level][name] for e in group], seed) for level in levels)]
            for name in metric_names()
        ]
        title = f"{granularity.capitalize()} rankings (n = {len(group)})"
        parts.append("\n".join(Table(["metric", *levels], rows, title=title).markdown_lines()))
    parts.append(f"Skipped by the definition: {skipped} question(s).")
    return "\n\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: score a rankings file under a named definition."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.metrics.ranking",
        description="Score LongMemEval rankings as the official retrieval evaluation does.",
    )
    parser.add_argument("--rankings", required=True, type=Path, help="rankings JSONL file")
    parser.add_argument("--definition", choices=DEFINITIONS, default="official")
    parser.add_argument(
        "--variant", choices=("s", "oracle"), default="s", help="LongMemEval-S or oracle"
    )
    parser.add_argument("--data-dir", default=None, help="dataset folder (default: MEMBENCH_DATA)")
    parser.add_argument("--out", type=Path, help="write one JSON line per question here")
    args = parser.parse_args(argv)
    try:
        lines = read_rankings(args.rankings)
        corpora = load_corpora(args.variant, (line.question_id for line in lines), args.data_dir)
        scored = score_lines(args.rankings, lines, corpora)
    except (InputError, DatasetError, DataMissingError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"LongMemEval-{args.variant} rankings, definition {args.definition} ({args.rankings})\n")
    print(summary_table(scored))
    if args.out:
        with args.out.open("w", encoding="utf-8") as handle:
            for entry in scored:
                handle.write(json.dumps(entry) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
