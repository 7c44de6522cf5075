"""Corpus check (issue 13): the rewriters on kernel files nobody here wrote.

    python bench/corpus/run.py MIRRORS_DIR [--only TEXT] [--timeout S] [--no-compile] [--keep]

MIRRORS_DIR holds bare git mirrors named `owner+name/repo` (what the `fetch` tool leaves under
/work/.mirror). For each `[[file]]` of files.toml this script:

1. writes the file, its folder and the include folders it names (from the same mirror and commit;
   `deps` add another repository's folders, e.g. a pinned CUTLASS submodule) into the ignored
   folder bench/corpus/work/, and checks the blob id;
2. builds a spec for the named kernel from candidates found by the tool's own parser: entry, exit,
   the largest loop (loop-begin), a call (before; one inside that loop when there is one) and a PTX
   opcode of an asm statement (after) when the kernel has one;
3. runs `atrex-inject apply`, compiles clean and instrumented (cuda: nvcc for sm_90a; cutedsl: a
   Python syntax check only, the DSL needs a driver program and a GPU to compile a kernel),
   runs `atrex-inject revert` and compares the bytes with the blob;
4. prints where every applied site landed (file:line and the lines around it), then the rates and
   the failures with the first line of each error.

Third-party source is only ever written under bench/corpus/work/ (git-ignored). CI does not run
this; compiles are sequential and bounded by --timeout.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import io
import time
import tomllib
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
WORK = HERE / "work"
NVCC_ARCH = ["-gencode=arch=compute_90a,code=sm_90a", "-std=c++17"]
NVCC_COMMON = ["--expt-relaxed-constexpr", "--expt-extended-lambda", "-w"]
CONTEXT = 3
EXTRA_INCLUDES: list[str] = []  # --include: system headers the machine lacks (e.g. cuBLAS from the nvidia-cublas wheel)


def git(mirror: Path, *args: str, binary: bool = False):
    out = subprocess.run(["git", f"--git-dir={mirror}", *args], capture_output=True, check=True)
    return out.stdout if binary else out.stdout.decode()


def mirror_of(mirrors: Path, repo: str) -> Path:
    return mirrors / repo.replace("/", "+") / "repo"


def materialize(mirror: Path, commit: str, dest: Path, dirs: list[str]) -> None:
    """Extract the named folders (or files) of COMMIT into dest (once per folder)."""
    todo = [d for d in dirs if not (dest / d).exists()]
    if not todo:
        return
    data = git(mirror, "archive", "--format=tar", commit, "--", *todo, binary=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        tf.extractall(dest, filter="data")


def tree_for(mirrors: Path, f: dict) -> Path:
    """The work tree for the file's repository and commit, holding what its compile needs."""
    root = WORK / f"{f['repo'].replace('/', '+')}@{f['commit'][:10]}"
    root.mkdir(parents=True, exist_ok=True)
    m = mirror_of(mirrors, f["repo"])
    parent = str(Path(f["path"]).parent)
    deps = [d["at"] for d in f.get("deps", [])]
    under = lambda p, q: p == q or p.startswith(q.rstrip("/") + "/")
    want = [d for d in f.get("includes", []) if d != "." and not any(under(d, a) for a in deps)]
    want.append(parent if parent != "." else f["path"])
    want = sorted({d for d in want if not any(d != o and under(d, o) for o in want)})
    materialize(m, f["commit"], root, want)
    for dep in f.get("deps", []):
        at = root / dep["at"]
        at.mkdir(parents=True, exist_ok=True)
        materialize(mirror_of(mirrors, dep["repo"]), dep["commit"], at, dep["dirs"])
    return root


# ---------------------------------------------------------------- spec generation (tool's parser)

def _q(s: str) -> str:
    return json.dumps(s)  # a TOML basic string for what appears in kernel code


def _occ(matches, target) -> int:
    return next(i for i, m in enumerate(matches, 1) if m.stmt is target[0] and m.what == target[1])


