"""CUDA source inside Python (`kernel.py`): instrument its CUDA string with the CUDA route and
write the result back into the string's literal, every other byte of the file as it was.

1. locate.py finds the string and refuses f-strings and run-time templates.
2. The CUDA rewriter instruments the string's value, preceded by padding lines so the line
   numbers it reports (anchor candidates, sites) are the file's, and with the recorder header's
   text embedded instead of #included: load_inline, NVRTC and CuPy then all compile it as it is,
   with no include path to pass (docs/kernelpy.md says why this over rewriting the compile call).
3. align.py (atrex_inject/, shared with the .cu route) recovers what the rewriter inserted; a
   `#line N "kernel.py"` directive follows each inserted block, so the compiler's diagnostics
   keep naming the file's lines.
4. literal.py writes the insertions into the tokens in their own quoting; the new file must
   parse and its string must evaluate to exactly the instrumented text, or nothing is written.
"""
from __future__ import annotations

import ast
import re

from ...align import NotAnInsertion, insertions
from ...assets import asset_dir
from ...errors import AtrexError
from ...backend import Rewrite
from ...plan import Plan
from ...spec import ProbeSpec
from ...linemap import apply as apply_insertions, line_directives
from .literal import LiteralError
from .locate import CudaString, locate

PAD = "// atrex: padding\n"  # one per file line above the string; removed from the rewriter's output


_INCLUDE = re.compile(r'#include "([^"]+)"')


def runtime_text() -> str:
    """The recorder header as embedded: atrex_timeline.cuh with the runtime headers it includes
    written in place, each under a `#line` naming it (an error in one points into the real file);
    a header already written, and `#pragma once` (a warning in a main file), become comments."""
    from ..probes import HEADER
    folder, done = asset_dir("runtime"), set()

    def inline(name: str) -> list[str]:
        done.add(name)
        out = [f'#line 1 "{name}"']
        for i, line in enumerate((folder / name).read_text().splitlines(), 1):
            m = _INCLUDE.match(line)
            if line.strip() == "#pragma once":
                out.append("// (#pragma once: embedded once, here)")
            elif m and m.group(1) in done:
                out.append(f"// ({m.group(1)}: embedded above)")
            elif m and (folder / m.group(1)).is_file():
                out += inline(m.group(1)) + [f'#line {i + 1} "{name}"']
            else:
                out.append(line)
        return out

    return "\n".join(inline(HEADER)) + "\n"


def rewrite(plan: Plan, text: str) -> Rewrite:
    """The instrumented Python file for the plan's spec (cuda backend, `.py` source)."""
    from ..rewrite import rewrite as cuda_rewrite
    spec = plan.spec
    path = str(spec.source)
    cs = locate(text, spec.source_rel, path, spec.backend_keys.cuda_string)
    value = cs.value
    if PAD in value:
        raise AtrexError(f"the CUDA string holds {PAD.strip()!r}, a line atrex-inject reserves", path=path,
                         line=cs.line, hint="remove that line from the string")
    pad = cs.line_of(0) - 1
    rw = cuda_rewrite(plan, PAD * pad + value, runtime=runtime_text())
    block = PAD * pad
    if rw.text.count(PAD) != pad or block not in rw.text:
        raise AtrexError("the CUDA rewriter moved the padding lines", hint="this is a bug in atrex-inject; "
                         "please report it with the spec and the Python file")
    inst = rw.text.replace(block, "", 1)
    try:
        ins = insertions(value, inst)
    except NotAnInsertion as e:
        raise AtrexError(f"the CUDA rewriter changed clean text of {spec.source_rel}: {e}", path=path,
                         hint="this is a bug in atrex-inject; please report it with the spec and the Python file")
    ins = line_directives(ins, value, cs.line_of, spec.source_rel)
    ins, sid, final = _stamp(ins, value, rw.source_id)
    new_text = _write_back(text, cs, ins, spec, final)
    starts = [0] + [m.end() for m in re.finditer("\n", value)]

    def file_line(cuda_line: int) -> int:  # a line of the padded string -> the file's
        k = min(max(cuda_line - pad, 1), len(starts))
        return cs.line_of(starts[k - 1])

    lines = new_text.split("\n")
    for p in rw.placements:
        p.source_line = file_line(p.source_line)
        key = re.compile(rf"atrex: site {re.escape(p.site.name)} \(id {p.site_id}\b")
        p.instrumented_line = next((i for i, l in enumerate(lines, 1) if key.search(l)), 0)
    launches = [dict(l, line=file_line(l["line"])) for l in rw.launches]
    warnings = list(rw.warnings) + list(cs.warnings)
    if not launches:
        warnings.append(f"the CUDA string launches no {spec.kernel}: its launches from Python through cuda-python "
                        f"(cuda.bindings, cuda.core) or CuPy (RawKernel, RawModule) are captured when the program "
                        f"runs under `atrex-inject capture`, which hooks those APIs (docs/launches.md); a launch "
                        f"through any other API (PyCUDA, Numba, ctypes) runs the clean kernel and is not captured")
    not_captured = [dict(n, line=file_line(n["line"])) for n in rw.not_captured]
    return Rewrite(new_text, sid, rw.placements, launches, warnings, rw.backend_data, not_captured)


