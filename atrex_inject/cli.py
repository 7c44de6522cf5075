"""The `atrex-inject` command line: a thin layer over the library (docs/api.md): each command parses
its options, calls one library function, and prints its result as text or, with --json, as JSON."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from typer.core import TyperCommand

from . import progress, snapshot
from . import manifest as mf
from .choicerecord import Choice, describe
from .errors import AtrexError, user_error

class _Command(TyperCommand):
    """Usage lines name positional arguments by their metavar (`SPEC`, `CAPTURE_DIR`, `-- CMD...`),
    the way the README and docs write them, instead of typer's `{spec}`."""

    def collect_usage_pieces(self, ctx) -> list[str]:
        return [self.options_metavar] + [p.metavar or p.name.upper() for p in self.get_params(ctx)
                                         if p.param_type_name == "argument"]

    def get_params(self, ctx) -> list:
        """An argument that takes several paths (`summary CAPTURE_DIR...`) shows its type as
        `<path>...`, not typer's `<list[Path]>`."""
        params = super().get_params(ctx)
        for p in params:
            if p.param_type_name == "argument" and p.nargs == -1:
                p.display_type = lambda ctx: "<path>..."
        return params


class _TakesCmd(_Command):
    """Usage `... SPEC [-- CMD...]`: a command line to run may follow the positional arguments."""

    def collect_usage_pieces(self, ctx) -> list[str]:
        return super().collect_usage_pieces(ctx) + ["[-- CMD...]"]


app = typer.Typer(
    add_completion=False, no_args_is_help=True, rich_markup_mode=None,
    help="Instrument one GPU kernel from a probe spec, capture and decode its intra-kernel timeline, "
         "and restore the clean kernel byte for byte.\n\n"
         "Typical loop: apply SPEC (check-sass SPEC: did the build keep the clean loops? check-iket SPEC for a "
         "CuTe DSL kernel: are its probes compiled in?) -> build the instrumented source -> capture --spec SPEC --out "
         "CAPTURE_DIR -- PROGRAM ARGS (records the program's sha256 and hooks Python launches) -> validate CAPTURE_DIR "
         "-> summary CAPTURE_DIR -> export CAPTURE_DIR --perfetto T.pftrace --png T.png -> report CAPTURE_DIR "
         "-o report.html -> revert SPEC. Before and after a change: compare BEFORE AFTER, or report AFTER -o "
         "report.html --compare BEFORE. `atrex-inject demo` runs the loop on a bundled H200 capture.")
# The one place messages are printed: as text. Paths, source lines and spec values reach these
# consoles as they are, so Rich's markup (`[bold]`), emoji codes (`:100:`) and highlighting are off.
out = Console(markup=False, emoji=False, highlight=False, soft_wrap=True)
err = Console(stderr=True, markup=False, emoji=False, highlight=False, soft_wrap=True)

JsonOpt = typer.Option(False, "--json", help="Print one JSON object instead of text.")
QuietOpt = typer.Option(False, "--quiet", "-q", help="Print no progress on stderr (a step that runs over a second "
                                                    "otherwise says what it is doing; none under --json either).")
RootOpt = typer.Option(None, "--root", help="Project tree the spec's paths must stay in, .atrex/ at its top "
                                            "(default: the nearest folder above the source holding .git or .atrex).")
MeasureRootOpt = typer.Option(None, "--root", help="Folder the measurement's relative source and binary paths "
                                                   "resolve against (default: the current folder).")
CaptureArg = typer.Argument(..., metavar="CAPTURE_DIR", help="Capture folder: what the program wrote with "
                                                            "ATREX_TIMELINE_OUT (*.atrex + .json per launch).")
ManifestOpt = typer.Option(None, help="manifest.json of the applied spec (default: CAPTURE_DIR/manifest.json).")
CapturesArg = typer.Argument(..., metavar="CAPTURE_DIR",
                             help="Capture folder(s): what the program wrote with ATREX_TIMELINE_OUT (*.atrex + .json "
                                  "per launch). Several, or a folder holding several, are read on one time axis "
                                  "(docs/summary.md, \"Several captures on one axis\").")
PngWindowOpt = typer.Option("auto", "--png-window", metavar="auto|START:END",
                            help="Picture window (the PNG only): `auto` zooms each interval's row on a few of its "
                                 "instances around the median one; START:END (µs since the launch's first event) "
                                 "is one window for every row.")
RowsOpt = typer.Option(8, help="Lanes (owners) per swimlane in the picture: the owners with the most events in it.")
MeasurementOpt = typer.Option(None, help="Measurement artifact (atrex-inject measure).")
EvidenceOpt = typer.Option(None, help="The evaluator's JSONL correctness records (examples/evaluator.py writes one).")
TargetOpt = typer.Option(0.10, help="Overhead target, either way (0.10 = 10%: slower or faster than the clean build).")
SourceOpt = typer.Option(None, help="Instrumented source, for the provenance check.")
MapOpt = typer.Option([], "--map", metavar="OLD=NEW", help="BEFORE's site OLD is AFTER's site NEW (repeatable): "
                                                           "a site renamed between the two specs.")
AllowWorkloadOpt = typer.Option(False, "--allow-workload-change", help="Compare captures of different workloads "
                                                                        "(the output says so).")
AllowDeviceOpt = typer.Option(False, "--allow-device-change", help="Compare captures from different GPU models "
                                                                    "(the output says so).")


def _version(show: bool) -> None:
    if show:
        from .version import describe
        print(describe())
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                       help="Print the version and the commit it was built from (where known), "
                                            "and exit.")) -> None:
    pass