def cuda_sites(text: str, kernel: str, path: str):
    """Sites for the kernel and, per site, the clean line its anchor is on (None: entry/exit)."""
    from atrex_inject.cuda import anchors, source
    from atrex_inject.anchoring import squash
    src = source.parse_source(text, path)
    k = src.kernel(kernel)
    base = [("entry", "{ entry = true }", "entry", None, ""), ("exit", "{ exit = true }", "exit", None, "")]
    if k is None:  # let apply itself say why (its refusal is what the corpus measures)
        return base, None
    probe = lambda kind, pat="": SimpleNamespace(anchor=SimpleNamespace(kind=kind, pattern=pat))
    try:
        _, loops = anchors.candidates(k, probe("loop"))
        _, calls = anchors.candidates(k, probe("call"))
        _, ptxs = anchors.candidates(k, probe("ptx"))
    except Exception:  # a body the grammar rejects
        return base, None  # apply reports the parse error
    sites = list(base)
    main = max(loops, key=lambda m: (m.stmt.end - m.stmt.start, -m.stmt.start), default=None)
    if main:
        pat = main.stmt.text
        hits = [m for m in loops if squash(pat) in squash(m.stmt.text)]
        occ = _occ(hits, (main.stmt, main.what))
        sites.append(("main_loop", f"{{ loop = {_q(pat)}, occurrence = {occ} }}", "loop-begin",
                      src.lines.line(main.stmt.start), pat))
    inner = [m for m in calls if main and main.stmt.start < m.stmt.start < main.stmt.end] or calls
    if inner:
        c = inner[0]
        callee = c.what.removeprefix("call ")
        from atrex_inject.anchoring import call_matches
        hits = [m for m in calls if call_matches(m.what.removeprefix("call "), callee)]
        occ = _occ(hits, (c.stmt, c.what))
        sites.append(("a_call", f"{{ call = {_q(callee)}, occurrence = {occ} }}", "before",
                      src.lines.line(c.stmt.start), callee))
    if ptxs:
        p = ptxs[0]
        op = p.what.removeprefix("ptx ")
        from atrex_inject.cuda.ptx import opcode_matches
        hits = [m for m in ptxs if opcode_matches(m.what.removeprefix("ptx "), op)]
        occ = _occ(hits, (p.stmt, p.what))
        sites.append(("a_ptx", f"{{ ptx = {_q(op)}, occurrence = {occ} }}", "after",
                      src.lines.line(p.stmt.start), op))
    return sites, None


def cutedsl_sites(text: str, kernel: str):
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider
    from atrex_inject.cutedsl import rewrite as rw
    from atrex_inject.anchoring import call_matches, squash
    module = cst.parse_module(text)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    pos = wrapper.resolve(PositionProvider)
    ks = [n for n in pos if isinstance(n, cst.FunctionDef) and rw._is_kernel(n) and n.name.value == kernel]
    if not ks:
        return None, f"no @cute.kernel {kernel!r}"
    col = rw._Statements()
    ks[0].visit(col)
    sites = [("entry", "{ entry = true }", "entry", None, ""), ("exit", "{ exit = true }", "exit", None, "")]
    loops = []
    for n in col.stmts:
        if isinstance(n, (cst.For, cst.While)):
            header = (f"for {module.code_for_node(n.target)} in {module.code_for_node(n.iter)}"
                      if isinstance(n, cst.For) else f"while {module.code_for_node(n.test)}")
            loops.append((n, header))
    main = None
    if loops:
        span = lambda n: pos[n].end.line - pos[n].start.line
        main = max(loops, key=lambda x: (span(x[0]), -pos[x[0]].start.line))
        hits = [x for x in loops if squash(main[1]) in squash(x[1])]
        occ = next(i for i, x in enumerate(hits, 1) if x[0] is main[0])
        sites.append(("main_loop", f"{{ loop = {_q(main[1])}, occurrence = {occ} }}", "loop-begin",
                      pos[main[0]].start.line, main[1]))
    calls = []
    for n in col.stmts:
        v = rw._Calls()
        for part in rw._own_parts(n):
            part.visit(v)
        calls.extend((n, c) for c in v.names)
    inside = [c for c in calls if main and pos[main[0]].start.line < pos[c[0]].start.line <= pos[main[0]].end.line]
    pick = (inside or [c for c in calls if "." in c[1]] or calls)
    if pick:
        n, callee = pick[0]
        hits = [c for c in calls if call_matches(c[1], callee)]
        occ = next(i for i, c in enumerate(hits, 1) if c[0] is n and c[1] == callee)
        sites.append(("a_call", f"{{ call = {_q(callee)}, occurrence = {occ} }}", "before", pos[n].start.line, callee))
    return sites, None


def write_spec(path: Path, name: str, f: dict, source_rel: str, sites) -> None:
    lines = ["version = 1", f"name = {_q(name)}", 'question = "corpus check: does each site land where the spec says"',
             f"backend = {_q(f['backend'])}", f"source = {_q(source_rel)}", f"kernel = {_q(f['kernel'])}", ""]
    for sname, anchor, position, _, _ in sites:
        lines += ["[[site]]", f"name = {_q(sname)}", f"anchor = {anchor}", f"position = {_q(position)}", ""]
    path.write_text("\n".join(lines))


