"""`atrex-inject report`: the one HTML file a reviewer opens first (docs/summary.md, "The report").

It answers the spec's question first: the question as the title, the answer line (answer.py),
then the compared intervals on one shared axis with their medians and the ratio's interval, then
where each probe sits (a few lines of the patch around each site), the grade, the validation
table, the marks, the per-SM spread, each launch's summary and picture, the trace and the
measurement, and with --compare the comparison with another capture (docs/compare.md). `_sections` lists the sections in reading order; each is a function of the page's
facts (`Page`), so a new one slots in as one more entry.

Self-contained (pictures embedded, no network needed to read it). The Perfetto trace is written
beside the page (`<report>.pftrace`), with the steps to open it from disk; while it is under
EMBED_LIMIT it is also embedded, and a link hands it to the Perfetto UI by postMessage (the UI's
documented "deep linking" handshake: PING until PONG, then {perfetto: {buffer, title, fileName}}),
which needs ui.perfetto.dev and the network: without an answer the page says so and points at the file.
"""
from __future__ import annotations

import base64
import html
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from . import manifest as mf
from .answer import answers, clock_answer_line, fmt
from .compare import (ON_ESTIMATE, SPEED, WHEN, Comparison, about_lines, change_text, compare_dirs, end_to_end_line,
                      moved_line, on_estimate, p_text, rows, verdict_text)
from .compare import answer_line as compare_answer
from .errors import SnapshotError
from .evidence import Evidence, gather
from .export import trace_bytes
from .fsio import sha256_bytes, write_atomic
from .grade import DEFAULT_TARGET
from .manifest import Manifest
from .patch import HUNK
from .progress import step
from .selection import choose, in_memory
from .stats import rank
from .snapshot import atrex_dir
from .spec_paths import find_root
from .summary import FEW_TICKS, QUANTILES, RESOLUTION_WORD, clock_line, quantized
from .timeline import Window, _unit as unit_of, draw, parse_window
from .validate import unchecked_text

PERFETTO_UI = "https://ui.perfetto.dev"
MAX_PICTURES = 4  # launches drawn, and given marks and per-SM tables; the validation covers every launch
EMBED_LIMIT = 64 << 20  # a larger trace is only written beside the report, not embedded in it
EXCERPT = 3  # lines of the patch shown on each side of a site's line
PONG_WAIT_S = 15  # the online link gives up on the Perfetto UI after this long

STYLE = """body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;padding:0 24px;max-width:1500px;color:#222}
table{border-collapse:collapse;margin:8px 0 18px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#f2f2f2}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#176d2c}.fail{color:#b00020;font-weight:600}.flag{color:#b00020}img{max-width:100%;border:1px solid #ddd}
code{background:#f4f4f4;padding:1px 4px}.grade{font-size:18px;font-weight:600}
h1{font-size:24px;margin-bottom:6px}.answer{font-size:17px;margin:0 0 14px;padding:8px 12px;border-left:5px solid
#1f5fa8;background:#eef4fb}.answer.none{border-color:#b00020;background:#fbeeee}.meta{color:#555}
pre.excerpt{background:#fafafa;border:1px solid #ddd;padding:6px 8px;margin:4px 0 14px;white-space:pre-wrap;
word-break:break-all;font-size:12.5px}pre.excerpt .add{color:#176d2c}pre.excerpt .del{color:#b00020}
pre.excerpt .site{background:#fff3c4;font-weight:600}svg.axis text{font:12px system-ui,sans-serif}
ol.steps li{margin:2px 0}"""

