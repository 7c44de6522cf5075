"""Causality as a check (`[[causality]]` in the spec, `causality` in validate) on real H200 captures
of the bf16 GEMM. In its kernel, thread 0 initialises the stage barriers (site `barrier_init`, role
cta) before a __syncthreads that every warp passes before its first k-tile (site `iter`): each
warp's first `iter` observes `barrier_init`. Each k-tile ends with `mma_done` (before a
__syncthreads) and `synced` (after it), so every warp's k-th `synced` should observe every warp's
k-th `mma_done`, and on all three H200 captures of the kernel it does not: the timer read after the
barrier comes up to 672 ns before another warp's read before it. The check says so where the
summary shows a positive `mma_done -> synced`. The fault test plants one shifted event in a copy of
a real capture (a synthetic change, named so) and expects exactly that rejection."""
from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path

import numpy as np
import pytest

from atrex_inject import decode
from atrex_inject import manifest as mf
from atrex_inject.layout import HEADER_BYTES, HEADER_DTYPE
from conftest import cli, edit_file, refused

H200 = Path(__file__).parent.parent / "fixtures" / "h200"
SPEC = "examples/specs/gemm_mma.toml"


def _declared(folder: Path, dst: Path, *declarations: dict) -> Path:
    """A copy of a real capture whose manifest declares `declarations` (the device output, the raw
    files and sidecars, is copied as it is)."""
    shutil.copytree(folder, dst)
    m = json.loads((dst / mf.FILE_NAME).read_text())
    m["causality"] = list(declarations)
    (dst / mf.FILE_NAME).write_text(json.dumps(m, indent=2) + "\n")
    return dst


BARRIER = {"producer": "barrier_init", "consumer": "iter", "key": "cta"}
TILE = {"producer": "mma_done", "consumer": "synced", "key": "cta"}


def _validate(folder: Path) -> tuple[int, dict]:
    code, out = cli("validate", folder, "--json")
    return code, json.loads(out)


def test_the_barrier_is_observed_on_the_real_capture(tmp_path):
    cap = _declared(H200 / "gemm_mma", tmp_path / "cap", BARRIER)
    code, r = _validate(cap)
    assert code == 0 and r["verdict"] == "valid", r
    assert [c["name"] for c in r["checks"]][-1] == "causality"
    code, s = cli("summary", cap, tmp_path / "none", "--json")  # a second folder that is no capture: refused
    assert code == 2
    shutil.copytree(H200 / "reduce_sumsq", tmp_path / "other")
    code, out = cli("summary", cap, tmp_path / "other", "--json")
    assert code == 0, out
    (h,) = json.loads(out)["handoffs"]
    # 16 recorded CTAs x 8 warps: each warp's first k-tile starts 352 ns or more after thread 0's barrier init
    assert (h["causality"], h["matched"], h["violations"], h["bound_ns"]) == ("barrier_init => iter", 128, 0, 32)
    assert h["handoff_ns"]["min"] == 352 and h["handoff_ns"]["max"] == 960


@pytest.mark.parametrize("folder, launch, n, where, ns", [
    ("gemm_mma", "gemm_bf16-launch3", 718, "CTA (0, 16, 0), occurrence 16, thread 160", 512),
    ("gemm_mma_clock", "gemm_bf16-launch200", 922, "CTA (0, 6, 0), occurrence 7, thread 128", 608),
    ("gemm_mma_staged", "gemm_bf16-launch3", 1516, "CTA (0, 24, 0), occurrence 1, thread 96", 672),
])
def test_the_k_tile_barrier_is_not_observed_by_the_timer(tmp_path, folder, launch, n, where, ns):
    """A finding of the real captures, pinned: `synced` (after the __syncthreads) precedes other
    warps' `mma_done` (before it) by up to hundreds of ns, so `mma_done -> synced` does not time
    the barrier's wait; the check rejects what the interval table would show as positive."""
    cap = _declared(H200 / folder, tmp_path / "cap", TILE)
    code, r = _validate(cap)
    assert code == 1
    failed = [c for c in r["checks"] if not c["ok"]]
    assert [c["name"] for c in failed] == ["causality"]
    assert failed[0]["details"] == [
        f"gemm_bf16 (cap) {launch}: {n} event(s) of consumer 'synced' precede the gemm_bf16 (cap) 'mma_done' "
        f"event(s) they observe by more than the bound of 32 ns; the earliest: {where}, {ns} ns before"]


