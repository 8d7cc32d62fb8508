"""The served inspector (``memsys-bench inspect --serve``): its routes give what the single page
embeds, read from the run folders lazily; it answers only its own Host, serves nothing but its
routes (no path out of the runs, links refused), reads a run still being written up to its last
whole record; and a single page too large for a browser is refused, naming --serve."""

from __future__ import annotations

import http.client
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.data.paths import REPO_ROOT
from benchmarks.inspection.index import Index
from benchmarks.inspection.inspect import main
from benchmarks.inspection.model import InspectError, build_model, load_dataset, read_run
from benchmarks.inspection.server import InspectorServer

TINY = REPO_ROOT / "tests" / "fixtures" / "tiny"
FIXTURE_RUNS = sorted(p for p in (REPO_ROOT / "tests" / "fixtures" / "inspector").iterdir())


@pytest.fixture
def runs(tmp_path: Path) -> list[Path]:
    copies = []
    for run in FIXTURE_RUNS:
        shutil.copytree(run, tmp_path / run.name)
        copies.append(tmp_path / run.name)
    return copies


@pytest.fixture
def server(runs: list[Path]) -> Iterator[InspectorServer]:
    running = InspectorServer(Index(runs, str(TINY), "served"), "127.0.0.1", 0)
    thread = threading.Thread(target=running.serve_forever, daemon=True)
    thread.start()
    yield running
    running.shutdown()
    running.server_close()


def get(server: InspectorServer, path: str, host: str | None = None) -> tuple[int, bytes]:
    port = server.server_address[1]
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.putrequest("GET", path, skip_host=True)
    connection.putheader("Host", host or f"127.0.0.1:{port}")
    connection.endheaders()
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, body


def get_json(server: InspectorServer, path: str) -> object:
    status, body = get(server, path)
    assert status == 200, body
    return json.loads(body)


def test_the_routes_give_what_the_single_page_embeds(server: InspectorServer) -> None:
    runs = [read_run(path) for path in server.index.runs_dirs()]
    embedded = build_model(runs, load_dataset(runs, str(TINY)), "served")
    listing = get_json(server, "/api/index")
    assert listing["questions"] == embedded["questions"]
    assert [run["id"] for run in listing["runs"]] == [run["id"] for run in embedded["runs"]]
    for run_id, cells in listing["results"].items():
        for question_id, cell in cells.items():
            full = embedded["results"][run_id][question_id]
            assert cell == {key: full[key] for key in cell}
            assert "lines" not in cell  # the list carries no context
    question_id = next(iter(embedded["questions"]))
    found = get_json(server, f"/api/question?id={question_id}")
    assert found["question"] == embedded["questions"][question_id]
    assert found["results"] == {
        run_id: results[question_id]
        for run_id, results in embedded["results"].items()
        if question_id in results
    }
    a, b = (run["id"] for run in embedded["runs"])
    assert get_json(server, f"/api/diff?a={a}&b={b}") == embedded["diffs"][f"{a}|{b}"]
    status, page = get(server, "/")
    assert status == 200 and b'id="data"' not in page and b"api/index" in page


def test_a_foreign_host_is_refused(server: InspectorServer) -> None:
    """DNS rebinding: a page on evil.example that resolves its name to 127.0.0.1 sends its own
    Host header, which the server does not answer."""
    port = server.server_address[1]
    assert get(server, "/api/index", host=f"evil.example:{port}")[0] == 403
    assert get(server, "/api/index", host="127.0.0.1")[0] == 403  # another port's name
    assert get(server, "/api/index", host=f"localhost:{port}")[0] == 200


@pytest.mark.parametrize(
    "path",
    [
        "/../../etc/passwd",
        "/..%2f..%2fetc%2fpasswd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/api/../../etc/passwd",
        "/api/question?id=../../../etc/passwd",
        "/api/question?id=%2e%2e%2fconfig.yaml",
        "/2790255e6628/config.yaml",
        "/2790255e6628/predictions.jsonl",
        "/2790255e6628/secret",
        "/api/diff?a=../2790255e6628&b=2b16df659459",
    ],
)
def test_no_path_reaches_a_file(server: InspectorServer, runs: list[Path], path: str) -> None:
    (runs[0] / "secret").symlink_to("/etc/passwd")  # a link inside a run folder
    status, body = get(server, path)
    assert status == 404 and b"root:" not in body


def test_a_run_whose_files_link_out_of_it_is_refused(runs: list[Path], tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.jsonl"
    (runs[0] / "predictions.jsonl").rename(outside)
    (runs[0] / "predictions.jsonl").symlink_to(outside)
    with pytest.raises(InspectError, match="a link out of its run folder"):
        Index(runs, str(TINY), "served")


def test_a_run_being_written_is_read_up_to_its_last_whole_record(
    server: InspectorServer, runs: list[Path]
) -> None:
    log = runs[0] / "predictions.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:2]) + lines[2][:40])  # the third record half written
    listing = get_json(server, "/api/index")
    assert len(listing["results"][runs[0].name]) == 2
    log.write_text("".join(lines))  # and now whole
    listing = get_json(server, "/api/index")
    assert len(listing["results"][runs[0].name]) == len(lines)


def test_a_page_too_large_for_a_browser_is_refused_naming_serve(
    runs: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "page.html"
    arguments = [*map(str, runs), "--out", str(out), "--data-dir", str(TINY)]
    assert main([*arguments, "--max-page-mb", "0.001"]) == 2
    message = capsys.readouterr().err
    assert "--max-page-mb 0.001" in message and "inspect --serve" in message
    assert not out.exists()
    assert main(arguments) == 0 and out.stat().st_size > 10_000
