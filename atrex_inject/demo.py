"""`atrex-inject demo`: the README's main job on the embedded default, with no GPU needed.

Copies the bundled GEMM example and its spec into a work folder, applies the spec, checks that
the bundled real H200 capture was recorded from exactly this instrumented source (same source
id), then decodes, validates, summarizes, prints the answer line (answer.py), writes the HTML
report with the Perfetto trace beside it and the PNG, and reverts byte-exact. Where the answer's
phases are a few timer ticks, the answer (printed and in the report) gives the same question
answered in SM cycles on the bundled, validated capture of the same GEMM recorded with the clock,
instead of advising to record it. Then it compares two bundled H200 captures of one kernel before
and after a one-line change (docs/compare.md).
With --live it builds the instrumented example and captures on this machine's GPU instead.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import manifest as mf
from . import snapshot
from .answer import answers, clock_answer_line
from .assets import asset_dir
from .compare import answer_line as compare_answer, compare_dirs, render_text as compare_text
from .compare_picture import render_png as compare_png
from .decode import capture_files
from .errors import AtrexError
from .evidence import gather
from .fsio import sha256_file, write_atomic
from .patch import diffstat
from .progress import step
from .report import render as render_report
from .summary import clock_line, render_text
from .timeline import render_png

SPEC = "gemm_mma"


def _say(console, text: str) -> None:
    if console is not None:
        console.print(text, markup=False, highlight=False)


def _check_live() -> None:
    """--live builds and runs on this machine: say before anything is applied when it cannot."""
    from .gpu import gpu_available
    if shutil.which("nvcc") is None or not gpu_available():
        raise AtrexError("--live needs nvcc and a CUDA GPU on this machine", hint="run the demo without --live")


def _live_capture(work: Path, src: Path, cap: Path, console) -> None:
    exe = work / "gemm_mma.inst"
    _say(console, "build: nvcc -O3 -gencode=arch=compute_90a,code=sm_90a (instrumented)")
    subprocess.run(["nvcc", "-O3", "-gencode=arch=compute_90a,code=sm_90a",
                    f"-I{snapshot.runtime_header().parent}", f"-I{src.parent}", "-o", str(exe), str(src)], check=True)
    cap.mkdir(parents=True)
    env = dict(os.environ, ATREX_TIMELINE_OUT=str(cap), ATREX_WORKLOAD="gemm_mma:seed=1")
    run = subprocess.run([str(exe), "--warmup", "3", "--iters", "10"], env=env, capture_output=True, text=True)
    _say(console, run.stdout.strip())
    if run.returncode != 0:
        raise AtrexError(f"the instrumented example failed (exit {run.returncode}): {run.stderr[-500:]}")


def _clock_answer(m: mf.Manifest, work: Path) -> tuple[dict | None, str | None]:
    """The demo's question answered on the bundled capture of the same GEMM recorded with the SM
    clock, copied to WORK/clock_capture: (answer.answer's `clocked`, None), or (None, why it is not
    used; None when none is bundled). It is used only where it is the same kernel of the same clean
    source with the same intervals, recorded with the clock, valid against the instrumented source
    it was built from, and none of its compared phases is left a few timer ticks. Its manifest is
    the clock spec's; the copy's gets the demo spec's `pair` (the same question), so `report` on it
    answers as here."""
    bundled = asset_dir("demo_clock_capture")
    if not (bundled / mf.FILE_NAME).is_file():
        return None, None
    cap = Path(shutil.copytree(bundled, work / "clock_capture", dirs_exist_ok=True))
    step("validating the bundled clock = true capture")
    try:
        mc = mf.load(cap / mf.FILE_NAME)
        question = lambda x: (x.kernel, x.source.path, x.source.clean_sha256, x.intervals)
        if not mc.capture.clock or question(mc) != question(m):
            return None, f"{cap} is not this GEMM's question recorded with the SM clock"
        mc = dataclasses.replace(mc, pair=m.pair)
        write_atomic(cap / mf.FILE_NAME, json.dumps(mc.to_json(), indent=1) + "\n")
        built = sorted(cap.glob("*.instrumented.cu"))
        ev = gather(cap, mc, source=built[0] if built else None)
    except AtrexError as e:
        return None, f"{cap} could not be read: {e}"
    report = ev.capture
    if report["verdict"] != "valid":
        failed = ", ".join(c["name"] for c in report["checks"] if not c["ok"])
        return None, f"{cap} is {report['verdict']} (failed: {failed})"
    (a,) = answers(report, ev.launches[:1], mc)[:1]
    if a["status"] == "none" or a["quantized"]:
        return None, f"its answer is not in SM cycles: {a['text']}"
    launch, checks, file = ev.launches[0], report["checks"], capture_files(cap)[0]
    gpu = (launch.meta.sidecar.device or {}).get("name") or "the GPU not named"
    return {"capture": str(cap), "file": file.name, "verdict": report["verdict"], "text": a["text"],
            "clock": report["summaries"][0]["clock"],
            "source": f"the same GEMM and intervals, recorded with `[capture] clock = true` on {gpu}: "
                      f"{file}, {report['verdict']}, {sum(c['ok'] for c in checks)}/{len(checks)} "
                      f"checks pass"}, None


def run_demo(out_dir: Path | None, live: bool, console=None) -> dict:
    if live:
        _check_live()
    examples, bundled = asset_dir("examples"), asset_dir("demo_capture")
    if not examples.is_dir() or not bundled.is_dir():
        raise AtrexError(f"the demo's example or capture is missing ({examples}, {bundled})",
                         hint="reinstall atrex-inject (pip install .) or run it from a source checkout")
    work = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="atrex-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    shutil.copytree(examples, work / "examples", dirs_exist_ok=True)
    (work / ".git").mkdir(exist_ok=True)  # the project root the spec's paths are confined to
    spec = work / "examples" / "specs" / f"{SPEC}.toml"
    src = work / "examples" / "cuda" / f"{SPEC}.cu"
    clean_sha = sha256_file(src)

    res = snapshot.apply(spec, options=snapshot.Options(progress=step))
    m = res.manifest
    added, removed = diffstat(res.patch)
    _say(console, f"1. apply {spec.relative_to(work)}: {m.source.path} +{added} -{removed} lines, "
                  f"{len(m.sites)} sites, patch {res.workspace / m.patch.path}")
    cap = work / "capture"
    if live:
        _live_capture(work, src, cap, console)
    else:
        shutil.copytree(bundled, cap, dirs_exist_ok=True)
        shutil.copy(res.workspace / mf.FILE_NAME, cap / mf.FILE_NAME)
    files = capture_files(cap)
    _say(console, f"2. capture: {len(files)} launch file(s) in {cap} "
                  f"({'recorded now' if live else 'recorded on an H200, bundled'})")
    ev = gather(cap, m, source=src)
    report, launches = ev.capture, ev.launches
    failed = [c for c in report["checks"] if not c["ok"]]
    _say(console, f"3. validate: {report['verdict']} ({report['events']} events; "
                  f"{len(report['checks']) - len(failed)}/{len(report['checks'])} checks pass)")
    for c in report["checks"]:
        _say(console, f"     {c['name']:<22} {'ok' if c['ok'] else 'FAIL ' + str(c['count'])}")
    _say(console, "4. summary (recomputed from canonical events):")
    for s in report["summaries"]:
        _say(console, "   " + render_text(s).replace("\n", "\n   "))
    clocked, not_used = _clock_answer(m, work)
    step("writing the report")
    page = render_report(ev, work / "report.html", str(cap), clocked=clocked)
    _say(console, f"5. answer: {page['answer']['text']}")
    cycles = page["answer"].get("at_clock")  # where its phases are a few timer ticks
    if cycles:
        _say(console, f"   {clock_answer_line(cycles)}")
        _say(console, f"   its {clock_line(cycles['clock'])}")
    elif not_used and page["answer"].get("quantized"):
        _say(console, f"   (the bundled clock = true capture is not shown: {not_used})")
    trace, png, panels = page["trace"], None, None
    if launches:
        step("drawing the picture")
        png, panels = render_png(launches[0], m, work / "timeline.png")
        _say(console, f"6. export: {page['report']} (the question, its answer, where each probe sits, the tables: "
                      f"open this first), {trace} (the Perfetto trace: the report says how to open it) and {png} "
                      f"(per interval: durations and a zoomed swimlane)")
    else:
        _say(console, f"6. export: no launch decoded, nothing to draw; {page['report']} shows the failed checks")
    rv = snapshot.revert(spec)
    restored = sha256_file(src) == clean_sha
    _say(console, f"7. revert: {m.source.path} restored byte for byte: {'yes' if restored else 'NO'}")
    comparison = None
    if (asset_dir("compare_captures") / "before").is_dir():
        caps = shutil.copytree(asset_dir("compare_captures"), work / "compare", dirs_exist_ok=True)
        step("comparing the bundled before and after captures (validating both, then the bootstrap)")
        c = compare_dirs(caps / "before", caps / "after")
        comparison = c.result
        _say(console, f"8. compare: H200 captures of tests/sources/compare/sumsq.cu before and after one change (its "
                      f"streaming loop unrolled by 4), picture {compare_png(c, work / 'compare.png')}")
        _say(console, f"   answer: {compare_answer(c.result)}")
        _say(console, "   " + compare_text(c.result).replace("\n", "\n   "))
    _say(console, f"work folder: {work}")
    return {"work": str(work), "validation": report["verdict"], "checks": report["checks"],
            "summaries": report["summaries"], "answer": page["answer"]["text"], "perfetto": trace,
            "png": png and str(png), "panels": panels, "report": page["report"],
            "reverted_byte_exact": restored, "archived": rv["archived"], "live": live, "comparison": comparison,
            "clock_answer": cycles, "clock_answer_not_used": not_used}