OPEN_SCRIPT = """const UI = %(ui)s, WAIT_MS = %(wait)d;
function openInPerfetto(ev) {
  ev.preventDefault();
  const say = t => { document.getElementById('perfetto-status').textContent = t; };
  const b64 = document.getElementById('atrex-trace').textContent.trim();
  const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  const ui = window.open(UI + '/#!/');
  if (!ui) { say('The browser blocked the new tab: allow pop-ups for this page and click again.'); return; }
  say('Waiting for the Perfetto UI to answer (it loads from ' + UI + ': this needs the network)...');
  const ping = setInterval(() => ui.postMessage('PING', UI), 100);
  const giveUp = setTimeout(() => {
    clearInterval(ping);
    say('No answer from ' + UI + ' after ' + WAIT_MS / 1000 + ' s: without the network the UI does not load. '
        + 'Open the trace file beside this page instead (the steps above).');
  }, WAIT_MS);
  window.addEventListener('message', function pong(e) {
    if (e.source !== ui || e.data !== 'PONG') return;
    clearInterval(ping);
    clearTimeout(giveUp);
    window.removeEventListener('message', pong);
    ui.postMessage({perfetto: {buffer: bytes.buffer, title: %(title)s, fileName: %(file)s}}, UI);
    say('Trace handed to the Perfetto UI (it may ask you to trust this page first).');
  });
}
document.getElementById('open-perfetto').addEventListener('click', openInPerfetto);"""


@dataclass
class Page:
    """What the sections are drawn from: the evidence, one answer per launch, the patch (None when
    it was not found: `patch_sought` says where it was looked for), the trace written beside the
    report, and where the page goes."""
    ev: Evidence
    out: Path
    capture_dir: str
    window: Window | None
    answers: list[dict] = field(default_factory=list)
    patch: str | None = None
    patch_sought: list[str] = field(default_factory=list)
    trace: bytes | None = None
    trace_path: Path | None = None
    comparison: Comparison | None = None  # report AFTER --compare BEFORE


def _e(x) -> str:
    return html.escape(str(x))


def _code(text: str) -> str:
    """Escaped text with its `backquoted` names set as code (the answer's interval names)."""
    parts = _e(text).split("`")
    return "".join(f"<code>{p}</code>" if k % 2 else p for k, p in enumerate(parts))


def _table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    """Rows of already-escaped cells; `cls` names the table for readers and tests."""
    return (f'<table class="{cls}"><tr>' + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"
            + "".join("<tr>" + "".join(r) + "</tr>" for r in rows) + "</table>")


def _num(x, scale=1.0, fmt="{:.3f}") -> str:
    return f'<td class="num">{"-" if x is None else fmt.format(x / scale)}</td>'


def _launch_title(p: Page, k: int) -> str:
    return f"<h3>{_e(p.ev.launches[k].name)}</h3>" if len(p.ev.launches) > 1 else ""


# ---- the question and its answer ----------------------------------------------------------------
def _title(p: Page) -> str:
    m = p.ev.manifest
    return f'<h1 id="question">{_e(m.question or f"atrex-inject report: {m.name}")}</h1>'


def _answer_line(p: Page) -> str:
    """The answer box: with a comparison, the before/after answer first (what `--compare` asks), then
    this capture's own answer; otherwise this capture's answer."""
    a = p.answers[0]
    more = (f" (launch <code>{_e(a['launch'])}</code>, the first of {len(p.answers)}; each launch's answer is "
            f"under Intervals)" if len(p.answers) > 1 else "")
    none = a["status"] == "none"
    text = a["text"].removeprefix("No answer: ") if none else a["text"]
    own = f'<b>{"No answer" if none else "Answer"}{" in this capture alone" if p.comparison else ""}:</b> '
    # under it, the same question at the SM clock's resolution where the caller has it (the demo) and this
    # answer's phases are a few timer ticks
    at_clock = (f'<p id="answer-at-clock" class="answer">{_code(clock_answer_line(a["at_clock"]))}</p>'
                if a.get("at_clock") else "")
    if p.comparison is None:
        return f'<p id="answer" class="answer{" none" if none else ""}">{own}{_code(text)}{more}</p>{at_clock}'
    return (f'<div id="answer" class="answer"><p><b>Answer:</b> {_code(compare_answer(p.comparison.result))} '
            f'(<a href="#comparison">the comparison</a>)</p><p>{own}{_code(text)}{more}</p></div>{at_clock}')


def _meta(p: Page) -> str:
    m = p.ev.manifest
    return (f'<p class="meta">Spec <code>{_e(m.name)}</code>: kernel <code>{_e(m.kernel)}</code> in '
            f"<code>{_e(m.source.path)}</code> ({_e(m.backend)} backend); capture <code>{_e(p.capture_dir)}</code>; "
            f"atrex-inject {__version__}. The answer is computed from the spec's intervals (docs/summary.md, "
            f"\"The answer\"), not written by hand.</p>")


