"""The HTML report, opened in a real browser (Debian's chromium driven by Playwright): it opens
with the question and the answer line, shows the compared intervals on one axis, where each probe
sits, the validation, marks and per-SM tables and the pictures; the trace beside it is the
exported trace, and its Perfetto link hands the UI exactly that trace, or says that it needs the
network when the UI does not answer.

ui.perfetto.dev is replaced by a stub page that speaks the UI's side of the deep-linking handshake
(answer PING with PONG, keep the posted {perfetto: {...}}), so the test needs no network.
Outside CI the browser test skips when chromium or playwright is missing; under CI it fails."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from atrex_inject import report
from atrex_inject.answer import answers, clock_answer_line
from atrex_inject.cli import app
from atrex_inject.evidence import gather
from atrex_inject.manifest import load as load_manifest

FIX = Path(__file__).parent.parent / "fixtures" / "h200"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
PERFETTO_STUB = """<!doctype html><title>stub Perfetto UI</title><script>
window.addEventListener('message', e => {
  if (e.data === 'PING') { e.source.postMessage('PONG', '*'); return; }
  if (e.data && e.data.perfetto) { window.received = e.data.perfetto; }
});
</script>"""
SILENT_UI = "<!doctype html><title>no network: the Perfetto UI never loads</title>"
runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def _sync_playwright():
    missing = [] if CHROMIUM.exists() else [f"{CHROMIUM} (apt-get install -y chromium)"]
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
        missing.append("playwright (pip install -e '.[test]')")
    if missing:
        (pytest.fail if os.environ.get("CI") else pytest.skip)("the browser test needs " + " and ".join(missing))
    return sync_playwright


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A report of the GEMM capture with its measurement, and the trace `export` writes for it."""
    tmp = tmp_path_factory.mktemp("report")
    cap = tmp / "cap"
    shutil.copytree(FIX / "gemm_mma", cap)
    assert invoke("export", cap, "--perfetto", tmp / "t.pftrace").exit_code == 0
    r = invoke("report", cap, "-o", tmp / "report.html", "--measurement", FIX / "measure" / "gemm_mma.json", "--json")
    assert r.exit_code == 0, r.output
    return tmp, json.loads(r.output)