# ---------------------------------------------------------------- compile

def first_error(text: str) -> str:
    for line in text.splitlines():
        if re.search(r"\berror\b|Error|fatal", line):
            return line.strip()[:240]
    lines = [l for l in text.splitlines() if l.strip()]
    return (lines[0].strip()[:240] if lines else "(no output)")


def nvcc(tree: Path, rel: str, f: dict, extra: list[str], timeout: int) -> tuple[bool | None, str]:
    cmd = ["nvcc", *NVCC_ARCH, *NVCC_COMMON, *f.get("flags", [])]
    cmd += [f"-I{tree / d}" for d in f.get("includes", [])] + [f"-I{d}" for d in EXTRA_INCLUDES] + extra
    if not rel.endswith(".cu"):
        cmd += ["-x", "cu"]
    cmd += ["-c", str(tree / rel), "-o", os.devnull]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tree / Path(rel).parent)
    except subprocess.TimeoutExpired:
        return None, f"timeout after {timeout}s"
    return p.returncode == 0, first_error(p.stdout + p.stderr)


def py_syntax(path: Path) -> tuple[bool, str]:
    try:
        compile(path.read_text(), str(path), "exec")
        return True, ""
    except SyntaxError as e:
        return False, f"SyntaxError: {e.msg} (line {e.lineno})"


# ---------------------------------------------------------------- placement listing

def placements(text: str, rel: str, sites) -> list[str]:
    lines = text.splitlines()
    out = []
    for sname, anchor, position, clean_line, what in sites:
        hits = [i for i, l in enumerate(lines) if "atrex:" in l and re.search(rf"site {re.escape(sname)} \(id", l)]
        want = f"spec: {position} {anchor}" + (f" [clean line {clean_line}]" if clean_line else "")
        if not hits:
            out.append(f"  {sname}: {want}\n    (no inserted line names this site)")
            continue
        for i in hits[:3]:
            lo, hi = max(0, i - CONTEXT), min(len(lines), i + CONTEXT + 1)
            ctx = "\n".join(f"    {'>' if j == i else ' '}{j + 1:6d}| {lines[j][:160]}" for j in range(lo, hi))
            out.append(f"  {sname} -> {rel}:{i + 1}   {want}\n{ctx}")
        if len(hits) > 3:
            out.append(f"  {sname}: {len(hits) - 3} more insertions")
    return out


# ---------------------------------------------------------------- main

def tool() -> list[str]:
    exe = Path(sys.executable).with_name("atrex-inject")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "atrex_inject.cli"]


