"""A capture folder with one planted fault (a misnamed buffer, a sidecar field of the wrong
type) is refused by decode and validate with exit 2 and a message naming the file."""
from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from atrex_inject.cli import app
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
