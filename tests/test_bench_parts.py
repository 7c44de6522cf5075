"""bench/perturbation/parts.py cuts an example's spec into parts (the GPU measures each): the cut
must give specs that load, with exactly the part's sites, for both examples it serves and for
resident rings too."""
from __future__ import annotations

import importlib.util

import pytest

from atrex_inject.spec import load_spec, staged_copy
from conftest import REPO

# loaded from its file, not through sys.path: bench/perturbation/iket.py would shadow the iket package
_spec = importlib.util.spec_from_file_location("atrex_bench_parts", REPO / "bench" / "perturbation" / "parts.py")
parts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(parts)

SITES = {
    "reduce_sumsq": {"full": ["start", "iter_begin", "iter_end", "stream_done", "tail_done", "publish", "finish"],
                     "entry": ["start"], "loop": ["iter_begin", "iter_end"],
                     "noloop": ["start", "stream_done", "tail_done", "publish", "finish"]},
    "layernorm": {"full": ["row_start", "stats_group", "stats_group_end", "stats_done", "reduced", "row_end"],
                  "entry": ["row_start"], "loop": ["stats_group", "stats_group_end"],
                  "noloop": ["row_start", "stats_done", "reduced", "row_end"]},
}


@pytest.mark.parametrize("example", sorted(SITES))
@pytest.mark.parametrize("part", list(parts.PARTS))
def test_part_specs_load_with_the_parts_sites(project, example, part):
    spec = project / "examples" / "specs" / f"{example}.toml"
    cut = parts.part_spec(spec, part)
    s = load_spec(cut, project)
    assert [x.name for x in s.sites] == SITES[example][part]
    assert s.name == f"{load_spec(spec, project).name}_{part}" and not s.intervals
    assert load_spec(staged_copy(cut, None, 8), project).capture.staging_resident


@pytest.mark.parametrize("variant,field,value", [("stride32", "stride", 32), ("every8", "every", 8)])
def test_density_variants_change_that_key_of_every_site_alone(project, variant, field, value):
    spec = project / "examples" / "specs" / "reduce_sumsq.toml"
    full, s = load_spec(spec, project), load_spec(parts.variant_spec(spec, variant), project)
    assert s.name == f"{full.name}_{variant}" and s.intervals == full.intervals
    assert [x.name for x in s.sites] == SITES["reduce_sumsq"]["full"]
    for a, b in zip(full.sites, s.sites):
        if field == "stride":
            assert (a.cta_stride, b.cta_stride) == (8, value) and a.every == b.every
        else:
            assert b.every == (value if a.every == 4 else a.every) and a.cta_stride == b.cta_stride


def test_an_unknown_variant_is_refused():
    with pytest.raises(SystemExit, match="strideN, everyN"):
        parts.variant_spec(REPO / "examples" / "specs" / "reduce_sumsq.toml", "stride")
