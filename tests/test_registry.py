"""The method registry (benchmarks/registry.py): every method config declares itself, and every
grid (the experiments' Hydra sweeps, the ablation table's rows, the regression groups, the Makefile's
list) is derived from the declarations."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from run_helpers import CONF, compose_config, fixture_overrides

from benchmarks import registry
from benchmarks.checks.regression import load_cases
from benchmarks.config.values import ConfigError
from benchmarks.data.paths import REPO_ROOT
from benchmarks.pipeline.run import run
from benchmarks.pipeline.settings import check_method_options, run_id, run_identity
from benchmarks.published.cells import how_measured, measured_of, read_papers
from benchmarks.runs.ablations import SPEC, load_spec, variants

#: The experiment grids: file, and the sweep key that lists the method configs.
SWEEP_GRIDS = {
    "table1": ("conf/experiment/table1.yaml", "method"),
    "table2": ("conf/experiment/table2.yaml", "method"),
    "retrieval": ("conf/experiment/retrieval.yaml", "method"),
    "paper": ("conf/experiment/paper_locomo.yaml", "paper"),
    "libraries": ("conf/experiment/libraries.yaml", "method"),
    "ablations": ("conf/experiment/ablations.yaml", "method"),
}
#: Grids a config of a role must be in (a new method that forgets its grids fails here).
REQUIRED = {
    "method": {"table1", "retrieval", "ablations", "locomo_retrieval", "locomo_qa"},
    "ablation": {"ablations"},
}


def entry_of(config: str) -> registry.Entry:
    return next(e for e in registry.entries() if e.config == config)


def sweep_value(file: str, key: str) -> str:
    """The sweep parameter ``key`` as the experiment file writes it."""
    spec = yaml.safe_load((REPO_ROOT / file).read_text())
    return str(spec["hydra"]["sweeper"]["params"][key])


def mismatches(grid: str, listed: list[str], where: str) -> list[str]:
    """Each method the registry puts in ``grid`` that ``listed`` lacks, and each listed one
    whose registry block does not name ``grid``, as a line naming the file and the method."""
    declared = registry.members(grid)
    lines = [
        f"{where}: {m} ({entry_of(m).role}) declares grid {grid} in conf/method/{m}.yaml but is "
        "missing here"
        for m in declared
        if m not in listed
    ]
    lines += [
        f"{where}: {m} is listed here but conf/method/{m}.yaml does not declare grid {grid}"
        for m in listed
        if m not in declared
    ]
    return lines


def test_every_method_config_declares_itself() -> None:
    files = sorted(p.stem for p in registry.METHOD_DIR.glob("*.yaml"))
    assert sorted(e.config for e in registry.entries()) == files
    for e in registry.entries():
        missing = REQUIRED.get(e.role, set()) - set(e.grids)
        assert not missing, f"conf/method/{e.config}.yaml ({e.role}) lacks grids {sorted(missing)}"


def test_each_paper_has_one_method_named_for_it() -> None:
    methods = [e for e in registry.entries() if e.role == "method"]
    assert sorted(e.config for e in methods) == sorted(registry.papers())
    assert all(e.paper == e.config for e in methods)
    names = {paper: p.name for paper, p in registry.papers().items()}
    assert names == {  # the headers' positions order them; each method config names its paper
        "esmem": "ES-Mem",
        "secom": "SeCom",
        "hingemem": "HingeMem",
        "fracom": "FraCom",
        "cast": "CAST",
    }
    assert list(names) == list(registry.paper_ids()[1:])


def test_the_published_headers_name_every_file_keyed_by_a_paper() -> None:
    """Each paper's facts are its published file's header: the file is found by the id in it
    (ES-Mem's id is ``esmem``, its file ``es-mem.yaml``), and how the paper measured is read
    from it for the published report."""
    papers = registry.papers()
    assert papers["esmem"].published == REPO_ROOT / "results" / "published" / "es-mem.yaml"
    assert [m.label for m in how_measured().values()] == [p.name for p in papers.values()]
    assert how_measured()["hingemem"].f1 == "f1_locomo"
    assert how_measured()["cast"].order == "rank" and how_measured()["secom"].order is None
    assert sorted(read_papers(REPO_ROOT / "results" / "published")) == sorted(papers)


@pytest.mark.parametrize("paper", list(registry.papers()))
def test_each_paper_has_one_config_in_the_paper_grid_with_its_headers_protocol(paper: str) -> None:
    """The ``paper`` group's option ``paper=<id>`` is derived (no ``conf/paper/`` file): it runs
    the one config of that paper whose block lists the ``paper`` grid, with the protocol the
    header says the paper measured, where the paper says (docs/adding_a_method.md)."""
    assert not (REPO_ROOT / "conf" / "paper").exists()
    (config,) = [e for e in registry.entries() if "paper" in e.grids and e.paper == paper]
    cfg = compose_config(["+experiment=paper_locomo", f"paper={paper}"], with_hydra=True)
    assert cfg.hydra.runtime.choices.method == config.config
    how = how_measured()[paper]
    assert cfg.adversarial == how.adversarial
    assert cfg.answer.order == (how.order or "time")  # null: the grid's own (paper_locomo.yaml)
    assert registry.paper_grid()[paper].method == config.config


def test_the_paper_grid_runs_the_papers_embedder_where_the_harness_loads_it() -> None:
    """SeCom's header names MPNet (conf/embedder/mpnet_dot.yaml loads it), ES-Mem's MiniLM (the
    default's model); CAST's and HingeMem's text-embedding-3-small and FraCom's Sentence-BERT
    have no local config, so those entries keep the default."""
    groups = {name: dict(option.groups) for name, option in registry.paper_grid().items()}
    assert groups["secom"] == {"embedder": "mpnet_dot"} and groups["esmem"] == {
        "embedder": "minilm"
    }
    assert groups["cast"] == groups["hingemem"] == groups["fracom"] == groups["mem0"] == {}
    embedders = {
        paper: compose_config(["+experiment=paper_locomo", f"paper={paper}"]).embedder.model
        for paper in ("secom", "cast")
    }
    assert embedders == {
        "secom": "sentence-transformers/multi-qa-mpnet-base-dot-v1",
        "cast": "all-MiniLM-L6-v2",
    }


def test_a_paper_with_two_configs_in_the_paper_grid_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "method"
    shutil.copytree(registry.METHOD_DIR, folder)
    path = folder / "esmem.yaml"
    path.write_text(path.read_text().replace("grids: [table1,", "grids: [paper, table1,", 1))
    with pytest.raises(
        ValueError, match=r"esmem_llm\.yaml: grid paper already runs paper 'esmem' as esmem:"
    ):
        registry.paper_grid(folder)


def write_published(folder: Path, name: str, header: str) -> None:
    (folder / name).write_text(f"# A paper.\npaper:\n{header}results:\n  - {{row: x}}\n")


def test_a_published_header_is_read_alone_and_checked(tmp_path: Path) -> None:
    write_published(tmp_path, "a-paper.yaml", "  id: apaper\n  # a note\n  position: 2\n\n")
    write_published(tmp_path, "b.yaml", "  id: bpaper\n  position: 1\n  measured: {f1: f1_set}\n")
    found = registry.published_files(tmp_path)
    assert list(found) == ["bpaper", "apaper"]  # by position, not by file name
    assert found["apaper"] == (tmp_path / "a-paper.yaml", {"id": "apaper", "position": 2})
    twin = tmp_path / "twin"
    twin.mkdir()
    write_published(twin, "a.yaml", "  id: apaper\n  position: 1\n")
    write_published(twin, "b.yaml", "  id: apaper\n  position: 2\n")
    with pytest.raises(ValueError, match=r"b\.yaml: paper\.id 'apaper' is also .*a\.yaml's"):
        registry.published_files(twin)
    write_published(twin, "b.yaml", "  id: bpaper\n  position: 1\n")
    with pytest.raises(ValueError, match=r"two published files share a paper\.position"):
        registry.published_files(twin)
    for case, (header, problem) in enumerate(
        [
            ("  position: 1\n", r"paper\.id must name the paper \(not None\)"),
            ("  id: none\n  position: 1\n", r"paper\.id must name the paper \(not 'none'\)"),
            ("  id: apaper\n  position: first\n", r"paper\.position must be an integer"),
        ]
    ):
        odd = tmp_path / f"odd{case}"
        odd.mkdir()
        write_published(odd, "x.yaml", header)
        with pytest.raises(ValueError, match=problem):
            registry.published_files(odd)
    (tmp_path / "headless").mkdir()
    (tmp_path / "headless" / "x.yaml").write_text("# no header\nresults: []\n")
    with pytest.raises(ValueError, match=r"x\.yaml: no top-level 'paper:' mapping"):
        registry.published_files(tmp_path / "headless")


def test_a_measured_block_names_every_setting_once() -> None:
    esmem = registry.papers()["esmem"]
    block = dict(esmem.header["measured"])
    assert measured_of(esmem) == how_measured()["esmem"]
    for changed, problem in [
        ({k: v for k, v in block.items() if k != "budget"}, r"needs exactly \['f1'"),
        ({**block, "adversarial": "included"}, "adversarial: include or exclude"),
        ({**block, "order": "newest"}, "order: time, rank or null"),
    ]:
        odd = registry.Paper("esmem", "ES-Mem", esmem.published, {"measured": changed})
        with pytest.raises(ValueError, match=rf"es-mem\.yaml: paper\.measured.*{problem}"):
            measured_of(odd)


def test_every_run_of_a_method_config_maps_back_to_it() -> None:
    """A run records its resolved method node, not its config's name: each config's node (at
    every reader, which ES-Mem's K follows) maps back to that config, among several of one
    class; an overridden option still maps to the config it started from."""
    for e in registry.entries():
        for reader in ("embedded", "gpt-4o-mini"):
            cfg = compose_config([f"method={e.config}", f"backbone={reader}"])
            node = OmegaConf.to_container(cfg.method, resolve=True)
            assert isinstance(node, dict)
            found = registry.entry_of(node)
            assert found is not None and found.config == e.config, (e.config, reader)
    node = OmegaConf.to_container(compose_config(["method=fracom_theta08"]).method, resolve=True)
    assert isinstance(node, dict)
    overridden = registry.entry_of({**node, "predicate_threshold": 0.6})
    assert overridden is not None and overridden.config == "fracom_theta08"
    assert registry.entry_of({"_target_": "memsys.methods.nowhere.Gone"}) is None


@pytest.mark.parametrize("grid", sorted(SWEEP_GRIDS))
def test_each_experiment_sweeps_its_grid_as_the_registry_derives_it(grid: str) -> None:
    """No experiment writes its list: each names its grid (``${registry:GRID}``), which the
    resolver turns into the registry's members (tests/test_sweeps.py: Hydra's sweeper expands
    it, and a command-line list replaces it)."""
    file, key = SWEEP_GRIDS[grid]
    assert sweep_value(file, key) == f"${{registry:{grid}}}"
    experiment = Path(file).stem
    params = compose_config([f"+experiment={experiment}"], with_hydra=True).hydra.sweeper.params
    listed = str(params[key]).split(",")
    assert listed == registry.sweep(grid) and len(listed) == len(set(listed))


def test_a_grid_mismatch_names_the_file_and_the_method() -> None:
    listed = [m for m in registry.members("table1") if m != "fracom"] + ["fracom_llm"]
    assert mismatches("table1", listed, "conf/experiment/table1.yaml") == [
        "conf/experiment/table1.yaml: fracom (method) declares grid table1 in "
        "conf/method/fracom.yaml but is missing here",
        "conf/experiment/table1.yaml: fracom_llm is listed here but conf/method/fracom_llm.yaml "
        "does not declare grid table1",
    ]


def test_ablation_spec_takes_its_methods_and_rows_from_the_registry() -> None:
    spec = load_spec()
    assert spec["methods"] == ["esmem", "secom", "hingemem", "fracom", "cast"]
    raw = yaml.safe_load(SPEC.read_text())
    assert "methods" not in raw, "conf/ablations.yaml lists no methods: the registry does"
    rows = [v.config for v in variants(spec)]
    assert sorted(rows) == sorted(registry.members("ablations"))
    for config in [*spec.get("skip", {}), *spec.get("explanations", {})]:
        assert config in rows, f"conf/ablations.yaml names {config}, not in the ablation table"
    assert not any("registry" in v.description for v in variants(spec))


def test_regression_groups_run_their_registered_methods() -> None:
    cases, _ = load_cases()
    for group in ("locomo_retrieval", "locomo_qa", "longmemeval_qa"):
        ran = [
            case.name.split("method=")[1]
            for case in cases
            if case.name.startswith(f"{group}/method=")
        ]
        where = f"conf/regression.yaml ({group})"
        assert mismatches(group, ran, where) == []


def test_makefile_takes_its_list_from_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert "LME_RETRIEVAL_METHODS ?= $(shell $(PY) -m benchmarks.registry retrieval_lme)" in (
        makefile
    )
    assert registry.main(["retrieval_lme"]) == 0
    printed = capsys.readouterr().out.strip().split(",")
    assert printed == registry.members("retrieval_lme")
    assert "secom_no_denoise" in printed and "secom" not in printed
    assert registry.main(["nope"]) == 2


def test_display_names_are_the_tables_names() -> None:
    names = registry.display_names()
    assert names["ESMem"] == "ES-Mem"
    assert names["OracleEvidence"] == "Oracle (gold evidence)"
    others = {k: v for k, v in names.items() if k not in ("ESMem", "OracleEvidence")}
    assert all(k == v for k, v in others.items()), others


def copy_method_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "method"
    shutil.copytree(registry.METHOD_DIR, folder)
    return folder


TARGET = "_target_: memsys.methods.tiny.Tiny\n"
#: A config file's text and the error that names it.
BAD_DECLARATIONS = [
    ("# A tiny method.\n", r"no top-level 'registry:' mapping"),
    # the old form, a comment, is no declaration
    (
        "# registry:\n#   role: baseline\n#   paper: none\n#   name: Tiny\n#   grids: []\n",
        r"no top-level 'registry:' mapping",
    ),
    (
        "registry:\n  about: A tiny method.\n  role: methd\n  paper: none\n  name: Tiny\n"
        "  grids: [table3]\n",
        r"role 'methd'.*unknown grids \['table3'\]",
    ),
    (
        "registry:\n  about: A tiny method. It is tiny\n  role: baseline\n  paper: none\n"
        "  name: Tiny\n  grids: []\n",
        r"about must be one sentence",
    ),
    (
        "registry:\n  about: A tiny method. It is tiny.\n  role: baseline\n  paper: none\n"
        "  name: Tiny\n  grids: []\n",
        r"about must be one sentence",
    ),
    (
        "registry:\n  role: baseline\n  paper: none\n  name: Tiny\n  grids: []\n",
        r"registry block needs exactly \['about'",
    ),
]


@pytest.mark.parametrize(("text", "error"), BAD_DECLARATIONS)
def test_a_config_without_a_block_or_with_a_bad_value_is_named(
    tmp_path: Path, text: str, error: str
) -> None:
    folder = copy_method_dir(tmp_path)
    (folder / "tiny.yaml").write_text(text + TARGET)
    with pytest.raises(ValueError, match=r"tiny\.yaml: " + error):
        registry.entries(folder)


def test_an_abbreviation_does_not_end_the_one_sentence(tmp_path: Path) -> None:
    folder = copy_method_dir(tmp_path)
    about = "A tiny method, scored as in Eq. 6 of its paper."
    (folder / "tiny.yaml").write_text(
        f"registry:\n  about: {about}\n  role: baseline\n  paper: none\n  name: Tiny\n"
        "  grids: []\n" + TARGET
    )
    (tiny,) = [found for found in registry.entries(folder) if found.config == "tiny"]
    assert tiny.about == about


def test_a_variant_declares_itself_and_inherits_no_block(tmp_path: Path) -> None:
    """Hydra merges a parent's keys into a variant (``defaults: [cast, _self_]``), its registry
    block among them; the registry reads each file's own YAML, so a variant without a block of
    its own is named, not silently given its method's role and grids."""
    folder = copy_method_dir(tmp_path)
    (folder / "cast_wide.yaml").write_text(
        "# A wider window.\ndefaults:\n  - cast\n  - _self_\nwindow: 2\n"
    )
    with pytest.raises(ValueError, match=r"cast_wide\.yaml: no top-level 'registry:' mapping"):
        registry.entries(folder)
    stated = registry.stated_options(folder / "cast_no_window.yaml")
    assert stated["window"] == 0 and stated["_target_"] == "memsys.methods.cast.CAST"
    assert registry.KEY not in stated  # the block is no option, its own or its parent's


def test_configs_of_one_class_must_agree_on_its_name(tmp_path: Path) -> None:
    folder = copy_method_dir(tmp_path)
    path = folder / "esmem_no_raw.yaml"
    path.write_text(path.read_text().replace("name: ES-Mem", "name: ESMem"))
    with pytest.raises(ValueError, match="another config of ESMem"):
        registry.display_names(folder)


def test_the_registry_block_reaches_no_run_identity_constructor_or_saved_config(
    tmp_path: Path,
) -> None:
    """What ``@hydra.main`` hands the runner holds the block (Hydra composes it into the method
    node, a variant's over its parent's); ``without_registry`` takes it out at the runner's
    entry and in ``compose_config``, so the run id, the options the constructor gets and checks,
    and the run's ``config.yaml`` (the report's view of the run) never see it."""
    variant = "turn_rag_bm25_exchange"  # defaults: [turn_rag_bm25, _self_]
    overrides = [*fixture_overrides(tmp_path / "runs", tmp_path / "cache"), f"method={variant}"]
    overrides.append("answer=none")
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        raw = compose(config_name="config", overrides=overrides)
    assert raw.method.registry.name == "TurnRAG" and raw.method.registry.role == "baseline"
    with pytest.raises(ConfigError, match=r"method\.registry"):
        check_method_options(raw.method)  # the constructor takes no such option
    composed = compose_config(overrides)
    assert registry.KEY not in composed.method
    identity = run_identity(composed)
    assert registry.KEY not in identity["method"]
    assert identity["method"]["unit"] == "exchange"  # the variant's own options stay
    summary = run(raw)  # the runner's entry: the block leaves first, so the options pass
    assert summary["questions"] > 0
    assert registry.KEY not in raw.method
    (run_dir,) = [path for path in (tmp_path / "runs").iterdir() if path.name != ".hydra"]
    assert run_dir.name == run_id(identity)
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved == identity
    found = registry.entry_of(saved["method"])  # the report maps the run back to its config
    assert found is not None and found.config == variant
