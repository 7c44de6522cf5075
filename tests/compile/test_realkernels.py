"""bench/realkernels: the catalog's structure, each spec applied to the fetched public source and
reverted byte for byte (where bench/realkernels/fetch.py has run: CI has no network, so there it is
skipped), a failing step recorded as a row, and the table's confusion counts."""
from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
from pathlib import Path

import pytest

from atrex_inject import snapshot
from conftest import REPO, tree_hashes

HERE = REPO / "bench" / "realkernels"
_spec = importlib.util.spec_from_file_location("atrex_realkernels_run", HERE / "run.py")
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)
fetch = sys.modules["fetch"]  # run.py imports its sibling fetch.py
CATALOG = tomllib.loads((HERE / "kernels.toml").read_text())
KERNELS = CATALOG["kernel"]


def test_the_catalog_names_pinned_packages_and_complete_rows():
    """Every package pinned by version and a 64-hex sha256 with globs to extract; every kernel row
    names a known package, its backend and runner, a harness and a spec that exist, a target, and
    a spec whose name is the row's and whose source lies in its package's extracted folder."""
    packages = CATALOG["package"]
    for name, p in packages.items():
        assert re.fullmatch(r"[0-9a-f]{64}", p["sha256"]), name
        assert p["dist"] and p["version"] and p["wheel"].endswith(".whl") and p["files"], name
    names = [k["name"] for k in KERNELS]
    assert len(names) == len(set(names)) and len(names) >= 4
    assert len({k["package"] for k in KERNELS}) >= 1
    for k in KERNELS:
        assert k["package"] in packages and set(k.get("includes", [])) <= set(packages), k["name"]
        assert k["backend"] in ("cuda", "cutedsl") and k["runner"] in ("nvcc", "python"), k["name"]
        assert (HERE / k["harness"]).is_file() and (HERE / k["spec"]).is_file(), k["name"]
        assert k["target"] in (0.01, 0.02) and k["what"], k["name"]
        spec = tomllib.loads((HERE / k["spec"]).read_text())
        assert spec["name"] == k["name"] and spec["backend"] == k["backend"], k["name"]
        assert spec["source"].startswith(f"../.src/{k['package']}/"), k["name"]


def test_fetch_extracts_only_members_matching_a_glob_component_for_component():
    files = ["flashinfer/data/include/flashinfer/*.cuh"]
    assert fetch.wanted("flashinfer/data/include/flashinfer/norm.cuh", files)
    assert not fetch.wanted("flashinfer/data/include/flashinfer/comm/big.cuh", files)
    assert not fetch.wanted("x/flashinfer/data/include/flashinfer/norm.cuh", files)


@pytest.mark.parametrize("kernel", KERNELS, ids=[k["name"] for k in KERNELS])
def test_each_spec_applies_to_the_fetched_source_and_reverts_byte_exact(kernel, tmp_path):
    """In a work folder as run.py stages it: apply (the global recorder: the choice is check-sass's
    and the GPU's business) rewrites the source, revert restores every byte of the tree."""
    missing = [p for p in [kernel["package"], *kernel.get("includes", [])] if not (fetch.SRC / p).is_dir()]
    if missing:
        pytest.skip(f"bench/realkernels/.src/{missing[0]} not fetched (python3 bench/realkernels/fetch.py)")
    spec = run.stage(kernel, CATALOG["package"], tmp_path / kernel["name"], clock=False)
    before = tree_hashes(tmp_path / kernel["name"])
    result = snapshot.apply(spec, options=snapshot.Options(recorder="global"))
    assert result.manifest.sites and tree_hashes(tmp_path / kernel["name"]) != before
    snapshot.revert(spec)
    after = {k: v for k, v in tree_hashes(tmp_path / kernel["name"]).items() if not k.startswith(".atrex/")}
    assert after == {k: v for k, v in before.items() if not k.startswith(".atrex/")}


