"""The method registry: what each ``conf/method/*.yaml`` is, and which grids run it.

Each method config declares what it is once, in a top-level ``registry:`` block
(docs/adding_a_method.md, section 2), read from the file's own YAML (:func:`declaration`, so a
variant does not inherit it) and taken out of every composed config before anything reads it,
so no run id sees it. Every grid and the papers' list are derived from the blocks and the
``paper:`` headers of ``results/published/*.yaml``, never written as lists."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
METHOD_DIR = ROOT / "conf" / "method"
#: Each paper's published numbers, one file a paper, its header the paper's facts.
PUBLISHED_DIR = ROOT / "results" / "published"
ROLES = ("baseline", "method", "oracle", "ablation", "variant")


#: The ``paper:`` of a config that implements no paper's method (baselines, libraries, oracles).
NO_PAPER = "none"
#: The top-level key of a published file's header (:func:`published_header`).
HEADER = "paper:"
#: libyaml's safe loader where PyYAML was built with it (ten times faster), else PyYAML's own.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Paper:
    """A paper whose method the harness implements; its facts come from its published file's
    ``paper:`` header (:func:`published_header`) and its name from its method config's block."""

    #: The header's ``id``: also its method config's, ``paper`` option's and package's name.
    id: str
    #: The method's name as the paper spells it: its ``role: method`` config's ``name``.
    name: str
    #: Its published numbers, ``results/published/<any name>.yaml`` (ES-Mem's is ``es-mem.yaml``).
    published: Path
    #: The file's ``paper:`` header, as plain data.
    header: Mapping[str, Any]


def published_header(path: Path) -> dict[str, Any]:
    """The ``paper:`` node of a published file, parsed alone (the files hold thousands of cells; a
    registry read needs only headers)."""
    lines: list[str] = []
    with path.open(encoding="utf-8") as text:
        for line in text:
            if lines and line[:1] not in (" ", "#", "\n"):
                break
            if lines or line.startswith(HEADER):
                lines.append(line)
    header = (yaml.load("".join(lines), Loader=SAFE_LOADER) or {}).get("paper") if lines else None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: no top-level '{HEADER}' mapping")
    return header


def published_files(directory: Path = PUBLISHED_DIR) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Paper id -> (published file, its header) for every ``*.yaml`` in ``directory``, in the
    headers' ``position`` order; errors name the file."""
    return dict(_published_files(directory))


@cache
def _published_files(directory: Path) -> tuple[tuple[str, tuple[Path, dict[str, Any]]], ...]:
    found: dict[str, tuple[Path, dict[str, Any]]] = {}
    for path in sorted(directory.glob("*.yaml")):
        header = published_header(path)
        paper, position = header.get("id"), header.get("position")
        if not isinstance(paper, str) or not paper or paper == NO_PAPER:
            raise ValueError(f"{path}: paper.id must name the paper (not {paper!r})")
        if isinstance(position, bool) or not isinstance(position, int):
            raise ValueError(f"{path}: paper.position must be an integer, not {position!r}")
        if paper in found:
            raise ValueError(f"{path}: paper.id {paper!r} is also {found[paper][0]}'s")
        found[paper] = (path, header)
    positions = [header["position"] for _, header in found.values()]
    if len(set(positions)) != len(positions):
        raise ValueError(f"{directory}: two published files share a paper.position {positions}")
    return tuple(sorted(found.items(), key=lambda item: item[1][1]["position"]))


def paper_ids() -> tuple[str, ...]:
    """What a registry block's ``paper:`` may say, in the order entries are sorted:
    :data:`NO_PAPER`, then every published file's id by position."""
    return (NO_PAPER, *published_files())


def papers(method_dir: Path | None = None) -> dict[str, Paper]:
    """Every paper, by id, in the order the tables list them; each must have one
    ``role: method`` config (in ``method_dir``, by default :data:`METHOD_DIR`)."""
    return _papers(method_dir or METHOD_DIR)


