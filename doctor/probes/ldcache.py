"""The binary /etc/ld.so.cache, as ld.so reads it (glibc elf/cache.c, sysdeps/generic/dl-cache.h).

Three layouts exist: the new ``glibc-ld.so.cache1.1`` (glibc >= 2.32 default), the old
``ld.so-1.7.0`` and the combined one (old header and entries, then the new header). In the
new format string offsets count from the new header; in the old one from the end of the
old entry table. ``parse_ldcache`` is pure; a truncated or corrupt file raises ParseError.
``build_ldcache`` writes the new format (used by the demo scenario and tests).
"""

from __future__ import annotations

import struct

from ..errors import ParseError
from ..host import Host
from dataclasses import dataclass, field
from ..registry import provider

LDCACHE = "/etc/ld.so.cache"
OLD_MAGIC = b"ld.so-1.7.0"
NEW_MAGIC = b"glibc-ld.so.cache1.1"
EXT_MAGIC = 0xEAA42174
HWCAP_EXTENSION = 1 << 62

# entry flags (dl-cache.h): low byte = type, high byte = architecture
FLAG_ELF_LIBC6 = 0x0003
ARCH_FLAGS = {0x0000: "", 0x0100: "64bit", 0x0300: "x86-64", 0x0800: "x32",
              0x0a00: "AArch64", 0x0900: "hard-float", 0x0500: "64bit"}
# (ELF class, machine) -> the flags ld.so accepts for that object (_DL_CACHE_DEFAULT_ID)
EXPECTED_FLAGS = {(64, "EM_X86_64"): 0x0303, (64, "EM_AARCH64"): 0x0a03, (32, "EM_386"): 0x0003,
                  (32, "EM_ARM"): 0x0903}


@dataclass(frozen=True, eq=False)
class CacheEntry:
    """One /etc/ld.so.cache entry: soname to file."""

    name: str  # the soname (key)
    path: str  # the file (value)
    flags: int
    hwcap: int = 0

    @property
    def arch(self) -> str:
        return ARCH_FLAGS.get(self.flags & 0xff00, f"flags 0x{self.flags:04x}")


@dataclass(frozen=True, eq=False)
class LdCache:
    """The parsed /etc/ld.so.cache, indexed by soname."""

    format: str  # new | old | compat
    entries: tuple[CacheEntry, ...]
    generator: str | None = None  # "ldconfig (GNU libc) ..." from the extension section
    source: str = LDCACHE
    mtime: float | None = None
    _index: dict[str, tuple[CacheEntry, ...]] = field(default_factory=dict, compare=False,
                                                      repr=False)

    def lookup(self, name: str, flags: int | None = None) -> CacheEntry | None:
        """The entry ld.so would take for ``name``: first in file order with matching flags,
        preferring entries that are not glibc-hwcaps subdirectory variants."""
        if not self._index:
            idx: dict[str, list[CacheEntry]] = {}
            for e in self.entries:
                idx.setdefault(e.name, []).append(e)
            self._index.update({k: tuple(v) for k, v in idx.items()})
        cands = [e for e in self._index.get(name, ()) if flags is None or e.flags == flags]
        plain = [e for e in cands if not e.hwcap & HWCAP_EXTENSION]
        return (plain or cands or [None])[0]

    def paths(self) -> set[str]:
        return {e.path for e in self.entries}


def _cstr(data: bytes, off: int, what: str, source: str) -> str:
    if not 0 <= off < len(data):
        raise ParseError(source, f"{what} string offset {off} is outside the file "
                                 f"({len(data)} bytes): truncated or corrupt")
    end = data.find(b"\0", off)
    if end < 0:
        raise ParseError(source, f"{what} string at {off} is not NUL-terminated (truncated)")
    return data[off:end].decode("utf-8", "surrogateescape")


def _parse_new(data: bytes, base: int, source: str) -> tuple[list[CacheEntry], str | None]:
    hdr = 20 + 4 + 4 + 1 + 3 + 4 + 12
    if len(data) < base + hdr:
        raise ParseError(source, f"new-format header truncated ({len(data) - base} of {hdr} bytes)")
    nlibs, len_strings, cflags = struct.unpack_from("<IIB", data, base + 20)
    order = "<" if cflags in (0, 2) else ">"
    if cflags not in (0, 2, 3):
        raise ParseError(source, f"unknown endianness flag {cflags} in the new-format header")
    nlibs, len_strings = struct.unpack_from(order + "II", data, base + 20)
    (ext_off,) = struct.unpack_from(order + "I", data, base + 32)
    table = base + hdr
    if nlibs > (len(data) - table) // 24:
        raise ParseError(source, f"header announces {nlibs} entries but the file holds at most "
                                 f"{max(0, (len(data) - table) // 24)} (truncated)")
    entries = []
    for i in range(nlibs):
        flags, key, value, _osv, hwcap = struct.unpack_from(order + "iIIIQ", data, table + 24 * i)
        entries.append(CacheEntry(_cstr(data, base + key, "key", source),
                                  _cstr(data, base + value, "value", source), flags & 0xffffffff,
                                  hwcap))
    return entries, _generator(data, ext_off, order)


