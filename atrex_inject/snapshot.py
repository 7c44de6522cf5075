"""apply / revert / status: the reversible-snapshot machinery around a backend rewriter.

Workspace `<root>/.atrex/<spec name>/` holds `clean/<file>` (the saved clean source),
`instrumented.patch` (unified diff, `git apply`-able) and `manifest.json` (docs/format.md); for
each launcher the spec lists (a file whose launches of the kernel are wrapped),
`clean/launchers/<i>/<file>` and `launcher<i>.patch`. Every file is restored or none is.
Order of writes in apply: clean copy, patch, manifest, and only then the source (atomically), so
any failure leaves the source as it was. revert restores only from a clean copy that, with the
patch, reproduces the instrumented file's hash, onto a file that still has that hash, and
archives the workspace under `.atrex/history/` so the evidence (patch, hashes) survives.

One writer at a time: apply and revert hold `.atrex/lock` (an advisory flock for the whole
project tree, so for every workspace and source file in it) and a lock per source file (for a
file two project trees share); status shares the project lock. Temps a killed
run left behind are removed by the next writer. Every path a manifest names is confined like a
spec path. docs/recovery.md is the user's side of this.
"""
from __future__ import annotations

import contextlib
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import __version__
from . import choice, registry
from . import manifest as mf
from .assets import asset_dir
from .backend import Rewrite
from .errors import SnapshotError, SpecError
from .fsio import locked, remove_stale_temps, sha256_bytes, source_lock_path, write_atomic
from .manifest import Manifest
from .patch import PatchMismatch, apply_patch, diffstat, unified_diff
from .plan import Plan, make_plan
from .spec import ProbeSpec, confine, load_spec

PREVIEW_CONTEXT = 3  # lines shown above and below each landing by `apply --dry-run`
STATUS_WAIT_S = 30.0  # status waits this long for a running apply/revert before giving up


def runtime_header() -> Path:
    return asset_dir("runtime") / "atrex_timeline.cuh"


def atrex_dir(root: Path) -> Path:
    """`<root>/.atrex`, refused when it is a symlink or not a folder: writes must stay in the tree."""
    d = root / ".atrex"
    if d.is_symlink() or (d.exists() and not d.is_dir()):
        raise SnapshotError(f"{d} is a symlink or not a folder; atrex-inject writes only inside the project",
                            hint=f"remove {d} (or replace it with a real folder) and run again")
    return d


def workspace(spec: ProbeSpec) -> Path:
    return atrex_dir(spec.root) / spec.name


@contextlib.contextmanager
def _writer(spec: ProbeSpec, create: bool):
    """The project lock for apply/revert, then the cleanup of temps a killed run left. Without
    `create`, a project with no .atrex yet has nothing to lock (and nothing to revert)."""
    d = atrex_dir(spec.root)
    if not create and not d.is_dir():
        yield workspace(spec)
        return
    d.mkdir(exist_ok=True)
    files = sorted({source_lock_path(p): rel for p, rel in
                    [(spec.source, spec.source_rel), *zip(spec.launchers, spec.launcher_rels)]}.items())
    with contextlib.ExitStack() as stack:
        stack.enter_context(locked(d / "lock", f"the project {spec.root}"))
        for lock, rel in files:  # in one order, so two writers sharing files cannot deadlock
            stack.enter_context(locked(lock, rel))
        ws = workspace(spec)
        for p in (spec.source, ws / mf.FILE_NAME, ws / "instrumented.patch", ws / "clean" / spec.source.name):
            remove_stale_temps(p)
        for i, lp in enumerate(spec.launchers):
            for p in (lp, ws / f"launcher{i}.patch", ws / "clean" / "launchers" / str(i) / lp.name):
                remove_stale_temps(p)
        yield ws


@contextlib.contextmanager
def _reader(spec: ProbeSpec):
    d = atrex_dir(spec.root)
    if not d.is_dir():
        yield
        return
    with locked(d / "lock", f"the project {spec.root}", shared=True, wait_s=STATUS_WAIT_S):
        yield


