"""The probes must not change the kernel they observe. Checked on the SASS (cuobjdump, no GPU) by
`atrex-inject check-sass` (atrex_inject.sasscheck.check, by the judgment of choice.judge): with probes
off the program runs the clean kernel itself, so the instrumented build's kernel must be the clean
build's, instruction for instruction; the instrumented copy K__atrex keeps the clean kernel's
registers and CTAs per SM; its clean side (CTAs that record nothing) holds every loop of the clean
kernel with the same memory and tensor instructions per trip and loads in flight; recording CTAs
keep the loads in flight of the loops they time. So a touched original, a clean side that lost
unrolling, a copy without versioning, a copy with more registers, or a rescheduled recording loop
fails."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from atrex_inject import sass, sasscheck
from atrex_inject.cli import app
from atrex_inject.cuda import rewrite as rw
from atrex_inject.spec import with_recorder

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


@pytest.mark.parametrize("example", ["reduce_sumsq", "gemm_mma"])
def test_clean_copy_keeps_the_clean_loops(project, example):
    r = sasscheck.check(project / "examples" / "specs" / f"{example}.toml", project).to_json()
    assert r["versioned"] and r["off_identical"] and r["ok"], r["missing"]
    assert r["clean_loops"] and all(r["registers"].values())
    assert r["registers"]["off"] == r["registers"]["clean"]


def test_layernorm_clean_side_is_rescheduled_on_the_global_path(project):
    """layernorm's global-path copy takes 48 registers against 32: its recorder's slot range is live
    from entry to exit, and ptxas schedules the copy's clean side for those registers: the
    statistics loop and the normalize loop keep more loads in flight than the clean kernel's (the
    copy ran 14% faster on the H200: another kernel). Same instructions per trip, so only the
    loads-in-flight count sees it: check-sass fails, naming the CTAs per SM the registers leave and
    both loops, and says to let the tool choose."""
    r = sasscheck.check(project / "examples" / "specs" / "layernorm.toml", project, recorder="global").to_json()
    assert r["off_identical"] and not r["ok"]
    changed = {(m["loop"]["LDG"], m["loop"]["STG"]): m for m in r["missing"]}
    assert set(changed) == {(16, 0), (12, 4)}, r["missing"]
    assert all(min(m["copy_in_flight"]) > m["in_flight"] for m in changed.values()), r["missing"]
    assert (r["registers"]["copy"], r["registers"]["clean"]) == (48, 32)  # a problem through what they cost:
    assert "the copy fits 5 CTAs per SM against the clean kernel's 8 (registers and static shared memory, 256 " \
           "threads per CTA)" in r["problems"]
    assert r["hint"].startswith("the spec (or --recorder) asks for the global recorder: drop [capture] recorder")


@pytest.mark.parametrize("example", ["layernorm", "reduce_sumsq"])
def test_resident_copies_keep_the_clean_registers_and_schedule(project, example):
    """With resident rings the recorder keeps its state in a shared table between probes (and in
    registers only within a strip-mined trip): check-sass passes on both memory-bound copies, with
    no recording loop keeping fewer loads in flight, and layernorm's copy has the clean kernel's 32
    registers. The recorder that kept its state in registers had 44 there (-13.7% on the H200) and
    40 on reduce_sumsq; reduce_sumsq's copy had 36 from its trips' write-back after their begin
    probe until the entry and the table probe lost their branches (+2.4% against +3.5% on the
    H200), and has the clean kernel's 32 since."""
    spec = with_recorder(project / "examples" / "specs" / f"{example}.toml", "resident", 8)
    r = sasscheck.check(spec, project).to_json()
    assert r["ok"] and not r["recording_fewer_in_flight"] and r["hint"] is None, r
    assert not r["recording_more_in_flight"], r
    assert r["registers"]["clean"] == 32 and r["registers"]["copy"] == 32, \
        r["registers"]


