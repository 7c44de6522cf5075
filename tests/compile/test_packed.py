"""Packed events (`[capture] packed = true`): 4 bytes in the buffer, %globaltimer_lo | (site id + 1),
the site id in the timer's low 5 bits, which an H200's 32 ns tick leaves zero. The spec refuses what
does not fit, the recorder compiles for sm_90a with a 4-byte store, decode reads back what an 8-byte
capture of the same events reads, and a launch whose owner stamps show a finer tick is refused
(check `timer_resolution`), as is a sidecar whose stated resolution the stamps do not give."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

import test_sass
from atrex_inject import layout, snapshot, synthetic
from atrex_inject.decode import decode_dir
from atrex_inject.errors import SpecError
from atrex_inject.launchfile import raw_resolution_ns
from atrex_inject.sasscheck import check as sass_check
from atrex_inject.plan import make_plan
from atrex_inject.spec import load_spec, with_recorder
from atrex_inject.validate import Provenance, validate_dir
from atrex_inject.linemap import without_directives
from conftest import REPO, edit_file, nvcc_compile

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


def _spec(project, *edits):
    return edit_file(project / "examples" / "specs" / "reduce_sumsq.toml", *edits)


def test_packed_spec_gives_4_byte_events_in_the_manifest(project):
    spec = _spec(project, ("[capture]\n", "[capture]\npacked = true\n"))
    assert load_spec(spec).capture.packed
    m = snapshot.apply(spec).manifest
    assert m.capture.event_bytes == 4
    src = (project / m.source.path).read_text()
    assert "#define ATREX_TL_PACKED 1" in src
    snapshot.revert(spec)
    assert (project / m.source.path).read_bytes() == (REPO / m.source.path).read_bytes()


@pytest.mark.parametrize("edits, needle", [
    ((("[capture]\n", "[capture]\npacked = true\nclock = true\n"),), "no room for capture.clock"),
    ((("[capture]\n", "[capture]\npacked = true\n"), ('name = "finish"\n', 'name = "finish"\npayload = "n4"\n')),
     "no room for site 'finish''s payload"),
    ((("[capture]\n", "[capture]\npacked = 1\n"),), "'packed' must be a bool"),
])
def test_packed_refuses_what_does_not_fit_at_its_line(project, edits, needle):
    spec = _spec(project, *edits)
    with pytest.raises(SpecError, match=re.escape(needle)) as e:
        load_spec(spec)
    assert e.value.line == 12  # the [capture] table's packed line


@pytest.mark.parametrize("extra, refused", [(24, False), (25, True)])
def test_packed_holds_at_most_31_sites(project, extra, refused):
    """The example's 7 sites and `extra` more: 31 fit the low 5 bits (ids 0..30, stored + 1), 32 do not."""
    site = '[[site]]\nname = "s{}"\nanchor = {{ entry = true }}\nctas = {{ stride = 8 }}\n'
    spec = _spec(project, ("[capture]\n", "[capture]\npacked = true\n"),
                 ("[expect]", "".join(site.format(i) for i in range(extra)) + "[expect]"))
    if not refused:
        assert len(load_spec(spec).sites) == 31
        return
    with pytest.raises(SpecError, match=re.escape("holds site ids 0..30 in the timer's low 5 bits; this spec has "
                                                  "32 sites")) as e:
        load_spec(spec)
    assert e.value.line == 12


@pytest.mark.parametrize("example, edits, event_bytes", [
    ("sgemm_smem", (), 4),  # sites at every k-tile, `packed` unset
    ("sgemm_smem", (("[capture]\n", "[capture]\npacked = false\n"),), 8),
    ("sgemm_smem", (("[capture]\n", "[capture]\nclock = true\n"),), 8),  # the clock's 8-byte event
    ("sgemm_smem", (('name = "kt_end"\n', 'name = "kt_end"\npayload = "k0"\n'),), 16),
    ("reduce_sumsq", (), 8),  # every 4th iteration: no site at every trip
    ("scale_add_cutedsl", (), 8),  # IKeT buffers its own events
])
def test_events_are_packed_where_a_site_records_every_iteration(project, example, edits, event_bytes):
    """Where the spec leaves `packed` unset, the plan packs events where a site records every trip
    of a loop and one word holds what the spec records; `packed = false`, the clock, a payload, a
    sampled site or a backend with buffers of its own keep them wider."""
    spec = edit_file(project / "examples" / "specs" / f"{example}.toml", *edits)
    assert make_plan(load_spec(spec)).mode.event_bytes == event_bytes


