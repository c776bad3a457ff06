"""The doctor's own files in the invoking user's cache directory: ``$XDG_CACHE_HOME`` or
``~/.cache``, then ``ascend-doctor/`` (0700). Used only when that directory and each file
are owned by the effective uid and writable by nobody else, so a doctor run by root under
another user's ``HOME`` neither reads nor writes there; files are opened without following
links and replaced atomically. ``ASCEND_DOCTOR_CACHE=0`` turns every cache off.

User: the source index of the installed stack (knowledge/srcindex.py), per package
version. JSON, never Python code. Kept free of project imports so any module can use it first.
"""

from __future__ import annotations

import os
import re
import stat

MAX_BYTES = 16 << 20  # far above any real cache file; anything bigger is not ours


def enabled() -> bool:
    """False when the user switched the cache off."""
    return os.environ.get("ASCEND_DOCTOR_CACHE", "1").strip().lower() not in ("0", "off", "no",
                                                                             "false")


def cache_dir(create: bool = False) -> str | None:
    """``<user cache>/ascend-doctor`` when it (and its parent) belong to the effective uid;
    with ``create``, made 0700 if missing. None when there is no safe place."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = os.environ.get("HOME", "")
        if not os.path.isabs(home) or not _owned_dir(home, follow=True):
            return None
        base = os.path.join(home, ".cache")
    uid = os.geteuid()
    try:
        if not os.path.isdir(base):
            if not create or not _owned_dir(os.path.dirname(base.rstrip("/")) or "/",
                                            follow=True):
                return None
            os.mkdir(base, 0o700)
        if not _owned_dir(base, follow=True):
            return None
        path = os.path.join(base, "ascend-doctor")
        if not os.path.lexists(path):
            if not create:
                return None
            os.mkdir(path, 0o700)
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o022:
        return None  # a link, another account's directory, or one others can write into
    return path


def _owned_dir(path: str, follow: bool) -> bool:
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def read_private(name: str, limit: int = MAX_BYTES) -> bytes | None:
    """The bytes of ``<cache dir>/name`` when it is a regular file of the effective uid that
    nobody else can write (opened without following a link), else None."""
    d = cache_dir()
    if d is None:
        return None
    try:
        fd = os.open(os.path.join(d, name), os.O_RDONLY | os.O_NOFOLLOW
                     | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid()
                or st.st_mode & 0o022 or st.st_size > limit):
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read(limit + 1)
        return raw if len(raw) <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


def write_private(name: str, data: bytes, stale: "re.Pattern[str] | None" = None) -> bool:
    """Write ``<cache dir>/name`` atomically (0600), then drop the other files ``stale``
    matches. Never raises: a cache that cannot be written only costs the next run time."""
    d = cache_dir(create=True)
    if d is None:
        return False
    import tempfile  # only on a miss: it imports random, shutil

    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=d)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, os.path.join(d, name))
        tmp = None
        for other in os.listdir(d) if stale is not None else ():
            if stale.fullmatch(other) and other != name:
                try:
                    os.unlink(os.path.join(d, other))
                except OSError:
                    pass
        return True
    except OSError:
        return False
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
