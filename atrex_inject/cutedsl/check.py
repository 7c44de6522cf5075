"""`check-iket`: are the probes of an applied CuTe DSL spec in the compiled kernel? (CPU only.)

The CuTe DSL strips IKeT calls at compile time unless its compiler option `iket` is on
(CUTE_DSL_COMPILER_OPT), and then compiles without complaint: a kernel built the usual way has
no probe in it at all. A probe can also be compiled out by the DSL itself (a site inside a
`cutlass.const_expr` branch that is false, or in code the kernel never traces). So this check
runs the program's compile (by default `python3 SOURCE`, which for the examples calls
`compile_only()`) with IKeT on, for an architecture set by CUTE_DSL_ARCH (no GPU needed), keeps
the PTX, and reads in it, for each kernel entry compiled from the spec's kernel:
- the events IKeT declared (`__iket_evt_decl_<name>_<id>_attrs`: each event's name and id);
- the markers (`pmevent.mask <id>`), counted per event id.
Each site is an IKeT event (a mark named after the site) or one end of a range (named after its
start site, both ends one event id): an event needs as many markers as it has sites. More is
fine: a loop the compiler unrolled repeats its markers (hopper_gemm's k-loop: 16 of each).
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from ..errors import AtrexError

DSL_PREFIXES = ("CUTE_DSL", "CUTE_EXPERIMENTAL_DSL")  # each CuTe-family DSL reads its own variables
_IKET_OPT = re.compile(r"(?:^|(?<=[\s,]))(?:--)?iket(?:=?\{[^}]*\}|=[^\s,]*)?(?=[\s,]|$)")
_DECL = re.compile(r"__iket_evt_decl_(\w+)_(\d+)_attrs\b")
_ENTRY = re.compile(r"^\s*(?:\.visible\s+)?\.entry\s+([\w$]+)", re.M)
_FUNCTION = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.(?:entry|func)\b", re.M)
_MARKER = re.compile(r"\bpmevent(?:\.mask)?\s+(0x[0-9a-fA-F]+|\d+)\s*;")


def iket_env(env: dict[str, str], arch: str, dump_dir: Path) -> dict[str, str]:
    """`env` with IKeT on (`iket` added to each DSL's COMPILER_OPT, the user's options kept), the
    architecture set, and the PTX kept in `dump_dir`."""
    out = dict(env)
    for p in DSL_PREFIXES:
        opt = out.get(f"{p}_COMPILER_OPT", "")
        if not _IKET_OPT.search(opt):
            out[f"{p}_COMPILER_OPT"] = f"{opt} iket".strip()
        out.update({f"{p}_ARCH": arch, f"{p}_KEEP": "ptx", f"{p}_DUMP_DIR": str(dump_dir)})
    return out


def entries(ptx: str) -> dict[str, str]:
    """Kernel entry name -> its text (to the next function), in one PTX module."""
    starts = [m.start() for m in _FUNCTION.finditer(ptx)] + [len(ptx)]
    out = {}
    for a, b in zip(starts, starts[1:]):
        m = _ENTRY.match(ptx, a)
        if m:
            out[m.group(1)] = ptx[a:b]
    return out


def markers(ptx: str, body: str) -> dict[str, tuple[int | None, int]]:
    """Event name -> (its id as the module declares it, the markers with that id in `body`); an
    event with no declaration is absent."""
    counts: dict[int, int] = {}
    for m in _MARKER.finditer(body):
        v = int(m.group(1), 0)
        counts[v] = counts.get(v, 0) + 1
    return {name: (int(i), counts.get(int(i), 0)) for name, i in _DECL.findall(ptx)}


def entry_prefix(kernel: str) -> str:
    """How the DSL begins the name of the spec's `kernel` (`Fwd.kernel` for a method): its entry is
    `kernel_cutlass_<function>_<its arguments>`, a method's with its class among the arguments
    (`kernel_cutlass_kernel___main__Fwd_object_at_...`)."""
    return f"kernel_cutlass_{kernel.rsplit('.', 1)[-1]}_"


def compiled_from(entry: str, kernel: str) -> bool:
    """Whether a PTX entry was compiled from the spec's `kernel` (entry_prefix). A method's first
    argument is its object, which the DSL names by `str(self)`, `<module.Outer.Inner object at 0x…>`
    with dots, brackets and address dropped: `quacksoftmaxSoftmax_object_at_`, `__main__Fwd_object_at_`;
    so its classes, joined, come right before `_object_at_` (after the module, whatever its name)."""
    *classes, _ = kernel.split(".")
    return entry.startswith(entry_prefix(kernel)) and (
        not classes or f"{''.join(classes)}_object_at_" in entry[len(entry_prefix(kernel)):])


def verify(manifest, ptx_files: dict[str, str]) -> dict:
    """Check each entry compiled from the manifest's kernel, in PTX texts by file name: every
    IKeT event of the manifest declared, with at least one marker per site."""
    found = [(f, name, text, body) for f, text in sorted(ptx_files.items())
             for name, body in entries(text).items() if compiled_from(name, manifest.kernel)]
    if not found:
        names = ", ".join(n for t in ptx_files.values() for n in entries(t)) or "none"
        raise AtrexError(f"the compile produced no kernel entry for {manifest.kernel!r} (entries in its PTX: {names})",
                         hint="give the command that compiles this kernel after --, e.g. "
                              "`atrex-inject check-iket SPEC -- python3 build.py`")
    site_names = [s.name for s in manifest.sites]
    by_event = {r.name: [site_names[r.start_site], site_names[r.end_site]] for r in manifest.iket.ranges}
    by_event.update({name: [site_names[i]] for name, i in manifest.iket.marks.items()})
    checked = []
    for f, entry, text, body in found:
        have = markers(text, body)
        events = []
        for name, sites in by_event.items():
            event_id, n = have.get(name, (None, 0))
            events.append({"event": name, "id": event_id, "sites": sites, "markers": n, "ok": n >= len(sites)})
        checked.append({"ptx": f, "entry": entry, "events": events,
                        "problems": [_problem(e) for e in events if not e["ok"]]})
    return {"kernel": manifest.kernel, "entries": checked, "ok": not any(c["problems"] for c in checked)}


def _problem(e: dict) -> str:
    sites = " and ".join(f"site {s!r}" for s in e["sites"])
    if e["id"] is None:
        return (f"{sites}: no IKeT marker in the PTX (event {e['event']!r} is not declared): the DSL compiled "
                "the probe out (in a `cutlass.const_expr` branch that is false, or in code the kernel does not trace)")
    return (f"{sites}: {e['markers']} IKeT marker(s) of event {e['event']!r} (id {e['id']}) in the PTX for "
            f"{len(e['sites'])} site(s): the DSL compiled one out")


def check(spec_path: Path, root: Path | None = None, cmd: list[str] | None = None, arch: str = "sm_90a") -> dict:
    """Run the compile of the applied spec's instrumented source with IKeT on (`cmd`, default
    `python3 SOURCE`) and verify its PTX (verify)."""
    from .. import snapshot  # noqa: PLC0415
    from ..fsio import sha256_bytes  # noqa: PLC0415
    from ..spec import load_spec  # noqa: PLC0415

    spec = load_spec(spec_path, root)
    if spec.backend != "cutedsl":
        raise AtrexError(f"check-iket reads CuTe DSL builds; spec {spec.name!r} is for the {spec.backend} backend",
                         path=str(spec.path), hint=f"atrex-inject check-sass {spec_path}")
    m = snapshot.load_manifest(snapshot.workspace(spec))
    if m is None or sha256_bytes(spec.source.read_bytes()) != m.source.instrumented_sha256:
        raise AtrexError(f"{spec.source_rel} is not the instrumented source of spec {spec.name!r}", path=str(spec.path),
                         hint=f"atrex-inject apply {spec_path}, then check-iket compiles it as it is")
    cmd = cmd or [sys.executable, str(spec.source)]
    with tempfile.TemporaryDirectory(prefix="atrex-iket-") as dump:
        try:
            p = subprocess.run(cmd, env=iket_env(dict(os.environ), arch, Path(dump)), capture_output=True, text=True)
        except OSError as e:
            raise AtrexError(f"cannot run {shlex.join(cmd)}: {e.strerror}", hint="check the command after --") from None
        if p.returncode != 0:
            raise AtrexError(f"the compile `{shlex.join(cmd)}` exited with status {p.returncode}: "
                             f"{(p.stderr or p.stdout).strip()[-1500:]}",
                             hint="the command must compile the kernel (the examples' `compile_only()` with fake "
                                  "tensors needs no GPU)")
        ptx = {f.name: f.read_text() for f in sorted(Path(dump).rglob("*.ptx"))}
    if not ptx:
        raise AtrexError(f"the compile `{shlex.join(cmd)}` compiled no CuTe DSL kernel (no PTX was kept)",
                         hint="give the command that compiles this kernel after --, e.g. "
                              "`atrex-inject check-iket SPEC -- python3 build.py`")
    return {"spec": spec.name, "command": cmd, "arch": arch, **verify(m, ptx)}