def test_report_in_a_browser(built):
    tmp, out = built
    trace = (tmp / "t.pftrace").read_bytes()
    checks = json.loads(invoke("validate", tmp / "cap", "--json").output)["checks"]
    art = json.loads((FIX / "measure" / "gemm_mma.json").read_text())
    m = load_manifest(tmp / "cap" / "manifest.json")
    ev = gather(tmp / "cap", m)
    (ans,) = answers(ev.capture, ev.launches, m)
    with _sync_playwright()() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        ctx = browser.new_context(viewport={"width": 1400, "height": 900})
        ctx.route("https://ui.perfetto.dev/**", lambda route: route.fulfill(content_type="text/html",
                                                                          body=PERFETTO_STUB))
        page = ctx.new_page()
        page.goto(Path(out["report"]).as_uri())
        # the question is the title and the answer line comes right after it, on screen too
        assert page.locator("h1").inner_text() == m.question
        assert page.evaluate("document.querySelector('h1').nextElementSibling.id") == "answer"
        h1, line = page.locator("h1").bounding_box(), page.locator("#answer").bounding_box()
        assert h1["y"] < 100 and 0 <= line["y"] - (h1["y"] + h1["height"]) < 30
        assert page.locator("#answer").inner_text() == "Answer: " + ans["text"].replace("`", "")
        shot = page.screenshot(path=str(tmp / "report.png"))
        assert shot[:8] == b"\x89PNG\r\n\x1a\n" and len(shot) > 20_000
        # the compared intervals on one axis, each at its median, with the ratio to the longest
        axis = page.locator("svg.axis g.row")
        assert axis.evaluate_all("gs => gs.map(g => g.dataset.interval)") == [r["name"] for r in ans["compared"]]
        assert axis.evaluate_all("gs => gs.map(g => +g.dataset.medianNs)") == [r["median"] for r in ans["compared"]]
        ratios = page.locator("table.answer-intervals tr").all_inner_texts()[1:]
        runner = next(r for r in ans["compared"] if r["name"] == ans["runner_up"])
        assert f"{runner['ratio']['value']:.2f}× [{runner['ratio']['lo']:.2f}, {runner['ratio']['hi']:.2f}]" in \
            ratios[[r["name"] for r in ans["compared"]].index(ans["runner_up"])]
        # where each probe sits: each site's instrumented line, highlighted, from the patch
        added = {line[1:].strip() for line in (tmp / "cap" / "instrumented.patch").read_text().splitlines()
                 if line.startswith("+")}
        sites = page.locator("pre.excerpt .site").all_inner_texts()
        assert len(sites) == len(m.sites)
        for s, text in zip(m.sites, sites):
            n, code = text[1:].strip().split(" ", 1)
            assert int(n) == s.instrumented_line and f"atrex: site {s.name} (id {s.id}" in code
            assert code.strip() in added
        marks = page.locator("table.marks tr").all_inner_texts()
        assert [r.split("\t")[0] for r in marks[1:]] == [s.name for s in m.sites]
        spread = page.locator("table.per-sm tr").all_inner_texts()
        assert [r.split("\t")[0] for r in spread[1:]] == [iv.name for iv in m.intervals]
        # the trace beside the page is the exported one, and the page says how to open it offline
        assert (tmp / "report.pftrace").read_bytes() == trace
        assert page.locator("#trace-file").get_attribute("href") == "report.pftrace"
        assert "Open trace file" in page.locator("ol.steps").inner_text()
        assert "needs the network" in page.locator("body").inner_text()
        rows = page.locator("table.validation tr").all_inner_texts()
        assert [r.split("\t")[0] for r in rows[1:]] == [c["name"] for c in checks]
        assert all("\tok\t" in r for r in rows[1:]) and "valid" in page.locator("h2", has_text="Validation").inner_text()
        imgs = page.locator("img.timeline")
        assert imgs.count() == 1
        assert imgs.evaluate_all("els => els.map(e => e.complete && e.naturalWidth)")[0] > 1000  # decoded picture
        assert imgs.first.is_visible()
        intervals = page.locator("table.intervals tr").all_inner_texts()
        assert [r.split("\t")[0] for r in intervals[1:]] == [iv.name for iv in m.intervals]
        assert f"{100 * art['overhead']:+.2f}%" in page.locator("body").inner_text()
        with ctx.expect_page() as opened:
            page.click("#open-perfetto")
        ui = opened.value
        ui.wait_for_function("window.received !== undefined", timeout=20_000)
        got = ui.evaluate("""async () => {
            const r = window.received;
            const d = await crypto.subtle.digest('SHA-256', r.buffer);
            return {sha: [...new Uint8Array(d)].map(b => b.toString(16).padStart(2, '0')).join(''),
                    size: r.buffer.byteLength, title: r.title, fileName: r.fileName};
        }""")
        assert ui.url.startswith("https://ui.perfetto.dev/")
        assert got == {"sha": hashlib.sha256(trace).hexdigest(), "size": len(trace), "title": "gemm_mma",
                       "fileName": "gemm_mma.pftrace"}
        assert "handed to the Perfetto UI" in page.locator("#perfetto-status").inner_text()
        browser.close()


def test_demo_report_opens_with_the_answer_line(tmp_path, demo_json):
    """The demo's own report, in Chromium: the question, then the line the demo printed, before
    anything else on the page, and under it the same question in SM cycles on the bundled clock = true
    capture; the screenshot is the first screen a reviewer sees."""
    out = json.loads(demo_json[1])
    shown = ("" if out["answer"].startswith("No answer:") else "Answer: ") + out["answer"].replace("`", "")
    with _sync_playwright()() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(Path(out["report"]).as_uri())
        assert page.evaluate("[...document.body.children].slice(0, 2).map(e => e.tagName + '#' + e.id)") == \
            ["H1#question", "P#answer"]
        assert page.locator("#answer").inner_text() == shown
        assert page.locator("#answer").bounding_box()["y"] < 200  # on the first screen
        assert page.locator("#answer-at-clock").inner_text() == clock_answer_line(out["clock_answer"]).replace("`", "")
        assert page.locator("#answer-at-clock").bounding_box()["y"] < 900
        assert page.screenshot(path=str(tmp_path / "demo-report.png"))[:8] == b"\x89PNG\r\n\x1a\n"
        browser.close()


