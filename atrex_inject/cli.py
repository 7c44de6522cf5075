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


def main():  # pragma: no cover - console entry
    app()
