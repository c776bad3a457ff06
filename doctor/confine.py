"""Every write under a target (sysroot, demo overlay, export dir, undo) goes through here.

Why: bundles and journals are hostile input and the doctor runs as root. A path string is
never handed to ``open()``; instead the target root is opened as a directory fd and each
component is opened with ``O_DIRECTORY | O_NOFOLLOW`` relative to its parent, so a symlink
(absolute or relative, planted by a bundle or swapped in between plan and apply) is refused
rather than followed out of the target. The walk happens at write time, so the check and the
write see the same directory. Files are replaced atomically (temp file in the parent fd,
fsync, ``os.replace`` with dir fds, fsync of the directory); modes are ``mode & 0o777``
(never setuid/setgid/sticky); an existing directory is never chmod'ed; symlinks are created
only as the final component and never followed.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat as _stat
from contextlib import contextmanager
from typing import Iterator

from .errors import DoctorError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_UNSET = object()


class ConfinementError(DoctorError):
    """A write (or read) under a target was refused: the path would leave the target."""

    def __init__(self, root: str, path: str, reason: str) -> None:
        super().__init__(f"refusing {path!r} under {root}: {reason}")
        self.root = root
        self.path = path
        self.reason = reason



def _lstat_at(fd: int, name: str) -> os.stat_result | None:
    """lstat of ``name`` in the directory ``fd``; None when it does not exist."""
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None

def parts(root: str, path: str) -> list[str]:
    """The components of a target-relative path ("/etc/x" is ``root``/etc/x).

    ``..`` and NUL are refused outright: no normalisation that could hide an escape.
    """
    if not isinstance(path, str) or "\0" in path:
        raise ConfinementError(root, str(path), "not a valid path")
    out = [p for p in path.split("/") if p not in ("", ".")]
    if any(p == ".." for p in out):
        raise ConfinementError(root, path, "'..' component")
    return out


def _refusal(dfd: int, name: str, root: str, path: str) -> ConfinementError:
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except OSError:
        return ConfinementError(root, path, f"{name!r} cannot be opened")
    if _stat.S_ISLNK(st.st_mode):
        return ConfinementError(root, path, f"{name!r} is a symlink (not followed)")
    return ConfinementError(root, path, f"{name!r} is not a directory")


def _open_root(root: str) -> int:
    try:
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ConfinementError(root, "/", f"target is not a directory ({exc.strerror})") from None


def _walk(root: str, path: str, comps: list[str], create: bool, dir_mode: int = 0o755
          ) -> int | None:
    """A dir fd for ``comps`` under ``root`` (created when ``create``), None when missing."""
    fd = _open_root(root)
    try:
        for name in comps:
            try:
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    os.close(fd)
                    return None
                try:
                    os.mkdir(name, dir_mode & 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
                try:
                    nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    raise _refusal(fd, name, root, path) from None
                os.fchmod(nfd, dir_mode & 0o777)  # only a directory we just made
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _refusal(fd, name, root, path) from None
                raise
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


@contextmanager
def parent(root: str, path: str, create: bool = False) -> Iterator[tuple[int | None, str]]:
    """(parent dir fd or None when it does not exist, final name) of ``path``."""
    comps = parts(root, path)
    if not comps:
        raise ConfinementError(root, path, "is the target root itself")
    fd = _walk(root, path, comps[:-1], create)
    try:
        yield fd, comps[-1]
    finally:
        if fd is not None:
            os.close(fd)


def lstat(root: str, path: str) -> os.stat_result | None:
    """The entry itself (links not followed), None when absent."""
    comps = parts(root, path)
    if not comps:
        return os.stat(root)
    with parent(root, path) as (fd, name):
        if fd is None:
            return None
        try:
            return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None


def read_file(root: str, path: str) -> bytes | None:
    """A regular file's bytes, None when absent; symlinks and special files are refused."""
    with parent(root, path) as (fd, name):
        if fd is None:
            return None
        return _read_at(fd, name, root, path)


def _read_at(fd: int, name: str, root: str, path: str) -> bytes | None:
    try:
        f = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfinementError(root, path, "is a symlink (not followed)") from None
        raise
    try:
        if not _stat.S_ISREG(os.fstat(f).st_mode):
            raise ConfinementError(root, path, "is not a regular file")
        with os.fdopen(os.dup(f), "rb") as fh:
            return fh.read()
    finally:
        os.close(f)


