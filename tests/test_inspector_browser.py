"""The inspector in a real browser: headless Chromium opens the page from file:// over the
committed fixture runs, and from the inspector's server (``--serve``) started by the test, runs
its script, and the DOM it leaves is checked (filters in the URL change the list, a question
shows highlighted evidence for both runs, hostile text stays text, the served page shows what
the single page shows); a screenshot is saved in the test's folder. ``make test-browser`` (CI) runs these; without a
chromium binary they skip."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from benchmarks.data.paths import REPO_ROOT
from benchmarks.inspection.index import Index
from benchmarks.inspection.inspect import main
from benchmarks.inspection.server import InspectorServer

pytestmark = pytest.mark.browser

CHROMIUM = next(
    (found for name in ("chromium", "chromium-browser") if (found := shutil.which(name))), None
)
if CHROMIUM is None:
    pytest.skip(
        "no chromium binary on PATH (apt-get install chromium; .ci/run does)",
        allow_module_level=True,
    )

TINY = REPO_ROOT / "tests" / "fixtures" / "tiny"
FIXTURE_RUNS = sorted(p for p in (REPO_ROOT / "tests" / "fixtures" / "inspector").iterdir())
HEADLESS = [
    "--headless",
    "--disable-gpu",
    "--no-sandbox",
    "--hide-scrollbars",
    "--virtual-time-budget=5000",  # lets the page's script run before the DOM is taken
]


def chromium(*arguments: str) -> str:
    done = subprocess.run(
        [str(CHROMIUM), *HEADLESS, *arguments], capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def dom(page: Path, fragment: str) -> str:
    """The page's DOM after its script ran, opened at ``#fragment``."""
    rendered = chromium("--dump-dom", f"{page.as_uri()}#{fragment}")
    assert 'data-rendered="1"' in rendered, "the page's script did not run"
    return rendered


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("inspector") / "inspect.html"
    assert main([*map(str, FIXTURE_RUNS), "--out", str(out), "--data-dir", str(TINY)]) == 0
    return out


def listed(rendered: str) -> list[str]:
    return re.findall(r'<tr class="question-row" data-question="([^"]+)"', rendered)


def test_filters_in_the_url_change_the_list(page: Path) -> None:
    everything = listed(dom(page, ""))
    assert len(everything) == 6
    categories = {}
    for line in (FIXTURE_RUNS[0] / "predictions.jsonl").read_text().splitlines():
        record = json.loads(line)
        categories[record["question_id"]] = record["category"]
    single_hop = listed(dom(page, "category=single_hop"))
    assert single_hop == [q for q in everything if categories[q] == "single_hop"]
    assert 0 < len(single_hop) < len(everything)
    searched = listed(dom(page, "search=pepper"))
    assert searched and len(searched) < len(everything)
    assert listed(dom(page, "category=single_hop&search=no+such+words")) == []


def test_a_question_shows_each_runs_context_with_the_evidence_highlighted(
    page: Path, tmp_path: Path
) -> None:
    question = "tiny-1:q0"  # Ana's dog, evidence D1:1: both methods retrieve it
    rendered = dom(page, f"q={question}")
    columns = rendered.split('<section class="run-column" data-run="')[1:]
    assert sorted(column.split('"')[0] for column in columns) == [p.name for p in FIXTURE_RUNS]
    for column in columns:
        highlighted = re.findall(r'<div class="line evidence" data-turn="([^"]+)"', column)
        assert highlighted == ["D1:1"]
        assert 'class="line other"' in column or 'class="line derived"' in column
        assert re.search(
            r'<li>mem0: correct .*<pre class="reply">\{ "label": "CORRECT" \}</pre>', column
        )
    shot = tmp_path / "inspector.png"
    chromium("--window-size=1400,1000", f"--screenshot={shot}", f"{page.as_uri()}#q={question}")
    assert shot.stat().st_size > 10_000


HOSTILE = '</script><img src=x onerror="document.title=1"><b>bold</b>'


def hostile_run(tmp_path: Path) -> tuple[Path, str]:
    """A copy of a fixture run whose first question and answer are :data:`HOSTILE` markup;
    the folder and that question's id."""
    run = tmp_path / "hostile"
    shutil.copytree(FIXTURE_RUNS[0], run)
    lines = (run / "predictions.jsonl").read_text().splitlines()
    first = json.loads(lines[0]) | {"question": HOSTILE, "prediction": HOSTILE}
    (run / "predictions.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    assert yaml.safe_load((run / "config.yaml").read_text())  # still a run folder
    return run, first["question_id"]


def test_hostile_text_is_shown_as_text(tmp_path: Path) -> None:
    run, question = hostile_run(tmp_path)
    out = tmp_path / "inspect.html"
    assert main([str(run), "--out", str(out), "--data-dir", str(TINY)]) == 0
    for fragment in ("", f"q={question}"):
        rendered = dom(out, fragment)
        assert "<img" not in rendered and "<b>" not in rendered
        assert "&lt;/script&gt;&lt;img src=x" in rendered
        assert "<title>memsys-bench inspector</title>" in rendered


# The served inspector (``inspect --serve``): the same page, its data asked of the server.


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    server = InspectorServer(Index(FIXTURE_RUNS, str(TINY), "served"), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.url
    server.shutdown()
    server.server_close()


def served_dom(url: str, fragment: str) -> str:
    rendered = chromium("--dump-dom", f"{url}#{fragment}")
    assert 'data-rendered="1"' in rendered, "the page's script did not run"
    return rendered


def test_the_served_list_filters_and_questions_match_the_single_page(
    served: str, page: Path
) -> None:
    for fragment in ("", "category=single_hop", "search=pepper"):
        assert listed(served_dom(served, fragment)) == listed(dom(page, fragment))
    question = "tiny-1:q0"
    rendered = served_dom(served, f"q={question}")
    columns = rendered.split('<section class="run-column" data-run="')[1:]
    assert sorted(column.split('"')[0] for column in columns) == [p.name for p in FIXTURE_RUNS]
    for column in columns:
        assert re.findall(r'<div class="line evidence" data-turn="([^"]+)"', column) == ["D1:1"]
    a, b = (run.name for run in FIXTURE_RUNS)
    diffed = served_dom(served, f"view=diff&a={a}&b={b}")
    assert diffed.count('<ol class="diff-questions">') == 1


def test_hostile_text_is_shown_as_text_when_served(tmp_path: Path) -> None:
    run, question = hostile_run(tmp_path)
    server = InspectorServer(Index([run], str(TINY), "served"), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for fragment in ("", f"q={question}"):
            rendered = served_dom(server.url, fragment)
            assert "<img" not in rendered and "<b>" not in rendered
            assert "&lt;/script&gt;&lt;img src=x" in rendered
            assert "<title>served</title>" in rendered
    finally:
        server.shutdown()
        server.server_close()
