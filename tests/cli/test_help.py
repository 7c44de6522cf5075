"""The CLI reads as one tool: every command's usage names its positional arguments the way the docs
do (SPEC, CAPTURE_DIR), every argument and option has a description that --help prints, and the
top-level help's loop names real commands."""
from __future__ import annotations

import re

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from atrex_inject import __version__
from atrex_inject.cli import app

runner = CliRunner()
GROUP = get_command(app)
COMMANDS = sorted(GROUP.commands)


def _help(*args) -> str:
    r = runner.invoke(app, [*args, "--help"], terminal_width=100)
    assert r.exit_code == 0, r.output
    return r.output


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("name", COMMANDS)
def test_command_help(name):
    cmd = GROUP.commands[name]
    text = _help(name)
    usage = text.splitlines()[0]
    assert "{" not in usage and "}" not in usage and "<" not in usage, usage
    assert cmd.help and _flat(cmd.help.split(".")[0]) in _flat(text)
    for p in cmd.params:
        if p.param_type_name == "argument":
            assert p.metavar and re.fullmatch(r"\[?[A-Z_]+\]?", p.metavar), (name, p.name, p.metavar)
            assert p.metavar in usage
        assert p.help and p.help.strip(), f"{name}: {p.name} has no description"
        assert _flat(p.help)[:40] in _flat(text), f"{name}: the description of {p.name} is not printed"
    assert "list[" not in text  # no typer-internal type names as metavars


def test_spec_and_capture_metavars():
    for name in ("apply", "revert", "status", "diff"):
        assert _help(name).splitlines()[0].endswith(" SPEC")
    for name in ("decode", "summary", "export", "report"):
        assert _help(name).splitlines()[0].endswith(" CAPTURE_DIR")
    for name in ("validate", "verdict"):
        assert _help(name).splitlines()[0].endswith(" [CAPTURE_DIR]")
    assert _help("capture").splitlines()[0].endswith(" [OPTIONS] -- CMD...")


def test_top_level_help_and_version():
    text = _flat(_help())
    for name in COMMANDS:
        assert f" {name} " in text
    loop = text.split("Typical loop:", 1)[1].split("Options:")[0]
    steps = re.findall(r"(?:^|-> )([a-z-]+) (?:SPEC|CAPTURE_DIR)", loop.strip())
    assert steps and set(steps) <= set(COMMANDS), steps
    assert {"apply", "validate", "report", "revert"} <= set(steps)
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output.startswith(f"atrex-inject {__version__} (commit "), r.output


def test_version_names_the_commit():
    """In a source checkout --version names the commit the code is at."""
    import subprocess
    from pathlib import Path
    head = subprocess.run(["git", "-C", str(Path(__file__).parent.parent), "rev-parse", "--short=12", "HEAD"],
                          capture_output=True, text=True)
    if head.returncode:
        pytest.skip("not a git checkout")
    assert f"(commit {head.stdout.strip()}" in runner.invoke(app, ["--version"]).output


def test_top_level_help_teaches_capture():
    """The loop runs the program under `capture` (binary hash, Python hooks), not with the
    environment variable set by hand, and names the before/after step."""
    loop = _flat(_help()).split("Typical loop:", 1)[1].split("Options:")[0]
    assert "capture --spec SPEC --out CAPTURE_DIR -- " in loop
    assert "ATREX_TIMELINE_OUT" not in loop
    assert "compare BEFORE AFTER" in loop and "--compare BEFORE" in loop


def test_demo_help_names_the_report_and_compare():
    text = _flat(_help("demo"))
    assert "report.html" in text and "compare" in text
