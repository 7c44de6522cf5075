"""Shared-memory staging ([capture] staging): spec checks, compile and SASS of the staged probe,
and the real H200 capture of the staged GEMM against the global-path capture of the same spec."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from atrex_inject import snapshot
from atrex_inject.decode import decode_dir, site_counts
from atrex_inject.errors import SpecError
from atrex_inject.plan import Staging
from atrex_inject.manifest import load as load_manifest
from atrex_inject.measure import validate_measurement
from atrex_inject.plan import make_plan
from atrex_inject.spec import load_spec, with_recorder
from atrex_inject.validate import validate_capture
from atrex_inject.linemap import without_directives
from conftest import CUDA_SPECS, REPO, edit_file, nvcc_compile, tree_hashes

FIX = REPO / "tests" / "fixtures" / "h200"
STAGING = "[capture]\nrecorder = 'staged'\nring = 32\nwarps = 8\n"


def _spec_with(project: Path, *edits: tuple[str, str]) -> Path:
    return edit_file(project / "examples" / "specs" / "reduce_sumsq.toml", *edits)


@pytest.mark.parametrize("staging,msg", [
    ("ring = 64", "between 1 and 32 events per warp"),
    ("warps = 0", "between 1 and 32 warps per CTA"),
    ('recorder = "fast"', "capture.recorder 'fast' is not one of auto, global, staged, resident"),
    ('ring = 2\nrecorder = "resident"', "capture.ring sizes the staged recorder's rings"),
    ("staging = { events = 32, warps = 8 }", "capture.staging is now written as `recorder`, `ring` and `warps`"),
])
def test_bad_recorder_keys_are_refused_at_their_line(project, staging, msg):
    spec = _spec_with(project, ("[capture]\n", f"[capture]\n{staging}\n"))
    before = tree_hashes(project)
    with pytest.raises(SpecError, match=re.escape(msg)) as e:
        snapshot.apply(spec)
    assert e.value.line == 12  # the key's line, right under [capture] (line 11)
    assert tree_hashes(project) == before


def test_staging_needs_warp_level_roles(project):
    spec = _spec_with(project, ("[capture]\n", STAGING), ('role = "cta"', 'role = "thread"'))
    line = next(i for i, t in enumerate(spec.read_text().splitlines(), 1) if t == 'role = "thread"')
    # the spec's word, never the enum's repr (<Role.THREAD: 'thread'>)
    with pytest.raises(SpecError, match="role 'thread' records per thread; the staged recorder's rings stage per warp") as e:
        make_plan(load_spec(spec))
    assert e.value.line == line


def test_staging_is_for_the_cuda_backend(project):
    p = project / "examples" / "specs" / "scale_add_cutedsl.toml"
    p.write_text(p.read_text() + "\n[capture]\nrecorder = 'staged'\nring = 32\nwarps = 8\n")
    with pytest.raises(SpecError, match="applies to the cuda backend"):
        make_plan(load_spec(p))


@pytest.mark.parametrize("spec_path", [p for p in CUDA_SPECS if load_spec(p).capture.warps == 0],
                         ids=lambda p: p.stem)  # the examples that do not stage already
def test_staged_examples_compile_and_revert(project, spec_path):
    spec = with_recorder(project / "examples" / "specs" / spec_path.name, "staged", 8, 32)
    m = snapshot.apply(spec).manifest
    assert m.capture.staging == Staging(32, 8, 9 * 32 * m.capture.event_bytes * len(m.groups))  # 16 with the clock
    src = project / m.source.path
    assert "atrex::BasicRecorder<32u, 8u, 0u>" in src.read_text()
    for unit in [project / f.path for f in m.launchers] or [src]:  # a header compiles in its launchers
        proc = nvcc_compile(unit, project / "inst.o")
        assert proc.returncode == 0, proc.stderr
        assert "warning" not in proc.stderr
    snapshot.revert(spec)
    for f in [m.source.path, *(f.path for f in m.launchers)]:
        assert (project / f).read_bytes() == (REPO / f).read_bytes()


def test_staged_probe_sass(tmp_path):
    """One more staged probe adds a shared store (and its ring's copy-out), never an atomic or
    local memory."""
    import test_sass
    kernel = test_sass.KERNEL.replace("atrex::Recorder r(0u);", "atrex::BasicRecorder<32u, 8u, 0u> r(0u);")
    _, ops = test_sass.probe_delta(tmp_path, kernel)
    assert any(o.startswith("STS") for o in ops), ops
    assert not [o for o in ops if o.startswith(("ATOM", "RED", "LDL", "STL"))], ops


# ---- the staged GEMM captured on the H200 next to the global-path capture of the same spec ----

def test_staged_capture_has_the_global_captures_structure():
    """Same spec, same launch: staging changes where events wait, not which events exist."""
    staged_m = load_manifest(FIX / "gemm_mma_staged" / "manifest.json")
    global_m = load_manifest(FIX / "gemm_mma" / "manifest.json")
    r = validate_capture(FIX / "gemm_mma_staged", staged_m)
    assert r["verdict"] == "valid", [c for c in r["checks"] if not c["ok"]]
    (s,), (g,) = decode_dir(FIX / "gemm_mma_staged", staged_m), decode_dir(FIX / "gemm_mma", global_m)
    assert staged_m.sites == global_m.sites and staged_m.groups == global_m.groups
    assert s.counts == g.counts
    for col in ("cta_x", "cta_y", "warp"):
        assert (s.column(col) == g.column(col)).all()
    n = len(staged_m.sites)
    assert (site_counts(s, n) == site_counts(g, n)).all()


def test_gpu_ran_what_with_recorder_and_apply_write_here(project):
    fix = FIX / "gemm_mma_staged"
    m = load_manifest(fix / "manifest.json")
    spec = with_recorder(project / "examples" / "specs" / "gemm_mma.toml", "staged", 8, 32)
    assert snapshot.apply(spec).manifest.source.source_id == m.source.source_id
    ran = fix / "gemm_mma_staged.instrumented.cu"
    assert without_directives((project / m.source.path).read_text()) == ran.read_text()  # #line aside (linemap.py)
    art = json.loads((fix / "measure.json").read_text())
    art["sources"][0]["path"] = str(REPO / art["sources"][0]["path"])
    art["sources"][1]["path"] = str(ran)
    art["binaries"] = []  # the GPU host's binaries are not kept; everything else rechecks
    (project / "m.json").write_text(json.dumps(art))
    v = validate_measurement(project / "m.json")
    assert v["valid"], v["problems"]
    snapshot.revert(spec)
    shutil.rmtree(project / ".atrex")


def test_staging_that_overflows_static_shared_memory_is_refused_at_its_line(project):
    """(32 warps + 1) rings x 32 events x 16 bytes (the clock in wide events) x 3 owner groups is
    50688 bytes: more than the 48 KiB of static shared memory a CTA may declare."""
    spec = _spec_with(project, ("[capture]\n", "[capture]\nrecorder = 'staged'\nring = 32\nwarps = 32\nclock = true\nwide = true\n"))
    spec.write_text(spec.read_text() + '\n[[site]]\nname = "wg"\nanchor = { entry = true }\nrole = "warpgroup"\n')
    with pytest.raises(SpecError, match=r"need 50688 bytes of static shared memory per CTA \(3 owner groups") as e:
        make_plan(load_spec(spec))
    assert e.value.line == 12
    spec.write_text(spec.read_text().replace("warps = 32", "warps = 16"))  # 17 x 32 x 16 x 3 = 26112: fits
    assert load_spec(spec).capture.warps == 16


# ---- resident rings: staging = { warps, resident = true } ----

RESIDENT = "[capture]\nrecorder = 'resident'\nwarps = 8\n"


def lines(n: int) -> int:
    """A ring array's bytes as the runtime declares it: whole 128-byte lines."""
    return -(-n // 128) * 128


def test_resident_rings_apply_compile_and_revert(project):
    """The rings hold the whole capacity: per owner group, one ring per warp that can own it (8 for
    lane0, 1 for cta) of 80 slots + an overflow and a start slot, and the sink, x 8 bytes. The
    recorder gets its group's role, density and warp mask as literals."""
    spec = _spec_with(project, ("[capture]\n", RESIDENT))
    m = snapshot.apply(spec).manifest
    assert [g.role for g in m.groups] == ["lane0", "cta"]
    # + 2 tables; each array in whole 128-byte lines
    assert m.capture.staging == Staging(80, 8, lines((8 * 82 + 1) * 8) + lines((1 * 82 + 1) * 8) + 2 * 64 * 8, True)
    src = project / m.source.path
    assert ("atrex::BasicRecorder<80u, 8u, 0u, true, atrex::kLane0, 8u, 0u, 0xffffffffu> __atrex_r0(0u);"
            in src.read_text())
    assert "atrex::BasicRecorder<80u, 1u, 1u, true, atrex::kCta, 8u, 0u, 0xffffffffu> __atrex_r1(1u);" in src.read_text()
    proc = nvcc_compile(src, project / "inst.o")
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr
    snapshot.revert(spec)
    assert src.read_bytes() == (REPO / m.source.path).read_bytes()


def test_resident_rings_take_no_events(project):
    spec = _spec_with(project, ("[capture]\n", "[capture]\nring = 32\nrecorder = 'resident'\nwarps = 8\n"))
    with pytest.raises(SpecError, match=re.escape("capture.ring sizes the staged recorder's rings; recorder "
                                                  "'resident' has none of that size")) as e:
        load_spec(spec)
    assert e.value.line == 12


def test_resident_rings_over_static_shared_memory_are_refused(project):
    """Capacity 1024 (the probe-cost FMA loop's events per warp) in resident rings: 8 rings of 1026
    slots for the lane0 group and 1 for the cta group, more than the 48 KiB a CTA may declare."""
    spec = _spec_with(project, ("[capture]\n", RESIDENT), ("capacity = 80 ", "capacity = 1024 "))
    need = lines((8 * 1026 + 1) * 8) + lines((1 * 1026 + 1) * 8) + 2 * 64 * 8
    with pytest.raises(SpecError, match=re.escape(f"need {need} bytes of static shared memory per CTA (2 owner "
                                                  "groups x one ring per warp that can own it (at most 8) x 1024 + 2 "
                                                  "slots")) as e:
        make_plan(load_spec(spec))
    assert e.value.line == 12 and "lower capacity or warps" in e.value.hint


def test_resident_probe_sass(tmp_path):
    """A resident probe keeps nothing in registers: every lane loads the warp's table entry
    (`%warpid`) and lane 0 (`%laneid` read afresh) stores the event and the next slot to shared
    memory, as predicated stores: no branch (a branch around them cost reduce_sumsq's recording
    CTAs their start on the H200), no global store, no atomic, no local memory. In a
    strip-mined trip (hold .. rec_held .. release) the probe is a timer read, one shared store and
    one saturating add, with no branch."""
    import test_sass
    kernel = test_sass.KERNEL.replace("atrex::Recorder r(0u);", "atrex::BasicRecorder<64u, 8u, 0u, true> r(0u);")
    net, ops = test_sass.probe_delta(tmp_path, kernel)
    assert ops.count("LDS.64") == 1 and ops.count("STS") == 1 and ops.count("STS.64") == 1, ops
    assert not [o for o in ops if o.startswith(("BSSY", "BRA", "BSYNC"))], ops
    assert not [o for o in ops if o.startswith(("STG", "ATOM", "RED", "LDL", "STL"))], ops
    held = kernel.replace("PROBE", "r.hold(); PROBE").replace("atrex::finish(r);", "r.release(); atrex::finish(r);")
    net, ops = test_sass.probe_delta(tmp_path, held, "rec_held")
    assert any(o.startswith("STS") for o in ops) and "VIADDMNMX" in {o.split(".")[0] for o in ops}, ops
    assert not [o for o in ops if o.startswith(("STG", "BRA", "ISETP", "LDS", "ATOM", "RED", "LDL", "STL"))], ops
    assert net <= 5, ops


COPY = """
__global__ void copy(const float4* __restrict__ in, float4* __restrict__ out, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    out[i] = in[i];
  }
}
"""
COPY_SPEC = """version = 1
name = "copy"
question = "q"
backend = "cuda"
source = "k.cu"
kernel = "copy"
[capture]
capacity = 128
recorder = 'resident'\nwarps = 8
[[site]]
name = "iter"
anchor = { loop = "for (long i" }
position = "loop-begin"
"""


@pytest.mark.parametrize("case", ["canonical", "with-break", "in-branch"])
def test_a_dense_resident_loop_holds_its_slot_across_the_loop(tmp_path, case):
    """A resident loop site recording every iteration (bench/probe_cost's copy loop): in a canonical
    loop the warp's slot is held across the loop, so the recording loop has no table load; the
    table probe that a loop with a `break` keeps instead loads the entry at every probe and stores
    it back on lane 0 (copy loop: +4.08% on the H200), and so does a site under an `if` of the
    body, which lane 0 may skip while other lanes run it. Neither has a branch around its stores."""
    from atrex_inject import sass

    (tmp_path / ".git").mkdir()
    canonical = case == "canonical"
    kernel = {"canonical": COPY, "with-break": COPY.replace("out[i] = in[i];", "out[i] = in[i];\n    if (i == 7) break;"),
              "in-branch": COPY.replace("out[i] = in[i];", "if (i & 1) {\n      out[i] = in[i];\n    }")}[case]
    (tmp_path / "k.cu").write_text(kernel)
    site = ('anchor = { stmt = "out[i] = in[i]" }\nposition = "before"\n' if case == "in-branch"
            else 'anchor = { loop = "for (long i" }\nposition = "loop-begin"\n')
    (tmp_path / "s.toml").write_text(COPY_SPEC.replace('anchor = { loop = "for (long i" }\nposition = "loop-begin"\n', site))
    m = snapshot.apply(tmp_path / "s.toml").manifest
    text = (tmp_path / "k.cu").read_text()
    assert ("__atrex_r0.hold();  // atrex: the warp's ring slot held across the loop for site(s) iter" in text
            and "__atrex_r0.rec_held(0u);" in text and "} __atrex_r0.release_loop(); }" in text) == canonical
    assert m.to_json()["perturbation"]["strip_mined"] == ([{"line": 3, "every": 1, "sites": ["iter"]}] if canonical
                                                          else [])
    assert m.to_json()["perturbation"]["not_strip_mined"] == [] and not [w for w in m.warnings if "strip" in w]
    proc = nvcc_compile(tmp_path / "k.cu", tmp_path / "k.cubin", ["-cubin"])
    assert proc.returncode == 0, proc.stderr
    insns = sass.function(sass.disassemble(tmp_path / "k.cubin"), "copy__atrex")
    loop = next(l for l in sass.sides(insns)[1] if l.count("LDG"))
    body = [op for a, op, _ in insns if loop.start <= a <= loop.end]
    # in-branch: the BSSY is the kernel's own `if`
    assert (body.count("LDS.64"), "BSSY" in body) == ((0, False) if canonical else (1, case == "in-branch")), body
    snapshot.revert(tmp_path / "s.toml")
    assert (tmp_path / "k.cu").read_text() == kernel


STAGED_COPY_SPEC = COPY_SPEC.replace("recorder = 'resident'\nwarps = 8", "recorder = 'staged'\nring = 32\nwarps = 8")


@pytest.mark.parametrize("case", ["canonical", "8-byte", "payload", "begin-and-end", "own-pragma", "with-break",
                                  "in-branch"])
def test_a_dense_staged_loop_records_in_trips(tmp_path, case):
    """A staged loop site recording every iteration is recorded in trips: each trip starts with the
    warp's ring copied out, holds no more events than the ring has slots (32 iterations for one
    site, 16 for a loop-begin and a loop-end site), and its probes store without checking the ring:
    a timer read and a shared store an iteration, no convergence region (the checked probe's
    compare and branch made ptxas wrap each iteration in one: bench/probe_cost's FMA loop). A loop
    bringing its own `#pragma` gives it to the trip's loop, whose probes store each event. The
    iterations after the last trip use the checked probe. A loop that cannot be recorded in trips
    (a `break`, a site in the body) keeps the checked probe at every iteration. Without a
    `#pragma`, the trip's loop runs groups of iterations holding 16 bytes of events (four packed
    events, the spec leaving `packed` unset: four iterations, two with a loop-begin and a loop-end
    site; two 8-byte events with `packed = false`; one 16-byte event with a payload, lane 0's own),
    each group unrolled whole, whose probes keep their events in registers for lane 0 alone to
    store at the group's end, one 16-byte store predicated on the lane, not branched around (no
    convergence region)."""
    from atrex_inject import sass

    (tmp_path / ".git").mkdir()
    kernel = {"with-break": COPY.replace("out[i] = in[i];", "out[i] = in[i];\n    if (i == 7) break;"),
              "in-branch": COPY.replace("out[i] = in[i];", "if (i & 1) {\n      out[i] = in[i];\n    }"),
              "own-pragma": COPY.replace("  for (long i", "#pragma unroll 1\n  for (long i")}.get(case, COPY)
    loop_site = 'anchor = { loop = "for (long i" }\nposition = "loop-begin"\n'
    site = {"in-branch": 'anchor = { stmt = "out[i] = in[i]" }\nposition = "before"\n',
            "begin-and-end": loop_site + '\n[[site]]\nname = "end"\nanchor = { loop = "for (long i" }\nposition = "loop-end"\n',
            "payload": loop_site + 'payload = "i"\n'}.get(case, loop_site)
    (tmp_path / "k.cu").write_text(kernel)
    spec = STAGED_COPY_SPEC.replace(loop_site, site)
    (tmp_path / "s.toml").write_text(spec.replace("[capture]\n", "[capture]\npacked = false\n") if case == "8-byte"
                                     else spec)
    m = snapshot.apply(tmp_path / "s.toml").manifest
    assert m.capture.event_bytes == {"8-byte": 8, "in-branch": 8, "payload": 16}.get(case, 4)  # in-branch: no loop site
    text = (tmp_path / "k.cu").read_text()
    trip = {"canonical": 32, "8-byte": 32, "payload": 32, "begin-and-end": 16, "own-pragma": 32}.get(case, 0)
    sites = ["iter", "end"] if case == "begin-and-end" else ["iter"]
    line = 4 if case == "own-pragma" else 3
    assert m.to_json()["perturbation"]["strip_mined"] == ([{"line": line, "every": 1, "sites": sites, "trip": trip}]
                                                          if trip else [])
    group = {"canonical": 4, "8-byte": 2, "payload": 1, "begin-and-end": 2}.get(case, 0)  # iterations a group
    args = "0u, static_cast<unsigned>(i)" if case == "payload" else "0u"
    probe = f"__atrex_r0.stage(__atrex_h0, {args});" if group else "__atrex_r0.rec_held(0u);"
    assert (f"recorded in trips of {trip} iterations" in text and f"trip_end({trip * len(sites)}u)" in text
            and probe in text) == bool(trip)
    if trip:  # the rings are flushed before the first trip and after each, so the checked probes of
        # the last iterations start with room in the ring (they store, then drain a full ring)
        assert "__atrex_r0.trips_begin();" in text[:text.index("recorded in trips")].rsplit("\n", 1)[-1]
        assert re.search(rf"__atrex_r0\.flush\(32u\); \}}\s*for \(; i < n; [^{{]*\{{ __atrex_r0\.rec\({re.escape(args)}\);", text)
    assert text.count(f"__atrex_r0.rec({args});") == 1  # the remainder's (trips) or every iteration's probe
    proc = nvcc_compile(tmp_path / "k.cu", tmp_path / "k.cubin", ["-cubin"])
    assert proc.returncode == 0, proc.stderr
    insns = sass.function(sass.disassemble(tmp_path / "k.cubin"), "copy__atrex")
    loop = max((l for l in sass.sides(insns)[1] if l.count("LDG")), key=lambda l: l.count("LDG"))
    body = [op for a, op, _ in insns if loop.start <= a <= loop.end]
    timers = [w for a, _, w in insns if loop.start <= a <= loop.end and "SR_GLOBALTIMER" in w]
    if trip:  # the trip's loop: every iteration's timer read(s), its stores, no convergence region,
        # and the tag's valid bit not moved in as an immediate at each event (trips_begin loads it)
        assert len(timers) == body.count("LDG.E.128.CONSTANT") * len(sites), body
        trips = text[text.index("recorded in trips"):text.index("the last iterations")]
        if group:  # each group unrolled whole; how far the trip's loop of groups is, nvcc and ptxas decide
            assert trips.count("#pragma unroll") == 1 and re.search(
                rf"\) \{{\n\s*for \(const unsigned __atrex_e[^\n]*atrex::Held<{group * len(sites)}u> __atrex_h0;[^\n]*\n\s*#pragma unroll\n"
                rf"\s*for \(unsigned __atrex_u = 0u; __atrex_u < {group}u; \+\+__atrex_u\)", trips), trips
            assert re.search(r"\} __atrex_r0\.put\(__atrex_h0\); \} __atrex_r0\.flush", trips), trips
        else:
            assert trips.count("#pragma unroll") == 1 and re.search(r"#pragma unroll 1\n\s*for \(const unsigned __atrex_e", trips)
        # whole groups in the trip's loop (ptxas may unroll the trip's eight further: it unrolled this
        # 32-iteration trip whole under a `#pragma unroll 1` it was given)
        loads = body.count("LDG.E.128.CONSTANT")
        assert loads == 32 if case == "own-pragma" else loads % group == 0 and loads >= 4, body
        stores = [(p, o) for a, o, w in insns if loop.start <= a <= loop.end and o.startswith("STS")
                  for p in [w.split()[0] if w.startswith("@") else ""]]
        if group:  # a group's 16 bytes of events, one store by lane 0 only
            assert [o for _, o in stores] == ["STS.128"] * (loads // group), stores
            assert all(p.startswith("@") for p, _ in stores), stores
        assert "BSSY" not in body and any(o.startswith("STS") for o in body), body
        tags = [w for a, _, w in insns if loop.start <= a <= loop.end and re.search(r"-0x80000000|0x8000000[0-9a-f]\b", w)]
        assert tags == [], tags
    else:  # the checked probe: the ring's test and its drain in every iteration
        assert "BSSY" in body, body
    snapshot.revert(tmp_path / "s.toml")
    assert (tmp_path / "k.cu").read_text() == kernel


@pytest.mark.parametrize("resident", [True, False], ids=["resident", "global"])
def test_resident_entry_reads_and_calls_nothing_before_the_loop(project, resident):
    """A resident recorder finds its owner from the group's literals: from the copy's first
    instruction to its first global load (the recording side's loop), nothing but kernel parameters
    and the buffer pointer is read, nothing is called and nothing is written outside shared memory.
    The global path's `claim()` call there is the contrast (and the teeth)."""
    from atrex_inject import sass

    spec = project / "examples" / "specs" / "reduce_sumsq.toml"
    spec = with_recorder(spec, "resident", 8) if resident else with_recorder(spec, "global")
    m = snapshot.apply(spec).manifest
    cubin = project / "inst.cubin"
    proc = nvcc_compile(project / m.source.path, cubin, ["-cubin"])
    assert proc.returncode == 0, proc.stderr
    insns = sass.function(sass.disassemble(cubin), "reduce_sumsq__atrex")
    entry = insns[:next(i for i, (_, op, _) in enumerate(insns) if op.startswith("LDG"))]
    calls = [w for _, op, w in entry if op.startswith(("CALL", "STG", "RED", "ATOM", "LDL", "STL"))]
    constants = [w for _, _, w in entry if "c[0x3]" in w and "c[0x3][0x0]" not in w]
    if resident:
        assert not calls and not constants, (calls, constants)
        assert any(op.startswith("STS") for _, op, _ in entry)  # the start time, kept in the ring
    else:
        assert any(w.startswith("CALL") for w in calls), entry
    snapshot.revert(spec)


def _closing_calls(insns) -> dict[int, int]:
    """The out-of-line functions a copy calls that claim an owner (an integer REDG): start -> end."""
    targets = sorted({int(w.split()[-2], 16) for _, op, w in insns if op.startswith("CALL")})
    ends = targets[1:] + [insns[-1][0] + 1]
    return {t: e for t, e in zip(targets, ends)
            if any(t <= a < e and op.startswith("REDG.E.ADD.STRONG") for a, op, _ in insns)}


def test_resident_exit_is_one_call_per_exit_path(project):
    """A warp's resident recorders (reduce_sumsq: a lane0 group and a cta group) finish together:
    each of the copy's two exit paths makes one call that claims (the integer REDG) and copies out,
    where one call per group cost about +0.3% more on the H200."""
    from atrex_inject import sass

    spec = with_recorder(project / "examples" / "specs" / "reduce_sumsq.toml", "resident", 8)
    m = snapshot.apply(spec).manifest
    text = (project / m.source.path).read_text()
    assert text.count("atrex::finish(__atrex_r0, __atrex_r1);") == 2 and ".finish();  // atrex: publish" not in text
    cubin = project / "inst.cubin"
    proc = nvcc_compile(project / m.source.path, cubin, ["-cubin"])
    assert proc.returncode == 0, proc.stderr
    insns = sass.function(sass.disassemble(cubin), "reduce_sumsq__atrex")
    closing = _closing_calls(insns)
    calls = [w for _, op, w in insns if op.startswith("CALL") and int(w.split()[-2], 16) in closing]
    assert len(closing) == 1 and len(calls) == 2, calls
    snapshot.revert(spec)


def test_resident_capture_has_the_global_captures_structure(project):
    """Captured on the H200: the same owners, events and events per site and owner as the
    global-path capture of the same spec, and the source it ran is what with_recorder + apply write."""
    fix = FIX / "reduce_sumsq_resident"
    res_m, glob_m = load_manifest(fix / "manifest.json"), load_manifest(FIX / "reduce_sumsq" / "manifest.json")
    assert res_m.capture.staging == Staging(80, 8, ((8 * 82 + 1) + (1 * 82 + 1)) * 8 + 2 * 64 * 8, True)
    r = validate_capture(fix, res_m)
    assert r["verdict"] == "valid", [c for c in r["checks"] if not c["ok"]]
    (s,), (g,) = decode_dir(fix, res_m), decode_dir(FIX / "reduce_sumsq", glob_m)
    assert [x.name for x in res_m.sites] == [x.name for x in glob_m.sites] and res_m.groups == glob_m.groups
    assert s.counts == g.counts and s.counts["events"] == 34914
    assert not s.owners["lower_bound"].any()
    n = len(res_m.sites)
    assert (site_counts(s, n) == site_counts(g, n)).all()
    spec = with_recorder(project / "examples" / "specs" / "reduce_sumsq.toml", "resident", 8)
    assert snapshot.apply(spec).manifest.source.source_id == res_m.source.source_id
    assert without_directives((project / res_m.source.path).read_text()) == \
        (fix / "reduce_sumsq_resident.instrumented.cu").read_text()
    snapshot.revert(spec)


def test_resident_exit_reached_in_parts_claims_each_owner_once_on_the_h200(project):
    """Captured on the H200: saxpy_tail's block 390 has one warp, its last, with 7 lanes
    in range, so that warp reached the copy's two exits in two parts. Every owner of blocks 0 and
    390 was claimed once, the partial warp's by its lane 0 (thread 224), with its three events; the
    review's capture with every lane of a part claiming had 32 claims there and was refused. The
    source it ran is what apply writes here."""
    fix = FIX / "saxpy_tail"
    m = load_manifest(fix / "manifest.json")
    r = validate_capture(fix, m)
    assert r["verdict"] == "valid", [c for c in r["checks"] if not c["ok"]]
    (launch,) = decode_dir(fix, m)
    o = launch.owners
    assert o["cta"].tolist() == [0] * 8 + [390] * 8 and o["thread"].tolist() == list(range(0, 256, 32)) * 2
    assert (o["claims"] == 1).all() and (o["attempted"] == 3).all()
    assert launch.counts["duplicate_claims"] == 0 and launch.counts["events"] == 48
    spec = project / "examples" / "specs" / "saxpy_tail.toml"
    resident = snapshot.Options(recorder="resident")  # the capture's recorder (its launch bounds: 8 warps)
    assert snapshot.apply(spec, options=resident).manifest.source.source_id == m.source.source_id
    assert without_directives((project / m.source.path).read_text()) == (fix / "saxpy_tail.instrumented.cu").read_text()
    snapshot.revert(spec)


def test_resident_exit_reached_in_parts_is_left_to_the_owner_lane(project):
    """saxpy_tail's last block has a warp whose lanes past n return at the bounds check: that warp
    reaches the copy's exits in two parts, neither converged. The exit call returns at once on every
    lane but the owner's (lane 0) before it reads its table entry, so the owner is copied out and
    claimed once, by the part that holds lane 0; every lane of a part claimed it before, and a
    claim count above 1 makes decode refuse the owner."""
    from atrex_inject import sass

    spec = project / "examples" / "specs" / "saxpy_tail.toml"
    m = snapshot.apply(spec, options=snapshot.Options(recorder="resident")).manifest
    text = (project / m.source.path).read_text()
    assert text.count("atrex::finish(__atrex_r0);") == 2  # the bounds check's return and the end
    cubin = project / "inst.cubin"
    proc = nvcc_compile(project / m.source.path, cubin, ["-cubin"])
    assert proc.returncode == 0, proc.stderr
    insns = sass.function(sass.disassemble(cubin), "saxpy_tail__atrex")
    ((start, end),) = _closing_calls(insns).items()
    body = [w for a, _, w in insns if start <= a < end]
    head = body[:next(i for i, w in enumerate(body) if w.startswith("LDS"))]  # before the table entry is read
    (lane,) = [m[1] for w in head if (m := re.match(r"S2R (R\d+), SR_LANEID", w))]
    tests = {}  # register -> the predicate of its first `!= 0` test
    for m in (re.match(r"ISETP\.NE\.AND (P\d), PT, (R\d+), RZ, PT", w) for w in head):
        if m:
            tests.setdefault(m[2], m[1])
    lane_p = tests.pop(lane)  # %laneid != 0
    all_p = next(iter(tests.values()))  # the first other one: the `all` argument (the warp converged) != 0
    # returns where the warp is not converged (the guard) and the lane is not lane 0 (the condition)
    assert f"@!{all_p} RET.REL.NODEC {lane_p}, " in " ".join(head), head
    snapshot.revert(spec)
