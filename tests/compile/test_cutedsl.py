"""CuTe DSL route on CPU: apply inserts IKeT calls with libcst, the instrumented example compiles for
sm_90a with the `iket` compiler option (fake tensors), its PTX has one pmevent per inserted event
call and its cubin's IKeT metadata lists exactly the spec's event names; revert is byte-exact;
bad inputs give clear errors and change nothing."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atrex_inject import snapshot
from atrex_inject.errors import AtrexError
from conftest import CUTEDSL_SPECS, REPO, sha, tree_hashes

cutlass = pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl is not installed")

COMPILE = """
import glob, json, sys
sys.path.insert(0, sys.argv[1])
import importlib
mod = importlib.import_module(sys.argv[2])
mod.compile_only()
import iket
cubin = glob.glob(sys.argv[3] + "/*.cubin")
ptx = glob.glob(sys.argv[3] + "/*.ptx")
ctx = iket.Context(open(cubin[0], "rb").read())
user = sorted({e.event_name for e in ctx.get_all_events()} - {"pop_range", "reserved_event_id_0"})
points = sum(len(k.instrument_points) for k in ctx.get_kernels_instrument_info())
print(json.dumps({"names": user, "pmevent": open(ptx[0]).read().count("pmevent"), "points": points,
                  "ranges": sorted(r.range_name for r in ctx.get_all_ranges())}))