def test_online_link_without_network_says_so(tmp_path, monkeypatch):
    """The Perfetto UI never answers (no network): after PONG_WAIT_S the page says the link needs the
    network and points at the trace file beside it, instead of waiting for ever."""
    monkeypatch.setattr(report, "PONG_WAIT_S", 1)
    cap = tmp_path / "cap"
    shutil.copytree(FIX / "gemm_mma", cap)
    assert invoke("report", cap, "-o", tmp_path / "r.html").exit_code == 0
    with _sync_playwright()() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        ctx = browser.new_context()
        ctx.route("https://ui.perfetto.dev/**", lambda route: route.fulfill(content_type="text/html", body=SILENT_UI))
        page = ctx.new_page()
        page.goto((tmp_path / "r.html").as_uri())
        with ctx.expect_page():
            page.click("#open-perfetto")
        page.wait_for_function("document.getElementById('perfetto-status').textContent.startsWith('No answer')",
                               timeout=10_000)
        status = page.locator("#perfetto-status").inner_text()
        assert "without the network the UI does not load" in status and "trace file beside this page" in status
        browser.close()


def test_report_json_and_grade(built):
    tmp, out = built
    assert out["verdict"] == "valid" and out["grade"] in ("diagnostic", "rejected", "decision_grade")
    assert out["trace"] == str(tmp / "report.pftrace") and out["answer"].startswith("`")
    html = Path(out["report"]).read_text()
    assert html.count("data:image/png;base64,") == 1 and "https://ui.perfetto.dev" in html
    assert "<h2>Measurement" in html and "<h2>Grade</h2>" in html
    order = ['id="answer"', "<h2>The intervals on one axis", "<h2>Where each probe sits", "<h2>Grade",
             "<h2>Validation", "<h2>Marks", "<h2>Per-SM spread", "<h2>Intervals", "<h2>Timeline in Perfetto",
             "<h2>Measurement"]
    assert [html.index(x) for x in order] == sorted(html.index(x) for x in order)


