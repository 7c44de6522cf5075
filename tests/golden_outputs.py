"""What the user sees, computed through the CLI only, so the same code ran before a refactor (to
write tests/golden/outputs/) and runs after it (test_golden.py compares): the demo's text, the manifest
`apply` writes for every example spec (its time stamp blanked), for every committed H200
fixture its decode report and saved columns, validation report, interval summary and default
Perfetto trace, and the comparison of the reduction's two recorders (compare's seeded figures). The trace is kept as what the trace processor reads from it (tests/pftrace.py:
each track's descriptor and events, names and times resolved), so its encoding may change and
what the UI shows may not.

Paths that differ between runs (the temporary work folder) are replaced by `<WORK>`. An output
larger than INLINE bytes (the traces, the summaries of the big fixtures) is kept as its sha256 and
size; the others in full, so a difference reads as a diff. Regenerate only on purpose, from a
commit whose outputs are right (files it no longer writes, an output that grew past INLINE say,
are removed):

    python tests/golden_outputs.py tests/golden/outputs
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "h200"
INLINE = 64 * 1024
CAPTURES = sorted(p.parent.name for p in FIXTURES.glob("*/manifest.json") if any(p.parent.glob("*.atrex")))


def _cli(*args) -> tuple[int, str]:
    from typer.testing import CliRunner

    from atrex_inject.cli import app

    r = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.output


PARTS = [*CAPTURES, "compare", "apply", "demo"]  # what outputs() computes, each on its own


def part_of(name: str) -> str:
    """The part of outputs() that writes golden file `name`: a capture's name, compare, apply or demo."""
    return name.split(".", 1)[0]


def outputs(parts: list[str] | None = None) -> dict[str, bytes]:
    """name -> bytes, for every golden file of `parts` (default all PARTS). A part reads the
    committed files only, never another part's outputs, so each can be computed on its own."""
    parts = PARTS if parts is None else parts
    assert set(parts) <= set(PARTS), parts
    out: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="atrex-golden-") as tmp:
        work = Path(tmp)

        def clean(text: str) -> bytes:
            return text.replace(str(work), "<WORK>").encode()

        for name in [n for n in CAPTURES if n in parts]:
            cap = work / name
            shutil.copytree(FIXTURES / name, cap)
            code, text = _cli("validate", cap, "--json")
            out[f"{name}.validate.json"] = clean(f"exit {code}\n{text}")
            code, text = _cli("summary", cap, "--json")
            out[f"{name}.summary.json"] = clean(f"exit {code}\n{text}")
            code, text = _cli("export", cap, "--perfetto", work / f"{name}.pftrace", "--json")
            out[f"{name}.export.json"] = clean(f"exit {code}\n{text}")
            out[f"{name}.trace.json"] = _trace(work / f"{name}.pftrace") if code == 0 else b""
            code, text = _cli("decode", cap, "--out", work / f"{name}.decoded", "--json")
            saved = sorted(q for q in (work / f"{name}.decoded").rglob("*") if q.is_file())
            out[f"{name}.decode.json"] = clean(f"exit {code}\n{text}" + "".join(
                f"{q.relative_to(work)} {hashlib.sha256(q.read_bytes()).hexdigest()}\n" for q in saved))
        if "compare" in parts:
            pair = [work / "reduce_sumsq_global", work / "reduce_sumsq_resident"]
            for cap in pair:
                if not cap.exists():
                    shutil.copytree(FIXTURES / cap.name, cap)
            code, text = _cli("compare", *pair, "--json")
            out["compare.reduce_sumsq_global.reduce_sumsq_resident.json"] = clean(f"exit {code}\n{text}")
        if "apply" in parts:
            project = work / "project"
            shutil.copytree(REPO / "examples", project / "examples")
            (project / ".git").mkdir()
            for spec in sorted((project / "examples" / "specs").glob("*.toml")):
                code, text = _cli("apply", spec, "--json")
                manifest = project / ".atrex" / spec.stem / "manifest.json"
                text = manifest.read_text() if code == 0 else text
                out[f"apply.{spec.stem}.manifest.json"] = clean(
                    f"exit {code}\n" + re.sub(r'"applied_utc": "[^"]*"', '"applied_utc": "<TIME>"', text))
        if "demo" in parts:
            code, text = _cli("demo", "--out", work / "demo", "--quiet")  # progress lines depend on the machine's speed
            out["demo.txt"] = clean(f"exit {code}\n{text}")
            code, text = _cli("demo", "--out", work / "demo-json", "--json")
            result = json.loads(text)
            out["demo.summaries.json"] = (json.dumps(result["summaries"], indent=1) + "\n").encode()
    return out


def _trace(path: Path) -> bytes:
    """A trace as the trace processor reads it: a line of the descriptors by track, then for each
    track a line `track UUID` and a line per event in order, [ts, type, name, annotations,
    counter] (a JSON line each, so that a difference reads as a diff and the big traces are
    written by the JSON module's C encoder: indented, they took a third of the golden tests' time)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from pftrace import by_track, read

    tracks, events = read(path)
    lines = [json.dumps({str(u): t.SerializeToString(deterministic=True).hex() for u, t in sorted(tracks.items())})]
    for u, evs in sorted(by_track(events).items()):
        lines.append(f"track {u}")
        lines.extend(json.dumps([e.ts, e.type, e.name, e.annotations, e.counter]) for e in evs)
    return ("\n".join(lines) + "\n").encode()


def stored(outs: dict[str, bytes]) -> dict[str, bytes]:
    """The golden files for `outs`: small outputs as they are, large ones as NAME.sha256."""
    return {name if len(data) <= INLINE else name + ".sha256":
            data if len(data) <= INLINE else f"{hashlib.sha256(data).hexdigest()} {len(data)}\n".encode()
            for name, data in outs.items()}


if __name__ == "__main__":
    dest = Path(sys.argv[1])
    dest.mkdir(parents=True, exist_ok=True)
    files = stored(outputs())
    for name, data in files.items():
        (dest / name).write_bytes(data)
        print(f"{dest / name}: {len(data)} bytes")
    for old in sorted(p for p in dest.iterdir() if p.name not in files):
        old.unlink()
        print(f"{old}: removed (no longer written)")
