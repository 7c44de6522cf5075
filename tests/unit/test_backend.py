"""The backend seam (backend.py, registry.py): a backend is one module and one registry entry. The toy backend
of toy_backend.py, registered for this test only, goes through the whole pipeline (spec, apply,
capture, validate, summary, revert) with nothing else changed."""
from __future__ import annotations

import json
import sys

import pytest

from atrex_inject import registry
from atrex_inject.errors import SpecError
from atrex_inject.plan import make_plan
from atrex_inject.spec import load_spec
from conftest import cli, sha

SPEC = """version = 1
name = "toy"
question = "how long from entry to exit?"
backend = "toy"
source = "k.txt"
kernel = "k"
intervals = ["begin -> end"]

[[site]]
name = "begin"
anchor = { entry = true }

[[site]]
name = "end"
anchor = { exit = true }
"""


@pytest.fixture
def toy(tmp_path, monkeypatch):
    monkeypatch.setitem(registry.REGISTRY, "toy", registry.Entry("toy", "toy_backend", "text",
                                                                  "the toy backend has no recorder of its own", False))
    (tmp_path / ".atrex").mkdir()
    (tmp_path / "k.txt").write_text("the kernel\n")
    (tmp_path / "toy.toml").write_text(SPEC)
    return tmp_path


def test_a_registered_backend_runs_the_whole_pipeline(toy):
    spec, src = toy / "toy.toml", toy / "k.txt"
    clean = sha(src)
    code, out = cli("apply", spec, "--json")
    assert code == 0, out
    assert src.read_text().startswith("# atrex: instrumented\n# atrex: site begin (id 0, entry)\n")
    cap = toy / "cap"
    code, out = cli("capture", "--spec", spec, "--out", cap, "--json", "--", sys.executable, "-c", "pass")
    assert code == 0 and json.loads(out)["launches"] == ["k-launch0.atrex"], out
    code, out = cli("validate", cap, "--source", src, "--json")
    assert code == 0 and json.loads(out)["verdict"] == "valid", out
    code, out = cli("summary", cap, "--json")
    (iv,) = json.loads(out)["launches"][0]["intervals"]
    assert (iv["name"], iv["count"], iv["min"], iv["max"]) == ("begin -> end", 4, 100.0, 400.0)  # 2 CTAs x 2 warps
    assert cli("revert", spec)[0] == 0 and sha(src) == clean


def test_the_backend_checks_its_own_rules_and_capabilities(toy):
    spec = toy / "toy.toml"
    spec.write_text(SPEC.replace("anchor = { exit = true }", 'anchor = { call = "f" }'))
    with pytest.raises(SpecError, match="entry and exit anchors only") as e:
        make_plan(load_spec(spec))  # the spec reads; the plan checks it against its backend
    assert e.value.line == SPEC.splitlines().index("[[site]]", 9) + 1
    spec.write_text(SPEC + "\n[capture]\nrecorder = \"staged\"\n")
    with pytest.raises(SpecError, match=r"capture.recorder applies to the cuda backend's recorder \(the toy backend "
                                        r"has no recorder") as e:
        make_plan(load_spec(spec))
    assert e.value.line == len(SPEC.splitlines()) + 3
    spec.write_text(SPEC.replace('backend = "toy"', 'backend = "nope"'))
    with pytest.raises(SpecError, match="backend 'nope' is not one of cuda, cutedsl, toy"):
        load_spec(spec)
