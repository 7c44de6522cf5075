"""The handoff example (examples/cuda/handoff/, examples/specs/handoff/): a producer kernel and a
consumer kernel in two translation units, run together on two streams, handing tiles over through
flags in global memory. Its clean build and its instrumented build (both specs applied, each kernel
with its own recorder symbol) compile for sm_90a and link; each spec declares the other side's
site its causality producer. Each unit's capture sessions are its own: they bind the unit's
recorder symbols, so the linker must not fold the two units' copies into one (the consumer's
launches bound the producer's symbols and recorded nothing on the H200 until the session code had
internal linkage). scripts/gpu-multikernel.sh captures it on an H200."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from atrex_inject.snapshot import runtime_header
from conftest import NVCC_FLAGS, cli

SOURCES = ("producer", "consumer", "main")
SPECS = ("examples/specs/handoff/producer.toml", "examples/specs/handoff/consumer.toml")


def _build(project: Path, out: Path) -> subprocess.CompletedProcess:
    """nvcc -c each unit, then link them: the program the GPU script runs."""
    objs = []
    for name in SOURCES:
        obj = out.parent / f"{out.name}.{name}.o"
        r = subprocess.run(["nvcc", "-O3", *NVCC_FLAGS, f"-I{runtime_header().parent}", "-c", "-o", str(obj),
                            str(project / f"examples/cuda/handoff/{name}.cu")], capture_output=True, text=True)
        if r.returncode:
            return r
        objs.append(str(obj))
    return subprocess.run(["nvcc", *NVCC_FLAGS, "-o", str(out), *objs], capture_output=True, text=True)


def test_clean_and_instrumented_builds_link(project, tmp_path):
    r = _build(project, tmp_path / "handoff.clean")
    assert r.returncode == 0, r.stderr
    for spec in SPECS:  # the global path named: the recorder choice is not this test's question
        code, out = cli("apply", project / spec, "--recorder", "global", "--json")
        assert code == 0, out
    r = _build(project, tmp_path / "handoff.inst")
    assert r.returncode == 0, r.stderr
    symbols = subprocess.run(["nm", "-C", str(tmp_path / "handoff.inst")], capture_output=True, text=True).stdout
    sessions = {line.split()[0] for line in symbols.splitlines() if "Capture::Capture(" in line}
    assert len(sessions) == 2, symbols  # one capture-session constructor per instrumented unit, at its own address
    producer = json.loads((project / ".atrex/handoff_producer/manifest.json").read_text())
    consumer = json.loads((project / ".atrex/handoff_consumer/manifest.json").read_text())
    assert consumer["causality"] == [{"producer": "published", "consumer": "observed", "key": "payload",
                                      "producer_spec": "handoff_producer"}]
    assert producer["causality"] == [{"producer": "released", "consumer": "slot_free", "key": "payload",
                                      "producer_spec": "handoff_consumer"}]
    assert [l["file"] for m in (producer, consumer) for l in m["launches"]] == [
        "examples/cuda/handoff/producer.cu", "examples/cuda/handoff/consumer.cu"]
