"""A toy backend (test only): what docs/api.md says a new backend is, and nothing more, so
test_backend.py can show the pipeline takes one through the registry alone.

Its "language" is plain text: the kernel is the whole file, only entry and exit anchors exist,
and rewriting prepends one marked comment line per site. Its capture runs the program, then
writes one SYNTHETIC launch in which every owner the plan selects records each site once, the
exit 100 ns per owner index after the entry, through the real layout and sidecar writer."""
from __future__ import annotations

import subprocess

import numpy as np

from atrex_inject.backend import Rewrite, SitePlacement, check_own_buffers
from atrex_inject.errors import CaptureError, SpecError
from atrex_inject.launchfile import write_launch
from atrex_inject.layout import OWNER_DTYPE, TAG_VALID, build_header, group_owners, slot_owners
from atrex_inject.source_id import source_id_of
from atrex_inject.spec import BackendKeys

GRID, BLOCK, T0 = (2, 1, 1), (64, 1, 1), 1_790_000_000_000_000_000


class ToyBackend:
    name = "toy"  # its facts (language, no buffers of its own) are its registry entry's

    def parse_keys(self, table, source) -> BackendKeys:
        return BackendKeys()  # no keys of its own

    def expression_problem(self, expr: str) -> str | None:
        return None

    def check(self, spec) -> None:
        check_own_buffers(spec, self)
        for s in spec.sites:
            if s.anchor.kind not in ("entry", "exit"):
                raise SpecError(f"site {s.name!r}: the toy backend has entry and exit anchors only",
                                path=str(spec.path), line=s.line)

    def rewrite(self, plan, text: str) -> Rewrite:
        spec = plan.spec
        head = "".join(f"# atrex: site {s.name} (id {i}, {s.position})\n" for i, s in enumerate(spec.sites))
        out = "# atrex: instrumented\n" + head + text
        return Rewrite(out, source_id_of(out), [SitePlacement(s, i, 1, 2 + i) for i, s in enumerate(spec.sites)], [])

    def capture(self, manifest, cmd, out_dir, env) -> None:
        if subprocess.run(cmd, env=env).returncode != 0:
            raise CaptureError("the program failed under capture")
        sizes = group_owners(manifest.groups, GRID, BLOCK)
        n, n_sites = sum(sizes), len(manifest.sites)
        own = np.zeros(n, dtype=OWNER_DTYPE)
        ev = np.zeros((n, manifest.capture.capacity, 2), dtype="<u4")
        base = 0
        for g, size in zip(manifest.groups, sizes):
            cta, thread = slot_owners(g, size, GRID, BLOCK)
            o = np.arange(base, base + size)
            own["claims"][o], own["cta"][o], own["thread"][o], own["smid"][o] = 1, cta, thread, cta
            own["t0_lo"][o], own["t0_hi"][o] = T0 & 0xFFFFFFFF, T0 >> 32
            t1 = T0 + 100 * (o + 1)  # its exit, no earlier than its events
            own["t1_lo"][o], own["t1_hi"][o] = t1 & 0xFFFFFFFF, t1 >> 32
            mine = [s.id for s in manifest.sites if s.group == g.id]
            own["attempted"][o] = len(mine)
            for k, sid in enumerate(mine):
                ev[o, k, 0] = (T0 + (100 * (o + 1) if manifest.sites[sid].position == "exit" else 0)) & 0xFFFFFFFF
                ev[o, k, 1] = TAG_VALID | sid
            base += size
        assert n_sites <= manifest.capture.capacity
        h = build_header(manifest.groups, GRID, BLOCK, manifest.capture.capacity, 8, False,
                         manifest.source.source_id, 0)
        write_launch(out_dir, manifest.kernel, 0, h.tobytes() + own.tobytes() + ev.tobytes(), GRID, BLOCK,
                     manifest.source.source_id, env.get("ATREX_WORKLOAD", ""), {"uuid": "GPU-toy"}, "70" * 16,
                     capture="toy")


BACKEND = ToyBackend()