def _run(as_json: bool, fn, render, quiet: bool = False):
    """Call the library; print text or JSON. The one error boundary: every exception becomes a
    message with a hint (JSON under --json) and exit status 2, never a traceback. A step of the
    library that runs over a second is announced on stderr (progress.py), unless --json or --quiet."""
    try:
        if as_json or quiet:
            result = fn()
        else:
            with progress.reporting(_progress):
                result = fn()
    except Exception as exc:  # noqa: BLE001 - the boundary is meant to catch everything
        e = user_error(exc)
        if as_json:
            print(json.dumps(e.to_json()))
        else:
            err.print(f"error: {e}")
        raise typer.Exit(e.exit_code)
    if as_json:
        print(json.dumps(result, indent=2, default=_plain))
    else:
        render(result)
    return result


def _plain(obj):
    """A typed record in a result, as its to_json() writes it (anything else as text)."""
    to_json = getattr(obj, "to_json", None)
    return to_json() if callable(to_json) else str(obj)


def _render_launches(r: dict, each_captured: bool = True) -> None:
    """The kernel's launches: each captured one, and each one not captured with why and what to do."""
    caught, missed = r.get("launches", []), r.get("not_captured", [])
    if not caught and not missed:
        return
    rewritten = [f if isinstance(f, str) else f["path"] for f in r.get("launchers", [])]
    out.print(f"  launches: {len(caught)} captured, {len(missed)} not captured"
              + (f"; launchers rewritten: {', '.join(rewritten)}" if rewritten else ""))
    for l in caught if each_captured else []:
        how = l["shape"] + (f" in {l['macro']}(...)" if l.get("macro") else "") + (
            f", through {l['alias']}" if l.get("alias") else "")
        out.print(f"    captured      {l['file']}:{l['line']} {l['via']} ({how})")
    for n in missed:
        out.print(f"    NOT captured  {n['file']}:{n['line']} {n['via']}: {n['reason']}")
        out.print(f"                  to capture it: {n['hint']}")


def _progress(what: str) -> None:
    err.print(f"... {what}")


def _render_recorder(rec: Choice | None) -> None:
    """The recorder apply chose, and the evidence for it (choice.py)."""
    if not rec:
        return
    out.print(f"  recorder: {rec.mode.path.value} ({rec.how}: {rec.why})")
    for e in rec.evidence:
        if e.problems or e.doubts:
            out.print(f"    {describe(e.mode)}: {e.verdict}: {'; '.join([*e.problems, *e.doubts])}")


RecorderOpt = typer.Option(None, "--recorder", metavar="auto|global|staged|resident",
                           help="The recorder, in place of the spec's [capture] recorder (default: the spec's, auto: "
                                "the tool compiles the candidates and keeps the one that leaves the kernel as it "
                                "was; docs/guide.md).")
NvccFlagOpt = typer.Option([], "--nvcc-flag", metavar="FLAG",
                           help="A flag of your kernel's build for nvcc (repeatable; default: the spec's [build] "
                                "nvcc_flags, else -O3, sm_90a, c++17).")


@app.command()
def apply(spec: Path = typer.Argument(..., metavar="SPEC", help="Probe spec (TOML), see docs/spec.md."),
          root: Optional[Path] = RootOpt, as_json: bool = JsonOpt, quiet: bool = QuietOpt,
          dry_run: bool = typer.Option(False, "--dry-run", help="Show where each site would land (file:line "
                                       "and the lines around it) and write nothing."),
          recorder: Optional[str] = RecorderOpt, nvcc_flag: list[str] = NvccFlagOpt):
    """Save the clean source, write the instrumented snapshot in place, and keep patch + manifest
    under .atrex/<name>/. Refused when already applied; on any error nothing is written.

    The recorder: with `recorder = "auto"` (the default) and nvcc on PATH, apply compiles the
    clean kernel and the candidate recorders and keeps the first that leaves the kernel as the
    compiler made it (registers, CTAs per SM, every loop and its loads in flight), and says why;
    without nvcc, the global recorder (docs/guide.md, "Recorder modes")."""
    def render_preview(r):
        out.print(f"dry run, nothing written: {r['source']} would get +{r['lines_added']} -{r['lines_removed']} "
                  f"lines, {len(r['sites'])} sites")
        for s in r["sites"]:
            out.print(f"site {s['id']} {s['name']} ({s['position']}), anchored at {r['source']}:{s['source_line']}, "
                      f"lands at:")
            for land in s["lands"]:
                out.print(f"  {r['source']}:{land['line']} (instrumented)")
                for c in land["context"]:
                    out.print(f"  {'>' if c['line'] == land['line'] else ' '} {c['line']:>5} | {c['text']}")
        _render_recorder(r.get("recorder"))
        _render_launches(r)
        for w in r["warnings"]:
            out.print(f"warning: {w}")

    def render(res):
        r = res.to_json()
        out.print(f"instrumented {r['source']}: +{r['lines_added']} -{r['lines_removed']} lines, "
                  f"{len(r['sites'])} sites; manifest {r['manifest']}")
        for s in r["sites"]:
            out.print(f"  site {s['id']:>2} {s['name']:<20} {s['position']:<10} {s['role']:<9} "
                      f"line {s['source_line']} -> {s['instrumented_line']}")
        if r.get("staging"):
            st = r["staging"]
            kind = "resident rings (every event kept until exit)" if st.get("resident") else "rings"
            out.print(f"  staging: {kind} of {st['events']} events x {st['warps']} warps per group, "
                      f"{st['shared_bytes_per_cta']} bytes of static shared memory per CTA")
        if r.get("event_bytes") == 4:
            out.print("  events: 4 bytes, packed (the site id in the timer's low 5 bits; decode checks the timer's "
                      "resolution)")
        _render_recorder(res.manifest.recorder)
        p = r.get("perturbation")
        if p:  # how the clean code is kept for CTAs that record nothing (docs/design.md)
            out.print("  body versioned: CTAs that record nothing, and all when probes are off, run the clean copy"
                      if p["versioned"] else f"  body NOT versioned: {p['not_versioned_because']}")
            for sm in p["strip_mined"]:
                how = (f"strip-mined by {sm['every']}" if sm["every"] > 1
                       else f"recorded in trips of {sm['trip']} iterations (probes unchecked)" if sm.get("trip")
                       else "holds its warp's ring slot across the loop")
                out.print(f"  loop at line {sm['line']} {how} for {', '.join(sm['sites'])}")
        _render_launches(r)
        for w in r["warnings"]:
            out.print(f"warning: {w}")
    options = snapshot.Options(recorder, tuple(nvcc_flag), None if as_json or quiet else _progress)
    if dry_run:
        _run(as_json, lambda: snapshot.preview(spec, root, options), render_preview, quiet)
    else:
        _run(as_json, lambda: snapshot.apply(spec, root, options), render, quiet)


