"""The typed manifest (manifest.py): what apply writes reads back and writes out byte for byte;
every field a reader needs is checked when the file is read, and a bad one is refused by name
(exit 2 through the CLI), before decode or any check runs."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from atrex_inject import snapshot
from atrex_inject.errors import SnapshotError
from atrex_inject.layout import Role
from atrex_inject.manifest import Manifest, load
from atrex_inject.spec import MAX_INTERVALS
from conftest import EXAMPLE_SPECS, cli

FIX = Path(__file__).parent.parent / "fixtures" / "h200"
CURRENT = ["gemm_mma", "gemm_mma_staged", "layernorm", "reduce_sumsq"]  # fixtures in today's format


@pytest.mark.parametrize("name", CURRENT)
def test_fixture_manifests_round_trip_byte_for_byte(name):
    p = FIX / name / "manifest.json"
    assert load(p).dumps() == p.read_text()


@pytest.mark.parametrize("spec_path", EXAMPLE_SPECS, ids=lambda p: p.stem)
def test_what_apply_writes_is_what_the_type_writes(project, spec_path):
    res = snapshot.apply(project / "examples" / "specs" / spec_path.name)
    text = (res.workspace / "manifest.json").read_text()
    assert res.manifest.dumps() == text == Manifest.from_json(json.loads(text), "test").dumps()
    assert res.manifest == load(res.workspace / "manifest.json")


def test_lookups():
    """The parsed manifest's lookups agree with the file's own JSON."""
    raw = json.loads((FIX / "gemm_mma" / "manifest.json").read_text())
    m = load(FIX / "gemm_mma" / "manifest.json")
    for iv, r in zip(m.intervals, raw["intervals"], strict=True):
        assert (iv.name, m.sites[iv.start_id].name, m.sites[iv.end_id].name) == (r["name"], r["start"], r["end"])
    assert m.intervals[0].name.startswith("iter -> ")
    assert m.site("tile_start").id == m.site_ids["tile_start"] == 0
    assert m.site_group == tuple(s.group for s in m.sites)
    assert {m.sites[i].name for i in m.endpoint_ids} == {n for r in raw["intervals"] for n in (r["start"], r["end"])}
    assert {m.sites[i].name for i in m.endpoint_ids} >= {"iter", "stage_ready", "mma_done", "tile_start", "epilogue"}
    assert [g.role for g in m.groups] == [Role.LANE0, Role.CTA] and m.role_of_group(1) is Role.CTA


def _drop(path: tuple):
    def edit(m):
        for k in path[:-1]:
            m = m[k]
        del m[path[-1]]
    return edit


def _set(path: tuple, value):
    def edit(m):
        for k in path[:-1]:
            m = m[k]
        m[path[-1]] = value
    return edit


@pytest.mark.parametrize("edit,msg", [
    (_drop(("source", "source_id")), "field source.source_id is missing or not a str"),
    (_drop(("sites", 2, "group")), "field sites[2].group is missing or not a int"),
    (_set(("groups", 0, "role_code"), 3), "groups[0].role_code = 3 is not the code of role 'lane0'"),
    (_set(("sites", 0, "role"), "leader"), "sites[0].role = 'leader' is not a role"),
    (_set(("capture", "clock"), "yes"), "field capture.clock is missing or not a bool"),
    (_set(("intervals", 0, "end"), "nowhere"), "names unknown site 'nowhere'"),
    (_set(("backend",), "opencl"), "backend 'opencl' is not one of cuda, cutedsl"),
    (_set(("version",), 2), "manifest version 2; this tool reads version 1"),
    (_set(("perturbation", "strip_mined", 0, "sites"), [1]), "field perturbation.strip_mined[0].sites must list"),
    (_set(("intervals",), [{"name": f"i{k}", "start": "iter", "end": "stage_ready"} for k in range(MAX_INTERVALS + 1)]),
     f"{MAX_INTERVALS + 1} intervals; at most {MAX_INTERVALS}"),
])
def test_a_bad_field_is_refused_by_name_through_every_reader(tmp_path, edit, msg):
    cap = tmp_path / "cap"
    shutil.copytree(FIX / "gemm_mma", cap)
    m = json.loads((cap / "manifest.json").read_text())
    edit(m)
    (cap / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(SnapshotError, match="manifest .*manifest.json: ") as e:
        load(cap / "manifest.json")
    assert msg in e.value.message
    for command in ("validate", "summary", "decode"):
        code, out = cli(command, cap, "--json")
        assert code == 2 and msg in json.loads(out)["error"], (command, out)
