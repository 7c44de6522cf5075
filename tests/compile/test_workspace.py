"""The workspace as a user's project meets it: the root found from the source's repository (a spec
kept elsewhere needs no --root), `.atrex/` ignoring itself in git, history bounded per spec and
shown by status, links under `.atrex/` never written through, `revert --keep-edits` (the patch
applied in reverse to an edited file, refusing on conflict by hunk), the way out of a stale
workspace, and revert's exit codes (docs/recovery.md)."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from atrex_inject import snapshot
from atrex_inject.patch import PatchConflict, hunks, unapply_keeping_edits, unified_diff
from conftest import REPO, cli, sha, tree_hashes

SPEC = "examples/specs/reduce_sumsq.toml"
SRC = "examples/cuda/reduce_sumsq.cu"


def test_a_spec_outside_the_source_tree_needs_no_root(tmp_path):
    """The spec in a folder of its own (another repository), the source in a git checkout: every
    command finds the checkout from the source, and .atrex/ lands there."""
    repo, specs = tmp_path / "repo", tmp_path / "specs"
    shutil.copytree(REPO / "examples" / "cuda", repo / "cuda")
    (repo / ".git").mkdir()
    (specs / ".git").mkdir(parents=True)
    text = (REPO / SPEC).read_text().replace('source = "../cuda/reduce_sumsq.cu"', 'source = "../repo/cuda/reduce_sumsq.cu"')
    spec = specs / "reduce_sumsq.toml"
    spec.write_text(text)
    clean = (repo / "cuda" / "reduce_sumsq.cu").read_bytes()
    code, out = cli("apply", spec)
    assert code == 0, out
    assert (repo / ".atrex" / "reduce_sumsq" / "manifest.json").is_file() and not (specs / ".atrex").exists()
    m = json.loads((repo / ".atrex" / "reduce_sumsq" / "manifest.json").read_text())
    assert m["source"]["path"] == "cuda/reduce_sumsq.cu" and m["spec"]["path"] == str(spec)
    for verb in ("status", "diff"):
        code, out = cli(verb, spec)
        assert code == 0, out
    assert "instrumented" in cli("status", spec)[1]
    code, out = cli("revert", spec)
    assert code == 0, out
    assert (repo / "cuda" / "reduce_sumsq.cu").read_bytes() == clean


def test_atrex_ignores_itself_in_git(tmp_path):
    """In a real git repository, nothing under .atrex/ shows up as untracked after apply and revert;
    a .gitignore the user put there is left as it is."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)

    def untracked() -> list[str]:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path,
                             capture_output=True, text=True, check=True).stdout
        return [line[3:] for line in out.splitlines()]

    before = untracked()
    assert cli("apply", tmp_path / SPEC)[0] == 0
    assert (tmp_path / ".atrex" / ".gitignore").read_text() == "*\n"
    assert not [p for p in untracked() if p.startswith(".atrex")]
    assert cli("revert", tmp_path / SPEC)[0] == 0
    assert untracked() == before
    (tmp_path / ".atrex" / ".gitignore").write_text("# mine\nlock\n")
    assert cli("apply", tmp_path / SPEC)[0] == 0
    assert (tmp_path / ".atrex" / ".gitignore").read_text() == "# mine\nlock\n"


def test_history_is_bounded_per_spec_and_shown_by_status(project, monkeypatch):
    spec = project / SPEC
    other = project / "examples" / "specs" / "gemm_mma.toml"
    assert cli("apply", other)[0] == 0 and cli("revert", other)[0] == 0  # another spec's archive is not counted
    monkeypatch.setenv("ATREX_HISTORY_KEEP", "2")
    made = []
    for _ in range(4):
        assert cli("apply", spec)[0] == 0
        code, out = cli("revert", spec, "--json")
        assert code == 0, out
        made.append(json.loads(out)["archived"])
    history = project / ".atrex" / "history"
    assert sorted(p.name for p in history.glob("reduce_sumsq-*")) == sorted(Path(p).name for p in made[-2:])
    assert len(list(history.glob("gemm_mma-*"))) == 1
    code, out = cli("status", spec, "--json")
    assert json.loads(out)["history"] == {"folder": str(history), "archived": 2, "newest": made[-1], "keep": 2}
    code, out = cli("status", spec)
    assert f"history: 2 archived workspace(s) of this spec in {history} (the newest 2 are kept; " \
           f"ATREX_HISTORY_KEEP), newest {made[-1]}" in out
    monkeypatch.delenv("ATREX_HISTORY_KEEP")
    assert json.loads(cli("status", spec, "--json")[1])["history"]["keep"] == snapshot.HISTORY_KEEP == 5


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_a_bad_history_bound_is_refused_before_any_write(project, monkeypatch, value):
    assert cli("apply", project / SPEC)[0] == 0
    monkeypatch.setenv("ATREX_HISTORY_KEEP", value)
    before = tree_hashes(project)
    code, out = cli("revert", project / SPEC)
    assert code == 2 and f"ATREX_HISTORY_KEEP={value!r} must be a whole number of at least 1" in out
    assert tree_hashes(project) == before


