"""The `atrex-inject` command line: a thin layer over the library; every command has --json."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from . import snapshot
from .errors import AtrexError

app = typer.Typer(
    add_completion=False, no_args_is_help=True, rich_markup_mode=None,
    help="Instrument one GPU kernel from a probe spec, capture and decode its intra-kernel timeline, "
         "and restore the clean kernel byte for byte.\n\n"
         "Typical loop: apply SPEC -> build and run with ATREX_TIMELINE_OUT=DIR -> decode DIR -> revert SPEC.")
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

JsonOpt = typer.Option(False, "--json", help="Print one JSON object instead of text.")
RootOpt = typer.Option(None, "--root", help="Project tree the spec's paths must stay in (default: nearest .git).")


def _run(as_json: bool, fn, render):
    """Call the library; print text or JSON; map AtrexError to its exit status with nothing written."""
    try:
        result = fn()
    except AtrexError as e:
        if as_json:
            print(json.dumps(e.to_json()))
        else:
            err.print(f"error: {e}", markup=False)
        raise typer.Exit(e.exit_code)
    if as_json:
        print(json.dumps(result, indent=2, default=str))
    else:
        render(result)
    return result


@app.command()
def apply(spec: Path = typer.Argument(..., help="Probe spec (TOML), see docs/spec.md."),
          root: Optional[Path] = RootOpt, as_json: bool = JsonOpt):
    """Save the clean source, write the instrumented snapshot in place, and keep patch + manifest
    under .atrex/<name>/. Refused when already applied; on any error nothing is written."""
    def render(r):
        out.print(f"instrumented {r['source']}: +{r['lines_added']} -{r['lines_removed']} lines, "
                  f"{len(r['sites'])} sites; manifest {r['manifest']}", markup=False)
        for s in r["sites"]:
            out.print(f"  site {s['id']:>2} {s['name']:<20} {s['position']:<10} {s['role']:<9} "
                      f"line {s['source_line']} -> {s['instrumented_line']}", markup=False)
    _run(as_json, lambda: snapshot.apply(spec, root).to_json(), render)


@app.command()
def revert(spec: Path = typer.Argument(..., help="The spec that was applied."),
           root: Optional[Path] = RootOpt, as_json: bool = JsonOpt):
    """Restore the clean source, only if the file still has the instrumented hash; the restored
    file is checked against the clean hash, and the workspace is archived under .atrex/history/."""
    def render(r):
        verb = "restored" if r["reverted"] else "already clean:"
        out.print(f"{verb} {r['source']} (workspace archived at {r['archived']})", markup=False)
    _run(as_json, lambda: snapshot.revert(spec, root), render)


@app.command()
def status(spec: Path = typer.Argument(...), root: Optional[Path] = RootOpt, as_json: bool = JsonOpt):
    """Say whether the spec's source is clean, instrumented by this spec, or modified since."""
    _run(as_json, lambda: snapshot.status(spec, root),
         lambda r: out.print(f"{r['source']}: {r['state']} (spec {r['spec']})", markup=False))


@app.command()
def diff(spec: Path = typer.Argument(...), root: Optional[Path] = RootOpt, as_json: bool = JsonOpt):
    """Print the applied patch (unified diff, accepted by `git apply -R` to undo)."""
    _run(as_json, lambda: {"patch": snapshot.patch_text(spec, root)}, lambda r: sys.stdout.write(r["patch"]))


@app.command("include-dir")
def include_dir(as_json: bool = JsonOpt):
    """Print the folder holding atrex_timeline.cuh, for `nvcc -I$(atrex-inject include-dir)`."""
    _run(as_json, lambda: {"include_dir": str(snapshot.runtime_header().parent)}, lambda r: print(r["include_dir"]))


def _manifest(capture_dir: Path, manifest: Optional[Path]) -> dict:
    path = manifest or capture_dir / "manifest.json"
    m = snapshot.load_manifest(path.parent) if path.name == "manifest.json" else None
    if m is None:
        raise AtrexError(f"no manifest at {path}", hint="pass --manifest .atrex/<spec name>/manifest.json")
    return m


