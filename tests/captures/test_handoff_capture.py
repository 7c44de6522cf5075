"""The handoff example captured on an H200 (tests/fixtures/h200/handoff/, PROVENANCE.md): a producer
kernel and a consumer kernel on two streams, one run, one timer axis. Each spec declares the other
side's site its causality producer, so validating the two captures together checks both handoffs on
the real capture; a copy with one consumer event planted before its producer's (a synthetic change,
named so) is rejected by exactly that check. twoproc/ holds the consumer's captures of two processes
run at once on the one GPU, each calibrated on its own: their true offset is zero, and the alignment
check holds it within the calibrations' bounds."""
from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path

import numpy as np

from atrex_inject import clockalign, decode
from atrex_inject import manifest as mf
from atrex_inject.layout import HEADER_BYTES, HEADER_DTYPE
from conftest import cli

HANDOFF = Path(__file__).parent.parent / "fixtures" / "h200" / "handoff"


def _validate(*folders: Path) -> tuple[int, dict]:
    code, out = cli("validate", *folders, "--json")
    return code, json.loads(out)


def test_both_handoffs_hold_on_the_real_capture():
    code, r = _validate(HANDOFF / "capture")
    assert code == 0 and r["verdict"] == "valid", r
    assert [c["verdict"] for c in r["captures"]] == ["valid", "valid"]
    assert [(c["name"], c["ok"]) for c in r["checks"]] == [("one_run", True), ("alignment", True), ("causality", True)]
    seen = {h["causality"]: (h["matched"], h["unmatched"], h["violations"], h["bound_ns"]) for h in r["handoffs"]}
    # 32 CTAs x 64 tiles each way; a producer's first kSlots tiles wait for no released slot (payload: none)
    assert seen == {"handoff_producer.published => observed": (2048, 0, 0, 32.0),
                    "handoff_consumer.released => slot_free": (1920, 128, 0, 32.0)}


def _plant_early_observed(cap: Path) -> tuple[int, int]:
    """Synthetic fault: one consumer CTA's `observed` event moved back to its own `tile_begin` time
    for a tile whose `published` came later than that by more than the bound (still after the
    owner's earlier events, so only causality can tell), in the raw file, its sidecar's CRC updated.
    Returns its tile (the key) and how far before its producer's event the planted event lies."""
    prod_dir, cons_dir = cap / "handoff_producer", cap / "handoff_consumer"
    prod = decode.decode_file(prod_dir / "produce_tiles-launch4.atrex", mf.load(prod_dir / mf.FILE_NAME))
    m = mf.load(cons_dir / mf.FILE_NAME)
    raw_path = cons_dir / "consume_tiles-launch4.atrex"
    cons = decode.decode_file(raw_path, m)
    psite = {s.name: s.id for s in mf.load(prod_dir / mf.FILE_NAME).sites}
    site = {s.name: s.id for s in m.sites}
    pe = prod.events
    published = {int(p): int(t) for p, s, t in zip(pe["payload"], pe["site"], pe["t_ns"]) if s == psite["published"]}
    ev = cons.events
    for k in np.flatnonzero(ev["site"] == site["observed"]):
        begin = int(ev["t_ns"][k - 1])  # the owner's previous event: this tile's tile_begin
        assert ev["site"][k - 1] == site["tile_begin"] and ev["owner"][k - 1] == ev["owner"][k]
        gap = published[int(ev["payload"][k])] - begin
        if gap > 64:
            break
    raw = bytearray(raw_path.read_bytes())
    h = np.frombuffer(bytes(raw[:HEADER_BYTES]), dtype=HEADER_DTYPE)[0]
    at = int(h["events_offset"]) + (int(ev["owner"][k]) * int(h["capacity"]) + int(ev["seq"][k])) * int(h["event_bytes"])
    raw[at:at + 4] = (begin & 0xFFFFFFFF).to_bytes(4, "little")
    raw_path.write_bytes(bytes(raw))
    side_path = raw_path.with_suffix(".json")
    side = json.loads(side_path.read_text())
    side["crc32"] = zlib.crc32(bytes(raw))
    side_path.write_text(json.dumps(side) + "\n")
    return int(ev["payload"][k]), gap


def test_a_consumer_event_planted_before_its_producer_is_rejected(tmp_path):
    cap = shutil.copytree(HANDOFF / "capture", tmp_path / "synthetic_early_observed")
    tile, gap = _plant_early_observed(cap)
    code, r = _validate(cap)
    assert code == 1 and r["verdict"] == "rejected"
    failed = [c for c in r["checks"] if not c["ok"]]
    assert [(c["name"], c["count"]) for c in failed] == [("causality", 1)]  # the one fault, nothing else
    assert failed[0]["details"] == [
        "consume_tiles (handoff_consumer) consume_tiles-launch4: 1 event(s) of consumer 'observed' precede the "
        "produce_tiles (handoff_producer) 'published' event(s) they observe by more than the bound of 32 ns; the "
        f"earliest: payload {tile}, thread 0, {gap} ns before"]


def test_two_processes_on_one_gpu_align_within_their_bounds():
    code, r = _validate(HANDOFF / "twoproc" / "a", HANDOFF / "twoproc" / "b")
    assert code == 0 and [(c["name"], c["ok"]) for c in r["checks"]][:2] == [("one_run", True), ("alignment", True)]
    a, b = (clockalign.read(HANDOFF / "twoproc" / p) for p in ("a", "b"))
    for x, y in ((a.start, b.start), (a.end, b.end)):  # one device: the true offset between them is zero
        assert abs(x.offset_ns - y.offset_ns) <= x.half_ns + y.half_ns
