"""`atrex-inject report`: the one HTML file a reviewer opens first. Self-contained (pictures and
the Perfetto trace are embedded, no network needed to read it): the grade, the validation table,
per launch the interval summary and the picture, the comparison with another capture (--compare)
and the measurement when given, and a link that opens the trace in the Perfetto UI by handing it
over with postMessage (the UI's documented "deep linking" handshake: PING until PONG, then
{perfetto: {buffer, title, fileName}})."""
from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

from . import __version__
from . import manifest as mf
from .compare import (SPEED, WHEN, Comparison, about_lines, change_text, compare_dirs, end_to_end_line, moved_line,
                      p_text, rows, verdict_text)
from .evidence import Evidence, gather
from .export import trace_bytes
from .fsio import write_atomic
from .grade import DEFAULT_TARGET
from .manifest import Manifest
from .selection import choose, in_memory
from .summary import FEW_TICKS, QUANTILES, RESOLUTION_WORD, clock_line, quantized
from .timeline import Window, draw, parse_window

PERFETTO_UI = "https://ui.perfetto.dev"
MAX_PICTURES = 4  # launches drawn; the tables cover every launch
EMBED_LIMIT = 64 << 20  # a larger trace is written next to the report instead of inside it

STYLE = """body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;padding:0 24px;max-width:1500px;color:#222}
table{border-collapse:collapse;margin:8px 0 18px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#f2f2f2}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#176d2c}.fail{color:#b00020;font-weight:600}.flag{color:#b00020}img{max-width:100%;border:1px solid #ddd}
code{background:#f4f4f4;padding:1px 4px}.grade{font-size:18px;font-weight:600}"""

OPEN_SCRIPT = """const UI = %(ui)s;
function openInPerfetto(ev) {
  ev.preventDefault();
  const say = t => { document.getElementById('perfetto-status').textContent = t; };
  const b64 = document.getElementById('atrex-trace').textContent.trim();
  const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  const ui = window.open(UI + '/#!/');
  if (!ui) { say('The browser blocked the new tab: allow pop-ups for this page and click again.'); return; }
  say('Waiting for the Perfetto UI to answer...');
  const ping = setInterval(() => ui.postMessage('PING', UI), 100);
  window.addEventListener('message', function pong(e) {
    if (e.source !== ui || e.data !== 'PONG') return;
    clearInterval(ping);
    window.removeEventListener('message', pong);
    ui.postMessage({perfetto: {buffer: bytes.buffer, title: %(title)s, fileName: %(file)s}}, UI);
    say('Trace handed to the Perfetto UI (it may ask you to trust this page first).');
  });
}
document.getElementById('open-perfetto').addEventListener('click', openInPerfetto);"""


def _e(x) -> str:
    return html.escape(str(x))


def _table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    """Rows of already-escaped cells; `cls` names the table for readers and tests."""
    return (f'<table class="{cls}"><tr>' + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"
            + "".join("<tr>" + "".join(r) + "</tr>" for r in rows) + "</table>")


def _num(x, scale=1.0, fmt="{:.3f}") -> str:
    return f'<td class="num">{"-" if x is None else fmt.format(x / scale)}</td>'


def _grade(g: dict) -> str:
    items = [f'<li class="fail">failure: {_e(x)}</li>' for x in g["failures"]]
    for label, key in (("missing", "missing"), ("disagrees", "disagreements"), ("note", "notes")):
        items += [f"<li>{label}: {_e(x)}</li>" for x in g[key]]
    return (f'<h2>Grade</h2><p class="grade" id="grade">{_e(g["grade"])}</p>'
            + (f"<ul>{''.join(items)}</ul>" if items else ""))


def _validation(cap: dict) -> str:
    rows = [[f"<td>{_e(c['name'])}</td>",
             f'<td class="{"ok" if c["ok"] else "fail"}">{"ok" if c["ok"] else "FAIL"}</td>',
             f'<td class="num">{c["count"]}</td>', f"<td>{'<br>'.join(map(_e, c['details'][:3]))}</td>"]
            for c in cap["checks"]]
    unchecked = (f"<p>Provenance not checked (give the option to check it): "
                 f"{_e(', '.join(cap['unchecked_provenance']))}</p>" if cap.get("unchecked_provenance") else "")
    return (f'<h2>Validation: <span class="{"ok" if cap["verdict"] == "valid" else "fail"}">{_e(cap["verdict"])}'
            f"</span></h2><p>{cap['events']} events in {len(cap['launches'])} launch(es).</p>"
            + _table(["check", "result", "count", "first offenders / details"], rows, "validation") + unchecked)


