"""File primitives every writer uses: sha256, atomic writes (temp file, fsync, rename), the
cleanup of temps a killed run left behind, and the advisory lock that keeps writers one at a time.

A replaced file keeps its mode and, where the platform allows, its owner and group; a new file
gets the user's umask. The rename gives the file a new inode, so other hard links to it keep the
old content (docs/recovery.md says why this is the chosen trade-off).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import tempfile
import time
from pathlib import Path

from .errors import SnapshotError

TEMP_SUFFIX = ".tmp"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path) -> str:
    """Read in blocks (hashlib.file_digest): a program's input files may be larger than memory."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _temp_prefix(path: Path) -> str:
    return f".{path.name}."


def inside(root: Path, path: Path) -> Path:
    """`path`, refused when it lies outside `root` or when it, or a folder between `root` and it,
    is a symbolic link: a write there would land wherever the link leads (the project tree's own
    state is written inside the tree, links included)."""
    try:
        rel = Path(path).relative_to(root)
    except ValueError:
        raise SnapshotError(f"{path} is outside the project {root}; nothing was written there",
                            hint="atrex-inject writes only inside the project tree") from None
    at = Path(root)
    for part in rel.parts:
        at = at / part
        if at.is_symlink():
            raise SnapshotError(f"{at} is a symbolic link; atrex-inject writes only inside the project {root}, "
                                "links included, so nothing was written there", path=str(at),
                                hint=f"remove the link {at} (or replace it with a real folder) and run again")
        if not at.exists():
            break  # nothing below a missing folder exists yet, links included
    return Path(path)


def write_atomic(path: str | Path, data: bytes | str, root: Path | None = None) -> None:
    """Either the old content or the new one is on disk, never a mixture: a crash leaves no torn
    file (only a temp that remove_stale_temps deletes on the next run). With `root`, `path` must
    lie inside it with no symbolic link on the way (`inside`)."""
    path = Path(path) if root is None else inside(root, Path(path))
    if isinstance(data, str):
        data = data.encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_temp_prefix(path), suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            st = path.stat()
        except FileNotFoundError:
            os.chmod(tmp, 0o666 & ~_umask())
        else:
            os.chmod(tmp, st.st_mode & 0o7777)
            with contextlib.suppress(PermissionError):
                os.chown(tmp, st.st_uid, st.st_gid)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def remove_stale_temps(path: str | Path, root: Path) -> list[Path]:
    """Delete the temps write_atomic left next to `path` (inside `root`, no link on the way) when a
    run was killed. Call only while holding the lock: then no live writer owns them."""
    path = inside(root, Path(path))
    stale = [p for p in path.parent.glob(f"{_temp_prefix(path)}*{TEMP_SUFFIX}")
             if len(p.name) == len(_temp_prefix(path)) + 8 + len(TEMP_SUFFIX)]
    for p in stale:
        p.unlink(missing_ok=True)
    return stale


def source_lock_path(source: Path) -> Path:
    """A lock per source file, shared by every project tree that contains it (two --root values
    may both reach one file): in the machine's temp folder, named by the file's real path."""
    d = Path(tempfile.gettempdir()) / f"atrex-locks-{os.getuid()}"
    d.mkdir(mode=0o700, exist_ok=True)
    return d / f"{sha256_bytes(str(Path(source).resolve()).encode())[:32]}.lock"


@contextlib.contextmanager
def locked(lock_path: Path, what: str, shared: bool = False, wait_s: float = 0.0):
    """Hold an advisory flock on `lock_path` (created if needed, never deleted: deleting a lock
    file lets two processes lock two different files). A writer takes it exclusively and gives up
    at once with a message naming the holder; readers share it and wait up to `wait_s`."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666 & ~_umask())
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                    raise SnapshotError(f"another atrex-inject apply/revert is working on {what} "
                                        f"(process {holder}); nothing was changed", path=str(lock_path),
                                        hint="wait for it to finish, then run this command again") from None
                time.sleep(0.02)
        if not shared:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)
