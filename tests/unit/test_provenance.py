"""scripts/provenance.put_section, where every fixture script writes its section of
tests/fixtures/h200/PROVENANCE.md: the section it wrote before is replaced, the new one goes at its
anchor, and a section put back where it stands leaves the committed file byte for byte."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from provenance import put_section  # noqa: E402

TEXT = "# Provenance\n\nintro\n\n## a/ (first)\n\nA\n\n## b/\n\nB old\n\n## c/\n\nC\n"


def test_the_section_written_before_is_replaced_at_the_anchor():
    assert put_section(TEXT, "## b/", "## b/\n\nB new\n", before="## c/") == \
        "# Provenance\n\nintro\n\n## a/ (first)\n\nA\n\n## b/\n\nB new\n\n## c/\n\nC\n"
    assert put_section(TEXT, "## b/", "## b/\n\nB new", after="## c/") == \
        "# Provenance\n\nintro\n\n## a/ (first)\n\nA\n\n## c/\n\nC\n\n## b/\n\nB new\n"


def test_a_new_section_goes_before_or_after_its_anchor_or_at_the_end():
    assert put_section(TEXT, "## d/", "## d/\n\nD\n\n\n", before="## a/") == \
        "# Provenance\n\nintro\n\n## d/\n\nD\n\n## a/ (first)\n\nA\n\n## b/\n\nB old\n\n## c/\n\nC\n"
    assert put_section(TEXT, "## d/", "## d/\n\nD\n", after="## a/") == \
        "# Provenance\n\nintro\n\n## a/ (first)\n\nA\n\n## d/\n\nD\n\n## b/\n\nB old\n\n## c/\n\nC\n"
    assert put_section(TEXT, "## d/", "## d/\n\nD\n", before="## missing/").endswith("## c/\n\nC\n\n## d/\n\nD\n")


def test_a_heading_names_its_own_section_only():
    """A heading given with its line end matches that line alone, not a longer heading it begins."""
    text = "## x/, y/ (the SM clock)\n\nold\n\n## x/, y/, z/ (the SM clock)\n\nkept\n"
    assert put_section(text, "## x/, y/ (the SM clock)\n", "## x/, y/ (the SM clock)\n\nnew\n") == \
        "## x/, y/, z/ (the SM clock)\n\nkept\n\n## x/, y/ (the SM clock)\n\nnew\n"


@pytest.mark.parametrize("heading", re.findall(r"(?m)^## .*$", (REPO / "tests/fixtures/h200/PROVENANCE.md").read_text()))
def test_each_committed_section_put_back_where_it_stands_leaves_the_file(heading):
    text = (REPO / "tests/fixtures/h200/PROVENANCE.md").read_text()
    section = re.search(rf"(?ms)^{re.escape(heading)}\n.*?(?=^## |\Z)", text).group(0)
    follows = re.search(rf"(?m)^{re.escape(heading)}\n(?:.*\n)*?(## .*)$", text)
    kw = {"before": follows.group(1)} if follows else {"before": None}
    assert put_section(text, heading + "\n", section, **kw) == text