def _stamp(ins: list[tuple[int, str]], value: str, old_id: str) -> tuple[list[tuple[int, str]], str, str]:
    """The source identity of the final string (directives included): (insertions, id, text)."""
    from ...source_id import SOURCE_ID_PLACEHOLDER, source_id_of
    key = '__atrex_source_id[] = "{}"'
    holders = [i for i, (_, t) in enumerate(ins) if key.format(old_id) in t]
    if len(holders) != 1:
        raise AtrexError("the instrumented CUDA string does not hold one source identity",
                         hint="this is a bug in atrex-inject; please report it with the spec and the Python file")
    i = holders[0]
    zeroed = list(ins)
    zeroed[i] = (ins[i][0], ins[i][1].replace(key.format(old_id), key.format(SOURCE_ID_PLACEHOLDER), 1))
    sid = source_id_of(apply_insertions(value, zeroed))
    zeroed[i] = (ins[i][0], ins[i][1].replace(key.format(old_id), key.format(sid), 1))
    return zeroed, sid, apply_insertions(value, zeroed)


def _write_back(text: str, cs: CudaString, ins: list[tuple[int, str]], spec: ProbeSpec, final: str) -> str:
    """The Python file with the insertions written into the string's tokens, checked: it parses
    and the string (read back by Python itself) is `final`."""
    nl = "\r\n" if text.count("\r\n") * 2 > text.count("\n") else "\n"
    per_part: dict[int, list[tuple[int, str]]] = {}
    for off, t in ins:
        i, local = cs.split(off)
        per_part.setdefault(i, []).append((local, t))
    data = text.encode()
    path = str(spec.source)
    for i in sorted(per_part, reverse=True):
        part = cs.parts[i]
        try:
            token = part.literal.with_insertions(per_part[i], nl)
        except LiteralError as e:
            raise AtrexError(f"cannot write the instrumented code into the literal at line {part.line}: {e}",
                             path=path, line=part.line,
                             hint="write the CUDA source as a triple-quoted string") from None
        data = data[:part.start] + token.encode() + data[part.end:]
    new = data.decode()
    try:
        ast.parse(new)
        again = locate(new, spec.source_rel, path, spec.backend_keys.cuda_string)
        span = new.encode()[again.parts[0].start:again.parts[-1].end].decode()
        ok = ast.literal_eval(f"(\n{span}\n)") == final
    except (SyntaxError, ValueError, AtrexError) as e:
        ok, why = False, str(e)
    else:
        why = "its string does not read back as the instrumented text"
    if not ok:
        raise AtrexError(f"writing the instrumented CUDA string into {spec.source_rel} would not round-trip "
                         f"({why}); nothing was written", path=path, line=cs.line,
                         hint="this is a bug in atrex-inject; please report it with the spec and the Python file")
    return new


def source_id_of_python(text: str) -> str:
    """The source id of a Python file's instrumented CUDA string (what its captures carry); of the
    whole file when none is instrumented (which then matches no capture)."""
    from ..probes import MARK
    from ...source_id import source_id_of
    from .locate import marked_value
    value = marked_value(text, MARK)
    return source_id_of(text if value is None else value)
