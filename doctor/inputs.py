"""Files the user names on the command line (--pcap, --profile, --block-audit, --log) are
the invoking user's files, not paths inside the inspected host (DESIGN "User inputs are not
host paths"): read from this machine's own filesystem even when ``--root`` is a sysroot,
recorded into a bundle when collecting, replayed from it when reading one. A named input
that cannot be read is a ``SourceError`` (an ``error`` finding), never a skip.
"""

from __future__ import annotations

import sys

from .errors import SourceError, SourceMissing
from .host import Host


def user_files(host: Host) -> Host:
    """The Host through which user-named inputs are read: the invoking machine's root for
    a live host or a sysroot; a recording host records them into the same bundle; a bundle
    replays what was recorded."""
    live = sys.modules.get("ascend_doctor.host.live")
    if live is None:  # no LiveHost was ever made (a bundle replay): nothing to re-root
        return host
    LiveHost = live.LiveHost
    if isinstance(host, LiveHost):
        return LiveHost("/", env=host.environ()) if host.is_sysroot else host
    inner = getattr(host, "inner", None)
    if isinstance(inner, LiveHost) and inner.is_sysroot:
        return type(host)(LiveHost("/", env=inner.environ()), host.data)  # type: ignore[call-arg, attr-defined]
    return host


def input_error(flag: str, path: str, exc: SourceMissing | SourceError) -> SourceError:
    """The error a named input that cannot be read becomes (never a skip)."""
    return SourceError(f"{flag} {path}", exc.reason)
