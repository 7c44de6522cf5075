"""The launch ledger `pylaunch-<pid>.json` (docs/format.md): what one Python process under
`atrex-inject capture` did with the kernel's launches. session.py writes it (atomically, whenever
it changes and at exit); capture.py reports it, and validate notes its launches not captured
(../checks.py).

    {"format": "atrex-pylaunch", "version": 1, "pid": 4242, "run_id": "…", "kernel": "rmsnorm_rows",
     "hooked": ["cuda.bindings.driver", "cuda.bindings.nvrtc"], "failed_hooks": [],
     "launches": 13, "skipped": 12, "written": [2],
     "not_captured": [{"seq": 5, "api": "cupy", "reason": "…", "hint": "…"}]}

`launches` counts every launch of the kernel the hooks saw, `skipped` those the spec's [capture]
skip/count left out, `written` the launch numbers captured; each other launch is in `not_captured`.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from ....errors import CaptureError
from ....fsio import write_atomic

FORMAT = "atrex-pylaunch"
VERSION = 1
NAME = re.compile(r"^pylaunch-[0-9]+\.json$")
_LISTS = {"hooked": str, "failed_hooks": str, "written": int, "not_captured": dict}


def path_for(out_dir: str | Path, pid: int) -> Path:
    return Path(out_dir) / f"pylaunch-{pid}.json"


def write(out_dir: str | Path, pid: int, record: dict) -> None:
    write_atomic(path_for(out_dir, pid), json.dumps({"format": FORMAT, "version": VERSION, "pid": pid, **record}) + "\n")


def _read(p: Path) -> dict:
    hint = "capture again with atrex-inject capture (or move the file out of the folder)"
    try:
        r = json.loads(p.read_text())
    except (OSError, UnicodeError, ValueError) as e:
        raise CaptureError(f"launch ledger is not readable JSON ({e})", path=str(p), hint=hint) from None
    if not isinstance(r, dict) or r.get("format") != FORMAT or r.get("version") != VERSION:
        raise CaptureError(f"not a version-{VERSION} {FORMAT} ledger", path=str(p), hint=hint)
    for key in ("launches", "skipped"):
        if type(r.get(key)) is not int or r[key] < 0:
            raise CaptureError(f"ledger field {key!r} is not a non-negative integer", path=str(p), hint=hint)
    for key, kind in _LISTS.items():
        if not isinstance(r.get(key), list) or not all(type(x) is kind for x in r[key]):
            raise CaptureError(f"ledger field {key!r} is not a list of {kind.__name__}", path=str(p), hint=hint)
    for n in r["not_captured"]:
        if type(n.get("seq")) is not int or not all(isinstance(n.get(k), str) for k in ("api", "reason", "hint")):
            raise CaptureError("a ledger entry of not_captured lacks seq, api, reason or hint", path=str(p), hint=hint)
    return r


def read_paths(capture_dir: str | Path) -> list[Path]:
    """The folder's ledger files, by process id."""
    return sorted((p for p in Path(capture_dir).glob("pylaunch-*.json") if NAME.match(p.name)),
                  key=lambda p: int(p.stem.split("-")[1]))


def read(capture_dir: str | Path) -> list[dict]:
    """The folder's ledgers, by process id; [] when no Python process was hooked there."""
    return [_read(p) for p in read_paths(capture_dir)]


def summary(capture_dir: str | Path) -> dict | None:
    """What the hooked processes did, added up: {processes, hooked, failed_hooks, launches, skipped,
    written, not_captured (each with its pid)}; None without a ledger."""
    rs = read(capture_dir)
    if not rs:
        return None
    return {"processes": len(rs), "hooked": sorted({h for r in rs for h in r["hooked"]}),
            "failed_hooks": sorted({h for r in rs for h in r["failed_hooks"]}),
            "launches": sum(r["launches"] for r in rs), "skipped": sum(r["skipped"] for r in rs),
            "written": sum(len(r["written"]) for r in rs),
            "not_captured": [dict(n, pid=r["pid"]) for r in rs for n in r["not_captured"]]}


def notes(capture_dir: str | Path) -> list[str]:
    """validate's notes: the launches from Python that ran without probes and left no file here."""
    s = summary(capture_dir)
    if s is None or not (s["not_captured"] or s["failed_hooks"]):
        return []
    out = []
    if s["not_captured"]:
        out.append(f"{len(s['not_captured'])} launch(es) from Python of the kernel were not captured (they ran the "
                   "clean kernel and left no file here): "
                   + "; ".join(f"process {n['pid']} launch {n['seq']} through {n['api']} ({n['reason']})"
                               for n in s["not_captured"]))
    if s["failed_hooks"]:
        out.append("launches through " + ", ".join(s["failed_hooks"]) + " were not hooked (see the program's stderr): "
                   "any of the kernel's launches through them ran without probes, uncounted")
    return out
