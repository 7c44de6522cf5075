"""The answer line (answer.py), computed from the spec's intervals: on real H200 captures, the
phase with the largest median, its ratio to the next with a cluster-bootstrap interval, what
encloses the phases, and each way the intervals can fail to answer, said plainly."""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from atrex_inject import answer as ans_mod
from atrex_inject.answer import answer, answers
from atrex_inject.decode import decode_dir
from atrex_inject.evidence import gather
from atrex_inject.spec import Interval
from atrex_inject.manifest import load as load_manifest
from atrex_inject.summary import summarize_launch
from atrex_inject.synthetic import write_capture

FIX = Path(__file__).parent.parent / "fixtures" / "h200"


def _answers(cap: Path, m=None) -> list[dict]:
    m = m or load_manifest(cap / "manifest.json")
    ev = gather(cap, m)
    return answers(ev.capture, ev.launches, m)


def _with_intervals(m, names: list[str]):
    """A copy of a manifest naming other intervals of its own sites."""
    return dataclasses.replace(m, intervals=tuple(
        Interval(*n.split(" -> "), m.site_ids[n.split(" -> ")[0]], m.site_ids[n.split(" -> ")[1]]) for n in names))


def test_gemm_answer_names_the_longest_phase_with_its_ratio_and_interval():
    m = load_manifest(FIX / "gemm_mma" / "manifest.json")
    (a,) = _answers(FIX / "gemm_mma")
    s = summarize_launch(decode_dir(FIX / "gemm_mma", m)[0], m)
    med = {r["name"]: r["median"] for r in s["intervals"]}
    assert a["enclosing"] == ["tile_start -> epilogue"]  # it holds every k-tile: context, not a rival
    phases = [iv.name for iv in m.intervals if iv.name != "tile_start -> epilogue"]
    assert [r["name"] for r in a["compared"]] == phases
    ranked = sorted(phases, key=lambda n: -med[n])
    r = a["ratio"]
    assert a["status"] == "leader" and a["leader"] == ranked[0] and a["runner_up"] == ranked[1]
    assert r["value"] == med[ranked[0]] / med[ranked[1]] and 1 < r["lo"] <= r["value"] <= r["hi"] < 3
    assert a["text"].startswith(f"`{ranked[0]}` takes longest: median {med[ranked[0]]:.0f} ns per instance, "
                                f"{r['value']:.2f}× (95% CTA-bootstrap interval {r['lo']:.2f}–{r['hi']:.2f}×")
    assert _answers(FIX / "gemm_mma") == [a]  # a fixed seed: the same capture, the same interval


def test_the_pair_the_spec_names_is_what_the_answer_compares():
    """The GEMM's question weighs the barrier wait against the MMAs (the spec's `pair`): the line is
    about those two, not about the longest phase and the next; the other phases are context."""
    m = load_manifest(FIX / "gemm_mma" / "manifest.json")
    wait, mma = "copies_issued -> stage_ready", "stage_ready -> mma_done"
    (a,) = _answers(FIX / "gemm_mma", dataclasses.replace(m, pair=(wait, mma)))
    assert a["pair"] == [wait, mma] and a["reference"] == mma and a["runner_up"] == wait
    assert a["ratio"]["of"] == f"{mma} / {wait}" and a["ratio"]["value"] == 4.0
    assert a["text"].startswith(f"`{mma}` takes longer than `{wait}` (the pair the question weighs): median 512 ns "
                                "against 128 ns per instance, 4.00× (95% CTA-bootstrap interval 3.20–4.00×; its upper "
                                "end is the estimate: the medians are whole timer ticks, so the resampled ratios take "
                                "few values); the other phases: `iter -> copies_issued` 224 ns, `mma_done -> synced` "
                                "64 ns."), a["text"]