@pytest.mark.parametrize("link", [".atrex/reduce_sumsq", ".atrex/history", ".atrex/lock",
                                  ".atrex/reduce_sumsq/clean"])
def test_a_link_under_atrex_leading_outside_is_never_written_through(project, tmp_path_factory, link):
    """Each path the workspace writes, made a symbolic link to a folder outside the project:
    apply or revert exits 2 naming it, and nothing is written outside."""
    outside = tmp_path_factory.mktemp("outside")
    spec, src = project / SPEC, project / SRC
    verb = "apply"
    if link in (".atrex/history", ".atrex/reduce_sumsq/clean"):  # written by revert / found by a resumed apply
        assert cli("apply", spec)[0] == 0
        verb = "revert" if link == ".atrex/history" else "apply"
        if verb == "apply":  # an apply killed before its last write: the workspace is there, the source clean
            shutil.copyfile(project / ".atrex/reduce_sumsq/clean/reduce_sumsq.cu", src)
            shutil.rmtree(project / link)
    (project / link).parent.mkdir(parents=True, exist_ok=True)
    if (project / link).exists():
        (project / link).unlink()
    (project / link).symlink_to(outside, target_is_directory=True)
    before = tree_hashes(project)
    code, out = cli(verb, spec)
    assert code == 2, out
    assert f"{project / link} is a symbolic link; atrex-inject writes only inside the project {project}, links " \
           "included, so nothing was written there" in out
    assert list(outside.iterdir()) == []
    assert tree_hashes(project) == before


def _edited(path: Path, *edits: tuple[str, str]) -> bytes:
    text = path.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    path.write_text(text)
    return text.encode()


# in the clean kernel (not in the instrumented copy, which comes after it), and a line two lines
# from the end of a hunk's added lines: `git apply -R` would refuse the second
EDITS = (("  float acc = 0.f;\n", "  float acc = 0.0f;  // edited after apply\n"),
         ("const long n = 1l << 26;", "const long n = 1l << 24;"))


def test_keep_edits_removes_the_probes_and_keeps_the_edits(project):
    spec, src = project / SPEC, project / SRC
    clean = src.read_bytes()
    assert cli("apply", spec)[0] == 0
    _edited(src, *EDITS)
    code, out = cli("revert", spec)
    assert code == 2 and "--keep-edits" in out
    code, out = cli("revert", spec, "--keep-edits")
    assert code == 0 and f"probes removed, your edits kept: {SRC} (workspace archived at" in out, out
    want = clean.decode()
    for old, new in EDITS:
        want = want.replace(old, new, 1)
    assert src.read_text() == want
    assert snapshot.status(spec)["state"] == "not-applied"
    assert cli("apply", spec)[0] == 0  # the edited file is the new clean source
    assert cli("revert", spec)[0] == 0 and src.read_text() == want


def test_keep_edits_on_a_kernel_py(project):
    """A kernel.py whose patch embeds the recorder header: an edit of the clean kernel's text kept."""
    spec = project / "examples" / "specs" / "softmax_inline.toml"
    m = snapshot.apply(spec).manifest
    src = project / m.source.path
    clean = (REPO / m.source.path).read_text()
    _edited(src, ("import torch\n", "import torch  # edited\n"))
    assert cli("revert", spec, "--keep-edits")[0] == 0
    assert src.read_text() == clean.replace("import torch\n", "import torch  # edited\n", 1)