def test_check_sass_warns_when_a_trip_keeps_more_loads_in_flight_than_the_clean_loop(project):
    """reduce_sumsq's loop sites every 8 iterations instead of 4: the strip-mined trip is its body
    written out 8 times, which ptxas schedules with all 8 loads in flight where the clean loop,
    unrolled by 4, keeps 4: a doubt. And the copy takes 50 registers, 4 CTAs per SM against 8: a
    problem, so check-sass fails on it. On the H200 that recorded +0.98% against +2.43% at every 4
    (the example's grid puts 4 CTAs on each SM, so the occupancy the copy lost was never used: SASS
    does not know the grid); at every 4 it lists nothing (the test above)."""
    spec = with_recorder(project / "examples" / "specs" / "reduce_sumsq.toml", "resident", 8)
    spec.write_text(re.sub(r"(?m)^every = 4", "every = 8", spec.read_text()))
    r = sasscheck.check(spec, project).to_json()
    more = [(f["in_flight"], f["clean"], f["loads"], f["clean_loads"]) for f in r["recording_more_in_flight"]]
    assert r["verdict"] == "another kernel" and more == [(8, 4, 8, 4)], r
    assert r["problems"] == ["the copy fits 4 CTAs per SM against the clean kernel's 8 (registers and static shared "
                             "memory, 256 threads per CTA)"], r["problems"]
    out = CliRunner().invoke(app, ["check-sass", str(spec), "--root", str(project)])
    text = " ".join(out.output.split())
    assert out.exit_code == 1 and "UNSURE: recording CTAs run loop" in text, text
    assert "with 8 loads in flight where the clean kernel's loops keep at most 4" in text, text


def test_check_sass_warns_when_a_trip_is_shorter_than_the_clean_loops_unroll(project):
    """Every 2 iterations instead of 4: the trip is the body written out twice, 2 loads (both in
    flight) against the clean loop's 4. Its trip's loads are half the clean loop's, so it is matched
    to that loop and reported as keeping fewer in flight, with the trip named (capacity doubled
    for the events): a doubt, measure decides."""
    spec = with_recorder(project / "examples" / "specs" / "reduce_sumsq.toml", "resident", 8)
    spec.write_text(re.sub(r"(?m)^every = 4", "every = 2", spec.read_text()).replace("capacity = 80", "capacity = 160"))
    r = sasscheck.check(spec, project).to_json()
    fewer = r["recording_fewer_in_flight"]
    assert r["verdict"] == "unsure" and [(f["in_flight"], f["recording"]) for f in fewer] == [(4, 2)], fewer
    assert "2 LDG" in fewer[0]["trip"] and "4 LDG" in fewer[0]["loop"] and not r["recording_more_in_flight"]
    out = CliRunner().invoke(app, ["check-sass", str(spec), "--root", str(project)])
    text = " ".join(out.output.split())
    assert out.exit_code == 0 and "recording CTAs keep 2 loads in flight in their copy of the clean loop" in text, text


def test_a_rescheduled_recording_loop_is_not_blamed_on_every(project):
    """layernorm on the global path: every = 4 already matches its clean loops, and two of the
    recording side's loops keep 5 loads in flight against the clean kernel's 4 because ptxas
    scheduled the whole copy for 48 registers. check-sass reports them as rescheduled (as many loads
    per trip), not as a trip to shorten, and fails on what every CTA pays: the copy's occupancy."""
    spec = project / "examples" / "specs" / "layernorm.toml"
    r = sasscheck.check(spec, project, recorder="global").to_json()
    more = r["recording_more_in_flight"]
    assert r["verdict"] == "another kernel" and len(more) == 2 and all(f["loads"] <= f["clean_loads"] for f in more), more
    out = CliRunner().invoke(app, ["check-sass", str(spec), "--root", str(project), "--recorder", "global"])
    text = " ".join(out.output.split())
    assert out.exit_code == 1 and "PROBLEM: the copy fits 5 CTAs per SM against the clean kernel's 8" in text, text
    assert "UNSURE: recording CTAs run loop" in text, text