@app.command()
def revert(spec: Path = typer.Argument(..., metavar="SPEC", help="The spec that was applied."),
           root: Optional[Path] = RootOpt, as_json: bool = JsonOpt,
           from_history: bool = typer.Option(False, "--from-history",
                                             help="Restore from the archived workspace whose instrumented hash the "
                                                  "source has (when `status` says instrumented-archived)."),
           keep_edits: bool = typer.Option(False, "--keep-edits",
                                           help="The source was edited after apply: remove the probes (the patch "
                                                "applied in reverse) and keep the edits; refused, naming the hunk, "
                                                "where an edit touches the probes' lines.")):
    """Restore the clean source, only if the file still has the instrumented hash and the saved
    clean copy plus the patch reproduce it; the restored file is checked, and the workspace is
    archived under .atrex/history/ (the newest 5 per spec, ATREX_HISTORY_KEEP). Exit 0 when the
    source ends clean (restored now, or already clean: a second revert), 2 when it cannot
    (docs/recovery.md)."""
    def render(r):
        verb = ("probes removed, your edits kept:" if r.get("kept_edits") else "restored") if r["reverted"] \
            else "already clean:"
        files = ", ".join(r.get("restored") or [r["source"]])
        out.print(f"{verb} {files} (workspace archived at {r['archived']})")
        for w in r["warnings"]:
            err.print(f"warning: {w}")
    _run(as_json, lambda: snapshot.revert(spec, root, from_history, keep_edits), render)


@app.command()
def status(spec: Path = typer.Argument(..., metavar="SPEC", help="The probe spec (TOML) to ask about."), root: Optional[Path] = RootOpt, as_json: bool = JsonOpt):
    """Say whether the spec's source is clean, instrumented by this spec, or modified since."""
    def render(r):
        out.print(f"{r['source']}: {r['state']} (spec {r['spec']})")
        for f in r.get("launchers", []):
            out.print(f"  launcher {f['path']}: {f['state']}")
        _render_launches(r, each_captured=False)
        h = r["history"]
        out.print(f"  history: {h['archived']} archived workspace(s) of this spec in {h['folder']} (the newest "
                  f"{h['keep']} are kept; ATREX_HISTORY_KEEP)" + (f", newest {h['newest']}" if h["newest"] else ""))
        if "hint" in r:
            out.print(f"  hint: {r['hint']}")
    _run(as_json, lambda: snapshot.status(spec, root), render)


@app.command()
def diff(spec: Path = typer.Argument(..., metavar="SPEC", help="The spec that was applied."), root: Optional[Path] = RootOpt,
         full: bool = typer.Option(False, "--full", help="Print the patch as applied, embedded header included "
                                                         "(what `git apply -R` takes)."),
         as_json: bool = JsonOpt):
    """Print the applied patch for review (unified diff). An embedded recorder header (a kernel.py
    carries the header's text) shows as one line naming it and its sha256; --full prints every
    line. The patch files under .atrex/<name>/ are always complete and `git apply`-able."""
    _run(as_json, lambda: snapshot.diff(spec, root, full), lambda r: sys.stdout.write(r["patch"]))


