"""A capture folder with one planted fault (a misnamed buffer, a sidecar field of the wrong
type, a header edited with its CRC recomputed, a manifest that disagrees with the buffer) is
refused with exit 2 and a message naming what differs."""
from __future__ import annotations

import json
import shutil
import zlib

import numpy as np
import pytest
from typer.testing import CliRunner

from atrex_inject.cli import app
from atrex_inject.layout import HEADER_BYTES, HEADER_DTYPE
from conftest import REPO

FIXTURE = REPO / "tests/fixtures/h200/gemm_mma"


@pytest.fixture
def cap(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "cap")
    return tmp_path / "cap"


def refused(cap, msg: str) -> None:
    for verb in ("decode", "validate"):
        r = CliRunner().invoke(app, [verb, str(cap), "--json"], catch_exceptions=False)
        assert r.exit_code == 2, r.output
        assert msg in json.loads(r.output)["error"], r.output


@pytest.mark.parametrize("name", ["gemm_bf16.atrex", "gemm_bf16-launchX.atrex", "-launch.atrex",
                                  "gemm_bf16-launch3.atrex.atrex"])
def test_misnamed_capture_file(cap, name):
    (cap / "gemm_bf16-launch3.atrex").rename(cap / name)
    refused(cap, f"capture file {name!r} is not named <kernel>-launch<N>.atrex")


@pytest.mark.parametrize("field,value,msg", [
    ("device", "H200", "sidecar field 'device' must be a JSON object, not str"),
    ("workload", ["a"], "sidecar field 'workload' must be a string, not list"),
    ("device", {"uuid": {}}, "sidecar field 'device.uuid' must be a string, not dict"),
    ("run_id", 7, "sidecar field 'run_id' must be a string, not int"),
])
def test_sidecar_field_of_the_wrong_type(cap, field, value, msg):
    side = cap / "gemm_bf16-launch3.json"
    meta = json.loads(side.read_text())
    meta[field] = value
    side.write_text(json.dumps(meta))
    r = CliRunner().invoke(app, ["decode", str(cap), "--json", "--out", str(cap.parent / "dec")],
                           catch_exceptions=False)
    assert r.exit_code == 2 and msg in json.loads(r.output)["error"]
    assert not (cap.parent / "dec").exists()


def _edit_header(cap, **fields):
    """Change header fields of the buffer and recompute its CRC in the sidecar, as a careful
    forger would."""
    raw = cap / "gemm_bf16-launch3.atrex"
    data = bytearray(raw.read_bytes())
    h = np.frombuffer(bytes(data[:HEADER_BYTES]), dtype=HEADER_DTYPE).copy()
    for name, value in fields.items():
        if "." in name:
            i, sub = name.split(".")
            h["groups"][0][int(i)][sub] = value
        elif name == "grid0":
            h["grid"][0][0] = value
        else:
            h[name] = value
    data[:HEADER_BYTES] = h.tobytes()
    raw.write_bytes(bytes(data))
    side = cap / "gemm_bf16-launch3.json"
    meta = json.loads(side.read_text())
    meta["crc32"] = zlib.crc32(bytes(data))
    side.write_text(json.dumps(meta))


@pytest.mark.parametrize("fields,named", [
    ({"grid0": 16}, "grid"), ({"header_bytes": 1024}, "header_bytes"), ({"flags": 3}, "flags"),
    ({"0.cta_limit": 4}, "groups"), ({"1.owner_base": 0}, "groups"),
])
def test_header_edited_with_crc_recomputed(cap, fields, named):
    _edit_header(cap, **fields)
    r = CliRunner().invoke(app, ["decode", str(cap), "--json", "--out", str(cap.parent / "dec")],
                           catch_exceptions=False)
    assert r.exit_code == 2
    assert json.loads(r.output)["error"].startswith(f"launch header fields {named} differ from the manifest's plan "
                                                    "for the launch geometry in the sidecar")


def test_capacity_that_disagrees_with_the_manifest(cap):
    m = json.loads((cap / "manifest.json").read_text())
    m["capture"]["capacity"] += 1
    (cap / "manifest.json").write_text(json.dumps(m))
    r = CliRunner().invoke(app, ["decode", str(cap), "--json", "--out", str(cap.parent / "dec")],
                           catch_exceptions=False)
    assert r.exit_code == 2 and json.loads(r.output)["error"].startswith(
        "launch header fields capacity, total_bytes differ from the manifest's plan")