"""


def compile_check(src, dump) -> dict:
    dump.mkdir(exist_ok=True)
    env = dict(os.environ, CUTE_DSL_ARCH="sm_90a", CUTE_DSL_KEEP="ptx,cubin", CUTE_DSL_DUMP_DIR=str(dump),
               CUTE_DSL_COMPILER_OPT="iket")
    p = subprocess.run([sys.executable, "-c", COMPILE, str(src.parent), src.stem, str(dump)], capture_output=True,
                       text=True, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    import json
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("spec_path", CUTEDSL_SPECS, ids=lambda p: p.stem)
def test_apply_compile_revert(project, spec_path):
    spec = project / "examples" / "specs" / spec_path.name
    res = snapshot.apply(spec)
    m = res.manifest
    src = project / m.source.path
    text = src.read_text()
    calls = len(re.findall(r"iket\.(?:mark|range_start|range_end)\(", text))
    assert calls == len(m.sites)  # one event call per site in these specs
    assert "from cutlass.cute.experimental import iket" in text
    out = compile_check(src, project / "dump")
    assert out["pmevent"] == out["points"]  # every pmevent in the PTX is an IKeT instrument point
    unrolled = spec_path.stem.startswith("hopper_gemm")  # its k-loop has a static trip count: unrolled 16x
    assert out["pmevent"] == (3 + 4 * 16 if unrolled else calls)
    assert out["names"] == list(m.iket.names)
    assert out["ranges"] == sorted(r.name for r in m.iket.ranges)
    snapshot.revert(spec)
    assert sha(src) == m.source.clean_sha256
    assert src.read_bytes() == (REPO / m.source.path).read_bytes()


def _spec(tmp_path, body: str, intervals: str = "") -> tuple:
    (tmp_path / ".git").mkdir(exist_ok=True)
    shutil.copy(REPO / "examples/cutedsl/scale_add.py", tmp_path / "k.py")
    p = tmp_path / "s.toml"
    p.write_text(f'version = 1\nname = "s"\nquestion = "q"\nbackend = "cutedsl"\nsource = "k.py"\n'
                 f'kernel = "scale_add_kernel"\n{intervals}\n{body}')
    return p, tmp_path


@pytest.mark.parametrize("body,intervals,msg", [
    ('[[site]]\nname = "a"\nanchor = { call = "nowhere" }\n', "", "matches nothing"),
    ('[[site]]\nname = "a"\nanchor = { stmt = "cute.arch" }\n', "", "matches 4 places"),
    ('[[site]]\nname = "a"\nanchor = { ptx = "bar.sync" }\n', "", "ptx anchors apply to the cuda backend"),
    ('[[site]]\nname = "a"\nanchor = { entry = true }\nrole = "thread"\n', "",
     "role 'thread' is per thread; IKeT records per warp"),
    ('[[site]]\nname = "a"\nanchor = { entry = true }\n[[site]]\nname = "b"\nanchor = { exit = true }\n'
     'payload = "1"\n', 'intervals = ["a -> b"]', "same payload shape"),
    ('[[site]]\nname = "a"\nanchor = { entry = true }\nrole = "cta"\n[[site]]\nname = "b"\nanchor = { exit = true }\n'
     'role = "cta"\n', 'intervals = ["a -> b"]', "must be warp-uniform"),
    ('[[site]]\nname = "a_name_that_is_much_too_long_for_iket"\nanchor = { entry = true }\n', "",
     "at most 32 characters"),
    # what records is IKeT's to select, per kernel: every CTA or the first (ctas = { limit = 1 } on every site)
    ('[[site]]\nname = "a"\nanchor = { entry = true }\nctas = { limit = 2 }\n', "",
     "site 'a': ctas = { stride = 1, limit = 2 } is not a selection IKeT can make: IKeT records every CTA, or one "
     "(the first: ctas = { limit = 1 } on every site), chosen per kernel outside it (run-iket's cluster selection)"),
    ('[[site]]\nname = "a"\nanchor = { entry = true }\nctas = { stride = 4, limit = 1 }\n', "",
     "site 'a': ctas = { stride = 4, limit = 1 } is not a selection IKeT can make"),
    ('[[site]]\nname = "a"\nanchor = { entry = true }\nctas = { limit = 1 }\n[[site]]\nname = "b"\n'
     'anchor = { exit = true }\n', "", "site 'b' records every CTA while site 'a' records the first only (ctas = "
     "{ limit = 1 }): IKeT selects what records per kernel, not per site"),
    ('[[site]]\nname = "a"\nanchor = { entry = true }\nctas = { limit = 1 }\n[[site]]\nname = "b"\n'
     'anchor = { exit = true }\nctas = { stride = 2 }\n', "", "site 'b' records every CTA while site 'a'"),
    ('[[site]]\nname = "a"\nanchor = { entry = true }\nctas = { limit = 1 }\nwarps = [0]\n[[site]]\nname = "b"\n'
     'anchor = { exit = true }\nctas = { limit = 1 }\nwarps = [0]\n', 'intervals = ["a -> b"]',
     "site 'a' is an interval end and must be warp-uniform: role lane0, all warps, and every CTA or IKeT's "
     "selection of the first (ctas = { limit = 1 })"),
])
def test_bad_inputs_change_nothing(tmp_path, body, intervals, msg):
    spec, root = _spec(tmp_path, body, intervals)
    before = tree_hashes(root)
    with pytest.raises(AtrexError) as e:
        snapshot.apply(spec)
    assert msg in str(e.value)
    assert tree_hashes(root) == before


def test_too_many_names_warns(tmp_path):
    body = "".join(f'[[site]]\nname = "m{i}"\nanchor = {{ entry = true }}\n' for i in range(31))
    spec, _ = _spec(tmp_path, body)
    r = snapshot.apply(spec)
    assert any("EXTENDED_NATIVE_DUMP" in w for w in r.manifest.warnings)


KERNEL_TEMPLATE = '''
import cutlass
import cutlass.cute as cute


@cute.kernel
def k(x: cute.Tensor, n: cutlass.Int32):
    """docstring stays first"""
{body}
'''
LINES = st.sampled_from([
    "    a = x[0]  # a comment",
    "    b = cute.arch.thread_idx()",
    "    for i in cutlass.range(0, n, 1):\n        x[i] = x[i] + 1.0\n        if i > 3:\n            continue",
    "    cute.arch.sync_threads()",
    "    if n > 0:\n        x[0] = 2.0\n    else:\n        x[1] = 3.0",
    "\n    # a lone comment\n",
])


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=st.lists(LINES, min_size=1, max_size=6), data=st.data())
def test_round_trip_varied_sources(tmp_path_factory, body, data):
    """libcst keeps every byte: apply then revert is byte-exact, and the instrumented text parses."""
    root = tmp_path_factory.mktemp("cst")
    (root / ".git").mkdir()
    src = root / "k.py"
    src.write_text(KERNEL_TEMPLATE.format(body="\n".join(body)))
    clean = src.read_bytes()
    kinds = [('{ entry = true }', "entry"), ('{ exit = true }', "exit")]
    if any("for i" in b for b in body):
        kinds += [('{ loop = "for i in", occurrence = 1 }', data.draw(st.sampled_from(
            ["before", "after", "loop-begin", "loop-end"])))]
    if any("sync_threads" in b for b in body):
        kinds += [('{ call = "sync_threads", occurrence = 1 }', "before")]
    sites = data.draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=4))
    text = "".join(f'[[site]]\nname = "s{i}"\nanchor = {a}\nposition = "{p}"\n' for i, (a, p) in enumerate(sites))
    spec = root / "s.toml"
    spec.write_text('version = 1\nname = "s"\nquestion = "q"\nbackend = "cutedsl"\nsource = "k.py"\nkernel = "k"\n'
                    + text)
    snapshot.apply(spec)
    cst.parse_module(src.read_text())
    assert src.read_text().count('"""docstring stays first"""') == 1
    snapshot.revert(spec)
    assert src.read_bytes() == clean


# ---- capture normalization (real run-iket output from the H200, tests/fixtures/h200/cutedsl) ----
FIXC = REPO / "tests" / "fixtures" / "h200" / "cutedsl"


def test_normalize_real_iket_subset(tmp_path):
    import json

    import numpy as np

    from atrex_inject.cutedsl.normalize import normalize_trace
    from atrex_inject.decode import decode_dir, site_counts
    from atrex_inject.manifest import load as load_manifest
    m = load_manifest(FIXC / "manifest.json")
    trace = json.loads((FIXC / "iket_trace.cta0-7.json").read_text())
    synthetic_other = {**trace["launches"][0], "kernelName": "synthetic_other_kernel_0", "markers": [],
                       "ranges": [], "warpLifetimes": []}
    trace["launches"].insert(0, synthetic_other)  # another kernel of the process: must be dropped
    src = tmp_path / "trace.json"
    src.write_text(json.dumps(trace))
    (f,) = normalize_trace(src, m, tmp_path, "w", {"uuid": "GPU-x"})
    (launch,) = decode_dir(tmp_path, m)
    assert launch.counts["owners_claimed"] == 8 * 8  # CTAs 0-7, 8 warps each
    ids = m.site_ids
    per = site_counts(launch, len(m.sites))
    for s in ("start", "loop_start", "loop_done", "barrier"):
        assert (per[:, ids[s]] == 1).all(), s
    assert (per[:, ids["iter"]] == per[:, ids["iter_end"]]).all() and per[:, ids["iter"]].min() >= 1
    assert (np.unique(launch.column("cta_x")) == np.arange(8)).all()


def test_the_target_s_launches_are_its_class_s_when_every_kernel_is_a_method_named_kernel():
    """quack's and FlashAttention-4's kernels are all methods named `kernel`: a trace holding the
    launches of two of them gives the spec's kernel its own class's (check.compiled_from, the rule
    check-iket reads entries by), not every `kernel` of the process."""
    from atrex_inject.cutedsl.normalize import launches_of
    fwd = {"kernelName": "kernel_cutlass_kernel_quacksoftmaxSoftmax_object_at__tensorptrbf16gmemalign16o1_0"}
    bwd = {"kernelName": "kernel_cutlass_kernel_quacksoftmaxSoftmaxBackward_object_at__tensorptrbf16gmemalign16o1_0"}
    trace = {"launches": [bwd, fwd, bwd]}
    assert launches_of(trace, "Softmax.kernel") == [fwd]
    assert launches_of(trace, "SoftmaxBackward.kernel") == [bwd, bwd]
    assert launches_of({"launches": [{"kernelName": "kernel_cutlass_scale_add_kernel_tensorptrf32_0"}]},
                       "scale_add_kernel")


def first_cta_only(spec):
    """The spec with `ctas = { limit = 1 }` on every site: IKeT's selection of the first CTA."""
    spec.write_text(spec.read_text().replace("[[site]]\n", "[[site]]\nctas = { limit = 1 }\n"))
    return spec


