"""The CUDA C++ backend: the Lark-grammar rewriter (rewrite.py) and the header-only recorder
(runtime/atrex_timeline.cuh), whose host session writes the capture files itself. A `.py` source
holds its CUDA source in a string (python/, docs/kernelpy.md)."""
from __future__ import annotations

import subprocess
from pathlib import Path

from ..backend import check_expressions, check_own_buffers
from ..errors import CaptureError, SpecError
from . import spec_keys

CPP_NEVER = {"PREPROC", "IF0", "LAUNCH_OPEN", "LAUNCH_CLOSE"}
CPP_TOP_LEVEL_ONLY = {"SEMI", "LBRACE", "RBRACE", "FOR", "WHILE", "DO", "IF", "ELSE", "SWITCH", "RETURN", "BREAK",
                      "CONTINUE", "CASE", "DEFAULT", "ASM", "ASM_GNU", "ASM_ALT", "GOTO"}
CPP_BAD_PUNCT = {"#", "@", "`", "\\"}
CLOSE = {"RPAR": "LPAR", "RSQB": "LSQB", "RBRACE": "LBRACE"}


_CUDA_STRING = ('cuda_string names the variable of a Python source that holds CUDA source; it needs backend = "cuda" '
                'and a .py source')
_CUDA_STRING_HINT = "remove cuda_string, or point source at the .py file"


class CudaBackend:
    name = "cuda"

    def parse_keys(self, table, source: Path) -> spec_keys.CudaKeys:
        """declared_by, launchers, cuda_string and [build] (cuda/spec_keys.py)."""
        return spec_keys.parse(table, source)

    def expression_problem(self, expr: str) -> str | None:
        """C++ lexed with the CUDA grammar's own terminals (comments and literals are single
        tokens there): no statement, directive, comment or unbalanced bracket."""
        from lark.exceptions import LarkError

        from .source import cuda_parser
        try:
            toks = [t for t in cuda_parser().lex(expr) if t.type != "VSEMI"]
        except LarkError:
            return "is not C++ the lexer can read"
        skeleton = list(expr)  # the text with literals blanked: what remains of `//`, `/*`, `*/` is a comment
        stack: list[str] = []
        for t in toks:
            if t.type in ("STRING", "CHAR", "RAWSTRING"):
                skeleton[t.start_pos:t.end_pos] = " " * (t.end_pos - t.start_pos)
            elif t.type in CPP_NEVER or (t.type == "PUNCT" and t.value in CPP_BAD_PUNCT):
                return f"holds {t.value.strip()!r}, which is not part of a C++ expression"
            elif t.type in ("LPAR", "LSQB", "LBRACE") and (stack or t.type != "LBRACE"):
                stack.append(t.type)
            elif t.type in CLOSE and stack:
                if stack.pop() != CLOSE[t.type]:
                    return f"has an unbalanced {t.value!r}"
            elif t.type in CLOSE or (t.type in CPP_TOP_LEVEL_ONLY and not stack):
                return f"holds {t.value!r} outside parentheses: it must be one expression, not statements"
        if stack:
            return "has an unclosed bracket"
        text = "".join(skeleton)
        if "//" in text or "/*" in text or "*/" in text:
            return "holds a comment"
        return None

    def check(self, spec) -> None:
        """C++ expressions, a kernel name that reads as a (qualified) C++ name with optional template
        arguments (cuda/names.py), launchers beside a CUDA source and a cuda_string in a Python one.
        Every role, anchor kind and density applies (anchors are resolved, and refused, by the
        rewriter)."""
        from .names import KernelName
        where = str(spec.path)
        check_expressions(spec, self)
        check_own_buffers(spec, self)
        try:
            KernelName.parse(spec.kernel)
        except ValueError as e:
            raise SpecError(f"kernel {spec.kernel!r} {e}", path=where, line=spec.line_of("kernel"),
                            hint='e.g. kernel = "step", "slow::step" or "gemm<128, 64>"') from None
        if spec.launchers and spec.source.suffix == ".py":
            raise SpecError("launchers applies to the cuda backend with a CUDA source file (.cu, .cuh, ...)",
                            path=where, line=spec.line_of("launchers"),
                            hint="remove launchers: a kernel.py launches its kernel from Python (docs/kernelpy.md)")
        if spec.backend_keys.cuda_string is not None and spec.source.suffix != ".py":
            raise SpecError(_CUDA_STRING, path=where, line=spec.line_of("cuda_string"), hint=_CUDA_STRING_HINT)

    def rewrite(self, plan, text: str, launchers: dict[str, str] | None = None):
        if plan.spec.source.suffix == ".py":  # the spec refuses launchers there
            from .python.rewrite import rewrite as rewrite_python
            return rewrite_python(plan, text)
        from .rewrite import rewrite
        return rewrite(plan, text, launchers=launchers)

    def capture(self, manifest, cmd: list[str], out_dir: Path, env: dict[str, str]) -> None:
        """The instrumented program's recorder writes the files into ATREX_TIMELINE_OUT; its Python
        processes get the launch hooks (python/hooks/) for kernels launched through cuda-python, cuda.core
        or CuPy."""
        from .python.hooks import child_env
        proc = subprocess.run(cmd, env={**child_env(env), "ATREX_TIMELINE_OUT": str(out_dir)})
        if proc.returncode != 0:
            raise CaptureError(f"the program exited with status {proc.returncode} under capture")


BACKEND = CudaBackend()
