"""check-iket on a CPU: the applied CuTe DSL examples compile with IKeT on (CUTE_DSL_ARCH=sm_90a,
the `iket` compiler option) and every site has its marker in the PTX; a site the DSL compiles out
(a `cutlass.const_expr` branch that is false: a real compile) and a marker removed from a real PTX
(synthetic, the fault planted in the text) are each refused by name."""
from __future__ import annotations

import json
import re
import shutil
import sys

import pytest

from atrex_inject import snapshot
from atrex_inject.cutedsl.check import compiled_from, iket_env, verify
from conftest import CUTEDSL_SPECS, REPO, cli

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl is not installed")


@pytest.mark.parametrize("spec_path", CUTEDSL_SPECS, ids=lambda p: p.stem)
def test_examples_have_one_marker_per_site(project, spec_path):
    spec = project / "examples" / "specs" / spec_path.name
    m = snapshot.apply(spec).manifest
    code, out = cli("check-iket", spec, "--json")
    assert code == 0, out
    r = json.loads(out)
    (entry,) = r["entries"]
    assert r["ok"] and entry["problems"] == [] and entry["entry"].startswith(f"kernel_cutlass_{m.kernel}_")
    assert sorted(s for e in entry["events"] for s in e["sites"]) == sorted(s.name for s in m.sites)
    markers = sum(e["markers"] for e in entry["events"])
    unrolled = spec_path.stem.startswith("hopper_gemm")  # its k-loop has a static trip count: unrolled 16x
    assert markers == (3 + 4 * 16 if unrolled else len(m.sites))
    assert "every site has its IKeT marker" in cli("check-iket", spec)[1]


DEBUG_SITE = '''
[[site]]
name = "debug"
anchor = { call = "cute.printf" }
position = "before"
'''


def _compiled_out(tmp_path):
    """scale_add with a debug print under `cutlass.const_expr(DEBUG)`, DEBUG False, and a site on it."""
    (tmp_path / ".git").mkdir()
    src = (REPO / "examples/cutedsl/scale_add.py").read_text()
    src = src.replace("THREADS = 256\n", "THREADS = 256\nDEBUG = False\n", 1).replace(
        "    cute.arch.sync_threads()\n",
        '    cute.arch.sync_threads()\n    if cutlass.const_expr(DEBUG):\n        cute.printf("debug")\n', 1)
    (tmp_path / "k.py").write_text(src)
    spec = (REPO / "examples/specs/scale_add_cutedsl.toml").read_text().replace(
        'source = "../cutedsl/scale_add.py"', 'source = "k.py"')
    (tmp_path / "s.toml").write_text(spec + DEBUG_SITE)
    return tmp_path / "s.toml"


def test_a_site_the_dsl_compiles_out_is_named(tmp_path):
    spec = _compiled_out(tmp_path)
    assert cli("apply", spec)[0] == 0
    code, out = cli("check-iket", spec)
    assert code == 1, out
    assert ("  MISSING: site 'debug': no IKeT marker in the PTX (event 'debug' is not declared): the DSL compiled "
            "the probe out (in a `cutlass.const_expr` branch that is false, or in code the kernel does not trace)\n"
            "a probe is not in the compiled kernel") in out
    assert "event debug (not declared): 0 marker(s) for debug  MISSING" in out
    assert out.count("MISSING") == 2  # the event's line and the problem: the other five sites have theirs


@pytest.fixture(scope="module")
def scale_add_ptx(tmp_path_factory):
    """The instrumented scale_add example's PTX, compiled with IKeT on, and its manifest."""
    import os
    import subprocess

    root = tmp_path_factory.mktemp("ptx")
    shutil.copytree(REPO / "examples", root / "examples")
    (root / ".git").mkdir()
    m = snapshot.apply(root / "examples/specs/scale_add_cutedsl.toml").manifest
    dump = root / "dump"
    dump.mkdir()
    subprocess.run([sys.executable, str(root / m.source.path)], env=iket_env(dict(os.environ), "sm_90a", dump),
                   check=True, capture_output=True)
    (ptx,) = dump.rglob("*.ptx")
    return m, ptx.name, ptx.read_text()


