"""Libraries ldconfig would put in /etc/ld.so.cache that the cache on disk lacks.

Reading the candidate files (to tell a shared object from a linker script, as ldconfig
does) is I/O, so it lives here as a fact; ldconf.cache only compares.
"""

from __future__ import annotations

import posixpath

from ..errors import ParseError, SourceError, SourceMissing
from ..host import Host
from dataclasses import dataclass
from ..registry import provider
from .elf import parse_elf
from .ldcache import LdCache
from .ldconf import LdConfState


@dataclass(frozen=True, eq=False)
class CacheGaps:
    """(dir/name, origin of the directory) of each library the cache lacks."""

    lacking: tuple[tuple[str, str], ...]


@provider
def gather_cache_gaps(host: Host, cache: LdCache, state: LdConfState) -> CacheGaps:
    """Only the names the cache misses are opened, so a healthy host reads no ELF file."""
    names = {e.name for e in cache.entries}
    paths = cache.paths()
    out = []
    for d in state.search_dirs:
        for n in d.libs:
            p = posixpath.join(d.path, n)
            if n in names or p in paths:
                continue
            try:
                with host.open_stream(p) as fh:
                    info = parse_elf(fh, p)
            except (ParseError, SourceError, SourceMissing, OSError):
                continue  # a linker script or unreadable: ldconfig skips it too
            if info.etype == "ET_DYN" and (info.soname is None or info.soname == n):
                out.append((p, d.origin))
    return CacheGaps(tuple(out))