def _nice_step(span: float) -> float:
    raw = span / 5
    mag = 10 ** math.floor(math.log10(raw))
    return next(k * mag for k in (1, 2, 5, 10) if k * mag >= raw)


def _axis_svg(rows: list[dict], unit: tuple[str, float], leader: str | None) -> str:
    """The intervals on one axis from 0: per row the p10-p90 bar, the median (a dark bar) and its
    value, and each SM's median (grey ticks)."""
    name_w, plot_w, val_w, row_h, top = 330, 620, 110, 34, 8
    width = name_w + plot_w + val_w
    xmax = max(max(r["p90"], r["median"]) for r in rows) * 1.05 or 1.0
    x = lambda ns: name_w + plot_w * ns / xmax  # noqa: E731
    out = []
    for k, r in enumerate(rows):
        y = top + k * row_h
        bold = ' font-weight="600"' if r["name"] == leader else ""
        out.append(f'<g class="row" data-interval="{_e(r["name"])}" data-median-ns="{r["median"]:g}">'
                   f'<text x="{name_w - 10}" y="{y + 20}" text-anchor="end"{bold}>{_e(r["name"])}</text>'
                   f'<rect x="{x(r["p10"]):.1f}" y="{y + 9}" width="{max(x(r["p90"]) - x(r["p10"]), 1):.1f}" '
                   f'height="14" fill="#9dbce0"><title>p10 {fmt(r["p10"], unit)} to p90 {fmt(r["p90"], unit)}'
                   f"</title></rect>"
                   + "".join(f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{y + 24}" y2="{y + 30}" stroke="#888"/>'
                             for v in r["per_sm"])
                   + f'<rect x="{x(r["median"]) - 1.5:.1f}" y="{y + 5}" width="3" height="22" fill="#12355e"/>'
                   f'<text x="{name_w + plot_w + 8}" y="{y + 20}"{bold}>{_e(fmt(r["median"], unit))}</text></g>')
    axis_y = top + len(rows) * row_h + 4
    step = _nice_step(xmax / unit[1]) * unit[1]
    ticks = [step * i for i in range(int(xmax / step) + 1)]
    out.append(f'<line x1="{name_w}" x2="{name_w + plot_w}" y1="{axis_y}" y2="{axis_y}" stroke="#333"/>')
    out += [f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{axis_y}" y2="{axis_y + 5}" stroke="#333"/>'
            f'<text x="{x(t):.1f}" y="{axis_y + 18}" text-anchor="middle">{t / unit[1]:g}</text>' for t in ticks]
    out.append(f'<text x="{name_w + plot_w / 2}" y="{axis_y + 34}" text-anchor="middle">duration ({unit[0]}) per '
               f"instance: bar p10-p90, dark mark the median, grey ticks each SM's median</text>")
    height = axis_y + 42
    return (f'<svg class="axis" role="img" aria-label="the intervals on one axis" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">{"".join(out)}</svg>')


