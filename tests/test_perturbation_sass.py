"""The probes must not change the kernel they observe: with probes off, and in CTAs that record
nothing, the instrumented kernel runs its clean copy, and the compiler must have made of that copy
what it makes of the clean kernel. Checked on the SASS (cuobjdump, no GPU): per loop, the memory and
tensor instructions issued per trip (LDG, LDGSTS, HMMA, ...). The instrumented kernel must hold the
loops of its recording copy (the same spec rewritten without versioning) plus every loop of the clean
kernel: a clean copy that lost unrolling, or a rewrite that drops versioning, fails."""
from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from atrex_inject import sass
from atrex_inject.cuda.rewrite import rewrite
from atrex_inject.spec import load_spec
from conftest import nvcc_compile

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")

EXAMPLES = [("reduce_sumsq", "reduce_sumsq"), ("gemm_mma", "gemm_bf16"), ("layernorm", "layernorm_fwd")]


def _loops(tmp: Path, name: str, text: str, kernel: str, src_dir: Path) -> list[sass.Loop]:
    src = src_dir / f"{name}.cu"
    src.write_text(text)
    cubin = tmp / f"{name}.cubin"
    proc = nvcc_compile(src, cubin, ["-cubin", "-O3"])
    assert proc.returncode == 0, proc.stderr
    return sass.loops(sass.function(sass.disassemble(cubin), kernel))


def _signatures(loops: list[sass.Loop]) -> Counter:
    return Counter(l.signature for l in loops if any(l.signature))


@pytest.mark.parametrize("example,kernel", EXAMPLES)
def test_clean_copy_keeps_the_clean_loops(project, tmp_path, example, kernel):
    spec = load_spec(project / "examples" / "specs" / f"{example}.toml", project)
    clean = spec.source.read_text()
    d = spec.source.parent
    versioned = rewrite(spec, clean)
    assert versioned.backend_data["perturbation"]["versioned"], versioned.warnings
    got = _signatures(_loops(tmp_path, "inst", versioned.text, kernel, d))
    want = (_signatures(_loops(tmp_path, "clean", clean, kernel, d))
            + _signatures(_loops(tmp_path, "one_copy", rewrite(spec, clean, version_body=False).text, kernel, d)))
    short = {sig: n - got[sig] for sig, n in want.items() if got[sig] < n}
    assert not short, (f"{example}: loops missing from the instrumented kernel (signature over {sass.FAMILIES}: "
                       f"how many fewer): {short}")
    # the check has teeth: the single-copy rewrite lacks the clean kernel's loops
    single = _signatures(_loops(tmp_path, "one_copy", rewrite(spec, clean, version_body=False).text, kernel, d))
    assert any(single[sig] < got[sig] for sig in got)


def test_reduce_clean_loop_is_unrolled_four_times(project, tmp_path):
    """The figure behind the check: clean reduce_sumsq keeps four 16-byte loads in flight per trip."""
    src = project / "examples" / "cuda" / "reduce_sumsq.cu"
    loops = _loops(tmp_path, "clean", src.read_text(), "reduce_sumsq", src.parent)
    assert max(l.count("LDG") for l in loops) == 4