def test_an_interval_end_on_its_estimate_is_explained_only_where_it_is():
    """The longest-phase line of the GEMM: its ratio's upper end prints as the estimate (quantized
    medians), and the line says why; a ratio whose ends differ from it carries no such words."""
    (a,) = _answers(FIX / "gemm_mma")
    r = a["ratio"]
    assert f"{r['hi']:.2f}" == f"{r['value']:.2f}" and r["end_on_estimate"] == "upper"
    assert "its upper end is the estimate: the medians are whole timer ticks" in a["text"]
    assert ans_mod.interval_text({"lo": 1.5, "hi": 2.5, "end_on_estimate": None}) == \
        "95% CTA-bootstrap interval 1.50–2.50×"


def test_an_interval_holding_a_mark_is_said_to_time_more_than_one_step():
    """Synthetic manifest edit on the real GEMM capture: `iter -> stage_ready` spans the issue of the
    next stage's copies (the site on the load_stage call, a mark here), as the issue's user found."""
    m = load_manifest(FIX / "gemm_mma" / "manifest.json")
    issue = next(s.name for s in m.sites if s.anchor and s.anchor.pattern == "load_stage")
    mm = _with_intervals(m, ["iter -> stage_ready", "stage_ready -> mma_done"])
    (a,) = _answers(FIX / "gemm_mma", mm)
    assert (f"`iter -> stage_ready` holds the mark `{issue}` in 100% of its instances: it times more than one step "
            f"(split it at `{issue}` to time them apart).") in a["caveats"]
    assert a["text"].endswith(" ".join(a["caveats"]))


@pytest.mark.parametrize("name, reason, text", [
    ("rowscale_split", "one_phase", "No answer: the spec's intervals cannot answer: the spec names one interval, "
                                    "`row_start -> row_end`: nothing to compare it with"),
    ("cutedsl", "one_phase", "No answer: the spec's intervals cannot answer: only `iter -> iter_end` encloses no "
                             "other interval"),
])
def test_intervals_that_cannot_answer_say_why(name, reason, text):
    (a,) = _answers(FIX / name)
    assert a["status"] == "none" and a["reason"] == reason and a["text"].startswith(text)
    assert a["leader"] is None and "name at least two intervals that do not enclose each other" in a["text"]


def test_a_rejected_capture_gives_no_answer(tmp_path):
    """One fault planted (synthetic): the manifest expects one `iter` event fewer per owner than the
    spec records, so deterministic_counts fails; the launch decodes, and still nothing is answered."""
    cap = tmp_path / "cap"
    shutil.copytree(FIX / "gemm_mma", cap)
    doc = json.loads((cap / "manifest.json").read_text())
    doc["expect"]["iter"] -= 1
    (cap / "manifest.json").write_text(json.dumps(doc))
    (a,) = _answers(cap)
    assert a["status"] == "none" and a["reason"] == "rejected" and a["compared"] == []
    assert a["text"] == ("No answer: the capture is rejected (failed: deterministic_counts); a rejected capture's "
                         "intervals are not evidence.")


def test_a_capture_with_no_launch_decoded_gives_no_answer(tmp_path):
    """One fault planted (synthetic): the sidecar's CRC no longer matches its file."""
    cap = tmp_path / "cap"
    shutil.copytree(FIX / "gemm_mma", cap)
    side = next(cap.glob("*-launch*.json"))
    doc = json.loads(side.read_text())
    side.write_text(json.dumps({**doc, "crc32": doc["crc32"] ^ 1}))
    (a,) = _answers(cap)
    assert a["reason"] == "no_launch" and a["text"] == "No answer: no launch decoded (failed: truncation)."


def test_a_phase_without_instances_gives_no_answer():
    """Synthetic manifest edit: an interval between two sites that never pair (an owner's exit before
    its entry) has no instance; the answer names it instead of comparing."""
    m = load_manifest(FIX / "gemm_mma" / "manifest.json")
    mm = _with_intervals(m, ["iter -> stage_ready", "tile_end -> tile_start"])
    launch = decode_dir(FIX / "gemm_mma", mm)[0]
    a = answer(launch, mm, summarize_launch(launch, mm), "valid")
    assert a["reason"] == "no_instances" and a["text"] == ("No answer: `tile_end -> tile_start` has no complete "
                                                           "instance in this launch; check the sites' placement "
                                                           "and density.")