@cache
def _papers(method_dir: Path) -> dict[str, Paper]:
    names = {e.paper: e.name for e in entries(method_dir) if e.role == "method"}
    found = {}
    for paper, (path, header) in published_files().items():
        if paper not in names:
            raise ValueError(
                f"{path}: paper {paper!r} has no 'role: method' config in {method_dir}"
            )
        found[paper] = Paper(paper, names[paper], path, header)
    return found


#: Every grid a method config may belong to, and where it is swept or read.
GRIDS = {
    "table1": "conf/experiment/table1.yaml (${registry:table1})",
    "table2": "conf/experiment/table2.yaml (${registry:table2})",
    "retrieval": "conf/experiment/retrieval.yaml (${registry:retrieval})",
    "retrieval_lme": "Makefile (LME_RETRIEVAL_METHODS)",
    "paper": "conf/experiment/paper_{locomo,longmemeval}.yaml (${registry:paper})",
    "libraries": "conf/experiment/libraries.yaml (${registry:libraries})",
    "ablations": "conf/experiment/ablations.yaml (${registry:ablations})",
    "locomo_retrieval": "conf/regression.yaml",
    "locomo_qa": "conf/regression.yaml",
    "longmemeval_qa": "conf/regression.yaml",
}
#: The top-level key of a method config's registry block (:func:`declaration`).
KEY = "registry"
#: What a registry block states, each key once.
DECLARED = ("about", "role", "paper", "name", "grids")


@dataclass(frozen=True)
class Entry:
    """One method config's declaration."""

    config: str
    #: One sentence: what the config is (the ablation table's description column quotes it).
    about: str
    role: str
    paper: str
    name: str
    grids: tuple[str, ...]
    #: The class its ``_target_`` names (through its ``defaults``), e.g. ``ESMem``.
    class_name: str
    #: Its ``_target_`` in full, e.g. ``memsys.methods.esmem.ESMem``.
    target: str


def declaration(path: Path) -> dict[str, Any]:
    """The registry block of a method YAML, as plain data: the file's own ``registry:``
    mapping, never one merged in from the parent configs its ``defaults`` name."""
    config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    declared = config.get(KEY)
    if not isinstance(declared, dict):
        raise ValueError(
            f"{path}: no top-level '{KEY}:' mapping of its own (what the config is and which "
            f"grids run it: {', '.join(DECLARED)})"
        )
    return declared


def target(path: Path) -> str:
    """The config's ``_target_``, following its ``defaults`` to a parent."""
    target = stated_options(path).get("_target_")
    if target is None:
        raise ValueError(f"{path}: no _target_, and no parent config in its defaults")
    return str(target)


def class_name(path: Path) -> str:
    """The class name of the config's ``_target_``, following its ``defaults`` to a parent."""
    return target(path).rsplit(".", 1)[-1]


@cache
def stated_options(path: Path) -> dict[str, Any]:
    """What a method YAML states, ``_target_`` included, merged over the parent configs its
    ``defaults`` name as Hydra merges them (config groups' contributions and the registry block left
    out)."""
    config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    own = {key: value for key, value in config.items() if key not in ("defaults", KEY)}
    defaults = list(config.get("defaults", []))
    if "_self_" not in defaults:
        defaults.append("_self_")
    merged: dict[str, Any] = {}
    for parent in defaults:
        if parent == "_self_":
            merged = _merged(merged, own)
        elif isinstance(parent, str):
            merged = _merged(merged, stated_options(path.with_name(f"{parent}.yaml")))
    return merged


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged into ``base``, mappings key by key."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


#: Where one sentence ends and another begins ("Eq. 6" and "e.g. a" do not).
SENTENCE_BREAK = re.compile(r"\. [A-Z]")


