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


# ---- the docs a maintainer reads first stay whole ----

# where internal period or run numbers must not appear (a reason is a sentence): the grep of the
# project's acceptance, `grep -rniE "(session|run)s? [0-9]+"` over these paths, and the fixtures'
# provenance, which names its GPU calls by date
NUMBERED = ("README.md", "docs", "atrex_inject", "runtime", "examples", "scripts", "bench/*.md",
            "tests/fixtures/h200/PROVENANCE.md")
NUMBERING = re.compile(r"(session|run)s? [0-9]+", re.I)
# where files are named: every `docs/<page>.md` these mention exists, and every `<page>.md, "Section"`
# names a section that the page has
MENTIONS = ("README.md", "docs", "atrex_inject", "runtime", "examples", "scripts", "bench", "tests/*.py")
# generated pages that may be absent until their generator runs: page -> (generator, how it names the page)
GENERATED = {"docs/cost.md": ("bench/perturbation/run.py", 'TABLE = REPO / "docs" / "cost.md"'),
             "docs/realkernels.md": ("bench/realkernels/run.py", 'TABLE = REPO / "docs" / "realkernels.md"')}


def _texts(patterns):
    """(path, text) of each text file under the patterns (a file, a folder, or a glob), bytecode and
    binary files left out."""
    for pattern in patterns:
        for path in sorted(REPO.glob(pattern)):
            for f in [path] if path.is_file() else sorted(q for q in path.rglob("*") if q.is_file()):
                if "__pycache__" in f.parts:
                    continue
                try:
                    yield f, f.read_text(encoding="utf-8")
                except (UnicodeDecodeError, OSError):
                    continue


def _exists(rel: str) -> bool:
    """A file of the repository, or a generated page whose generator names it."""
    if (REPO / rel).is_file():
        return True
    gen = GENERATED.get(rel)
    return gen is not None and gen[1] in (REPO / gen[0]).read_text()


def test_no_internal_run_or_session_numbers():
    hits = [f"{f.relative_to(REPO)}:{i}: {line.strip()}" for f, text in _texts(NUMBERED)
            for i, line in enumerate(text.splitlines(), 1) if NUMBERING.search(line)]
    assert not hits, "internal run or session numbers (write the reason as a sentence):\n" + "\n".join(hits)


def test_the_scrub_finds_what_it_looks_for():
    """The pattern catches the forms the scrub removed, and not the words around them."""
    assert all(NUMBERING.search(s) for s in ("H200 run 90:", "runs 46-48", "Session 15", "sessions 11 and 12"))
    assert not any(NUMBERING.search(s) for s in ("run-iket 2", "RUN_LABEL", "the run's 8 launches"))


def test_markdown_links_point_at_files():
    """Every relative link of the README and docs/*.md (and bench/'s pages) resolves to a file."""
    missing = []
    for f, text in _texts(("README.md", "docs/*.md", "bench/*.md")):
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://", "mailto:", "#")):
                continue
            path = (f.parent / target.split("#")[0]).resolve()
            if not _exists(str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)):
                missing.append(f"{f.relative_to(REPO)}: ({target})")
    assert not missing, "links to missing files:\n" + "\n".join(missing)


def test_docs_pages_named_in_the_tree_exist():
    """Every `docs/<page>.md` a page, a comment or a message names is there (the perturbation notes
    became docs/design.md; nothing may still point at the old page)."""
    missing = sorted({f"{f.relative_to(REPO)}: {m}" for f, text in _texts(MENTIONS)
                      for m in re.findall(r"\bdocs/[A-Za-z0-9_-]+\.md", text) if not _exists(m)})
    assert not missing, "\n".join(missing)


def test_sections_named_in_the_tree_exist():
    """A reference `<page>.md, "Section"` (docs/guide.md, "Recorder modes") names a heading of that page,
    or the bold lead of one of its paragraphs (docs/spec.md, "Density")."""
    docs = {p.name: p.read_text() for p in (REPO / "docs").glob("*.md")}
    refs = {(name + ".md", section) for _, text in _texts(MENTIONS)
            for name, section in re.findall(r"\b([a-z_]+)\.md\)?, \"([^\"\n]{2,60})\"", text) if name + ".md" in docs}
    assert len(refs) > 10
    missing = [f'{page}, "{section}"' for page, section in sorted(refs)
               if not re.search(rf"(?m)^(#+ +(\d+\. +)?|\*\*){re.escape(section)}", docs[page])]
    assert not missing, "sections named but not found:\n" + "\n".join(missing)