def test_intervals_that_cannot_answer_say_so_at_the_top(tmp_path):
    """The header-kernel example names one interval: the line right after the question says there is
    no answer and why; the axis still shows the interval, with no ratio column."""
    r = invoke("report", FIX / "rowscale_split", "-o", tmp_path / "r.html", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    html = (tmp_path / "r.html").read_text()
    body = html[html.index("</h1>") + 5:]
    assert body.startswith('<p id="answer" class="answer none"><b>No answer:</b> the spec&#x27;s intervals cannot '
                           "answer: the spec names one interval, <code>row_start -&gt; row_end</code>")
    assert out["answer"].startswith("No answer: the spec's intervals cannot answer")
    assert 'data-interval="row_start -&gt; row_end"' in html and "longest ÷ this" not in html


def test_probe_sites_come_from_the_workspace_while_applied_and_say_where_they_were_sought(tmp_path):
    """A capture folder without the patch: the report finds it in the project's workspace (the spec
    applied: the demo's case), in its history once reverted, and otherwise says where it looked."""
    from atrex_inject import snapshot
    project = tmp_path / "project"
    shutil.copytree(Path(__file__).parents[2] / "examples", project / "examples")
    (project / ".git").mkdir()
    spec = project / "examples/specs/gemm_mma.toml"
    m = snapshot.apply(spec).manifest
    cap = project / "build/cap"
    shutil.copytree(FIX / "gemm_mma", cap)
    (cap / "instrumented.patch").unlink()
    shutil.copy(project / ".atrex/gemm_mma/manifest.json", cap / "manifest.json")  # as `capture` copies it in
    for step in ("applied", "reverted"):
        r = invoke("report", cap, "-o", project / "build/r.html")
        assert r.exit_code == 0, r.output
        html = (project / "build/r.html").read_text()
        assert html.count('<pre class="excerpt">') == len(m.sites), step
        if step == "applied":
            snapshot.revert(spec)
            assert not (project / ".atrex" / "gemm_mma").exists()
    shutil.rmtree(project / ".atrex")
    assert invoke("report", cap, "-o", project / "build/r.html").exit_code == 0
    html = (project / "build/r.html").read_text()
    assert '<pre class="excerpt">' not in html and "was not found in" in html
    assert str(project / ".atrex" / "gemm_mma" / "instrumented.patch") in html


def test_excerpts_of_a_cuda_string_in_python_stay_clear_of_the_embedded_header(tmp_path):
    """kernel.py embeds the recorder header in its CUDA string: each site's excerpt is a few lines
    around the site's own line, so it holds none of the header's text."""
    import html
    import re

    from atrex_inject import snapshot
    from atrex_inject.cuda.python.rewrite import runtime_text
    project = tmp_path / "project"
    shutil.copytree(Path(__file__).parents[2] / "examples", project / "examples")
    (project / ".git").mkdir()
    res = snapshot.apply(project / "examples/specs/rmsnorm_nvrtc.toml")
    rows = report._diff_rows(res.patch)
    header = {line.strip() for line in runtime_text().splitlines() if len(line.strip()) > 12}
    assert len(header) > 300
    for s in res.manifest.sites:
        ex = report._excerpt(rows, s.instrumented_line)
        plain = [html.unescape(re.sub(r"<[^>]+>", "", line)) for line in ex.split("\n")]
        numbered = [int(x[1:7]) for x in plain if x[1:7].strip()]
        assert numbered == list(range(s.instrumented_line - report.EXCERPT, s.instrumented_line + report.EXCERPT + 1))
        assert f"atrex: site {s.name} (id {s.id}" in plain[numbered.index(s.instrumented_line)]
        assert not header & {x[8:].strip() for x in plain}, s.name



def test_a_trace_past_the_embed_limit_is_written_beside_the_report(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "EMBED_LIMIT", 1000)
    r = invoke("report", FIX / "reduce_sumsq", "-o", tmp_path / "r.html", "--json")
    assert r.exit_code == 0, r.output
    html = (tmp_path / "r.html").read_text()
    assert (tmp_path / "r.pftrace").stat().st_size > 1000
    assert 'id="atrex-trace"' not in html and "r.pftrace" in html


def test_report_of_a_missing_folder_is_a_usage_error(tmp_path):
    r = invoke("report", tmp_path / "nowhere", "-o", tmp_path / "r.html", "--json")
    assert r.exit_code == 2 and "does not exist" in json.loads(r.output)["error"]
    assert not (tmp_path / "r.html").exists()


def test_missing_measurement_is_a_usage_error(tmp_path):
    r = invoke("report", FIX / "gemm_mma", "-o", tmp_path / "r.html", "--measurement", tmp_path / "none.json",
               "--json")
    err = json.loads(r.output)
    assert r.exit_code == 2 and "cannot read the measurement" in err["error"] and err["path"].endswith("none.json")
    assert not (tmp_path / "r.html").exists()


def test_spec_without_intervals(tmp_path):
    """Synthetic: the reduction's real capture with the intervals deleted from a copy of its manifest.
    The report still has its tables (and no picture); `export --png` says why it cannot draw."""
    cap = tmp_path / "cap"
    shutil.copytree(FIX / "reduce_sumsq", cap)
    m = json.loads((cap / "manifest.json").read_text())
    (cap / "manifest.json").write_text(json.dumps({**m, "intervals": []}))
    r = invoke("report", cap, "-o", tmp_path / "r.html", "--json")
    assert r.exit_code == 0, r.output
    html = (tmp_path / "r.html").read_text()
    assert 'class="validation"' in html and "<img" not in html
    r = invoke("export", cap, "--png", tmp_path / "t.png", "--json")
    assert r.exit_code == 2 and "no intervals" in json.loads(r.output)["error"]


def test_demo_with_a_foreign_capture_reports_instead_of_crashing(tmp_path, monkeypatch):
    """The reduction's real capture in place of the GEMM's: nothing decodes (another source id);
    the demo exits 1 and its report shows the failed check, with no picture and no trace."""
    from atrex_inject import demo
    real = demo.asset_dir
    monkeypatch.setattr(demo, "asset_dir", lambda kind: FIX / "reduce_sumsq" if kind == "demo_capture" else real(kind))
    r = invoke("demo", "--out", tmp_path / "d", "--json")
    assert r.exit_code == 1
    out = json.loads(r.output)
    assert out["validation"] == "rejected" and out["png"] is None and out["reverted_byte_exact"]
    html = Path(out["report"]).read_text()
    assert "stale_provenance" in html and "FAIL" in html and "<img" not in html and "atrex-trace" not in html
