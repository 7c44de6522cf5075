"""The HTML report, opened in a real browser (Debian's chromium driven by Playwright): it shows the
validation table and the pictures, and its Perfetto link hands the UI exactly the exported trace.

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
from atrex_inject.cli import app

FIX = Path(__file__).parent / "fixtures" / "h200"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
PERFETTO_STUB = """<!doctype html><title>stub Perfetto UI</title><script>
window.addEventListener('message', e => {
  if (e.data === 'PING') { e.source.postMessage('PONG', '*'); return; }
  if (e.data && e.data.perfetto) { window.received = e.data.perfetto; }
});
</script>"""
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
    with _sync_playwright()() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        ctx = browser.new_context()
        ctx.route("https://ui.perfetto.dev/**", lambda route: route.fulfill(content_type="text/html",
                                                                          body=PERFETTO_STUB))
        page = ctx.new_page()
        page.goto(Path(out["report"]).as_uri())
        rows = page.locator("table.validation tr").all_inner_texts()
        assert [r.split("\t")[0] for r in rows[1:]] == [c["name"] for c in checks]
        assert all("\tok\t" in r for r in rows[1:]) and "valid" in page.locator("h2", has_text="Validation").inner_text()
        imgs = page.locator("img.timeline")
        assert imgs.count() == 1
        assert imgs.evaluate_all("els => els.map(e => e.complete && e.naturalWidth)")[0] > 1000  # decoded picture
        assert imgs.first.is_visible()
        intervals = page.locator("table.intervals tr").all_inner_texts()
        assert [r.split("\t")[0] for r in intervals[1:]] == ["iter -> stage_ready", "stage_ready -> mma_done",
                                                            "tile_start -> epilogue"]
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


def test_report_json_and_grade(built):
    _, out = built
    assert out["verdict"] == "valid" and out["grade"] in ("diagnostic", "rejected", "decision_grade")
    html = Path(out["report"]).read_text()
    assert html.count("data:image/png;base64,") == 1 and "https://ui.perfetto.dev" in html
    assert "<h2>Measurement" in html and "<h2>Grade</h2>" in html


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
