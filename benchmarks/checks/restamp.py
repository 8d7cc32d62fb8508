"""``memsys-bench results restamp RUN_DIR...``: prove a stale run's outputs unchanged, and stamp it.

A sample of the run's records is recomputed with today's code from cached replies only and
compared field by field with the committed records; all identical stamps the run, any difference
exits 1. The procedure: docs/tables.md, "Stale rows and re-stamps"."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from benchmarks.config.compose import CONF, compose_config
from benchmarks.config.values import ConfigError
from benchmarks.metrics.ranking import OfficialIds
from benchmarks.pipeline.harness import answer_batch, build_harness, get_memory, turn_texts_of
from benchmarks.pipeline.provenance import code_version, method_source, recorded_method_source
from benchmarks.pipeline.run import conversations_source
from benchmarks.pipeline.settings import run_id, run_identity, validate
from benchmarks.pipeline.subsets import select
from benchmarks.runs.folders import own_records, read_records
from benchmarks.runs.restamps import RESTAMPS_FILE, carried_source, read_restamps

#: Record fields that differ between two computations of the same record.
VOLATILE = frozenset({"latency_s", "cached", "asked"})
#: Groups whose node is chosen by a file of ``conf/<group>/`` (the one that agrees with the run on
#: these keys) before the run's values go on top.
GROUPS = {"dataset": ("name", "variant"), "subset": ("name",), "answer": ("template",)}


class RestampError(RuntimeError):
    """The run cannot be checked (its config does not rebuild, a reply is not cached)."""


def group_choice(group: str, node: dict[str, Any]) -> str:
    """The file of ``conf/<group>/`` that agrees with ``node`` on the group's keys."""
    keys = GROUPS[group]
    for path in sorted((CONF / group).glob("*.yaml")):
        values = yaml.safe_load(path.read_text()) or {}
        if all(values.get(key) == node.get(key) for key in keys):
            return path.stem
    raise RestampError(f"no conf/{group}/ file matches the run's {group} {node}")