def test_the_first_cta_only_applies_as_written_and_capture_asks_iket_for_it(project, tmp_path):
    """`ctas = { limit = 1 }` on every site (interval ends included) changes nothing in the kernel
    (IKeT selects outside it): apply writes the bytes it writes without it, into one owner group that
    selects one CTA; and the run-iket command capture runs passes IKeT the kernel's cluster 0,0,0."""
    import json

    from atrex_inject.cutedsl.runiket import prepare_run_iket
    every = snapshot.apply(project / "examples/specs/scale_add_cutedsl.toml").manifest
    snapshot.revert(project / "examples/specs/scale_add_cutedsl.toml")
    spec = first_cta_only(project / "examples/specs/scale_add_cutedsl.toml")
    m = snapshot.apply(spec).manifest
    assert m.source.instrumented_sha256 == every.source.instrumented_sha256
    assert [(g.cta_stride, g.cta_limit) for g in m.groups] == [(1, 1)]
    cmd = ["python3", "run.py", "--iters", "1"]
    head = [sys.executable, "-u", "-m", "iket.cli.main", "-o", str(tmp_path / "cap" / "iket"), "--log-level", "warn"]
    select = tmp_path / "cap" / "iket-select.json"
    assert prepare_run_iket(m, tmp_path / "cap", cmd) == [
        *head, "profile", "--postprocess", "json", "--enabled-cluster-config", str(select), "--", *cmd]
    assert json.loads(select.read_text()) == {"kernel_cutlass_scale_add_kernel_": [0, 0, 0]}
    trk = tmp_path / "trk" / "tracker"  # a measurement's recording side: one pass, nothing decoded, same selection
    assert prepare_run_iket(m, tmp_path / "cap", cmd, trk) == [
        *head, "--clobber", "profile", "--use-tracker-dir", str(trk), "--postprocess", "none",
        "--enabled-cluster-config", str(select), "--", *cmd]
    # without the selection: every CTA, and no selection file (an earlier capture's is removed)
    assert prepare_run_iket(every, tmp_path / "all", cmd) == [
        sys.executable, "-u", "-m", "iket.cli.main", "-o", str(tmp_path / "all" / "iket"), "--log-level", "warn",
        "profile", "--postprocess", "json", "--", *cmd]
    assert not (tmp_path / "all").exists()
    assert "--enabled-cluster-config" not in prepare_run_iket(every, tmp_path / "cap", cmd) and not select.exists()


