"""Validation: every real clean fixture passes every check; planting exactly one fault (synthetic,
in a copy) fails exactly that check with the right count; fuzzed buffers never crash and are
always rejected."""
from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atrex_inject.errors import CaptureError
from atrex_inject.layout import HEADER_BYTES, HEADER_DTYPE, OWNER_DTYPE
from atrex_inject.manifest import Manifest
from atrex_inject.manifest import load as load_manifest
from atrex_inject.validate import CHECKS, Provenance, validate_capture

FIX = Path(__file__).parent.parent / "fixtures" / "h200"


def failing(report) -> dict[str, int]:
    return {c["name"]: c["count"] for c in report["checks"] if not c["ok"]}


@pytest.mark.parametrize("name", ["gemm_mma", "reduce_sumsq", "pycapture"])
def test_real_fixtures_pass_every_check(name):
    m = load_manifest(FIX / name / "manifest.json")
    r = validate_capture(FIX / name, m, Provenance(workload=json.loads(next((FIX / name).glob("*-launch*.json"))
                                                                        .read_text())["workload"]))
    assert r["verdict"] == "valid" and failing(r) == {}
    assert [c["name"] for c in r["checks"]] == list(CHECKS)


class Synthetic:
    """A copy of a real capture in which tests plant faults; the sidecar's CRC is updated so the
    planted fault reaches the checks (a real torn file is refused by the checksum instead)."""

    def __init__(self, tmp: Path, name: str = "reduce_sumsq"):
        self.dir = tmp / f"synthetic_{name}"
        shutil.copytree(FIX / name, self.dir)
        self.m = json.loads((self.dir / "manifest.json").read_text())  # as JSON: tests edit it
        self.raw_path = next(self.dir.glob("*.atrex"))
        self.raw = np.frombuffer(self.raw_path.read_bytes(), dtype=np.uint8).copy()
        h = self.raw[:HEADER_BYTES].view(HEADER_DTYPE)[0]
        self.cap, self.n_owners, self.ev_off = int(h["capacity"]), int(h["n_owners"]), int(h["events_offset"])
        self.words = int(h["event_bytes"]) // 4
        self.version = int(h["version"])
        self.owners = self.raw[HEADER_BYTES:self.ev_off].view(OWNER_DTYPE)
        self.events = self.raw[self.ev_off:].view("<u4").reshape(self.n_owners, self.cap, self.words)
        self.groups = h["groups"][: int(h["n_groups"])]

    def owner_of_group(self, g: int, k: int = 0) -> int:
        return int(self.groups["owner_base"][g]) + k

    def save(self, **sidecar) -> "Synthetic":
        """Write the planted bytes and re-sign the sidecar (CRC, size, then any fields given) to match."""
        data = self.raw.tobytes()
        self.raw_path.write_bytes(data)
        side = self.raw_path.with_suffix(".json")
        meta = json.loads(side.read_text())
        meta.update(crc32=zlib.crc32(data), bytes=len(data))
        meta.update(sidecar)
        side.write_text(json.dumps(meta))
        return self

    def validate(self, **kw):
        return validate_capture(self.dir, Manifest.from_json(self.m, "test"), **kw)


CTA_GROUP = 1  # reduce_sumsq: group 1 is the cta-role owner of site `publish` (in no interval, no expectation)


def test_overflow(tmp_path):
    s = Synthetic(tmp_path)
    o = s.owner_of_group(CTA_GROUP)
    s.owners["attempted"][o] = s.cap + 3
    s.events[o, 1:, :] = s.events[o, 0, :]  # the owner filled its capacity with the same site
    assert failing(s.save().validate()) == {"overflow": 1}


def test_overflow_of_a_resident_ring_is_a_lower_bound(tmp_path):
    """A resident ring counts to capacity + 1 and sets flags bit 0: the report says "at least"."""
    s = Synthetic(tmp_path)
    o = s.owner_of_group(CTA_GROUP)
    s.owners["attempted"][o], s.owners["flags"][o] = s.cap + 1, 1
    s.events[o, 1:, :] = s.events[o, 0, :]
    r = s.save().validate()
    assert failing(r) == {"overflow": 1}
    detail = next(c for c in r["checks"] if c["name"] == "overflow")["details"][0]
    assert f"1 owners attempted more than the capacity of {s.cap} events (at least 1 events lost)" in detail


def test_truncation_torn_slot(tmp_path):
    s = Synthetic(tmp_path)
    s.events[s.owner_of_group(CTA_GROUP), 0, :] = 0  # a slot below the count never written
    assert failing(s.save().validate()) == {"truncation": 1}


def test_truncation_missing_owner(tmp_path):
    s = Synthetic(tmp_path)
    o = s.owner_of_group(CTA_GROUP, 3)
    s.owners[o] = 0
    s.events[o] = 0
    assert failing(s.save().validate()) == {"truncation": 1}


def test_owner_identity(tmp_path):
    s = Synthetic(tmp_path)
    s.owners["thread"][s.owner_of_group(0, 1)] += 1  # warp 1's recorder written by lane 1
    assert failing(s.save().validate()) == {"owner_identity": 1}


