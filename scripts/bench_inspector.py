"""The served inspector at full-LoCoMo size, measured in headless Chromium.

    .venv/bin/python scripts/bench_inspector.py [--runs 13] [--context-tokens 2048] [--repeats 3]
                                                [--runs-dir DIR] [--json out.json]

Writes ``--runs`` synthetic run folders over every LoCoMo question (1,986), each record's context
about ``--context-tokens`` tokens of the question's own conversation (a seeded window of turns as
contexts render them, with a date header; evidence turns in it or not, so highlights and the
filters have work to do), the size of the full-LoCoMo retrieval table at a 2,048-token budget.
Then it starts ``memsys-bench inspect --serve`` over them in its own process and reports:

* the cold start: seconds from the command until it serves (its index built);
* the server's resident memory then, and after the page loads;
* the question list's first paint and a question page (every run's context) opened directly,
  each ``--repeats`` times in one headless Chromium driven over the DevTools protocol: seconds
  from the navigation to a frame painted after the view is built (its data fetched), and the
  page's own timer (``data-render-ms``, from navigation start to the view built);
* the same two in a single-file page, for comparison, where ``inspect --out`` still accepts it
  (it refuses past its limit: that refusal is reported).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.data import load_locomo  # noqa: E402
from memsys.compression.passages import render_turns  # noqa: E402
from memsys.types import Conversation  # noqa: E402

#: Characters per token of LoCoMo's English, as contexts are counted (about four).
CHARS_PER_TOKEN = 4
CHROMIUM_FLAGS = [
    "--headless",
    "--disable-gpu",
    "--no-sandbox",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
]


def write_runs(directory: Path, count: int, context_tokens: int) -> list[Path]:
    """``count`` run folders over all of LoCoMo (see the module docstring)."""
    conversations = load_locomo()
    runs = []
    for number in range(count):
        rng = random.Random(number)
        run = directory / f"synthetic{number:02d}"
        run.mkdir(parents=True, exist_ok=True)
        config = {
            "dataset": {"name": "locomo"},
            "subset": {"name": "full"},
            "method": {"_target_": f"synthetic.Method{number}", "top_k": number},
            "answer": {"template": None, "context_budget": context_tokens},
        }
        (run / "config.yaml").write_text(json.dumps(config))
        with (run / "predictions.jsonl").open("w", encoding="utf-8") as log:
            for conversation in conversations:
                for question in conversation.questions:
                    log.write(
                        json.dumps(record(conversation, question, rng, context_tokens)) + "\n"
                    )
        (run / "metrics.json").write_text(json.dumps({"scores": {}}))
        runs.append(run)
    return runs


def record(conversation: Conversation, question: Any, rng: random.Random, tokens: int) -> dict:
    """One synthetic record: a window of the conversation's turns of about ``tokens`` tokens."""
    turns = conversation.turns
    start = rng.randrange(len(turns))
    chosen, size = [], 0
    for turn in turns[start:] + turns[:start]:
        size += len(render_turns((turn,))) + 1
        if size > tokens * CHARS_PER_TOKEN:
            break
        chosen.append(turn)
    shown = {turn.turn_id for turn in chosen}
    evidence = list(question.evidence)
    recall = sum(e in shown for e in evidence) / len(evidence) if evidence else None
    f1 = round(rng.random(), 4) if rng.random() < 0.5 else 0.0
    return {
        "question_id": question.question_id,
        "conversation_id": conversation.conversation_id,
        "category": question.category,
        "question": question.question,
        "answer": question.answer,
        "evidence": evidence,
        "prediction": None,
        "failure": None,
        "retrieved_turn_ids": [turn.turn_id for turn in chosen],
        "context": "[undated]\n" + render_turns(chosen),
        "context_tokens": size // CHARS_PER_TOKEN,
        "evidence_recall": recall,
        "answer_coverage": float(rng.random() < 0.3),
        "scores": {"f1_set": f1, "f1_locomo": f1, "bleu1": f1},
    }


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Browser:
    """Headless Chromium driven over the DevTools protocol (``websockets``, in the dev
    environment): real time, not the virtual time ``--dump-dom`` runs pages in."""

    def __init__(self) -> None:
        self.profile = tempfile.TemporaryDirectory()
        self.process = subprocess.Popen(
            [chromium(), *CHROMIUM_FLAGS, "--remote-debugging-port=0",
             f"--user-data-dir={self.profile.name}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        active = Path(self.profile.name) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not active.exists() or not active.read_text().strip():
            if time.monotonic() > deadline:
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.05)
        port = active.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json") as listing:
            pages = [t for t in json.load(listing) if t["type"] == "page"]
        self.socket = connect(pages[0]["webSocketDebuggerUrl"], max_size=None)
        self.calls = 0
        self.call("Network.enable")
        self.call("Network.setCacheDisabled", cacheDisabled=True)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.calls += 1
        self.socket.send(json.dumps({"id": self.calls, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self.calls:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        return result.get("result", {}).get("value")

    def open(self, url: str) -> tuple[float, float]:
        """Open ``url`` afresh; the seconds until its view is built and painted (a frame after
        it), and the page's own ``data-render-ms``."""
        self.call("Page.navigate", url="about:blank")
        started = time.perf_counter()
        self.call("Page.navigate", url=url)
        while self.evaluate("document.body && document.body.dataset.rendered || ''") != "1":
            time.sleep(0.01)
        self.evaluate("new Promise((done) => requestAnimationFrame(() => done(1)))")
        painted = time.perf_counter() - started
        return painted, float(self.evaluate("document.body.dataset.renderMs"))

    def close(self) -> None:
        self.socket.close()
        self.process.terminate()
        self.process.wait(timeout=30)
        self.profile.cleanup()


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise SystemExit("no chromium on PATH (apt-get install chromium)")
    return found


def measure_page(base: str, fragment: str, repeats: int) -> dict[str, Any]:
    """``repeats`` fresh loads in one browser: the first is the browser's first visit."""
    browser = Browser()
    try:
        times = [browser.open(f"{base}#{fragment}") for _ in range(repeats)]
    finally:
        browser.close()
    return {
        "painted_s": [round(t[0], 3) for t in times],
        "median_painted_s": round(statistics.median(t[0] for t in times), 3),
        "render_ms": [t[1] for t in times],
    }


def serve_and_measure(runs: list[Path], repeats: int, question: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.inspection.inspect", "--serve", "--port", "0"]
    started = time.perf_counter()
    server = subprocess.Popen(
        [*command, *map(str, runs)], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        cold_s = time.perf_counter() - started
        url = re.search(r"at (http://\S+)", line)
        if url is None:
            raise RuntimeError(f"the server did not start: {line!r}")
        figures = {
            "cold_start_s": round(cold_s, 2),
            "server_rss_mb_started": round(rss_mb(server.pid), 1),
            "question_list": measure_page(url.group(1), "", repeats),
            "question_page": measure_page(url.group(1), f"q={question}", repeats),
        }
        figures["server_rss_mb_after"] = round(rss_mb(server.pid), 1)
        return figures
    finally:
        server.terminate()
        server.wait(timeout=30)


def single_page(runs: list[Path], scratch: Path, repeats: int, question: str) -> dict[str, Any]:
    out = scratch / "page.html"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.inspection.inspect", *map(str, runs), "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if done.returncode != 0:
        return {"refused": done.stderr.strip()}
    base = out.as_uri()
    return {
        "bytes": out.stat().st_size,
        "question_list": measure_page(base, "", repeats),
        "question_page": measure_page(base, f"q={question}", repeats),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=13)
    parser.add_argument("--context-tokens", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs-dir", type=Path, default=None, help="keep the runs here")
    parser.add_argument("--question", default="conv-26:q0")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.runs_dir or Path(scratch) / "runs"
        started = time.perf_counter()
        runs = write_runs(folder, args.runs, args.context_tokens)
        logs = sum((run / "predictions.jsonl").stat().st_size for run in runs)
        figures: dict[str, Any] = {
            "runs": len(runs),
            "questions_per_run": sum(1 for _ in (runs[0] / "predictions.jsonl").open()),
            "logs_mb": round(logs / 1e6, 1),
            "written_s": round(time.perf_counter() - started, 1),
            "served": serve_and_measure(runs, args.repeats, args.question),
            "single_page": single_page(runs, Path(scratch), args.repeats, args.question),
        }
    print(json.dumps(figures, indent=1))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