def test_packed_is_the_recorders_own_format(project):
    spec = edit_file(project / "examples" / "specs" / "scale_add_cutedsl.toml",
                     ("[[site]]", "[capture]\npacked = true\n\n[[site]]"))
    with pytest.raises(SpecError, match=re.escape("capture.packed applies to the recorder's own buffers (IKeT "
                                                  "buffers its own events)")):
        make_plan(load_spec(spec))


def test_with_recorder_writes_packed_variants(project):
    spec = project / "examples" / "specs" / "reduce_sumsq.toml"
    for args, name in ((("global", 0), "reduce_sumsq_packed"), (("resident", 8), "reduce_sumsq_resident_packed"),
                       (("staged", 8), "reduce_sumsq_staged_packed")):
        s = load_spec(with_recorder(spec, *args, packed=True))
        assert (s.name, s.capture.recorder, s.capture.packed, s.capture.warps) == (name, args[0], True, args[1])


@needs_nvcc
def test_packed_format_constants_match_the_recorder(tmp_path):
    """The recorder's packed event and flags, printed by a host program built with -DATREX_TL_PACKED=1,
    are layout.py's: 4-byte events and ring slots, flags bit 2, the site in the low 5 bits."""
    src = tmp_path / "packed.cu"
    src.write_text('#include <cstdio>\n#include "atrex_timeline.cuh"\nint main() {\n'
                   '  std::printf("%u %u %u %u %u\\n", atrex::kEventBytes, atrex::kSlotBytes, atrex::kFlags,'
                   ' atrex::kPackedSiteBits, atrex::packed(0x12345660u, 30u));\n  return 0;\n}\n')
    proc = nvcc_compile(src, tmp_path / "packed", ["-O1", "-DATREX_TL_PACKED=1"])
    assert proc.returncode == 0, proc.stderr
    got = [int(v) for v in subprocess.run([str(tmp_path / "packed")], capture_output=True, text=True,
                                          check=True).stdout.split()]
    assert got == [4, 4, layout.FLAG_PACKED, layout.PACKED_SITE_BITS, 0x12345660 | 31]
    h = layout.build_header([synthetic.GROUP], (2, 1, 1), (256, 1, 1), 16, 4, False, synthetic.SOURCE_ID, 0)[0]
    assert int(h["flags"]) == layout.FLAG_PACKED and int(h["total_bytes"]) == 512 + 48 * 16 + 16 * 16 * 4


@needs_nvcc
def test_packed_global_probe_stores_one_word(tmp_path):
    """On the global path a packed probe stores 4 bytes (STG.E, not STG.E.64) and adds no instruction
    over the 8-byte probe: the site id is OR'd into the timer where the tag was moved."""
    plain, plain_ops = test_sass.probe_delta(tmp_path)
    kernel = "#define ATREX_TL_PACKED 1\n" + test_sass.KERNEL
    net, ops = test_sass.probe_delta(tmp_path, kernel)
    stores = [o for o in ops if o.startswith("STG")]
    assert stores == ["STG.E"], ops
    assert net <= plain, (ops, plain_ops)


@needs_nvcc
@pytest.mark.parametrize("example, recorder", [("reduce_sumsq", "global"), ("reduce_sumsq", "resident"),
                                               ("reduce_sumsq", "staged"), ("layernorm", "resident")])
