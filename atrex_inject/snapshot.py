"""apply / revert / status: the reversible-snapshot machinery around a backend rewriter.

Workspace `<root>/.atrex/<spec name>/` holds `clean/<file>` (the saved clean source),
`instrumented.patch` (unified diff, `git apply`-able) and `manifest.json` (docs/format.md).
Order of writes in apply: clean copy, patch, manifest, and only then the source (atomically), so
any failure leaves the source as it was. revert restores only from a hash-verified clean copy
onto a file that still has the instrumented hash, and archives the workspace under
`.atrex/history/` so the evidence (patch, hashes) survives.
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from . import __version__
from .assets import asset_dir
from .errors import SnapshotError, SpecError
from .fsio import sha256_bytes, write_atomic
from .patch import diffstat, unified_diff
from .plan import make_plan
from .spec import ProbeSpec, load_spec

MANIFEST_FORMAT = "atrex-manifest"
MANIFEST_VERSION = 1


def runtime_header() -> Path:
    return asset_dir("runtime") / "atrex_timeline.cuh"


def workspace(spec: ProbeSpec) -> Path:
    return spec.root / ".atrex" / spec.name


@dataclass(frozen=True)
class ApplyResult:
    manifest: dict
    workspace: Path
    patch: str

    def to_json(self) -> dict:
        added, removed = diffstat(self.patch)
        return {"applied": True, "workspace": str(self.workspace), "source": self.manifest["source"]["path"],
                "lines_added": added, "lines_removed": removed, "sites": self.manifest["sites"],
                "warnings": self.manifest["warnings"], "staging": self.manifest["capture"].get("staging"),
                "manifest": str(self.workspace / "manifest.json")}


def _rewrite(spec: ProbeSpec, text: str):
    if spec.backend == "cuda":
        from .cuda.rewrite import rewrite
    else:
        from .cutedsl.rewrite import rewrite
    return rewrite(spec, text)


def _read_source(spec: ProbeSpec) -> tuple[bytes, str]:
    data = spec.source.read_bytes()
    try:
        return data, data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(f"{spec.source_rel} is not UTF-8 (byte {e.start})", path=str(spec.path)) from None


def load_manifest(ws: Path) -> dict | None:
    p = ws / "manifest.json"
    if not p.exists():
        return None
    try:
        m = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise SnapshotError(f"manifest {p} is unreadable: {e}", hint="restore it from history or remove the workspace")
    if m.get("format") != MANIFEST_FORMAT:
        raise SnapshotError(f"{p} is not an atrex manifest")
    return m


def build_manifest(spec: ProbeSpec, clean: bytes, rw, patch: str) -> dict:
    plan = make_plan(spec)
    hdr = runtime_header()
    return {
        "format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, "tool_version": __version__,
        "backend": spec.backend, "name": spec.name, "question": spec.question, "kernel": spec.kernel,
        "spec": {"path": spec.path.relative_to(spec.root).as_posix() if spec.path.is_relative_to(spec.root)
                 else str(spec.path), "sha256": spec.sha256},
        "source": {"path": spec.source_rel, "clean_sha256": sha256_bytes(clean),
                   "instrumented_sha256": sha256_bytes(rw.text.encode()), "source_id": rw.source_id},
        "clean_copy": f"clean/{spec.source.name}",
        "patch": {"path": "instrumented.patch", "sha256": sha256_bytes(patch.encode())},
        "runtime": {"header": hdr.name, "sha256": sha256_bytes(hdr.read_bytes())},
        "capture": {"capacity": spec.capture.capacity, "clock": spec.capture.clock, "skip": spec.capture.skip,
                    "count": spec.capture.count, "event_bytes": plan.event_bytes, "staging": plan.staging},
        "groups": [g.to_json() for g in plan.groups],
        "sites": [{"id": p.site_id, "name": p.site.name, "role": p.site.role, "group": plan.site_group[p.site_id],
                   "position": p.site.position,
                   "anchor": {"kind": p.site.anchor.kind, "pattern": p.site.anchor.pattern,
                              "occurrence": p.site.anchor.occurrence},
                   "payload": p.site.payload, "every": p.site.every, "source_line": p.source_line,
                   "instrumented_line": p.instrumented_line} for p in sorted(rw.placements, key=lambda p: p.site_id)],
        "intervals": [{"name": iv.name, "start": iv.start, "end": iv.end} for iv in spec.intervals],
        "expect": spec.expect,
        "launches": rw.launches,
        "warnings": rw.warnings,
        **rw.backend_data,
        "applied_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def apply(spec_path: str | Path, root: str | Path | None = None) -> ApplyResult:
    spec = load_spec(spec_path, root)
    ws = workspace(spec)
    clean, text = _read_source(spec)
    old = load_manifest(ws)
    if old is not None:
        cur = sha256_bytes(clean)
        if cur == old["source"]["instrumented_sha256"]:
            raise SnapshotError(f"{spec.source_rel} is already instrumented by spec {spec.name!r}",
                                path=str(spec.path), hint="revert first: atrex-inject revert " + str(spec_path))
        if cur != old["source"]["clean_sha256"]:
            raise SnapshotError(f"workspace {ws} belongs to another state of {old['source']['path']}",
                                path=str(spec.path), hint=f"inspect {ws} and remove it if it is stale")
    rw = _rewrite(spec, text)  # every spec/anchor error is raised here, before any write
    patch = unified_diff(text, rw.text, spec.source_rel)
    manifest = build_manifest(spec, clean, rw, patch)
    steps = [("saving the clean copy", ws / manifest["clean_copy"], clean),
             ("writing the patch", ws / "instrumented.patch", patch),
             ("writing the manifest", ws / "manifest.json", json.dumps(manifest, indent=2) + "\n"),
             ("writing the instrumented source", spec.source, rw.text)]
    done = []
    for what, path, data in steps:
        try:
            write_atomic(path, data)
        except OSError as e:
            for p in done:
                p.unlink(missing_ok=True)
            raise SnapshotError(f"apply failed while {what} ({path}): {e}; {spec.source_rel} is unchanged "
                                f"(sha256 {sha256_bytes(clean)[:16]})", path=str(spec.path),
                                hint="fix the cause (disk space, permissions) and apply again") from e
        done.append(path)
    return ApplyResult(manifest, ws, patch)


def _history(ws: Path) -> Path:
    dest = ws.parent / "history" / f"{ws.name}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{time.time_ns() % 10**6}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(ws), str(dest))
    return dest


def revert(spec_path: str | Path, root: str | Path | None = None) -> dict:
    spec = load_spec(spec_path, root)
    ws = workspace(spec)
    m = load_manifest(ws)
    if m is None:
        raise SnapshotError(f"no applied snapshot for spec {spec.name!r} (no {ws / 'manifest.json'})",
                            path=str(spec.path), hint="nothing to revert; `atrex-inject status` shows the state")
    src = spec.root / m["source"]["path"]
    cur = sha256_bytes(src.read_bytes())
    clean_sha, inst_sha = m["source"]["clean_sha256"], m["source"]["instrumented_sha256"]
    clean_copy = ws / m["clean_copy"]
    if cur == clean_sha:
        return {"reverted": False, "state": "clean", "source": m["source"]["path"], "archived": str(_history(ws))}
    if cur != inst_sha:
        clean_text = clean_copy.read_bytes().decode() if clean_copy.exists() else ""
        changed = sum(1 for _ in unified_diff(clean_text, src.read_text(), m["source"]["path"]).splitlines())
        raise SnapshotError(
            f"{m['source']['path']} changed since apply (sha256 {cur[:16]}, expected instrumented {inst_sha[:16]}); "
            f"refusing to overwrite your edits", path=str(src),
            hint=f"the clean source is saved at {clean_copy} (sha256 {clean_sha[:16]}), {changed} diff lines from it; "
                 f"copy it back to discard your edits, or undo the edits and revert again")
    data = clean_copy.read_bytes()
    if sha256_bytes(data) != clean_sha:
        raise SnapshotError(f"the saved clean copy {clean_copy} does not match the manifest's clean hash",
                            hint=f"recover the clean source with `git apply -R {ws / 'instrumented.patch'}`")
    write_atomic(src, data)
    if sha256_bytes(src.read_bytes()) != clean_sha:
        raise SnapshotError(f"restored {src} but its hash differs from the clean hash", hint=f"copy {clean_copy} by hand")
    return {"reverted": True, "state": "clean", "source": m["source"]["path"], "sha256": clean_sha,
            "archived": str(_history(ws))}


def status(spec_path: str | Path, root: str | Path | None = None) -> dict:
    spec = load_spec(spec_path, root)
    ws = workspace(spec)
    m = load_manifest(ws)
    cur = sha256_bytes(spec.source.read_bytes())
    if m is None:
        return {"state": "not-applied", "source": spec.source_rel, "sha256": cur, "spec": spec.name}
    state = {m["source"]["clean_sha256"]: "clean", m["source"]["instrumented_sha256"]: "instrumented"}.get(cur, "modified")
    return {"state": state, "source": spec.source_rel, "sha256": cur, "spec": spec.name, "workspace": str(ws),
            "applied_utc": m["applied_utc"], "sites": len(m["sites"])}


def patch_text(spec_path: str | Path, root: str | Path | None = None) -> str:
    spec = load_spec(spec_path, root)
    p = workspace(spec) / "instrumented.patch"
    if not p.exists():
        raise SnapshotError(f"spec {spec.name!r} is not applied (no {p})", hint="atrex-inject apply SPEC")
    return p.read_text()
