"""CUDA source inside Python (kernel.py): apply -> the file still parses -> its CUDA string,
read back by Python's own parser, compiles for sm_90a (nvcc; NVRTC where its library is
installed) -> revert byte-exact; refusals exit 2 naming the line; a hypothesis round trip over
the ways a Python literal can spell the same CUDA source."""
from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atrex_inject import hostcheck, snapshot
from atrex_inject.cuda.probes import MARK
from atrex_inject.cuda.python.rewrite import PAD, runtime_text, source_id_of_python
from atrex_inject.source_id import source_id_of
from atrex_inject.spec import load_spec
from conftest import KERNELPY_SPECS, NVCC_FLAGS, REPO, cli, refused, sha, tree_hashes

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
STUBS = REPO / "tests" / "stubs"  # a stand-in for <torch/extension.h>: torch is not installed here


def cuda_of(path: Path, variable: str | None = None) -> str:
    """The file's CUDA string as Python itself reads it: the value assigned to `variable`, or the
    one string constant holding __global__."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if variable and isinstance(node, ast.Assign) and any(getattr(t, "id", None) == variable for t in node.targets):
            found.append(node.value.value)
        elif not variable and isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and "__global__" in node.value:
            found.append(node.value)
    assert len(found) == 1, found
    return found[0]


def nvcc(text: str, tmp: Path, extra: list[str] = ()) -> subprocess.CompletedProcess:
    src = tmp / "extracted.cu"
    src.write_text(text)
    return subprocess.run(["nvcc", *NVCC_FLAGS, f"-I{snapshot.runtime_header().parent}", f"-I{STUBS}", *extra, "-c",
                           "-o", str(tmp / "extracted.o"), str(src)], capture_output=True, text=True)


@pytest.mark.parametrize("spec_path", KERNELPY_SPECS, ids=lambda p: p.stem)
def test_examples_apply_parse_compile_revert(project, spec_path):
    spec = project / "examples" / "specs" / spec_path.name
    res = snapshot.apply(spec)
    m = res.manifest
    src = project / m.source.path
    clean = (REPO / m.source.path).read_bytes()
    assert sha(src) == m.source.instrumented_sha256
    ast.parse(src.read_text())
    text = cuda_of(src, load_spec(spec).backend_keys.cuda_string)
    assert MARK in text and m.source.source_id == source_id_of(text) == source_id_of_python(src.read_text())
    lines = src.read_text().split("\n")
    for s in m.sites:
        assert f"atrex: site {s.name} (id {s.id}" in lines[s.instrumented_line - 1]
    proc = nvcc(text, project)
    assert proc.returncode == 0, proc.stderr
    assert "pragma once" not in proc.stderr
    assert snapshot.revert(spec)["reverted"] is True
    assert src.read_bytes() == clean


def test_nvrtc_example_compiles_with_nvrtc(project):
    """The instrumented NVRTC example through NVRTC itself, as the program compiles it: the
    embedded header's device half only, no include path, no warning."""
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc")
    spec = project / "examples" / "specs" / "rmsnorm_nvrtc.toml"
    m = snapshot.apply(spec).manifest
    text = cuda_of(project / m.source.path, "RMSNORM_SRC")
    try:
        err, prog = nvrtc.nvrtcCreateProgram(text.encode(), b"rmsnorm.cu", 0, [], [])
    except Exception as e:  # no libnvrtc on this machine (pip install nvidia-cuda-nvrtc)
        pytest.skip(f"NVRTC library not found: {e}")
    opts = [b"--gpu-architecture=sm_90a", b"--std=c++17"]
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    # NVRTC writes into the buffer: a bytes object would be mutated (b" " * 1 is the interpreter's
    # shared one-byte b" ", and every later b" " would read b"\0")
    log = bytearray(nvrtc.nvrtcGetProgramLogSize(prog)[1])
    nvrtc.nvrtcGetProgramLog(prog, log)
    assert int(err) == 0, log.decode()
    assert "warning" not in log.decode(), log.decode()
    size = nvrtc.nvrtcGetCUBINSize(prog)[1]
    assert size > 0


def test_check_sass_on_kernel_py(project):
    """check-sass builds a kernel.py's CUDA string: probes off run the clean kernel itself."""
    code, out = cli("check-sass", project / "examples" / "specs" / "rmsnorm_nvrtc.toml", "--json")
    assert code == 0, out
    assert '"off_identical": true' in out and '"copy": "rmsnorm_rows__atrex"' in out


