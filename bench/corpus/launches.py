"""Launch coverage on the corpus (issue 12): for the kernel of each CUDA file in files.toml, the
launches apply would capture in that file and those it reports as not captured, by kind.

    python bench/corpus/launches.py [--files bench/corpus/files.toml]

Reads the files run.py materialized under bench/corpus/work/ (run it first); writes nothing.
The file alone is scanned, as apply sees it without `launchers`: a kernel whose launches live in
another file shows none here.
"""
from __future__ import annotations

import argparse
import tomllib
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

from atrex_inject.cuda.launches import find_all
from atrex_inject.cuda.source import parse_source
from atrex_inject.errors import AtrexError

HERE = Path(__file__).resolve().parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=Path, default=HERE / "files.toml")
    args = ap.parse_args()
    total = Counter()
    for f in tomllib.loads(args.files.read_text())["file"]:
        if f["backend"] != "cuda":
            continue
        work = next((HERE / "work").glob(f["repo"].replace("/", "+") + "@*"), None)
        if work is None or not (work / f["path"]).is_file():
            print(f"{f['path']}: not materialized (run bench/corpus/run.py first)")
            continue
        path = work / f["path"]
        try:
            src = parse_source(path.read_text(), f["path"], f.get("declared_by"))
            kernel = src.kernel(f["kernel"])
            if kernel is None:
                print(f"{f['path']}: no kernel {f['kernel']}")
                continue
            spec = SimpleNamespace(kernel=f["kernel"], backend_keys=SimpleNamespace(declared_by=f.get("declared_by")),
                                   source=path, path=path, key_lines={})
            scan = find_all(spec, src, kernel, {})[0][0].scan
        except AtrexError as e:
            print(f"{f['path']}: refused: {str(e).splitlines()[0][:160]}")
            continue
        total["files"] += 1
        total["files with a launch captured"] += bool(scan.captured)
        total["captured"] += len(scan.captured)
        total["attribute calls repeated for the copy"] += len(scan.mirrors)
        for n in scan.not_captured:
            total[f"not captured: {n.via.split()[0]}"] += 1
        caught = ", ".join(f"{l.line} {l.via}" + (f" through {l.alias}" if l.alias else "") for l in scan.captured)
        missed = ", ".join(f"{n.line} {n.via}" for n in scan.not_captured)
        print(f"{f['path']} ({kernel.label}): captured [{caught}] not captured [{missed}]")
    print("\n".join(f"{k:40} {v}" for k, v in total.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
