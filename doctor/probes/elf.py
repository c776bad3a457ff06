"""What ld.so reads from a shared object: class, machine, DT_NEEDED, DT_RPATH, DT_RUNPATH,
DT_SONAME, DT_FLAGS_1 — from bytes or a seekable stream: a struct reader of the program
headers and dynamic segment for well-formed files, pyelftools (the reference) for the rest.

Pure: ``parse_elf(data_or_stream, name)`` does no I/O of its own (it only reads the stream it
is given). Anything that is not a well-formed ELF dynamic object raises ``ParseError``
naming the file, never another exception.
"""

from __future__ import annotations

import io
import struct
from typing import BinaryIO

from ..errors import ParseError
from dataclasses import dataclass

ELF_MAGIC = b"\x7fELF"
DF_1_NODEFLIB = 0x800

# e_machine numbers ld.so compares (elf.h); names as readelf prints them
MACHINES = {3: "EM_386", 62: "EM_X86_64", 183: "EM_AARCH64", 40: "EM_ARM", 243: "EM_RISCV",
            21: "EM_PPC64", 22: "EM_S390", 258: "EM_LOONGARCH"}


@dataclass(frozen=True)
class ElfInfo:
    """The dynamic-linking view of one ELF file."""

    name: str
    elfclass: int  # 32 or 64
    machine: str  # EM_X86_64, EM_AARCH64, ...
    etype: str  # ET_DYN, ET_EXEC, ...
    needed: tuple[str, ...] = ()
    rpath: tuple[str, ...] = ()  # DT_RPATH entries, unexpanded
    runpath: tuple[str, ...] = ()  # DT_RUNPATH entries, unexpanded
    soname: str | None = None
    interp: str | None = None  # PT_INTERP
    nodeflib: bool = False  # DF_1_NODEFLIB: skip ld.so.cache and default dirs
    dynamic: bool = True  # has a PT_DYNAMIC segment
    has_runpath: bool = False  # DT_RUNPATH present (even empty): DT_RPATH is then ignored


@dataclass(frozen=True, eq=False)
class ElfHeader:
    """The identity ld.so checks before mapping a candidate (open_verify)."""

    elfclass: int
    machine: str
    etype: str


def _split(value: str) -> tuple[str, ...]:
    return tuple(p for p in value.split(":")) if value else ()


def parse_elf_header(head: bytes, name: str) -> ElfHeader:
    """Class, machine and type from the first 64 bytes, as open_verify reads them."""
    if len(head) < 20:
        raise ParseError(name, f"file too short ({len(head)} bytes) for an ELF header")
    if head[:4] != ELF_MAGIC:
        raise ParseError(name, "invalid ELF header (no \\x7fELF magic)")
    cls = {1: 32, 2: 64}.get(head[4])
    if cls is None:
        raise ParseError(name, f"invalid ELF class byte {head[4]}")
    order = {1: "little", 2: "big"}.get(head[5])
    if order is None:
        raise ParseError(name, f"invalid ELF data encoding byte {head[5]}")
    etype = int.from_bytes(head[16:18], order)
    machine = int.from_bytes(head[18:20], order)
    return ElfHeader(cls, MACHINES.get(machine, f"EM_{machine}"),
                     {1: "ET_REL", 2: "ET_EXEC", 3: "ET_DYN", 4: "ET_CORE"}.get(etype, f"ET_{etype}"))


def parse_elf(source: "bytes | BinaryIO", name: str) -> ElfInfo:
    """Parse the dynamic section of an ELF file (bytes or a seekable binary stream)."""
    stream: BinaryIO = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source
    try:
        stream.seek(0)
        hdr = parse_elf_header(stream.read(64), name)
        fast = _parse_dynamic_fast(stream, hdr, name)
        if fast is not None:
            return fast
        stream.seek(0)
        return _parse_dynamic(stream, name, hdr)
    except ParseError:
        raise
    except Exception as exc:  # pyelftools raises many types on corrupt input
        raise ParseError(name, f"corrupt ELF ({type(exc).__name__}: {exc})") from None