KERNEL_PY = '''"""A kernel.py written by a user."""
import os

cuda_src = r"""
extern "C" __global__ void scale(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.f;
}

void launch(float* x, int n) {
  scale<<<(n + 255) / 256, 256>>>(x, n);
  undefined_name_in_the_launcher = 1;
}
"""
'''

SPEC = """version = 1
name = "{name}"
question = "q"
backend = "cuda"
source = "kernel.py"
kernel = "scale"
{extra}
[[site]]
name = "start"
anchor = {{ entry = true }}

[[site]]
name = "done"
anchor = {{ exit = true }}
"""


def _tree(tmp: Path, kernel_py: str, extra: str = "", name: str = "k") -> Path:
    (tmp / ".git").mkdir(exist_ok=True)
    (tmp / "kernel.py").write_bytes(kernel_py.encode())
    spec = tmp / f"{name}.toml"
    spec.write_text(SPEC.format(name=name, extra=extra))
    return spec


def test_diagnostics_name_the_users_lines(tmp_path):
    """#line directives after each inserted block: nvcc's error in the launcher, which follows the
    instrumented copy and the launch wrapping, names kernel.py and the line the user wrote it on."""
    spec = _tree(tmp_path, KERNEL_PY)
    snapshot.apply(spec)
    proc = nvcc(cuda_of(tmp_path / "kernel.py"), tmp_path)
    assert proc.returncode != 0
    want = KERNEL_PY.split("\n").index("  undefined_name_in_the_launcher = 1;") + 1
    assert re.search(rf'kernel\.py\({want}\): error: identifier "undefined_name_in_the_launcher" is undefined',
                     proc.stderr), proc.stderr


@pytest.mark.parametrize("kernel_py, needles", [
    (KERNEL_PY.replace('cuda_src = r"""', 'cuda_src = rf"""').replace("{", "{{").replace("}", "}}"),
     ["kernel.py:4", "f-string"]),
    (KERNEL_PY.replace('cuda_src = r"""', 'cuda_src = br"""'), ["kernel.py:4", "bytes literal"]),
    (KERNEL_PY + "src = cuda_src.format(n=1)\n", ["kernel.py:15", "cuda_src.format(...)"]),
    (KERNEL_PY + "src = cuda_src % (1,)\n", ["kernel.py:15", "cuda_src % ..."]),
    (KERNEL_PY + 'other = "__global__ void g() {}"\n', ["2 string literals holding a __global__", "line 4, line 15",
                                                        "cuda_string"]),
    (KERNEL_PY.replace("__global__", "__device__"), ["0 string literals holding a __global__"]),
])
def test_refusals(tmp_path, kernel_py, needles):
    refused(_tree(tmp_path, kernel_py), *needles)


@pytest.mark.parametrize("kernel_py, extra, needles", [
    (KERNEL_PY, 'cuda_string = "src"', ["assigns nothing to 'src'", "cuda_src"]),
    (KERNEL_PY + "cuda_src = 'x'\n", 'cuda_string = "cuda_src"', ["assigns 'cuda_src' 2 times (lines 4, 15)"]),
    (KERNEL_PY + "k2 = open('k.cu').read()\n", 'cuda_string = "k2"', ["kernel.py:15", "not a string literal"]),
    (KERNEL_PY, 'cuda_string = "not a name"', ["must be a Python variable name"]),
])
def test_cuda_string_refusals(tmp_path, kernel_py, extra, needles):
    refused(_tree(tmp_path, kernel_py, extra), *needles)


def test_anchor_candidates_name_kernel_py_lines(tmp_path):
    spec = _tree(tmp_path, KERNEL_PY)
    spec.write_text(spec.read_text() + '\n[[site]]\nname = "x"\nanchor = { stmt = "nope" }\nposition = "before"\n')
    refused(spec, "kernel.py:6: statement: int i = blockIdx.x", "kernel.py:7: statement: if (i < n)")


def test_clone_symbol(project):
    """A launch from Python names the kernel as the program loads it; recording runs the copy."""
    from dataclasses import replace

    from atrex_inject.errors import CaptureError
    from atrex_inject.cuda.python.capture import clone_symbol
    m = snapshot.apply(project / "examples" / "specs" / "rmsnorm_nvrtc.toml").manifest
    assert m.perturbation.clone == "rmsnorm_rows__atrex"
    assert clone_symbol(m, "rmsnorm_rows") == b"rmsnorm_rows__atrex"
    assert clone_symbol(m, b"_Z12rmsnorm_rowsPKfPfi") == b"_Z19rmsnorm_rows__atrexPKfPfi"
    step = replace(m, kernel="slow::step<float, 4>", perturbation=replace(m.perturbation, clone="slow::step__atrex"))
    assert clone_symbol(step, "_ZN4slow4stepIfLi4EEEvPT_") == b"_ZN4slow11step__atrexIfLi4EEEvPT_"
    assert clone_symbol(replace(m, perturbation=None), "rmsnorm_rows") == b"rmsnorm_rows"  # no copy: in place
    with pytest.raises(CaptureError, match="not the kernel 'rmsnorm_rows'"):
        clone_symbol(m, "other_kernel")