def test_a_step_that_raises_is_a_row_and_its_dependents_are_not_run():
    r = run.Row({"name": "k", "package": "p", "backend": "cuda", "runner": "nvcc", "target": 0.02, "what": "w"})
    r.step("apply", lambda: 1 / 0)
    r.step("build_instrumented", lambda: (True, None, None), "apply")
    assert r.data["steps"]["apply"]["ok"] is False and "ZeroDivisionError" in r.data["steps"]["apply"]["reason"]
    assert r.data["steps"]["build_instrumented"] == {"ok": False, "skipped": True, "reason": "not run: apply failed"}
    r.step("stage", lambda: (False, "no sources", None))
    run.gpu_steps(r, {}, 8, Path("unused"))  # a kernel not staged has no GPU steps (and no paths to use)
    assert "measure_off" not in r.data["steps"]


def test_the_table_counts_check_sass_words_against_the_measured_recording():
    """SYNTHETIC rows: "keeps" measured +0.5% of a 2% target is within, "another kernel" measured
    -3% is beyond (either sign), "unsure" not measured; every row is listed."""
    def row(name, word, overhead):
        spec = None if overhead is None else {"overhead": overhead, "ci95": [overhead - 0.001, overhead + 0.001],
                                              "valid": True, "target": 0.02}
        return {"name": name, "what": name, "target": 0.02, "check_sass": {"verdict": word}, "spec": spec,
                "steps": {"revert": {"ok": True}}}
    result = {"date": "SYNTHETIC", "device": "none", "uuid": "-", "driver": "-", "nvcc": "-", "packages": {},
              "rows": [row("a", "keeps", 0.005), row("b", "another kernel", -0.03), row("c", "unsure", None)]}
    text = run.table(result)
    assert "| keeps | 1 | 0 | 0 |" in text and "| another kernel | 0 | 1 | 0 |" in text
    assert "| unsure | 0 | 0 | 1 |" in text
    assert "-3.00% [-3.10, -2.90] (NOT met)" in text and all(f"| {n}: " in text for n in "abc")


def test_a_spec_gets_a_clock_variant_under_its_own_name(tmp_path):
    spec = tmp_path / "k.toml"
    spec.write_text('version = 1\nname = "k"\n\n[capture]\ncapacity = 4\n')
    text = run.clock_variant(spec).read_text()
    assert 'name = "k_clock"' in text and "[capture]\nclock = true\ncapacity = 4" in text


def test_a_variant_sets_its_keys_in_capture_only_and_takes_the_row_s_name(tmp_path):
    """A key the [capture] table sets takes the variant's value; a site's key of the same name is
    left alone; a [[variant]] expands into one row a recorder, "auto" the tool's choice."""
    spec = tmp_path / "k.toml"
    spec.write_text('version = 1\nname = "k"\n\n[capture]\nwarps = 2\ncapacity = 4\n\n'
                    '[[site]]\nname = "s"\nwarps = [0]\n')
    text = run.spec_variant(spec, "k_resident", {"warps": 8, "recorder": "resident"}).read_text()
    assert text == ('version = 1\nname = "k_resident"\n\n[capture]\nrecorder = "resident"\nwarps = 8\ncapacity = 4\n'
                    '\n[[site]]\nname = "s"\nwarps = [0]\n')
    catalog = {"kernel": [{"name": "k", "what": "a kernel", "spec": "specs/k.toml"}],
               "variant": [{"of": "k", "warps": 8, "recorders": ["auto", "staged"]}]}
    rows = run.rows_of(catalog)
    assert [(r["name"], r.get("capture"), r.get("variant_of")) for r in rows] == [
        ("k", None, None), ("k_warps", {"warps": 8}, "k"), ("k_staged", {"warps": 8, "recorder": "staged"}, "k")]
    assert rows[1]["clock"] is False and rows[2]["spec"] == "specs/k.toml"