_PT_LOAD, _PT_DYNAMIC, _PT_INTERP = 1, 2, 3
_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_STRSZ, _DT_SONAME, _DT_RPATH, _DT_RUNPATH = 0, 1, 5, 10, 14, 15, 29
_DT_FLAGS_1 = 0x6FFFFFFB


def _sections_fit(stream: BinaryIO, head: bytes, elfclass: int, e: str) -> bool:
    """The section header table and the section-name string table lie inside the file."""
    size = stream.seek(0, 2)
    if elfclass == 64:
        shoff = struct.unpack_from(e + "Q", head, 40)[0]
        shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", head, 58)
        want, sh = 64, struct.Struct(e + "IIQQQQ")  # name, type, flags, addr, offset, size
    else:
        shoff = struct.unpack_from(e + "I", head, 32)[0]
        shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", head, 46)
        want, sh = 40, struct.Struct(e + "IIIIII")
    if shoff == 0:
        return shnum == 0
    if shnum == 0 or shentsize != want or shstrndx >= shnum or shoff + shnum * want > size:
        return False
    stream.seek(shoff + shstrndx * want)
    raw = stream.read(sh.size)
    if len(raw) != sh.size:
        return False
    off, length = sh.unpack(raw)[4:6]
    return off + length <= size


def _parse_dynamic_fast(stream: BinaryIO, hdr: ElfHeader, name: str) -> "ElfInfo | None":
    """The same answer as pyelftools for a well-formed file, reading only the program
    headers, the dynamic segment and its strings (pyelftools' construct parsing was 3/4 of
    the resolver's time). None on anything unusual (no program headers, strings outside
    every PT_LOAD, non-ASCII names, no DT_NULL): the pyelftools path then decides, so
    corrupt files keep their exact error."""
    stream.seek(0)
    head = stream.read(64)
    e = "<" if head[5] == 1 else ">"
    if hdr.elfclass == 64:
        if len(head) < 64:
            return None
        phoff, phentsize, phnum = struct.unpack_from(e + "Q", head, 32)[0], *struct.unpack_from(e + "HH", head, 54)
        ph, need_ent, dyn_fmt = struct.Struct(e + "IIQQQQQQ"), 56, struct.Struct(e + "qQ")
    else:
        if len(head) < 52:
            return None
        phoff, phentsize, phnum = struct.unpack_from(e + "I", head, 28)[0], *struct.unpack_from(e + "HH", head, 42)
        ph, need_ent, dyn_fmt = struct.Struct(e + "IIIIIIII"), 32, struct.Struct(e + "iI")
    if phnum == 0 or phnum >= 0xFFFF or phentsize != need_ent or phoff == 0:
        return None
    if not _sections_fit(stream, head, hdr.elfclass, e):
        return None  # pyelftools reads the section headers first and fails on them
    stream.seek(phoff)
    table = stream.read(phentsize * phnum)
    if len(table) != phentsize * phnum:
        return None
    loads, dyn, interp_at = [], None, None
    for i in range(phnum):
        f = ph.unpack_from(table, i * phentsize)
        if hdr.elfclass == 64:  # p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz
            ptype, off, vaddr, filesz = f[0], f[2], f[3], f[5]
        else:  # p_type, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_flags, p_align
            ptype, off, vaddr, filesz = f[0], f[1], f[2], f[4]
        if ptype == _PT_LOAD:
            loads.append((vaddr, off, filesz))
        elif ptype == _PT_DYNAMIC:
            if dyn is not None:
                return None
            dyn = (off, filesz)
        elif ptype == _PT_INTERP:
            if interp_at is not None:
                return None
            interp_at = (off, filesz)
    if dyn is None:
        return None  # pyelftools decides whether a section-only dynamic table counts
    interp = None
    if interp_at is not None:
        stream.seek(interp_at[0])
        raw = stream.read(interp_at[1])
        if b"\0" not in raw:
            return None
        raw = raw[:raw.index(b"\0")]
        if not raw.isascii():
            return None
        interp = raw.decode("ascii")
    stream.seek(dyn[0])
    blob = stream.read(dyn[1])
    if len(blob) != dyn[1] or len(blob) % dyn_fmt.size or len(blob) // dyn_fmt.size > 100_000:
        return None
    tags: list[tuple[int, int]] = []
    for tag, val in dyn_fmt.iter_unpack(blob):
        if tag == _DT_NULL:
            break
        tags.append((tag, val))
    else:
        return None  # no DT_NULL inside the segment
    strtab = [v for t, v in tags if t == _DT_STRTAB]
    strsz = [v for t, v in tags if t == _DT_STRSZ]
    if len(strtab) != 1 or len(strsz) != 1:
        return None
    base = None
    for vaddr, off, filesz in loads:
        if vaddr <= strtab[0] < vaddr + filesz:
            base = off + strtab[0] - vaddr
            break
    if base is None or strsz[0] > 1 << 26:
        return None
    stream.seek(base)
    strings = stream.read(strsz[0])
    if len(strings) != strsz[0]:
        return None

    def text(off: int) -> "str | None":
        end = strings.find(b"\0", off)
        if off >= len(strings) or end < 0 or not strings[off:end].isascii():
            return None
        return strings[off:end].decode("ascii")

    needed: list[str] = []
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()
    has_runpath = False
    soname = None
    flags_1 = 0
    for t, v in tags:
        if t in (_DT_NEEDED, _DT_RPATH, _DT_RUNPATH, _DT_SONAME):
            value = text(v)
            if value is None:
                return None
            if t == _DT_NEEDED:
                needed.append(value)
            elif t == _DT_RPATH:
                rpath = _split(value)
            elif t == _DT_RUNPATH:
                runpath = _split(value)
                has_runpath = True
            else:
                soname = value
        elif t == _DT_FLAGS_1:
            flags_1 = v
    return ElfInfo(name, hdr.elfclass, hdr.machine, hdr.etype, tuple(needed), rpath, runpath,
                   soname, interp, bool(flags_1 & DF_1_NODEFLIB), True, has_runpath)


