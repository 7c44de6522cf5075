"""Each bad input gives a clear message, exit status 2, and leaves every file's hash unchanged."""
from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from atrex_inject.cli import app
from conftest import edit_file, tree_hashes

runner = CliRunner()
SPEC = "examples/specs/reduce_sumsq.toml"


def _cli(project, *args):
    return runner.invoke(app, [*args, "--root", str(project)], catch_exceptions=False)


def _edit_spec(project, old: str, new: str):
    edit_file(project / SPEC, (old, new))


def _apply_fails(project, pattern: str, line: int | None = None):
    before = tree_hashes(project)
    r = _cli(project, "apply", str(project / SPEC))
    assert r.exit_code == 2, r.output
    assert re.search(pattern, r.output), r.output
    if line is not None:
        assert f"reduce_sumsq.toml:{line}:" in r.output, r.output
    assert tree_hashes(project) == before
    return r.output


def _line_of(project, needle: str) -> int:
    return next(i for i, l in enumerate((project / SPEC).read_text().splitlines(), 1) if needle in l)


def test_malformed_toml(project):
    _edit_spec(project, 'name = "start"', 'name = "start')
    _apply_fails(project, r"malformed TOML", _line_of(project, 'name = "start'))


def test_unknown_key(project):
    _edit_spec(project, 'name = "iter_begin"', 'name = "iter_begin"\npostion = "before"')
    out = _apply_fails(project, r"unknown key 'postion'", _line_of(project, "postion"))
    assert "allowed keys here" in out


def test_anchor_matches_nothing_lists_candidates(project):
    _edit_spec(project, 'anchor = { call = "warp_sum", occurrence = 1 }', 'anchor = { call = "warp_summ" }')
    out = _apply_fails(project, r"anchor call 'warp_summ' matches nothing", _line_of(project, 'name = "tail_done"') - 1)
    assert "call warp_sum" in out and "reduce_sumsq.cu:21" in out  # candidates with their source lines


def test_ambiguous_anchor_lists_matches(project):
    _edit_spec(project, 'anchor = { call = "warp_sum", occurrence = 1 }', 'anchor = { call = "warp_sum" }')
    out = _apply_fails(project, r"matches 2 places")
    assert "reduce_sumsq.cu:21" in out and "reduce_sumsq.cu:26" in out and "occurrence" in out


def test_path_escape(project):
    _edit_spec(project, 'source = "../cuda/reduce_sumsq.cu"', 'source = "../../../etc/passwd"')
    _apply_fails(project, r"leaves the project tree", _line_of(project, "source ="))


def test_absolute_path_outside(project):
    _edit_spec(project, 'source = "../cuda/reduce_sumsq.cu"', 'source = "/etc/hostname"')
    _apply_fails(project, r"leaves the project tree")


def test_double_apply_refused(project):
    assert _cli(project, "apply", str(project / SPEC)).exit_code == 0
    _apply_fails(project, r"already instrumented")


def test_revert_after_edit_refused(project):
    assert _cli(project, "apply", str(project / SPEC)).exit_code == 0
    src = project / "examples/cuda/reduce_sumsq.cu"
    src.write_text(src.read_text() + "// a user edit\n")
    before = tree_hashes(project)
    r = _cli(project, "revert", str(project / SPEC))
    assert r.exit_code == 2
    assert "changed since apply" in r.output and "refusing to overwrite your edits" in r.output
    assert f"atrex-inject revert --keep-edits {project / SPEC}` removes the probes and keeps your edits" in r.output
    assert tree_hashes(project) == before


def test_json_error_output(project):
    _edit_spec(project, 'name = "iter_begin"', 'name = "iter_begin"\nbogus = 1')
    r = _cli(project, "apply", str(project / SPEC), "--json")
    assert r.exit_code == 2
    assert '"error": "unknown key \'bogus\'"' in r.output


@pytest.mark.parametrize("old,new,msg", [
    ('position = "loop-begin"', 'position = "entry"', "does not apply to a loop anchor"),
    ('role = "cta"', 'role = "boss"', "role 'boss' is not one of"),
    ('every = 4          # one event per 4 iterations', "every = 0", "site[1].every must be between 1 and 4294967295, not 0"),
    ('"start -> stream_done"', '"start -> nowhere"', "names unknown site 'nowhere'"),
    ('"start -> stream_done"', '"start stream_done"', "must read"),
    ("version = 1", "version = 2", "spec version 2 is not supported"),
])
def test_spec_value_errors(project, old, new, msg):
    _edit_spec(project, old, new)
    _apply_fails(project, re.escape(msg))


def test_messages_are_printed_as_text_never_as_markup(tmp_path):
    """Paths, source lines and spec values reach the terminal as they are: `:100:` (an emoji code
    to Rich) in a folder name and a candidate's `file:100:`, and `[bold]` in a spec value."""
    from conftest import cli
    root = tmp_path / "at:100:here"
    root.mkdir()
    (root / ".git").mkdir()
    (root / "k.cu").write_text("// padding\n" * 98 + "__global__ void k(float* x) {\n"
                               "  for (int i = 0; i < 4; ++i) x[i] = 0.f;\n}\n")
    spec = root / "s.toml"
    spec.write_text('version = 1\nname = "s"\nquestion = "q"\nbackend = "cuda"\nsource = "k.cu"\nkernel = "k"\n'
                    '[[site]]\nname = "a"\nanchor = { loop = "[bold]for (int j[/bold]" }\n')
    code, out = cli("apply", spec)
    assert code == 2, out
    assert f"error: {spec}:7: site 'a': anchor loop '[bold]for (int j[/bold]' matches nothing" in out
    assert "k.cu:100: for loop: for (int i = 0; i < 4; ++i)" in out
    assert "\U0001f4af" not in out  # the emoji `:100:` names