def entry(path: Path) -> Entry:
    """A method YAML's checked declaration; errors name the file."""
    declared = declaration(path)
    if set(declared) != set(DECLARED):
        raise ValueError(f"{path}: registry block needs exactly {sorted(DECLARED)}")
    problems = []
    about = declared["about"]
    if not isinstance(about, str) or not about.endswith(".") or SENTENCE_BREAK.search(about):
        problems.append(f"about must be one sentence ending in '.', not {about!r}")
    if declared["role"] not in ROLES:
        problems.append(f"role {declared['role']!r} not one of {ROLES}")
    if declared["paper"] not in paper_ids():
        problems.append(f"paper {declared['paper']!r} not one of {paper_ids()}")
    if not isinstance(declared["name"], str) or not declared["name"]:
        problems.append("name must be a non-empty string")
    unknown = [grid for grid in declared["grids"] or () if grid not in GRIDS]
    if unknown:
        problems.append(f"unknown grids {unknown} (known: {list(GRIDS)})")
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))
    return Entry(
        path.stem,
        declared["about"],
        declared["role"],
        declared["paper"],
        declared["name"],
        tuple(declared["grids"] or ()),
        class_name(path),
        target(path),
    )


def entries(method_dir: Path | None = None) -> tuple[Entry, ...]:
    """Every method config's entry in ``method_dir`` (default :data:`METHOD_DIR`): by role, each
    role's in paper order, then by config name."""
    return _entries(method_dir or METHOD_DIR)


@cache
def _entries(method_dir: Path) -> tuple[Entry, ...]:
    found = [entry(path) for path in method_dir.glob("*.yaml")]
    order = paper_ids()
    return tuple(sorted(found, key=lambda e: (ROLES.index(e.role), order.index(e.paper), e.config)))


def members(grid: str, method_dir: Path | None = None) -> list[str]:
    """The method configs that belong to ``grid``, in :func:`entries`' order."""
    if grid not in GRIDS:
        raise KeyError(f"unknown grid {grid!r}: one of {list(GRIDS)}")
    return [e.config for e in entries(method_dir) if grid in e.grids]


#: The grid whose entries are options of the ``paper`` config group (:func:`paper_grid`).
PAPER_GRID = "paper"
#: Where the embedder configs live: a paper grid entry runs its paper's embedder where one loads it.
EMBEDDER_DIR = ROOT / "conf" / "embedder"


@dataclass(frozen=True)
class PaperGridOption:
    """One option of the ``paper`` config group the paper grids sweep, derived rather than written
    (:mod:`benchmarks.config.compose` registers each as a Hydra overlay before anything
    composes)."""

    #: The sweep value: the paper's id for a paper's config, else the config's own name.
    name: str
    #: The ``conf/method`` config it runs (``esmem_llm``).
    method: str
    #: Further config-group choices: the paper's embedder where a ``conf/embedder`` config loads it.
    groups: Mapping[str, str]
    #: The run-level keys the paper states (``adversarial``, ``answer.order``).
    protocol: Mapping[str, Any]


def paper_grid(method_dir: Path | None = None) -> dict[str, PaperGridOption]:
    """The ``paper`` grid's options by sweep value: the baselines, then the papers in their order
    (one config each)."""
    options: dict[str, PaperGridOption] = {}
    order = paper_ids()
    in_grid = [e for e in entries(method_dir) if PAPER_GRID in e.grids]
    for e in sorted(in_grid, key=lambda e: order.index(e.paper)):  # stable: entries' order
        option = _paper_grid_option(e)
        if option.name in options:
            raise ValueError(
                f"{(method_dir or METHOD_DIR) / e.config}.yaml: grid {PAPER_GRID} already runs "
                f"paper {option.name!r} as {options[option.name].method}: one config a paper"
            )
        options[option.name] = option
    return options


def _paper_grid_option(e: Entry) -> PaperGridOption:
    if e.paper == NO_PAPER:
        return PaperGridOption(e.config, e.config, {}, {})
    measured = papers()[e.paper].header.get("measured") or {}
    protocol: dict[str, Any] = {"adversarial": measured.get("adversarial")}
    if measured.get("order") is not None:
        protocol["answer"] = {"order": measured["order"]}
    embedder = embedder_loading(str(measured.get("embedder")))
    return PaperGridOption(e.paper, e.config, {"embedder": embedder} if embedder else {}, protocol)