def _summary(s: dict) -> str:
    rows = []
    for r in s["intervals"]:
        few = quantized(r)
        ticks = "-" if r.get("median_ticks") is None else f"{r['median_ticks']:.0f}"
        cycles = r.get("cycles")
        rows.append([f"<td>{_e(r['name'])}</td>", f'<td class="num">{r["count"]}</td>',
                     *(_num(r[k], 1e3) for k in QUANTILES),
                     _num(cycles and cycles["median"], fmt="{:.0f}"),
                     f'<td class="num{" flag" if few else ""}">{ticks}{" (quantized)" if few else ""}</td>',
                     f"<td>{_e(RESOLUTION_WORD[r.get('resolution')])}</td>"])
    tick = s.get("timer_tick_ns")
    clock = s.get("clock")
    timer = (f"durations by the global timer are multiples of it, and a median under {FEW_TICKS} ticks is mostly "
             "quantization")
    return (f"<p>{s['events']} events from {s['owners']} owners over {s['span_ns'] / 1e3:.1f} µs; timer tick "
            f"{tick if tick else '?'} ns: {timer}; {_e(clock_line(clock))}"
            + (" (intervals by cycles are converted at that rate)" if clock else "") + ".</p>"
            + _table(["interval", "count", *(f"{k} (µs)" for k in QUANTILES), "median (cycles)", "median in ticks",
                      "resolution"], rows, "intervals"))


def _png(png: bytes) -> str:
    return f"data:image/png;base64,{base64.b64encode(png).decode()}"


def _picture(launch, manifest: Manifest, window: Window | None) -> str:
    import matplotlib.pyplot as plt

    fig, _ = draw(launch, manifest, window)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return (f'<img class="timeline" alt="intervals of {_e(launch.name)}: durations and a zoomed swimlane" '
            f'src="{_png(buf.getvalue())}">')


def _comparison(c: Comparison) -> str:
    """`report AFTER --compare BEFORE`: compare's table (docs/compare.md) and its picture."""
    from .compare_picture import png_bytes
    r = c.result
    head = ["", *(f"{s} {k}" for s in ("BEFORE", "AFTER") for k in ("count", "median (µs)", "p10 (µs)", "p90 (µs)")),
            "change [95% interval]", "rank p", "verdict"]
    body = []
    for depth, label, f in rows(r):
        name = f'<td style="padding-left:{8 + 18 * depth}px">{_e(label)}</td>'
        if f is None:
            body.append([f'<td colspan="{len(head)}" style="padding-left:{8 + 18 * depth}px">{_e(label)}</td>'])
            continue
        v = _e(verdict_text(f))
        body.append([name, *(f'<td class="num">{f[s]["count"]}</td>' if k == "count" else _num(f[s].get(k), 1e3)
                             for s in ("before", "after") for k in ("count", "median", "p10", "p90")),
                     f'<td class="num">{_e(change_text(f))}</td>', f'<td class="num">{_e(p_text(f))}</td>',
                     f"<td>{f'<b>{v}</b>' if f['verdict'] in SPEED + WHEN else v}</td>"])
    e = end_to_end_line(r)
    return (f'<h2 id="comparison">Compared with <code>{_e(r["before"]["path"])}</code></h2>'
            + "".join(f"<p>{_e(x)}</p>" for x in about_lines(r))
            + _table(head, body, "comparison") + (f"<p>{_e(e)}</p>" if e else "")
            + "".join(f"<p>note: {_e(n)}</p>" for n in r["notes"])
            + f"<p><b>{_e(moved_line(r))}</b></p>"
            + f'<img class="comparison" alt="each interval before and after: distributions and per-SM medians" '
              f'src="{_png(png_bytes(c))}">')


def _measurement(art: dict, check: dict) -> str:
    status = ('<span class="ok">valid</span>' if check["valid"] else '<span class="fail">rejected</span>')
    problems = "".join(f"<li>{_e(p)}</li>" for p in check["problems"])
    body = ""
    if art.get("median_ms"):
        lo, hi = art["overhead_ci95"]
        body = (f"<p>baseline {art['median_ms']['baseline']:.4f} ms, instrumented "
                f"{art['median_ms']['instrumented']:.4f} ms (medians of {art['n']['baseline']}+"
                f"{art['n']['instrumented']} fresh processes, schedule <code>{_e(art['schedule'])}</code>): overhead "
                f"<b>{100 * art['overhead']:+.2f}%</b> [95% CI {100 * lo:+.2f}%, {100 * hi:+.2f}%]</p>")
    return f"<h2>Measurement: {status}</h2>{body}" + (f"<ul>{problems}</ul>" if problems else "")