@app.command("check-sass")
def check_sass(spec: Path = typer.Argument(..., metavar="SPEC", help="Probe spec (TOML) of a CUDA kernel."),
               root: Optional[Path] = RootOpt, recorder: Optional[str] = RecorderOpt,
               nvcc_flag: list[str] = NvccFlagOpt, as_json: bool = JsonOpt, quiet: bool = QuietOpt):
    """Is the recording run the kernel it observes? Compiles the spec's source clean and
    instrumented with the recorder apply chooses (or chose, or --recorder), no GPU needed, and
    judges the SASS as apply's choice does (one build, one answer). Another kernel (exit 1, with what
    to change): with probes off the program does not run the clean kernel instruction for
    instruction, or the copy fits fewer CTAs per SM at the kernel's block size, or spills more.
    Unsure (exit 0, and the measure command to run): the copy keeps those, but a loop's schedule
    changed (a clean loop not held as it was, loads in flight in recording CTAs), or it takes more
    registers where the block size is unknown: only a measurement decides. Keeps (exit 0): neither
    (docs/guide.md, "Recorder modes")."""
    from . import sasscheck

    def render(r: "sasscheck.SassCheck"):
        c, regs = r.comparison, r.comparison.registers
        out.print(f"{r.kernel}: recorder {r.recorder.mode.path.value} ({r.recorder.how}); registers clean "
                  f"{regs.clean}, with probes off {regs.off}, instrumented copy {r.copy} {regs.copy}; copy's body "
                  f"{'versioned' if r.versioned else 'NOT versioned'}")
        if c.ctas_per_sm.clean:
            out.print(f"occupancy: {c.ctas_per_sm.clean} CTAs per SM clean, {c.ctas_per_sm.copy} for the copy "
                      f"({c.threads_per_block} threads per CTA)")
        out.print("probes off: the clean kernel, instruction for instruction" if c.off_identical else
                  "probes off: the kernel DIFFERS from the clean build")
        for l in c.clean_loops:
            out.print(f"  clean {l}")
        for p in r.problems:
            out.print(f"  PROBLEM: {p}")
        for d in r.doubts:
            out.print(f"  UNSURE: {d}")
        out.print({"keeps": "the recording run is the clean kernel with probes added",
                   "unsure": "unsure: the recording keeps what every CTA runs (occupancy at the kernel's block "
                             "size, no spills where CTAs record nothing); whether the doubts above matter only a "
                             "measurement decides",
                   "another kernel": "the recording run would be another kernel: its timeline would not describe "
                                     "this one"}[r.verdict])
        if r.hint:
            out.print(f"next: {r.hint}")

    r = _run(as_json, lambda: sasscheck.check(spec, root, nvcc_flag or None, recorder), render, quiet)
    if not r.ok:
        raise typer.Exit(1)