def test_phases_of_one_distribution_are_even(tmp_path):
    """SYNTHETIC capture: an iteration and the gap after it, drawn from the same distribution: the
    ratio's interval holds 1 and the line says neither takes clearly longer. (The gap after an
    owner's last iteration never closes, which validation rejects as unpaired: the rule is called
    on the decoded launch directly.)"""
    m = write_capture(tmp_path / "cap", 40_000, per_owner=200, seed=3)
    mm = _with_intervals(m, ["iter_begin -> iter_end", "iter_end -> iter_begin"])
    launch = decode_dir(tmp_path / "cap", mm)[0]
    a = answer(launch, mm, summarize_launch(launch, mm), "valid")
    r = a["ratio"]
    assert a["status"] == "even" and a["leader"] is None and r["lo"] <= 1 <= r["hi"]
    assert a["text"].startswith("Neither takes clearly longer: ") and "includes 1" in a["text"]


def test_quantized_phases_are_flagged_with_the_clock_as_the_remedy():
    (a,) = _answers(FIX / "reduce_sumsq")
    assert a["status"] == "leader" and a["leader"] == "iter_begin -> iter_end"
    few = [c for c in a["caveats"] if "mostly quantization" in c]
    assert few == ["`stream_done -> tail_done` (3 ticks): a median under 10 timer ticks of 32 ns is mostly "
                   "quantization; record the clock (`[capture] clock = true`)."]
    assert a["quantized"] == ["stream_done -> tail_done"] and a["at_clock"] is None
    assert any("the ratio compares one instance of each, not their total time" in c for c in a["caveats"])


def test_quantized_phases_point_at_the_answer_in_cycles_where_the_caller_has_it():
    """Where the same question is answered on a capture recorded with the SM clock (the demo's), the
    caveat points at that answer instead of advising to record the clock, and the answer carries it;
    an answer with no quantized phase does not."""
    clocked = {"capture": "CLOCKED", "source": "where", "text": "its answer."}
    cap = FIX / "reduce_sumsq"
    m = load_manifest(cap / "manifest.json")
    ev = gather(cap, m)
    (a,) = answers(ev.capture, ev.launches, m, clocked)
    assert a["at_clock"] is clocked and "record the clock" not in a["text"]
    assert [c for c in a["caveats"] if "mostly quantization" in c] == [
        "`stream_done -> tail_done` (3 ticks): a median under 10 timer ticks of 32 ns is mostly quantization; the "
        "same question in SM cycles, on the `clock = true` capture CLOCKED, is below."]
    assert ans_mod.clock_answer_line(clocked) == "At the SM clock's resolution (where): its answer."
    (b,) = _answers(FIX / "gemm_mma_clock")  # in cycles: nothing quantized, nothing to point at
    assert b["quantized"] == [] and b["at_clock"] is None


def test_a_clock_capture_answers_in_cycles_and_resamples_them():
    """The GEMM recorded with `clock = true`: every phase timed by the SM clock prints its median in
    ns at the local rate and in cycles, no phase is called quantized (its 2-7 timer ticks are not
    what was measured), and the interval is drawn from the same cycle-timed durations as the
    medians: it holds the estimate, which timer-tick draws of these phases do not always do."""
    cap = FIX / "gemm_mma_clock"
    m = load_manifest(cap / "manifest.json")
    (a,) = _answers(cap)
    s = {r["name"]: r for r in summarize_launch(decode_dir(cap, m)[0], m)["intervals"]}
    lead = s[a["leader"]]
    assert lead["resolution"] == "cycles"
    assert f"median {lead['median']:.0f} ns / {lead['cycles']['median']:.0f} cycles per instance" in a["text"]
    assert not [c for c in a["caveats"] if "quantization" in c]
    r = a["ratio"]
    assert r["lo"] < r["value"] < r["hi"] and r["end_on_estimate"] is None