@dataclass(frozen=True)
class ApplyResult:
    manifest: Manifest
    workspace: Path
    patch: str

    def to_json(self) -> dict:
        added, removed = diffstat(self.patch)
        m = self.manifest.to_json()
        return {"applied": True, "workspace": str(self.workspace), "source": m["source"]["path"],
                "lines_added": added, "lines_removed": removed, "sites": m["sites"],
                "warnings": m["warnings"], "staging": m["capture"]["staging"], "recorder": m.get("recorder"),
                "event_bytes": m["capture"]["event_bytes"],
                "perturbation": m.get("perturbation"), **launch_report(self.manifest),
                "manifest": str(self.workspace / mf.FILE_NAME)}


def launch_report(m: Manifest) -> dict:
    """What apply, status and validate say about the kernel's launches: those captured, those not
    (with why and what to do), and the launcher files rewritten."""
    return {"launches": [dict(x) for x in m.launches], "not_captured": [dict(x) for x in m.not_captured],
            "launchers": [f.path for f in m.launchers]}


def _read_source(spec: ProbeSpec, path: Path | None = None) -> tuple[bytes, str]:
    path = path or spec.source
    data = path.read_bytes()
    try:
        return data, data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise SpecError(f"{path.relative_to(spec.root).as_posix()} is not UTF-8 (byte {e.start}, line {line})",
                        path=str(spec.path), hint="save the source as UTF-8") from None


def load_manifest(ws: Path) -> Manifest | None:
    """The workspace's manifest.json, checked; None when there is none."""
    return mf.load_if_present(ws / mf.FILE_NAME)