@app.command("check-iket", cls=_TakesCmd, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def check_iket(ctx: typer.Context,
               spec: Path = typer.Argument(..., metavar="SPEC", help="Applied probe spec (TOML) of a CuTe DSL kernel."),
               root: Optional[Path] = RootOpt,
               arch: str = typer.Option("sm_90a", help="Architecture to compile for (CUTE_DSL_ARCH): no GPU needed."),
               as_json: bool = JsonOpt):
    """Are the probes in the compiled CuTe DSL kernel? The DSL strips IKeT calls unless its compiler
    option `iket` is on, and compiles without complaint either way. This runs the compile (CMD...
    after --, default `python3 SOURCE`: the examples' __main__ calls compile_only() with fake
    tensors) with CUTE_DSL_COMPILER_OPT=iket and CUTE_DSL_ARCH=ARCH, keeps the PTX, and checks each
    entry compiled from the spec's kernel: every site has an IKeT marker (`pmevent`) of its event
    (an unrolled loop repeats them). Exit 1 when a site has none (docs/spec.md, CuTe DSL)."""
    from .cutedsl.check import check

    def render(r):
        out.print(f"{r['kernel']}: compiled by `{' '.join(r['command'])}` with IKeT on, for {r['arch']}")
        for e in r["entries"]:
            out.print(f"  entry {e['entry']} ({e['ptx']})")
            for ev in e["events"]:
                where = f"id {ev['id']}" if ev["id"] is not None else "not declared"
                out.print(f"    event {ev['event']} ({where}): {ev['markers']} marker(s) for "
                          f"{', '.join(ev['sites'])}" + ("" if ev["ok"] else "  MISSING"))
            for p in e["problems"]:
                out.print(f"  MISSING: {p}")
        out.print("every site has its IKeT marker" if r["ok"] else "a probe is not in the compiled kernel")
    r = _run(as_json, lambda: check(spec, root, ctx.args or None, arch), render)
    if not r["ok"]:
        raise typer.Exit(1)


@app.command("include-dir")
def include_dir(as_json: bool = JsonOpt):
    """Print the folder holding atrex_timeline.cuh, for `nvcc -I$(atrex-inject include-dir)`."""
    _run(as_json, lambda: {"include_dir": str(snapshot.runtime_header().parent)}, lambda r: print(r["include_dir"]))


@app.command()
def decode(capture_dir: Path = CaptureArg, manifest: Optional[Path] = ManifestOpt,
           out_dir: Optional[Path] = typer.Option(None, "--out", help="Where to save canonical events "
                                                                      "(default: CAPTURE_DIR.decoded, beside the capture folder)."),
           as_json: bool = JsonOpt, quiet: bool = QuietOpt):
    """Turn raw capture files into canonical events per launch (a folder of uncompressed .npy columns),
    refusing buffers whose magic, version, source id or size do not match; report owners, overflow
    and duplicate claims."""
    from .decode import decode_capture

    def work():
        return decode_capture(capture_dir, mf.for_capture(capture_dir, manifest), out_dir)

    def render(r):
        from rich.table import Table
        for row in r["launches"]:
            c = row["counts"]
            out.print(f"{row['launch']}: {c['events']} events, {c['owners_claimed']}/{c['owners']} owners claimed, "
                      f"overflow owners {c['overflow_owners']}, duplicate claims {c['duplicate_claims']}, "
                      f"torn {c['torn_events']}, missing owners {c['owners_missing']} -> {row['saved']}")
            t = Table("site", "events", "min/owner", "max/owner")
            for n, s in row["sites"].items():
                t.add_row(n, str(s["total"]), str(s["min"]), str(s["max"]))
            out.print(t)
    _run(as_json, work, render, quiet)


@app.command()
def measure(baseline: str = typer.Option(..., help='Baseline command as a JSON argv array, e.g. \'["build/gemm.clean", '
                                                    '"--warmup", "{warmup}", "--iters", "{iterations}"]\'.'),
            instrumented: str = typer.Option(..., help="Instrumented command, same form."),
            out_file: Path = typer.Option(Path("measurement.json"), "--out", help="Artifact to write (JSON)."),
            warmup: int = typer.Option(10, help="Warmup launches each sample must run ({warmup})."),
            iterations: int = typer.Option(100, help="Timed launches each sample must run ({iterations})."),
            pattern: str = typer.Option("ABBA,BAAB", help="Schedule: A = baseline, B = instrumented."),
            rounds: int = typer.Option(1, help="Repeat the pattern this many times."),
            timeout: float = typer.Option(300.0, help="Seconds before a sample is killed (and rejected)."),
            source: list[Path] = typer.Option([], metavar="<path>", help="Source file measured (repeatable); hashed."),
            binary: list[Path] = typer.Option([], metavar="<path>", help="Built binary measured (repeatable); hashed."),
            capture_dir: Optional[Path] = typer.Option(None, help="Instrumented samples record here "
                                                                  "(default: next to --out)."),
            root: Optional[Path] = typer.Option(None, "--root", help="Store source and binary paths relative to this "
                                                                     "folder (default: the current folder)."),
            as_json: bool = JsonOpt):
    """Measure probe perturbation: each sample a fresh process, ABBA then BAAB. Every sample must
    print exactly one __ATREX_TIMELINE_SAMPLE__= line (docs/measure.md); any bad sample rejects the
    run (exit 1). Overhead = median(B)/median(A) - 1 with a bootstrap 95% interval."""
    from rich.progress import Progress

    from . import measure as ms

    def work():
        req = ms.Request(ms.parse_argv(baseline, "--baseline"), ms.parse_argv(instrumented, "--instrumented"),
                         warmup, iterations, pattern, rounds, timeout, tuple(map(str, source)),
                         tuple(map(str, binary)), str(capture_dir or out_file.resolve().with_name(
                             out_file.resolve().stem + "-captures")), str(root) if root else None)
        with Progress(console=err, transient=True, disable=as_json) as bar:
            task = bar.add_task("samples", total=len(req.schedule()))
            art = ms.measure(req, out_file, lambda i, n, arm: bar.update(task, completed=i,
                                                                         description=f"sample {i + 1}/{n} {arm}"))
        return art

    def render(a):
        if not a["valid"]:
            out.print(f"rejected: {'; '.join(a['reasons'])} (artifact {out_file})")
            return
        lo, hi = a["overhead_ci95"]
        out.print(f"baseline {a['median_ms']['baseline']:.4f} ms, instrumented {a['median_ms']['instrumented']:.4f} ms "
                  f"(medians of {a['n']['baseline']}+{a['n']['instrumented']} fresh processes, {a['schedule']}): "
                  f"overhead {100 * a['overhead']:+.2f}% [95% bootstrap interval {100 * lo:+.2f}%, {100 * hi:+.2f}%] -> {out_file}")
    art = _run(as_json, work, render)
    if not art["valid"]:
        raise typer.Exit(1)


def _render_checks(r: dict) -> None:
    from rich.table import Table
    t = Table("check", "result", "count", "first offenders / details", title=f"validation: {r['verdict']}")
    for c in r["checks"]:
        t.add_row(c["name"], "ok" if c["ok"] else "FAIL", str(c["count"]), "\n".join(c["details"][:3]))
    out.print(t)
    for c in r["checks"]:
        if not c["ok"]:
            out.print(f"{c['name']}: next step: {c['hint']}")
    for n in r.get("notes", []):
        out.print(f"note: {n}")
    if r.get("unchecked_provenance"):
        from .validate import unchecked_text
        out.print(f"provenance not checked: {unchecked_text(r['unchecked_provenance'])}")


@app.command()
def validate(capture_dirs: Optional[list[Path]] = typer.Argument(
                 None, metavar="[CAPTURE_DIR]", help="Capture folder (raw files); leave out to check only --measurement. "
                                                     "Several, or a folder holding several: each is checked, and what "
                                                     "they share (one run, the alignment, causality across them)."),
             manifest: Optional[Path] = ManifestOpt,
             source: Optional[Path] = typer.Option(None, help="Instrumented source the binary was built from."),
             binary: Optional[Path] = typer.Option(None, help="Binary that ran (with --binary-sha256)."),
             binary_sha256: Optional[str] = typer.Option(None, help="Expected sha256 of --binary."),
             workload: Optional[str] = typer.Option(None, help="Expected workload identity (ATREX_WORKLOAD)."),
             device: Optional[str] = typer.Option(None, help="Expected device UUID."),
             claims: Optional[Path] = typer.Option(None, help="Numeric claims to recompute (TOML [[claim]] or JSON)."),
             measurement: Optional[Path] = typer.Option(None, help="Also recheck a measurement artifact."),
             root: Optional[Path] = MeasureRootOpt,
             as_json: bool = JsonOpt, quiet: bool = QuietOpt):
    """Run the named checks (overflow, truncation, geometry, owner/site identity, duplicate ownership,
    time order, interval pairing, deterministic counts, stale provenance, cross-launch mixing, numeric claims)
    and print the verdict. Exit 0 valid, 1 rejected, 2 usage error."""
    from .captureset import is_single, open_timeline
    from .timeline_validate import validate_timeline
    from .validate import Provenance
    from .validate import validate as validate_all

    def work():
        if not capture_dirs or is_single(capture_dirs, manifest):
            return validate_all(capture_dirs[0] if capture_dirs else None, manifest,
                                Provenance(source, binary, binary_sha256, workload, device), claims,
                                {"measurement": measurement}, root)
        given = [o for o, v in (("--source", source), ("--binary", binary), ("--binary-sha256", binary_sha256),
                                ("--workload", workload), ("--device", device), ("--claims", claims),
                                ("--measurement", measurement)) if v is not None]
        if given:
            raise AtrexError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to one capture folder",
                             hint="validate each capture with its provenance alone; together, give the folders only")
        return validate_timeline(open_timeline(capture_dirs))

    def render(r):
        for c in r.get("captures", []):
            out.print(f"capture {c['folder']} (spec {c['spec']}, device {c['device']}):")
            _render_checks(c)
        if "handoffs" in r:
            out.print(f"{len(r['captures'])} captures on one axis ({r['axis']}):")
        for h in r.get("handoffs", []):
            q = h["handoff_ns"]
            out.print(f"  handoff {h['causality']} ({h['producer']} -> {h['consumer']}): {h['matched']} observed, "
                      f"{h['unmatched']} without a recorded producer; min {q['min']} median {q['median']} max "
                      f"{q['max']} ns, bound {h['bound_ns']} ns")
        if "checks" in r:
            _render_checks(r)
        if "measurement" in r:
            mv = r["measurement"]
            out.print(f"measurement: {'valid' if mv['valid'] else 'rejected'}; "
                      + ("; ".join(mv["problems"]) if mv["problems"] else f"overhead {mv['overhead']:+.2%}"))
            for u in mv["unchecked"]:
                out.print(f"  {u}")
            if mv["next_step"]:
                out.print(f"  next step: {mv['next_step']}")
    r = _run(as_json, work, render, quiet)
    if r["verdict"] != "valid":
        raise typer.Exit(1)