def test_a_marker_removed_from_the_ptx_is_refused(scale_add_ptx):
    """Synthetic fault: one of the two `iter` markers (the range's end) deleted from a real PTX."""
    m, name, ptx = scale_add_ptx
    assert verify(m, {name: ptx})["ok"]
    event = int(re.search(r"__iket_evt_decl_iter_(\d+)_attrs", ptx).group(1))
    marker = f"pmevent.mask {event};"
    assert ptx.count(marker) == 2
    cut = ptx[::-1].replace(marker[::-1], "", 1)[::-1]  # the last one: the range's end
    r = verify(m, {name: cut})
    assert not r["ok"]
    assert r["entries"][0]["problems"] == [
        f"site 'iter' and site 'iter_end': 1 IKeT marker(s) of event 'iter' (id {event}) in the PTX for 2 site(s): "
        "the DSL compiled one out"]


def test_probes_off_is_what_a_plain_compile_gives(scale_add_ptx):
    """The PTX of the same source compiled without the option: no marker, no declaration; every
    site is refused (what the check exists to catch)."""
    m, name, ptx = scale_add_ptx
    plain = re.sub(r"^.*(?:pmevent|__iket_).*\n", "", ptx, flags=re.M)
    r = verify(m, {name: plain})
    assert not r["ok"] and len(r["entries"][0]["problems"]) == len(m.iket.names)


@pytest.mark.parametrize("entry, kernel, ours", [
    # a method of a class in a package module: the DSL writes str(self), `<quack.softmax.Softmax object at 0x…>`,
    # with its dots, brackets and address dropped (quack-kernels 0.6.5 under nvidia-cutlass-dsl 4.8.1)
    ("kernel_cutlass_kernel_quacksoftmaxSoftmax_object_at__tensorptrbf16gmemalign16o32768409640961_0", "Softmax.kernel",
     True),
    ("kernel_cutlass_kernel_quacksoftmaxSoftmaxBackward_object_at__tensorptrbf16gmem_0", "Softmax.kernel", False),
    ("kernel_cutlass_kernel_quacksoftmaxSoftmaxBackward_object_at__tensorptrbf16gmem_0", "SoftmaxBackward.kernel",
     True),
    ("kernel_cutlass_kernel___main__Fwd_object_at__tensorptrf32gmem_0", "Fwd.kernel", True),  # a script's class
    ("kernel_cutlass_kernel_modOuterInner_object_at__tensorptrf32gmem_0", "Outer.Inner.kernel", True),  # nested
    ("kernel_cutlass_kernel_modInner_object_at__tensorptrf32gmem_0", "Outer.Inner.kernel", False),
    ("kernel_cutlass_scale_add_kernel_tensorptrf32gmemalign16o1_0", "scale_add_kernel", True),  # a function
    ("kernel_cutlass_scale_add_kernel2_tensorptrf32gmem_0", "scale_add_kernel", False),
])
def test_an_entry_is_the_kernel_s_by_its_name_and_its_class(entry, kernel, ours):
    assert compiled_from(entry, kernel) is ours


def test_iket_env_keeps_the_user_s_options():
    env = iket_env({"CUTE_DSL_COMPILER_OPT": "warnings{nvvm}", "CUTE_EXPERIMENTAL_DSL_COMPILER_OPT": "--iket"},
                   "sm_90a", REPO)
    assert env["CUTE_DSL_COMPILER_OPT"] == "warnings{nvvm} iket"
    assert env["CUTE_EXPERIMENTAL_DSL_COMPILER_OPT"] == "--iket"
    assert env["CUTE_DSL_ARCH"] == "sm_90a" and env["CUTE_DSL_KEEP"] == "ptx" and env["CUTE_DSL_DUMP_DIR"] == str(REPO)


def test_refusals(project):
    cute = project / "examples/specs/scale_add_cutedsl.toml"
    code, out = cli("check-iket", cute)
    assert code == 2 and "examples/cutedsl/scale_add.py is not the instrumented source of spec " \
                         "'scale_add_cutedsl'" in out and f"atrex-inject apply {cute}" in out
    cuda = project / "examples/specs/reduce_sumsq.toml"
    code, out = cli("check-iket", cuda)
    assert code == 2 and "check-iket reads CuTe DSL builds" in out and f"atrex-inject check-sass {cuda}" in out
    code, out = cli("check-sass", cute)
    assert code == 2 and f"check a CuTe DSL spec with `atrex-inject check-iket {cute}`" in out
    assert cli("apply", cute)[0] == 0
    code, out = cli("check-iket", cute, "--", sys.executable, "-c", "pass")
    assert code == 2 and "compiled no CuTe DSL kernel (no PTX was kept)" in out
    code, out = cli("check-iket", cute, "--", sys.executable, "-c", "raise SystemExit(3)")
    assert code == 2 and "exited with status 3" in out
