"""``python -m benchmarks.data.fetch`` (``make data``): download the datasets and verify sha256.

Present files are verified, never re-downloaded; a mismatch is reported and left alone. Downloads
are moved into place only once their checksum matches. A LongMemEval archive packed here differs
byte-wise from the curated one, so it is accepted when its own or every member's checksum
matches."""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import lzma
import sys
import tarfile
import urllib.error
import urllib.request
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.data import sources
from benchmarks.data.longmemeval import ARCHIVES, RECONSTRUCTED_S
from benchmarks.data.paths import DATA_DIR_ENV, DEFAULT_DATA_DIR, resolve_data_dir
from memsys.files import replace_file

HERE = Path(__file__).parent
CHECKSUMS = HERE / "checksums.sha256"
MEMBER_CHECKSUMS = HERE / "longmemeval_members.sha256"
RECONSTRUCTED_MEMBER = "s/lme_jsons/62_7e00a6cb.json"


class FetchError(RuntimeError):
    """A download failed or a file does not match its recorded checksum."""


def read_checksums(path: Path) -> dict[str, str]:
    """``sha256sum`` format -> {relative path: hex digest}."""
    entries = (line.split(maxsplit=1) for line in path.read_text().splitlines() if line.strip())
    return {name.strip(): digest for digest, name in entries}


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(url: str, *, attempts: int = 3, timeout: float = 60.0) -> bytes:
    """GET ``url`` with a few retries; raise :class:`FetchError` naming the URL on failure."""
    error: Exception | None = None
    for _ in range(attempts):
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                return response.read()
        except (urllib.error.URLError, TimeoutError, ConnectionError) as caught:
            error = caught
    raise FetchError(f"could not download {url}: {error}")


def fetch_plain(source: sources.Source, data_dir: Path, base: str, expected: str) -> str:
    """Verify or download one file that is published byte for byte."""
    path = data_dir / source.local
    if path.exists():
        if sha256_file(path) != expected:
            raise FetchError(f"{path}: sha256 mismatch (delete the file to fetch it again)")
        return "verified"
    data = download(f"{base}/{source.remote}")
    if sha256_bytes(data) != expected:
        raise FetchError(f"{base}/{source.remote}: downloaded content does not match its sha256")
    replace_file(path, data)
    return "downloaded"


def _members(variant: str) -> dict[str, str]:
    prefix = f"{variant}/"
    members = read_checksums(MEMBER_CHECKSUMS)
    members.pop(RECONSTRUCTED_MEMBER)
    return {
        name[len(prefix) :]: digest for name, digest in members.items() if name.startswith(prefix)
    }


def _archive_matches_members(path: Path, members: dict[str, str]) -> bool:
    seen = {}
    with tarfile.open(path, "r|xz") as tar:
        for member in tar:
            handle = tar.extractfile(member) if member.isfile() else None
            if handle is not None:
                seen[member.name] = sha256_bytes(handle.read())
    return seen == members


def fetch_longmemeval(variant: str, data_dir: Path, base: str, expected: str) -> str:
    """Verify the archive, or pack it from verified per-question downloads."""
    path = data_dir / ARCHIVES[variant]
    members = _members(variant)
    if path.exists():
        if sha256_file(path) == expected or _archive_matches_members(path, members):
            return "verified"
        raise FetchError(
            f"{path}: neither the archive nor its members match (delete it to refetch)"
        )

    def get(name: str) -> tuple[str, bytes]:
        data = download(f"{base}/{sources.LONGMEMEVAL_MEMBERS}/{Path(name).name}")
        if sha256_bytes(data) != members[name]:
            raise FetchError(f"{name}: downloaded content does not match its sha256")
        return name, data

    with ThreadPoolExecutor(max_workers=8) as pool:
        contents = dict(pool.map(get, sorted(members)))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        for name in sorted(contents):
            info = tarfile.TarInfo(name)
            info.size = len(contents[name])
            tar.addfile(info, io.BytesIO(contents[name]))
    replace_file(path, buffer.getvalue())
    return "downloaded and packed"


def fetch_reconstructed(data_dir: Path, base: str, expected: str) -> str:
    """The S item for ``7e00a6cb``: the verified copy minus its one added key, re-dumped."""
    path = data_dir / RECONSTRUCTED_S
    member_digest = read_checksums(MEMBER_CHECKSUMS)[RECONSTRUCTED_MEMBER]
    if path.exists():
        if (
            sha256_file(path) == expected
            or sha256_bytes(lzma.decompress(path.read_bytes())) == member_digest
        ):
            return "verified"
        raise FetchError(f"{path}: sha256 mismatch (delete the file to fetch it again)")
    item = json.loads(download(f"{base}/{sources.LONGMEMEVAL_RECONSTRUCTED}"))
    item.pop("model_annotations", None)
    data = json.dumps(item, indent=2, ensure_ascii=False).encode("utf-8")
    if sha256_bytes(data) != member_digest:
        raise FetchError("62_7e00a6cb: reconstruction does not match its recorded sha256")
    replace_file(path, lzma.compress(data, preset=9))
    return "downloaded and reconstructed"


def fetch_all(data_dir: Path, base: str, only: Iterable[str] = ()) -> dict[str, str]:
    """Fetch or verify every file (or those whose path starts with one of ``only``)."""
    checksums = read_checksums(CHECKSUMS)
    prefixes = tuple(only)
    tasks = {source.local: (fetch_plain, source) for source in sources.PLAIN_FILES}
    tasks |= {ARCHIVES[variant]: (fetch_longmemeval, variant) for variant in ARCHIVES}
    tasks[RECONSTRUCTED_S] = (fetch_reconstructed, None)
    outcome = {}
    for local, (fetcher, argument) in tasks.items():
        if prefixes and not local.startswith(prefixes):
            continue
        args = (
            (data_dir, base, checksums[local])
            if argument is None
            else (argument, data_dir, base, checksums[local])
        )
        try:
            outcome[local] = fetcher(*args)
        except FetchError as error:
            outcome[local] = f"FAILED: {error}"
        except OSError as error:  # a data folder that cannot be read or written (read-only, full)
            outcome[local] = f"FAILED: {data_dir / local}: {error.strerror}"
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.data.fetch", description=__doc__)
    parser.add_argument(
        "--data-dir",
        default=None,
        help=f"target folder (default: ${DATA_DIR_ENV}, else {DEFAULT_DATA_DIR})",
    )
    parser.add_argument(
        "--mirror",
        default=sources.RAW_BASE,
        help="base URL that serves <owner>/<repo>/<commit>/<path> (default: %(default)s)",
    )
    parser.add_argument(
        "--only", action="append", default=[], help="only paths starting with this (repeatable)"
    )
    args = parser.parse_args(argv)
    data_dir = resolve_data_dir(args.data_dir)
    print(f"data directory: {data_dir}")
    outcome = fetch_all(data_dir, args.mirror.rstrip("/"), args.only)
    for local, status in outcome.items():
        print(f"  {local}: {status}")
    failed = [local for local, status in outcome.items() if status.startswith("FAILED")]
    print(f"{len(outcome) - len(failed)} ok, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
