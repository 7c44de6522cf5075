"""Copy the captures of one scripts/gpu-multikernel.sh run into tests/fixtures/h200/handoff/ and
write their section of tests/fixtures/h200/PROVENANCE.md ("## handoff/", before rowscale_split/, the
last section, which scripts/update_fixtures.py writes).

    python scripts/multikernel_fixtures.py multikernel.tar.gz

handoff/capture/ is the one run of both kernels (handoff_producer/ and handoff_consumer/, each with its
calibration, clock.json); handoff/twoproc/a and b are the consumer's captures of the same program run
twice at once, in two processes on the one GPU, each calibrated on its own.
"""
from __future__ import annotations

import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

from atrex_inject import clockalign
from atrex_inject.manifest import load as load_manifest

from provenance import put_section

REPO = Path(__file__).resolve().parent.parent
FIX = REPO / "tests" / "fixtures" / "h200" / "handoff"
HEADING = "## handoff/"
COPIES = {"capture/handoff_producer": "handoff/handoff_producer", "capture/handoff_consumer": "handoff/handoff_consumer",
          "twoproc/a": "twoproc/a/handoff_consumer", "twoproc/b": "twoproc/b/handoff_consumer"}


def _section(t: Path) -> str:
    device = (t / "device.txt").read_text().splitlines()
    _, name, uuid, bus, driver = (x.strip() for x in device[0].split(","))
    rows = []
    for dest in COPIES:
        d = FIX / dest
        m = load_manifest(d / "manifest.json")
        side = next(d.glob("*-launch*.json")).name
        a = clockalign.read(d)
        rows.append(f"| {dest} | {m.spec.path} | {m.spec.sha256[:16]}… | {m.source.clean_sha256[:16]}… | "
                    f"{m.source.source_id[:16]}… | {side} | {a.start.offset_ns} / {a.end.offset_ns} | "
                    f"{a.start.half_ns:.0f} / {a.end.half_ns:.0f} |")
    return "\n".join([
        HEADING + " (two kernels that hand tiles over, on one timeline)", "",
        f"`bash scripts/gpu-suite.sh multikernel` (scripts/gpu-multikernel.sh) on an {name} (UUID {uuid}, PCI {bus},",
        f"driver {driver}; nvcc {device[1]}), {device[2]}, copied by `python scripts/multikernel_fixtures.py`.",
        "examples/cuda/handoff/ with both",
        "specs of examples/specs/handoff/ applied, its three units built (`-O3 -gencode=arch=compute_90a,code=sm_90a`),",
        "the clean build run alone for its workload, then one run captured with `atrex-inject capture --spec",
        "producer.toml --spec consumer.toml --calibrate clockcal -- handoff --warmup 3 --iters 10`",
        "(ATREX_TIMELINE_DEFER=1: each side's launch waits for the other); `twoproc/a` and `twoproc/b` are the",
        "same capture run twice at once in two processes. Offsets are host minus device timer (ns) at the",
        "calibration's start and end, with their error bounds.", "",
        "| folder | spec | spec sha256 | clean source sha256 | source id | launch | offset (ns) | bound (ns) |",
        "|---|---|---|---|---|---|---|---|", *rows, "", "Device output: never edit it.", ""])


def main(tar: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        with tarfile.open(tar) as f:
            f.extractall(t, filter="data")
        t = t / "multikernel"
        shutil.rmtree(FIX, ignore_errors=True)
        for dest, src in COPIES.items():
            if not any((t / src).glob("*.atrex")) or not (t / src / "manifest.json").is_file():
                raise SystemExit(f"{tar}: no whole capture in {src}: see the logs in the archive")
            shutil.copytree(t / src, FIX / dest)
        section = _section(t)
    prov = FIX.parent / "PROVENANCE.md"
    prov.write_text(put_section(prov.read_text(), HEADING, section, before="## rowscale_split/"))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
