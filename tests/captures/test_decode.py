"""Decode the committed real H200 captures and check facts that follow from the launch geometry
and the spec; refuse foreign, stale and truncated buffers (synthetic copies, named so)."""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from atrex_inject.decode import decode_dir, decode_file, site_counts
from atrex_inject.errors import CaptureError
from atrex_inject.manifest import Manifest
from atrex_inject.manifest import load as load_manifest

FIX = Path(__file__).parent.parent / "fixtures" / "h200"


def load(name: str):
    m = load_manifest(FIX / name / "manifest.json")
    (launch,) = decode_dir(FIX / name, m)
    return m, launch


def per_site(m, launch, site: str) -> np.ndarray:
    """Events of `site` for each claimed owner of the site's group."""
    s = m.site(site)
    counts = site_counts(launch, len(m.sites))
    gid = launch.owners["group"][launch.owners["claims"] > 0]
    return counts[gid == s.group, s.id]


def test_gemm_geometry_and_counts():
    m, l = load("gemm_mma")
    assert l.meta.grid == (32, 32, 1) and l.meta.block == (256, 1, 1)
    # lane0 group, every 64th CTA: 16 CTAs x 8 warps; cta group: 16 owners
    assert l.counts["owners"] == 16 * 8 + 16 == l.counts["owners_claimed"]
    for key in ("owners_missing", "owners_unexpected", "owners_misplaced", "duplicate_claims", "overflow_owners",
                "torn_events", "stray_events"):
        assert l.counts[key] == 0, key
    # every site in the k-loop records every 4th of its 128 k-tiles (the load_stage call, skipped
    # on the last k-tile, is reached on every sampled one); the others once per owner
    k_tiles = 4096 // 32
    expect = {s.name: k_tiles // s.every if s.every > 1 else 1 for s in m.sites}
    assert {s.every for s in m.sites} == {1, 4}
    for site, n in expect.items():
        c = per_site(m, l, site)
        assert c.size and (c == n).all(), (site, np.unique(c))
    assert set(np.unique(l.column("cta_x") + 32 * l.column("cta_y")) % 64) == {0}


def test_reduce_geometry_and_counts():
    m, l = load("reduce_sumsq")
    grid, threads, n4 = 528, 256, (1 << 26) // 4
    assert l.meta.grid == (grid, 1, 1)
    assert l.counts["owners_claimed"] == 66 * 8 + 66 and l.counts["overflow_owners"] == 0
    lane0 = l.owners["group"] == 0
    gtid = l.owners["cta"][lane0] * threads + l.owners["thread"][lane0]
    iters = -(-(n4 - gtid) // (grid * threads))
    sampled = iters // 4  # strip-mined by 4 (docs/spec.md, "Density"): one sample per full group of 4 iterations
    counts = site_counts(l, len(m.sites))[lane0[l.owners["claims"] > 0]]
    assert (counts[:, 1] == sampled).all() and (counts[:, 2] == sampled).all()  # iter_begin, iter_end
    for sid in (0, 3, 4, 6):  # start, stream_done, tail_done, finish: once per warp
        assert (counts[:, sid] == 1).all()
    assert (per_site(m, l, "publish") == 1).all()


@pytest.mark.parametrize("name", ["gemm_mma", "reduce_sumsq", "layernorm", "pycapture"])
def test_time_monotone_sm_and_sites(name):
    m, l = load(name)
    sm_count = json.loads(next((FIX / name).glob("*-launch*.json")).read_text())["device"]["sm_count"]
    ev = l.events
    same_owner = ev["owner"][1:] == ev["owner"][:-1]
    assert (np.diff(ev["t_ns"])[same_owner] >= 0).all()
    assert (np.diff(ev["seq"])[same_owner] == 1).all()
    sm = l.column("sm")
    assert sm.size == ev["t_ns"].size and sm.min() >= 0 and sm.max() < sm_count
    assert set(np.unique(ev["site"])) <= {s.id for s in m.sites}
    # a kernel of ~0.1-1 ms: every owner's events span well under a second
    span = np.ptp(ev["t_ns"])
    assert 0 < span < 1e9


def _copy(tmp_path, name) -> tuple[Path, Manifest]:
    d = tmp_path / name
    shutil.copytree(FIX / name, d)
    return d, load_manifest(d / "manifest.json")


def test_refuses_other_source(tmp_path):
    d, m = _copy(tmp_path, "reduce_sumsq")
    m = dataclasses.replace(m, source=dataclasses.replace(m.source, source_id="0" * 64))  # synthetic: another source
    with pytest.raises(CaptureError, match="another instrumented source"):
        decode_dir(d, m)


def test_refuses_other_version(tmp_path):
    d, m = _copy(tmp_path, "reduce_sumsq")
    f = next(d.glob("*.atrex"))
    raw = bytearray(f.read_bytes())
    raw[8] = 9  # synthetic: format version 9
    f.write_bytes(bytes(raw))
    with pytest.raises(CaptureError, match="format version 9"):
        decode_dir(d, m)


def test_refuses_truncated(tmp_path):
    d, m = _copy(tmp_path, "gemm_mma")
    f = next(d.glob("*.atrex"))
    f.write_bytes(f.read_bytes()[:-100])  # synthetic: a torn file
    with pytest.raises(CaptureError, match="truncated"):
        decode_file(f, m)


def test_cli_decode_json(tmp_path):
    from typer.testing import CliRunner

    from atrex_inject.cli import app
    d, m = _copy(tmp_path, "gemm_mma")
    r = CliRunner().invoke(app, ["decode", str(d), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    (row,) = out["launches"]
    per_warp = sum(4096 // 32 // s.every if s.every > 1 else 1 for s in m.sites if s.role.value == "lane0")
    per_cta = sum(1 for s in m.sites if s.role.value == "cta")
    assert row["counts"]["events"] == 16 * 8 * per_warp + 16 * per_cta and Path(row["saved"]).exists()
    # the capture folder is left as the program wrote it: the events go beside it
    assert Path(row["saved"]).parent == d.with_name(d.name + ".decoded") and not (d / "decoded").exists()


def test_python_capture_refuses_a_buffer_the_recorder_cannot_address():
    """The device recorder keeps its slots as 32-bit offsets into the buffer, so a launch whose
    buffer would pass 4 GiB is refused before anything is allocated (the C++ host session does the
    same and turns probes off)."""
    from atrex_inject.cuda.python.capture import LaunchCapture

    m = load_manifest(FIX / "pycapture" / "manifest.json")
    m = dataclasses.replace(m, capture=dataclasses.replace(m.capture, capacity=1 << 20))  # 1M events per owner
    with pytest.raises(CaptureError, match="over the recorder's 4 GiB"):
        LaunchCapture(None, m, (528, 1, 1), (256, 1, 1), "/nonexistent")