def test_packed_examples_keep_the_clean_kernel(project, example, recorder):
    """The packed examples compile for sm_90a; with probes off the program runs the clean kernel
    instruction for instruction, and the copy's clean side keeps the clean loops (check-sass); with
    resident rings the copy keeps the clean kernel's 32 registers, as the 8-byte one does (packing
    happens at the exit's copy-out, off the loops)."""
    spec = with_recorder(project / "examples" / "specs" / f"{example}.toml", recorder, 8, packed=True)
    report = sass_check(spec, project).to_json()
    assert report["off_identical"] and not report["missing"], report
    if recorder == "resident":  # packing happens at the exit's copy-out: the copy keeps the clean kernel
        assert report["ok"], report
        assert report["registers"]["copy"] == report["registers"]["clean"] == 32, report["registers"]


def test_packed_capture_decodes_as_the_8_byte_one(tmp_path):
    """SYNTHETIC captures of the same events, 8-byte and packed: the same canonical events, both valid;
    the sidecar says the stamps' resolution (32 ns) and decode recomputes it."""
    m8 = synthetic.write_capture(tmp_path / "8", 20000, 256)
    m4 = synthetic.write_capture(tmp_path / "4", 20000, 256, packed=True)
    a, b = decode_dir(tmp_path / "8", m8)[0], decode_dir(tmp_path / "4", m4)[0]
    assert b.n_events == a.n_events == 20480
    for k in a.events:
        assert np.array_equal(a.events[k], b.events[k]), k
    assert b.meta.event_bytes == 4 and b.meta.timer_resolution_ns == 32
    side = json.loads((tmp_path / "4" / f"{synthetic.KERNEL}-launch0.json").read_text())
    assert side["timer_resolution_ns"] == 32
    assert validate_dir(tmp_path / "4", m4)[0]["verdict"] == "valid"


def _failed(report) -> list[tuple[str, int]]:
    return [(c["name"], c["count"]) for c in report["checks"] if not c["ok"]]


def test_a_packed_capture_from_a_finer_timer_is_refused(tmp_path):
    """Fault: a SYNTHETIC packed capture whose timer ticks every nanosecond (its low bits carry time,
    so the site ids OR'd into them are lost): timer_resolution fails, and nothing else is claimed."""
    m = synthetic.write_capture(tmp_path, 20000, 256, packed=True, tick=1)
    report, _ = validate_dir(tmp_path, m)
    assert report["verdict"] == "rejected"
    assert _failed(report) == [("timer_resolution", 1)]
    detail = next(c for c in report["checks"] if c["name"] == "timer_resolution")["details"][0]
    assert "multiples of 1 ns only" in detail and "with `packed = false` in [capture]" in detail


def test_an_8_byte_capture_from_a_finer_timer_is_valid(tmp_path):
    """The same timer with 8-byte events: the tag holds the site, so nothing is lost."""
    m = synthetic.write_capture(tmp_path, 20000, 256, tick=1)
    report, launches = validate_dir(tmp_path, m)
    assert report["verdict"] == "valid" and launches[0].meta.timer_resolution_ns == 1


def test_a_sidecar_whose_resolution_the_stamps_do_not_give_is_refused(tmp_path):
    """Fault: the sidecar's timer_resolution_ns edited (32 -> 16): the claim cannot be recomputed."""
    m = synthetic.write_capture(tmp_path, 20000, 256, packed=True)
    side = tmp_path / f"{synthetic.KERNEL}-launch0.json"
    side.write_text(side.read_text().replace('"timer_resolution_ns": 32', '"timer_resolution_ns": 16'))
    report, _ = validate_dir(tmp_path, m)
    assert _failed(report) == [("timer_resolution", 1)]
    assert "the sidecar says timer_resolution_ns 16; the owners' stamps in the buffer give 32" in next(
        c for c in report["checks"] if c["name"] == "timer_resolution")["details"][0]