def test_sides_follow_the_flow_not_the_layout():
    """A loop belongs to the recording side when a timer read reaches it or it reaches one, through
    branches: here the clean side's loop is laid out between two pieces of the recording side."""
    body = ["ISETP.NE.AND P0, PT, R0, RZ, PT ;", "@P0 BRA 0x70 ;",          # 0x00 guard
            "CS2R.32 R4, SR_GLOBALTIMERLO ;", "LDG.E R6, desc[UR4][R2.64] ;",  # 0x20 recording: timer, loop
            "@P1 BRA 0x30 ;", "BRA 0xb0 ;",                                   # 0x40, 0x50
            "NOP ;",                                                          # 0x60
            "LDG.E R8, desc[UR4][R2.64] ;", "@P1 BRA 0x70 ;", "EXIT ;",      # 0x70 clean: loop, exit
            "NOP ;",                                                          # 0xa0
            "STG.E desc[UR4][R2.64], R4 ;", "EXIT ;"]                        # 0xb0 recording: exit
    insns = []
    for i, t in enumerate(body):
        op = t.lstrip("@!P0123456789 ").split()[0]
        if op == "BRA":
            op = f"BRA>{int(t.split()[-2], 16)}"
        insns.append((16 * i, op, t))
    clean, recording = sass.sides(insns)
    assert [(l.start, l.end) for l in clean] == [(0x70, 0x80)]
    assert [(l.start, l.end) for l in recording] == [(0x30, 0x40)]


def test_branches_with_a_second_predicate_are_branches():
    """ptxas gives a branch a second predicate (`@P0 BRA P1, 0x10`: taken when both hold; the
    strip-mined trip of variants.py's `trip` ends with one): its target is read, so it closes a
    loop, and without a guard it still falls through. A `BRA.DIV` (divergence handling) is not a
    loop's branch."""
    body = ["CS2R.32 R4, SR_GLOBALTIMERLO ;",      # 0x00 a timer read
            "LDG.E R6, desc[UR4][R2.64] ;",        # 0x10 a loop, closed by a two-predicate branch
            "@P0 BRA P1, 0x10 ;",                  # 0x20
            "BRA P2, 0x60 ;",                      # 0x30 no guard, a second predicate: falls through
            "LDG.E R8, desc[UR4][R2.64+0x4] ;",    # 0x40 reached from the timer read by that fall-through
            "EXIT ;",                              # 0x50
            "BRA.DIV UR4, 0x10 ;",                 # 0x60
            "EXIT ;"]
    text = "\n".join(["        Function : _Z1kPf", *(f"        /*{16 * i:04x}*/  {b}  /* 0x000000000000 */"
                                                    for i, b in enumerate(body))])
    insns = sass.parse(text)["_Z1kPf"]
    assert [op for _, op, _ in insns][2:4] == ["BRA>16", "BRA>96"] and insns[6][1] == "BRA.DIV"
    assert [(l.start, l.end) for l in sass.loops(insns)] == [(0x10, 0x20)]
    assert 0x40 in sass._timed(insns)


def test_check_sass_hint_says_what_to_change(project):
    """check-sass's `next:` line: where the spec (or --recorder) named the recorder, to let the tool
    choose; where the tool chose and none kept the kernel, what changes what the copy needs; where
    SASS cannot decide, the measurement that does."""
    from atrex_inject.choice import Choice
    from atrex_inject.plan import RecorderMode
    asked, chosen = Choice(RecorderMode(), "asked", "the spec asks"), Choice(RecorderMode(), "chosen", "none kept it")
    assert "drop [capture] recorder (auto)" in sasscheck._hint(asked, "another kernel")
    assert sasscheck._hint(chosen, "another kernel").startswith("no recorder keeps this kernel")
    assert "atrex-inject measure" in sasscheck._hint(chosen, "unsure") and sasscheck._hint(chosen, "keeps") is None


@pytest.mark.parametrize("body, in_flight", [
    (["LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;", "LDG.E.128.CONSTANT R8, desc[UR4][R12.64] ;",
      "FMUL R5, R5, R5 ;", "LDG.E.128.CONSTANT R16, desc[UR4][R14.64] ;"], 2),
    (["LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;", "LDG.E.128.CONSTANT R8, desc[UR4][R12.64] ;",
      "IADD3 R2, R2, 0x10, RZ ;", "LDG.E.128.CONSTANT R16, desc[UR4][R14.64] ;", "FADD R20, R11, R20 ;"], 3),
    (["LDG.E R4, desc[UR4][R2.64] ;", "STG.E desc[UR4][R6.64], R4 ;", "LDG.E R8, desc[UR4][R2.64+0x4] ;"], 1),
    (["LDG.E.64 R4, desc[UR4][R2.64] ;", "FADD R9, R6, R9 ;", "FADD R9, R5, R9 ;"], 1),
])
def test_loads_in_flight(body, in_flight):
    """Loads issued before an instruction reads one's result: a 16-byte load writes four registers
    (R8 feeds the FADD through R11), a store's registers are all read, an 8-byte load's second
    register counts; writes and unrelated reads do not end the count."""
    insns = [(16 * i, t.split()[0], t) for i, t in enumerate(body)]
    assert sass.loads_in_flight(insns) == in_flight