def build_manifest(spec: ProbeSpec, plan: Plan, clean: bytes, rw: Rewrite, patch: str,
                   launchers: list["_Launcher"] = (), picked: "choice.Choice | None" = None) -> Manifest:
    hdr = runtime_header()
    data = rw.backend_data
    return Manifest(
        tool_version=__version__, backend=spec.backend, name=spec.name, question=spec.question, kernel=spec.kernel,
        spec=mf.FileRef(spec.path.relative_to(spec.root).as_posix() if spec.path.is_relative_to(spec.root)
                        else str(spec.path), spec.sha256),
        source=mf.SourceIdentity(spec.source_rel, sha256_bytes(clean), sha256_bytes(rw.text.encode()), rw.source_id),
        clean_copy=f"clean/{spec.source.name}",
        patch=mf.FileRef("instrumented.patch", sha256_bytes(patch.encode())),
        runtime=mf.FileRef(hdr.name, sha256_bytes(hdr.read_bytes())),
        capture=plan.capture, recorder=picked.to_json() if picked else None,
        groups=plan.groups,
        sites=tuple(mf.PlacedSite(
            id=p.site_id, name=p.site.name, role=p.site.role, group=plan.site_group[p.site_id],
            position=p.site.position,
            anchor=p.site.anchor,
            payload=p.site.payload, every=p.site.every, source_line=p.source_line,
            instrumented_line=p.instrumented_line) for p in sorted(rw.placements, key=lambda p: p.site_id)),
        intervals=spec.intervals, spans=dict(rw.spans),
        expect=dict(spec.expect), launches=tuple(rw.launches), not_captured=tuple(rw.not_captured),
        launchers=tuple(lf.entry for lf in launchers),
        warnings=tuple(rw.warnings) + (picked.warnings if picked else ()),
        perturbation=mf.perturbation_of(data.get("perturbation")), iket=mf.iket_of(data.get("iket"), len(spec.sites)),
        applied_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


def _check_not_applied(spec: ProbeSpec, spec_path, clean: bytes) -> None:
    ws = workspace(spec)
    old = load_manifest(ws)
    if old is not None:
        cur = sha256_bytes(clean)
        if cur == old.source.instrumented_sha256:
            raise SnapshotError(f"{spec.source_rel} is already instrumented by spec {spec.name!r}",
                                path=str(spec.path), hint="revert first: atrex-inject revert " + str(spec_path))
        if cur != old.source.clean_sha256:
            raise SnapshotError(f"workspace {ws} belongs to another state of {old.source.path}",
                                path=str(spec.path), hint=f"inspect {ws} and remove it if it is stale")


@dataclass(frozen=True)
class _Launcher:
    """A launcher file as apply writes it: where, its clean bytes, its wrapped text, its patch."""
    index: int
    path: Path
    rel: str
    clean: bytes
    text: str
    patch: str

    @property
    def entry(self) -> mf.LauncherFile:
        return mf.LauncherFile(self.rel, sha256_bytes(self.clean), sha256_bytes(self.text.encode()),
                               f"clean/launchers/{self.index}/{self.path.name}",
                               mf.FileRef(f"launcher{self.index}.patch", sha256_bytes(self.patch.encode())))


@dataclass(frozen=True)
class Options:
    """How apply chooses the recorder (choice.py): `recorder` in place of the spec's, the build's
    nvcc flags in place of the spec's [build], and a callback told what is being compiled."""
    recorder: str | None = None
    nvcc_flags: tuple[str, ...] = ()
    progress: Callable[[str], None] | None = None


def _prepare(spec_path: str | Path, root: str | Path | None, options: Options = Options()):
    """Everything apply computes before it writes: (spec, clean bytes, rewrite, patch, manifest,
    launchers, recorder choice)."""
    spec = load_spec(spec_path, root)
    clean, text = _read_source(spec)
    _check_not_applied(spec, spec_path, clean)
    picked = choice.resolve(spec, choice.target(spec, text, list(options.nvcc_flags)), options.recorder,
                            options.progress)
    plan = make_plan(spec, picked.mode)
    read = [(p, rel, *_read_source(spec, p)) for p, rel in zip(spec.launchers, spec.launcher_rels)]
    backend = registry.get(spec.backend)
    rw = backend.rewrite(plan, text, {rel: t for _, rel, _, t in read}) if read else backend.rewrite(plan, text)
    patch = unified_diff(text, rw.text, spec.source_rel)
    launchers = [_Launcher(i, p, rel, data, rw.launchers[rel], unified_diff(t, rw.launchers[rel], rel))
                 for i, (p, rel, data, t) in enumerate(read)]
    manifest = build_manifest(spec, plan, clean, rw, patch, launchers, picked)
    return spec, clean, rw, patch, manifest, launchers, picked


def preview(spec_path: str | Path, root: str | Path | None = None, options: Options = Options()) -> dict:
    """`apply --dry-run`: where each site would land, as instrumented `file:line` with PREVIEW_CONTEXT
    lines either side, so placement can be checked by reading; nothing is written, no lock is taken."""
    spec, _, rw, patch, manifest, _, _ = _prepare(spec_path, root, options)
    lines = rw.text.split("\n")
    added, removed = diffstat(patch)
    sites = []
    for s in manifest.sites:
        key = re.compile(rf"atrex: site {re.escape(s.name)} \(id {s.id}\b")
        lands = []
        for i, line in enumerate(lines):
            if key.search(line):
                lo, hi = max(0, i - PREVIEW_CONTEXT), min(len(lines), i + PREVIEW_CONTEXT + 1)
                lands.append({"line": i + 1, "context": [{"line": j + 1, "text": lines[j].rstrip("\r")}
                                                         for j in range(lo, hi)]})
        sites.append({"id": s.id, "name": s.name, "position": s.position, "role": s.role.value,
                      "source_line": s.source_line, "lands": lands})
    return {"dry_run": True, "applied": False, "source": spec.source_rel, "lines_added": added,
            "lines_removed": removed, "sites": sites, "warnings": list(manifest.warnings), "recorder": manifest.recorder,
            **launch_report(manifest)}


def apply(spec_path: str | Path, root: str | Path | None = None, options: Options = Options()) -> ApplyResult:
    """Rewrite outside the lock (every spec/anchor error is raised there, before anything is
    written or created), then, holding it, check that the source and workspace are still as read."""
    spec, clean, rw, patch, manifest, launchers, picked = _prepare(spec_path, root, options)
    with _writer(spec, create=True) as ws:
        for path, rel, data in [(spec.source, spec.source_rel, clean)] + [(l.path, l.rel, l.clean) for l in launchers]:
            if path.read_bytes() != data:
                raise SnapshotError(f"{rel} changed while apply was rewriting it; nothing was written",
                                    path=str(spec.path), hint="run apply again")
        _check_not_applied(spec, spec_path, clean)
        result = _write_snapshot(spec, ws, clean, rw, patch, manifest, launchers)
        choice.remember(spec, picked)
        return result


def _write_snapshot(spec: ProbeSpec, ws: Path, clean: bytes, rw: Rewrite, patch: str, manifest: Manifest,
                    launchers: list[_Launcher]) -> ApplyResult:
    """Workspace files first, the user's files last; on a failure every file written is undone (a
    workspace file removed, a user's file given its clean bytes back)."""
    steps = [("saving the clean copy", ws / manifest.clean_copy, clean, None),
             *[(f"saving the clean copy of {l.rel}", ws / l.entry.clean_copy, l.clean, None) for l in launchers],
             ("writing the patch", ws / manifest.patch.path, patch, None),
             *[(f"writing the patch of {l.rel}", ws / l.entry.patch.path, l.patch, None) for l in launchers],
             ("writing the manifest", ws / mf.FILE_NAME, manifest.dumps(), None),
             ("writing the instrumented source", spec.source, rw.text, clean),
             *[(f"writing {l.rel}", l.path, l.text, l.clean) for l in launchers]]
    existed = ws.exists()
    done: list[tuple[Path, bytes | None]] = []
    for what, path, data, undo in steps:
        try:
            write_atomic(path, data)
        except OSError as e:
            for p, old in reversed(done):
                if old is None:
                    p.unlink(missing_ok=True)
                else:
                    write_atomic(p, old)
            if not existed:
                shutil.rmtree(ws, ignore_errors=True)
            also = "".join(f", {l.rel}" for l in launchers)
            raise SnapshotError(f"apply failed while {what} ({path}): {e}; {spec.source_rel}{also} "
                                f"{'are' if also else 'is'} unchanged (sha256 {sha256_bytes(clean)[:16]})",
                                path=str(spec.path),
                                hint="fix the cause (disk space, permissions) and apply again") from e
        done.append((path, undo))
    return ApplyResult(manifest, ws, patch)


def _history(ws: Path) -> Path:
    dest = ws.parent / "history" / f"{ws.name}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{time.time_ns() % 10**6}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    ws.rename(dest)
    return dest


def _history_entries(spec: ProbeSpec) -> list[Path]:
    """This spec's archived workspaces, newest first."""
    h = atrex_dir(spec.root) / "history"
    entries = [p for p in h.glob(f"{spec.name}-*") if p.is_dir() and not p.is_symlink()] if h.is_dir() else []
    return sorted(entries, key=lambda p: p.name.removeprefix(spec.name + "-"), reverse=True)


@dataclass(frozen=True)
class _Entry:
    """One file of a manifest as revert reads it: the source or a launcher."""
    path: str
    clean_sha256: str
    instrumented_sha256: str
    clean_copy: str
    patch: mf.FileRef


def _entries(m: Manifest) -> list[_Entry]:
    """The manifest's files: the source first, then the launchers."""
    return [_Entry(m.source.path, m.source.clean_sha256, m.source.instrumented_sha256, m.clean_copy, m.patch),
            *[_Entry(f.path, f.clean_sha256, f.instrumented_sha256, f.clean_copy, f.patch) for f in m.launchers]]


def _inside_ws(ws: Path, rel: str, what: str) -> Path:
    """A file the manifest names inside the workspace, refused when missing or outside it."""
    try:
        p = (ws / rel).resolve()
        ok = p.is_relative_to(ws.resolve()) and p.is_file()
    except (OSError, ValueError):  # a NUL byte, a name too long
        ok = False
    if not ok:
        raise SnapshotError(f"the manifest's {what} {rel!r} is missing or outside {ws}", path=str(ws / mf.FILE_NAME),
                            hint="recover with `atrex-inject revert --from-history SPEC` if history holds it")
    return p


def _verified_clean(spec: ProbeSpec, ws: Path, e: _Entry) -> tuple[Path, bytes]:
    """(the file a manifest entry names, its clean content), after proving from the workspace that
    clean copy + patch reproduce the instrumented hash. Every manifest path is confined: the
    file like a spec path, the clean copy and patch inside the workspace."""
    where = str(ws / mf.FILE_NAME)
    src = confine(e.path, spec.root, spec.root, where, None)
    clean_copy, patch_path = _inside_ws(ws, e.clean_copy, "clean copy"), _inside_ws(ws, e.patch.path, "patch")
    data, patch = clean_copy.read_bytes(), patch_path.read_bytes()
    if sha256_bytes(data) != e.clean_sha256:
        raise SnapshotError(f"the saved clean copy {clean_copy} does not match the manifest's clean hash",
                            hint=f"recover the clean source with `git apply -R {patch_path}`")
    if sha256_bytes(patch) != e.patch.sha256:
        raise SnapshotError(f"the saved patch {patch_path} does not match the manifest's patch hash",
                            hint=f"the clean copy {clean_copy} is intact (sha256 {e.clean_sha256[:16]}); "
                                 "copy it back by hand")
    try:
        rebuilt = apply_patch(data.decode(), patch.decode())
    except (UnicodeDecodeError, PatchMismatch) as exc:
        rebuilt = f"<{exc}>"
    if sha256_bytes(rebuilt.encode()) != e.instrumented_sha256:
        raise SnapshotError(f"clean copy + patch in {ws} do not reproduce the instrumented hash "
                            f"{e.instrumented_sha256[:16]}: the workspace was altered", path=where,
                            hint="do not trust this workspace; restore the source from version control")
    return src, data


def _restore_all(spec: ProbeSpec, ws: Path, m: Manifest) -> list[str]:
    """Give every instrumented file of the manifest its clean bytes back; the paths restored. A file
    already clean is left alone; one that is neither clean nor instrumented is refused before any
    file is written, so the files are restored together or not at all."""
    todo = []
    for e in _entries(m):
        src = confine(e.path, spec.root, spec.root, str(ws / mf.FILE_NAME), None)
        cur = sha256_bytes(src.read_bytes())
        if cur == e.clean_sha256:
            continue
        verified = _verified_clean(spec, ws, e)  # first: a workspace that lies is named as such
        if cur != e.instrumented_sha256:
            raise SnapshotError(
                f"{e.path} changed since apply (sha256 {cur[:16]}, expected instrumented "
                f"{e.instrumented_sha256[:16]}); refusing to overwrite your edits; nothing was restored",
                path=str(src), hint=f"the clean source is saved at {ws / e.clean_copy} (sha256 {e.clean_sha256[:16]}); "
                                    "copy it back to discard your edits, or undo the edits and revert again")
        todo.append((e, *verified))
    for e, src, data in todo:
        write_atomic(src, data)
        if sha256_bytes(src.read_bytes()) != e.clean_sha256:
            raise SnapshotError(f"restored {src} but its hash differs from the clean hash",
                                hint=f"copy {ws / e.clean_copy} by hand")
    return [e.path for e, _, _ in todo]


def _archive(ws: Path) -> tuple[str | None, list[str]]:
    """Move the workspace to history; a failure after the source is restored is a warning, not an
    error: the next revert (the source then being clean) archives it."""
    try:
        return str(_history(ws)), []
    except OSError as e:
        return None, [f"the source is restored but the workspace {ws} could not be archived ({e.strerror}); "
                      "run revert again once that is fixed"]


def revert(spec_path: str | Path, root: str | Path | None = None, from_history: bool = False) -> dict:
    spec = load_spec(spec_path, root)
    with _writer(spec, create=False) as ws:
        if from_history:
            return _revert_from_history(spec)
        m = load_manifest(ws)
        if m is None:
            found = _orphan(spec)
            raise SnapshotError(f"no applied snapshot for spec {spec.name!r} (no {ws / mf.FILE_NAME})",
                                path=str(spec.path),
                                hint=f"{spec.source_rel} is instrumented and its clean copy is archived in {found}: "
                                     f"run `atrex-inject revert --from-history {spec_path}`" if found else
                                "nothing to revert; `atrex-inject status` shows the state")
        restored = _restore_all(spec, ws, m)
        archived, warnings = _archive(ws)
        if not restored:
            return {"reverted": False, "state": "clean", "source": m.source.path, "archived": archived,
                    "warnings": warnings}
        return {"reverted": True, "state": "clean", "source": m.source.path, "sha256": m.source.clean_sha256,
                "restored": restored, "archived": archived, "warnings": warnings}


def _orphan(spec: ProbeSpec) -> Path | None:
    """The newest archived workspace of this spec whose instrumented hash the source has now: the
    source is instrumented but its clean copy is only in history."""
    cur = sha256_bytes(spec.source.read_bytes())
    for h in _history_entries(spec):
        try:
            m = load_manifest(h)
        except SnapshotError:
            continue
        if m is not None and m.source.instrumented_sha256 == cur and m.source.path == spec.source_rel:
            return h
    return None


def _revert_from_history(spec: ProbeSpec) -> dict:
    h = _orphan(spec)
    if h is None:
        raise SnapshotError(f"no archived workspace of spec {spec.name!r} has the current hash of {spec.source_rel}",
                            path=str(spec.path), hint="`atrex-inject status` shows the state; nothing was changed")
    m = load_manifest(h)
    restored = _restore_all(spec, h, m)
    return {"reverted": True, "state": "clean", "source": m.source.path, "sha256": m.source.clean_sha256,
            "restored": restored, "archived": str(h), "from_history": True, "warnings": []}


def status(spec_path: str | Path, root: str | Path | None = None) -> dict:
    spec = load_spec(spec_path, root)
    with _reader(spec):
        ws = workspace(spec)
        m = load_manifest(ws)
        cur = sha256_bytes(spec.source.read_bytes())
        if m is None:
            found = _orphan(spec)
            if found is None:
                return {"state": "not-applied", "source": spec.source_rel, "sha256": cur, "spec": spec.name}
            return {"state": "instrumented-archived", "source": spec.source_rel, "sha256": cur, "spec": spec.name,
                    "history": str(found),
                    "hint": f"the source is instrumented but its clean copy is only in {found}; "
                            f"restore it with `atrex-inject revert --from-history {spec_path}`"}
        state = {m.source.clean_sha256: "clean", m.source.instrumented_sha256: "instrumented"}.get(cur, "modified")
        files = []
        for f in m.launchers:
            now = sha256_bytes(confine(f.path, spec.root, spec.root, str(ws / mf.FILE_NAME), None).read_bytes())
            files.append({"path": f.path, "state": {f.clean_sha256: "clean", f.instrumented_sha256: "instrumented"}
                          .get(now, "modified")})
        if any(f["state"] != state for f in files):
            state = "modified"  # the files no longer agree: revert says which one changed
        return {"state": state, "source": spec.source_rel, "sha256": cur, "spec": spec.name, "workspace": str(ws),
                "applied_utc": m.applied_utc, "sites": len(m.sites), **launch_report(m), "launchers": files}


def patch_text(spec_path: str | Path, root: str | Path | None = None) -> str:
    """The applied patch: the source's, then each launcher's (one multi-file diff)."""
    spec = load_spec(spec_path, root)
    ws = workspace(spec)
    p = ws / "instrumented.patch"
    if not p.exists():
        raise SnapshotError(f"spec {spec.name!r} is not applied (no {p})", hint="atrex-inject apply SPEC")
    m = load_manifest(ws)
    return p.read_text() + "".join(_inside_ws(ws, f.patch.path, "patch").read_text()
                                   for f in (m.launchers if m else ()))