def _generator(data: bytes, ext_off: int, order: str) -> str | None:
    """The generator string from the extension section (offsets count from the file start;
    optional, so a corrupt extension is ignored as ld.so ignores it)."""
    if not ext_off or ext_off + 8 > len(data):
        return None
    magic, count = struct.unpack_from(order + "II", data, ext_off)
    if magic != EXT_MAGIC or count > 64:
        return None
    for i in range(count):
        pos = ext_off + 8 + 16 * i
        if pos + 16 > len(data):
            return None
        tag, _fl, off, size = struct.unpack_from(order + "IIII", data, pos)
        if tag == 0 and off + size <= len(data):
            return data[off:off + size].decode("utf-8", "replace")
    return None


def parse_ldcache(data: bytes, source: str = LDCACHE) -> LdCache:
    """Entries of an ld.so.cache image, in file (= ld.so priority) order."""
    try:
        if data.startswith(NEW_MAGIC):
            entries, gen = _parse_new(data, 0, source)
            return LdCache("new", tuple(entries), gen, source)
        if data.startswith(OLD_MAGIC):
            if len(data) < 16:
                raise ParseError(source, f"old-format header truncated ({len(data)} of 16 bytes)")
            (nlibs,) = struct.unpack_from("<I", data, 12)
            if nlibs > (len(data) - 16) // 12:
                raise ParseError(source, f"header announces {nlibs} old entries but the file "
                                         "is too short for them (truncated)")
            end = 16 + 12 * nlibs
            new_at = (end + 7) & ~7
            if data[new_at:new_at + len(NEW_MAGIC)] == NEW_MAGIC:
                entries, gen = _parse_new(data, new_at, source)
                return LdCache("compat", tuple(entries), gen, source)
            out = []
            for i in range(nlibs):
                flags, key, value = struct.unpack_from("<iII", data, 16 + 12 * i)
                out.append(CacheEntry(_cstr(data, end + key, "key", source),
                                      _cstr(data, end + value, "value", source),
                                      flags & 0xffffffff))
            return LdCache("old", tuple(out), None, source)
    except struct.error as exc:
        raise ParseError(source, f"truncated ({exc})") from None
    head = data[:20]
    raise ParseError(source, f"not an ld.so.cache (starts with {head!r}; expected "
                             f"{NEW_MAGIC.decode()!r} or {OLD_MAGIC.decode()!r})"
                     if data else "empty file")


def build_ldcache(entries: list[tuple[str, str, int]], generator: str = "ascend-doctor") -> bytes:
    """A new-format cache image from (soname, path, flags), in the given priority order."""
    strings = bytearray()
    offsets: dict[str, int] = {}
    hdr = 48
    table = 24 * len(entries)
    base = hdr + table

    def intern(s: str) -> int:
        if s not in offsets:
            offsets[s] = base + len(strings)
            strings.extend(s.encode() + b"\0")
        return offsets[s]

    rows = [(flags, intern(name), intern(path)) for name, path, flags in entries]
    gen = generator.encode()
    ext_off = (base + len(strings) + 3) & ~3
    out = bytearray(NEW_MAGIC)
    out += struct.pack("<IIB3xI12x", len(entries), len(strings), 2, ext_off)
    for flags, k, v in rows:
        out += struct.pack("<iIIIQ", flags, k, v, 0, 0)
    out += strings
    out += b"\0" * (ext_off - len(out))
    out += struct.pack("<IIIIII", EXT_MAGIC, 1, 0, 0, ext_off + 24, len(gen))
    out += gen
    return bytes(out)


@provider
def gather_ldcache(host: Host) -> LdCache:
    st = host.stat(LDCACHE)  # SourceMissing when there is no cache
    cache = parse_ldcache(host.read_bytes(LDCACHE), LDCACHE)
    return LdCache(cache.format, cache.entries, cache.generator, LDCACHE, st.mtime)
