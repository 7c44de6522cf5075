"""The CuTe DSL backend: the libcst rewriter that inserts NVIDIA IKeT calls (rewrite.py), and
capture under IKeT's run-iket, normalized to format-2 files (normalize.py). IKeT records per
warp and names its events, so this backend refuses what IKeT cannot record (check) and sizes each
capture to its fullest owner (IKeT keeps no fixed per-owner capacity).

What records is IKeT's to select, outside the kernel: every CTA, or one cluster of the launch
(`run-iket profile --enabled-cluster-config`; a kernel launched without clusters is a grid of 1x1x1
clusters, so one CTA). A spec asks for the second with `ctas = { limit = 1 }` on every site, and
capture passes IKeT the target kernel's cluster 0,0,0: its first CTA (runiket.py)."""
from __future__ import annotations

from pathlib import Path

from ..backend import check_expressions, check_own_buffers
from ..errors import CaptureError, SpecError
from ..spec import BackendKeys
from .runiket import FIRST_CTA, LOG_NAME, prepare_run_iket


class CuteDslBackend:
    name = "cutedsl"

    def parse_keys(self, table, source: Path) -> BackendKeys:
        """None of its own. The cuda backend's `launchers` and `cuda_string` are refused here, saying
        why a CuTe DSL program has no use for them; the spec reader refuses its other keys."""
        if "launchers" in table.data:
            raise table.error("launchers applies to the cuda backend with a CUDA source file (.cu, .cuh, ...)",
                              "launchers", hint="remove launchers: a CuTe DSL program launches its kernel from Python")
        if "cuda_string" in table.data:
            raise table.error("cuda_string names the variable of a Python source that holds CUDA source; it applies "
                              "to the cuda backend", "cuda_string", hint="remove cuda_string")
        return BackendKeys()

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
        """IKeT's rules: warp-level roles, no PTX anchors, no `every`, what IKeT can select of the CTAs
        (check_selection), one range per interval end, warp-uniform interval ends with the same
        payload shape."""
        from .ranges import interval_ends
        where = str(spec.path)
        check_expressions(spec, self)
        check_selection(spec)
        if spec.kernel_occurrence is not None:
            raise SpecError("kernel.occurrence applies to the cuda backend", path=where,
                            line=spec.line_of("kernel", "occurrence"),
                            hint="name the @cute.kernel by its qualified name (Class.kernel) instead")
        if spec.capture.clock:
            raise SpecError("capture.clock records %clock with each event; IKeT's events carry its timer only",
                            path=where, line=spec.line_of("capture", "clock"),
                            hint="drop `clock` (the CuTe DSL route times intervals by the global timer)")
        check_own_buffers(spec, self)
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
            if s.role.per_thread:
                raise SpecError(f"site {s.name!r}: role {s.role.value!r} is per thread; IKeT records per warp", path=where,
                                line=s.line, hint="use lane0, warpgroup or cta")
            if s.every > 1:
                raise SpecError(f"site {s.name!r}: `every` is not supported on the cutedsl backend", path=where,
                                line=s.line)
            # IKeT's selection of the first CTA is made outside the kernel: no `if` around the probe
            dense = s.role == "lane0" and s.cta_stride == 1 and s.warps is None
            if (s.name in starts or s.name in ends) and not dense:
                raise SpecError(f"site {s.name!r} is an interval end and must be warp-uniform: role lane0, all warps, "
                                f"and every CTA or IKeT's selection of the first ({FIRST_CTA}) (range tokens cannot "
                                "cross a role's `if`)", path=where, line=s.line)
        for iv in spec.intervals:
            if bool(by[iv.start].payload) != bool(by[iv.end].payload):
                raise SpecError(f"interval {iv.name!r}: IKeT needs the same payload shape on both ends "
                                "(both sites with a payload, or neither)", path=where)

    def rewrite(self, plan, text: str):
        from .rewrite import rewrite
        return rewrite(plan, text)

    def capture(self, manifest, cmd: list[str], out_dir: Path, env: dict[str, str]) -> None:
        """run-iket profiles the program (two passes; prepare_run_iket, with IKeT's selection when the
        spec makes one), its output relayed to the terminal and kept in CAPTURE_DIR/run-iket.log
        (beside iket/, which run-iket owns and refuses to reuse), with the warnings through which IKeT
        reports dropped trace data; its decoded output for the target kernel is normalized into the
        capture folder, with what that log says (iketlog.py)."""
        from ..relay import relay
        from .normalize import normalize_run
        iket_dir, log = out_dir / "iket", out_dir / LOG_NAME
        try:
            status = relay(prepare_run_iket(manifest, out_dir, cmd), env, log)
        except OSError as e:
            raise CaptureError(f"cannot run run-iket or write its files: {e.strerror}", path=e.filename or str(log),
                               hint="check that the capture folder is writable") from None
        if status != 0:
            raise CaptureError(f"run-iket exited with status {status}: the program failed, or IKeT could "
                               f"not record or decode its capture", path=str(log), hint="its output is in this log")
        normalize_run(iket_dir, manifest, out_dir, env.get("ATREX_WORKLOAD", ""), log)


def check_selection(spec) -> None:
    """IKeT selects what records per kernel, outside it: every CTA, or the one cluster it is told
    (the first CTA of a kernel launched without clusters). So `ctas.limit` is 1 on every site or on
    none, with no stride beside it; other densities are refused, saying what IKeT can select."""
    where = str(spec.path)
    limited = [s for s in spec.sites if s.cta_limit]
    can = (f"IKeT records every CTA, or one (the first: {FIRST_CTA} on every site), chosen per kernel outside it "
           "(run-iket's cluster selection)")
    for s in limited:
        if s.cta_limit != 1 or s.cta_stride != 1:
            raise SpecError(f"site {s.name!r}: ctas = {{ stride = {s.cta_stride}, limit = {s.cta_limit} }} is not a "
                            f"selection IKeT can make: {can}", path=where, line=s.line,
                            hint=f"write {FIRST_CTA} on every site, or leave ctas.limit out (every CTA records)")
    if limited and len(limited) < len(spec.sites):
        other = next(s for s in spec.sites if not s.cta_limit)
        raise SpecError(f"site {other.name!r} records every CTA while site {limited[0].name!r} records the first only "
                        f"({FIRST_CTA}): IKeT selects what records per kernel, not per site", path=where,
                        line=other.line, hint=f"write {FIRST_CTA} on every site, or on none")


BACKEND = CuteDslBackend()