def test_the_catalog_s_variants_name_rows_it_has():
    rows = {k["name"]: k for k in KERNELS}
    variants = CATALOG.get("variant", [])
    def well_formed(v):
        if v.get("copy"):
            return True
        if "ctas_limits" in v:
            return bool(v["ctas_limits"]) and all(n > 1 for n in v["ctas_limits"])
        return v["warps"] > 0 and bool(v["recorders"])
    assert all(v["of"] in rows and well_formed(v) for v in variants)
    copies = {v["of"] for v in variants if v.get("copy")}
    assert copies == {n for n, k in rows.items() if k["backend"] == "cuda"}  # every CUDA row's copy is measured


def test_a_copy_variant_records_one_cta_with_each_site_s_stride_kept(tmp_path):
    """Every site gets `ctas = { stride = S, limit = 1 }`: one that had a selection keeps its stride
    (comment and all replaced on its line), one without is given stride 1; nothing else moves."""
    spec = tmp_path / "k.toml"
    spec.write_text('version = 1\nname = "k"\n\n[[site]]\nname = "a"\nctas = { stride = 64 }   # 1 in 64\n'
                    'anchor = { entry = true }\n\n[[site]]\nname = "b"\nanchor = { exit = true }\n')
    text = run.limited_variant(spec, "k_copy", 1).read_text()
    assert text == ('version = 1\nname = "k_copy"\n\n[[site]]\nname = "a"\nctas = { stride = 64, limit = 1 }\n'
                    'anchor = { entry = true }\n\n[[site]]\nctas = { stride = 1, limit = 1 }\nname = "b"\n'
                    'anchor = { exit = true }\n\n[capture]\n')
    rows = run.rows_of({"kernel": [{"name": "k", "what": "a kernel", "spec": "specs/k.toml"}],
                        "variant": [{"of": "k", "copy": True}, {"of": "k", "ctas_limits": [4, 16]}]})
    assert [(r["name"], r.get("cta_limit"), r.get("variant_of"), r["clock"]) for r in rows[1:]] == [
        ("k_copy", 1, "k", False), ("k_ctas4", 4, "k", False), ("k_ctas16", 16, "k", False)]
    assert "limit = 16 }" in run.limited_variant(spec, "k_ctas16", 16).read_text()


def test_a_row_runs_its_harness_as_its_runner_says(tmp_path):
    """nvcc: the build, no interpreter; python: python3 with the harness of the folder given (the
    applied one, or the copy never applied), and nothing to build."""
    row = {"name": "k", "harness": "harness/k.py", "runner": "python"}
    assert run.program(row, tmp_path, tmp_path / "b")[:2] == [sys.executable, str(tmp_path / "harness" / "k.py")]
    assert run.build(row, tmp_path, tmp_path / "s.toml", tmp_path / "b", True) == (True, None, None)
    nvcc = run.program({**row, "runner": "nvcc"}, tmp_path, tmp_path / "b")
    assert nvcc == [str(tmp_path / "b"), "--warmup", "{warmup}", "--iters", "{iterations}"]
    assert run.concrete(nvcc, "3", "5")[1:] == ["--warmup", "3", "--iters", "5"]


def test_revert_is_judged_against_the_files_as_staged(tmp_path):
    """staged.json holds every source's and harness's sha256 as copied: a file changed after that
    (a revert that left a probe) is named, and one edited in the repository meanwhile is not."""
    (tmp_path / ".src" / "p").mkdir(parents=True)
    (tmp_path / "harness").mkdir()
    (tmp_path / ".src" / "p" / "k.cuh").write_text("clean\n")
    (tmp_path / "harness" / "k.cu").write_text("main\n")
    staged = run._digests(tmp_path)
    assert set(staged) == {".src/p/k.cuh", "harness/k.cu"}
    (tmp_path / ".src" / "p" / "k.cuh").write_text("clean\n// atrex: left over\n")
    assert [p for p in staged if staged[p] != run._digests(tmp_path)[p]] == [".src/p/k.cuh"]


