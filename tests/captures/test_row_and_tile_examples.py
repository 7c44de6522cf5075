"""The two examples that make the recorder choice matter: softmax_rows (three passes over a row, two
block reductions, memory-bound) and sgemm_smem (a shared-memory fp32 GEMM, two barriers per k-tile,
every k-tile recorded). Their specs leave the recorder to the tool, every probe lands where the spec
says, and their H200 captures (tests/fixtures/h200/, from scripts/gpu-suite.sh through
scripts/update_fixtures.py) validate against the example as it is, with every interval of the spec
paired as often as the workload makes it."""
from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from atrex_inject.manifest import load as load_manifest
from atrex_inject.spec import load_spec
from atrex_inject.summary import summarize_capture
from conftest import CUDA_SPECS, REPO, cli

FIX = Path(__file__).parent.parent / "fixtures" / "h200"
SOFTMAX_OWNERS = 16384 // 64 * 8  # one CTA per row, 1 row in 64 recording, 8 warps each
SGEMM_OWNERS = 4096 // 128 * (4096 // 128) // 64 * 8  # 1024 CTA tiles, 1 in 64 recording, 8 warps each
EXAMPLES = {
    "softmax_rows": {
        "owners": SOFTMAX_OWNERS,
        "workload": "softmax_rows:rows=16384:cols=8192:seed=1",
        "pairs": {"row_start -> max_done": SOFTMAX_OWNERS, "max_done -> max_reduced": SOFTMAX_OWNERS,
                  "max_reduced -> sum_done": SOFTMAX_OWNERS, "sum_done -> sum_reduced": SOFTMAX_OWNERS,
                  "sum_reduced -> row_end": SOFTMAX_OWNERS},
        # site: (the nearest source line above the probe, the nearest below), outside atrex's lines
        "lands": {"row_start": (None, "const float4* row = x + (size_t)blockIdx.x * kCols4;"),
                  "max_done": ("}", "m = block_max(m, max_partial);"),
                  "max_reduced": ("m = block_max(m, max_partial);", "float s = 0.f;"),
                  "sum_done": ("}", "s = block_sum(s, sum_partial);"),
                  "sum_reduced": ("s = block_sum(s, sum_partial);", "const float inv = 1.f / s;"),
                  "row_end": ("}", None)},
    },
    "sgemm_smem": {
        "owners": SGEMM_OWNERS,
        "workload": "sgemm_smem:M=4096:N=4096:K=4096:seed=1",
        "pairs": {"kt_begin -> tile_loaded": SGEMM_OWNERS * 512, "tile_loaded -> fma_done": SGEMM_OWNERS * 512,
                  "fma_done -> kt_end": SGEMM_OWNERS * 512, "tile_start -> tile_end": SGEMM_OWNERS},
        "lands": {"tile_start": (None, "const int tid = threadIdx.x, tx = tid % (BN / TN), ty = tid / (BN / TN);"),
                  "kt_begin": ("for (int k0 = 0; k0 < K; k0 += BK) {",
                               "const float4 av = *reinterpret_cast<const float4*>(a_ptr + k0);"),
                  "tile_loaded": ("__syncthreads();  // the tiles are in shared memory", "#pragma unroll"),
                  "fma_done": ("}", "__syncthreads();  // every warp is done with the tiles before they are overwritten"),
                  "kt_end": ("__syncthreads();  // every warp is done with the tiles before they are overwritten", "}"),
                  "tile_end": ("}", None)},
    },
}
RECORDER_KEYS = ("staging", "packed", "recorder")


def spec_path(name: str) -> Path:
    return REPO / "examples" / "specs" / f"{name}.toml"


def captured(name: str):
    return pytest.mark.skipif(
        not (FIX / name / "manifest.json").exists(),
        reason=f"no H200 capture of {name} yet: on the H200 run `bash scripts/gpu-suite.sh captures`, then here "
               f"`python scripts/update_fixtures.py results.tar.gz LABEL` (writes tests/fixtures/h200/{name}/)")


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_spec_leaves_the_recorder_to_the_tool(name):
    assert spec_path(name) in CUDA_SPECS  # so tests/compile/test_examples.py applies, compiles and reverts it
    text = spec_path(name).read_text()
    assert not [k for k in RECORDER_KEYS if f"\n{k} " in text or f"\n{k}=" in text], text
    spec = load_spec(spec_path(name))
    assert [iv.name for iv in spec.intervals] == list(EXAMPLES[name]["pairs"])


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_probe_lands_between_the_statements_the_spec_names(project, name):
    code, out = cli("apply", "--dry-run", "--json", project / "examples" / "specs" / f"{name}.toml")
    assert code == 0, out
    lands = {}
    for site in json.loads(out)["sites"]:
        (land,) = site["lands"]  # one place each: no site of these specs is in a loop with a return
        ctx = land["context"]
        at = next(i for i, c in enumerate(ctx) if c["line"] == land["line"])
        above = [c["text"].strip() for c in ctx[:at] if "atrex" not in c["text"]]
        below = [c["text"].strip() for c in ctx[at + 1:] if "atrex" not in c["text"]]
        want_above, want_below = EXAMPLES[name]["lands"][site["name"]]
        lands[site["name"]] = (want_above and above[-1], want_below and below[0])
    assert lands == EXAMPLES[name]["lands"]


@pytest.mark.parametrize("name", [pytest.param(n, marks=captured(n)) for n in EXAMPLES])
def test_the_capture_validates_against_the_example_and_its_patch(project, name):
    """The fixture is of today's example and spec (their sha256 in its manifest), its patch turns
    the clean source into the instrumented one it names, and validate passes it against that file."""
    d = FIX / name
    m = load_manifest(d / "manifest.json")
    src = project / m.source.path
    assert hashlib.sha256(src.read_bytes()).hexdigest() == m.source.clean_sha256
    assert hashlib.sha256(spec_path(name).read_bytes()).hexdigest() == m.spec.sha256
    subprocess.run(["git", "apply", str(d / "instrumented.patch")], cwd=project, check=True, capture_output=True)
    assert hashlib.sha256(src.read_bytes()).hexdigest() == m.source.instrumented_sha256
    code, out = cli("validate", d, "--source", src, "--json")
    r = json.loads(out)
    assert code == 0 and r["verdict"] == "valid", out
    assert [c["name"] for c in r["checks"] if not c["ok"]] == []
    side = json.loads(next(d.glob("*-launch*.json")).read_text())
    assert side["workload"] == EXAMPLES[name]["workload"]


@pytest.mark.parametrize("name", [pytest.param(n, marks=captured(n)) for n in EXAMPLES])
def test_every_interval_is_paired_once_per_instance(name):
    """Every owner of the recording CTAs pairs each interval once per row (softmax) or once per
    k-tile (the GEMM's 512), and no duration is negative."""
    (launch,) = summarize_capture(FIX / name, load_manifest(FIX / name / "manifest.json"))["launches"]
    assert launch["owners"] == EXAMPLES[name]["owners"]
    assert {iv["name"]: iv["count"] for iv in launch["intervals"]} == EXAMPLES[name]["pairs"]
    assert all(iv["min"] >= 0 for iv in launch["intervals"])
