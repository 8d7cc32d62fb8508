"""The method registry: what each ``conf/method/*.yaml`` is, and which grids run it.

Each method config declares, once, in a comment block at the end of its opening comment::

    # registry:
    #   role: method                # method | baseline | ablation | variant | oracle
    #   paper: esmem                # esmem | secom | hingemem | fracom | cast | none
    #   name: ES-Mem                # the display name of its class, as its paper spells it
    #   grids: [table1, table2, retrieval, ...]   # GRIDS below; [] for none

Why a comment and not a config key: a method's config node is part of a run's identity
(:func:`benchmarks.pipeline.settings.run_identity`) and Hydra's ``instantiate`` hands every key to the
constructor. A key would have to be stripped from the identity and popped before every
instantiation and option check, and since Hydra merges a config's ``defaults``, an ablation that
forgot its own ``role`` would silently inherit its method's. A comment is never loaded by Hydra:
no run id, constructor or option check can see it, and every file declares itself (a test fails
on a file without a block). The block is plain YAML once the ``# `` is stripped.

The grids that cannot call Python (Hydra sweeps in ``conf/experiment/``, ``conf/ablations.yaml``'s
methods) stay literal and ``tests/test_registry.py`` fails when one disagrees with the
declarations; the regression groups (:mod:`benchmarks.tables.regression`), the ablation table's rows
(:mod:`benchmarks.tables.ablations`), the Makefile's ``LME_RETRIEVAL_METHODS`` (``python -m
benchmarks.registry retrieval_lme``) and the report's display names
(:mod:`benchmarks.tables.report.naming`) are derived from it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

METHOD_DIR = Path(__file__).resolve().parents[1] / "conf" / "method"
ROLES = ("baseline", "method", "oracle", "ablation", "variant")
PAPERS = ("none", "esmem", "secom", "hingemem", "fracom", "cast")
#: Every grid a method config may belong to, and where its list lives.
GRIDS = {
    "table1": "conf/experiment/table1.yaml",
    "table2": "conf/experiment/table2.yaml",
    "retrieval": "conf/experiment/retrieval.yaml",
    "retrieval_lme": "Makefile (LME_RETRIEVAL_METHODS)",
    "paper": "conf/experiment/paper_locomo.yaml",
    "libraries": "conf/experiment/libraries.yaml",
    "ablations": "conf/ablations.yaml",
    "locomo_retrieval": "conf/regression.yaml",
    "locomo_qa": "conf/regression.yaml",
    "longmemeval_qa": "conf/regression.yaml",
}
MARKER = "# registry:"


@dataclass(frozen=True)
class Entry:
    """One method config's declaration."""

    config: str
    role: str
    paper: str
    name: str
    grids: tuple[str, ...]
    #: The class its ``_target_`` names (through its ``defaults``), e.g. ``ESMem``.
    class_name: str


def declaration(path: Path) -> dict:
    """The registry block of a method YAML's opening comment, as plain data."""
    lines = path.read_text(encoding="utf-8").splitlines()
    opening = []
    for line in lines:
        if not line.startswith("#"):
            break
        opening.append(line)
    if MARKER not in opening:
        raise ValueError(f"{path}: no '{MARKER}' block in its opening comment")
    body = []
    for line in opening[opening.index(MARKER) + 1 :]:
        if not line.startswith("#   "):
            break
        body.append(line[2:])
    return yaml.safe_load("\n".join(body)) or {}


def class_name(path: Path) -> str:
    """The class name of the config's ``_target_``, following its ``defaults`` to a parent."""
    config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if "_target_" in config:
        return str(config["_target_"]).rsplit(".", 1)[-1]
    for parent in config.get("defaults", []):
        if isinstance(parent, str) and parent != "_self_":
            return class_name(path.with_name(f"{parent}.yaml"))
    raise ValueError(f"{path}: no _target_, and no parent config in its defaults")


def entry(path: Path) -> Entry:
    """A method YAML's checked declaration; errors name the file."""
    declared = declaration(path)
    expected = {"role", "paper", "name", "grids"}
    if set(declared) != expected:
        raise ValueError(f"{path}: registry block needs exactly {sorted(expected)}")
    problems = []
    if declared["role"] not in ROLES:
        problems.append(f"role {declared['role']!r} not one of {ROLES}")
    if declared["paper"] not in PAPERS:
        problems.append(f"paper {declared['paper']!r} not one of {PAPERS}")
    if not isinstance(declared["name"], str) or not declared["name"]:
        problems.append("name must be a non-empty string")
    unknown = [grid for grid in declared["grids"] or () if grid not in GRIDS]
    if unknown:
        problems.append(f"unknown grids {unknown} (known: {list(GRIDS)})")
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    return Entry(
        path.stem,
        declared["role"],
        declared["paper"],
        declared["name"],
        tuple(declared["grids"] or ()),
        class_name(path),
    )


@cache
def entries(method_dir: Path = METHOD_DIR) -> tuple[Entry, ...]:
    """Every method config's entry: baselines, methods, oracles, ablations, variants; each
    role's in paper order (``PAPERS``), then by config name."""
    found = [entry(path) for path in method_dir.glob("*.yaml")]
    return tuple(
        sorted(found, key=lambda e: (ROLES.index(e.role), PAPERS.index(e.paper), e.config))
    )


def members(grid: str, method_dir: Path = METHOD_DIR) -> list[str]:
    """The method configs that belong to ``grid``, in :func:`entries`' order."""
    if grid not in GRIDS:
        raise KeyError(f"unknown grid {grid!r}: one of {list(GRIDS)}")
    return [e.config for e in entries(method_dir) if grid in e.grids]


def ablation_rows(method: str, method_dir: Path = METHOD_DIR) -> list[str]:
    """The ablation table's rows for ``method``: the method, then every other config of its
    paper in the ``ablations`` grid, by name."""
    paper = next(e.paper for e in entries(method_dir) if e.config == method)
    others = sorted(
        e.config
        for e in entries(method_dir)
        if "ablations" in e.grids and e.paper == paper and e.config != method
    )
    return [method, *others]


@cache
def display_names(method_dir: Path = METHOD_DIR) -> dict[str, str]:
    """Class name -> display name; every config of one class must declare the same name."""
    names: dict[str, str] = {}
    for e in entries(method_dir):
        if names.setdefault(e.class_name, e.name) != e.name:
            raise ValueError(
                f"{method_dir / e.config}.yaml: name {e.name!r}, but another config of "
                f"{e.class_name} declares {names[e.class_name]!r}"
            )
    return names


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.registry GRID``: the grid's members, comma-separated (a Hydra
    sweep value; the Makefile's lists)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in GRIDS:
        print(f"usage: python -m benchmarks.registry {{{','.join(GRIDS)}}}", file=sys.stderr)
        return 2
    print(",".join(members(args[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
