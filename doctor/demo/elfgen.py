"""A tiny ELF64 writer: shared objects with a real dynamic section (DT_NEEDED, DT_SONAME,
DT_RPATH/DT_RUNPATH, DT_STRTAB) and no code. The demo builds its torch_npu / vllm_ascend /
CANN files with it, since no compiler is guaranteed where the demo is built; readelf,
pyelftools and ld.so's header checks accept them."""

from __future__ import annotations

import struct

EM = {"x86_64": 62, "aarch64": 183}
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 5, 10, 14, 15, 29


def shared_object(needed: tuple[str, ...] = (), soname: str | None = None,
                  runpath: str | None = None, rpath: str | None = None,
                  machine: str = "x86_64") -> bytes:
    """An ET_DYN ELF64 little-endian image: header, PT_LOAD + PT_DYNAMIC, .dynstr, .dynamic."""
    strtab = bytearray(b"\0")
    offs: dict[str, int] = {}

    def s(x: str) -> int:
        if x not in offs:
            offs[x] = len(strtab)
            strtab.extend(x.encode() + b"\0")
        return offs[x]

    tags = [(DT_NEEDED, s(n)) for n in needed]
    if soname:
        tags.append((DT_SONAME, s(soname)))
    if rpath is not None:
        tags.append((DT_RPATH, s(rpath)))
    if runpath is not None:
        tags.append((DT_RUNPATH, s(runpath)))
    ehsize, phsize = 64, 56
    str_off = ehsize + 2 * phsize
    dyn_off = (str_off + len(strtab) + 7) & ~7
    tags += [(DT_STRTAB, str_off), (DT_STRSZ, len(strtab)), (DT_NULL, 0)]
    dyn = b"".join(struct.pack("<qQ", t, v) for t, v in tags)
    size = dyn_off + len(dyn)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    hdr = ident + struct.pack("<HHIQQQIHHHHHH", 3, EM[machine], 1, 0, ehsize, 0, 0, ehsize,
                              phsize, 2, 64, 0, 0)
    load = struct.pack("<IIQQQQQQ", 1, 4 | 2, 0, 0, 0, size, size, 0x1000)
    dynamic = struct.pack("<IIQQQQQQ", 2, 4 | 2, dyn_off, dyn_off, dyn_off, len(dyn), len(dyn), 8)
    body = hdr + load + dynamic + bytes(strtab)
    return body + b"\0" * (dyn_off - len(body)) + dyn