@app.command()
def summary(capture_dirs: list[Path] = CapturesArg, manifest: Optional[Path] = ManifestOpt, as_json: bool = JsonOpt,
            quiet: bool = QuietOpt,
            fixed_cost: Optional[str] = typer.Option(
                None, "--fixed-cost", metavar="INTERVAL",
                help="With the SM clock: an interval between two probes with nothing between them; its median "
                     "cycles are reported as the recorder's fixed cost and taken off every interval in a "
                     "column of its own.")):
    """Per launch: each interval `a -> b` (count, min, p10, median, p90, max; per SM and per owner in
    --json) and each site's offsets from the launch's first event, recomputed from canonical events
    (streamed part by part, so a capture larger than memory is summarized). Text in µs, JSON in ns.
    Prints the timer tick and flags medians under 10 ticks (quantized); with the SM clock, the
    cycles, the rate model and where the clock changed speed (docs/summary.md). Several captures:
    each launch also says where it starts on their common axis."""
    from .captureset import is_single, open_timeline
    from .manycaptures import render_timeline_text, summarize_timeline
    from .summary import render_text, summarize_capture

    def work():
        if is_single(capture_dirs, manifest):
            return summarize_capture(capture_dirs[0], mf.for_capture(capture_dirs[0], manifest), fixed_cost)
        return summarize_timeline(open_timeline(capture_dirs), fixed_cost)

    def render(r):
        out.print(render_timeline_text(r) if "captures" in r else "\n".join(map(render_text, r["launches"])))
    _run(as_json, work, render, quiet)


@app.command()
def export(capture_dirs: list[Path] = CapturesArg, manifest: Optional[Path] = ManifestOpt,
           perfetto: Optional[Path] = typer.Option(None, help="Write a Perfetto trace (.pftrace) of every launch "
                                                             "(several captures: one trace, one axis)."),
           png: Optional[Path] = typer.Option(None, help="Write the picture of the first launch: per interval, its "
                                                        "durations per owner role next to a zoomed swimlane."),
           png_window: str = PngWindowOpt, rows: int = RowsOpt,
           owners: Optional[str] = typer.Option(None, "--owners", metavar="LIST",
                                                help="Trace only these owner slots in full, e.g. 0-3,17."),
           ctas: Optional[str] = typer.Option(None, "--ctas", metavar="LIST",
                                              help="Trace only the owners of these CTAs (linear index), e.g. 0-7."),
           trace_window: Optional[str] = typer.Option(
               None, "--trace-window", metavar="START:END",
               help="Trace window (the Perfetto trace only): keep only events START <= t < END ns after each "
                    "launch's first event (whole ns; either side may be empty). The picture's is --png-window."),
           everything: bool = typer.Option(False, "--all", help="Trace every owner in full, whatever the size."),
           budget: int = typer.Option(1_000_000, "--budget", metavar="EVENTS",
                                      help="Default rule: events traced in full, at most."),
           as_json: bool = JsonOpt, quiet: bool = QuietOpt):
    """Export decoded launches: a native Perfetto trace (open it at ui.perfetto.dev) and/or a PNG.
    The trace holds every owner when the capture fits the budget; otherwise the owners closest to
    each interval's median, p10 and p90 and the slowest, and counter tracks for the rest; its
    `selection` track names what was left out (docs/format.md). The two windows are separate:
    --trace-window (ns) selects the trace's events, --png-window (µs) zooms the picture. Several
    captures: one trace, a process per device and kernel, every event on their common axis."""
    from .captureset import is_single, open_timeline
    from .export import export_capture
    from .manycaptures import export_timeline

    def work():
        if is_single(capture_dirs, manifest):
            return export_capture(capture_dirs[0], mf.for_capture(capture_dirs[0], manifest), perfetto, png,
                                  png_window, rows, owners, ctas, trace_window, everything, budget)
        return export_timeline(open_timeline(capture_dirs), perfetto, png, owners, ctas, trace_window, everything,
                               budget)

    def render(r):
        for k in ("perfetto", "png"):
            if k in r:
                out.print(f"{k}: {r[k]}")
        if "axis_words" in r:
            out.print(f"  {len(r['captures'])} captures on one axis: {r['axis_words']}")
        for c in r.get("selection", []):
            out.print(f"  {c.get('capture', '') and c['capture'] + '/'}{c['launch']}: {c['n_kept']} owners in full, {c['n_left_out']} left out"
                      + (f" ({c['left_out_owners'][:60]}{'…' if len(c['left_out_owners']) > 60 else ''})"
                         if c["n_left_out"] else "") + f"; rule: {c['rule']}")
        for p in r.get("panels", []):
            where = f"{p['window_us'][0]:.2f}-{p['window_us'][1]:.2f} us" if p["window_us"] else "no instances"
            out.print(f"  {p['interval']}: window {where}, {p['complete_in_window']} complete instance(s) "
                      f"on {len(p['lanes'])} lanes")
    _run(as_json, work, render, quiet)


