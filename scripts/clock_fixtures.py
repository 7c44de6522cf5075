"""Copy the captures of one scripts/gpu-clock.sh run into tests/fixtures/h200/ (a folder per
name of NAMES) and write their section of PROVENANCE.md, before the
section update_fixtures.py writes last (its other sections are left as they are).

    python3 scripts/clock_fixtures.py clock.tar.gz RUN_LABEL [NAME,NAME,...]

RUN_LABEL: how PROVENANCE.md names that GPU call, as update_fixtures.py's does (its date); the names
(default: all of NAMES) choose which captures become fixtures, in a section of their own, so the
fixtures other tests were written against can stay from an earlier call. Afterwards the
golden outputs include the new folders: regenerate them (`python3 tests/golden_outputs.py
tests/golden/outputs`).
"""
from __future__ import annotations

import json
import sys
import tarfile
import tempfile
import textwrap
from pathlib import Path

from update_fixtures import FIX, SPLIT, _copy
from provenance import put_section

from atrex_inject.decode import decode_file
from atrex_inject.manifest import load as load_manifest
from atrex_inject.summary import clock_line

EXAMPLES = ("layernorm", "softmax_rows", "reduce_sumsq", "rmsnorm_nvrtc")
# <ex>_clock8: the same examples' captures in 8-byte clock events, from a run whose recorder writes them
# (gpu-clock.sh names its capture folders <ex>_clock either way): the fixture's name -> its folder in the archive
EIGHT = {f"{ex}_clock8": f"{ex}_clock" for ex in EXAMPLES}
NAMES = ("clock_phases", "clock_phases_resident", "clock_phases8", "clock_phases8_resident", "clock_phases_loaded",
         "gemm_mma_clock", *EIGHT,
         *(f"{ex}_clock" for ex in EXAMPLES), "softmax_rows_clock_wide")
SPECS = {"clock_phases": "`tests/sources/clock_phases.toml` as written (the global path)",
         "clock_phases_resident": "the same spec with `recorder = \"resident\"`, `warps = 4` added by "
                                  "`atrex_inject.spec.with_recorder(spec, 'resident', 4)` (so named `clock_phases_resident`)",
         "clock_phases8": "`tests/sources/clock_phases.toml` renamed `clock_phases8`, its payloads dropped: the "
                          "clock in 8-byte events (the global path)",
         "clock_phases8_resident": "the same with `recorder = \"resident\"`, `warps = 4` added by "
                                   "`with_recorder(spec, 'resident', 4)`",
         "clock_phases_loaded": "`tests/sources/clock_phases_loaded.toml` as written: the same phases timed by warps "
                                "0-3 while warps 4-7 of each CTA stream global memory",
         "gemm_mma_clock": "`examples/specs/gemm_mma.toml` renamed `gemm_mma_clock`, with `clock = true` added and "
                           "`skip = 200` (run with `--warmup 200 --iters 10`)",
         **{f"{ex}_clock": f"`examples/specs/{ex}.toml` as written, renamed `{ex}_clock`, with `clock = true` added"
            + (" (the CUDA string of a Python file, NVRTC-compiled and launched from Python, captured by the launch "
               "hooks)" if ex == "rmsnorm_nvrtc" else " (the harness's own warm-up)") for ex in EXAMPLES},
         **{f"{ex}_clock8": f"the same as `{ex}_clock/`, its clock in 8-byte events (`{ex}_clock` in the archive)"
            for ex in EXAMPLES},
         "softmax_rows_clock_wide": "`examples/specs/softmax_rows.toml` renamed `softmax_rows_clock_wide`, with "
                                    "`clock = true` and `wide = true` added: 16-byte events"}


def heading(names: list[str]) -> str:
    """The section's heading, which names its folders (and finds the section this script wrote before)."""
    return f"## {', '.join(f'{n}/' for n in names)} (the SM clock)"


def section(label: str, device: list[str], rows: list[tuple[str, dict, dict, dict]]) -> str:
    side = rows[0][1]
    d = side["device"]
    lines = [heading([r[0] for r in rows]), "",
             f"{label}: `bash scripts/gpu-clock.sh` on an {d['name']} (UUID {d['uuid']}, {d.get('sm_count', '?')} "
             f"SMs, driver {device[0].split(', ')[-1] if device else '?'}, nvcc "
             f"{device[1].strip() if len(device) > 1 else '?'}, "
             "`-O3 -gencode=arch=compute_90a,code=sm_90a`). Each spec below (events with `%clock`: 16 bytes with a "
             "payload, else 8) was "
             "applied on the GPU host (each folder's `*.instrumented.cu` is the file it compiled), built, run once "
             "with probes off, captured with `atrex-inject capture --spec … --workload … -- BUILD`, validated "
             "against that source and reverted byte for byte.", ""]
    for name, side, m, clock in rows:
        lines.append(f"- `{name}/`: {SPECS[name]}; source id {m.source.source_id[:16]}…, `{side['file']}`, "
                     f"workload `{side['workload']}`, {side.get('time_utc', '?')}; {clock_line(clock)}.")
    lines += ["", "These files are device output: never edit them. tests/captures/test_clock.py reads them, and plants "
                  "faults in synthetic copies.", ""]
    return "\n".join(textwrap.fill(line, 100, subsequent_indent="  " if line.startswith("- ") else "",
                                   break_on_hyphens=False) if line and not line.startswith("## ") else line
                     for line in lines)


def main(tar: Path, label: str, names: list[str]) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        with tarfile.open(tar) as f:
            f.extractall(t, filter="data")
        device = (t / "device.txt").read_text().splitlines()
        for name in names:
            folder = EIGHT.get(name, name)
            d = t / "cap" / folder
            if not any(d.glob("*.atrex")):
                sys.exit(f"{tar}: no capture of {folder} in it (see its {folder}.capture.txt); nothing written")
            _copy(d, FIX / name, [*d.glob("*-launch*"), d / "manifest.json", d / "run.json",
                                  *d.glob(f"{folder}.instrumented.*")])
            m = load_manifest(FIX / name / "manifest.json")
            raw = next((FIX / name).glob("*.atrex"))
            side = json.loads(raw.with_suffix(".json").read_text())
            rows.append((name, side, m, decode_file(raw, m).meta.clock))
    for name in names:
        for p in (FIX / name).iterdir():
            p.chmod(0o644)
    prov = FIX / "PROVENANCE.md"
    prov.write_text(put_section(prov.read_text(), heading(names) + "\n", section(label, device, rows), before=SPLIT))
    print("\n".join(f"{n}: {clock_line(c)}" for n, _, _, c in rows))
    print("now regenerate the golden outputs, which cover every fixture: python3 tests/golden_outputs.py tests/golden/outputs")


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    chosen = sys.argv[3].split(",") if len(sys.argv) == 4 else list(NAMES)
    if unknown := [n for n in chosen if n not in NAMES]:
        sys.exit(f"unknown capture name(s) {', '.join(unknown)}: choose among {', '.join(NAMES)}")
    main(Path(sys.argv[1]), sys.argv[2], chosen)
