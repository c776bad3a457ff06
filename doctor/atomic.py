"""Atomic file writes: temp file in the same directory, fsync, rename, fsync the directory.

A crash at any point leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import os
import tempfile


def atomic_write(path: str, data: bytes, mode: int | None = None) -> None:
    directory = os.path.dirname(os.path.abspath(path)) or "."
    if mode is None:
        try:
            mode = os.stat(path).st_mode & 0o777
        except FileNotFoundError:
            mode = 0o644
    fd, tmp = tempfile.mkstemp(prefix=".ascend-doctor.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode & 0o777)  # never setuid/setgid/sticky
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
