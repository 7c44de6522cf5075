"""No input ends in a traceback (hypothesis): mutated specs, manifests, sidecars, capture file
names and sample lines each end in exit 0/1/2 with a specific message, and an exit 2 changes no
file. The long seeded version of the spec and capture runs is bench/fuzz_inputs.py."""
from __future__ import annotations

import json
import random
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from atrex_inject.measure import PREFIX, Request, check_sample
from atrex_inject.proc import MAX_LINE, MAX_SAMPLE_LINES, _Stream
from fuzz_support import REPO, capture_case, check_cli, mutate_json, project, spec_case

FAST = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.mark.long
@FAST
@given(seed=st.integers(0, 2 ** 32))
def test_mutated_specs(tmp_path_factory, seed):
    root = project(tmp_path_factory.mktemp("spec"))
    spec_case(random.Random(seed), root)


@pytest.mark.long
@FAST
@given(key=st.sampled_from(["name", "source", "kernel", "capacity", "skip", "payload", "every", "anchor", "ctas",
                            "intervals", "stride", "occurrence"]),
       value=st.one_of(st.integers(-2 ** 70, 2 ** 70).map(str), st.text(max_size=40).map(json.dumps),
                       st.sampled_from(["[" * 400, "{ a = 1 }", "[]", "true", "1.5", "nan", '"\\u0000"'])))
def test_hostile_value_in_any_spec_key(tmp_path_factory, key, value):
    root = project(tmp_path_factory.mktemp("spec"))
    spec = root / "examples/specs/gemm_mma.toml"
    lines = spec.read_text().split("\n")
    i = next((i for i, l in enumerate(lines) if l.split("=")[0].strip() == key), 0)
    lines.insert(i + 1, f"{key} = {value}") if i == 0 else lines.__setitem__(i, f"{key} = {value}")
    spec.write_text("\n".join(lines))
    if check_cli(root, "apply", spec, "--json") == 0:
        assert check_cli(root, "revert", spec) == 0


@FAST
@given(seed=st.integers(0, 2 ** 32))
def test_mutated_captures_sidecars_and_names(tmp_path_factory, seed):
    capture_case(random.Random(seed), tmp_path_factory.mktemp("cap"))


@pytest.fixture(scope="module")
def applied(tmp_path_factory):
    """A project with reduce_sumsq applied, once: each example mutates a copy of it."""
    root = project(tmp_path_factory.mktemp("applied"))
    assert check_cli(root, "apply", root / "examples/specs/reduce_sumsq.toml") == 0
    return root


@FAST
@given(seed=st.integers(0, 2 ** 32))
def test_mutated_applied_manifests(tmp_path_factory, applied, seed):
    root = tmp_path_factory.mktemp("man") / "p"
    shutil.copytree(applied, root)
    spec = root / "examples/specs/reduce_sumsq.toml"
    m = root / ".atrex/reduce_sumsq/manifest.json"
    m.write_text(json.dumps(mutate_json(random.Random(seed), json.loads(m.read_text()))))
    for verb in ("status", "diff", "revert"):
        check_cli(root, verb, spec, "--json")
    cap = root / "cap"
    shutil.copytree(REPO / "tests/fixtures/h200/reduce_sumsq", cap)
    check_cli(root, "decode", cap, "--manifest", m, "--out", root / "dec")


@FAST
@given(name=st.text(min_size=1, max_size=40).filter(lambda n: "/" not in n and "\0" not in n and n not in (".", "..")))
def test_any_capture_file_name(tmp_path_factory, name):
    folder = tmp_path_factory.mktemp("names") / "cap"
    shutil.copytree(REPO / "tests/fixtures/h200/gemm_mma", folder)
    raw = next(folder.glob("*.atrex"))
    try:
        raw.rename(folder / (name + ".atrex"))
    except OSError:
        return  # a name this file system refuses (too long in bytes)
    check_cli(folder, "decode", folder, "--out", folder.parent / "dec", "--json")
    check_cli(folder, "validate", folder, "--json")


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
                           lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                           max_leaves=20)
REQ = Request(["a"], ["b"], warmup=3, iterations=7)


@settings(max_examples=300, deadline=None)
@given(body=st.one_of(
    json_values.map(json.dumps),
    st.dictionaries(st.sampled_from(["latency_ms", "correctness", "synchronized", "workload_identity",
                                     "device_identity", "warmup", "iterations"]), json_values).map(json.dumps),
    st.text(max_size=200).filter(lambda t: "\n" not in t)))
def test_any_sample_line_is_a_sample_or_a_reason(body):
    sample, raw, why = check_sample(PREFIX + body, 0, REQ, None)
    assert (sample is None) != (why is None) and raw == PREFIX + body


@settings(max_examples=200, deadline=None)
@given(chunks=st.lists(st.binary(max_size=3 * MAX_LINE // 2) | st.sampled_from([PREFIX.encode(), b"\n"]),
                       max_size=12))
def test_stdout_reader_keeps_bounded_sample_lines(chunks):
    s = _Stream(PREFIX.encode())
    for c in chunks:
        s.feed(c)
    s.finish()
    data = b"".join(chunks)
    lines = [l for l in data.split(b"\n") if l.startswith(PREFIX.encode())]
    assert s.total == len(data) and s.sample_lines == len(lines)
    assert s.lines == [l[:MAX_LINE] for l in lines][:MAX_SAMPLE_LINES]
    assert s.long_lines == sum(len(l) > MAX_LINE for l in lines)