def _plant_early_iter(cap: Path) -> tuple[int, int, int]:
    """Synthetic fault: one warp's first `iter` event moved back to its own `tile_start` time (still
    after its owner's earlier events, so only causality can tell), in the raw file, its sidecar's
    CRC updated. Returns the owner's linear CTA, its thread and how far before barrier_init it now lies."""
    m = mf.load(cap / mf.FILE_NAME)
    raw_path = cap / "gemm_bf16-launch3.atrex"
    launch = decode.decode_file(raw_path, m)
    ev, own = launch.events, launch.owners
    site = {s.name: s.id for s in m.sites}
    init = {int(own["cta"][o]): t for o, s, t in zip(ev["owner"], ev["site"], ev["t_ns"]) if s == site["barrier_init"]}
    for o in np.unique(ev["owner"][ev["site"] == site["iter"]]):
        mine = ev["owner"] == o
        start = int(ev["t_ns"][mine & (ev["site"] == site["tile_start"])][0])
        gap = int(init[int(own["cta"][o])]) - start
        if own["group"][o] == 0 and gap > 64:
            break
    raw = bytearray(raw_path.read_bytes())
    h = np.frombuffer(bytes(raw[:HEADER_BYTES]), dtype=HEADER_DTYPE)[0]
    k = int(np.flatnonzero(ev["site"][mine] == site["iter"])[0])
    seq = int(ev["seq"][mine][k])
    at = int(h["events_offset"]) + (int(o) * int(h["capacity"]) + seq) * int(h["event_bytes"])
    raw[at:at + 4] = (start & 0xFFFFFFFF).to_bytes(4, "little")
    raw_path.write_bytes(bytes(raw))
    side_path = raw_path.with_suffix(".json")
    side = json.loads(side_path.read_text())
    side["crc32"] = zlib.crc32(bytes(raw))
    side_path.write_text(json.dumps(side) + "\n")
    return int(own["cta"][o]), int(own["thread"][o]), gap


def test_one_consumer_event_planted_before_its_producer_is_rejected(tmp_path):
    cap = _declared(H200 / "gemm_mma", tmp_path / "synthetic_early_iter", BARRIER)
    cta, thread, gap = _plant_early_iter(cap)
    code, r = _validate(cap)
    assert code == 1 and r["verdict"] == "rejected"
    failed = [c for c in r["checks"] if not c["ok"]]
    assert [(c["name"], c["count"]) for c in failed] == [("causality", 1)]  # the one fault, nothing else
    gx = 32  # the capture's grid is (32, 32, 1)
    assert failed[0]["details"] == [
        f"gemm_bf16 (synthetic_early_iter) gemm_bf16-launch3: 1 event(s) of consumer 'iter' precede the gemm_bf16 "
        f"(synthetic_early_iter) 'barrier_init' event(s) they observe by more than the bound of 32 ns; the earliest: "
        f"CTA ({cta % gx}, {cta // gx}, 0), occurrence 1, thread {thread}, {gap} ns before"]


def test_a_capture_without_the_declaration_reports_as_before():
    code, r = _validate(H200 / "gemm_mma")
    assert code == 0 and "causality" not in [c["name"] for c in r["checks"]]


def test_a_producer_of_another_spec_is_checked_with_its_capture(tmp_path):
    decl = {"producer": "tile_ready", "consumer": "iter", "key": "payload", "producer_spec": "tile_producer"}
    cap = _declared(H200 / "gemm_mma", tmp_path / "cap", decl)
    code, r = _validate(cap)
    assert code == 0 and any("its producer is spec 'tile_producer''s, checked when this capture is validated with "
                             "that spec's" in n for n in r["notes"])
    shutil.copytree(H200 / "gemm_mma_staged", tmp_path / "staged")
    code, out = cli("validate", cap, tmp_path / "staged", "--json")
    r = json.loads(out)
    assert r["notes"] == ["causality tile_producer.tile_ready => iter of gemm_bf16 (cap): not checked: no capture of "
                          "spec 'tile_producer' is among the folders"]


# ---- the spec's declaration ----------------------------------------------------------------
def _spec_with(project: Path, table: str) -> Path:
    return edit_file(project / SPEC, ("[expect]", table + "\n[expect]"))


def test_apply_records_the_declaration_in_the_manifest(project):
    spec = _spec_with(project, '[[causality]]\nproducer = "barrier_init"\nconsumer = "iter"\nkey = "cta"\n')
    code, out = cli("apply", spec, "--recorder", "global", "--json")
    assert code == 0, out
    m = json.loads((project / ".atrex/gemm_mma/manifest.json").read_text())
    assert m["causality"] == [BARRIER]
    assert list(m).index("causality") == list(m).index("expect") + 1
    assert mf.load(project / ".atrex/gemm_mma/manifest.json").causality[0].name == "barrier_init => iter"


@pytest.mark.parametrize("table, key, needles", [
    ('producer = "barrier_init"\nconsumer = "nowhere"\n', "consumer",
     ("causality consumer 'nowhere' is not a site of this spec",)),
    ('producer = "mma_done"\nconsumer = "synced"\n', "consumer",
     ("causality consumer site 'synced' records no payload, which key \"payload\" matches on",
      "give site 'synced' `payload = ...`")),
    ('producer = "tile_ready"\nconsumer = "iter"\nkey = "cta"\nproducer_spec = "other"\n', "key",
     ("key \"cta\" relates owners of one CTA, which a producer of another kernel is not",)),
    ('producer = "iter"\nconsumer = "iter"\nkey = "cta"\n', "consumer",
     ("causality producer and consumer are the same site 'iter'",)),
    ('producer = "iter"\nconsumer = "synced"\nkey = "order"\n', "key",
     ("causality key 'order' is not one of cta, payload",)),
])
def test_a_declaration_that_cannot_hold_is_refused_at_its_line(project, table, key, needles):
    spec = _spec_with(project, "[[causality]]\n" + table)
    lines = spec.read_text().split("\n")
    at = next(i for i in range(lines.index("[[causality]]"), len(lines)) if lines[i].startswith(f"{key} =")) + 1
    assert f"gemm_mma.toml:{at}: " in refused(spec, *needles)