@app.command()
def report(capture_dir: Path = CaptureArg, out_file: Path = typer.Option(..., "-o", "--out", help="HTML file to write."),
           manifest: Optional[Path] = ManifestOpt, measurement: Optional[Path] = MeasurementOpt,
           correctness_evidence: Optional[Path] = EvidenceOpt, target: float = TargetOpt,
           source: Optional[Path] = SourceOpt, root: Optional[Path] = MeasureRootOpt,
           png_window: str = PngWindowOpt,
           compare: Optional[Path] = typer.Option(None, "--compare", metavar="BEFORE",
                                                  help="Also compare this capture with BEFORE's (atrex-inject compare "
                                                       "BEFORE CAPTURE_DIR): its table and picture."),
           mapping: list[str] = MapOpt, allow_workload_change: bool = AllowWorkloadOpt,
           allow_device_change: bool = AllowDeviceOpt, as_json: bool = JsonOpt, quiet: bool = QuietOpt):
    """Write one self-contained HTML page for a reviewer, the Perfetto trace beside it: the spec's
    question and the answer its intervals give (computed: the longest phase, its ratio to the next
    with a 95% interval, or why the intervals cannot answer), the intervals on one axis, where each
    probe sits, the grade, validation, marks and per-SM tables, per launch the summary and the
    picture, how to open the trace (offline from the file, or online in the Perfetto UI), and the
    measurement when given. With --compare BEFORE, a section comparing this capture with BEFORE's
    (--map and --allow-* as in `compare`)."""
    from .compare import parse_map
    from .report import write_report

    def work():
        if compare is None and (mapping or allow_workload_change or allow_device_change):
            raise AtrexError("--map and --allow-* apply to --compare", hint="add --compare BEFORE")
        return write_report(capture_dir, out_file, manifest, measurement, correctness_evidence, target, source, root,
                            png_window, compare, parse_map(mapping), allow_workload_change, allow_device_change)

    def render(r):
        out.print(f"report: {r['report']} (capture {r['verdict']}, grade {r['grade']}); trace {r['trace']}")
        out.print(f"answer: {r['answer']}")
        if r["capture_answer"] != r["answer"]:  # --compare: the before/after answer, then this capture's own
            out.print(f"answer in {capture_dir} alone: {r['capture_answer']}")
    _run(as_json, work, render, quiet)


@app.command()
def compare(before: Path = typer.Argument(..., metavar="BEFORE", help="Capture folder of the build before the change."),
            after: Path = typer.Argument(..., metavar="AFTER", help="Capture folder of the build after it."),
            mapping: list[str] = MapOpt, allow_workload_change: bool = AllowWorkloadOpt,
            allow_device_change: bool = AllowDeviceOpt,
            png: Optional[Path] = typer.Option(None, help="Write the picture: per interval both distributions "
                                                          "(ECDF, one axis) and the per-SM medians."),
            measurement_before: Optional[Path] = typer.Option(None, help="BEFORE's measurement (atrex-inject "
                                                                         "measure; default BEFORE/measure.json)."),
            measurement_after: Optional[Path] = typer.Option(None, help="AFTER's measurement (default "
                                                                        "AFTER/measure.json)."),
            as_json: bool = JsonOpt, quiet: bool = QuietOpt):
    """Which intervals moved between two captures (each validated first; a rejected one is refused),
    by how much, with what confidence. Sites are matched by name (--map for renamed ones); the kernels
    may differ, the workload and the device model may not unless allowed. Per interval, per site
    offset and for the launch's span: count, median, p10, p90 on each side; the median's change with
    a 95% bootstrap interval that resamples owners (launches first when a folder holds several); a
    Mann-Whitney rank test on per-owner medians (per-launch when both folders hold several launches);
    and a verdict, faster/slower (earlier/later for an offset) only when the interval excludes 0, the
    rank test agrees and the move exceeds the timer's tick, else `no change detected`. Per CTA (p90, max: stragglers), per SM and per warp it says where. With a
    measurement of each side, the clean builds' end-to-end change too. Exit 0 with the verdicts, 2 on
    bad input (docs/compare.md)."""
    from .compare_picture import compare as compare_captures
    from .compare import render_text

    def render(r):
        out.print(render_text(r))
        if r.get("png"):
            out.print(f"png: {r['png']}")
    _run(as_json, lambda: compare_captures(before, after, mapping, allow_workload_change, allow_device_change,
                                           measurement_before, measurement_after, png), render, quiet)