def test_run_iket_takes_the_selection(project, tmp_path):
    """The real run-iket, here without a GPU, parses the command capture gives it and the selection
    file (it refuses a bad one before running anything), runs the program, then fails for want of
    a discovery result."""
    pytest.importorskip("iket.cli.main", reason="nvidia-cutlass-dsl is not installed")
    from atrex_inject.cutedsl.backend import BACKEND
    from atrex_inject.errors import CaptureError
    m = snapshot.apply(first_cta_only(project / "examples/specs/scale_add_cutedsl.toml")).manifest
    cmd = [sys.executable, "-c", "print('synthetic program ran')"]
    with pytest.raises(CaptureError, match="run-iket exited with status"):
        BACKEND.capture(m, cmd, tmp_path, dict(os.environ))
    log = (tmp_path / "run-iket.log").read_text()
    assert "synthetic program ran" in log and "[run-iket] " in log
    assert "enabled-cluster" not in log and "unrecognized arguments" not in log, log[-2000:]
    (tmp_path / "iket-select.json").write_text('{"kernel_cutlass_scale_add_kernel_": [0, 0]}')  # planted fault
    p = subprocess.run([sys.executable, "-m", "iket.cli.main", "-o", str(tmp_path / "bad"), "profile",
                        "--enabled-cluster-config", str(tmp_path / "iket-select.json"), "--", *cmd],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "must be [x, y, z]" in p.stderr and "synthetic program ran" not in p.stdout


def _cta0_trace(trace: dict) -> dict:
    """The real trace's launch cut down to CTA 0's records, as IKeT writes it when told to select it."""
    loc = trace["locationTable"]
    first = lambda i: loc[i]["ctaId"] == [0, 0, 0]  # noqa: E731
    launch = trace["launches"][0]
    return {**trace, "launches": [{**launch, "markers": [x for x in launch["markers"] if first(x["locIdx"])],
                                   "ranges": [x for x in launch["ranges"] if first(x["warpLocIdxs"][0])],
                                   "warpLifetimes": [x for x in launch["warpLifetimes"] if first(x["locIdx"])]}]}


def test_a_first_cta_capture_normalizes_validates_and_refuses_another_cta(project, tmp_path):
    """The real IKeT trace (CTAs 0-7) cut down to CTA 0 normalizes into one owner per warp of CTA 0:
    the slot arithmetic (layout), decode and validate agree on those 8 owners and the capture is
    valid. A real record of CTA 1 planted in it (a marker and its warp's lifetime) is refused,
    naming the CTA, the warp and the site, and nothing is written."""
    import json

    from atrex_inject.cutedsl.normalize import normalize_trace
    from atrex_inject.decode import decode_dir
    from atrex_inject.layout import group_owners, slot_owners
    from atrex_inject.validate import validate_capture
    m = snapshot.apply(first_cta_only(project / "examples/specs/scale_add_cutedsl.toml")).manifest
    trace = json.loads((FIXC / "iket_trace.cta0-7.json").read_text())
    cut = _cta0_trace(trace)
    src = tmp_path / "cta0.json"
    src.write_text(json.dumps(cut))
    cap = tmp_path / "cap"
    cap.mkdir()
    normalize_trace(src, m, cap, "w", {"uuid": "GPU-x"})
    shutil.copy(project / ".atrex" / "scale_add_cutedsl" / "manifest.json", cap / "manifest.json")
    (launch,) = decode_dir(cap, m)
    grid, block = (528, 1, 1), (256, 1, 1)
    assert group_owners(m.groups, grid, block) == [8]
    cta, thread = slot_owners(m.groups[0], 8, grid, block)
    assert cta.tolist() == [0] * 8 and thread.tolist() == [32 * w for w in range(8)]
    assert launch.owners["cta"].tolist() == [0] * 8 and launch.owners["thread"].tolist() == thread.tolist()
    assert launch.counts["owners_claimed"] == 8
    r = validate_capture(cap, m)
    assert r["verdict"] == "valid", [c for c in r["checks"] if not c["ok"]]
    assert r["summaries"][0]["owners"] == 8
    assert [iv["count"] for iv in r["summaries"][0]["intervals"]] == [8, 16]

    full = trace["launches"][0]
    loc = trace["locationTable"]
    marker = next(x for x in full["markers"] if loc[x["locIdx"]]["ctaId"] == [1, 0, 0])
    life = next(x for x in full["warpLifetimes"] if x["locIdx"] == marker["locIdx"])
    planted = cut["launches"][0]
    planted.update(markers=[*planted["markers"], marker], warpLifetimes=[*planted["warpLifetimes"], life])
    src.write_text(json.dumps(cut))
    out = tmp_path / "refused"
    out.mkdir()
    with pytest.raises(AtrexError) as e:
        normalize_trace(src, m, out, "w", {})
    warp, site = loc[marker["locIdx"]]["warpId"], trace["stringTable"][marker["markerNameIdx"]]
    assert str(e.value).startswith(f"launch 0: IKeT recorded 1 event(s) of warps the spec does not record; first: "
                                   f"CTA (1, 0, 0) warp {warp}, site {site!r}: ")
    assert "the spec records the first CTA only (ctas = { limit = 1 }), IKeT's selection of cluster 0,0,0 " \
           "(IKeT's trace says singleClusterActive = 0 for this launch)" in str(e.value)
    assert "--enabled-cluster-config iket-select.json" in e.value.hint
    assert list(out.iterdir()) == []


FIX_CTA0 = FIXC.parent / "cutedsl_gemm_cta0"


@pytest.mark.skipif(not (FIX_CTA0 / "manifest.json").is_file(),
                    reason="the H200 capture of the Hopper GEMM's first CTA is not committed yet: on the GPU host "
                           "`MEASURE_OFF=1 ROUNDS=2 ITERS=300 bash scripts/gpu-cutedsl.sh hopper_gemm`, then here "
                           "`python3 scripts/cutedsl_fixtures.py results.tar.gz`")
def test_real_first_cta_capture_of_the_hopper_gemm(project, tmp_path):
    """On the H200, capture gave run-iket the selection the spec asks for, and IKeT recorded that CTA
    alone: every record of the kernel in its decoded trace is of CTA (0, 0, 0); normalizing that trace
    again writes the committed launch byte for byte; it validates with CTA 0's 4 warps as its owners,
    every k-tile paired; and the spec and instrumented source are those committed here."""
    import json

    from atrex_inject.cutedsl.runiket import prepare_run_iket
    from atrex_inject.cutedsl.normalize import launches_of, normalize_trace
    from atrex_inject.manifest import load as load_manifest
    from atrex_inject.validate import validate_capture
    m = load_manifest(FIX_CTA0 / "manifest.json")
    assert [(g.cta_stride, g.cta_limit) for g in m.groups] == [(1, 1)]
    prepare_run_iket(m, tmp_path, ["prog"])
    assert (tmp_path / "iket-select.json").read_bytes() == (FIX_CTA0 / "iket-select.json").read_bytes()
    trace = json.loads((FIX_CTA0 / "iket_trace.json").read_text())
    loc = trace["locationTable"]
    for launch in launches_of(trace, m.kernel):
        used = ([x["locIdx"] for x in launch["markers"]] + [i for x in launch["ranges"] for i in x["warpLocIdxs"]]
                + [x["locIdx"] for x in launch["warpLifetimes"]])
        assert used and {tuple(loc[i]["ctaId"]) for i in used} == {(0, 0, 0)}
    side = json.loads((FIX_CTA0 / "gemm_kernel-launch0.json").read_text())
    again = tmp_path / "again"
    again.mkdir()
    normalize_trace(FIX_CTA0 / "iket_trace.json", m, again, side["workload"], side["device"])
    assert (again / "gemm_kernel-launch0.atrex").read_bytes() == (FIX_CTA0 / "gemm_kernel-launch0.atrex").read_bytes()
    cap = tmp_path / "cap"
    cap.mkdir()
    for f in FIX_CTA0.glob("gemm_kernel-launch0.*"):
        shutil.copy(f, cap / f.name)
    r = validate_capture(cap, m)
    assert r["verdict"] == "valid", [c for c in r["checks"] if not c["ok"]]
    s = r["summaries"][0]
    assert s["owners"] == 4 and [iv["count"] for iv in s["intervals"]] == [4 * 16, 4 * 16]  # 1024^3: 16 k-tiles
    here = snapshot.apply(project / "examples/specs/hopper_gemm_cutedsl.toml").manifest
    assert (here.spec.sha256, here.source.source_id) == (m.spec.sha256, m.source.source_id)
    assert here.source.source_id == sha(FIXC.parent / "cutedsl_gemm" / "hopper_gemm.instrumented.py")


# (fixture folder, launch file stem, owners, intervals, pairs per interval): one launch of each
# example, captured on the H200 through run-iket and normalized (tests/fixtures/h200/PROVENANCE.md)
REAL_CUTEDSL = [
    ("cutedsl", "scale_add_kernel-launch0", 528 * 8, ["loop_start -> loop_done", "iter -> iter_end"], [528 * 8, 8192]),
    # 8 x 16 CTAs of 4 warps, 16 k-tiles each
    ("cutedsl_gemm", "gemm_kernel-launch0", 128 * 4, ["wait -> ready", "mma -> mma_done"], [512 * 16, 512 * 16]),
]


@pytest.mark.parametrize("folder,stem,owners,intervals,pairs", REAL_CUTEDSL, ids=[r[0] for r in REAL_CUTEDSL])
def test_real_cutedsl_capture_validates_and_exports(tmp_path, folder, stem, owners, intervals, pairs):
    from atrex_inject.decode import decode_dir
    from atrex_inject.export import export_perfetto
    from atrex_inject.manifest import load as load_manifest
    from atrex_inject.validate import validate_capture
    fix = FIXC.parent / folder
    m = load_manifest(fix / "manifest.json")
    d = tmp_path / "cap"
    d.mkdir()
    for f in fix.glob(stem + ".*"):
        shutil.copy(f, d / f.name)
    r = validate_capture(d, m)
    assert r["verdict"] == "valid", [c for c in r["checks"] if not c["ok"]]
    s = r["summaries"][0]
    assert s["owners"] == owners
    assert [iv["name"] for iv in s["intervals"]] == intervals
    assert [iv["count"] for iv in s["intervals"]] == pairs
    assert export_perfetto(decode_dir(d, m), m, tmp_path / "t.pftrace").stat().st_size > 100_000


@pytest.mark.parametrize("folder", [r[0] for r in REAL_CUTEDSL])
def test_gpu_ran_what_apply_writes_here(project, folder):
    """The instrumented file the H200 ran is byte for byte what apply writes from the same spec here,
    and the IKeT measurement taken with it recomputes from its raw sample lines."""
    import json

    from atrex_inject.measure import validate_measurement
    from atrex_inject.manifest import load as load_manifest
    fix = FIXC.parent / folder
    m = load_manifest(fix / "manifest.json")
    res = snapshot.apply(project / m.spec.path)
    src = project / m.source.path
    ran = next(fix.glob("*.instrumented.py"))
    assert src.read_bytes() == ran.read_bytes()
    assert res.manifest.source.source_id == m.source.source_id == sha(ran)
    art = json.loads((fix / "measure.json").read_text())
    # the GPU host's temporary copies of the two sources are these files here
    for h, local in zip(art["sources"], [REPO / m.source.path, ran]):
        h["path"] = str(local)
    (project / "measure.json").write_text(json.dumps(art))
    v = validate_measurement(project / "measure.json")
    assert v["valid"], v["problems"]
    snapshot.revert(project / m.spec.path)


@pytest.mark.parametrize("loop,body", [("for i in cutlass.range(4): x[i] = x[i] + 1.0", "x[i] = x[i] + 1.0"),
                                       ("while n > 0: n = n - 1", "n = n - 1")])
def test_a_one_line_loop_body_gets_its_probes_on_lines_of_their_own(tmp_path, loop, body):
    (tmp_path / ".git").mkdir()
    src = tmp_path / "k.py"
    clean = KERNEL_TEMPLATE.format(body=f"    {loop}\n    x[0] = 2.0")
    src.write_text(clean)
    head = loop.split(":")[0]
    spec = tmp_path / "s.toml"
    spec.write_text(f'version = 1\nname = "s"\nquestion = "q"\nbackend = "cutedsl"\nsource = "k.py"\nkernel = "k"\n'
                    f'[[site]]\nname = "a"\nanchor = {{ loop = "{head.split()[-1]}" }}\nposition = "loop-begin"\n'
                    f'[[site]]\nname = "b"\nanchor = {{ loop = "{head.split()[-1]}" }}\nposition = "loop-end"\n')
    snapshot.apply(spec)
    lines = src.read_text().split("\n")
    i = lines.index(f"    {head}:")
    assert lines[i + 1:i + 4] == ['        iket.mark("a")  # atrex: site a (id 0, loop-begin)', f"        {body}",
                                  '        iket.mark("b")  # atrex: site b (id 1, loop-end)']
    snapshot.revert(spec)
    assert src.read_text() == clean


def test_the_perturbation_table_says_what_recorded_in_each_cutedsl_row(project, tmp_path):
    """bench/perturbation/run.py folds the CuTe DSL GEMM's measurements with what recorded on their
    instrumented side, read from the command measured: the real every-CTA artifact (the GEMM under
    run-iket before its spec selected) says so; the same artifact with the command the GPU script now
    builds for the spec (synthetic) says the first CTA; with the runner alone (synthetic), nothing."""
    import json

    from atrex_inject.cutedsl.runiket import prepare_run_iket
    from test_bench_run import run
    art = json.loads((FIXC.parent / "cutedsl_gemm" / "measure.json").read_text())
    every, runner = art["commands"]["B"], art["commands"]["B"][art["commands"]["B"].index("--") + 1:]
    m = snapshot.apply(project / "examples/specs/hopper_gemm_cutedsl.toml").manifest
    first = prepare_run_iket(m, tmp_path / "rec", runner, tmp_path / "trk" / "tracker")
    got = {}
    for b in (every, first, runner):
        (tmp_path / "measure-spec.json").write_text(json.dumps({**art, "commands": {**art["commands"], "B": b}}))
        (row,) = run.fold_cutedsl(tmp_path)
        got[row["records"]] = row["overhead"]
        label = run.table({"date": "SYNTHETIC", "device": "none", "per_event": [], "rows": [row]}).splitlines()[-1]
        assert label.startswith("| CuTe DSL TMA + WGMMA GEMM 4096³ under IKeT" + (f", {row['records']} |"
                                                                                 if row["records"] else " |"))
    assert got == {"every CTA": art["overhead"], "the first CTA (IKeT's selection)": art["overhead"],
                   None: art["overhead"]}


def test_a_method_kernel_s_capture_files_carry_its_whole_name(tmp_path):
    """quack's kernels are `Class.kernel` methods: the capture files are `Softmax.kernel-launch1.*`,
    which decode finds, not `Softmax.*` (a suffix swap cut the name at its dot, and the capture was
    refused as misnamed)."""
    from atrex_inject.decode import capture_files
    from atrex_inject.launchfile import write_launch
    path = write_launch(tmp_path, "Softmax.kernel", 1, b"", (1, 1, 1), (32, 1, 1), "0" * 64, "w", {}, "r")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Softmax.kernel-launch1.atrex", "Softmax.kernel-launch1.json"]
    assert capture_files(tmp_path) == [path]
    assert json.loads((tmp_path / "Softmax.kernel-launch1.json").read_text())["file"] == path.name


QUACK = REPO / "tests" / "fixtures" / "h200" / "quack_softmax"


def test_a_site_that_ends_one_interval_and_starts_the_next_is_one_event(tmp_path):
    """quack's softmax timed `start -> loaded -> reduced -> done`: at `loaded` and `reduced` the
    rewrite ends one IKeT range and starts the next, two records of one execution. Normalized from
    the real trace, each warp has each site once, in order (it had `loaded` and `reduced` twice, and
    validation refused every warp under interval_pairing); the whole capture of that run validates."""
    from atrex_inject.cutedsl.normalize import normalize_trace
    from atrex_inject.decode import decode_dir, site_counts
    from atrex_inject.manifest import load as load_manifest
    from atrex_inject.validate import validate_capture
    m = load_manifest(QUACK / "manifest.json")
    normalize_trace(QUACK / "iket_trace.cta0-7.json", m, tmp_path, "w", {"uuid": "GPU-x"})
    (launch,) = decode_dir(tmp_path, m)
    assert launch.counts["owners_claimed"] == 8 * 4  # CTAs 0-7, 4 warps each
    per = site_counts(launch, len(m.sites))
    claimed = per.sum(axis=1) > 0
    assert claimed.sum() == 32 and (per[claimed] == 1).all()
    assert validate_capture(QUACK, m)["verdict"] == "valid"
