"""Opening a file that another account can steer, once, and deciding on what was opened.

The doctor runs as root. A file under an input another account can write (a ``--profile``
directory msprof filled as the service, a log directory the service owns, the target of the
service's ``/proc/PID/fd/1``) can be a link, or be swapped for one between a check by name and
the open, that points at a root-only file. Checking a path and then opening the name again is
a race the other account wins (``renameat2(RENAME_EXCHANGE)`` in a loop).

So a guarded open walks the path one component at a time from a directory descriptor
(``O_PATH | O_NOFOLLOW``), reads links itself, and makes every decision on ``fstat`` of the
descriptors it holds:

* the *writers* of the path: every account that could change a directory on it or a link it
  followed (a directory's owner, its group when group-writable, anyone when world-writable;
  in a sticky directory only the entry's own owner). Root and the doctor's own uid are not
  counted. A root-owned, single-link, group-readable file under a directory only a group
  can write (Ubuntu's ``/var/log`` root:syslog 0775 with root:adm 0640 logs) is read unless
  the ``reader`` is in that group (``_root_log`` says why);
* the opened file must be one each writer could read itself (uid, its groups); with a
  ``reader`` (the service's uid and groups), that account must also be able to search every
  directory and read the file.

``/proc/PID/fd/N`` is opened through the magic link itself (the very file the process holds,
never its name again). A refusal says why in words, never with the file's bytes.
"""

from __future__ import annotations

import errno
import os
import re
import stat as _stat
from typing import BinaryIO

from dataclasses import dataclass

_PATH = getattr(os, "O_PATH", 0o10000000)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_READ = os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK | _CLOEXEC
_PROC_FD = re.compile(r"^/proc/(?:\d+|self)/fd/\d+$")
MAX_HOPS = 40


@dataclass(frozen=True)
class Guard:
    """How a guarded open decides: ``reader`` = (uid, gids) whose rights bound the read
    (the service, for paths the service named); ``regular``: only a regular file opens."""

    reader: "tuple[int, tuple[int, ...]] | None" = None
    regular: bool = True


class Refused(Exception):
    """The path was not opened, with the reason in words (``missing``: it is absent)."""

    def __init__(self, reason: str, missing: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.missing = missing


def _trusted(uid: int) -> bool:
    return uid == 0 or uid == os.geteuid()


def groups_of(uid: int) -> tuple[int, ...]:
    """An account's groups from the user database (its primary group first)."""
    import pwd

    try:
        pw = pwd.getpwuid(uid)
    except KeyError:
        return ()
    try:
        return tuple(dict.fromkeys([pw.pw_gid, *os.getgrouplist(pw.pw_name, pw.pw_gid)]))
    except OSError:
        return (pw.pw_gid,)


def may(st: os.stat_result, uid: int, gids: tuple[int, ...], bit: int) -> bool:
    """Would ``uid``/``gids`` get permission ``bit`` (4 read, 1 search) on ``st``?"""
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & (bit << 6))
    if st.st_gid in gids:
        return bool(st.st_mode & (bit << 3))
    return bool(st.st_mode & bit)


def _root_log(st: os.stat_result) -> bool:
    """A root-owned, single-link file its group may read, met under a directory a group can
    write (Ubuntu: ``/var/log`` root:syslog 0775 holding root:adm 0640 logs).

    What the group's members could have put there instead: a symlink (its owner is counted as
    a writer), their own file (their own bytes), a hard link to a file elsewhere (two links:
    refused; ``fs.protected_hardlinks`` forbids it for files they cannot read anyway), or an
    entry renamed from another directory they can write, which they control already; a
    root-only file (0600) of such a directory stays refused. So a root-run doctor reads it,
    unless the service it inspects is in that group (``Guard.reader``): then the service
    account could swap the file and the refusal stands."""
    return _trusted(st.st_uid) and st.st_nlink == 1 and bool(st.st_mode & 0o040)


class _Writers:
    """The accounts that could have steered the walk (see the module docstring)."""

    def __init__(self) -> None:
        self.uids: dict[int, str] = {}
        self.gids: dict[int, str] = {}
        self.anyone: str | None = None

    def note(self, d: os.stat_result, entry: os.stat_result | None, where: str) -> None:
        if not _trusted(d.st_uid):
            self.uids.setdefault(d.st_uid, where)
        if d.st_mode & 0o020 and d.st_gid != 0:
            self.gids.setdefault(d.st_gid, where)
        if d.st_mode & 0o002:
            if d.st_mode & _stat.S_ISVTX:  # sticky: only the entry's owner may replace it
                if entry is not None and not _trusted(entry.st_uid):
                    self.uids.setdefault(entry.st_uid, where)
            elif self.anyone is None:
                self.anyone = where

    def refusal(self, st: os.stat_result, path: str,
                reader: "tuple[int, tuple[int, ...]] | None" = None) -> str | None:
        mode = f"{_stat.S_IMODE(st.st_mode):04o}"
        for uid, where in self.uids.items():
            if not may(st, uid, groups_of(uid), 4):
                return (f"not read: uid {uid} can change {where} but could not read {path} "
                        f"itself (mode {mode}, owner {st.st_uid}:{st.st_gid})")
        own = not _trusted(st.st_uid) and st.st_mode & 0o400  # an account's own file
        for gid, where in self.gids.items():
            if _root_log(st) and (reader is None or gid not in reader[1]):
                continue
            if not (st.st_mode & 0o004 or (st.st_gid == gid and st.st_mode & 0o040) or own):
                return (f"not read: group {gid} can change {where} but could not read {path} "
                        f"(mode {mode}, owner {st.st_uid}:{st.st_gid})")
        if self.anyone is not None and not (st.st_mode & 0o004 or own):
            return (f"not read: anyone can change {self.anyone} but {path} is not readable by "
                    f"everyone (mode {mode}, owner {st.st_uid}:{st.st_gid})")
        return None


