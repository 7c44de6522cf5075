"""The run record `run.json` (docs/format.md): which program `atrex-inject capture` ran, so that
the capture names its binary and `verdict` can require that arm B of the measurement ran the same
one. capture.py is its one writer, validate.py its one reader. A capture that fails leaves
`capture-failed.json` (what failed) in the folder instead, so that a later command on the folder
says the capture failed rather than that something is missing.

The program is CMD[0] found as the OS finds it (a name without `/` on PATH, anything else as a
path). Every later argv entry that names an existing regular file when the run starts is taken
for an input (an interpreter's script, a data file) and hashed with the path as given. Each file
is hashed before the run and again after it: a file that changed meanwhile (a program rebuilt
during the capture) refuses the capture, since the folder could not say which build it holds.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from .errors import CaptureError
from .fsio import sha256_file, write_atomic

FILE_NAME = "run.json"
FAILED_NAME = "capture-failed.json"
FORMAT = "atrex-run"
VERSION = 1
SHA256 = re.compile(r"^[0-9a-f]{64}$")
REDO = "capture again with atrex-inject capture (or move run.json out of the folder: the binary is then unchecked)"


@dataclass(frozen=True)
class FileHash:
    path: str
    sha256: str

    def to_json(self) -> dict:
        return {"path": self.path, "sha256": self.sha256}


@dataclass(frozen=True)
class RunRecord:
    argv: tuple[str, ...]
    program: FileHash
    files: tuple[FileHash, ...]  # argv entries naming existing regular files, in argv order

    def hashes(self) -> set[str]:
        return {self.program.sha256, *(f.sha256 for f in self.files)}

    def identity(self) -> dict:
        """What a capture's identity says of its run (validate.identity)."""
        return {"argv": list(self.argv), "program": self.program.to_json(), "files": [f.to_json() for f in self.files]}

    def to_json(self) -> dict:
        return {"format": FORMAT, "version": VERSION, **self.identity()}


def _hash(path: str, what: str) -> str:
    try:
        return sha256_file(path)
    except OSError as e:
        raise CaptureError(f"cannot read {what} {path} to record which program ran: {e.strerror}", path=path,
                           hint="make it readable, or run the program from a readable copy") from None


def record(cmd: list[str], env: dict[str, str]) -> RunRecord:
    """The run record of `cmd` as it is now (call it before the run)."""
    found = shutil.which(cmd[0], path=env.get("PATH", os.defpath))
    if found is None or not os.path.isfile(found):  # which accepts a FIFO, whose hashing would wait for a writer
        raise CaptureError(f"program {cmd[0]!r} is not an executable file"
                           + ("" if "/" in cmd[0] else " on PATH"),
                           hint="give the path of the built program, e.g. ./build/prog, or put its folder on PATH")
    # os.path.isfile: an argument that cannot be a path (too long, a NUL byte) is simply not a file
    files = dict.fromkeys(a for a in cmd[1:] if os.path.isfile(a))  # each path once, in argv order
    return RunRecord(tuple(cmd), FileHash(found, _hash(found, "program")),
                     tuple(FileHash(a, _hash(a, "argument file")) for a in files))


def check_unchanged(rec: RunRecord) -> None:
    """CaptureError naming each file the record hashed that is not the same after the run."""
    changed = []
    for what, f in (("program", rec.program), *(("argument file", f) for f in rec.files)):
        now = _hash(f.path, what) if os.path.isfile(f.path) else None
        if now != f.sha256:
            changed.append(f"{what} {f.path} ({'removed' if now is None else 'sha256 ' + now[:16] + '…'}, "
                           f"was {f.sha256[:16]}… when the run started)")
    if changed:
        raise CaptureError("changed during the capture, so the capture names no single build: " + "; ".join(changed),
                           hint="finish building first, then capture again into an empty folder (an output file "
                                "named on the command line that already exists is taken for an input: remove it)")


def write(out_dir: str | Path, rec: RunRecord) -> Path:
    path = Path(out_dir) / FILE_NAME
    write_atomic(path, json.dumps(rec.to_json(), indent=2) + "\n")
    return path


def write_failure(out_dir: str | Path, message: str) -> None:
    """Mark the folder as a failed capture (a later successful capture into it removes the mark)."""
    write_atomic(Path(out_dir) / FAILED_NAME, json.dumps({"format": FORMAT, "failed": message}, indent=2) + "\n")


def clear_failure(out_dir: str | Path) -> None:
    (Path(out_dir) / FAILED_NAME).unlink(missing_ok=True)


def failure(capture_dir: str | Path) -> str | None:
    """Why the capture into the folder failed, when it did (None: no mark, or one that cannot be read)."""
    try:
        doc = json.loads((Path(capture_dir) / FAILED_NAME).read_text())
    except (OSError, ValueError, RecursionError):
        return None
    return doc.get("failed") if isinstance(doc, dict) and isinstance(doc.get("failed"), str) else None


def _file_hash(v, field: str) -> FileHash:
    if not isinstance(v, dict):
        raise ValueError(f"field {field!r} must be an object {{path, sha256}}, not {type(v).__name__}")
    if not (isinstance(v.get("path"), str) and v["path"]):
        raise ValueError(f"field '{field}.path' must be a non-empty string")
    if not (isinstance(v.get("sha256"), str) and SHA256.match(v["sha256"])):
        raise ValueError(f"field '{field}.sha256' must be 64 lowercase hex digits")
    return FileHash(v["path"], v["sha256"])


def _parse(doc) -> RunRecord:
    if not isinstance(doc, dict):
        raise ValueError(f"must be a JSON object, not {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise ValueError(f"field 'format' is {doc.get('format')!r}, not {FORMAT!r}")
    v = doc.get("version")
    if not isinstance(v, int) or isinstance(v, bool):
        raise ValueError(f"field 'version' must be an integer, not {type(v).__name__}")
    if v != VERSION:
        raise ValueError(f"field 'version' is {v}: this atrex-inject reads version {VERSION}")
    argv = doc.get("argv")
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        raise ValueError("field 'argv' must be a non-empty list of strings")
    files = doc.get("files")
    if not isinstance(files, list):
        raise ValueError(f"field 'files' must be a list, not {type(files).__name__}")
    return RunRecord(tuple(argv), _file_hash(doc.get("program"), "program"),
                     tuple(_file_hash(f, f"files[{i}]") for i, f in enumerate(files)))


def read(capture_dir: str | Path) -> RunRecord | None:
    """The folder's run record; None when it has none (captures made before run records, or by
    running the program directly). A damaged one is refused (exit 2) naming the field."""
    path = Path(capture_dir) / FILE_NAME
    if not path.exists():
        return None
    try:
        return _parse(json.loads(path.read_text()))
    except OSError as e:
        raise CaptureError(f"cannot read the run record: {e.strerror}", path=str(path), hint=REDO) from None
    except (ValueError, RecursionError) as e:  # json's decode errors are ValueErrors
        raise CaptureError(f"not a run record: {e}", path=str(path), hint=REDO) from None
