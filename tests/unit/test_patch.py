"""Patches round-trip for any text: lines split on \\n only, so \\r, form feeds, VT, \\x1c-\\x1e,
U+0085, U+2028 and U+2029 stay inside their line; `apply_patch` and `git apply` rebuild the new
text exactly, and `git apply -R` the old one, whether difflib aligned the lines or (files whose
lines repeat) the linear anchored alignment did."""
from __future__ import annotations

import difflib
import random
import shutil
import subprocess
from contextlib import ExitStack, nullcontext
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atrex_inject import patch as patch_mod
from atrex_inject.patch import PatchMismatch, apply_patch, diffstat, split_lines, unified_diff

SEPARATORS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
texts = st.text(alphabet=st.sampled_from(list(SEPARATORS) + list("ab{};/* ")), max_size=60)


def test_split_lines_only_at_newline():
    assert split_lines("a\rb\u2028c\x0cd\ne") == ["a\rb\u2028c\x0cd\n", "e"]
    assert split_lines("a\n") == ["a\n"] and split_lines("") == []


# texts of few distinct lines, and an edit of each: what makes the anchored alignment work hard
line_lists = st.lists(st.sampled_from(["x();\n", "y();\n", "{\n", "}\n", "u1\n", "u2\n", "u3\n", "z"]), max_size=40)
edited = line_lists.flatmap(lambda old: st.tuples(st.just("".join(old)), st.lists(
    st.sampled_from(["x();\n", "probe();\n", "{\n", "u4\n"]), max_size=len(old) + 1).map(
    lambda ins: "".join(x + (ins[i] if i < len(ins) else "") for i, x in enumerate(old)))))
moved = line_lists.flatmap(lambda old: st.permutations(old).map(lambda new: ("".join(old), "".join(new))))
pairs = st.one_of(st.tuples(texts, texts), edited, moved)


def anchored():
    """Every alignment made by the linear path (DIFFLIB_PAIRS below any cost): anchors, or a gap
    replaced; nesting capped at 2 so that the cap's replacement is exercised too."""
    stack = ExitStack()
    stack.enter_context(mock.patch.object(patch_mod, "DIFFLIB_PAIRS", -1))
    stack.enter_context(mock.patch.object(patch_mod, "DEPTH", 2))
    return stack


@pytest.mark.parametrize("alignment", [nullcontext, anchored])
@settings(max_examples=300, deadline=None)
@given(pair=pairs)
def test_round_trip_over_all_line_separators(alignment, pair):
    old, new = pair
    with alignment():
        assert apply_patch(old, unified_diff(old, new, "k.cu")) == new


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
@pytest.mark.parametrize("alignment", [nullcontext, anchored])
@settings(max_examples=25, deadline=None)
@given(pair=pairs)
def test_git_apply_accepts_the_patch_both_ways(tmp_path_factory, alignment, pair):
    old, new = pair
    d = tmp_path_factory.mktemp("git")
    (d / "k.cu").write_bytes(old.encode())
    with alignment():
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


def test_repeated_lines_take_the_linear_alignment_and_stay_minimal():
    """bench/patch_scale.py's shape (lines repeated just under difflib's popular cut; difflib alone
    takes seconds): the pairs bound sends it to the anchored alignment, and an insertion is still
    only an insertion."""
    lines = [f"  x{i % 20}();\n" for i in range(20 * 300)] + [f"  u{i}();\n" for i in range(24000)]
    random.Random(1).shuffle(lines)
    old = "".join(lines)
    new = "// probe\n" + "".join(lines[:15000]) + "  probe();\n" + "".join(lines[15000:])
    assert patch_mod._difflib(split_lines(old), split_lines(new), [patch_mod.DIFFLIB_PAIRS]) is None
    with mock.patch.object(patch_mod, "_anchored", wraps=patch_mod._anchored) as linear:
        patch = unified_diff(old, new, "k.cu")
    assert linear.called
    assert apply_patch(old, patch) == new
    assert diffstat(patch) == (2, 0) and patch.count("@@ -") == 2


def _short_matches() -> tuple[str, str]:
    """Synthetic: 1000 equal lines against that line every 100th among unique ones. Under 1M pairs
    in all, but every match is one line, and difflib searches the rest again after each (33 s)."""
    return "x\n" * 1000, "".join("x\n" + "".join(f"u{i}_{k}\n" for k in range(99)) for i in range(1000))


def _short_matches_in_gaps() -> tuple[str, str]:
    """Synthetic: unique anchors, each followed by 199 copies of a line (150 kinds, too many pairs
    for difflib as a whole), which the new text alternates with another: every gap between anchors
    is such a search (84 s at 200k lines)."""
    return ("".join(f"sep{i}\n" + f"x{i % 150}\n" * 199 for i in range(200)),
            "".join(f"sep{i}\n" + f"x{i % 150}\ny{i % 150}\n" * 100 for i in range(200)))


@pytest.mark.parametrize("texts", [_short_matches, _short_matches_in_gaps])
def test_difflib_visits_stay_within_the_budget(texts):
    """The pairs difflib's searches visit, counted here for every search that runs, stay within one
    budget for difflib on the whole texts and one for the gaps of the linear alignment."""
    old, new = texts()
    visits = [0]
    search = difflib.SequenceMatcher.find_longest_match

    def counted(self, alo=0, ahi=None, blo=0, bhi=None):
        visits[0] += sum(len(self.b2j.get(x, ())) for x in self.a[alo:len(self.a) if ahi is None else ahi])
        return search(self, alo, ahi, blo, bhi)

    with mock.patch.object(difflib.SequenceMatcher, "find_longest_match", counted):
        patch = unified_diff(old, new, "k.cu")
    assert apply_patch(old, patch) == new
    assert 0 < visits[0] <= 2 * patch_mod.DIFFLIB_PAIRS