def leaves(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every ``(dotted key, value)`` of a nested mapping's scalars and lists."""
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from leaves(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, node


def rebuilt_config(run_dir: Path, locations: Sequence[str]) -> DictConfig:
    """The run's config as a command line would compose it: group files chosen to match its
    ``config.yaml``, every value of which is then set; its run id must be the folder's name."""
    identity = yaml.safe_load((run_dir / "config.yaml").read_text())
    choices = [f"{group}={group_choice(group, identity[group])}" for group in GROUPS]
    cfg = compose_config([*choices, *locations])
    OmegaConf.set_struct(cfg, False)
    cfg.method = identity["method"]
    for key, value in leaves({k: v for k, v in identity.items() if k != "method"}):
        if key != "judge.prompt_versions" and not key.startswith("judge.prompt_versions."):
            OmegaConf.update(cfg, key, value, force_add=True)
    rebuilt = run_id(run_identity(cfg))
    if rebuilt != run_dir.name:
        raise RestampError(
            f"{run_dir}: its config.yaml rebuilds to run {rebuilt}, not {run_dir.name}: the "
            "run's identity cannot be reproduced from it (rebuild the run instead)"
        )
    return cfg


def sample(records: Sequence[dict[str, Any]], questions: int, seed: int) -> dict[str, list[str]]:
    """Up to ``questions`` question ids, spread round-robin over the conversations in a seeded
    order (a question or two from each of several conversations rather than many of one)."""
    by_conversation: dict[str, list[str]] = {}
    for record in records:
        by_conversation.setdefault(record["conversation_id"], []).append(record["question_id"])

    def shuffled(key: str) -> str:
        return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()

    order = sorted(by_conversation, key=shuffled)
    queues = {c: sorted(by_conversation[c], key=shuffled) for c in order}
    chosen: dict[str, list[str]] = {}
    while sum(map(len, chosen.values())) < questions and any(queues.values()):
        for conversation in order:
            if queues[conversation] and sum(map(len, chosen.values())) < questions:
                chosen.setdefault(conversation, []).append(queues[conversation].pop(0))
    return chosen


def differences(committed: Any, now: Any, path: str = "") -> Iterator[str]:
    """The keys where a recomputed record differs from the committed one (volatile ones and a
    ``context`` the committed record lacks apart)."""
    if isinstance(committed, dict) and isinstance(now, dict):
        for key in sorted(set(committed) | set(now)):
            if key in VOLATILE or (key == "context" and key not in committed and not path):
                continue
            where = f"{path}.{key}" if path else key
            if key not in committed or key not in now:
                yield f"{where}: only in the {'recomputed' if key in now else 'committed'} record"
            else:
                yield from differences(committed[key], now[key], where)
    elif committed != now:
        yield f"{path}: committed {str(committed)[:80]!r}, now {str(now)[:80]!r}"


def recompute(cfg: DictConfig, chosen: dict[str, list[str]], work: Path) -> list[dict[str, Any]]:
    """The chosen questions' records as today's code computes them."""
    settings = validate(cfg)
    harness = build_harness(settings, work)
    records = []
    try:
        wanted = set(chosen)
        source = conversations_source(settings, settings.paths.data_dir)
        for conversation in select(source, settings.subset):
            if conversation.conversation_id not in wanted:
                continue
            ids = set(chosen[conversation.conversation_id])
            questions = [q for q in conversation.questions if q.question_id in ids]
            official = OfficialIds.of(conversation) if settings.spec.longmemeval_scores else None
            memory = get_memory(harness, conversation).memory
            texts = turn_texts_of(conversation)
            records += answer_batch(harness, memory, questions, official, texts)
    finally:
        harness.close()
    return records


def restamp(
    run_dir: Path,
    *,
    questions: int,
    seed: int,
    cache_dir: Path,
    data_dir: str | None = None,
    llm_replies: Path | None = None,
) -> list[str]:
    """Check ``run_dir`` and stamp it when its sample recomputes identical; the differences
    (none: stamped, or nothing to do)."""
    invocations = read_records(run_dir / "invocations.jsonl")
    recorded = recorded_method_source(invocations)
    identity = yaml.safe_load((run_dir / "config.yaml").read_text())
    now = method_source(identity["method"]["_target_"])
    if recorded is None or now is None:
        raise RestampError(f"{run_dir}: no method fingerprint recorded: nothing to carry")
    carried = carried_source(recorded, read_restamps(run_dir))[0]
    if carried == now:
        print(f"{run_dir.name}: fresh (fingerprint {now}); nothing to do")
        return []
    committed = {record["question_id"]: record for record in own_records(run_dir)}
    chosen = sample(list(committed.values()), questions, seed)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix="restamp-") as work:
        mode = ["llm_cache_mode=replay"]
        if llm_replies is not None:  # a table answered from shipped replies (Table 1's)
            mode = ["llm_cache_mode=recorded", f"llm_replies={llm_replies.resolve()}"]
        locations = [f"cache_dir={cache_dir}", f"results_dir={work}", "progress=false",
                     "workers=1", *mode]  # fmt: skip
        if data_dir is not None:
            locations.append(f"data_dir={data_dir}")
        try:
            cfg = rebuilt_config(run_dir, locations)
            recomputed = recompute(cfg, chosen, Path(work))
        except ConfigError as error:
            raise RestampError(f"{run_dir}: {error}") from error
    found = [
        f"{record['question_id']}: {difference}"
        for record in recomputed
        for difference in differences(committed[record["question_id"]], record)
    ]
    if not found:
        stamp = {
            "recorded": carried,
            "now": now,
            "questions": len(recomputed),
            "conversations": len(chosen),
            "question_ids": sorted(record["question_id"] for record in recomputed),
            "code_version": code_version(),
            "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        with (run_dir / RESTAMPS_FILE).open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(stamp, sort_keys=True) + "\n")
        print(f"{run_dir.name}: {len(recomputed)} records recomputed identical; stamped "
              f"{stamp['recorded']} → {now}")  # fmt: skip
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="memsys-bench results restamp",
        description="Recompute a sample of each run's records; stamp the run fresh when all are "
        "identical (exit 1 on any difference).",
    )
    parser.add_argument("runs", nargs="+", type=Path, help="run folders")
    parser.add_argument("--questions", type=int, default=6, help="records recomputed per run")
    parser.add_argument("--seed", type=int, default=0, help="which records (a seeded choice)")
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache"), help="the caches")
    parser.add_argument("--data-dir", help="the datasets (default: the runner's data_dir)")
    parser.add_argument(
        "--llm-replies",
        type=Path,
        help="answer from these recorded replies (llm_cache_mode=recorded: a reply not there is "
        "asked live, and then likely differs), e.g. results/table1_replies.jsonl.gz",
    )
    args = parser.parse_args(argv)
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    failed = 0
    for run_dir in args.runs:
        try:
            found = restamp(run_dir, questions=args.questions, seed=args.seed,
                            cache_dir=args.cache_dir.resolve(), data_dir=args.data_dir,
                            llm_replies=args.llm_replies)  # fmt: skip
        except (RestampError, OSError) as error:
            print(f"error: {error}", file=sys.stderr)
            failed += 1
            continue
        if found:
            failed += 1
            print(f"{run_dir.name}: {len(found)} difference(s); not stamped:", file=sys.stderr)
            for line in found[:20]:
                print(f"  {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
