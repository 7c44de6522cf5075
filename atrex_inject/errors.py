"""Errors a user can act on. Each carries the exit status the CLI returns and, where known, the
file and line it is about, so a message always says where to look and what to change."""
from __future__ import annotations


class AtrexError(Exception):
    """A usage or input error: exit status 2, nothing written."""

    exit_code = 2

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None, hint: str | None = None):
        self.message = message
        self.path = path
        self.line = line
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.path:
            where = f"{self.path}:{self.line}: " if self.line else f"{self.path}: "
        text = f"{where}{self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text

    def to_json(self) -> dict:
        return {"error": self.message, "path": self.path, "line": self.line, "hint": self.hint}


class SpecError(AtrexError):
    """The probe spec is malformed or asks for something impossible."""


class AnchorError(SpecError):
    """An anchor matched nothing or several places; the message lists the candidates."""


class SourceParseError(AtrexError):
    """The kernel source is outside what the island grammar recognizes."""


class SnapshotError(AtrexError):
    """apply/revert refused: the tree is not in the state the manifest describes."""


class CaptureError(AtrexError):
    """A raw capture cannot be decoded: wrong magic, version, source identity, or a short file.
    `check` names the validation check the refusal fails, where decode knows it (validate.py)."""

    def __init__(self, message: str, *, check: str | None = None, **where):
        self.check = check
        super().__init__(message, **where)


def user_error(e: Exception) -> AtrexError:
    """The library's one error boundary: any exception becomes an AtrexError (exit 2) with a hint,
    so no input, however bad, ends in a traceback. Known classes get a specific message; anything
    else is reported as a bug in atrex-inject, still naming what failed."""
    if isinstance(e, AtrexError):
        return e
    if isinstance(e, UnicodeError):
        return AtrexError(f"a file is not valid UTF-8 text ({e})", hint="save the file as UTF-8 and run again")
    if isinstance(e, OSError):
        path = " -> ".join(str(p) for p in (e.filename, e.filename2) if p is not None) or None
        return AtrexError(e.strerror or str(e) or type(e).__name__, path=path,
                          hint="check that the path exists, its permissions, and the free disk space")
    if isinstance(e, RecursionError):
        return AtrexError("an input is nested too deeply to read", hint="flatten the nested arrays or objects")
    if isinstance(e, MemoryError):
        return AtrexError("out of memory while reading an input", hint="check the input's size")
    return AtrexError(f"internal error {type(e).__name__}: {e}",
                      hint="this is a bug in atrex-inject; please report it with the command and its input files")
