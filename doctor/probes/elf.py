"""What ld.so reads from a shared object: class, machine, DT_NEEDED, DT_RPATH, DT_RUNPATH,
DT_SONAME, DT_FLAGS_1 — parsed with pyelftools from bytes or a seekable stream.

Pure: ``parse_elf(data_or_stream, name)`` does no I/O of its own (it only reads the stream it
is given). Anything that is not a well-formed ELF dynamic object raises ``ParseError``
naming the file, never another exception.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import BinaryIO

from ..errors import ParseError

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


@dataclass(frozen=True)
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
        stream.seek(0)
        return _parse_dynamic(stream, name, hdr)
    except ParseError:
        raise
    except Exception as exc:  # pyelftools raises many types on corrupt input
        raise ParseError(name, f"corrupt ELF ({type(exc).__name__}: {exc})") from None


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
