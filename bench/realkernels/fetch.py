"""Fetch the benchmark's public kernel sources at their pinned versions (kernels.toml `[package.*]`):
`pip download` each wheel into the ignored cache .cache/, check its sha256 against the pin, and
extract only the files the kernels need into the ignored folder .src/<package>/ (the wheel's
`strip` prefix removed), which run.py copies into each kernel's work folder. Nothing of theirs is
ever committed; run it where PyPI is reachable and carry .src/ to the GPU host.

    python3 bench/realkernels/fetch.py [--only flashinfer,cupy] [--wheel-dir DIR]
"""
from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path, PurePosixPath

HERE = Path(__file__).resolve().parent
CATALOG = HERE / "kernels.toml"
CACHE = HERE / ".cache"
SRC = HERE / ".src"


def load_catalog(path: Path = CATALOG) -> dict:
    """kernels.toml as a dict; a file that is not TOML ends the run naming the file and line."""
    try:
        return tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise SystemExit(f"{path}: {e}: fix the file (bench/realkernels/README.md says what a row holds)")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download(name: str, pkg: dict, wheel_dir: Path | None) -> Path:
    """The package's pinned wheel, from WHEEL_DIR when it holds it, else from the registry; refused
    unless its sha256 is the pin's."""
    wheel = (wheel_dir or CACHE) / pkg["wheel"]
    if not wheel.exists():
        CACHE.mkdir(exist_ok=True)
        wheel = CACHE / pkg["wheel"]
        argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(CACHE),
                f"{pkg['dist']}=={pkg['version']}", *pkg.get("pip_args", [])]
        if subprocess.run(argv).returncode != 0 or not wheel.exists():
            raise SystemExit(f"kernels.toml [package.{name}]: pip download of {pkg['dist']}=={pkg['version']} did "
                             f"not give {pkg['wheel']}: check the network, or pass --wheel-dir with the wheel")
    got = sha256(wheel)
    if got != pkg["sha256"]:
        raise SystemExit(f"kernels.toml [package.{name}]: {wheel} has sha256 {got}, the pin is {pkg['sha256']}: "
                         "delete the file and fetch again; if the registry's file changed, the pin is the truth")
    return wheel


def wanted(member: str, patterns: list[str]) -> bool:
    """A glob matches component for component (`*` within one); `DIR/**` matches everything under DIR."""
    p = PurePosixPath(member)
    return any(member.startswith(pat[:-2]) if pat.endswith("/**") else
               p.match(pat) and len(p.parts) == len(PurePosixPath(pat).parts) for pat in patterns)


def extract(name: str, pkg: dict, wheel: Path) -> int:
    """The wheel's files matching the package's `files` globs (`wanted`), written
    under .src/<name>/ without the `strip` prefix; returns the bytes written."""
    dest = SRC / name
    shutil.rmtree(dest, ignore_errors=True)
    total = 0
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if info.is_dir() or not wanted(info.filename, pkg["files"]):
                continue
            rel = PurePosixPath(info.filename).relative_to(pkg.get("strip", ""))
            out = dest / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(z.read(info))
            total += info.file_size
    if total == 0:
        raise SystemExit(f"kernels.toml [package.{name}]: no file of {wheel.name} matches `files` {pkg['files']}")
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="packages to fetch, comma-separated (default: all)")
    ap.add_argument("--wheel-dir", type=Path, help="a folder that already holds the pinned wheels")
    a = ap.parse_args()
    packages = load_catalog()["package"]
    names = a.only.split(",") if a.only else list(packages)
    unknown = [n for n in names if n not in packages]
    if unknown:
        print(f"--only: {', '.join(unknown)} not among {', '.join(packages)}", file=sys.stderr)
        return 2
    for n in names:
        pkg = packages[n]
        size = extract(n, pkg, download(n, pkg, a.wheel_dir))
        print(f"{n}: {pkg['dist']}=={pkg['version']} sha256 ok, {size / 1e6:.1f} MB into {(SRC / n).relative_to(HERE.parents[1])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
