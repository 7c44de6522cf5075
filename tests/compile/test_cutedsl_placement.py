"""CuTe DSL placement on real-shaped kernels (issue 13): probes under a kernel's own imports of the names
they use, `Class.kernel` methods, and loop-end probes before a one-line `continue`/`break`. Each case
asserts the exact instrumented text or the exact refusal (exit 2, every file unchanged); apply then
revert is byte-exact."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import cli, refused
from test_cutedsl import compile_check

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl is not installed")

HEAD = "import cutlass\nimport cutlass.cute as cute\n"


def make_project(tmp_path: Path, source: str, sites: str, kernel: str = "k", intervals: str = "") -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "k.py").write_text(source)
    spec = tmp_path / "s.toml"
    spec.write_text(f'version = 1\nname = "s"\nquestion = "q"\nbackend = "cutedsl"\nsource = "k.py"\n'
                    f'kernel = "{kernel}"\n{intervals}\n{sites}')
    return spec


def site(name: str, anchor: str, position: str = "before", extra: str = "") -> str:
    return f'[[site]]\nname = "{name}"\nanchor = {{ {anchor} }}\nposition = "{position}"\n{extra}'


def applied(spec: Path, compile_it: bool = False) -> str:
    """Apply (it must succeed), optionally compile for sm_90a, revert byte-exact; the instrumented text
    below the header line."""
    src = spec.parent / "k.py"
    clean = src.read_bytes()
    code, out = cli("apply", spec)
    assert code == 0, out
    text = src.read_text()
    if compile_it:  # IKeT's metadata in the cubin lists every mark inserted
        assert compile_check(src, spec.parent / "dump")["names"] == sorted(re.findall(r'\.mark\("(\w+)"', text))
    code, out = cli("revert", spec)
    assert code == 0 and src.read_bytes() == clean, out
    return text.split("\n", 1)[1]


# ---- 1. a kernel that imports a name the probes use ----
LOCAL_IKET = HEAD + '''

@cute.kernel
def k(x: cute.Tensor):
    from cutlass.cute.experimental import iket
    tidx, _, _ = cute.arch.thread_idx()
    x[tidx] = x[tidx] + 1.0


@cute.jit
def run(x: cute.Tensor):
    k(x).launch(grid=(1, 1, 1), block=(64, 1, 1))


def compile_only():
    from cutlass.cute.runtime import make_fake_compact_tensor
    return cute.compile(run, make_fake_compact_tensor(cutlass.Float32, (64,), assumed_align=16))
'''


def test_a_kernel_importing_iket_itself_gets_probes_that_compile(tmp_path):
    """A local `iket` is a local for the whole body: probes above it read an unbound local unless they
    use a name of their own."""
    spec = make_project(tmp_path, LOCAL_IKET, site("a", "entry = true", "entry")
                        + site("b", 'stmt = "x[tidx] ="', "after", 'role = "cta"\n'))
    text = applied(spec, compile_it=True)
    assert text.startswith(HEAD + "from cutlass.cute.experimental import iket as _atrex_iket\n")
    assert text.split("@cute.kernel\n")[1].split("\n\n\n")[0] == '''def k(x: cute.Tensor):
    _atrex_iket.mark("a")  # atrex: site a (id 0, entry)
    from cutlass.cute.experimental import iket
    tidx, _, _ = cute.arch.thread_idx()
    x[tidx] = x[tidx] + 1.0
    if cute.arch.make_warp_uniform(cute.arch.warp_idx()) == 0:  # atrex: who records site b
        _atrex_iket.mark("b")  # atrex: site b (id 1, after)'''


@pytest.mark.parametrize("source", [
    HEAD + "\n\n@cute.kernel\ndef k(x: cute.Tensor):\n    import cutlass.cute as cute\n    x[0] = 1.0\n",
    HEAD.replace("cute as cute", "cute as ct") + "cute = None\n\n\n@ct.kernel\ndef k(x: ct.Tensor):\n    x[0] = 1.0\n",
], ids=["local-import", "module-binds-another-cute"])
def test_a_cute_the_probes_cannot_rely_on_is_imported_under_a_name_of_their_own(tmp_path, source):
    spec = make_project(tmp_path, source, site("a", "entry = true", "entry", 'role = "cta"\n'))
    text = applied(spec)
    assert "from cutlass import cute as _atrex_cute\n" in text
    assert ('    if _atrex_cute.arch.make_warp_uniform(_atrex_cute.arch.warp_idx()) == 0:  # atrex: who records '
            'site a\n        iket.mark("a")  # atrex: site a (id 0, entry)\n') in text


# ---- 2. `Class.kernel` ----
TWO_CLASSES = HEAD + '''

class RMSNormForward:
    @cute.kernel
    def kernel(self, x: cute.Tensor):
        x[0] = 1.0


class RMSNormBackward:
    @cute.kernel
    def kernel(self, x: cute.Tensor):
        x[0] = 2.0
'''


def test_a_class_qualified_kernel_selects_that_class_method(tmp_path):
    spec = make_project(tmp_path, TWO_CLASSES, site("a", 'stmt = "x[0]"', "after"), kernel="RMSNormBackward.kernel")
    text = applied(spec)
    assert text.count("iket.mark") == 1
    assert '''        x[0] = 2.0
        iket.mark("a")  # atrex: site a (id 0, after)
''' in text


def test_a_bare_kernel_name_matching_two_methods_is_refused_with_their_classes(tmp_path):
    spec = make_project(tmp_path, TWO_CLASSES, site("a", "entry = true", "entry"), kernel="kernel")
    refused(spec, "kernel 'kernel' names 2 @cute.kernel definitions", "RMSNormForward.kernel, RMSNormBackward.kernel")


def test_normalize_finds_a_class_qualified_kernel_by_its_function_name():
    from atrex_inject.cutedsl.iketlog import iket_kernel_name
    assert iket_kernel_name("RMSNormBackward.kernel").search("kernel_cutlass_kernel_tensorptrf32_0")


# ---- 3. loop-end before a one-line continue/break ----
LOOP = HEAD + '''

@cute.kernel
def k(x: cute.Tensor, n: cutlass.Int32):
    for i in cutlass.range(0, n, 1):
        x[i] = x[i] + 1.0
        if i > 3: continue  # skip
        x[i] = 2.0; break
    for j in range(4): x[j] = 0.0; continue
    for m in range(2): x[m] = 1.0  # one line
    if n > 2: return
'''


def test_loop_end_goes_before_a_one_line_continue_or_break_and_exit_before_a_one_line_return(tmp_path):
    """Also after the statements ahead of it on its line, and a one-line body keeps its comment."""
    spec = make_project(tmp_path, LOOP, site("e", 'loop = "cutlass.range"', "loop-end")
                        + site("f", 'loop = "range(4)"', "loop-end") + site("m", 'loop = "range(2)"', "loop-end")
                        + site("x", "exit = true", "exit"))
    assert applied(spec).split("@cute.kernel\n")[1] == '''def k(x: cute.Tensor, n: cutlass.Int32):
    for i in cutlass.range(0, n, 1):
        x[i] = x[i] + 1.0
        if i > 3:
            iket.mark("e")  # atrex: site e (id 0, loop-end)
            continue  # skip
        x[i] = 2.0
        iket.mark("e")  # atrex: site e (id 0, loop-end)
        break
    for j in range(4):
        x[j] = 0.0
        iket.mark("f")  # atrex: site f (id 1, loop-end)
        continue
    for m in range(2):
        x[m] = 1.0  # one line
        iket.mark("m")  # atrex: site m (id 2, loop-end)
    if n > 2:
        iket.mark("x")  # atrex: site x (id 3, exit)
        return
    iket.mark("x")  # atrex: site x (id 3, exit)
'''
