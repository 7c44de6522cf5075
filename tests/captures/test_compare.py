"""`atrex-inject compare BEFORE AFTER` (docs/compare.md) on real H200 captures: a capture against
itself and two recorders of one kernel against each other; A/A pairs drawn from one real capture
(the false-positive rate of the verdict) and the same pairs with a planted shift (it is found); one
planted fault per refusal (exit 2 naming the difference); the picture, the report's section, the
demo's step. The H200 A/A pair and the real change (scripts/gpu-compare.sh) are tested once their
fixtures are committed."""
from __future__ import annotations

from atrex_inject import sasscheck

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atrex_inject import manifest as mf
from atrex_inject.compare import SPEED, compare_dirs, durations, figure
from atrex_inject.decode import capture_files, decode_file
from atrex_inject.summary import summarize_capture
from atrex_inject.stats import Design
from atrex_inject.linemap import without_directives
from conftest import REPO, cli
from fuzz_support import check_cli, mutate_capture, mutate_json

FIX = REPO / "tests" / "fixtures" / "h200"
PAIR = FIX / "compare"  # scripts/gpu-compare.sh: before/, before_rerun/ (the A/A pair), after/ (the change)
SOURCES = REPO / "tests" / "sources" / "compare"
NO_CHANGE = "no change detected"


def _json(*args) -> tuple[int, dict]:
    code, out = cli("compare", *args, "--json")
    return code, json.loads(out)


def _copy(name: str, dest: Path) -> Path:
    shutil.copytree(FIX / name, dest)
    return dest


def _edit_json(path: Path, edit) -> None:
    obj = json.loads(path.read_text())
    edit(obj)
    path.write_text(json.dumps(obj))


def test_a_capture_against_itself_moves_nothing_and_its_figures_are_the_summarys(tmp_path):
    code, r = _json(FIX / "reduce_sumsq", _copy("reduce_sumsq", tmp_path / "again"))
    assert code == 0, r
    summary = summarize_capture(FIX / "reduce_sumsq", mf.for_capture(FIX / "reduce_sumsq"))["launches"][0]
    assert [iv["name"] for iv in r["intervals"]] == [iv["name"] for iv in summary["intervals"]]
    for got, want in zip(r["intervals"], summary["intervals"]):
        for side in ("before", "after"):
            assert got[side] == {k: want[k] for k in ("count", "p10", "median", "p90")}
        assert got["change_ns"] == 0 and got["verdict"] == NO_CHANGE
        assert got["per_cta"]["cta_max"]["verdict"] == NO_CHANGE and got["resolution_ns"] == 32
    assert [m["site"] for m in r["marks"]] == [m["site"] for m in summary["marks"]]
    assert all(m["verdict"] == NO_CHANGE for m in r["marks"])
    assert r["span"]["verdict"] == "not compared" and "several launches" in r["span"]["why"]
    assert r["statistics"]["bootstrap"]["resamples"] == "owners" and not r["statistics"]["launch_to_launch"]
    assert r["moved"] == [] and r["end_to_end"] is None and r["same_kernel_source"]
    assert cli("compare", FIX / "reduce_sumsq", tmp_path / "again")[1].rstrip().endswith("moved: nothing")


def test_two_recorders_of_one_kernel(tmp_path):
    """The reduction recorded through global stores, then through resident staging rings (same
    source, another instrumented build, same run): the streaming loop is faster with the rings; the
    warp's shuffle moved by exactly one tick (2 -> 3 ticks, +50%, its interval excludes 0), which
    the verdict does not count. Every figure is seeded: a second run prints the same bytes."""
    args = (FIX / "reduce_sumsq_global", FIX / "reduce_sumsq_resident")
    code, text = cli("compare", *args, "--json")
    assert code == 0
    assert cli("compare", *args, "--json") == (code, text)
    r = json.loads(text)
    iv = {x["name"]: x for x in r["intervals"]}
    stream, tail = iv["start -> stream_done"], iv["stream_done -> tail_done"]
    assert stream["verdict"] == "faster" and stream["ci95"][1] < 0 and stream["rank_test"]["p"] < 1e-6
    assert (tail["before"]["median"], tail["after"]["median"]) == (64.0, 96.0) and tail["ci95_ns"][0] > 0
    assert tail["verdict"] == NO_CHANGE and "timer's tick (32 ns)" in tail["why"]
    assert {m["site"]: m["verdict"] for m in r["marks"]}["finish"] == "earlier"
    assert r["workload"]["same"] and r["device"]["same_gpu"] and r["same_kernel_source"]
    assert r["moved"] == ["start -> stream_done faster -3.2%", "iter_begin -> iter_end faster -3.6%"]
    code, text = cli("compare", *args)
    assert code == 0 and "moved: start -> stream_done faster -3.2%; iter_begin -> iter_end faster" in text
    assert "no change detected (not more than a tick)" in text and "one launch a side" in text


