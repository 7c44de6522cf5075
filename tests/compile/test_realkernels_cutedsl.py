"""bench/realkernels' CuTe DSL rows (cutedsl.toml, cutedsl_rows.py): every row names its runner and
a spec on a file its pinned package's extraction holds; a bad rows file exits 2 naming the field.
With the package fetched (`python3 bench/realkernels/cutedsl_rows.py fetch`), each spec applies to
the real source and reverts byte-exact, and where torch imports (a CPU build serves) the
instrumented kernel compiles with IKeT on for sm_90a with every site's marker (check-iket)."""
from __future__ import annotations

import importlib.util
import shutil
import sys
import tomllib

import pytest

from conftest import REPO, cli

_spec = importlib.util.spec_from_file_location("atrex_cutedsl_rows", REPO / "bench" / "realkernels" / "cutedsl_rows.py")
rows = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)  # its dataclasses look it up there
_spec.loader.exec_module(rows)
PACKAGES, KERNELS = rows.load()


def test_every_row_names_its_runner_and_a_spec_on_an_extracted_file():
    assert len(KERNELS) >= 3 and len({k.name for k in KERNELS}) == len(KERNELS)
    for k in KERNELS:
        spec = tomllib.loads(k.spec.read_text())
        assert k.harness.is_file() and spec["backend"] == "cutedsl" and spec["name"] == k.name
        source = (k.spec.parent / spec["source"]).resolve()
        assert source.is_relative_to(rows.SRC / k.package.name), (k.name, source)
        assert rows.wanted(source.relative_to(rows.SRC / k.package.name).as_posix(), k.package.files), (k.name, source)
        assert k.target in (0.01, 0.02)


def test_a_bad_rows_file_exits_2_naming_the_field(tmp_path, capsys):
    good = (rows.ROWS).read_text()
    bad = tmp_path / "rows.toml"
    bad.write_text(good.replace("target = 0.02\n", "", 1))
    with pytest.raises(SystemExit) as e:
        rows.load(bad)
    assert e.value.code == 2 and "[[kernel]] number 1: field 'target' must be a number (got None)" in capsys.readouterr().err
    bad.write_text(good.replace('package = "quack-kernels"', 'package = "quack"', 1))
    with pytest.raises(SystemExit) as e:
        rows.load(bad)
    assert e.value.code == 2 and "package 'quack' has no [package.quack] table" in capsys.readouterr().err


@pytest.mark.parametrize("k", KERNELS, ids=lambda k: k.name)
def test_each_spec_applies_to_the_fetched_source_and_reverts_byte_exact(tmp_path, k):
    if not (rows.SRC / k.package.name).is_dir():
        pytest.skip(f"{k.package.name} not fetched: python3 bench/realkernels/cutedsl_rows.py fetch")
    pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl is not installed")
    bench = tmp_path / "bench" / "realkernels"
    for part in ("harness", "specs", ".src"):  # .src: the row's package, and quack, which flash-attn-4 imports
        shutil.copytree(rows.HERE / part, bench / part, ignore=shutil.ignore_patterns("__pycache__", "wheels"))
    shutil.copytree(REPO / "examples" / "cutedsl", tmp_path / "examples" / "cutedsl")
    (tmp_path / ".git").mkdir()
    spec = bench / "specs" / k.spec.name
    code, out = cli("apply", spec)
    assert code == 0, out
    source = bench / ".src" / k.package.name / tomllib.loads(spec.read_text())["source"].split(f"{k.package.name}/")[1]
    text = source.read_text()
    assert text.count("# atrex: site ") >= len(tomllib.loads(spec.read_text())["site"])
    assert "from cutlass.cute.experimental import iket" in text
    if importlib.util.find_spec("torch") is not None:  # quack imports torch
        code, out = cli("check-iket", spec, "--", sys.executable, str(bench / k.harness.relative_to(rows.HERE)),
                        "--compile-only")
        assert code == 0 and "every site has its IKeT marker" in out, out
    assert cli("revert", spec)[0] == 0
    assert source.read_bytes() == (rows.SRC / source.relative_to(bench / ".src")).read_bytes()