def _shared_axis(p: Page) -> str:
    """The first launch's compared intervals (the answer's phases; with no answer, every interval
    with instances) on one axis in one unit, their table, and what encloses them."""
    if not p.ev.launches:
        return ""
    a, s = p.answers[0], p.ev.capture["summaries"][0]
    stats = {r["name"]: r for r in s["intervals"]}
    names = [r["name"] for r in a["compared"]] or [r["name"] for r in s["intervals"] if r["count"]]
    if not names:
        return ""
    unit = unit_of(max(stats[n]["median"] for n in names))
    rows = [{**stats[n], "per_sm": [x["median"] for x in stats[n]["per_sm"]]} for n in names]
    ratio = {r["name"]: r["ratio"] for r in a["compared"]}
    leader = a["compared"] and a["reference"]

    def ratio_cell(n: str) -> str:
        r = ratio.get(n)
        if n == leader:
            return f"<td>({'the longer of the pair' if a['pair'] else 'the longest'})</td>"
        if not r or r["value"] is None:
            return "<td>-</td>"
        ci = "" if r["lo"] is None else f" [{r['lo']:.2f}, {r['hi']:.2f}]{'†' if r['end_on_estimate'] else ''}"
        return f'<td class="num">{r["value"]:.2f}×{ci}</td>'

    compared = bool(a["compared"])  # no answer: no ratio column
    table = _table(["interval", "instances", "owners", f"p10 ({unit[0]})", f"median ({unit[0]})", f"p90 ({unit[0]})",
                    *[f"{'the longer' if a['pair'] else 'longest'} ÷ this [95% CTA-bootstrap interval]"] * compared],
                   [[f"<td><code>{_e(n)}</code></td>", f'<td class="num">{stats[n]["count"]}</td>',
                     f'<td class="num">{len(stats[n]["per_owner"])}</td>',
                     *(_num(stats[n][q], unit[1], "{:.4g}") for q in ("p10", "median", "p90")),
                     *[ratio_cell(n)] * compared]
                    for n in names], "answer-intervals")
    enclosing = "".join(f"<li><code>{_e(n)}</code>: median {_e(fmt(stats[n]['median'], unit_of(stats[n]['median'])))}"
                        f" ({stats[n]['count']} instances), encloses the intervals above</li>"
                        for n in a["enclosing"] if stats[n]["count"])
    ends = any(r.get("end_on_estimate") for r in ratio.values() if r)
    how = ("" if not a["compared"] else
           f"<p>The ratio's interval, a CTA bootstrap: {a['ratio']['level']:.0%} of {a['ratio']['resamples']} "
           f"resamples of the launch's CTAs (each drawn with all its instances, the same draw for every interval), "
           f"fixed seed." + (" † An end is the estimate itself: the medians are whole timer ticks, so the resampled "
                             "ratios take few values." if ends else "") + "</p>")
    return (f"<h2>The intervals on one axis</h2>{_launch_title(p, 0) if len(p.answers) > 1 else ''}"
            + _axis_svg(rows, unit, leader or None) + table + how
            + (f"<p>Not on the axis:</p><ul>{enclosing}</ul>" if enclosing else ""))


# ---- where each probe sits ----------------------------------------------------------------------
def _find_patch(p: Page) -> None:
    """The manifest's patch, from the capture folder, or the workspace or its history in the project
    holding the capture folder or the current folder: whichever file has the manifest's sha256."""
    m = p.ev.manifest
    cap = Path(p.capture_dir)
    roots = dict.fromkeys(find_root(d.resolve() / mf.FILE_NAME) for d in (cap, Path.cwd()))
    places = [cap / m.patch.path]
    for r in roots:
        try:
            ws = atrex_dir(r)
        except SnapshotError:  # a symlinked .atrex is not read (snapshot refuses it too)
            continue
        places += [ws / m.name / m.patch.path,
                   *sorted((ws / "history").glob(f"{m.name}-*/{m.patch.path}"), reverse=True)]
    for f in places:
        if f.is_file() and not f.is_symlink():
            data = f.read_bytes()
            if sha256_bytes(data) == m.patch.sha256:
                p.patch = data.decode("utf-8", "replace")
                return
    p.patch_sought = [str(cap / m.patch.path)] + [str(r / ".atrex" / m.name / m.patch.path) for r in roots]


def _diff_rows(patch: str) -> list[tuple[str, int | None, str]]:
    """Each hunk line of a unified diff as (tag, its line in the instrumented file or None for a
    removed line, text); hunk headers as ("@", None, header)."""
    rows, new = [], 0
    for line in patch.split("\n"):
        h = HUNK.match(line)
        if h:
            new = int(h.group(3))
            rows.append(("@", None, line))
        elif rows and line[:1] in "+ " and line:
            rows.append((line[0], new, line[1:]))
            new += 1
        elif rows and line[:1] == "-":
            rows.append(("-", None, line[1:]))
    return rows