def test_keep_edits_refuses_an_edit_of_the_probes_naming_the_hunk(project):
    spec, src = project / SPEC, project / SRC
    assert cli("apply", spec)[0] == 0
    patch = (project / ".atrex" / "reduce_sumsq" / "instrumented.patch").read_text()
    h = next(h for h in hunks(patch) if any("__atrex_cap.on()" in t for _, t, _ in h.lines))
    line = next(i for i, t in enumerate(src.read_text().split("\n"), 1) if "__atrex_cap.on()" in t)
    edited = _edited(src, ("n / 4, out);\n    __atrex_cap.finish", "n / 2, out);\n    __atrex_cap.finish"),
                      *EDITS[:1])
    before = tree_hashes(project)
    code, out = cli("revert", spec, "--keep-edits")
    assert code == 2, out
    assert (f"error: {src}: your edits touch lines the probes changed, so the probes cannot be removed there without "
            f"losing an edit; nothing was restored:\n  hunk {h.number} {h.header} of "
            f"{project / '.atrex/reduce_sumsq/instrumented.patch'}: instrumented lines {line - 2}-{line + 2}, "
            f"now about lines {line - 2}-{line + 2} of {SRC}") in out  # the wrapping and its #line directives
    assert f"then run `atrex-inject revert --keep-edits {spec}` again" in out
    assert tree_hashes(project) == before and src.read_bytes() == edited


def test_the_way_out_of_a_stale_workspace(project):
    """The probes removed by hand (`git apply -R` of the patch) after an edit: apply names the
    command that gets out, and that command keeps the file as it is and archives the workspace."""
    spec, src = project / SPEC, project / SRC
    clean = src.read_bytes()
    assert cli("apply", spec)[0] == 0
    src.write_bytes(clean)
    edited = _edited(src, *EDITS)
    code, out = cli("apply", spec)
    assert code == 2 and "belongs to another state" in out
    assert f"`atrex-inject revert --keep-edits {spec}` removes the probes still in it (if any), keeps your edits " \
           "and archives the workspace; then apply again" in out
    assert "--keep-edits" in snapshot.status(spec)["hint"]
    assert cli("revert", spec, "--keep-edits")[0] == 0
    assert src.read_bytes() == edited
    assert cli("apply", spec)[0] == 0


def test_revert_exit_codes_agree(project):
    """Exit 0 whenever the source ends at a clean hash the workspace or its archive recorded
    (reverted now, reverted twice, a workspace whose source is already clean); exit 2 when
    nothing known can be reverted to."""
    spec, src = project / SPEC, project / SRC
    code, out = cli("revert", spec)
    assert code == 2 and "nothing to revert" in out  # never applied
    assert cli("apply", spec)[0] == 0
    assert cli("revert", spec)[0] == 0
    code, out = cli("revert", spec, "--json")
    r = json.loads(out)
    assert code == 0 and r["reverted"] is False and r["state"] == "clean" and "history" in r["archived"]
    assert cli("revert", spec)[1].startswith(f"already clean: {SRC}")
    assert cli("apply", spec)[0] == 0
    shutil.copyfile(project / ".atrex/reduce_sumsq/clean/reduce_sumsq.cu", src)  # restored by hand
    assert cli("revert", spec)[0] == 0 and not (project / ".atrex/reduce_sumsq").exists()
    src.write_text(src.read_text() + "// edited since the revert\n")
    code, out = cli("revert", spec)
    assert code == 2 and "no archive of it" in out and "nothing to revert" in out


# ---- patch.unapply_keeping_edits on its own ----

CLEAN = "".join(f"line{i}\n" for i in range(40))
PATCHED = (CLEAN.replace("line5\n", "line5\nPROBE a\n").replace("line20\n", "PROBE b\nline20\n")
           .replace("line30\n", "line30 (rewritten)\n"))
PATCH = unified_diff(CLEAN, PATCHED, "k.cu")


@pytest.mark.parametrize("edit", [
    lambda t: t.replace("line9\n", "line9 edited\n"),
    lambda t: t.replace("line19\n", ""),  # next to a probe, not on it
    lambda t: "new first line\n" + t + "new last line\n",
    lambda t: t.replace("PROBE a\n", "").replace("line10\n", "line 10\n"),  # a probe removed by hand
    lambda t: t.replace("line30 (rewritten)\n", "line30\n"),  # a change undone by hand
])
def test_unapply_keeps_every_edit_off_the_changed_lines(edit):
    assert unapply_keeping_edits(PATCHED, edit(PATCHED), PATCH) == edit(CLEAN)


def test_unapply_names_each_conflicting_hunk():
    edited = PATCHED.replace("PROBE a\n", "PROBE a, edited\n").replace("line30 (rewritten)\n", "line30 (mine)\n")
    with pytest.raises(PatchConflict) as e:
        unapply_keeping_edits(PATCHED, edited, PATCH)
    assert [(c["hunk"], c["header"], c["patched_lines"]) for c in e.value.conflicts] == [
        (1, "@@ -4,6 +4,7 @@", [7, 7]), (3, "@@ -28,7 +30,7 @@", [33, 33])]


