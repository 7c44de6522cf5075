"""The complete example in docs/spec.md is a working spec (docs stay true to the code)."""
from __future__ import annotations

import re
import shutil

from atrex_inject import snapshot
from conftest import REPO, sha


def test_spec_md_example_applies_and_reverts(tmp_path):
    toml = re.search(r"```toml\n(.*?)```", (REPO / "docs/spec.md").read_text(), re.S).group(1)
    (tmp_path / ".git").mkdir()
    (tmp_path / "specs").mkdir()
    shutil.copytree(REPO / "examples/cuda", tmp_path / "cuda")
    spec = tmp_path / "specs/doc.toml"
    spec.write_text(toml)
    src = tmp_path / "cuda/gemm_mma.cu"
    clean = sha(src)
    m = snapshot.apply(spec).manifest
    assert [s.name for s in m.sites] == ["iter", "stage_ready", "mma_done"]
    assert m.capture.event_bytes == 16  # the payload widens events
    snapshot.revert(spec)
    assert sha(src) == clean


def test_api_md_names_real_functions_with_their_parameters():
    """Every `atrex_inject.module.function(params)` in docs/api.md exists, and the parameters it
    lists are the function's own, in order (the CLI's library layer is documented as it is)."""
    import importlib
    import inspect

    text = (REPO / "docs/api.md").read_text()
    calls = re.findall(r"`(atrex_inject(?:\.\w+)+)\(([^`]*)\)`", text)
    assert len(calls) > 20
    for dotted, args in calls:
        module, name = dotted.rsplit(".", 1)
        fn = getattr(importlib.import_module(module), name)
        params = list(inspect.signature(fn).parameters)
        listed = [a.split("=")[0].strip() for a in args.split(",") if a.strip() and a.strip() != "..."]
        assert params[:len(listed)] == listed, (dotted, params, listed)