def _excerpt(rows: list[tuple[str, int | None, str]], line: int) -> str | None:
    """The diff rows within EXCERPT lines of `line` (removed lines among them kept), in one hunk."""
    at = [i for i, (_, n, _) in enumerate(rows) if n is not None and abs(n - line) <= EXCERPT]
    if not any(rows[i][1] == line for i in at):
        return None
    centre = next(i for i in at if rows[i][1] == line)
    lo = hi = centre
    while lo - 1 >= 0 and rows[lo - 1][0] != "@" and (rows[lo - 1][1] is None or rows[lo - 1][1] >= line - EXCERPT):
        lo -= 1
    while hi + 1 < len(rows) and rows[hi + 1][0] != "@" and (rows[hi + 1][1] is None
                                                            or rows[hi + 1][1] <= line + EXCERPT):
        hi += 1
    out = []
    for tag, n, text in rows[lo:hi + 1]:
        cls = "site" if n == line else {"+": "add", "-": "del"}.get(tag, "")
        out.append(f'<span class="{cls}">{tag}{"" if n is None else n:>6} {_e(text)}</span>' if cls else
                   f"{tag}{'' if n is None else n:>6} {_e(text)}")
    return "\n".join(out)


def _probe_sites(p: Page) -> str:
    m = p.ev.manifest
    head = "<h2>Where each probe sits</h2>"
    if p.patch is None:
        return (head + f"<p>The patch (<code>{_e(m.patch.path)}</code>, sha256 {_e(m.patch.sha256[:16])}…) was not "
                f"found in {', '.join(f'<code>{_e(x)}</code>' for x in p.patch_sought)} or the workspace's history: "
                f"render the report before <code>atrex-inject revert</code>, or copy the workspace's "
                f"<code>{_e(m.patch.path)}</code> into the capture folder.</p>")
    rows = _diff_rows(p.patch)
    parts = [head, f"<p>Each site's line in the instrumented <code>{_e(m.source.path)}</code> (highlighted) with "
                   f"{EXCERPT} lines of the patch on each side: <code>+</code> added by apply, <code>-</code> "
                   f"replaced. The whole patch: <code>atrex-inject diff SPEC</code>.</p>"]
    for s in m.sites:
        role = f", every {s.every}" if s.every > 1 else ""
        parts.append(f'<h3 class="site" id="site-{_e(s.name)}"><code>{_e(s.name)}</code> (id {s.id}, {_e(s.position)}, '
                     f"{_e(s.role.value)}{role}): line {s.source_line} of the clean source, "
                     f"{s.instrumented_line} instrumented</h3>")
        ex = _excerpt(rows, s.instrumented_line) if s.instrumented_line else None
        parts.append(f'<pre class="excerpt">{ex}</pre>' if ex is not None else
                     f"<p>Line {s.instrumented_line} is not in the patch.</p>")
    return "".join(parts)


# ---- the tables ---------------------------------------------------------------------------------
def _grade(p: Page) -> str:
    g = p.ev.grade
    items = [f'<li class="fail">failure: {_e(x)}</li>' for x in g["failures"]]
    for label, key in (("missing", "missing"), ("disagrees", "disagreements"), ("note", "notes")):
        items += [f"<li>{label}: {_e(x)}</li>" for x in g[key]]
    return (f'<h2>Grade</h2><p class="grade" id="grade">{_e(g["grade"])}</p>'
            + (f"<ul>{''.join(items)}</ul>" if items else ""))


def _validation(p: Page) -> str:
    cap = p.ev.capture
    if cap is None:
        return ""
    rows = [[f"<td>{_e(c['name'])}</td>",
             f'<td class="{"ok" if c["ok"] else "fail"}">{"ok" if c["ok"] else "FAIL"}</td>',
             f'<td class="num">{c["count"]}</td>', f"<td>{'<br>'.join(map(_e, c['details'][:3]))}</td>"]
            for c in cap["checks"]]
    unchecked = (f"<p>Provenance not checked: {_e(unchecked_text(cap['unchecked_provenance']))} (options of "
                 "<code>atrex-inject validate</code>).</p>" if cap.get("unchecked_provenance") else "")
    return (f'<h2>Validation: <span class="{"ok" if cap["verdict"] == "valid" else "fail"}">{_e(cap["verdict"])}'
            f"</span></h2><p>{cap['events']} events in {len(cap['launches'])} launch(es).</p>"
            + _table(["check", "result", "count", "first offenders / details"], rows, "validation") + unchecked)


def _shown(p: Page) -> list[int]:
    return list(range(min(len(p.ev.launches), MAX_PICTURES)))