def _halves(launch, rng) -> tuple[np.ndarray, np.ndarray]:
    """A random half of the launch's owners, and each owner's index within its half."""
    n = launch.owners["claims"].size
    half = np.zeros(n, dtype=bool)
    half[rng.permutation(n)[: n // 2]] = True
    idx = np.empty(n, dtype=np.int64)
    idx[half], idx[~half] = np.arange(half.sum()), np.arange(n - half.sum())
    return half, idx


def _aa(fixture: str, pairs: int, shift: float = 0.0) -> dict[str, int]:
    """SYNTHETIC A/A pairs from one real capture: its owners split at random into two halves, each
    compared with compare's own figure (its bootstrap sets drawn afresh per pair); AFTER's durations
    stretched by `shift` (whole ticks) when asked. The number of pairs per interval whose verdict
    says it moved."""
    m = mf.for_capture(FIX / fixture)
    launch = decode_file(capture_files(FIX / fixture)[0], m)
    ivs = [(iv.name, *durations(launch, iv.start_id, iv.end_id)[:2]) for iv in m.intervals]
    rng = np.random.default_rng(20261202)
    moved = {name: 0 for name, _, _ in ivs}
    for _ in range(pairs):
        half, idx = _halves(launch, rng)
        wb = Design.of(np.zeros(int(half.sum()), dtype=np.int64)).draw(rng)[0]
        wa = Design.of(np.zeros(int((~half).sum()), dtype=np.int64)).draw(rng)[0]
        for name, p, tick in ivs:
            b = half[p["owner"]]
            after = p["dur"][~b]
            if shift:
                after = after + np.round(after * shift / tick).astype(np.int64) * tick
            r = figure(p["dur"][b], idx[p["owner"][b]], wb, after, idx[p["owner"][~b]], wa, tick, SPEED)
            moved[name] += r["verdict"] != NO_CHANGE
    return moved


def test_false_positive_rate_of_the_verdict_over_200_aa_pairs():
    """200 A/A pairs from the reduction's real capture (its 594 owners split in halves): the verdict
    says `no change detected` for each interval in at least 95% of them."""
    moved = _aa("reduce_sumsq", 200)
    assert set(moved) == {"start -> stream_done", "stream_done -> tail_done", "iter_begin -> iter_end"}
    assert all(n <= 10 for n in moved.values()), moved


def test_a_planted_shift_is_found_in_the_same_pairs():
    """The same kind of pairs with AFTER's durations 5% longer: the streaming loop (about 1850 ticks)
    and the loop trip (about 56 ticks: 5% is 3 ticks) are called slower in at least 95% of them; the
    shuffle (2 ticks: 5% of it rounds to nothing) is not."""
    moved = _aa("reduce_sumsq", 40, shift=0.05)
    assert moved["start -> stream_done"] >= 38 and moved["iter_begin -> iter_end"] >= 38, moved
    assert moved["stream_done -> tail_done"] <= 2, moved


def test_launch_to_launch_variation_is_not_a_change():
    """SYNTHETIC: 60 A/A pairs of sides of 8 launches x 64 owners, each launch offset as a whole
    (0.5% of the duration, its owners' spread 1%): with both sides' launches as the units (the
    bootstrap draws launches first, the rank test compares launch medians) at most 5% of the pairs
    move; taking the owners as independent, as if one launch, calls about half of them a change."""
    rng = np.random.default_rng(11)
    k, n = 8, 64
    launch = np.repeat(np.arange(k), n)

    def side():
        v = 60_000 + rng.normal(0, 300, k)[:, None] + rng.normal(0, 600, (k, n))
        return (v // 32 * 32).astype(np.int64).ravel()
    by_launch = by_owner = 0
    for _ in range(60):
        vb, va = side(), side()
        r = figure(vb, np.arange(k * n), Design.of(launch).draw(rng)[0], va, np.arange(k * n),
                   Design.of(launch).draw(rng)[0], 32, SPEED, launch, launch)
        by_launch += r["verdict"] != NO_CHANGE
        one = Design.of(np.zeros(k * n, dtype=np.int64))
        r = figure(vb, np.arange(k * n), one.draw(rng)[0], va, np.arange(k * n), one.draw(rng)[0], 32, SPEED)
        by_owner += r["verdict"] != NO_CHANGE
    assert by_launch <= 3 and by_owner >= 20, (by_launch, by_owner)


def test_several_launches_a_side(tmp_path):
    """SYNTHETIC captures of 4 launches each (synthetic.write_capture): launches are drawn first and
    are the rank test's units; each launch's bootstrap weights add up to the launches drawn times
    its owners; the span gets an interval."""
    from atrex_inject import synthetic

    for s in range(4):
        synthetic.write_capture(tmp_path / "a", 20000, 64, seed=s, launch_seq=s)
        synthetic.write_capture(tmp_path / "b", 20000, 64, seed=10 + s, launch_seq=s)
    code, r = _json(tmp_path / "a", tmp_path / "b")
    assert code == 0, r
    st = r["statistics"]
    assert st["launch_to_launch"] and st["bootstrap"]["resamples"] == "launches, then owners within each drawn launch"
    assert "launches (both sides hold several" in st["rank_test"]
    iv = r["intervals"][0]
    assert len(iv["launch_medians"]["before"]) == 4 and iv["verdict"] == NO_CHANGE
    assert r["span"]["ci95"] is not None and r["span"]["before"]["count"] == 4
    design = Design.of(np.repeat(np.arange(3), [5, 7, 9]))
    w, counts = design.draw(np.random.default_rng(1), 500)
    assert (counts.sum(axis=1) == 3).all()
    for l, (lo, hi) in enumerate(((0, 5), (5, 12), (12, 21))):
        assert (w[:, lo:hi].sum(axis=1) == counts[:, l] * (hi - lo)).all()


# ---- planted faults: one each, exit 2 naming the difference ----

def test_different_sites_need_map(tmp_path):
    after = _copy("reduce_sumsq", tmp_path / "after")

    def rename(m):  # SYNTHETIC: the site `start` renamed in AFTER's spec
        for s in m["sites"]:
            s["name"] = "begin" if s["name"] == "start" else s["name"]
        for iv in m["intervals"]:
            if iv["start"] == "start":
                iv.update(name=iv["name"].replace("start ->", "begin ->"), start="begin")
        m["expect"] = {("begin" if k == "start" else k): v for k, v in m["expect"].items()}
    _edit_json(after / "manifest.json", rename)
    code, err = _json(FIX / "reduce_sumsq", after)
    assert code == 2 and "different sites: only in BEFORE: start; only in AFTER: begin" in err["error"], err
    assert "--map OLD=NEW" in err["hint"]
    code, r = _json(FIX / "reduce_sumsq", after, "--map", "start=begin")
    assert code == 0, r
    iv = r["intervals"][0]
    assert iv["name"] == "begin -> stream_done" and iv["before_name"] == "start -> stream_done"
    assert iv["verdict"] == NO_CHANGE and r["map"] == {"start": "begin"}
    assert {m["site"]: m.get("before_site") for m in r["marks"]}["begin"] == "start"
    code, err = _json(FIX / "reduce_sumsq", after, "--map", "stat=begin")
    assert code == 2 and "BEFORE has no site 'stat'" in err["error"]
    code, err = _json(FIX / "reduce_sumsq", after, "--map", "start")
    assert code == 2 and "is not OLD=NEW" in err["error"]


def test_another_workload(tmp_path):
    after = _copy("reduce_sumsq", tmp_path / "after")
    side = next(after.glob("*.json"))  # SYNTHETIC: the launch's sidecar names another workload
    _edit_json(side, lambda s: s.update(workload="reduce_sumsq:n=1024:seed=1:grid=528"))
    code, err = _json(FIX / "reduce_sumsq", after)
    assert code == 2 and err["error"] == ("the workloads differ: BEFORE ran 'reduce_sumsq:n=67108864:seed=1:grid=528', "
                                          "AFTER 'reduce_sumsq:n=1024:seed=1:grid=528'")
    assert "--allow-workload-change" in err["hint"]
    code, r = _json(FIX / "reduce_sumsq", after, "--allow-workload-change")
    assert code == 0 and r["workload"] == {"before": "reduce_sumsq:n=67108864:seed=1:grid=528",
                                           "after": "reduce_sumsq:n=1024:seed=1:grid=528", "same": False,
                                           "change_allowed": True}
    assert "workload CHANGED (allowed)" in cli("compare", FIX / "reduce_sumsq", after, "--allow-workload-change")[1]


def test_another_device(tmp_path):
    after = _copy("reduce_sumsq", tmp_path / "after")
    side = next(after.glob("*.json"))  # SYNTHETIC: the sidecar names another GPU model
    _edit_json(side, lambda s: s["device"].update(name="NVIDIA H100 80GB HBM3", sm_count=132))
    code, err = _json(FIX / "reduce_sumsq", after)
    assert code == 2 and err["error"] == ("the device models differ: BEFORE ran on NVIDIA H200 (132 SMs, cc 9.0), "
                                          "AFTER on NVIDIA H100 80GB HBM3 (132 SMs, cc 9.0)")
    code, r = _json(FIX / "reduce_sumsq", after, "--allow-device-change")
    assert code == 0 and not r["device"]["same_model"] and r["device"]["change_allowed"]
    _edit_json(side, lambda s: s["device"].update(name="NVIDIA H200", uuid="GPU-another"))
    code, r = _json(FIX / "reduce_sumsq", after)  # another H200: fine, and said
    assert code == 0 and r["device"]["same_model"] and not r["device"]["same_gpu"]


def test_a_rejected_capture(tmp_path):
    before = _copy("reduce_sumsq", tmp_path / "before")
    raw = next(before.glob("*.atrex"))
    data = bytearray(raw.read_bytes())  # SYNTHETIC: one byte of an event flipped
    data[-100] ^= 0x40
    raw.write_bytes(bytes(data))
    code, err = _json(before, FIX / "reduce_sumsq")
    assert code == 2 and err["error"].startswith(f"BEFORE {before} is rejected by validation; failed checks: "
                                                 "truncation (1: ")
    assert "checksum mismatch" in err["error"] and f"atrex-inject validate {before}" in err["hint"]


def test_an_empty_side(tmp_path):
    empty = tmp_path / "empty"  # the program ran, but no launch of the kernel was written
    empty.mkdir()
    shutil.copy(FIX / "reduce_sumsq" / "manifest.json", empty)
    code, err = _json(FIX / "reduce_sumsq", empty)
    assert code == 2 and err["error"] == f"AFTER: no *.atrex capture files in {empty}"
    code, err = _json(tmp_path / "nowhere", FIX / "reduce_sumsq")
    assert code == 2 and err["error"] == f"BEFORE: capture folder {tmp_path / 'nowhere'} does not exist"


def test_an_empty_launch(tmp_path):
    """SYNTHETIC: a valid capture whose one launch recorded nothing (an explicit-predicate site no
    owner took) is refused as holding no events."""
    from dataclasses import replace

    from atrex_inject.launchfile import write_launch
    from atrex_inject.layout import OWNER_DTYPE, Role, build_header
    from atrex_inject.manifest import Group
    from atrex_inject import synthetic

    g = Group(0, Role.PREDICATE, 1, 0, 0xFFFFFFFF, "threadIdx.x == 999")
    m = synthetic.manifest(2)
    m = replace(m, groups=(g,), sites=tuple(replace(s, role=Role.PREDICATE) for s in m.sites))
    h = build_header([g], (4, 1, 1), (256, 1, 1), 2, 8, False, synthetic.SOURCE_ID, 0)
    n = int(h["n_owners"][0])
    own, events = np.zeros(n, dtype=OWNER_DTYPE), np.zeros(n * 2 * 2, dtype="<u4")  # nobody claimed, nothing written
    cap = tmp_path / "cap"
    write_launch(cap, synthetic.KERNEL, 0, h.tobytes() + own.tobytes() + events.tobytes(), [4, 1, 1], [256, 1, 1],
                 synthetic.SOURCE_ID, "synthetic", {"name": "none (SYNTHETIC capture)", "uuid": "GPU-synthetic"},
                 synthetic.RUN_ID)
    (cap / "manifest.json").write_text(m.dumps())
    assert json.loads(cli("validate", cap, "--json")[1])["verdict"] == "valid"
    code, err = _json(cap, cap)
    assert code == 2 and err["error"] == f"BEFORE {cap} holds no events: its launches recorded nothing"


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2 ** 32))
def test_mutated_captures_and_measurements_end_in_an_exit_status(tmp_path_factory, seed):
    """SYNTHETIC mutations of a real capture (buffer, sidecar, manifest, file name) on either side,
    or of a measurement: compare ends in 0 or 2 with a message, never a traceback."""
    rng = random.Random(seed)
    tmp = tmp_path_factory.mktemp("cmp")
    folder = _copy("reduce_sumsq", tmp / "cap")
    mutate_capture(rng, folder)
    sides = (FIX / "reduce_sumsq", folder) if rng.random() < 0.5 else (folder, FIX / "reduce_sumsq")
    assert check_cli(tmp, "compare", *sides, "--json") in (0, 2)
    art = tmp / "m.json"
    art.write_text(json.dumps(mutate_json(rng, json.loads((FIX / "gemm_mma_staged" / "measure.json").read_text()))))
    assert check_cli(tmp, "compare", FIX / "gemm_mma", FIX / "gemm_mma_staged", "--measurement-before",
                     FIX / "measure" / "gemm_mma.json", "--measurement-after", art, "--json") in (0, 2)


# ---- with measurements: the end-to-end change next to the intervals ----

def test_end_to_end_from_each_sides_measurement(tmp_path):
    before, after = FIX / "measure" / "gemm_mma.json", FIX / "gemm_mma_staged" / "measure.json"
    code, r = _json(FIX / "gemm_mma", FIX / "gemm_mma_staged", "--measurement-before", before,
                    "--measurement-after", after)
    assert code == 0, r
    e = r["end_to_end"]["clean"]
    mb, ma = (json.loads(p.read_text())["median_ms"]["baseline"] for p in (before, after))
    assert (e["before_ms"], e["after_ms"]) == (mb, ma) and e["change"] == pytest.approx(ma / mb - 1)
    assert e["ci95"][0] < e["change"] < e["ci95"][1] and e["processes"] == [8, 8]
    text = cli("compare", FIX / "gemm_mma", FIX / "gemm_mma_staged", "--measurement-before", before,
               "--measurement-after", after)[1]
    assert f"end to end (clean builds, each side's measurement): {mb:.4f} -> {ma:.4f} ms" in text
    assert text.rstrip().splitlines()[-1].endswith(f"| end to end (clean builds) {100 * e['change']:+.1f}%")
    # a folder's own measure.json counts when both sides carry one
    assert _json(FIX / "gemm_mma", FIX / "gemm_mma_staged")[1]["end_to_end"] is None
    own = _copy("gemm_mma", tmp_path / "gemm_mma")
    shutil.copy(before, own / "measure.json")
    assert _json(own, FIX / "gemm_mma_staged")[1]["end_to_end"] == r["end_to_end"] | {
        "measurements": [str(own / "measure.json"), str(after)]}
    # ... and is left out, with a note, when it is not of its capture's workload (the CuTe DSL fixture's
    # measurement is of the 4096^3 problem, its capture of the small one)
    code, r2 = _json(FIX / "cutedsl", FIX / "cutedsl")
    assert code == 0 and r2["end_to_end"] is None
    assert r2["notes"] == [f"no end-to-end change: BEFORE's measurement ran workload 'scale_add:n=16777216:blocks=528:"
                           f"seed=1', its capture 'scale_add:small:seed=1' ({FIX / 'cutedsl' / 'measure.json'})"]
    code, err = _json(FIX / "gemm_mma", FIX / "gemm_mma_staged", "--measurement-before", before)
    assert code == 2 and "go together" in err["error"]
    code, err = _json(FIX / "reduce_sumsq", FIX / "reduce_sumsq", "--measurement-before", before,
                      "--measurement-after", after)  # the GEMM's measurements against the reduction's capture
    assert code == 2 and "BEFORE's measurement ran workload 'gemm_bf16:M=4096:N=4096:K=4096:seed=1'" in err["error"]
    edited = tmp_path / "m.json"  # SYNTHETIC: a sample's latency edited, the medians left as written
    art = json.loads(after.read_text())
    art["samples"][0]["sample"]["latency_ms"] *= 2
    edited.write_text(json.dumps(art))
    code, err = _json(FIX / "gemm_mma", FIX / "gemm_mma_staged", "--measurement-before", before,
                      "--measurement-after", edited)
    assert code == 2 and err["error"].startswith("AFTER's measurement is rejected: sample 0: parsed sample differs")


# ---- the picture, the report's section, the demo ----

def test_png_has_a_row_per_interval(tmp_path):
    from atrex_inject.compare_picture import draw

    code, r = _json(FIX / "gemm_mma", FIX / "gemm_mma_staged", "--png", tmp_path / "c.png")
    assert code == 0 and (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and r["png"] == str(tmp_path / "c.png")
    fig = draw(compare_dirs(FIX / "gemm_mma", FIX / "gemm_mma_staged"))
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert titles == [t for iv in r["intervals"] for t in (
        f"{iv['name']}: {iv['verdict']} {100 * iv['change']:+.1f}% [{100 * iv['ci95'][0]:+.1f}, "
        f"{100 * iv['ci95'][1]:+.1f}]", "median per SM")]


def test_report_has_the_comparison(tmp_path):
    code, out = cli("report", FIX / "reduce_sumsq_resident", "-o", tmp_path / "r.html", "--compare",
                    FIX / "reduce_sumsq_global", "--json")
    assert code == 0, out
    html = (tmp_path / "r.html").read_text()
    assert '<table class="comparison">' in html and html.count('<img class="comparison"') == 1
    assert "moved: start -&gt; stream_done faster -3.2%" in html
    r = json.loads(out)
    assert r["answer"].startswith("Before → after: `start -> stream_done` faster") and r["capture_answer"] != r["answer"]
    assert html.index('id="answer"') < html.index('id="comparison"') < html.index("<h2>Intervals</h2>")
    bad = _copy("reduce_sumsq", tmp_path / "bad")
    (bad / "manifest.json").unlink()
    code, out = cli("report", FIX / "reduce_sumsq_resident", "-o", tmp_path / "r2.html", "--compare", bad, "--json")
    assert code == 2 and json.loads(out)["error"] == f"BEFORE: no manifest at {bad / 'manifest.json'}"
    assert not (tmp_path / "r2.html").exists()
    code, out = cli("report", FIX / "reduce_sumsq", "-o", tmp_path / "r3.html", "--map", "a=b", "--json")
    assert code == 2 and "--map and --allow-* apply to --compare" in json.loads(out)["error"]


def test_report_comparison_in_a_browser(tmp_path):
    """The section as Chromium shows it (the H200 pair once committed, else the reduction's two
    recorders): the table's rows are the intervals and their straggler rows, the picture decodes.
    The screenshot is left next to the report (`pytest --basetemp DIR` keeps it in DIR)."""
    from test_report import CHROMIUM, CHROMIUM_ARGS, _sync_playwright

    before, after = ((PAIR / "before", PAIR / "after") if (PAIR / "after").is_dir() else
                     (FIX / "reduce_sumsq", FIX / "reduce_sumsq_resident"))
    assert cli("report", after, "-o", tmp_path / "r.html", "--compare", before)[0] == 0
    with _sync_playwright()() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.goto((tmp_path / "r.html").as_uri())
        # the answer box opens with the before/after answer, then AFTER's own; the comparison comes
        # before the per-launch tables
        box = page.locator("#answer").inner_text()
        assert box.startswith("Answer: Before → after: ") and "Answer in this capture alone: " in box, box
        assert box.index("Before → after") < box.index("in this capture alone")
        tops = page.evaluate("[...document.querySelectorAll('h2')].map(h => [h.id || h.textContent, "
                             "h.getBoundingClientRect().top])")
        order = [name for name, _ in sorted(tops, key=lambda t: t[1])]
        assert order.index("comparison") < order.index("The intervals on one axis") < order.index("Intervals"), order
        first = [r.split("\t")[0].strip() for r in page.locator("table.comparison tr").all_inner_texts()[1:]]
        assert first[:2] == ["start -> stream_done", "per CTA: max (p90 the same)"]
        img = page.locator("img.comparison")
        assert img.evaluate("e => e.complete && e.naturalWidth") > 1000
        top = page.evaluate("document.getElementById('comparison').getBoundingClientRect().top + window.scrollY")
        height = page.evaluate("document.body.scrollHeight") - top
        page.screenshot(path=str(tmp_path / "comparison.png"), full_page=True,
                        clip={"x": 0, "y": top, "width": 1500, "height": height})
        browser.close()
    assert (tmp_path / "comparison.png").stat().st_size > 10_000


def test_demo_compares_the_bundled_pair(demo_text):
    """The demo's comparison step on the bundled H200 pair (tests/fixtures/h200/compare/: the
    reduction before and after unrolling its streaming loop by 4): the streaming interval, the launch
    span and the clean builds' end-to-end time all moved faster, and the picture is written."""
    code, out, work = demo_text
    assert code == 0 and "8. compare: H200 captures of tests/sources/compare/sumsq.cu before and after" in out
    assert ("moved: start -> stream_done faster -12.6%; tail_done -> finish faster -56.9%; launch span faster "
            "-16.2% | end to end (clean builds) -14.9%") in out
    assert (work / "compare.png").is_file()


def test_a_per_cta_p90_that_is_the_max_is_not_a_row_of_its_own():
    """Each CTA of the bundled pair has 8 instances, so its p90 is its max: the table shows one
    straggler row per interval, labelled as both, and the moved line names it once."""
    code, out = cli("compare", PAIR / "before", PAIR / "after")
    assert code == 0, out
    assert "per CTA: p90" not in out and out.count("per CTA: max (p90 the same)") == 3, out
    code, r = _json(PAIR / "before", PAIR / "after")
    assert r["intervals"][0]["per_cta"]["cta_p90"]["before"] == r["intervals"][0]["per_cta"]["cta_max"]["before"]


# ---- the H200 pairs of scripts/gpu-compare.sh ----

needs_pair = pytest.mark.skipif(not (PAIR / "after").is_dir(), reason=(
    "the H200 A/A and before/after captures are not committed yet: run `bash scripts/gpu-compare.sh` on the GPU "
    "host, then `python3 scripts/update_compare_fixtures.py compare.tar.gz`"))


def test_the_two_builds_differ_in_the_loops_unroll_alone():
    before, after = ((SOURCES / n).read_text().splitlines() for n in ("sumsq.cu", "sumsq.after.cu"))
    assert len(before) == len(after)
    assert [(b, a) for b, a in zip(before, after) if b != a] == [("#pragma unroll 1", "#pragma unroll 4")]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("source,loads", [("sumsq.cu", {1}), ("sumsq.after.cu", {1, 4})])
def test_each_build_keeps_its_loop_under_the_spec(source, loads, tmp_path):
    """check-sass on each build (no GPU): the probes leave the kernel as compiled, and the streaming
    loop keeps 1 load in flight in sumsq.cu, 4 in sumsq.after.cu (plus its remainder loop's 1)."""
    import re


    (tmp_path / ".git").mkdir()
    shutil.copy(SOURCES / "sumsq.toml", tmp_path / "sumsq.toml")
    shutil.copy(SOURCES / source, tmp_path / "sumsq.cu")
    r = sasscheck.check(tmp_path / "sumsq.toml", tmp_path, ["-O3", "-gencode=arch=compute_90a,code=sm_90a",
                                                       f"-I{REPO / 'examples' / 'cuda'}"]).to_json()
    assert r["ok"] and r["off_identical"] and r["versioned"], r
    assert {int(n) for n in re.findall(r"(\d+) LDG, \1 in flight", " ".join(r["clean_loops"]))} == loads


@needs_pair
@pytest.mark.parametrize("folder,source", [("before", "sumsq.cu"), ("before_rerun", "sumsq.cu"),
                                           ("after", "sumsq.after.cu")])
def test_pair_captures_come_from_the_spec_applied_to_each_build(folder, source, tmp_path):
    from atrex_inject import snapshot

    (tmp_path / ".git").mkdir()
    shutil.copy(SOURCES / "sumsq.toml", tmp_path / "sumsq.toml")
    shutil.copy(SOURCES / source, tmp_path / "sumsq.cu")
    snapshot.apply(tmp_path / "sumsq.toml")
    built = PAIR / ("sumsq.after.instrumented.cu" if source == "sumsq.after.cu" else "sumsq.instrumented.cu")
    assert without_directives((tmp_path / "sumsq.cu").read_text()) == built.read_text()  # #line aside (linemap.py)
    code, out = cli("validate", PAIR / folder, "--source", built, "--json")
    assert code == 0 and json.loads(out)["verdict"] == "valid", out


@needs_pair
def test_h200_aa_pair_moves_nothing():
    """One binary captured in two processes: no interval moved."""
    code, r = _json(PAIR / "before", PAIR / "before_rerun")
    assert code == 0, r
    assert r["statistics"]["launch_to_launch"] and r["same_kernel_source"]
    assert {iv["name"]: iv["verdict"] for iv in r["intervals"]} == {
        "start -> stream_done": NO_CHANGE, "stream_done -> tail_done": NO_CHANGE, "tail_done -> finish": NO_CHANGE}


@needs_pair
def test_measurements_of_the_other_build_are_refused(tmp_path):
    """SYNTHETIC: the pair's two measurements given the wrong way round (one workload, so only their
    sources' hashes tell): named on the command line, exit 2 saying so; as the folders' own
    measure.json, left out with a note (the end-to-end change would read +17.5% for a -14.9% one)."""
    mb, ma = PAIR / "before" / "measure.json", PAIR / "after" / "measure.json"
    code, err = _json(PAIR / "before", PAIR / "after", "--measurement-before", ma, "--measurement-after", mb)
    assert code == 2 and err["error"].startswith("BEFORE's measurement is not of its capture's build: instrumented "
                                                 "source: the capture's build has sha256 797a0d8be99dbee1…"), err
    assert err["error"].endswith("it hashed AFTER's build: the two measurements are given the wrong way round")
    assert err["path"] == str(ma)
    before, after = _copy("compare/before", tmp_path / "before"), _copy("compare/after", tmp_path / "after")
    shutil.copy(ma, before / "measure.json")
    shutil.copy(mb, after / "measure.json")
    code, r = _json(before, after)
    assert code == 0 and r["end_to_end"] is None
    assert r["notes"][0].startswith("no end-to-end change: BEFORE's measurement is not of its capture's build")


@needs_pair
def test_one_outlier_instance_does_not_hide_the_change(monkeypatch):
    """SYNTHETIC: one instance of AFTER's streaming loop stretched to 100 ms (a preempted owner, say)
    on the real change: the bootstrap counts on the values' ranks, so the loop is still faster, its
    interval below 0 (a grid set by the range of the values made it "no change", [0, 0])."""
    from atrex_inject import compare

    real, after = compare.durations, mf.for_capture(PAIR / "after").source.source_id
    planted = []

    def stretched(launch, start, end):
        p, *rest = real(launch, start, end)
        if launch.meta.source_id == after and not planted and p["dur"].size:
            p = {**p, "dur": p["dur"].copy()}
            p["dur"][0] = 100_000_000
            planted.append(launch.name)
        return (p, *rest)
    monkeypatch.setattr(compare, "durations", stretched)
    r = compare_dirs(PAIR / "before", PAIR / "after").result
    assert planted
    iv = {x["name"]: x for x in r["intervals"]}["start -> stream_done"]
    assert iv["after"]["count"] and iv["verdict"] == "faster", iv["why"]
    assert -0.2 < iv["ci95"][0] < iv["ci95"][1] < 0


@needs_pair
def test_h200_change_moves_the_loop_and_the_kernel_the_same_way():
    """Four loads in flight per thread instead of one: the streaming loop is faster, and the clean
    builds' end-to-end change has the loop's sign, both from each side's measurement and from the two
    clean builds measured against each other."""
    code, r = _json(PAIR / "before", PAIR / "after")
    assert code == 0, r
    assert not r["same_kernel_source"] and r["workload"]["same"]
    iv = {x["name"]: x for x in r["intervals"]}
    assert iv["start -> stream_done"]["verdict"] == "faster" and iv["start -> stream_done"]["ci95"][1] < 0
    e = r["end_to_end"]["clean"]
    assert e["change"] < 0 and e["ci95"][1] < 0
    direct = json.loads((PAIR / "clean_before_vs_after.json").read_text())
    assert direct["valid"] and direct["overhead"] < 0 and direct["overhead_ci95"][1] < 0
