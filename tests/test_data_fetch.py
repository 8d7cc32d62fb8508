"""``make data`` against a local mirror: real downloads over HTTP on 127.0.0.1, real checksums."""

from __future__ import annotations

import functools
import json
import lzma
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from benchmarks.data import fetch, sources

#: What Table 1 reads: LoCoMo with its audit, and the evaluators' files its judge protocols quote.
TABLE1_DATA = ("locomo/", "evaluators/")


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    root = tmp_path / "mirror"
    root.mkdir()
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.RequestHandlerClass.log_message = lambda *args: None  # type: ignore[method-assign]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _publish(root: Path, remote: str, data: bytes) -> None:
    target = root / remote
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def test_the_real_data_dir_verifies(data_dir: Path) -> None:
    outcome = fetch.fetch_all(data_dir, "http://127.0.0.1:9")  # nothing is downloaded
    assert set(outcome.values()) == {"verified"}
    assert len(outcome) == len(fetch.read_checksums(fetch.CHECKSUMS))


def test_download_verifies_and_places_the_file(mirror, tmp_path: Path, data_dir: Path) -> None:
    root, base = mirror
    _publish(
        root,
        f"{sources.LOCOMO}/data/locomo10.json",
        (data_dir / "locomo/locomo10.json").read_bytes(),
    )
    target = tmp_path / "data"
    assert fetch.fetch_all(target, base, ["locomo/locomo10"]) == {
        "locomo/locomo10.json": "downloaded"
    }
    assert (
        fetch.sha256_file(target / "locomo/locomo10.json")
        == fetch.read_checksums(fetch.CHECKSUMS)["locomo/locomo10.json"]
    )
    assert fetch.fetch_all(target, base, ["locomo/locomo10"]) == {
        "locomo/locomo10.json": "verified"
    }


def test_tampered_download_is_rejected_and_not_written(mirror, tmp_path: Path) -> None:
    root, base = mirror
    _publish(root, f"{sources.LOCOMO}/data/locomo10.json", b"[]")
    target = tmp_path / "data"
    (status,) = fetch.fetch_all(target, base, ["locomo/locomo10"]).values()
    assert status.startswith("FAILED") and "does not match its sha256" in status
    assert not (target / "locomo").exists() or not any((target / "locomo").iterdir())


def test_unreachable_mirror_names_the_url(tmp_path: Path) -> None:
    (status,) = fetch.fetch_all(tmp_path, "http://127.0.0.1:9", ["locomo/locomo10"]).values()
    assert "could not download http://127.0.0.1:9/" in status


def test_reconstructed_item_is_rebuilt_exactly(mirror, tmp_path: Path, data_dir: Path) -> None:
    root, base = mirror
    item = json.loads(
        lzma.decompress((data_dir / "longmemeval/62_7e00a6cb.reconstructed.json.xz").read_bytes())
    )
    item["model_annotations"] = {"added": "by the verifying repository"}
    _publish(root, sources.LONGMEMEVAL_RECONSTRUCTED, json.dumps(item, indent=2).encode())
    target = tmp_path / "data"
    outcome = fetch.fetch_all(target, base, ["longmemeval/62_7e00a6cb"])
    assert outcome == {
        "longmemeval/62_7e00a6cb.reconstructed.json.xz": "downloaded and reconstructed"
    }


@pytest.mark.slow
def test_longmemeval_archive_is_packed_from_verified_members(
    mirror, tmp_path: Path, data_dir: Path
) -> None:
    import tarfile

    from benchmarks.data import iter_longmemeval

    root, base = mirror
    with tarfile.open(data_dir / "longmemeval/longmemeval_oracle_lme_jsons.tar.xz", "r:xz") as tar:
        for member in tar.getmembers():
            if member.isfile():
                _publish(
                    root,
                    f"{sources.LONGMEMEVAL_MEMBERS}/{Path(member.name).name}",
                    tar.extractfile(member).read(),
                )
    target = tmp_path / "data"
    prefix = ["longmemeval/longmemeval_oracle"]
    assert set(fetch.fetch_all(target, base, prefix).values()) == {"downloaded and packed"}
    assert set(fetch.fetch_all(target, base, prefix).values()) == {"verified"}
    assert sum(1 for _ in iter_longmemeval("oracle", target)) == 500


def test_evaluator_files_come_from_their_pinned_commits(
    mirror, tmp_path: Path, data_dir: Path
) -> None:
    """The evaluators' source files (the judge protocols' prompts) are fetched like the
    datasets, from the repository, commit and path the data folder's README pins, and verified
    against the sha256 it lists."""
    readme = (data_dir / "evaluators" / "README.md").read_text()
    pinned = {}
    for line in readme.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 6 and cells[0].endswith(".py"):
            local, repository, commit, path, _, digest = cells
            pinned[f"evaluators/{local}"] = (f"{repository}/{commit}/{path.split(' (')[0]}", digest)
    checksums = fetch.read_checksums(fetch.CHECKSUMS)
    assert pinned == {
        source.local: (source.remote, checksums[source.local]) for source in sources.EVALUATOR_FILES
    }
    root, base = mirror
    for source in sources.EVALUATOR_FILES:
        _publish(root, source.remote, (data_dir / source.local).read_bytes())
    outcome = fetch.fetch_all(tmp_path / "data", base, ["evaluators/"])
    assert outcome == {source.local: "downloaded" for source in sources.EVALUATOR_FILES}


def test_a_fresh_machine_gets_what_table1_reads_through_the_console(
    mirror, tmp_path: Path, data_dir: Path
) -> None:
    """``make setup``'s last step, ``memsys-bench data fetch``, on a machine with no data folder:
    LoCoMo, its audit and the evaluators' files are downloaded over HTTP into the folder's layout
    and verified; a second fetch keeps them (nothing downloaded: the mirror is gone by then)."""
    from benchmarks.console import main

    root, base = mirror
    wanted = [source for source in sources.PLAIN_FILES if source.local.startswith(TABLE1_DATA)]
    for source in wanted:
        _publish(root, source.remote, (data_dir / source.local).read_bytes())
    target = tmp_path / "fresh" / "data"
    only = [argument for prefix in TABLE1_DATA for argument in ("--only", prefix)]
    fetch_args = ["data", "fetch", "--data-dir", str(target), *only]
    assert main([*fetch_args, "--mirror", base]) == 0
    checksums = fetch.read_checksums(fetch.CHECKSUMS)
    assert {source.local: fetch.sha256_file(target / source.local) for source in wanted} == {
        source.local: checksums[source.local] for source in wanted
    }
    assert len(wanted) == 1 + 10 + len(sources.EVALUATOR_FILES)  # LoCoMo, its audit, evaluators
    written = {path: path.stat().st_mtime_ns for path in target.rglob("*")}
    assert main([*fetch_args, "--mirror", "http://127.0.0.1:9"]) == 0
    assert {path: path.stat().st_mtime_ns for path in target.rglob("*")} == written


def test_a_folder_that_cannot_be_written_fails_naming_the_file(
    mirror, tmp_path: Path, data_dir: Path
) -> None:
    """A downloaded, verified file that cannot be placed (here the data folder's path is a file)
    is a failed line naming it, not a traceback that hides the other files' outcomes."""
    root, base = mirror
    locomo = "locomo/locomo10.json"
    _publish(root, f"{sources.LOCOMO}/data/{Path(locomo).name}", (data_dir / locomo).read_bytes())
    target = tmp_path / "data"
    target.write_text("not a folder")
    (status,) = fetch.fetch_all(target, base, ["locomo/locomo10"]).values()
    assert status.startswith(f"FAILED: {target / locomo}: ")