def _marks(p: Page) -> str:
    """Every site's events as offsets from the launch's first event; the marks (sites that start or
    end no interval) first named so."""
    if not p.ev.launches:
        return ""
    m = p.ev.manifest
    role = {i: [iv.name for iv in m.intervals if i in (iv.start_id, iv.end_id)] for i in range(len(m.sites))}
    parts = ["<h2>Marks: when each site fires</h2><p>Offsets from the launch's first event, in µs; a mark starts or "
             "ends no interval.</p>"]
    for k in _shown(p):
        rows = [[f"<td><code>{_e(r['site'])}</code></td>",
                 f"<td>{'mark' if not role[r['id']] else _e(', '.join(role[r['id']]))}</td>",
                 f'<td class="num">{r["count"]}</td>', *(_num(r[q], 1e3) for q in QUANTILES)]
                for r in p.ev.capture["summaries"][k]["marks"]]
        parts.append(_launch_title(p, k) + _table(["site", "mark, or endpoint of", "events",
                                                   *(f"{q} (µs)" for q in QUANTILES)], rows, "marks"))
    return "".join(parts)


def _spread(p: Page) -> str:
    """Per interval, how its per-SM medians spread: the lowest and highest SM and their ratio."""
    if not p.ev.launches:
        return ""
    parts = ["<h2>Per-SM spread</h2><p>Each interval's median on each SM that recorded it: a wide spread says the "
             "SMs do not see the same kernel (placement, contention, a slow SM).</p>"]
    for k in _shown(p):
        rows = []
        for r in p.ev.capture["summaries"][k]["intervals"]:
            sm = sorted(r["per_sm"], key=lambda x: (x["median"], x["key"]))
            if not sm:
                rows.append([f"<td><code>{_e(r['name'])}</code></td>", '<td class="num">0</td>',
                             *["<td>-</td>"] * 4])
                continue
            unit = unit_of(sm[-1]["median"])
            mid = sm[rank(len(sm), 0.5)]["median"]
            spread = f"{sm[-1]['median'] / sm[0]['median']:.2f}×" if sm[0]["median"] > 0 else "-"
            rows.append([f"<td><code>{_e(r['name'])}</code></td>", f'<td class="num">{len(sm)}</td>',
                         f"<td>{_e(fmt(sm[0]['median'], unit))} (SM {sm[0]['key']})</td>",
                         f"<td>{_e(fmt(mid, unit))}</td>",
                         f"<td>{_e(fmt(sm[-1]['median'], unit))} (SM {sm[-1]['key']})</td>",
                         f'<td class="num">{spread}</td>'])
        parts.append(_launch_title(p, k) + _table(["interval", "SMs", "lowest SM median", "median SM",
                                                   "highest SM median", "highest ÷ lowest"], rows, "per-sm"))
    return "".join(parts)


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
                     f"<td>{_e(RESOLUTION_WORD[r.get('resolution')])}"
                     + (f"; {r['varied']} with a speed change inside" if r.get("varied") else "") + "</td>"])
    tick = s.get("timer_tick_ns")
    clock = s.get("clock")
    timer = (f"durations by the global timer are multiples of it, and a median under {FEW_TICKS} ticks is mostly "
             "quantization")
    return (f"<p>{s['events']} events from {s['owners']} owners over {s['span_ns'] / 1e3:.1f} µs; timer tick "
            f"{tick if tick else '?'} ns: {timer}; {_e(clock_line(clock))}.</p>"
            + _table(["interval", "count", *(f"{k} (µs)" for k in QUANTILES), "median (cycles)", "median in ticks",
                      "resolution"], rows, "intervals"))


def _picture(launch, manifest: Manifest, window: Window | None) -> str:
    import matplotlib.pyplot as plt

    fig, _ = draw(launch, manifest, window)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return (f'<img class="timeline" alt="intervals of {_e(launch.name)}: durations and a zoomed swimlane" '
            f'src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">')