def test_raw_resolution_reads_claimed_owners_only(tmp_path):
    """An unclaimed owner's zero header and an owner without an end stamp do not count."""
    h = layout.build_header([synthetic.GROUP], (1, 1, 1), (96, 1, 1), 4, 4, False, synthetic.SOURCE_ID, 0)
    own = np.zeros(3, dtype=layout.OWNER_DTYPE)
    own["claims"] = [1, 1, 0]
    own["t0_lo"], own["t1_lo"] = [0x40, 0x80, 0x1], [0, 0xC0, 0x3]
    raw = h.tobytes() + own.tobytes() + bytes(3 * 4 * 4)
    assert raw_resolution_ns(raw) == 0x40
    assert raw_resolution_ns(raw[:100]) == 0


FIX = REPO / "tests" / "fixtures" / "h200"


@pytest.mark.parametrize("name, warps", [("reduce_sumsq_resident_packed", 8), ("reduce_sumsq_packed", 0)])
def test_packed_h200_captures_hold_what_the_8_byte_one_holds(project, name, warps):
    """Captured on the H200: valid, 4-byte events, the sidecar's timer resolution 32 ns; the
    same owners, events and events per site and owner as the 8-byte resident capture of the same spec,
    in a file about half its size; and the source the GPU host ran is what with_recorder + apply write."""
    from atrex_inject.decode import site_counts
    from atrex_inject.manifest import load as load_manifest
    fix = FIX / name
    m, ref_m = load_manifest(fix / "manifest.json"), load_manifest(FIX / "reduce_sumsq_resident" / "manifest.json")
    assert m.capture.event_bytes == 4
    report, (p,) = validate_dir(fix, m, Provenance(source=fix / f"{name}.instrumented.cu"))
    assert report["verdict"] == "valid", _failed(report)
    (r,) = decode_dir(FIX / "reduce_sumsq_resident", ref_m)
    assert p.meta.timer_resolution_ns == 32 and p.meta.event_bytes == 4
    assert p.counts == r.counts and p.counts["events"] == 34914
    assert (site_counts(p, len(m.sites)) == site_counts(r, len(m.sites))).all()
    assert (fix / "reduce_sumsq-launch2.atrex").stat().st_size == 219104
    spec = with_recorder(project / "examples" / "specs" / "reduce_sumsq.toml", "resident" if warps else "global", warps,
                         packed=True)
    assert snapshot.apply(spec).manifest.source.source_id == m.source.source_id
    assert without_directives((project / m.source.path).read_text()) == (fix / f"{name}.instrumented.cu").read_text()
    snapshot.revert(spec)


def test_a_real_packed_capture_with_a_finer_stamp_is_refused(tmp_path):
    """Fault on the H200 capture: one owner's end stamp 1 ns later (as a timer ticking every
    nanosecond would give), with the sidecar's CRC and resolution made to agree: timer_resolution
    fails, and no other check."""
    import zlib
    from atrex_inject.manifest import load as load_manifest
    fix = tmp_path / "cap"
    shutil.copytree(FIX / "reduce_sumsq_packed", fix)
    raw = bytearray((fix / "reduce_sumsq-launch2.atrex").read_bytes())
    own = np.frombuffer(raw, dtype=layout.OWNER_DTYPE, count=594, offset=layout.HEADER_BYTES).copy()
    k = int(np.flatnonzero(own["claims"] > 0)[0])
    own["t1_lo"][k] += 1
    raw[layout.HEADER_BYTES:layout.HEADER_BYTES + own.nbytes] = own.tobytes()
    (fix / "reduce_sumsq-launch2.atrex").write_bytes(raw)
    side = json.loads((fix / "reduce_sumsq-launch2.json").read_text())
    side.update(crc32=zlib.crc32(bytes(raw)), timer_resolution_ns=1)
    (fix / "reduce_sumsq-launch2.json").write_text(json.dumps(side))
    report, _ = validate_dir(fix, load_manifest(fix / "manifest.json"))
    assert _failed(report) == [("timer_resolution", 1)]
    assert "multiples of 1 ns only" in next(c for c in report["checks"] if c["name"] == "timer_resolution")["details"][0]