def _variant(project: Path, name: str, keep, resident: bool) -> Path:
    """reduce_sumsq's spec with only the sites `keep` accepts (by name), no intervals, optionally with
    resident rings, under its own file name."""
    spec = project / "examples" / "specs" / "reduce_sumsq.toml"
    head, *sites = spec.read_text().split("[[site]]")
    head = re.sub(r"(?m)^intervals\s*=.*$", "intervals = []", head)
    if resident:
        head = head.replace("[capture]\n", "[capture]\nrecorder = 'resident'\nwarps = 8\n", 1)
    sites[-1] = sites[-1].split("[expect]")[0]
    text = head + "".join("[[site]]" + b for b in sites if keep(re.search(r'name = "(\w+)"', b).group(1)))
    variant = spec.with_name(f"reduce_sumsq_{name}.toml")
    variant.write_text(text)
    return variant


def test_check_sass_warns_when_recording_ctas_keep_fewer_loads_in_flight(project, monkeypatch):
    """A recording side whose copy of a clean loop keeps fewer loads in flight (reduce_sumsq's entry
    site with resident rings did, 2 against 4, +14.9% on the H200, before the recorder's state left
    the registers; the softmax's copy that kept 1 against 4 measured -0.16%): compare_loops lists
    it, and check-sass says unsure and names the measurement that decides. Synthetic: the SASS of
    the current build has no such loop, so the recording side's loops are the clean loops with
    their in-flight count halved."""
    real = sass.sides

    def halved(insns):
        clean, recording = real(insns)
        return clean, [sass.Loop(l.start, l.end, l.ops, max(1, l.in_flight // 2)) if l.count("LDG") == 4 else l
                       for l in recording]

    monkeypatch.setattr(sass, "sides", halved)
    variant = _variant(project, "entry_resident", lambda site: site == "start", resident=True)
    r = sasscheck.check(variant, project).to_json()
    assert r["verdict"] == "unsure" and not r["missing"], r
    assert [(f["in_flight"], f["recording"]) for f in r["recording_fewer_in_flight"]] == [(4, 2)], r
    out = CliRunner().invoke(app, ["check-sass", str(variant), "--root", str(project)])
    assert out.exit_code == 0 and "keep 2 loads in flight in their copy" in " ".join(out.output.split()), out.output


def test_recording_side_keeps_the_clean_loop_when_its_sites_are_outside_it(project):
    """The same without the loop's sites but with those after it: every site's recorder state lives
    across the clean loop, yet since a warp's resident recorders finish in one call (and on the
    global path) the recording side keeps its four loads in flight; resident, this variant recorded
    +17% on the H200 while it kept 2, and +1.9% once it kept all four."""
    for resident in (True, False):
        variant = _variant(project, f"noloop_{resident}", lambda site: not site.startswith("iter_"), resident)
        r = sasscheck.check(variant, project).to_json()
        assert r["ok"] and r["recording_fewer_in_flight"] == [], r


def test_the_check_fails_when_the_kernel_run_with_probes_off_changes(project, monkeypatch):
    """Teeth for "off = the clean kernel": a rewrite that touches the original kernel (here a
    changed constant in its body, the copy left as it is) is reported."""
    real = rw.rewrite

    def touched(plan, text, runtime=None, launchers=None):
        out = real(plan, text, runtime, launchers)
        out.text = out.text.replace("float acc = 0.f;", "float acc = 1e-30f;", 1)
        return out

    monkeypatch.setattr(rw, "rewrite", touched)
    r = sasscheck.check(project / "examples" / "specs" / "reduce_sumsq.toml", project).to_json()
    assert not r["off_identical"] and not r["ok"] and not r["missing"], r


def test_the_check_doubts_a_copy_without_versioning(project, monkeypatch):
    """Teeth: with the body not versioned (every CTA runs the instrumented code) the clean
    reduction's 4x-unrolled loop, four 16-byte loads per trip, is reported missing: a doubt."""
    monkeypatch.setattr(rw, "kernel_split", lambda *a: "not versioned for this test")
    r = sasscheck.check(project / "examples" / "specs" / "reduce_sumsq.toml", project, recorder="global").to_json()
    assert any(m["loop"]["LDG"] == 4 for m in r["missing"]), r["missing"]
    assert any(d.startswith("the copy's clean side does not hold 1 clean loop(s) with 4 LDG") for d in r["doubts"])


def test_reduce_clean_loop_is_unrolled_four_times(project):
    """The figure behind the check: clean reduce_sumsq keeps four 16-byte loads in flight per trip."""
    r = sasscheck.check(project / "examples" / "specs" / "reduce_sumsq.toml", project).to_json()
    assert any("4 LDG" in l for l in r["clean_loops"])


def test_check_sass_command(project):
    res = CliRunner().invoke(app, ["check-sass", str(project / "examples" / "specs" / "reduce_sumsq.toml"),
                                   "--root", str(project), "--json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.output)
    assert r["ok"] and r["kernel"] == "reduce_sumsq" and r["registers"]["clean"] > 0
    bad = CliRunner().invoke(app, ["check-sass", str(project / "examples" / "specs" / "scale_add_cutedsl.toml"),
                                   "--root", str(project)])
    assert bad.exit_code == 2 and "cutedsl backend" in bad.output


@pytest.mark.parametrize("resident", [False, True], ids=["global", "resident"])
def test_strip_mined_group_issues_its_loads_before_the_begin_probe(project, resident):
    """In reduce_sumsq's recording copy, the strip-mined loop (the one with four LDG.E.128 and the
    probes' timer reads) issues all four loads before its first timer read: a begin probe ahead of
    them held back the group's later loads behind its store (docs/design.md)."""
    from atrex_inject import snapshot
    spec = with_recorder(project / "examples" / "specs" / "reduce_sumsq.toml", *(("resident", 8) if resident else
                                                                                  ("global",)))
    m = snapshot.apply(spec).manifest
    src = project / m.source.path
    build = sass.build(src, [str(src.parent)], ["-O3", "-gencode=arch=compute_90a,code=sm_90a", "-std=c++17"])
    insns, _, _ = build.kernel(m.perturbation.clone)
    probed = [l for l in sass.loops(insns) if l.count("LDG") == 4 and any("GLOBALTIMER" in i for a, o, i in insns
                                                                          if l.start <= a <= l.end)]
    assert len(probed) == 1, [sass.describe(l) for l in sass.loops(insns)]
    (loop,) = probed
    body = [(o, i) for a, o, i in insns if loop.start <= a <= loop.end]
    first_timer = next(k for k, (o, i) in enumerate(body) if "GLOBALTIMER" in i)
    loads = [k for k, (o, _) in enumerate(body) if o.startswith("LDG")]
    assert len(loads) == 4 and max(loads) < first_timer, body
    store = "STS" if resident else "STG"
    assert any(o.startswith(store) for o, _ in body[first_timer:]), body


@pytest.mark.parametrize("regs,warps", [(32, 64), (33, 51), (40, 51), (48, 42), (128, 16), (None, None)])
def test_warps_by_registers(regs, warps):
    assert sass.warps_by_registers(regs) == warps


def test_check_sass_says_when_the_copy_lowers_occupancy(project):
    """layernorm's global-path copy takes 48 registers against 32: check-sass says what that does to
    the CTAs an SM holds (from the kernel's __launch_bounds__), and fails; the GEMM's copy keeps the
    clean kernel's CTAs per SM."""
    spec = project / "examples" / "specs" / "layernorm.toml"
    r = CliRunner().invoke(app, ["check-sass", str(spec), "--root", str(project), "--recorder", "global"])
    assert r.exit_code == 1, r.output
    assert "occupancy: 8 CTAs per SM clean, 5 for the copy (256 threads per CTA)" in " ".join(r.output.split())
    g = sasscheck.check(project / "examples" / "specs" / "gemm_mma.toml", project).to_json()
    assert g["ctas_per_sm"]["copy"] == g["ctas_per_sm"]["clean"] == 2
