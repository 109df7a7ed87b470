"""The report in a real headless Chromium: figures and waterfalls render, no console error.

Not skipped when Chromium is missing: CI installs Debian's ``chromium`` and
``chromium-driver`` (see ``.ci/run``), so a missing browser is a broken setup and fails
with a message that says how to fix it.  The driver is given explicitly so that selenium's
driver manager never tries to download anything.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from fma_otel.cli import main

from .conftest import ARTIFACTS, SampleReport

CHROMIUM = os.environ.get("FMA_OTEL_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("FMA_OTEL_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,1000",
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is not installed: pip install -e '.[test]' (selenium>=4.20)")
    for path, pkg in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            pytest.fail(
                f"{path} not found: apt-get install -y chromium chromium-driver (.ci/run does) [{pkg}]"
            )
    profile = tempfile.mkdtemp(prefix="fma-otel-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(20)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _open(driver: Any, path: Path) -> list[dict[str, Any]]:
    """Load a file and return the console messages it caused."""
    driver.get_log("browser")  # drop what an earlier page left
    driver.get(path.resolve().as_uri())
    return driver.get_log("browser")


# One round trip per question instead of one per element: each WebDriver call is an HTTP
# request to chromedriver, and reading hundreds of titles one by one was most of these
# tests' time.  ``textContent`` is what ``get_attribute("textContent")`` returns; the
# visible text of a cell is ``innerText``, what ``WebElement.text`` returns for these
# plain cells (no hidden parts, no CSS text transforms).
_JS_TEXTS = """
return Array.from(document.querySelectorAll(arguments[0]), e => e.textContent);
"""
_JS_RECTS = """
return Array.from(document.querySelectorAll(arguments[0]), e => {
    const r = e.getBoundingClientRect();
    return {width: r.width, height: r.height};
});
"""
_JS_CELLS = """
const [css, cell] = arguments;
return Array.from(document.querySelectorAll(css), tr => Array.from(tr.querySelectorAll(cell), c => c.innerText));
"""


def _texts(driver: Any, css: str) -> list[str]:
    """The ``textContent`` of every element ``css`` matches."""
    return driver.execute_script(_JS_TEXTS, css)


def _rects(driver: Any, css: str) -> list[dict[str, float]]:
    """The laid-out width and height of every element ``css`` matches."""
    return driver.execute_script(_JS_RECTS, css)


def _cells(driver: Any, rows_css: str, cell: str = "td") -> list[list[str]]:
    """The visible text of the ``cell`` elements of every table row ``rows_css`` matches."""
    return driver.execute_script(_JS_CELLS, rows_css, cell)


def _screenshot(driver: Any, name: str) -> Path:
    """A full-page screenshot under artifacts/ (gitignored), kept for people to look at."""
    ARTIFACTS.mkdir(exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(int(height) + 40, 16000))
    out = ARTIFACTS / name
    assert driver.save_screenshot(str(out)), "screenshot failed"
    driver.set_window_size(1280, 1000)
    return out


@pytest.mark.slow
def test_report_renders_in_chromium(browser, sample_report: SampleReport):
    from selenium.webdriver.common.by import By

    assert sample_report.exit_code == 0, sample_report.stderr
    logs = _open(browser, sample_report.html)
    errors = [e for e in logs if e.get("level") in ("SEVERE", "ERROR")]
    assert not errors, errors
    q = browser.find_elements

    # every figure is an inline SVG the browser laid out at a real size
    figs = _rects(browser, "svg.fig")
    n_png = len(list(sample_report.png_dir.glob("*.png")))
    assert len(figs) == n_png >= 8
    for box in figs:
        assert box["width"] > 600 and box["height"] > 80, box
    assert len(q(By.CSS_SELECTOR, "figure.dist svg.fig")) >= 5
    assert len(q(By.CSS_SELECTOR, "figure.hit a.bar")) == 3
    # time no leaf covers is drawn, hatched, and named; every path has a bar, the baseline too
    gaps = _texts(browser, "figure.time a.gap > title")
    parts = _texts(browser, "figure.time a.part > title")
    assert gaps and all(re.match(r"[a-z_]+: uncovered in [\w.]+ ", g) for g in gaps), gaps
    assert {t.split(":")[0] for t in gaps + parts} == {"cold_launcher", "warm", "hot", "cold_no_fma"}
    # every percentile mark says the interval it can be in: 4 paths, p50/p90/p99
    marks = _texts(browser, "#dist-T_actuation a.pctl > title")
    assert len(marks) == 4 * 3, marks
    assert all(
        re.match(r"[a-z_]+: p(50|90|99) [\d.]+ s, can be anywhere in \[[\d.]+ s, [\d.]+ s\]", m)
        for m in marks
    )

    # waterfalls: 2 slowest + the unfinished one, each span a row with a hover
    sections = browser.execute_script(
        """return Array.from(document.querySelectorAll("section.wf"), s => {
            const path = s.querySelector("a.wf-span path");
            const r = path && path.getBoundingClientRect();
            return {id: s.id, spans: s.querySelectorAll("a.wf-span").length,
                    drawn: r && {width: r.width, height: r.height}};
        });"""
    )
    assert len(sections) == 3
    rows = q(By.CSS_SELECTOR, "section.wf a.wf-span")
    assert len(rows) >= 20
    for s in sections:
        assert s["spans"], s["id"]
        drawn = s["drawn"]
        assert drawn and drawn["width"] > 0 and drawn["height"] > 0, s
    titles = _texts(browser, "a.wf-span > title")
    assert len(titles) == len(rows)
    assert any("start: k8s:" in t and "end: " in t for t in titles)
    assert any("dpc:HTTP call done" in t for t in titles)
    assert q(By.CSS_SELECTOR, "#unfinished ~ section.wf a.wf-incomplete")
    assert any("INCOMPLETE" in t for t in titles)
    assert any("INCOMPLETE: vLLM was never seen serving" in t for t in titles)  # words
    assert not any("D.serving not seen" in t for t in titles)

    # distribution dots name their actuation; those with a waterfall link to it
    dots = _texts(browser, "a.pt > title")
    assert dots and all(" / " in d for d in dots)
    linked = q(By.CSS_SELECTOR, 'a.pt[href^="#trace-"]')
    assert linked
    target = linked[0].get_dom_attribute("href").split("#", 1)[1]
    assert q(By.ID, target)

    # the SLO table and verdicts; the SLO marks say what they are in a legend
    assert "FAIL" in q(By.CSS_SELECTOR, "table.verdicts")[0].text
    dist_text = q(By.CSS_SELECTOR, "#dist-T_actuation svg")[0].get_attribute("textContent")
    assert "SLO hot: p95 ≤ 5.00 s (NOT met)" in dist_text
    assert "SLO bound, met" in q(By.CSS_SELECTOR, "figure.hit svg")[0].get_attribute("textContent")

    # the time the capture covers, and every metric over time (a panel each, dots by path)
    assert q(By.ID, "range")[0].text.startswith("capture covers 2026-")
    trend = q(By.CSS_SELECTOR, "figure.trend svg.fig")[0]
    assert trend.rect["height"] > 400
    trend_text = trend.get_attribute("textContent")
    for metric in ("T_actuation", "T_wake", "T_launcher_startup", "cold_no_fma"):
        assert metric in trend_text
    tdots = _texts(browser, "figure.trend a.tp > title")
    assert len(tdots) >= 5 and all("began 2026-" in t for t in tdots)

    # the breakdown: the baseline beside the FMA paths, percentiles per phase
    assert "no FMA" in q(By.CSS_SELECTOR, "figure.time svg")[0].get_attribute("textContent")
    phases = q(By.ID, "phases")[0].text
    assert "p99" in phases and "cold_no_fma (n=1), baseline" in phases

    # every actuation in a table that sorts on a click; missing instants in words
    table = q(By.ID, "actuations")[0]
    rows = table.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert len(rows) == 6
    assert "the requester never became Ready" in table.text and "R.ready" not in table.text
    headers = table.find_elements(By.CSS_SELECTOR, "thead th")
    names = _texts(browser, "#actuations thead th")
    col = names.index("T_actuation")

    def column() -> list[str]:
        return [r[col] for r in _cells(browser, "#actuations tbody tr")]

    headers[col].click()
    assert headers[col].get_attribute("aria-sort") == "ascending"
    up = column()
    assert up[0].startswith("7.00s\n[") and up[-1].startswith("71.00s\n["), up  # each with its interval
    headers[col].click()
    assert headers[col].get_attribute("aria-sort") == "descending"
    assert column() == up[::-1]
    headers[names.index("requester")].click()
    reqs = [r[0] for r in _cells(browser, "#actuations tbody tr")]
    assert reqs == sorted(reqs, key=str.lower) or reqs == sorted(reqs)
    from selenium.webdriver.common.keys import Keys

    headers[col].send_keys(Keys.ENTER)  # the keyboard sorts too
    assert headers[col].get_attribute("aria-sort") == "ascending" and column() == up
    headers[names.index("started (UTC)")].click()  # back to the default order for the screenshot
    unfinished_heading = q(By.CSS_SELECTOR, "#unfinished ~ section.wf h3")[0].text
    assert "the requester never became Ready" in unfinished_heading
    # nothing was fetched: the file is self-contained
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    shot = _screenshot(browser, "report-sample.png")
    assert shot.stat().st_size > 10_000


@pytest.mark.slow
def test_empty_report_in_chromium(browser, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    out = tmp_path / "empty.html"
    assert CliRunner().invoke(main, ["report", str(empty), "--out", str(out), "-q"]).exit_code == 0
    logs = _open(browser, out)
    assert not [e for e in logs if e.get("level") == "SEVERE"], logs
    from selenium.webdriver.common.by import By

    assert browser.find_element(By.ID, "empty").text == "No actuations in this file."
    assert not browser.find_elements(By.CSS_SELECTOR, "svg")
    _screenshot(browser, "report-empty.png")


@pytest.mark.slow
def test_breakdown_with_leaves_the_bridge_does_not_make_yet(browser, tmp_path):
    """Hand-made traces with vLLM phases under fma.vllm.ready and an image pull under
    fma.launcher.startup: the breakdown names them, shows the gaps they leave, and the
    page renders without a console error."""
    from fma_otel.sinks.otlp_json import write_trace_line

    from .test_data import cold_trace

    traces = tmp_path / "t.jsonl"
    with open(traces, "w") as fh:
        for i in range(1, 6):
            write_trace_line(fh, cold_trace(f"{i:032x}", f"c{i}", weights=float(i)))
    out = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["report", str(traces), "--out", str(out), "-q"])
    assert r.exit_code == 0, r.output
    logs = _open(browser, out)
    assert not [e for e in logs if e.get("level") in ("SEVERE", "ERROR")], logs
    parts = _texts(browser, "figure.time a.part > title")
    assert any(p.startswith("cold_launcher: vllm.load_weights ") and "p99 5.00 s" in p for p in parts), parts
    assert any(p.startswith("cold_launcher: k8s.image.pull 4.00 s") for p in parts), parts
    gaps = _texts(browser, "figure.time a.gap > title")
    assert any(g.startswith("cold_launcher: uncovered in vllm.ready ") for g in gaps), gaps
    rows = {cells[1]: cells for cells in _cells(browser, "#phases tbody tr")}
    # each leaf's percentiles with the interval each can be in (these spans say no bounds: exact)
    assert rows["vllm.load_weights"][2:6] == [
        "5/5",
        "3.00 s\n[3.00, 3.00]",
        "5.00 s\n[5.00, 5.00]",
        "5.00 s\n[5.00, 5.00]",
    ]
    assert rows["uncovered in launcher.startup"][3] == "6.00 s"  # pull 2-6 s, container 12-30 s of 2-30
    # uncovered: 6 s in startup, and 32..42 s in vllm.ready when weights take 1 s (6..10 s,
    # 8 s on average): 46 of 60 s covered on average, 44 at least
    assert rows["named leaves together"][7] == "76.7% (min 73.3%)"
    # each actuation's share in named leaves, in the table of all actuations
    col = _cells(browser, "#actuations thead tr", "th")[0].index("in leaves")
    shares = sorted(r[col] for r in _cells(browser, "#actuations tbody tr"))
    assert shares == ["73.3%", "75.0%", "76.7%", "78.3%", "80.0%"]
    _screenshot(browser, "report-breakdown.png")
