"""bench/perturbation/run.py --runtime LABEL=DIR: each recording arm is also built against another
recorder's headers, so two recorders are measured in one GPU call (the build is checked here; the
measurement needs the GPU)."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess

import pytest

from conftest import REPO

_spec = importlib.util.spec_from_file_location("atrex_bench_run", REPO / "bench" / "perturbation" / "run.py")
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)


def test_runtime_argument_names_a_folder_with_the_recorder(tmp_path):
    assert run.parse_runtime(f"main={REPO / 'runtime'}") == ("main", (REPO / "runtime").resolve())
    for bad in ("main", f"=={REPO / 'runtime'}", f"a b={REPO / 'runtime'}", f"main={tmp_path}"):
        with pytest.raises(SystemExit, match="expected LABEL=DIR"):
            run.parse_runtime(bad)


def test_each_recording_arm_is_also_built_against_the_other_headers(tmp_path):
    """The other headers are what `NAME:LABEL` compiles (a header that refuses to compile fails that
    build, after the arm's own build with this tree's headers succeeded) and nothing else."""
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    (tmp_path / ".git").mkdir()
    other = tmp_path / "rt-other"
    shutil.copytree(REPO / "runtime", other)
    rec = other / "atrex_recorder.cuh"
    rec.write_text(rec.read_text() + '\n#error "rt-other headers"\n')
    with pytest.raises(subprocess.CalledProcessError) as e:
        run.build_with_manifests(tmp_path, "reduce_sumsq", {"other": other})
    assert f"-I{other}" in e.value.cmd and str(e.value.cmd[-1]).endswith("reduce_sumsq.spec.cu")
    assert (tmp_path / "reduce_sumsq.spec").is_file() and (tmp_path / "manifest-reduce_sumsq-spec:other.json").is_file()


def test_the_other_builds_are_named_by_arm_and_label(tmp_path):
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    (tmp_path / ".git").mkdir()
    bins = run.build_with_manifests(tmp_path, "reduce_sumsq", {"main": REPO / "runtime"})
    assert sorted(bins) == ["all", "all:main", "clean", "packed", "packed:main", "resident", "resident:main",
                            "resident_packed", "resident_packed:main", "spec", "spec:main"]
    assert all(b.is_file() for b in bins.values()) and bins["resident:main"].name == "reduce_sumsq.resident@main"
    assert ((tmp_path / "manifest-reduce_sumsq-resident:main.json").read_text()
            == (tmp_path / "manifest-reduce_sumsq-resident.json").read_text())


def test_the_table_gives_the_other_recorder_its_own_line(capsys):
    row = lambda arm, o: {"kernel": "reduce_sumsq", "arm": arm, "overhead": o, "ci95": [o - 0.001, o + 0.001]}  # noqa: E731
    run.print_table({"device": "d", "date": "x", "per_event": [],
                     "rows": [row("off", 0.0), row("spec", -0.1437), row("resident", 0.0238),
                              row("resident:main", 0.0346)]})
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].startswith("reduce_sumsq") and "+2.38%" in lines[-2] and "+3.46%" not in lines[-2]
    assert "-14.37% [-14.47, -14.27]" in lines[-2] and "]-" not in lines[-2]  # the widest cell apart from its neighbour
    assert lines[-1].startswith("  :main") and "+3.46%" in lines[-1] and lines[-1].count("-") >= 3


def test_per_event_figures_fold_into_the_table_as_committed():
    """Run 121's probe-cost and IKeT files fold into exactly the per-event rows of the committed
    table (results-h200.json, runs 121-124)."""
    import json

    bench = REPO / "bench" / "perturbation"
    got = run.fold_per_event(bench / "results-h200-session18-probe-cost.json", bench / "results-h200-session18-iket.json")
    assert got == json.loads((bench / "results-h200.json").read_text())["per_event"]
    assert [r["loop"] for r in got] == ["fma", "copy"] and "iket" in got[0] and "atrex_resident" in got[1]


def test_packed_probe_cost_columns_fold_under_their_table_names():
    """Run 109's probe-cost file (PACKED=1) has every packed column; each folds under its table name."""
    bench = REPO / "bench" / "perturbation"
    got = run.fold_per_event(bench / "results-h200-session15-probe-cost.json", bench / "results-h200-session15-iket.json")
    assert {"atrex_packed", "atrex_staged_packed"} <= set(got[0]) and got[0]["loop"] == "fma"
    assert {"atrex_resident", "atrex_packed", "atrex_staged_packed", "atrex_resident_packed"} <= set(got[1])
    assert got[1]["loop"] == "copy"


README_ROWS = {"gemm_mma": "| bf16 mma.sync GEMM", "reduce_sumsq": "| `reduce_sumsq`", "layernorm": "| `layernorm`",
               "cutedsl_gemm": "| CuTe DSL"}
README_ARMS = ("off", "spec", "packed", "resident", "all")  # the cost table's columns after the kernel's
README_PER_EVENT = {"fma": "| FMA loop", "copy": "| 3.9 TB/s copy"}
README_LOOP_KEYS = ("atrex", "atrex_staged", "atrex_resident", "hand_written", "floor", "iket")


def _pct(x: float) -> str:
    return f"{x * 100:+.2f}%".replace("-", "\u2212")


def test_the_readmes_cost_table_is_the_committed_json():
    """The README's cost table comes from results-h200.json: each example's off, spec, packed,
    resident and every-CTA figure with its interval in that arm's column of the example's row
    (resident and packed, the point alone, in the packed column where the row shows it), and each
    per-event figure in its column of its loop's row."""
    import json

    res = json.loads((REPO / "bench" / "perturbation" / "results-h200.json").read_text())
    lines = (REPO / "README.md").read_text().splitlines()

    def cells(prefix: str) -> list[str]:
        (line,) = [x for x in lines if x.startswith(prefix)]
        return [c.strip() for c in line.replace("**", "").split("|")[2:-1]]  # bold marks a target not met

    for r in res["rows"]:
        row, (lo, hi) = cells(README_ROWS[r["kernel"]]), r["ci95"]
        if r["arm"] == "resident_packed":
            if r["kernel"] == "reduce_sumsq":
                assert f"resident and packed: {_pct(r['overhead'])}" in row[README_ARMS.index("packed")], row
            continue
        cell = f"{_pct(r['overhead'])} [{_pct(lo)[:-1]}, {_pct(hi)[:-1]}]"
        assert row[README_ARMS.index(r["arm"])].startswith(cell), (r["kernel"], r["arm"], cell, row)
    for r in res["per_event"]:
        row = cells(README_PER_EVENT[r["loop"]])
        for key in README_LOOP_KEYS:
            if key in r:
                assert row[README_LOOP_KEYS.index(key)].startswith(_pct(r[key])), (r["loop"], key, row)