def _check_final(st: os.stat_result, path: str, guard: Guard, writers: _Writers | None) -> None:
    if _stat.S_ISDIR(st.st_mode):
        raise Refused("is a directory")
    if guard.regular and not _stat.S_ISREG(st.st_mode):
        raise Refused("not a regular file")
    if guard.reader is not None:
        uid, gids = guard.reader
        if not may(st, uid, gids, 4):
            raise Refused(f"not read: the service's uid {uid} could not read {path} itself "
                          f"(mode {_stat.S_IMODE(st.st_mode):04o}, owner {st.st_uid}:{st.st_gid})")
    why = writers.refusal(st, path, guard.reader) if writers is not None else None
    if why:
        raise Refused(why)


def _reopen(pfd: int) -> int:
    """A readable descriptor of the object an ``O_PATH`` descriptor holds (the same inode,
    never its name again)."""
    return os.open(f"/proc/self/fd/{pfd}", _READ)


def _finish(fd: int, st_before: os.stat_result) -> BinaryIO:
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != (st_before.st_dev, st_before.st_ino):
        os.close(fd)
        raise Refused("changed while it was being opened")
    flags = os.get_blocking(fd)
    if not flags:
        os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _os_refusal(exc: OSError) -> Refused:
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return Refused("not found", missing=True)
    if exc.errno in (errno.EACCES, errno.EPERM):
        return Refused("permission denied")
    return Refused(exc.strerror or str(exc))


def open_guarded(path: str, guard: Guard, root: str = "/") -> BinaryIO:
    """``path`` (absolute, inside ``root``) opened for reading under ``guard``; ``Refused``
    with the reason otherwise. ``root`` other than "/" is a sysroot: absolute links and
    ``..`` stay inside it."""
    try:
        if root == "/" and _PROC_FD.match(path):
            return _open_proc_fd(path, guard)
        return _walk(path, guard, root)
    except OSError as exc:
        raise _os_refusal(exc) from None


def _open_proc_fd(path: str, guard: Guard) -> BinaryIO:
    pfd = os.open(path, _PATH | _CLOEXEC)  # the magic link: the process's very file
    try:
        st = os.fstat(pfd)
        _check_final(st, path, guard, None)
        fd = _reopen(pfd)
    finally:
        os.close(pfd)
    return _finish(fd, st)


def _walk(path: str, guard: Guard, root: str) -> BinaryIO:
    writers = _Writers()
    rootfd = os.open(root, _PATH | os.O_DIRECTORY | _CLOEXEC)
    stack: list[tuple[int, os.stat_result, str]] = [(rootfd, os.fstat(rootfd), "/")]
    todo = [p for p in path.split("/") if p and p != "."]
    hops = 0
    try:
        while todo:
            name = todo.pop(0)
            dfd, dst, dname = stack[-1]
            if guard.reader is not None and not may(dst, *guard.reader, 1):
                raise Refused(f"not read: the service's uid {guard.reader[0]} cannot enter "
                              f"{dname} (mode {_stat.S_IMODE(dst.st_mode):04o}, owner "
                              f"{dst.st_uid}:{dst.st_gid})")
            if name == "..":
                if len(stack) > 1:
                    os.close(stack.pop()[0])
                continue
            here = dname.rstrip("/") + "/" + name
            fd = os.open(name, _PATH | os.O_NOFOLLOW | _CLOEXEC, dir_fd=dfd)
            st = os.fstat(fd)
            writers.note(dst, st, dname)
            if _stat.S_ISLNK(st.st_mode):
                os.close(fd)
                hops += 1
                if hops > MAX_HOPS:
                    raise Refused("too many levels of symbolic links")
                target = os.readlink(name, dir_fd=dfd)
                again = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                if (again.st_dev, again.st_ino) != (st.st_dev, st.st_ino):
                    raise Refused(f"{here} changed while it was being read")
                if not _trusted(st.st_uid):
                    writers.uids.setdefault(st.st_uid, here)
                if target.startswith("/"):
                    while len(stack) > 1:
                        os.close(stack.pop()[0])
                todo = [p for p in target.split("/") if p and p != "."] + todo
                continue
            if todo:
                if not _stat.S_ISDIR(st.st_mode):
                    os.close(fd)
                    raise Refused("not found", missing=True)
                stack.append((fd, st, here))
                continue
            try:
                _check_final(st, here, guard, writers)
                rfd = _reopen(fd)
            finally:
                os.close(fd)
            return _finish(rfd, st)
        raise Refused("is a directory")
    finally:
        for fd, _, _ in stack:
            os.close(fd)