def run_one(mirrors: Path, idx: int, f: dict, args) -> dict:
    r = {"id": f"{f['repo']}:{f['path']}", "backend": f["backend"], "apply": False, "revert_exact": None,
         "clean": None, "inst": None, "errors": [], "placement": []}
    m = mirror_of(mirrors, f["repo"])
    blob = git(m, "rev-parse", f"{f['commit']}:{f['path']}").strip()
    if blob != f["blob"]:
        r["errors"].append(f"blob mismatch: files.toml {f['blob']}, mirror {blob}")
        return r
    clean = git(m, "show", f"{f['commit']}:{f['path']}", binary=True)
    tree = tree_for(mirrors, f)
    target = tree / f["path"]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(clean)
    shutil.rmtree(tree / ".atrex", ignore_errors=True)
    text = clean.decode("utf-8", errors="surrogateescape")
    try:
        sites, why = (cuda_sites(text, f["kernel"], f["path"]) if f["backend"] == "cuda"
                      else cutedsl_sites(text, f["kernel"]))
    except Exception as e:
        sites, why = None, f"candidate search: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    if sites is None:
        r["errors"].append(f"spec: {why}")
        return r
    r["sites"] = len(sites)
    specdir = tree / ".corpus_specs"
    specdir.mkdir(exist_ok=True)
    spec = specdir / f"c{idx:03d}.toml"
    write_spec(spec, f"c{idx:03d}", f, os.path.relpath(target, specdir), sites)
    inc = subprocess.run(tool() + ["include-dir"], capture_output=True, text=True).stdout.strip()
    if f["backend"] == "cuda" and not args.no_compile:
        r["clean"], e = nvcc(tree, f["path"], f, [], args.timeout)
        if not r["clean"]:
            r["errors"].append(f"clean compile: {e}")
    p = subprocess.run(tool() + ["apply", str(spec), "--root", str(tree)], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        r["errors"].append(f"apply: {first_line(p.stdout + p.stderr)}")
        r["apply_out"] = (p.stdout + p.stderr).strip()
        if target.read_bytes() != clean:
            r["errors"].append("apply failed but changed the file")
            target.write_bytes(clean)
        return r
    r["apply"] = True
    inst = target.read_bytes().decode("utf-8", errors="surrogateescape")
    r["placement"] = placements(inst, f["path"], sites)
    if f["backend"] == "cuda":
        if r["clean"] and not args.no_compile:
            r["inst"], e = nvcc(tree, f["path"], f, [f"-I{inc}"], args.timeout)
            if not r["inst"]:
                r["errors"].append(f"instrumented compile: {e}")
    else:
        try:
            compile(text, f["path"], "exec")
            r["clean"] = True
        except SyntaxError:
            r["clean"] = False
        r["inst"], e = py_syntax(target)
        if not r["inst"]:
            r["errors"].append(f"instrumented python: {e}")
    p = subprocess.run(tool() + ["revert", str(spec), "--root", str(tree)], capture_output=True, text=True, timeout=300)
    r["revert_exact"] = p.returncode == 0 and target.read_bytes() == clean
    if not r["revert_exact"]:
        r["errors"].append(f"revert: rc {p.returncode}, bytes {'equal' if target.read_bytes() == clean else 'differ'}: "
                           f"{first_line(p.stdout + p.stderr)}")
        target.write_bytes(clean)
    return r


def first_line(s: str) -> str:
    for l in s.splitlines():
        if l.strip():
            return l.strip()[:240]
    return "(no output)"


def pct(a: int, b: int) -> str:
    return f"{a}/{b} ({100 * a / b:.0f}%)" if b else "0/0"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mirrors", type=Path)
    ap.add_argument("--files", type=Path, default=HERE / "files.toml")
    ap.add_argument("--only", default="", help="run only entries whose repo:path contains this text")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per nvcc run")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the per-file results here")
    ap.add_argument("--include", action="append", default=[], metavar="DIR",
                    help="extra -I for every compile (headers this machine's toolkit lacks, e.g. cublas_v2.h)")
    args = ap.parse_args()
    EXTRA_INCLUDES.extend(str(Path(d).resolve()) for d in args.include)
    files = tomllib.loads(args.files.read_text())["file"]
    results = []
    t0 = time.time()
    for i, f in enumerate(files):
        if args.only and args.only not in f"{f['repo']}:{f['path']}":
            continue
        t = time.time()
        try:
            r = run_one(args.mirrors, i, f, args)
        except Exception as e:
            r = {"id": f"{f['repo']}:{f['path']}", "backend": f["backend"], "apply": False, "revert_exact": None,
                 "clean": None, "inst": None, "errors": [f"runner: {type(e).__name__}: {e}"], "placement": []}
        r["seconds"] = round(time.time() - t, 1)
        results.append(r)
        state = "applied" if r["apply"] else "not applied"
        print(f"[{len(results)}] {r['id']} ({f['kernel']}): {state}, clean={r['clean']}, inst={r['inst']}, "
              f"revert_exact={r['revert_exact']}, {r['seconds']}s", flush=True)
    print("\n== placement (every applied site: where it landed, with the lines around it)")
    for r in results:
        if r["placement"]:
            print(f"\n{r['id']}")
            print("\n".join(r["placement"]))
    n = len(results)
    applied = [r for r in results if r["apply"]]
    reverted = [r for r in applied if r["revert_exact"]]
    cuda_clean = [r for r in applied if r["backend"] == "cuda" and r["clean"]]
    cuda_inst = [r for r in cuda_clean if r["inst"]]
    dsl = [r for r in applied if r["backend"] == "cutedsl"]
    print("\n== rates")
    print(f"files                                     {n} from {len({r['id'].split(':')[0] for r in results})} repositories "
          f"({time.time() - t0:.0f}s)")
    print(f"apply                                     {pct(len(applied), n)}")
    print(f"revert-exact (of applied)                 {pct(len(reverted), len(applied))}")
    print(f"clean compiles (cuda, applied)            {pct(len(cuda_clean), len([r for r in applied if r['backend'] == 'cuda']))}")
    print(f"instrumented compiles where clean does    {pct(len(cuda_inst), len(cuda_clean))}")
    print(f"cutedsl instrumented is valid Python      {pct(len([r for r in dsl if r['inst']]), len(dsl))}")
    print(f"sites applied                             {sum(r.get('sites', 0) for r in applied)}")
    print("\n== failures (first line of each error)")
    for r in results:
        for e in r["errors"]:
            print(f"{r['id']}: {e}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
