"""`rooftop view`: pages of runs and transcripts, loaded in headless Chromium (CI installs it): no
console error, no network request, expanders and tabs work, the index's links resolve."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURES

from rooftop.agents.runner import AgentConfig, RunPlan, run_agent
from rooftop.service.evaluator import Evaluator
from rooftop.vocabulary import DeviceChoice, Settings

FAKES = Path(__file__).parent / "fakes" / "agents"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REAL = Path(os.environ.get("ROOFTOP_TRANSCRIPT_FIXTURES",
                           Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "transcripts"))

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """Run folders of fake agents: a completed honest run, a wrong one (Codex), a crashed one."""
    root = tmp_path_factory.mktemp("viewer")
    problem = root / "scale"
    shutil.copytree(FIXTURES / "problems" / "scale", problem)
    spec = yaml.safe_load((problem / "problem.yaml").read_text())
    spec.pop("smoke")
    (problem / "problem.yaml").write_text(yaml.safe_dump(spec))
    with Evaluator(root / "r.db", "cpu") as evaluator:
        for adapter, model in (("claude", "honest"), ("codex", "wrong"), ("claude", "crash")):
            plan = RunPlan(agent=AgentConfig(adapter=adapter, executable=str(FAKES / adapter), timeout=120),
                           model=model, problem=str(problem))
            run_agent(plan, evaluator=evaluator, settings=Settings(device=DeviceChoice.cpu), runs_dir=root / "runs",
                      db=root / "r.db")
    return root / "runs"


def _long_transcript(path: Path) -> Path:
    """rooftop's own JSONL with markup in a message, a 120-line tool result (folded, not cut), an unknown
    event (shown raw) and a broken line (listed with its number)."""
    lines = [{"type": "start", "version": "rooftop test", "model": "m", "base_url": None, "tools": ["run_kernel"],
              "max_turns": 3, "time": "2026-11-24T10:00:00.000Z"},
             # an agent's text is shown as text: markup in it loads nothing and runs nothing
             {"type": "message", "role": "user", "time": "2026-11-24T10:00:01.000Z",
              "content": 'write a kernel <img src="https://example.invalid/x.png"><script>console.error(1)</script>'},
             {"type": "message", "role": "assistant", "content": None, "time": "2026-11-24T10:00:02.000Z",
              "tool_calls": [{"id": "c1", "name": "run_kernel", "arguments": json.dumps({"code": "x = 1\n"})}],
              "usage": {"input_tokens": 10, "output_tokens": 5}},
             {"type": "message", "role": "tool", "tool_call_id": "c1", "time": "2026-11-24T10:00:03.000Z",
              "content": "\n".join(f"bench line {i}" for i in range(120))},
             {"type": "mystery", "payload": {"kept": True}}]
    text = "\n".join(json.dumps(line) for line in lines[:3]) + "\n{not json\n" + "\n".join(
        json.dumps(line) for line in lines[3:]) + "\n"
    path.write_text(text)
    return path


class Browser:
    def __init__(self, playwright):
        self.browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])

    def open(self, page_path: Path):
        page = self.browser.new_page(viewport={"width": 1280, "height": 900})
        page.problems, page.requests = [], []
        page.on("console", lambda m: page.problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: page.problems.append(str(e)))
        page.on("request", lambda r: page.requests.append(r.url))
        page.goto(page_path.as_uri())
        return page


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        opened = Browser(playwright)
        yield opened
        opened.browser.close()


def _view(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "rooftop", "view", *args], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _shots() -> Path | None:
    folder = os.environ.get("ROOFTOP_SCREENSHOTS")
    return Path(folder) if folder else None


def test_the_index_and_every_run_page_load_offline_and_link_up(runs, browser, tmp_path):
    index = Path(_view("--index", str(runs)))
    assert index == runs / "index.html"
    page = browser.open(index)
    links = page.eval_on_selector_all("#runs a", "els => els.map(e => e.getAttribute('href'))")
    assert len(links) == 3
    shots = _shots()
    if shots:
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / "index.png"), full_page=True)
    assert not page.problems and page.requests == [index.as_uri()]
    for href in links:
        target = (runs / href).resolve()
        assert target.is_file()
        run_page = browser.open(target)
        assert not run_page.problems, run_page.problems
        assert run_page.requests == [target.as_uri()]  # nothing fetched: CSS, highlighting and tabs are inline
        run = json.loads((target.parent / "run.json").read_text())
        banner = run_page.locator("#incomplete")
        assert banner.count() == (0 if run["completed"] else 1)
        # the tabs: solution (highlighted), verdicts with the held-out row, the tool calls
        run_page.click("label[for=tab1]")
        assert run_page.locator("#panel1 .hl").first.is_visible()
        run_page.click("label[for=tab2]")
        assert run_page.locator("#panel2").inner_text().count("held_out") >= 1
        run_page.click("label[for=tab0]")
        if shots:
            run_page.screenshot(path=str(shots / f"{run['model']}_{run['adapter']}.png"), full_page=True)


def test_a_long_output_is_folded_not_cut_and_unknown_records_show_raw(browser, tmp_path):
    transcript = _long_transcript(tmp_path / "transcript.jsonl")
    page_path = Path(_view(str(transcript), "-o", str(tmp_path / "long.html")))
    page = browser.open(page_path)
    assert not page.problems and page.requests == [page_path.as_uri()]
    more = page.locator("details.more").first
    assert not page.get_by_text("bench line 119").is_visible()
    more.locator("summary").click()
    assert page.get_by_text("bench line 119", exact=False).is_visible()
    assert "show 80 more lines" in page.content()
    assert "mystery" in page.content() and "raw record" in page.content()
    assert page.get_by_text('<img src="https://example.invalid/x.png">', exact=False).is_visible()
    page.click("label[for=tab5]")
    assert "line 4" in page.locator("#panel5").inner_text()
    if _shots():
        page.screenshot(path=str(_shots() / "long_transcript.png"), full_page=True)


@pytest.mark.skipif(not REAL.is_dir(), reason="real transcripts not here (set ROOFTOP_TRANSCRIPT_FIXTURES)")
def test_every_real_transcript_renders_without_errors(browser, tmp_path):
    files = sorted(p for p in REAL.rglob("*") if p.is_file() and p.suffix in (".jsonl", ".txt"))
    assert files
    for n, source in enumerate(files):
        page_path = Path(_view(str(source), "-o", str(tmp_path / f"page{n}.html")))
        page = browser.open(page_path)
        assert not page.problems, (source.name, page.problems)
        assert page.requests == [page_path.as_uri()], source.name
        subagent = page.locator("details.sub")
        if subagent.count():
            subagent.first.locator("summary").first.click()
        if _shots() and "subagent" in source.name:
            page.screenshot(path=str(_shots() / f"real{n}.png"), full_page=False)
