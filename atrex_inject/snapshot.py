"""apply / revert / status: the reversible-snapshot machinery around a backend rewriter.

Workspace `<root>/.atrex/<spec name>/` holds `clean/<file>` (the saved clean source),
`instrumented.patch` (unified diff, `git apply`-able) and `manifest.json` (docs/format.md); for
each launcher the spec lists (a file whose launches of the kernel are wrapped),
`clean/launchers/<i>/<file>` and `launcher<i>.patch`. Every file is restored or none is.
Order of writes in apply: clean copy, patch, manifest, and only then the source (atomically), so
any failure leaves the source as it was. revert restores only from a clean copy that, with the
patch, reproduces the instrumented file's hash, onto a file that still has that hash (or, with
keep_edits, removes the probes from a file edited since and keeps the edits), and archives the
workspace under `.atrex/history/` (the newest history_keep() per spec) so the evidence survives.
`.atrex/` ignores itself (its own `.gitignore`), and every path written under it stays inside the
project tree, links included (fsio.inside).

One writer at a time: apply and revert hold `.atrex/lock` (an advisory flock for the whole
project tree, so for every workspace and source file in it) and a lock per source file (for a
file two project trees share); status shares the project lock. Temps a killed
run left behind are removed by the next writer. Every path a manifest names is confined like a
spec path. docs/recovery.md is the user's side of this.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from . import __version__
from . import choice, hostcheck, registry
from . import manifest as mf
from .assets import asset_dir
from .backend import Rewrite
from .errors import AtrexError, SnapshotError, SpecError
from .fsio import inside, locked, remove_stale_temps, sha256_bytes, source_lock_path, write_atomic
from .manifest import Manifest
from .patch import (PatchConflict, PatchMismatch, apply_patch, diffstat, for_review, unapply_keeping_edits,
                    unified_diff)
from .plan import BufferPath, Plan, make_plan, requested_mode
from .spec import ProbeSpec, load_spec
from .spec_paths import confine

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
    """`.atrex/<spec name>`, refused when it (or .atrex) is a symbolic link (fsio.inside)."""
    return inside(spec.root, atrex_dir(spec.root) / spec.name)


IGNORE_ALL = "*\n"  # .atrex/.gitignore: the tool's state is never part of the user's repository


def _ignore_itself(spec: ProbeSpec) -> None:
    """Write `.atrex/.gitignore` (`*`: the folder ignores itself and everything in it) unless one is
    there; apply and revert do, holding the lock, once they know they will write."""
    d = atrex_dir(spec.root)
    if not os.path.lexists(d / ".gitignore"):
        write_atomic(d / ".gitignore", IGNORE_ALL, spec.root)


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
        stack.enter_context(locked(inside(spec.root, d / "lock"), f"the project {spec.root}"))
        for lock, rel in files:  # in one order, so two writers sharing files cannot deadlock
            stack.enter_context(locked(lock, rel))
        ws = workspace(spec)
        for p in (spec.source, ws / mf.FILE_NAME, ws / "instrumented.patch", ws / "clean" / spec.source.name):
            remove_stale_temps(p, spec.root)
        for i, lp in enumerate(spec.launchers):
            for p in (lp, ws / f"launcher{i}.patch", ws / "clean" / "launchers" / str(i) / lp.name):
                remove_stale_temps(p, spec.root)
        yield ws


@contextlib.contextmanager
def _reader(spec: ProbeSpec):
    d = atrex_dir(spec.root)
    if not d.is_dir():
        yield
        return
    with locked(inside(spec.root, d / "lock"), f"the project {spec.root}", shared=True, wait_s=STATUS_WAIT_S):
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
        tool_version=__version__, backend=spec.backend, name=spec.name, question=spec.question, pair=spec.pair, kernel=spec.kernel,
        causality=spec.causality,
        spec=mf.FileRef(spec.path.relative_to(spec.root).as_posix() if spec.path.is_relative_to(spec.root)
                        else str(spec.path), spec.sha256),
        source=mf.SourceIdentity(spec.source_rel, sha256_bytes(clean), sha256_bytes(rw.text.encode()), rw.source_id),
        clean_copy=f"clean/{spec.source.name}",
        patch=mf.FileRef("instrumented.patch", sha256_bytes(patch.encode())),
        runtime=mf.FileRef(hdr.name, sha256_bytes(hdr.read_bytes())),
        capture=plan.capture, recorder=replace(picked, warnings=()) if picked else None,  # its warnings: below
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
            raise SnapshotError(f"workspace {ws} belongs to another state of {old.source.path}: the file changed "
                                "since that apply", path=str(spec.path),
                                hint=f"`atrex-inject revert --keep-edits {spec_path}` removes the probes still in it "
                                     "(if any), keeps your edits and archives the workspace; then apply again")


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
    read = [(p, rel, *_read_source(spec, p)) for p, rel in zip(spec.launchers, spec.launcher_rels)]
    backend = registry.get(spec.backend)

    def rewrite(plan):
        return backend.rewrite(plan, text, {rel: t for _, rel, _, t in read}) if read else backend.rewrite(plan, text)

    # the default recorder's rewrite first: every spec, anchor and launch error is said there, and it
    # names the kernel the choice compiles
    plan = make_plan(spec, requested_mode(spec, BufferPath.GLOBAL))
    rw = rewrite(plan)
    clean_launchers = {rel: t for _, rel, _, t in read}
    picked = choice.resolve(spec, choice.target(spec, text, list(options.nvcc_flags), rw, clean_launchers),
                            options.recorder, options.progress)
    if picked.mode != plan.mode:
        plan = make_plan(spec, picked.mode)
        rw = rewrite(plan)
    if picked.how != "fallback":  # a fallback said already that the clean source does not build here
        rw.warnings.extend(hostcheck.check(spec, text, rw.text, list(options.nvcc_flags), clean_launchers,
                                           rw.launchers))
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
            write_atomic(path, data, spec.root)
        except OSError as e:
            for p, old in reversed(done):
                if old is None:
                    p.unlink(missing_ok=True)
                else:
                    write_atomic(p, old, spec.root)
            if not existed:
                shutil.rmtree(ws, ignore_errors=True)
            also = "".join(f", {l.rel}" for l in launchers)
            raise SnapshotError(f"apply failed while {what} ({path}): {e}; {spec.source_rel}{also} "
                                f"{'are' if also else 'is'} unchanged (sha256 {sha256_bytes(clean)[:16]})",
                                path=str(spec.path),
                                hint="fix the cause (disk space, permissions) and apply again") from e
        done.append((path, undo))
    try:  # last, so a failed apply leaves nothing in .atrex; without it .atrex shows in `git status`, nothing more
        _ignore_itself(spec)
    except OSError:
        pass
    return ApplyResult(manifest, ws, patch)


HISTORY_KEEP = 5  # archived workspaces kept per spec (ATREX_HISTORY_KEEP); see history_keep


def history_keep() -> int:
    """How many archived workspaces of a spec revert keeps, newest first: ATREX_HISTORY_KEEP, else
    HISTORY_KEEP. An archive serves `revert --from-history` (the source instrumented again after a
    revert, by an editor's undo or a stash) and the second revert's "already clean"; a capture
    carries its own manifest, so old archives are not needed to read old captures. Five covers a
    few apply/revert rounds on one spec and bounds .atrex/history to five clean copies and patches
    per spec; at least one is kept, the last revert's."""
    v = os.environ.get("ATREX_HISTORY_KEEP", "").strip()
    if not v:
        return HISTORY_KEEP
    if not v.isdigit() or int(v) < 1:
        raise AtrexError(f"ATREX_HISTORY_KEEP={v!r} must be a whole number of at least 1",
                         hint=f"the archived workspaces kept per spec, newest first; unset it for {HISTORY_KEEP}")
    return int(v)


def _history_dir(spec: ProbeSpec) -> Path:
    return inside(spec.root, atrex_dir(spec.root) / "history")


def _history(spec: ProbeSpec, ws: Path) -> Path:
    h, now = _history_dir(spec), time.time_ns()
    dest = h / f"{ws.name}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime(now // 10**9))}-{now // 1000 % 10**6:06d}"
    h.mkdir(exist_ok=True)
    ws.rename(dest)
    return dest


def _history_entries(spec: ProbeSpec) -> list[Path]:
    """This spec's archived workspaces, newest first."""
    h = _history_dir(spec)
    entries = [p for p in h.glob(f"{spec.name}-*") if p.is_dir() and not p.is_symlink()] if h.is_dir() else []

    def when(p: Path) -> tuple[str, int]:  # `<UTC stamp>-<sub-second>`
        stamp, _, sub = p.name.removeprefix(spec.name + "-").partition("-")
        return stamp, int(sub) if sub.isdigit() else -1
    return sorted(entries, key=when, reverse=True)


def _prune(spec: ProbeSpec) -> list[str]:
    """Remove this spec's archives past the newest history_keep(); a failure is a warning."""
    warnings = []
    for old in _history_entries(spec)[history_keep():]:
        try:
            shutil.rmtree(old)
        except OSError as e:
            warnings.append(f"could not remove the old archive {old} ({e.strerror}); remove it by hand")
    return warnings


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


def _verified_clean(spec: ProbeSpec, ws: Path, e: _Entry) -> tuple[Path, bytes, str, str]:
    """(the file a manifest entry names, its clean content, its instrumented text, the patch), after
    proving from the workspace that clean copy + patch reproduce the instrumented hash. Every
    manifest path is confined: the file like a spec path, the clean copy and patch inside the workspace."""
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
    return src, data, rebuilt, patch.decode()


def _keeping_edits(spec_path, ws: Path, e: _Entry, src: Path, instrumented: str, patch: str) -> bytes:
    """The edited file with the probes removed (the patch applied in reverse, patch.unapply_keeping_edits)."""
    try:
        return unapply_keeping_edits(instrumented, src.read_bytes().decode(), patch).encode()
    except UnicodeDecodeError:
        raise SnapshotError(f"{e.path} is no longer UTF-8 text; nothing was restored", path=str(src),
                            hint="save it as UTF-8 and run the command again") from None
    except PatchConflict as c:
        where = "".join(f"\n  hunk {x['hunk']} {x['header']} of {ws / e.patch.path}: instrumented lines "
                        f"{x['patched_lines'][0]}-{x['patched_lines'][1]}, now about lines "
                        f"{x['edited_lines'][0]}-{x['edited_lines'][1]} of {e.path}" for x in c.conflicts)
        raise SnapshotError("your edits touch lines the probes changed, so the probes cannot be removed "
                            f"there without losing an edit; nothing was restored:{where}", path=str(src),
                            hint=f"make those lines as instrumented (`atrex-inject diff --full {spec_path}`) or as "
                                 f"clean (the clean copy {ws / e.clean_copy}), then run "
                                 f"`atrex-inject revert --keep-edits {spec_path}` again") from None


def _restore_all(spec: ProbeSpec, ws: Path, m: Manifest, spec_path, keep_edits: bool = False
                 ) -> tuple[list[str], list[str]]:
    """Give every instrumented file of the manifest its clean bytes back, or with `keep_edits`, a
    file edited since apply its edits without the probes; (the paths restored, those of them whose
    edits were kept). A file already clean is left alone; one that cannot be restored is refused
    before any file is written, so the files are restored together or not at all."""
    todo = []
    for e in _entries(m):
        src = confine(e.path, spec.root, spec.root, str(ws / mf.FILE_NAME), None)
        cur = sha256_bytes(src.read_bytes())
        if cur == e.clean_sha256:
            continue
        src, clean, instrumented, patch = _verified_clean(spec, ws, e)  # first: a workspace that lies is named as such
        if cur == e.instrumented_sha256:
            todo.append((e, src, clean, False))
        elif keep_edits:
            todo.append((e, src, _keeping_edits(spec_path, ws, e, src, instrumented, patch), True))
        else:
            raise SnapshotError(
                f"{e.path} changed since apply (sha256 {cur[:16]}, expected instrumented "
                f"{e.instrumented_sha256[:16]}); refusing to overwrite your edits; nothing was restored",
                path=str(src), hint=f"`atrex-inject revert --keep-edits {spec_path}` removes the probes and keeps your "
                                    f"edits; or copy the clean source back from {ws / e.clean_copy} (sha256 "
                                    f"{e.clean_sha256[:16]}) to discard them")
    for e, src, data, _ in todo:
        write_atomic(src, data, spec.root)
        if src.read_bytes() != data:
            raise SnapshotError(f"restored {src} but it does not read back as written",
                                hint=f"copy {ws / e.clean_copy} by hand")
    return [e.path for e, *_ in todo], [e.path for e, _, _, kept in todo if kept]


def _archive(spec: ProbeSpec, ws: Path) -> tuple[str | None, list[str]]:
    """Move the workspace to history (`.atrex/` ignoring itself first) and drop the archives past
    the bound; a failure after the source is restored is a warning, not an error: the next revert
    (the source then being clean) archives it."""
    try:
        _ignore_itself(spec)
        dest = str(_history(spec, ws))
    except (OSError, SnapshotError) as e:
        why = e.strerror if isinstance(e, OSError) else e.message
        return None, [f"the source is restored but the workspace {ws} could not be archived ({why}); "
                      "run revert again once that is fixed"]
    return dest, _prune(spec)


def revert(spec_path: str | Path, root: str | Path | None = None, from_history: bool = False,
           keep_edits: bool = False) -> dict:
    """Exit 0 (a result) when the source ends at a clean hash the workspace or its archive
    recorded: restored now, or already there; otherwise an error (exit 2): edits without
    `keep_edits`, a workspace that does not prove itself, or nothing known to revert to."""
    spec = load_spec(spec_path, root)
    keep = history_keep()  # a bad ATREX_HISTORY_KEEP, or a linked history folder, is refused before any write
    _history_dir(spec)
    with _writer(spec, create=False) as ws:
        if from_history:
            return _revert_from_history(spec, spec_path)
        m = load_manifest(ws)
        if m is None:
            found = _archived(spec, "instrumented")
            if found:
                raise SnapshotError(f"no applied snapshot for spec {spec.name!r} (no {ws / mf.FILE_NAME})",
                                    path=str(spec.path),
                                    hint=f"{spec.source_rel} is instrumented and its clean copy is archived in "
                                         f"{found}: run `atrex-inject revert --from-history {spec_path}`")
            clean = _archived(spec, "clean")
            if clean is None:
                raise SnapshotError(f"no applied snapshot for spec {spec.name!r} (no {ws / mf.FILE_NAME}), and no "
                                    f"archive of it in {atrex_dir(spec.root) / 'history'} has the source's current "
                                    "hash as its clean hash", path=str(spec.path),
                                    hint="nothing to revert; `atrex-inject status` shows the state")
            return {"reverted": False, "state": "clean", "source": spec.source_rel, "archived": str(clean),
                    "history_keep": keep, "warnings": []}
        restored, kept = _restore_all(spec, ws, m, spec_path, keep_edits)
        archived, warnings = _archive(spec, ws)
        if not restored:
            return {"reverted": False, "state": "clean", "source": m.source.path, "archived": archived,
                    "history_keep": keep, "warnings": warnings}
        return {"reverted": True, "state": "edited" if kept else "clean", "source": m.source.path,
                "sha256": sha256_bytes(spec.source.read_bytes()), "restored": restored, "kept_edits": kept,
                "archived": archived, "history_keep": keep, "warnings": warnings}


def _archived(spec: ProbeSpec, state: str) -> Path | None:
    """The newest archived workspace of this spec whose every file has now its `state`
    ("instrumented": the source is instrumented but its clean copy is only in history; "clean":
    a revert already restored what that workspace applied)."""
    for h in _history_entries(spec):
        try:
            m = load_manifest(h)
            if m is None or m.source.path != spec.source_rel:
                continue
            if all(sha256_bytes(confine(e.path, spec.root, spec.root, str(h / mf.FILE_NAME), None).read_bytes())
                   == getattr(e, f"{state}_sha256") for e in _entries(m)):
                return h
        except (SnapshotError, SpecError, OSError):
            continue
    return None


def _revert_from_history(spec: ProbeSpec, spec_path) -> dict:
    h = _archived(spec, "instrumented")
    if h is None:
        raise SnapshotError(f"no archived workspace of spec {spec.name!r} has the current hash of {spec.source_rel}",
                            path=str(spec.path), hint="`atrex-inject status` shows the state; nothing was changed")
    m = load_manifest(h)
    restored, _ = _restore_all(spec, h, m, spec_path)
    return {"reverted": True, "state": "clean", "source": m.source.path, "sha256": m.source.clean_sha256,
            "restored": restored, "archived": str(h), "from_history": True, "warnings": []}


def _history_report(spec: ProbeSpec) -> dict:
    entries = _history_entries(spec)
    return {"folder": str(atrex_dir(spec.root) / "history"), "archived": len(entries),
            "newest": str(entries[0]) if entries else None, "keep": history_keep()}


def status(spec_path: str | Path, root: str | Path | None = None) -> dict:
    spec = load_spec(spec_path, root)
    with _reader(spec):
        ws = workspace(spec)
        m = load_manifest(ws)
        cur = sha256_bytes(spec.source.read_bytes())
        history = _history_report(spec)
        if m is None:
            found = _archived(spec, "instrumented")
            if found is None:
                return {"state": "not-applied", "source": spec.source_rel, "sha256": cur, "spec": spec.name,
                        "history": history}
            return {"state": "instrumented-archived", "source": spec.source_rel, "sha256": cur, "spec": spec.name,
                    "archive": str(found), "history": history,
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
        hint = ({"hint": f"edited since apply: `atrex-inject revert --keep-edits {spec_path}` removes the probes, keeps "
                         "your edits and archives the workspace"} if state == "modified" else {})
        return {"state": state, "source": spec.source_rel, "sha256": cur, "spec": spec.name, "workspace": str(ws),
                "applied_utc": m.applied_utc, "sites": len(m.sites), **launch_report(m), "launchers": files,
                "history": history, **hint}


def diff(spec_path: str | Path, root: str | Path | None = None, full: bool = False) -> dict:
    """`diff`: the applied patch for review (patch.for_review: an embedded recorder header as one
    line naming it and its sha256), or with `full` as applied; `patch_files` are the complete
    patches in the workspace (`git apply`-able)."""
    spec = load_spec(spec_path, root)
    text = patch_text(spec_path, root)
    shown, embedded = (text, []) if full else for_review(text)
    ws = workspace(spec)
    m = load_manifest(ws)
    files = [ws / "instrumented.patch", *[ws / f.patch.path for f in (m.launchers if m else ())]]
    return {"patch": shown, "full": full or not embedded, "embedded": [e.__dict__ for e in embedded],
            "patch_files": [str(f) for f in files]}


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
