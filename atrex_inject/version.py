"""What `atrex-inject --version` prints: the package version and, where it can be known, the commit
it was built from, so that a report of a problem names the code that had it. A source checkout
answers with git (the commit, and "+modified" when tracked files differ from it); an install from a
git URL with the commit pip recorded; otherwise the version alone says what it can."""
from __future__ import annotations

import json
import subprocess
from importlib import metadata
from pathlib import Path

from . import __version__

HERE = Path(__file__).resolve().parent


def _git(*args: str) -> str | None:
    try:
        r = subprocess.run(["git", "-C", str(HERE), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def _installed_commit() -> str | None:
    try:
        info = json.loads(metadata.distribution("atrex-inject").read_text("direct_url.json") or "{}")
    except (metadata.PackageNotFoundError, ValueError):
        return None
    commit = info.get("vcs_info", {}).get("commit_id") if isinstance(info, dict) else None
    return commit[:12] if isinstance(commit, str) else None


def describe() -> str:
    """`atrex-inject 0.1.0 (commit 1a2b3c4d5e6f+modified)`, or the reason no commit is named."""
    commit = _git("rev-parse", "--short=12", "HEAD") if (HERE.parent / ".git").exists() else None
    if commit:
        dirty = _git("status", "--porcelain", "--untracked-files=no", "--", str(HERE))
        build = f"commit {commit}{'+modified' if dirty else ''}"
    else:
        installed = _installed_commit()
        build = f"commit {installed}" if installed else "commit unknown: installed without git metadata"
    return f"atrex-inject {__version__} ({build})"
