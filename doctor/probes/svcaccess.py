"""Files the service names are read with the service's rights, not root's.

Paths that come from the service's world (``ASCEND_DOCTOR_BLOCK_AUDIT`` in its
environment, ``--config`` in its argv, the targets of /proc/PID/fd/1|2) are chosen by the
service's account. The doctor runs as root, so opening them blindly lets any local account
make it quote /etc/shadow into a report or a bundle. Before reading such a path, ask whether
the service's uid and groups could read it themselves (search permission on every directory,
read permission on the file); when they could not, the file is refused and never quoted.
"""

from __future__ import annotations

import posixpath

from ..errors import SourceError, SourceMissing
from ..host import Host, StatInfo


def parse_status_ids(text: str) -> tuple[int | None, tuple[int, ...]]:
    """(real uid, gids) from /proc/<pid>/status ``Uid:``/``Gid:``/``Groups:`` lines."""
    uid, gids = None, []
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        vals = [int(v) for v in rest.split() if v.isdigit()]
        if key == "Uid" and vals:
            uid = vals[0]
        elif key == "Gid" and vals:
            gids.insert(0, vals[0])
        elif key == "Groups":
            gids.extend(vals)
    return uid, tuple(dict.fromkeys(gids))


def may(st: StatInfo, uid: int, gids: tuple[int, ...], bit: int) -> bool:
    """Would ``uid``/``gids`` get permission ``bit`` (4 read, 1 search) on ``st``?"""
    if uid == 0:
        return True
    if st.uid == uid:
        return bool(st.mode & (bit << 6))
    if st.gid in gids:
        return bool(st.mode & (bit << 3))
    return bool(st.mode & bit)


def service_creds(host: Host, pid: int, uid: int | None = None
                  ) -> tuple[int, tuple[int, ...]] | None:
    """(uid, gids) of a process from /proc/PID/status; else the process table's ``uid``
    with no supplementary groups (stricter: group bits then count only for its own gid);
    None when neither tells."""
    try:
        got, gids = parse_status_ids(host.proc_read(pid, "status").decode("utf-8", "replace"))
        if got is not None:
            return got, gids
    except (SourceMissing, SourceError):
        pass
    return (uid, ()) if uid is not None and uid >= 0 else None


def refusal(host: Host, path: str, pid: int, uid: int | None = None) -> str | None:
    """Why the service (``pid``, process-table ``uid``) could not read ``path`` itself;
    None when it could. A path whose reader cannot be told is refused: better no content
    than root's.
    """
    creds = service_creds(host, pid, uid)
    if creds is None:
        return f"not read: cannot tell the uid of pid {pid} that names it"
    uid, gids = creds
    if uid == 0:
        return None
    try:
        real = host.realpath(path)
    except (SourceMissing, SourceError):
        real = path
    parts = [p for p in real.split("/") if p]
    d = "/"
    for name in parts[:-1]:
        d = posixpath.join(d, name)
        try:
            st = host.stat(d)
        except SourceMissing:
            continue  # a bundle that did not record the directory: the file decides
        except SourceError as exc:
            return f"not read: {d}: {exc.reason}"
        if not may(st, uid, gids, 1):
            return (f"not read: the service's uid {uid} cannot enter {d} "
                    f"(mode {st.mode & 0o777:04o}, owner {st.uid}:{st.gid})")
    st = host.stat(real)  # absent → SourceMissing for the caller, named
    if not may(st, uid, gids, 4):
        return (f"not read: the service's uid {uid} cannot read {real} "
                f"(mode {st.mode & 0o777:04o}, owner {st.uid}:{st.gid})")
    return None
