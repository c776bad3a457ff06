"""What ``libacl.resolve`` needs about the machine besides the resolution itself: the
doctor's own LD_LIBRARY_PATH (to tell "exported in a shell, never reached the service"),
whether this is a container (driver libraries come from a host mount), and the Ascend
directories named only in conf files ldconfig does not read, under both their names
(as written and as they resolve: ``latest/lib64`` is the same place as ``8.3.RC2/lib64``)."""

from __future__ import annotations

from typing import Mapping

from ..host import Host
from dataclasses import dataclass, field
from ..registry import provider
from .ldconf import LdConfState

CONTAINER_MARKERS = ("/.dockerenv", "/run/.containerenv")


@dataclass(frozen=True, eq=False)
class LibSearchContext:
    """What the library search path depends on besides ld.so.conf."""

    own_ld_library_path: tuple[str, ...] = ()
    in_container: bool = False
    # directory -> (the unread conf file, how the report names it: "x.conf (as <dir>)")
    unread_dirs: Mapping[str, tuple[str, str]] = field(default_factory=dict)


@provider
def gather_lib_search_context(host: Host, state: LdConfState | None) -> LibSearchContext:
    own = tuple(p for p in host.environ().get("LD_LIBRARY_PATH", "").split(":") if p)
    unread: dict[str, tuple[str, str]] = {}
    for u in (state.unreached if state else ()):
        for d in u.ascend_dirs:
            unread.setdefault(d, (u.path, u.path))
            real = host.realpath(d)
            if real != d:
                unread.setdefault(real, (u.path, f"{u.path} (as {d})"))
    in_container = any(host.exists(p) for p in CONTAINER_MARKERS)
    return LibSearchContext(own, in_container, unread)
