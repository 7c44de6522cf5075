"""The picture answers the spec's question: read from the figure's artists (not its pixels), each
interval has a distribution panel and a swimlane whose window holds complete instances of it;
lanes carry the trace's names; the summary states the timer tick and flags quantized medians."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from atrex_inject.cli import app
from atrex_inject.decode import decode_dir
from atrex_inject.intervals import pairs
from atrex_inject.spec import Interval
from atrex_inject.manifest import load as load_manifest
from atrex_inject.summary import render_text, summarize_launch
from atrex_inject.timeline import draw, parse_window

FIX = Path(__file__).parent.parent / "fixtures" / "h200"
runner = CliRunner()


def _axes(fig, kind: str) -> dict:
    return {ax.get_gid().split(":", 1)[1]: ax for ax in fig.axes if (ax.get_gid() or "").startswith(kind + ":")}


def _bars(ax, name: str) -> list[tuple[float, float]]:
    """(start, end) in µs of the bars drawn for interval `name` in a swimlane."""
    return [(float(v[:, 0].min()), float(v[:, 0].max())) for c in ax.collections if c.get_gid() == f"bars:{name}"
            for v in (path.vertices for path in c.get_paths())]


def _complete(ax, name: str) -> int:
    lo, hi = ax.get_xlim()
    return sum(lo <= a and b <= hi for a, b in _bars(ax, name))


@pytest.fixture(scope="module")
def demo(demo_json):
    """The demo's own run (conftest.demo_json): its picture and its capture folder (the bundled H200 capture)."""
    r = json.loads(demo_json[1])
    cap = Path(r["work"]) / "capture"
    m = load_manifest(cap / "manifest.json")
    return r, m, decode_dir(cap, m)[0]


def test_demo_picture_has_a_row_per_interval_with_complete_instances(demo):
    r, m, launch = demo
    assert Path(r["png"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig, rows = draw(launch, m)
    dists, lanes = _axes(fig, "dist"), _axes(fig, "lanes")
    names = [iv.name for iv in m.intervals]
    assert list(dists) == names and list(lanes) == names
    for iv in m.intervals:
        name = iv.name
        n = pairs(launch, iv.start_id, iv.end_id)["dur"].size
        hist = [p for p in dists[name].patches if (p.get_gid() or "").startswith(f"hist:{name}:")]
        assert n > 0 and sum(p.get_height() for p in hist) == n  # every instance is in the distribution
        assert {l.get_gid() for l in dists[name].lines} >= {f"median:{name}", f"p10:{name}", f"p90:{name}"}
        assert _complete(lanes[name], name) >= 1, f"the window of {name} holds no complete instance"
    # the rows of the short k-loop intervals are zoomed: a window of a few µs, not the 600 µs launch
    for row in rows[:2]:
        assert row["window_us"][1] - row["window_us"][0] < 30
        assert row["complete_in_window"] == _complete(lanes[row["interval"]], row["interval"])
    assert r["panels"] == json.loads(json.dumps(rows))


def test_lanes_are_named_as_in_the_trace(demo):
    _, m, launch = demo
    fig, rows = draw(launch, m)
    for row in rows:
        assert row["lanes"] and all(lane.startswith("SM ") and " · CTA (" in lane and "(lane0)" in lane
                                    for lane in row["lanes"])
        ax = _axes(fig, "lanes")[row["interval"]]
        assert [t.get_text() for t in ax.get_yticklabels()] == row["lanes"]


def test_fixed_window_applies_to_every_row(demo):
    _, m, launch = demo
    fig, rows = draw(launch, m, parse_window("100:112"))
    for row in rows:
        assert row["window_us"] == [100.0, 112.0]
        assert _axes(fig, "lanes")[row["interval"]].get_xlim() == (100.0, 112.0)
    tile = next(r for r in rows if r["interval"] == "tile_start -> epilogue")
    assert tile["complete_in_window"] == 0  # a 140 µs tile cannot fit in 12 µs, and the row says so
    fig, rows = draw(launch, m, parse_window("5000:5010"))  # after the launch ended
    assert all(r["lanes"] == [] and r["complete_in_window"] == 0 for r in rows)
    assert all("no events in this window" in [t.get_text() for t in ax.texts] for ax in _axes(fig, "lanes").values())


@pytest.mark.parametrize("bad", ["12", "5:5", "9:3", "a:b", "1:2:3", "nan:4"])
def test_bad_window_is_a_usage_error(tmp_path, bad):
    r = runner.invoke(app, ["export", str(FIX / "gemm_mma"), "--png", str(tmp_path / "t.png"), "--png-window", bad,
                            "--json"])
    assert r.exit_code == 2 and "--png-window" in json.loads(r.output)["error"]
    assert not (tmp_path / "t.png").exists()


def test_export_png_reports_its_panels(tmp_path):
    r = runner.invoke(app, ["export", str(FIX / "reduce_sumsq"), "--png", str(tmp_path / "t.png"), "--rows", "4",
                            "--json"])
    out = json.loads(r.output)
    assert r.exit_code == 0 and Path(out["png"]).is_file()
    assert [p["interval"] for p in out["panels"]] == ["start -> stream_done", "stream_done -> tail_done",
                                                      "iter_begin -> iter_end"]
    assert all(len(p["lanes"]) <= 4 and p["complete_in_window"] >= 1 for p in out["panels"])


def test_summary_states_the_tick_and_flags_quantized_medians():
    m = load_manifest(FIX / "reduce_sumsq" / "manifest.json")
    (launch,) = decode_dir(FIX / "reduce_sumsq", m)
    s = summarize_launch(launch, m)
    assert s["timer_tick_ns"] == 32  # %globaltimer on the H200
    ticks = {iv["name"]: iv["median_ticks"] for iv in s["intervals"]}
    assert all(ticks[iv["name"]] == iv["median"] / 32 for iv in s["intervals"])
    short = sorted(n for n, t in ticks.items() if t < 10)
    assert short == ["stream_done -> tail_done"]  # the warp reduction: a few ticks on the H200
    text = render_text(s).splitlines()
    assert "timer tick 32 ns" in text[0]
    flagged = [line for line in text if "quantized" in line]
    assert len(flagged) == 1 and flagged[0].lstrip().startswith("stream_done -> tail_done")
    assert np.all(np.asarray([iv["median"] for iv in s["intervals"]]) % 32 == 0)


def test_crowded_marks_become_ticks(demo, monkeypatch):
    """Marks are symbols while they have room on a lane, and vertical ticks once they would overlap
    (forced here by asking for more room per mark than the 32 marks per lane of the site on the
    load_stage call leave; a synthetic manifest edit names two intervals that leave it a mark)."""
    from atrex_inject import timeline
    _, m, launch = demo
    issue = next(s.name for s in m.sites if s.anchor and s.anchor.pattern == "load_stage")
    names = ("iter -> stage_ready", "stage_ready -> mma_done")
    m = dataclasses.replace(m, intervals=tuple(
        Interval(*n.split(" -> "), *(m.site_ids[x] for x in n.split(" -> "))) for n in names))
    assert m.site_ids[issue] not in m.endpoint_ids

    def marker_vertices():
        fig, _ = draw(launch, m, parse_window("0:601"))
        (coll,) = [c for ax in _axes(fig, "lanes").values() for c in ax.collections
                   if c.get_gid() == f"marks:{issue}"][:1]
        return len(coll.get_paths()[0].vertices)

    assert marker_vertices() > 2  # a triangle
    monkeypatch.setattr(timeline, "MARK_SPACING_PX", 100)
    assert marker_vertices() == 2  # a tick: one vertical segment