@app.command()
def decode(capture_dir: Path = typer.Argument(..., help="Folder the program wrote with ATREX_TIMELINE_OUT."),
           manifest: Optional[Path] = typer.Option(None, help="manifest.json of the applied spec "
                                                              "(default: CAPTURE_DIR/manifest.json)."),
           out_dir: Optional[Path] = typer.Option(None, "--out", help="Where to save canonical events "
                                                                      "(default: CAPTURE_DIR/decoded)."),
           as_json: bool = JsonOpt):
    """Turn raw capture files into canonical events per launch (.npz + .json), refusing buffers whose
    magic, version, source id or size do not match; report owners, overflow and duplicate claims."""
    from . import decode as dec

    def work():
        m = _manifest(capture_dir, manifest)
        names = [s["name"] for s in m["sites"]]
        rows = []
        for launch in dec.decode_dir(capture_dir, m):
            saved = dec.save(launch, out_dir or capture_dir / "decoded")
            per = dec.site_counts(launch, len(names))
            sites = {n: {"min": int(per[:, i].min()) if per.size else 0, "max": int(per[:, i].max()) if per.size else 0,
                         "total": int(per[:, i].sum())} for i, n in enumerate(names)}
            rows.append({"launch": launch.name, "saved": str(saved), "counts": launch.counts, "sites": sites,
                         "launch_seq": launch.meta["launch_seq"], "device": launch.meta.get("device", {})})
        return {"manifest_source_id": m["source"]["source_id"], "launches": rows}

    def render(r):
        from rich.table import Table
        for row in r["launches"]:
            c = row["counts"]
            out.print(f"{row['launch']}: {c['events']} events, {c['owners_claimed']}/{c['owners']} owners claimed, "
                      f"overflow owners {c['overflow_owners']}, duplicate claims {c['duplicate_claims']}, "
                      f"torn {c['torn_events']}, missing owners {c['owners_missing']} -> {row['saved']}", markup=False)
            t = Table("site", "events", "min/owner", "max/owner")
            for n, s in row["sites"].items():
                t.add_row(n, str(s["total"]), str(s["min"]), str(s["max"]))
            out.print(t)
    _run(as_json, work, render)


@app.command()
def measure(baseline: str = typer.Option(..., help='Baseline command as a JSON argv array, e.g. \'["./gemm", '
                                                    '"--warmup", "{warmup}", "--iters", "{iterations}"]\'.'),
            instrumented: str = typer.Option(..., help="Instrumented command, same form."),
            out_file: Path = typer.Option(Path("measurement.json"), "--out", help="Artifact to write (JSON)."),
            warmup: int = typer.Option(10, help="Warmup launches each sample must run ({warmup})."),
            iterations: int = typer.Option(100, help="Timed launches each sample must run ({iterations})."),
            pattern: str = typer.Option("ABBA,BAAB", help="Schedule: A = baseline, B = instrumented."),
            rounds: int = typer.Option(1, help="Repeat the pattern this many times."),
            timeout: float = typer.Option(300.0, help="Seconds before a sample is killed (and rejected)."),
            source: list[Path] = typer.Option([], help="Source file measured (repeatable); hashed."),
            binary: list[Path] = typer.Option([], help="Built binary measured (repeatable); hashed."),
            capture_dir: Optional[Path] = typer.Option(None, help="Instrumented samples record here "
                                                                  "(default: next to --out)."),
            as_json: bool = JsonOpt):
    """Measure probe perturbation: each sample a fresh process, ABBA then BAAB. Every sample must
    print exactly one __ATREX_TIMELINE_SAMPLE__= line (docs/measure.md); any bad sample rejects the
    run (exit 1). Overhead = median(B)/median(A) - 1 with a bootstrap 95% interval."""
    from rich.progress import Progress

    from . import measure as ms

    def work():
        req = ms.Request(ms.parse_argv(baseline, "--baseline"), ms.parse_argv(instrumented, "--instrumented"),
                         warmup, iterations, pattern, rounds, timeout, tuple(map(str, source)),
                         tuple(map(str, binary)), str(capture_dir or out_file.with_suffix("").with_name(
                             out_file.stem + "-captures")))
        with Progress(console=err, transient=True, disable=as_json) as bar:
            task = bar.add_task("samples", total=len(req.schedule()))
            art = ms.measure(req, out_file, lambda i, n, arm: bar.update(task, completed=i,
                                                                         description=f"sample {i + 1}/{n} {arm}"))
        return art

    def render(a):
        if not a["valid"]:
            out.print(f"rejected: {'; '.join(a['reasons'])} (artifact {out_file})", markup=False)
            return
        lo, hi = a["overhead_ci95"]
        out.print(f"baseline {a['median_ms']['baseline']:.4f} ms, instrumented {a['median_ms']['instrumented']:.4f} ms "
                  f"(medians of {a['n']['baseline']}+{a['n']['instrumented']} fresh processes, {a['schedule']}): "
                  f"overhead {100 * a['overhead']:+.2f}% [95% CI {100 * lo:+.2f}%, {100 * hi:+.2f}%] -> {out_file}",
                  markup=False)
    art = _run(as_json, work, render)
    if not art["valid"]:
        raise typer.Exit(1)


if __name__ == "__main__":
    app()