@app.command()
def verdict(capture_dir: Optional[Path] = typer.Argument(None, metavar="[CAPTURE_DIR]", help="Capture folder; "
                                                          "leave out to grade without a capture (give --manifest)."),
            manifest: Optional[Path] = ManifestOpt, measurement: Optional[Path] = MeasurementOpt,
            correctness_evidence: Optional[Path] = EvidenceOpt,
            correctness: Optional[str] = typer.Option(None, help="Self-declared correctness: a note, never evidence."),
            target: float = TargetOpt,
            hard_threshold: bool = typer.Option(False, help="Overhead beyond the target, either way, rejects "
                                                              "instead of diagnostic."),
            source: Optional[Path] = SourceOpt, root: Optional[Path] = MeasureRootOpt, as_json: bool = JsonOpt, quiet: bool = QuietOpt):
    """Grade the evidence: decision_grade (valid capture + valid measurement within target + a
    matching evaluator record, all of one build, workload and device), diagnostic (something missing
    or a field that disagrees, listed), or rejected."""
    from .evidence import verdict as grade_evidence

    def work():
        return grade_evidence(capture_dir, manifest, measurement, correctness_evidence, correctness, target,
                              hard_threshold, source, root)

    def render(r):
        out.print(f"grade: {r['grade']}")
        for k, label in (("failures", "failure"), ("missing", "missing"), ("disagreements", "disagrees"),
                         ("notes", "note")):
            for x in r[k]:
                out.print(f"  {label}: {x}")
    r = _run(as_json, work, render, quiet)
    if r["grade"] == "rejected":
        raise typer.Exit(1)


@app.command()
def demo(out_dir: Optional[Path] = typer.Option(None, "--out", help="Work folder (default: a new temp folder)."),
         live: bool = typer.Option(False, help="Build and capture on this machine's GPU instead of the "
                                               "bundled H200 capture."),
         as_json: bool = JsonOpt, quiet: bool = QuietOpt):
    """The whole pipeline on the bundled example (bf16 GEMM, inline PTX) and a real H200 capture of
    that same instrumented source: apply, diff stat, decode, validate, summarize, the answer line
    (its phases of a few timer ticks answered in SM cycles too, on the bundled clock = true capture
    of the same GEMM), report.html (open it first: the question, its answer, the tables) with the
    .pftrace beside it and the PNG, revert byte-exact; then compare: two bundled H200 captures of
    one kernel before and after a one-line change, and which intervals moved (compare.png). Needs
    no GPU; --live captures for real where one is present."""
    from .demo import run_demo
    r = _run(as_json, lambda: run_demo(out_dir, live, None if as_json else out), lambda r: None, quiet)
    if r["validation"] != "valid":
        raise typer.Exit(1)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
             options_metavar="[OPTIONS] -- CMD...")
def capture(ctx: typer.Context,
            spec: list[Path] = typer.Option(..., "--spec", metavar="SPEC",
                                            help="The applied spec (its manifest names the kernel and sites). "
                                                 "Repeat it for a program whose kernels each have a spec: one run, "
                                                 "a capture folder per spec under --out, on one time axis."),
            out_dir: Path = typer.Option(..., "--out", help="Capture folder to create."),
            root: Optional[Path] = RootOpt,
            workload: Optional[str] = typer.Option(None, help="Workload identity recorded with each launch."),
            calibrate: Optional[Path] = typer.Option(
                None, "--calibrate", metavar="CALIBRATOR",
                help="A build of runtime/atrex_clockcal.cu: run before and after the program, it relates the "
                     "device's %globaltimer to the host clock (clock.json), so captures of several devices share "
                     "an axis."),
            as_json: bool = JsonOpt):
    """Run a program (CMD..., everything after --) under capture: with the cuda backend through the
    recorder's ATREX_TIMELINE_OUT, and with the kernel's launches from Python (cuda-python,
    cuda.core, CuPy) hooked in every Python process, each captured or reported as not captured;
    with cutedsl under IKeT's run-iket, normalizing its output to the same raw files. The manifest is copied in, so decode/validate/export take the folder as is,
    and run.json names the program that ran (its sha256; a program changed during the run: exit 2)."""
    from .capture import run_capture

    def work():
        if not ctx.args:
            raise AtrexError("no program to run", hint="atrex-inject capture --spec S --out DIR -- ./prog args")
        return run_capture(spec, root, out_dir, ctx.args, workload, calibrate)

    def render(r: dict) -> None:
        for c in r.get("captures", [r]):
            out.print(f"{len(c['launches'])} launch(es) captured in {c['out']} (program {r['program']['path']}, "
                      f"sha256 {r['program']['sha256'][:16]}…)")
        if "clock" in r:
            k = r["clock"]
            out.print(f"  clock: device timer to host clock, drift {k['drift_ppm']:+.3f} ppm, error bound "
                      f"{k['error_ns']:.0f} ns (clock.json)")
        py = r.get("python")
        if py and (py["launches"] or py["not_captured"] or py["failed_hooks"]):  # what the launch hooks did
            out.print(f"  from Python ({', '.join(py['hooked']) or 'no launch API imported'}): {py['launches']} "
                      f"launch(es) of the kernel, {py['written']} captured, {py['skipped']} left out by [capture] "
                      f"skip/count, {len(py['not_captured'])} NOT captured")
            for n in py["not_captured"]:
                what = f"launch {n['seq']}" if n["seq"] >= 0 else "a graph node"
                out.print(f"    NOT captured  process {n['pid']} {what} through {n['api']}: {n['reason']}\n"
                          f"                  to capture it: {n['hint']}")
            for api in py["failed_hooks"]:
                out.print(f"    NOT hooked    {api} (see the program's stderr): its launches are not counted")
    _run(as_json, work, render)


for _c in app.registered_commands:  # every command, including ones added later in this file
    if _c.cls in (None, TyperCommand):
        _c.cls = _Command

if __name__ == "__main__":
    app()
