"""Large-capture benchmark: decode, validate, summary and the default Perfetto export of one capture,
each through the CLI in a fresh process exactly as a user runs it, timed wall-clock, with each
process's CPU time and peak resident memory (wait4's rusage).

    python bench/large_capture/run.py CAPTURE_DIR [--manifest M.json] [--json OUT] [--repeat N]
    python bench/large_capture/run.py --synthetic 17300000 --repeat 3   # SYNTHETIC capture, not device data

CAPTURE_DIR is a folder a program wrote with ATREX_TIMELINE_OUT (its manifest.json, or --manifest).
Prints a table and writes bench/large_capture/results.json ({date, device, events, raw_bytes,
decode_s, validate_s, summary_s, export_s, pftrace_bytes, peak_rss_bytes, ...}); a --synthetic run
writes results-synthetic.json instead and says synthetic in every line it prints. The trace is parsed
back afterwards (untimed) to count its events. Targets (issue 17): the four steps under 5 s in all,
the trace under 100 MB, peak memory under 2x the raw bytes.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
STEPS = ("decode", "validate", "summary", "export")


def cli(args: list[str]) -> tuple[float, int, str, float]:
    """Run `atrex-inject ARGS` in a fresh interpreter: (wall seconds, peak RSS bytes, stdout, CPU
    seconds: user + system, which a machine shared with other work inflates less than wall time)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-m", "atrex_inject.cli", *args], stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)  # reaped here (not by Popen) to read the child's own peak RSS
        wall = time.perf_counter() - t
        out.seek(0)
        err.seek(0)
        text, problem = out.read(), err.read()
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):  # validate exits 1 on a rejected capture: still a timed run
        sys.exit(f"atrex-inject {' '.join(args)} failed with exit {code}:\n{problem or text}")
    return wall, usage.ru_maxrss * 1024, text, usage.ru_utime + usage.ru_stime


def trace_events(path: Path) -> int:
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace
    tr = Trace()
    tr.ParseFromString(path.read_bytes())
    return sum(1 for p in tr.packet if p.HasField("track_event"))


def run(capture: Path, manifest: Path | None, synthetic: bool, repeat: int = 1) -> dict:
    man = ["--manifest", str(manifest)] if manifest else []
    raw = sorted(capture.glob("*.atrex"))
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "capture.pftrace"
        args = {"decode": ["decode", str(capture), *man, "--out", str(Path(tmp) / "decoded"), "--json"],
                "validate": ["validate", str(capture), *man, "--json"],
                "summary": ["summary", str(capture), *man, "--json"],
                "export": ["export", str(capture), *man, "--perfetto", str(trace), "--json"]}
        # each step's fastest of `repeat` runs (the four in turn each round, so none has the page cache to itself)
        rounds = [{s: cli(a) for s, a in args.items()} for _ in range(repeat)]
        res = {s: min((r[s] for r in rounds), key=lambda x: x[0]) for s in STEPS}
        decoded = json.loads(res["decode"][2])
        verdict = json.loads(res["validate"][2])["verdict"]
        selection = json.loads(res["export"][2])["selection"]
        pftrace_bytes = trace.stat().st_size
        n_trace = trace_events(trace)
    side = json.loads(raw[0].with_suffix(".json").read_text()) if raw else {}
    dev = side.get("device", {}).get("name", "unknown device")
    out = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "device": f"{dev}; host {socket.gethostname()} ({os.cpu_count()} CPUs)",
           "events": sum(l["counts"]["events"] for l in decoded["launches"]),
           "raw_bytes": sum(p.stat().st_size for p in raw),
           **{f"{s}_s": round(res[s][0], 3) for s in STEPS},
           "pftrace_bytes": pftrace_bytes, "peak_rss_bytes": max(r[1] for r in res.values()),
           "synthetic": synthetic, "launches": len(decoded["launches"]), "verdict": verdict, "repeat": repeat,
           "peak_rss_bytes_per_step": {s: res[s][1] for s in STEPS},
           "cpu_s_per_step": {s: round(res[s][3], 3) for s in STEPS}, "trace_events": n_trace,
           "owners_in_full": sum(c["n_kept"] for c in selection),
           "owners_left_out": sum(c["n_left_out"] for c in selection)}
    out["total_s"] = round(sum(out[f"{s}_s"] for s in STEPS), 3)
    return out


def table(r: dict) -> str:
    label = "SYNTHETIC capture (not device data): " if r["synthetic"] else ""
    lines = [f"{label}{r['events']:,} events, {r['raw_bytes'] / 1e6:.1f} MB raw, {r['launches']} launch(es); "
             f"{r['device']}", f"{'step':<10}{'wall s':>9}{'CPU s':>9}{'M events/s':>12}{'peak RSS MB':>13}"]
    for s in STEPS:
        lines.append(f"{s:<10}{r[s + '_s']:>9.2f}{r['cpu_s_per_step'][s]:>9.2f}{r['events'] / r[s + '_s'] / 1e6:>12.1f}"
                     f"{r['peak_rss_bytes_per_step'][s] / 1e6:>13.0f}")
    lines += [f"{'total':<10}{r['total_s']:>9.2f}{sum(r['cpu_s_per_step'].values()):>9.2f}   (target < 5 s wall)",
              f"trace {r['pftrace_bytes'] / 1e6:.1f} MB, {r['trace_events']:,} track events, "
              f"{r['owners_in_full']} owners in full, {r['owners_left_out']} left out (target < 100 MB)",
              f"peak RSS {r['peak_rss_bytes'] / 1e6:.0f} MB = {r['peak_rss_bytes'] / max(r['raw_bytes'], 1):.2f}x raw "
              f"(target < 2x); validate verdict: {r['verdict']}"]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("capture", type=Path, nargs="?", help="capture folder (raw .atrex files + manifest.json)")
    ap.add_argument("--manifest", type=Path, help="manifest.json (default: CAPTURE/manifest.json)")
    ap.add_argument("--synthetic", type=int, metavar="EVENTS", help="benchmark a SYNTHETIC capture of this many "
                                                                     "events instead (not device data)")
    ap.add_argument("--json", type=Path, help="where to write the results (default: next to this script)")
    ap.add_argument("--repeat", type=int, default=1, metavar="N", help="run the four steps N times and keep each "
                                                                      "step's fastest run (default 1)")
    a = ap.parse_args()
    if (a.capture is None) == (a.synthetic is None):
        ap.error("give CAPTURE_DIR or --synthetic EVENTS")
    if a.synthetic:
        with tempfile.TemporaryDirectory() as tmp:
            # written by another process: a child forked from a big parent would inherit its peak RSS
            subprocess.run([sys.executable, "-c", "import sys; from atrex_inject.synthetic import write_capture; "
                            "write_capture(sys.argv[1], int(sys.argv[2]))", tmp, str(a.synthetic)], check=True)
            r = run(Path(tmp), None, True, a.repeat)
    else:
        if not a.capture.is_dir():
            ap.error(f"{a.capture} is not a folder")
        r = run(a.capture, a.manifest, False, a.repeat)
    dest = a.json or HERE / ("results-synthetic.json" if a.synthetic else "results.json")
    dest.write_text(json.dumps(r, indent=2) + "\n")
    print(table(r))
    print(f"-> {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
