"""The spec keys only one backend reads (registry Entry.spec_keys, Backend.parse_keys): the cuda
backend reads its own into CudaKeys; in another backend's spec they are refused, exit 2, at their
line, saying which backend reads them (launchers and cuda_string with the words the CuTe DSL
backend refused them in when its plan checked them); the unknown-key hint still lists every key
some backend reads; and with_recorder's variant edits only the lines it must."""
from __future__ import annotations

import pytest

from atrex_inject import registry
from atrex_inject.cuda.spec_keys import CudaKeys
from atrex_inject.errors import SpecError
from atrex_inject.spec import load_spec, with_recorder
from conftest import refused

CUTE = '''version = 1
name = "t"
question = "q"
backend = "cutedsl"
source = "k.py"
kernel = "k"
intervals = ["a -> b"]

[[site]]
name = "a"
anchor = { entry = true }

[[site]]
name = "b"
anchor = { exit = true }
'''
CUDA = CUTE.replace('"cutedsl"', '"cuda"').replace('"k.py"', '"k.cu"')


@pytest.fixture
def tree(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "k.py").write_text("x = 1\n")
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    (tmp_path / "main.cu").write_text('#include "k.cu"\nint main() { k<<<1, 32>>>(); }\n')
    return tmp_path


def _with(tree, text: str, top: str = "", table: str = ""):
    spec = tree / "t.toml"
    spec.write_text(text.replace("intervals =", f"{top}\nintervals =" if top else "intervals =") + table)
    return spec


def _line(spec, needle: str) -> int:
    return next(i for i, t in enumerate(spec.read_text().split("\n"), 1) if t.startswith(needle))


def test_the_cuda_backend_reads_its_own_keys(tree):
    spec = _with(tree, CUDA, 'launchers = ["main.cu"]\ndeclared_by = "DEFINE"',
                 '\n[build]\nnvcc_flags = ["-O3"]\nunit = "main.cu"\n')
    s = load_spec(spec)
    assert s.backend_keys == CudaKeys(launchers=(tree / "main.cu",), declared_by="DEFINE", nvcc_flags=("-O3",),
                                      build_unit=tree / "main.cu")
    assert s.launcher_rels == ("main.cu",)


@pytest.mark.parametrize("top,table,key,message,hint", [
    ('launchers = ["main.cu"]', "", "launchers",
     "launchers applies to the cuda backend with a CUDA source file (.cu, .cuh, ...)",
     "remove launchers: a CuTe DSL program launches its kernel from Python"),
    ('cuda_string = "src"', "", "cuda_string",
     "cuda_string names the variable of a Python source that holds CUDA source; it applies to the cuda backend",
     "remove cuda_string"),
    ('declared_by = "DEFINE"', "", "declared_by", "declared_by applies to the cuda backend",
     "remove declared_by: the cutedsl backend does not read it"),
    ("", '\n[build]\nnvcc_flags = ["-O3"]\n', "[build]", "[build] applies to the cuda backend",
     "remove [build]: the cutedsl backend does not read it"),
])
def test_a_cuda_key_in_a_cutedsl_spec_is_refused_at_its_line(tree, top, table, key, message, hint):
    spec = _with(tree, CUTE, top, table)
    with pytest.raises(SpecError) as e:
        load_spec(spec)
    assert (e.value.message, e.value.hint, e.value.line) == (message, hint, _line(spec, key))
    out = refused(spec, f"t.toml:{_line(spec, key)}: {message}", f"hint: {hint}")  # exit 2, no traceback
    assert "Traceback" not in out


def test_a_backend_that_refuses_nothing_itself_still_has_other_backends_keys_refused(tree, monkeypatch):
    """The spec reader refuses another backend's key the spec's backend left unread."""
    monkeypatch.setitem(registry.REGISTRY, "toy", registry.Entry("toy", "toy_backend", "text", "no recorder", False))
    (tree / "k.txt").write_text("the kernel\n")
    spec = _with(tree, CUDA.replace('"cuda"', '"toy"').replace('"k.cu"', '"k.txt"'), 'launchers = ["main.cu"]')
    with pytest.raises(SpecError) as e:
        load_spec(spec)
    assert (e.value.message, e.value.hint, e.value.line) == (
        "launchers applies to the cuda backend", "remove launchers: the toy backend does not read it",
        _line(spec, "launchers"))


def test_the_unknown_key_hint_lists_every_backend_s_keys(tree):
    spec = _with(tree, CUTE, "colour = 1")
    with pytest.raises(SpecError) as e:
        load_spec(spec)
    assert e.value.message == "unknown key 'colour'" and e.value.line == _line(spec, "colour")
    assert e.value.hint == ("allowed keys here: backend, build, capture, causality, cuda_string, declared_by, expect, intervals, "
                            "kernel, launchers, name, pair, question, site, source, version")


def test_with_recorder_edits_the_name_line_and_the_capture_table_only(tree):
    text = _with(tree, CUDA, table="\n[capture]  # how much\ncapacity = 8\n").read_text()
    out = with_recorder(tree / "t.toml", "staged", 8, 32)
    assert out.name == "t_staged.toml"
    assert out.read_text() == text.replace('name = "t"', 'name = "t_staged"', 1).replace(
        "[capture]  # how much\n", '[capture]  # how much\nrecorder = "staged"\nring = 32\nwarps = 8\n')
    s = load_spec(out)
    assert (s.name, s.capture.recorder, s.capture.ring, s.capture.warps, s.capture.capacity) == (
        "t_staged", "staged", 32, 8, 8)
    bare = _with(tree, CUDA).read_text()
    out = with_recorder(tree / "t.toml", "global", packed=True)
    assert out.read_text() == bare.replace('name = "t"', 'name = "t_packed"', 1) + (
        '\n[capture]\nrecorder = "global"\npacked = true\n')
