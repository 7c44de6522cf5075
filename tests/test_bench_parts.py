"""bench/perturbation/parts.py cuts an example's spec into parts (the GPU measures each): the cut
must give specs that load, with exactly the part's sites, for both examples it serves and for
resident rings too."""
from __future__ import annotations

import importlib.util
import re

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
    assert load_spec(staged_copy(cut, None, 8), project).capture.recorder == "resident"


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


@pytest.mark.parametrize("variant,msg", [
    ("stride", "is none of full, entry, loop, noloop, strideN, everyN (N >= 1)"),
    ("stride0", "is none of"),
    ("every2", "every2: below the spec's every, its events would overflow [capture] capacity"),
])
def test_a_bad_variant_is_refused(project, variant, msg):
    with pytest.raises(ValueError, match=re.escape(msg)):
        parts.variant_spec(project / "examples" / "specs" / "reduce_sumsq.toml", variant)


def test_a_site_the_density_rewrite_misses_is_refused(project):
    """A site whose stride the pattern misses (here a dotted key, `ctas.stride = 8`) is named, not
    measured at the spec's density."""
    spec = project / "examples" / "specs" / "reduce_sumsq.toml"
    text = spec.read_text().replace("ctas = { stride = 8 }   # 66 of the 528 CTAs", "ctas.stride = 8", 1)
    spec.write_text(text)
    with pytest.raises(ValueError, match=r"stride32: `stride` of site\(s\) start not rewritten"):
        parts.variant_spec(spec, "stride32")


def test_bad_options_exit_2_before_anything_is_built(tmp_path):
    import subprocess
    import sys

    for args, msg in ((["--variants", "every2"], "below the spec's every"), (["--variants", ","], "name at least one"),
                      (["--paths", "shared"], "global, resident or both")):
        r = subprocess.run([sys.executable, str(REPO / "bench" / "perturbation" / "parts.py"), *args],
                           capture_output=True, text=True, cwd=tmp_path)
        assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