def test_a_wheel_whose_sha256_is_not_the_pin_is_refused_by_name(tmp_path):
    pkg = {"dist": "d", "version": "1", "wheel": "d-1-py3-none-any.whl", "sha256": "0" * 64}
    (tmp_path / pkg["wheel"]).write_bytes(b"not the pinned wheel")
    with pytest.raises(SystemExit, match=r"kernels.toml \[package.d\]: .* has sha256 [0-9a-f]{64}, the pin is 0{64}"):
        fetch.download("d", pkg, tmp_path)


def test_a_command_gets_json_before_the_program_it_runs(tmp_path, monkeypatch):
    """`capture ... -- PROG ARGS` must hand PROG its own arguments: --json goes after the command."""
    seen = []
    monkeypatch.setattr(run.subprocess, "run", lambda argv, **kw: seen.append(argv) or
                        run.subprocess.CompletedProcess(argv, 0, '{"ok": true}', ""))
    assert run._cli("capture", "--out", "d", "--", "prog", "--iters", "3", cwd=tmp_path) == (0, {"ok": True}, "")
    assert seen[0][len(run.ATREX):] == ["capture", "--json", "--out", "d", "--", "prog", "--iters", "3"]


def test_merge_keeps_each_row_s_device_and_both_files_packages():
    """A CuTe DSL call's results file names its own packages: folded into the CUDA rows' file, the
    packages of both stay (the table's package line pins every row), each row keeps its device, and
    the rows come in kernels.toml's order with the others after them."""
    env = lambda uuid, pkg: {"date": "2026-12-02", "device": "NVIDIA H200", "uuid": uuid, "driver": "580",  # noqa: E731
                             "nvcc": "13.0", "packages": {pkg: {"dist": pkg}}, "settings": {}}
    cuda = {**env("GPU-a", "flashinfer"), "rows": [{"name": "fi_rope"}, {"name": "fi_rmsnorm"}]}
    dsl = {**env("GPU-b", "quack-kernels"), "rows": [{"name": "quack_softmax"}]}
    merged = run.merge(cuda, dsl)
    assert set(merged["packages"]) == {"flashinfer", "quack-kernels"}
    assert [r["name"] for r in merged["rows"]] == ["fi_rmsnorm", "fi_rope", "quack_softmax"]
    assert [r["measured"]["uuid"] for r in merged["rows"]] == ["GPU-a", "GPU-a", "GPU-b"]
    assert run._fewer({"samples": {"A": 4, "B": 4}}) == ", 4+4 processes" and run._fewer({"samples": {"A": 8, "B": 8}}) == ""


def test_the_table_splits_a_row_s_overhead_between_its_copy_and_its_recording():
    """SYNTHETIC rows named as kernels.toml's: the copy row is listed apart, judged in a table of its
    own, and its row's overhead split: +3.00% recording, +1.00% the copy alone, +2.00% left."""
    def row(name, word, overhead):
        return {"name": name, "what": name, "target": 0.02, "check_sass": {"verdict": word},
                "spec": {"overhead": overhead, "ci95": [overhead - 0.001, overhead + 0.001], "valid": True,
                         "target": 0.02},
                "steps": {"revert": {"ok": True}}}
    result = {"date": "SYNTHETIC", "device": "none", "uuid": "-", "driver": "-", "nvcc": "-", "packages": {},
              "rows": [row("fi_rmsnorm", "unsure", 0.03), row("fi_rmsnorm_copy", "keeps", 0.01)]}
    text = run.table(result)
    assert "| fi_rmsnorm | +3.00% | +1.00% | +2.00% | ±2% |" in text
    copy_table = text.split("check-sass's word on the copy alone")[1]
    assert "| keeps | 1 | 0 | 0 |" in copy_table.split("\n\n")[1]
    assert text.index("The copy alone") < text.index("| fi_rmsnorm_copy: ")