def test_owner_identity_moved_warp(tmp_path):
    """A resident owner whose warp changed SM warp slot sets flags bit 1 and copies no event out:
    refused as owner_identity, naming the owner."""
    s = Synthetic(tmp_path)
    o = s.owner_of_group(CTA_GROUP, 2)
    s.owners["flags"][o], s.owners["attempted"][o] = 2, 0
    s.events[o] = 0
    r = s.save().validate()
    assert failing(r) == {"owner_identity": 1}
    detail = next(c for c in r["checks"] if c["name"] == "owner_identity")["details"][0]
    assert "1 resident owners' warps changed SM warp slot during the launch" in detail


def test_duplicate_ownership(tmp_path):
    s = Synthetic(tmp_path)
    s.owners["claims"][s.owner_of_group(0, 5)] = 2
    assert failing(s.save().validate()) == {"duplicate_ownership": 1}


def test_site_identity(tmp_path):
    s = Synthetic(tmp_path)
    s.events[s.owner_of_group(CTA_GROUP), 0, s.words - 1] = 0x80000000 | 99
    assert failing(s.save().validate()) == {"site_identity": 1}


def test_time_order_interval_end_before_start(tmp_path):
    """An instance ending before it starts is one owner's time going back: time_order, once."""
    s = Synthetic(tmp_path)
    o = s.owner_of_group(0, 7)
    ev = s.events[o]
    sites = ev[:, s.words - 1] & 0x7FFFFFFF
    i_end = int(np.flatnonzero(sites == 2)[0])  # first iter_end; its iter_begin is the slot before
    ev[i_end, 0] = ev[i_end - 1, 0] - 64
    assert failing(s.save().validate()) == {"time_order": 1}


def test_deterministic_counts(tmp_path):
    s = Synthetic(tmp_path)
    s.m["expect"]["stream_done"] = 2  # every lane0 owner recorded 1
    assert failing(s.save().validate()) == {"deterministic_counts": int(s.groups["n_owners"][0])}


def test_stale_provenance(tmp_path):
    s = Synthetic(tmp_path)
    r = s.save().validate(prov=Provenance(workload="reduce_sumsq:seed=2"))
    assert failing(r) == {"stale_provenance": 1}
    src = tmp_path / "edited.cu"
    src.write_text("// an instrumented source edited after the build\n")
    assert failing(s.validate(prov=Provenance(source=src))) == {"stale_provenance": 1}


def test_cross_launch_mixing(tmp_path):
    s = Synthetic(tmp_path).save()
    for suffix in (".atrex", ".json"):  # the same launch again under another launch's name
        shutil.copy(s.raw_path.with_suffix(suffix), s.dir / f"reduce_sumsq-launch7{suffix}")
    # launch seq twice, the name says launch 7 while the header says 2, the sidecar names the other file
    assert failing(s.validate()) == {"cross_launch_mixing": 3}


def test_numeric_claims(tmp_path):
    s = Synthetic(tmp_path).save()
    ok = s.validate()["summaries"][0]["intervals"][0]
    claims = [{"interval": ok["name"], "statistic": "median", "value": ok["median"], "tolerance": 0.0},
              {"interval": ok["name"], "statistic": "p90", "value": ok["p90"] * 2, "tolerance": 0.05}]
    assert failing(s.validate(claims=claims)) == {"numeric_claims": 1}


def test_foreign_buffer_is_rejected_not_crashed(tmp_path):
    s = Synthetic(tmp_path)
    s.raw[:8] = 0  # synthetic: not an atrex buffer
    assert failing(s.save().validate()) == {"truncation": 1}


@pytest.mark.parametrize("fault,check", [
    (lambda s: s.raw_path.with_suffix(".json").unlink(), "truncation"),  # the capture did not finish
    (lambda s: s.save(launch_seq=9), "cross_launch_mixing"),  # the sidecar describes another launch
    (lambda s: s.m["source"].update(source_id="0" * 64), "stale_provenance"),  # another build's manifest
    (lambda s: s.m["groups"][1].update(cta_stride=2), "stale_provenance"),
])
def test_a_refused_file_fails_the_check_its_refusal_names(tmp_path, fault, check):
    """Decode names the check of each refusal (CaptureError.check); validate counts it there once."""
    s = Synthetic(tmp_path)
    fault(s)
    r = s.validate()
    assert failing(r) == {check: 1} and r["launches"] == []


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzz_truncation_and_flips_always_rejected(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("fuzz") / "synthetic_reduce_sumsq"
    shutil.copytree(FIX / "reduce_sumsq", d)
    m = load_manifest(d / "manifest.json")
    f = next(d.glob("*.atrex"))
    raw = bytearray(f.read_bytes())
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
    else:
        for i in data.draw(st.sets(st.integers(0, len(raw) - 1), min_size=1, max_size=8)):
            raw[i] ^= data.draw(st.integers(1, 255))
    f.write_bytes(bytes(raw))
    r = validate_capture(d, m)  # must not raise
    assert r["verdict"] == "rejected"
    with pytest.raises(CaptureError):
        from atrex_inject.decode import decode_file
        decode_file(f, m)
