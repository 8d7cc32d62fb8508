"""Where a set of runs spent their time: construction, LLM prompt processing and generation, rest.

Reads each run's ``metrics.json`` (wall time and construction seconds of its invocations) and
its ledger ``llm_calls.jsonl`` (one line per LLM call: stage, prompt and completion tokens,
latency). Only calls that reached the model count (cache hits cost nothing). The split of a
call's latency between prompt processing and generation is not logged, so it is estimated by a
least-squares fit over all calls, ``latency = prompt_tokens / P + completion_tokens / G``: P and
G are printed (tokens per second) with the share of LLM time each explains. "Other" is wall time
minus construction and the LLM time outside it (construction seconds already hold the calls of
stage ``construction``): loading, retrieval, scoring, the report of each run.

    .venv/bin/python scripts/profile_runs.py results/runs/593a7fae2295 results/runs/616418d50f62 ...
    .venv/bin/python scripts/profile_runs.py --since 2026-11-25T22:29 results/runs
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np


def run_dirs(paths: list[Path], since: str | None) -> list[Path]:
    """The run folders named, or found one level under a folder; ``since`` keeps the runs whose
    first invocation started at or after that ISO time."""
    found = []
    for path in paths:
        candidates = [path] if (path / "metrics.json").exists() else sorted(path.iterdir())
        found += [c for c in candidates if (c / "metrics.json").exists()]
    if since:
        found = [d for d in found if first_start(d) >= since]
    return found


def first_start(run_dir: Path) -> str:
    lines = (run_dir / "invocations.jsonl").read_text().splitlines()
    return json.loads(lines[0]).get("started", "") if lines else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="run folders, or a folder of runs")
    parser.add_argument("--since", help="only runs started at or after this ISO time")
    args = parser.parse_args()
    dirs = run_dirs(args.paths, args.since)
    if not dirs:
        raise SystemExit("no runs found")
    wall = construction = 0.0
    stages: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0, 0.0])
    rows = []
    for run_dir in dirs:
        invocation = json.loads((run_dir / "metrics.json").read_text())["invocations"]
        wall += invocation["wall_s"]
        construction += invocation["construction_s"]
        for line in (run_dir / "llm_calls.jsonl").read_text().splitlines():
            call = json.loads(line)
            if "latency_s" not in call or call.get("cached") or not call.get("ok", True):
                continue
            totals = stages[call["stage"]]
            totals[0] += 1
            totals[1] += call["prompt_tokens"]
            totals[2] += call["completion_tokens"]
            totals[3] += call["latency_s"]
            rows.append((call["prompt_tokens"], call["completion_tokens"], call["latency_s"]))
    llm = sum(t[3] for t in stages.values())
    print(
        f"{len(dirs)} runs: wall {wall:.0f} s, construction {construction:.0f} s, LLM {llm:.0f} s"
    )
    for stage, (calls, prompt, completion, seconds) in sorted(stages.items()):
        print(
            f"  {stage}: {calls} calls, {prompt} prompt + {completion} completion tokens, "
            f"{seconds:.0f} s"
        )
    if len(rows) >= 2:
        tokens = np.array([[p, c] for p, c, _ in rows], dtype=float)
        latency = np.array([s for *_, s in rows])
        (per_prompt, per_completion), *_ = np.linalg.lstsq(tokens, latency, rcond=None)
        prompt_s, completion_s = (
            tokens[:, 0].sum() * per_prompt,
            tokens[:, 1].sum() * per_completion,
        )
        print(
            f"  fit: prompt processing {1 / per_prompt:.0f} tokens/s ({prompt_s:.0f} s), "
            f"generation {1 / per_completion:.0f} tokens/s ({completion_s:.0f} s)"
        )
    other = wall - construction - (llm - stages.get("construction", [0, 0, 0, 0.0])[3])
    print(f"other (loading, retrieval, scoring, reports): {other:.0f} s")


if __name__ == "__main__":
    main()
