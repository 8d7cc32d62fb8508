"""``python -m benchmarks.plan``: the command line. Options (rates on top of the defaults), then
plan in a throwaway directory and write the page (``benchmarks/plan/__main__.py`` runs
:func:`main`)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from hydra.errors import HydraException

from benchmarks.data.paths import REPO_ROOT, resolve_path, shown_path
from benchmarks.pipeline.cli import CLEAR_ERRORS
from benchmarks.plan.build import make_plan
from benchmarks.plan.costs import Price, Rates, Throughput
from benchmarks.plan.grid import compose_overrides, fixed_overrides
from benchmarks.plan.render import markdown, to_json


def parse_rates(args: argparse.Namespace) -> Rates:
    """The default rates with the command line's ``--price``, ``--throughput`` and
    ``--completion-share`` on top."""
    rates = Rates()
    prices, speeds = dict(rates.prices), dict(rates.throughputs)
    shares = dict(rates.completion_shares)
    for name, (prompt, completion) in pairs(args.price, 2):
        prices[name] = Price(prompt, completion)
    for name, (completion, *prompt) in pairs(args.throughput, 1):
        default = rates.throughput(name).prompt
        speeds[name] = Throughput(prompt[0] if prompt else default, completion)
    for stage, (share,) in pairs(args.completion_share, 1):
        shares[stage] = share
    return Rates(prices, speeds, shares)


def pairs(options: Sequence[str], minimum: int) -> Iterator[tuple[str, list[float]]]:
    """``NAME=A[,B]`` options as ``(NAME, [A, B])``."""
    for option in options:
        name, _, values = option.partition("=")
        numbers = [float(v) for v in values.split(",") if v]
        if not name or len(numbers) < minimum:
            raise SystemExit(
                f"error: expected NAME={'A,B' if minimum == 2 else 'A'}, got {option!r}"
            )
        yield name, numbers


def arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.plan", description="What a sweep will cost, before it runs."
    )
    option = parser.add_argument
    option("overrides", nargs="*", help="Hydra overrides, as for benchmarks.pipeline.run -m")
    option("--conversations", type=int, help="measure on the first N, scale to all")
    option("--out", help="the page (default results/plan_<experiment>.md)")
    option("--json", help="also write the numbers behind the page to this file")
    option("--price", action="append", default=[], metavar="NAME=IN,OUT",
           help="dollars per 1M prompt, completion tokens of backbone NAME")  # fmt: skip
    option("--throughput", action="append", default=[], metavar="NAME=OUT[,IN]",
           help="completion[, prompt] tokens/s of backbone NAME")  # fmt: skip
    option("--completion-share", action="append", default=[], metavar="STAGE=F",
           help="share of max_tokens a reply of STAGE is expected to use")  # fmt: skip
    option("--no-stand-ins", action="store_true", help="run the configs' own models")
    option("--cold", action="store_true", help="do not copy the shared caches first")
    return parser.parse_args(argv)


def default_out(overrides: Sequence[str]) -> Path:
    """``results/plan_<experiment>.md`` (``results/plan.md`` without an experiment)."""
    names = [o.split("=", 1)[1] for o in overrides if o.lstrip("+").startswith("experiment=")]
    return REPO_ROOT / "results" / (f"plan_{names[0]}.md" if names else "plan.md")


def main(argv: Sequence[str] | None = None) -> int:
    """Plan in a throwaway directory (removed after), print the page and write it (and, with
    ``--json``, the numbers behind it)."""
    args = arguments(argv)
    out = Path(args.out) if args.out else default_out(args.overrides)
    work_dir = Path(tempfile.mkdtemp(prefix="memsys-plan-"))
    try:
        shared = compose_overrides(fixed_overrides(args.overrides)).cache_dir
        plan = make_plan(
            args.overrides,
            rates=parse_rates(args),
            work_dir=work_dir,
            conversations=args.conversations,
            stand_ins=not args.no_stand_ins,
            warm_from=None if args.cold else resolve_path(str(shared)),
            log=sys.stderr,
        )
    except (*CLEAR_ERRORS, HydraException) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    page = markdown(plan)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps(to_json(plan), indent=2) + "\n", encoding="utf-8")
    print(page)
    print(f"wrote {shown_path(out)}", file=sys.stderr)
    return 0
