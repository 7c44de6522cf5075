"""Patches round-trip for any text: lines split on \\n only, so \\r, form feeds, VT, \\x1c-\\x1e,
U+0085, U+2028 and U+2029 stay inside their line; `apply_patch` and `git apply` rebuild the new
text exactly, and `git apply -R` the old one."""
from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atrex_inject.patch import PatchMismatch, apply_patch, diffstat, split_lines, unified_diff

SEPARATORS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
texts = st.text(alphabet=st.sampled_from(list(SEPARATORS) + list("ab{};/* ")), max_size=60)


def test_split_lines_only_at_newline():
    assert split_lines("a\rb\u2028c\x0cd\ne") == ["a\rb\u2028c\x0cd\n", "e"]
    assert split_lines("a\n") == ["a\n"] and split_lines("") == []


@settings(max_examples=300, deadline=None)
@given(old=texts, new=texts)
def test_round_trip_over_all_line_separators(old, new):
    assert apply_patch(old, unified_diff(old, new, "k.cu")) == new


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
@settings(max_examples=25, deadline=None)
@given(old=texts, new=texts)
def test_git_apply_accepts_the_patch_both_ways(tmp_path_factory, old, new):
    d = tmp_path_factory.mktemp("git")
    (d / "k.cu").write_bytes(old.encode())
    patch = unified_diff(old, new, "k.cu")
    if not patch:
        return
    (d / "p.patch").write_bytes(patch.encode())
    subprocess.run(["git", "apply", "p.patch"], cwd=d, check=True, capture_output=True)
    assert (d / "k.cu").read_bytes() == new.encode()
    subprocess.run(["git", "apply", "-R", "p.patch"], cwd=d, check=True, capture_output=True)
    assert (d / "k.cu").read_bytes() == old.encode()


def test_a_patch_for_other_text_is_refused():
    patch = unified_diff("a\nb\nc\n", "a\nB\nc\n", "k.cu")
    with pytest.raises(PatchMismatch, match="does not match line 2"):
        apply_patch("a\nX\nc\n", patch)


def test_diffstat_counts_lines_with_separators_inside():
    assert diffstat(unified_diff("x\u2028y\n", "x\u2028y\nz\r\n", "k.cu")) == (1, 0)
