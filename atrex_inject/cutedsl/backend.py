"""The CuTe DSL backend: the libcst rewriter that inserts NVIDIA IKeT calls (rewrite.py), and
capture under IKeT's run-iket, normalized to format-2 files (normalize.py). IKeT records per
warp and names its events, so this backend refuses what IKeT cannot record (check) and sizes each
capture to its fullest owner (IKeT keeps no fixed per-owner capacity)."""
from __future__ import annotations

import sys
from pathlib import Path

from ..errors import CaptureError, SpecError

LOG_NAME = "run-iket.log"


def interval_ends(spec) -> tuple[dict[str, int], dict[str, int]]:
    """(site -> the interval it starts, site -> the interval it ends): an IKeT range token belongs
    to one range, so a site starts at most one interval and ends at most one (check refuses more)."""
    starts, ends = {}, {}
    for k, iv in enumerate(spec.intervals):
        starts.setdefault(iv.start, k)
        ends.setdefault(iv.end, k)
    return starts, ends


class CuteDslBackend:
    name = "cutedsl"
    language = "Python"
    staging_refused = "IKeT buffers its own events"
    capacity_from_header = True

    def expression_problem(self, expr: str) -> str | None:
        """One Python expression (libcst), with no comment (tokenize)."""
        import io
        import tokenize

        import libcst
        try:
            libcst.parse_expression(expr)
            comments = [t for t in tokenize.generate_tokens(io.StringIO(expr).readline) if t.type == tokenize.COMMENT]
        except (libcst.ParserSyntaxError, tokenize.TokenError, SyntaxError, ValueError, RecursionError):
            return "is not a Python expression"
        return "holds a comment" if comments else None

    def check(self, spec) -> None:
        """IKeT's rules: warp-level roles, no PTX anchors, no `every` or `ctas.limit`, one range per
        interval end, warp-uniform interval ends with the same payload shape."""
        where = str(spec.path)
        seen: dict[tuple[str, str], int] = {}
        for iv in spec.intervals:
            for n, what in ((iv.start, "starts"), (iv.end, "ends")):
                if (n, what) in seen:
                    raise SpecError(f"site {n!r} {what} two intervals; an IKeT range token belongs to one range",
                                    path=where, hint="add a second site at the same place for the second interval")
                seen[n, what] = 1
        starts, ends = interval_ends(spec)
        by = {s.name: s for s in spec.sites}
        for s in spec.sites:
            if s.anchor.kind == "ptx":
                raise SpecError(f"site {s.name!r}: ptx anchors apply to the cuda backend", path=where, line=s.line)
            if s.role in ("thread", "predicate"):
                raise SpecError(f"site {s.name!r}: role {s.role.value!r} is per thread; IKeT records per warp",
                                path=where, line=s.line, hint="use lane0, warpgroup or cta")
            if s.every > 1:
                raise SpecError(f"site {s.name!r}: `every` is not supported on the cutedsl backend", path=where,
                                line=s.line)
            dense = s.role == "lane0" and s.cta_stride == 1 and not s.cta_limit and s.warps is None
            if (s.name in starts or s.name in ends) and not dense:
                raise SpecError(f"site {s.name!r} is an interval end and must be warp-uniform: role lane0, all CTAs "
                                "and warps (range tokens cannot cross a role's `if`)", path=where, line=s.line)
            if s.cta_limit:
                raise SpecError(f"site {s.name!r}: ctas.limit is not supported on the cutedsl backend", path=where,
                                line=s.line)
        for iv in spec.intervals:
            if bool(by[iv.start].payload) != bool(by[iv.end].payload):
                raise SpecError(f"interval {iv.name!r}: IKeT needs the same payload shape on both ends "
                                "(both sites with a payload, or neither)", path=where)

    def rewrite(self, plan, text: str):
        from .rewrite import rewrite
        return rewrite(plan, text)

    def capture(self, manifest, cmd: list[str], out_dir: Path, env: dict[str, str]) -> None:
        """run-iket profiles the program (two passes), its output relayed to the terminal and kept in
        CAPTURE_DIR/run-iket.log (beside iket/, which run-iket owns and refuses to reuse), with the
        warnings through which IKeT reports dropped trace data; its decoded output for the target
        kernel is normalized into the capture folder, with what that log says (iketlog.py)."""
        from ..relay import relay
        from .normalize import normalize_run
        iket_dir, log = out_dir / "iket", out_dir / LOG_NAME
        # -u: run-iket's own lines reach the terminal as printed, not when its pipe buffer fills
        argv = [sys.executable, "-u", "-m", "iket.cli.main", "-o", str(iket_dir), "--log-level", "warn", "profile",
                "--postprocess", "json", "--", *cmd]
        try:
            status = relay(argv, env, log)
        except OSError as e:
            raise CaptureError(f"cannot run run-iket or keep its log: {e.strerror}", path=e.filename or str(log),
                               hint="check that the capture folder is writable") from None
        if status != 0:
            raise CaptureError(f"run-iket exited with status {status}: the program failed, or IKeT could "
                               f"not record or decode its capture", path=str(log), hint="its output is in this log")
        normalize_run(iket_dir, manifest, out_dir, env.get("ATREX_WORKLOAD", ""), log)


BACKEND = CuteDslBackend()