def test_cuda_string_needs_a_python_source(project):
    spec = project / "examples" / "specs" / "reduce_sumsq.toml"
    spec.write_text(spec.read_text().replace('kernel = "reduce_sumsq"', 'kernel = "reduce_sumsq"\ncuda_string = "s"'))
    refused(spec, "cuda_string", "a .py source")


def test_replace_on_the_string_is_a_warning(tmp_path):
    spec = _tree(tmp_path, KERNEL_PY + 'src = cuda_src.replace("2.f", "3.f")\n')
    m = snapshot.apply(spec).manifest
    assert any("kernel.py:15: cuda_src.replace(...) edits the CUDA text at run time" in w for w in m.warnings)
    assert m.launches and m.launches[0]["line"] == 11  # the launcher's line in kernel.py


# -- hypothesis: one CUDA source, every way a Python literal can spell it --

BODY_LINES = ['#include <cuda_runtime.h>', '// a "quoted" word and a backslash-free comment', '',
              'extern "C" __global__ void scale(float* x, int n) {', '  int i = blockIdx.x * blockDim.x + threadIdx.x;',
              "  if (i < n) x[i] *= 2.f;  // it's doubled", '}', '',
              'void launch(float* x, int n) {', '  scale<<<(n + 255) / 256, 256>>>(x, n);', '}']


def _literal(lines: list[str], style: str, pick) -> str:
    """The CUDA lines as one Python literal expression; `pick(options)` makes the choices."""
    text = "\n".join(lines) + "\n"
    if style in ('r"""', '"""', "r'''", "'''"):
        return f"{style}{text}{style.lstrip('r')}"
    if style == "one line":
        return repr(text)
    if style == "f-string":  # braces doubled, as an f-string holding C++ must
        return 'f"""' + text.replace("{", "{{").replace("}", "}}") + '"""'
    parts = []  # implicitly concatenated: one literal per line, each spelled its own way
    for line in lines:
        raw = "r'" + line + "' '\\n'"
        double = '"' + line.replace('"', '\\"') + '\\n"'
        parts.append(pick([double, repr(line + "\n")] + ([raw] if "'" not in line else [])))
    return "(" + pick(["\n    ", "  # a comment\n    ", " "]).join(parts) + ")"


@st.composite
def kernel_pys(draw):
    """(style, file text, the text before the literal, the text after it)."""
    pick = lambda options: draw(st.sampled_from(options))  # noqa: E731
    style = pick(['r"""', '"""', "r'''", "'''", "one line", "concatenated", "f-string"])
    lines = pick([[], [""]]) + BODY_LINES
    head = pick(["", "import os\n", '"""doc"""\nimport sys\n\n\n']) + pick(["cuda_src = ", "cuda_src: str = "])
    tail = "\n" + pick(["", "\nprint(len(cuda_src))\n", "\n\ndef f():\n    return cuda_src.encode()\n"])
    parts = [head, _literal(lines, style, pick), tail]
    if draw(st.booleans()):
        parts = [x.replace("\n", "\r\n") for x in parts]
    return style, "".join(parts), parts[0], parts[2]