# ---- diff for review: the embedded recorder header as one line ----

@pytest.mark.parametrize("name", ["softmax_inline", "rmsnorm_nvrtc"])  # a raw string, and one with escapes
def test_a_kernel_py_diff_is_short_and_its_patch_file_stays_complete(project, tmp_path_factory, name):
    import hashlib

    from atrex_inject.cuda.python.rewrite import runtime_text
    spec = project / "examples" / "specs" / f"{name}.toml"
    m = snapshot.apply(spec).manifest
    src = project / m.source.path
    patch_file = project / ".atrex" / name / "instrumented.patch"
    full = patch_file.read_text()
    header = runtime_text()
    n, digest = header.count("\n"), hashlib.sha256(header.encode()).hexdigest()
    code, out = cli("diff", spec, "--json")
    assert code == 0, out
    r = json.loads(out)
    (e,) = r["embedded"]
    assert (e["name"], e["lines"], e["sha256"]) == ("atrex_timeline.cuh", n, digest)
    assert r["full"] is False and r["patch_files"] == [str(patch_file)]
    shown, lines = r["patch"].split("\n"), full.split("\n")
    k = e["patch_line"] - 1
    assert shown == lines[:k] + [f"+[… {n} lines: the recorder header atrex_timeline.cuh, embedded unchanged "
                                 f"(sha256 {digest}); `atrex-inject diff --full` shows them]"] + lines[k + n:]
    assert len(shown) < 160 and len(lines) > 1000
    assert cli("diff", spec)[1] == r["patch"]
    assert cli("diff", spec, "--full")[1] == full
    # the patch file as `git apply` takes it, both ways, in a copy of the two states
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    d = tmp_path_factory.mktemp("apply")
    (d / m.source.path).parent.mkdir(parents=True)
    (d / m.source.path).write_bytes((REPO / m.source.path).read_bytes())
    subprocess.run(["git", "apply", str(patch_file)], cwd=d, check=True, capture_output=True)
    assert sha(d / m.source.path) == sha(src) == m.source.instrumented_sha256
    subprocess.run(["git", "apply", "-R", str(patch_file)], cwd=d, check=True, capture_output=True)
    assert sha(d / m.source.path) == m.source.clean_sha256


def test_a_cu_diff_is_shown_whole(project):
    """A .cu file includes the header: nothing to collapse, `diff` is the patch as applied."""
    spec = project / SPEC
    assert cli("apply", spec)[0] == 0
    r = json.loads(cli("diff", spec, "--json")[1])
    assert r["embedded"] == [] and r["full"] is True
    assert r["patch"] == (project / ".atrex/reduce_sumsq/instrumented.patch").read_text()


def test_a_changed_header_is_shown_whole():
    """Only the exact text this atrex-inject embeds is collapsed: one changed line shows every line."""
    from atrex_inject.cuda.python.rewrite import runtime_text
    from atrex_inject.patch import for_review
    header = runtime_text()
    changed = header.replace("#define ATREX_TL_CLOCK 0", "#define ATREX_TL_CLOCK 1", 1)
    assert changed != header
    for text, collapsed in ((header, 1), (changed, 0)):
        patch = unified_diff('s = r"""\n"""\n', f's = r"""\n{text}"""\n', "k.py")
        shown, found = for_review(patch)
        assert len(found) == collapsed and (shown == patch) == (not collapsed)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_unapply_round_trips_and_keeps_edits_away_from_the_probes(data):
    """Byte-exact: unedited, the patch undone gives the clean text back; edits of lines that do
    not border a probe come through as they were made."""
    n = data.draw(st.integers(1, 30))
    clean = [f"line{i}\n" for i in range(n)]
    at = sorted(data.draw(st.sets(st.integers(0, n), max_size=5)))  # a probe before clean line p
    patched = []
    for i in range(n + 1):
        patched += [f"PROBE {i}\n"] if i in at else []
        patched += clean[i:i + 1]
    patch = unified_diff("".join(clean), "".join(patched), "k.cu")
    assert unapply_keeping_edits("".join(patched), "".join(patched), patch) == "".join(clean)
    free = [i for i in range(n) if i not in at and i + 1 not in at]
    edit = data.draw(st.sets(st.sampled_from(free), max_size=4)) if free else set()
    mine = {f"line{i}\n": f"line{i} (edited)\n" for i in edit}
    assert unapply_keeping_edits("".join(patched), "".join(mine.get(x, x) for x in patched), patch) == \
        "".join(mine.get(x, x) for x in clean)