def _launches(p: Page) -> str:
    """Per launch: its answer (when there are several), summary and picture."""
    if p.ev.capture is None or not p.ev.launches:
        return ""
    m = p.ev.manifest
    parts = ["<h2>Intervals</h2>"]
    for i, (launch, s) in enumerate(zip(p.ev.launches, p.ev.capture["summaries"])):
        parts.append(f"<h3>{_e(launch.name)}</h3>")
        if len(p.answers) > 1:
            parts.append(f'<p class="launch-answer">{_code(p.answers[i]["text"])}</p>')
        parts.append(_summary(s))
        if i < MAX_PICTURES and m.intervals:  # the picture compares intervals: none, no picture
            parts.append(_picture(launch, m, p.window))
    if len(p.ev.launches) > MAX_PICTURES:
        parts.append(f"<p>Pictures, marks and per-SM tables for the first {MAX_PICTURES} of {len(p.ev.launches)} "
                     f"launches; <code>atrex-inject export --png</code> draws the first launch of a folder.</p>")
    return "".join(parts)


# ---- the trace ----------------------------------------------------------------------------------
def _perfetto(p: Page) -> str:
    """The trace beside the report, the steps to open it from disk, and (embedded traces) the link
    that hands it to the Perfetto UI online."""
    if p.trace is None:
        return ""
    name = p.trace_path.name
    size = f"{len(p.trace) / 2**20:.1f} MiB" if len(p.trace) >= 2**20 else f"{len(p.trace) / 1024:.0f} KiB"
    steps = (f'<p>The trace is <a id="trace-file" href="{_e(name)}" download><code>{_e(name)}</code></a> ({size}), '
             f"written beside this page: tracks SM → CTA → owner → interval, as in the picture's lane names. To open "
             f"it:</p><ol class=\"steps\"><li>Open the Perfetto UI, <a href=\"{PERFETTO_UI}\">{PERFETTO_UI}</a>, in "
             f"Chrome or Firefox.</li><li>Choose <b>Open trace file</b> (left bar) and pick <code>{_e(name)}</code>, "
             f"or drag the file onto the page.</li></ol><p>The UI runs in the browser and reads the file there: "
             f"nothing is uploaded. It needs the network the first time it loads; a browser that has opened it "
             f"before keeps a copy and opens it offline.</p>")
    if len(p.trace) > EMBED_LIMIT:
        return (f"<h2>Timeline in Perfetto</h2>{steps}<p>Too large to embed in this page "
                f"(over {EMBED_LIMIT >> 20} MiB): open the file as above.</p>")
    return (f"<h2>Timeline in Perfetto</h2>{steps}<p>Online, in one click: <a id=\"open-perfetto\" "
            f"href=\"{PERFETTO_UI}\">open the trace in the Perfetto UI</a> (the copy embedded in this page; needs "
            f"the network, to load ui.perfetto.dev). <span id=\"perfetto-status\"></span></p>")


def _trace_script(p: Page) -> str:
    if p.trace is None or len(p.trace) > EMBED_LIMIT:
        return ""
    names = {k: json.dumps(v).replace("<", "\\u003c")  # no "</script>" can end the script early
             for k, v in (("ui", PERFETTO_UI), ("title", p.ev.manifest.name),
                          ("file", p.ev.manifest.name + ".pftrace"))}
    return (f'<script type="application/octet-stream" id="atrex-trace">{base64.b64encode(p.trace).decode()}</script>'
            f"<script>{OPEN_SCRIPT % {**names, 'wait': PONG_WAIT_S * 1000}}</script>")


def _png(png: bytes) -> str:
    return f"data:image/png;base64,{base64.b64encode(png).decode()}"


def _comparison(p: Page) -> str:
    """`report AFTER --compare BEFORE`: compare's table (docs/compare.md) and its picture."""
    from .compare_picture import png_bytes
    c = p.comparison
    if c is None:
        return ""
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
            + (f"<p>note: {_e(ON_ESTIMATE)}</p>" if any(f is not None and on_estimate(f) for _, _, f in rows(r)) else "")
            + f"<p><b>{_e(moved_line(r))}</b></p>"
            + f'<img class="comparison" alt="each interval before and after: distributions and per-SM medians" '
              f'src="{_png(png_bytes(c))}">')