def _parse_dynamic(stream: BinaryIO, name: str, hdr: ElfHeader) -> ElfInfo:
    from elftools.elf.dynamic import DynamicSegment
    from elftools.elf.elffile import ELFFile

    elf = ELFFile(stream)
    interp = None
    dyn = None
    for seg in elf.iter_segments():
        ptype = seg["p_type"]
        if ptype == "PT_INTERP":
            interp = seg.get_interp_name()
        elif ptype == "PT_DYNAMIC" and isinstance(seg, DynamicSegment):
            dyn = seg
    if dyn is None:
        return ElfInfo(name, hdr.elfclass, hdr.machine, hdr.etype, interp=interp, dynamic=False)
    needed: list[str] = []
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()
    has_runpath = False
    soname = None
    flags_1 = 0
    count = 0
    for tag in dyn.iter_tags():
        count += 1
        if count > 100_000:
            raise ParseError(name, "dynamic section has no DT_NULL within 100000 entries")
        t = tag.entry.d_tag
        if t == "DT_NEEDED":
            needed.append(_text(tag.needed))
        elif t == "DT_RPATH":
            rpath = _split(_text(tag.rpath))
        elif t == "DT_RUNPATH":
            runpath = _split(_text(tag.runpath))
            has_runpath = True
        elif t == "DT_SONAME":
            soname = _text(tag.soname)
        elif t == "DT_FLAGS_1":
            flags_1 = int(tag.entry.d_val)
    return ElfInfo(name, hdr.elfclass, hdr.machine, hdr.etype, tuple(needed), rpath, runpath,
                   soname, interp, bool(flags_1 & DF_1_NODEFLIB), True, has_runpath)


def _text(value: "str | bytes") -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return value