def missing_dirs(root: str, path: str) -> list[str]:
    """The parent directories of ``path`` a write would create, deepest first."""
    comps = parts(root, path)[:-1]
    out: list[str] = []
    for i in range(len(comps), 0, -1):
        sub = "/" + "/".join(comps[:i])
        if lstat(root, sub) is not None:
            break
        out.append(sub)
    return out


def write_file(root: str, path: str, data: bytes, mode: int = 0o644, *,
               expect: object = _UNSET, owner: tuple[int, int] | None = None) -> None:
    """Atomically replace ``path`` under ``root`` with ``data``, permissions ``mode & 0o777``.

    ``expect`` (bytes, or None for "absent") is the content the plan saw: a file edited since
    is refused rather than overwritten. ``owner`` (uid, gid) is applied before the rename.
    """
    with parent(root, path, create=True) as (fd, name):
        assert fd is not None
        st = _lstat_at(fd, name)
        if st is not None and not _stat.S_ISREG(st.st_mode):
            kind = "a symlink (not followed)" if _stat.S_ISLNK(st.st_mode) else \
                "not a regular file"
            raise ConfinementError(root, path, f"is {kind}")
        if expect is not _UNSET:
            cur = _read_at(fd, name, root, path) if st is not None else None
            if cur != expect:
                raise ConfinementError(root, path, "changed since the plan was made "
                                       "(re-run the plan)")
        tmp = f".ascend-doctor.{secrets.token_hex(6)}"
        f = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                    | getattr(os, "O_CLOEXEC", 0), 0o600, dir_fd=fd)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(f, view):]
                if owner is not None:
                    os.fchown(f, owner[0], owner[1])
                os.fchmod(f, mode & 0o777)
                os.fsync(f)
            finally:
                os.close(f)
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=fd)
            except FileNotFoundError:
                pass
            raise
        try:
            os.fsync(fd)
        except OSError:
            pass


def make_dir(root: str, path: str, mode: int = 0o755) -> bool:
    """Create ``path`` (and parents) with ``mode & 0o1777``; True when it was created.

    The sticky bit is kept (a 1777 directory without it would let anyone replace anyone's
    files); setuid/setgid are dropped.

    An existing directory keeps its mode: chmod'ing one a bundle names would let the
    bundle open /etc (or anything reached before a swap) to everyone.
    """
    comps = parts(root, path)
    if not comps:
        return False
    with parent(root, path, create=True) as (fd, name):
        assert fd is not None
        try:
            os.mkdir(name, mode & 0o777, dir_fd=fd)
        except FileExistsError:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if not _stat.S_ISDIR(st.st_mode):
                raise ConfinementError(root, path, "exists and is not a directory") from None
            return False
        nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
        try:
            os.fchmod(nfd, mode & 0o1777)
        finally:
            os.close(nfd)
        return True


def make_symlink(root: str, path: str, target: str) -> None:
    """Create the symlink ``path`` -> ``target`` (the final component only; never followed).

    An existing link or file at ``path`` is replaced; a directory is refused.
    """
    if not isinstance(target, str) or "\0" in target or not target:
        raise ConfinementError(root, path, "symlink target is not a valid path")
    with parent(root, path, create=True) as (fd, name):
        assert fd is not None
        st = _lstat_at(fd, name)
        if st is not None:
            if _stat.S_ISDIR(st.st_mode):
                raise ConfinementError(root, path, "a directory is in the way of the symlink")
            os.unlink(name, dir_fd=fd)
        os.symlink(target, name, dir_fd=fd)


def remove(root: str, path: str) -> bool:
    """Unlink ``path`` (a file or link, never followed); True when something was removed."""
    with parent(root, path) as (fd, name):
        if fd is None:
            return False
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if _stat.S_ISDIR(st.st_mode):
            raise ConfinementError(root, path, "is a directory")
        os.unlink(name, dir_fd=fd)
        return True


def remove_empty_dir(root: str, path: str) -> bool:
    """rmdir ``path`` when it is an empty directory (not a link); False otherwise."""
    if not parts(root, path):
        return False
    with parent(root, path) as (fd, name):
        if fd is None:
            return False
        try:
            os.rmdir(name, dir_fd=fd)
            return True
        except OSError:
            return False