def embedder_loading(model: str) -> str | None:
    """The ``conf/embedder`` config whose ``model`` is ``model`` (a Hub id matches by its last
    part: ``sentence-transformers/multi-qa-mpnet-base-dot-v1``), or None."""
    for path in sorted(EMBEDDER_DIR.glob("*.yaml")):
        loaded = str((yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("model", ""))
        if model in (loaded, loaded.rsplit("/", 1)[-1]):
            return path.stem
    return None


def sweep(grid: str) -> list[str]:
    """A grid's sweep values, ``${registry:GRID}``: the option names of the ``paper`` grid
    (:func:`paper_grid`), the method configs of every other (:func:`members`)."""
    return list(paper_grid()) if grid == PAPER_GRID else members(grid)


def ablation_rows(method: str, method_dir: Path | None = None) -> list[str]:
    """The ablation table's rows for ``method``: the method, then every other config of its
    paper in the ``ablations`` grid, by name."""
    paper = next(e.paper for e in entries(method_dir) if e.config == method)
    others = sorted(
        e.config
        for e in entries(method_dir)
        if "ablations" in e.grids and e.paper == paper and e.config != method
    )
    return [method, *others]


def display_names(method_dir: Path | None = None) -> dict[str, str]:
    """Class name -> display name; every config of one class must declare the same name."""
    return _display_names(method_dir or METHOD_DIR)


@cache
def _display_names(method_dir: Path) -> dict[str, str]:
    names: dict[str, str] = {}
    for e in entries(method_dir):
        if names.setdefault(e.class_name, e.name) != e.name:
            raise ValueError(
                f"{method_dir / e.config}.yaml: name {e.name!r}, but another config of "
                f"{e.class_name} declares {names[e.class_name]!r}"
            )
    return names


def entry_of(method: Mapping[str, Any], method_dir: Path | None = None) -> Entry | None:
    """The config a run's ``method`` node came from: among the configs of its ``_target_``, the one
    whose stated options the node contradicts least, then agrees with most, then the first in
    :func:`entries`' order; None for a class no config names. So a run that overrode an option
    keeps its config's role, and several configs of one class each keep theirs."""
    folder = method_dir or METHOD_DIR
    named = str(method.get("_target_", ""))
    candidates = [e for e in entries(folder) if e.target == named]
    if not candidates:
        return None

    def fit(candidate: Entry) -> tuple[int, int]:
        contradicted, agreed = _fit(stated_options(folder / f"{candidate.config}.yaml"), method)
        return contradicted, -agreed

    return min(candidates, key=fit)  # min keeps the first of equals: entries' order


def _fit(stated: Mapping[str, Any], node: Mapping[str, Any]) -> tuple[int, int]:
    """How many of the ``stated`` leaf options ``node`` contradicts and agrees with (a missing leaf
    or an interpolation counts as neither)."""
    contradicted = agreed = 0
    for key, value in stated.items():
        if key not in node:
            continue
        if isinstance(value, Mapping) and isinstance(node[key], Mapping):
            inner = _fit(value, node[key])
            contradicted, agreed = contradicted + inner[0], agreed + inner[1]
        elif isinstance(value, str) and "${" in value:
            continue
        elif _same(node[key], value):
            agreed += 1
        else:
            contradicted += 1
    return contradicted, agreed


def _same(one: Any, other: Any) -> bool:
    """Equal values, a boolean only to a boolean (``True == 1`` in Python, not in a config)."""
    if isinstance(one, bool) or isinstance(other, bool):
        return one is other
    return bool(one == other)


def role_of(method: Mapping[str, Any], method_dir: Path | None = None) -> str | None:
    """The declared role of the config a run's ``method`` node came from (:func:`entry_of`);
    None for a class no config names."""
    found = entry_of(method, method_dir)
    return None if found is None else found.role


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.registry GRID``: the grid's members, comma-separated (a Hydra
    sweep value; the Makefile's lists)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in GRIDS:
        print(f"usage: python -m benchmarks.registry {{{','.join(GRIDS)}}}", file=sys.stderr)
        return 2
    print(",".join(sweep(args[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