DIRECTIVE = re.compile(r'^#line (\d+) "kernel\.py"$')


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=kernel_pys(), named=st.booleans())
def test_quoting_round_trip(tmp_path_factory, monkeypatch, case, named):
    """For each spelling (an f-string is refused, naming its line): the file parses, every byte
    outside the string's literal is unchanged, the string Python reads is the CUDA rewriter's
    output plus #line directives naming the right kernel.py lines, and revert restores the file
    byte for byte. apply's compile check is handed the text and not run: each spelling's
    instrumented string is compiled by test_each_quoting_style_compiles."""
    checked = []
    monkeypatch.setattr(hostcheck, "check", lambda spec, clean, instrumented, *a, **k: checked.append(instrumented) or [])
    from atrex_inject.cuda.rewrite import rewrite as cuda_rewrite
    from atrex_inject.plan import make_plan
    style, text, head, tail = case
    tmp = tmp_path_factory.mktemp("kp")
    # the global path named: the string's rewrite is compared with it, and no example waits on the
    # recorder choice's builds (its kernel has no __launch_bounds__, so the choice is the same)
    spec = _tree(tmp, text, ('cuda_string = "cuda_src"\n' if named else "") + '[capture]\nrecorder = "global"\n')
    if style == "f-string":
        refused(spec, f"kernel.py:{head.count(chr(10)) + 1}", "f-string")
        return
    clean_value = cuda_of(tmp / "kernel.py")
    m = snapshot.apply(spec).manifest
    src = tmp / "kernel.py"
    new = src.read_bytes().decode()
    assert checked, "apply did not check the instrumented text"
    ast.parse(new)
    assert new.startswith(head) and new.endswith(tail)
    got = cuda_of(src)
    lines = got.split("\n")
    want = cuda_rewrite(make_plan(load_spec(spec)), clean_value, runtime=runtime_text()).text
    norm = re.compile(r'__atrex_source_id\[\] = "[0-9a-f]{64}"')
    assert norm.sub("ID", "\n".join(l for l in lines if not DIRECTIVE.match(l))) == norm.sub("ID", want)
    assert m.source.source_id == source_id_of(got) and PAD not in got
    # a directive names the file line its next line comes from (exactly, for triple-quoted strings):
    # that line, after the opening quotes if it holds them, is in the next line, around insertions
    file_lines = text.replace("\r\n", "\n").split("\n")
    for i, line in enumerate(lines[:-1]):
        d = DIRECTIVE.match(line)
        if d and style.lstrip("r") in ('"""', "'''") and lines[i + 1]:
            clean = file_lines[int(d.group(1)) - 1].split(style.lstrip("r"))[-1]
            it = iter(lines[i + 1])
            assert clean and all(c in it for c in clean), (line, lines[i + 1], clean)
    snapshot.revert(spec)
    assert src.read_bytes() == text.encode()


CHARS = st.sampled_from(["a", " ", '"', "'", "\\", "\n", "\t", "\u00e9", "{"])


@st.composite
def spelled(draw):
    """(value, a Python literal spelling it): plain (repr), triple-quoted or raw triple-quoted."""
    value = "".join(draw(st.lists(CHARS, max_size=12)))
    style = draw(st.sampled_from(["repr", '"""', "'''", 'r"""', "r'''"]))
    if style == "repr":
        return value, repr(value)
    q = style.lstrip("r")
    body = value if style.startswith("r") else value.replace("\\", "\\\\").replace(q[0], "\\" + q[0])
    token = style + body + q
    try:
        ok = ast.literal_eval(token) == value
    except SyntaxError:
        ok = False
    return (value, token) if ok else (value, repr(value))


@settings(max_examples=300, deadline=None)
@given(case=spelled(), ins=st.lists(st.tuples(st.integers(0, 12), st.lists(CHARS, min_size=1, max_size=6)),
                                     max_size=4))
def test_literal_insertions_read_back_exactly(case, ins):
    """Any text inserted at any value offsets of any spelling: the tokens written read back, by
    Python's own parser, as the value with the text inserted; or the literal is refused (only a
    raw literal, where the text would follow a backslash)."""
    from atrex_inject.cuda.python.literal import Literal, LiteralError
    value, token = case
    edits = sorted({min(o, len(value)): "".join(t) for o, t in ins}.items())
    want = value
    for o, t in reversed(edits):
        want = want[:o] + t + want[o:]
    lit = Literal.parse(token)
    assert lit.value == value
    try:
        out = lit.with_insertions(edits, "\n")
    except LiteralError:
        assert lit.raw
        return
    assert ast.literal_eval(f"(\n{out}\n)") == want, out


@pytest.mark.parametrize("style", ['r"""', '"""', "one line", "concatenated"])
def test_each_quoting_style_compiles(tmp_path, style):
    """The instrumented string of each spelling compiles for sm_90a."""
    spec = _tree(tmp_path, f"cuda_src = {_literal(BODY_LINES, style, lambda options: options[0])}\n")
    snapshot.apply(spec)
    proc = nvcc(cuda_of(tmp_path / "kernel.py"), tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_fstring_refused_and_tree_untouched(tmp_path):
    spec = _tree(tmp_path, 'N = 4\ncuda_src = f"""\n__global__ void scale(float* x) {{ x[0] = {N}; }}\n"""\n')
    before = tree_hashes(tmp_path)
    code, out = cli("apply", spec)
    assert code == 2 and "kernel.py:2" in out and "f-string" in out, out
    assert tree_hashes(tmp_path) == before