def _perfetto(trace: bytes, name: str, out: Path) -> tuple[str, str]:
    """The link section and the embedded trace (or, past EMBED_LIMIT, a file beside the report)."""
    if len(trace) > EMBED_LIMIT:
        side = out.with_suffix(".pftrace")
        write_atomic(side, trace)
        return (f"<h2>Timeline in Perfetto</h2><p>The trace ({len(trace) / 2**20:.0f} MiB) is too large to embed: "
                f"open <a href=\"{PERFETTO_UI}\">{PERFETTO_UI}</a> and open <code>{_e(side.name)}</code>, "
                f"written next to this report.</p>", "")
    section = (f"<h2>Timeline in Perfetto</h2><p><a id=\"open-perfetto\" href=\"{PERFETTO_UI}\">Open the trace in "
               f"the Perfetto UI</a> ({len(trace) / 1024:.0f} KiB, embedded in this page; tracks SM → CTA → owner → "
               f"interval, as in the picture's lane names). <span id=\"perfetto-status\"></span></p>")
    names = {k: json.dumps(v).replace("<", "\\u003c")  # no "</script>" can end the script early
             for k, v in (("ui", PERFETTO_UI), ("title", name), ("file", name + ".pftrace"))}
    script = (f'<script type="application/octet-stream" id="atrex-trace">{base64.b64encode(trace).decode()}</script>'
              f"<script>{OPEN_SCRIPT % names}</script>")
    return section, script


def render(ev: Evidence, out: str | Path, capture_dir: str, window: Window | None = None,
           comparison: Comparison | None = None) -> Path:
    """Write the report for gathered evidence (and a comparison with another capture); returns its path."""
    out = Path(out)
    m = ev.manifest
    parts = [f"<h1>atrex-inject report: {_e(m.name)}</h1>",
             f"<p><b>Question:</b> {_e(m.question)}</p>",
             f"<p>Kernel <code>{_e(m.kernel)}</code> in <code>{_e(m.source.path)}</code> "
             f"({_e(m.backend)} backend); capture <code>{_e(capture_dir)}</code>; atrex-inject {__version__}.</p>",
             _grade(ev.grade)]
    script = ""
    if ev.capture is not None:
        parts.append(_validation(ev.capture))
        if ev.launches:
            trace = trace_bytes(choose([in_memory(l) for l in ev.launches], m), m)  # export's default rule
            section, script = _perfetto(trace, m.name, out)
            parts.append(section)
        parts.append("<h2>Intervals</h2>")
        for i, (launch, s) in enumerate(zip(ev.launches, ev.capture["summaries"])):
            parts.append(f"<h3>{_e(launch.name)}</h3>" + _summary(s))
            if i < MAX_PICTURES and m.intervals:  # the picture compares intervals: none, no picture
                parts.append(_picture(launch, m, window))
        if len(ev.launches) > MAX_PICTURES:
            parts.append(f"<p>Pictures for the first {MAX_PICTURES} of {len(ev.launches)} launches; "
                         f"<code>atrex-inject export --png</code> draws the first launch of a folder.</p>")
    if comparison is not None:
        parts.append(_comparison(comparison))
    if ev.measurement is not None:
        parts.append(_measurement(ev.measurement, ev.measurement_check))
    page = (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>atrex-inject: {_e(m.name)}"
            f"</title><style>{STYLE}</style></head><body>{''.join(parts)}{script}</body></html>")
    write_atomic(out, page.encode())
    return out


def write_report(capture_dir: Path, out: str | Path, manifest: Path | None = None, measurement: Path | None = None,
                 evidence: Path | None = None, target: float = DEFAULT_TARGET, source: Path | None = None,
                 root: Path | None = None, png_window: str = "auto", compare: Path | None = None,
                 mapping: dict[str, str] | None = None, allow_workload_change: bool = False,
                 allow_device_change: bool = False) -> dict:
    """`atrex-inject report`: gather the evidence of a capture folder (evidence.gather, with its
    manifest, default CAPTURE_DIR/manifest.json) and render the page; {"report", "verdict", "grade"}.
    With `compare` (BEFORE's capture folder), the page holds compare_dirs(compare, capture_dir) too."""
    w = parse_window(png_window)
    c = compare_dirs(compare, capture_dir, mapping, allow_workload_change, allow_device_change) if compare else None
    ev = gather(capture_dir, mf.for_capture(capture_dir, manifest), measurement, evidence, target=target,
                source=source, root=root)
    path = render(ev, out, str(capture_dir), w, c)
    return {"report": str(path), "verdict": ev.capture["verdict"], "grade": ev.grade["grade"]}