def _measurement(p: Page) -> str:
    art, check = p.ev.measurement, p.ev.measurement_check
    if art is None:
        return ""
    status = ('<span class="ok">valid</span>' if check["valid"] else '<span class="fail">rejected</span>')
    problems = "".join(f"<li>{_e(x)}</li>" for x in check["problems"])
    body = ""
    if art.get("median_ms"):
        lo, hi = art["overhead_ci95"]
        body = (f"<p>baseline {art['median_ms']['baseline']:.4f} ms, instrumented "
                f"{art['median_ms']['instrumented']:.4f} ms (medians of {art['n']['baseline']}+"
                f"{art['n']['instrumented']} fresh processes, schedule <code>{_e(art['schedule'])}</code>): overhead "
                f"<b>{100 * art['overhead']:+.2f}%</b> [95% bootstrap interval {100 * lo:+.2f}%, {100 * hi:+.2f}%]</p>")
    return f"<h2>Measurement: {status}</h2>{body}" + (f"<ul>{problems}</ul>" if problems else "")


def _sections(p: Page) -> list[str]:
    """The page, in reading order (docs/summary.md lists it): the question and its answer first."""
    return [_title(p), _answer_line(p), _meta(p), _comparison(p), _shared_axis(p), _probe_sites(p), _grade(p),
            _validation(p), _marks(p), _spread(p), _launches(p), _perfetto(p), _measurement(p)]


def render(ev: Evidence, out: str | Path, capture_dir: str, window: Window | None = None,
           comparison: Comparison | None = None, clocked: dict | None = None) -> dict:
    """Write the report for gathered evidence (and a comparison with another capture), and the trace
    beside it; returns {"report", "trace" (None without a decoded launch), "answer" (the first
    launch's answer.answer dict)}. `clocked`: answer.answer's (the demo's clock = true capture)."""
    out = Path(out)
    m = ev.manifest
    p = Page(ev, out, capture_dir, window, comparison=comparison)
    step("computing the answer (its ratio's bootstrap interval)")
    p.answers = (answers(ev.capture, ev.launches, m, clocked) if ev.capture is not None else
                 [{"status": "none", "text": "No answer: no capture was given.", "launch": ""}])
    _find_patch(p)
    if ev.launches:
        step("writing the Perfetto trace beside the report")
        p.trace = trace_bytes(choose([in_memory(l) for l in ev.launches], m), m)  # export's default rule
        p.trace_path = out.with_suffix(".pftrace")
        write_atomic(p.trace_path, p.trace)
    step("drawing the report's pictures")
    page = (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>atrex-inject: {_e(m.name)}"
            f"</title><style>{STYLE}</style></head><body>{''.join(_sections(p))}{_trace_script(p)}</body></html>")
    write_atomic(out, page.encode())
    return {"report": str(out), "trace": p.trace_path and str(p.trace_path), "answer": p.answers[0]}


def write_report(capture_dir: Path, out: str | Path, manifest: Path | None = None, measurement: Path | None = None,
                 evidence: Path | None = None, target: float = DEFAULT_TARGET, source: Path | None = None,
                 root: Path | None = None, png_window: str = "auto", compare: Path | None = None,
                 mapping: dict[str, str] | None = None, allow_workload_change: bool = False,
                 allow_device_change: bool = False) -> dict:
    """`atrex-inject report`: gather the evidence of a capture folder (evidence.gather, with its
    manifest, default CAPTURE_DIR/manifest.json) and render the page; {"report", "trace", "answer"
    (the answer line), "capture_answer" (this capture's own), "verdict", "grade"}. With `compare`
    (BEFORE's capture folder), the page holds compare_dirs(compare, capture_dir) too, and the answer
    is the before/after one (compare.answer_line)."""
    w = parse_window(png_window)
    if compare:
        step(f"comparing {capture_dir} with {compare}")
    c = compare_dirs(compare, capture_dir, mapping, allow_workload_change, allow_device_change) if compare else None
    ev = gather(capture_dir, mf.for_capture(capture_dir, manifest), measurement, evidence, target=target,
                source=source, root=root)
    r = render(ev, out, str(capture_dir), w, c)
    own = r["answer"]["text"]
    return {"report": r["report"], "trace": r["trace"], "answer": compare_answer(c.result) if c else own,
            "capture_answer": own, "verdict": ev.capture["verdict"], "grade": ev.grade["grade"]}
