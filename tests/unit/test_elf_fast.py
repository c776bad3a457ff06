"""The struct fast path of parse_elf gives pyelftools' answer (kept as the reference,
``_parse_dynamic``) on real files: every ELF in the system library directory, the real
torch_npu / vllm_ascend wheels' shared objects, and corrupted copies (same error text)."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import pytest

from ascend_doctor.errors import ParseError
from ascend_doctor.probes import elf

LIBDIR = Path("/usr/lib/x86_64-linux-gnu")
WHEELS = Path(__file__).resolve().parents[1] / ".cache" / "wheels"


def reference(data: bytes, name: str) -> tuple[str, object]:
    """pyelftools alone, with parse_elf's error wrapping."""
    try:
        hdr = elf.parse_elf_header(data[:64], name)
        return "ok", elf._parse_dynamic(io.BytesIO(data), name, hdr)
    except ParseError as exc:
        return "err", str(exc)
    except Exception as exc:
        return "err", str(ParseError(name, f"corrupt ELF ({type(exc).__name__}: {exc})"))


def ours(data: bytes, name: str) -> tuple[str, object]:
    try:
        return "ok", elf.parse_elf(data, name)
    except ParseError as exc:
        return "err", str(exc)


def system_elves(limit: int = 400) -> list[Path]:
    out = []
    for p in sorted(LIBDIR.rglob("*")) if LIBDIR.is_dir() else []:
        if p.is_file() and not p.is_symlink():
            with open(p, "rb") as fh:
                if fh.read(4) == elf.ELF_MAGIC:
                    out.append(p)
        if len(out) >= limit:
            break
    return out


def test_system_libraries_same_answer_and_fast_path_taken():
    files = system_elves()
    if len(files) < 20:
        pytest.skip(f"{LIBDIR}: fewer than 20 ELF files")
    fast = 0
    for p in files:
        data = p.read_bytes()
        assert ours(data, str(p)) == reference(data, str(p)), p
        hdr = elf.parse_elf_header(data[:64], str(p))
        fast += elf._parse_dynamic_fast(io.BytesIO(data), hdr, str(p)) is not None
    assert fast >= len(files) * 0.9  # the fast path is the common case, not the fallback


def test_real_wheel_shared_objects_same_answer():
    wheels = sorted(WHEELS.glob("torch_npu-*.whl")) + sorted(WHEELS.glob("vllm_ascend-*.whl"))
    if not wheels:
        pytest.skip(f"no torch_npu/vllm_ascend wheel in {WHEELS}")
    seen = 0
    for w in wheels:
        with zipfile.ZipFile(w) as z:
            for n in z.namelist():
                if n.endswith(".so") or ".so." in n.rsplit("/", 1)[-1]:
                    data = z.read(n)
                    got = ours(data, n)
                    assert got == reference(data, n), n
                    seen += got[0] == "ok" and bool(got[1].needed)
    assert seen >= 5


def _mutations(data: bytes) -> list[bytes]:
    """Truncations at the dynamic segment and header, a zeroed program-header table and a
    DT_STRTAB pointing outside every segment."""
    hdr = elf.parse_elf_header(data[:64], "x")
    out = [data[:64], data[:200], data[: len(data) // 2], data[: len(data) - 1]]
    b = bytearray(data)
    if hdr.elfclass == 64:
        phoff = int.from_bytes(data[32:40], "little")
        phnum = int.from_bytes(data[56:58], "little")
        z = bytearray(data)
        z[phoff:phoff + 56 * phnum] = bytes(56 * phnum)
        out.append(bytes(z))
        for i in range(phnum):
            o = phoff + i * 56
            if int.from_bytes(data[o:o + 4], "little") == 2:  # PT_DYNAMIC
                off = int.from_bytes(data[o + 8:o + 16], "little")
                size = int.from_bytes(data[o + 32:o + 40], "little")
                out.append(data[: off + size // 2])
                for j in range(0, size, 16):
                    if int.from_bytes(data[off + j:off + j + 8], "little") == 5:  # DT_STRTAB
                        b[off + j + 8:off + j + 16] = (1 << 40).to_bytes(8, "little")
                        out.append(bytes(b))
    return out


def test_corrupt_copies_keep_the_reference_error():
    files = [p for p in system_elves(60) if p.stat().st_size < 4 << 20][:12]
    if not files:
        pytest.skip(f"no small ELF file in {LIBDIR}")
    for p in files:
        for k, data in enumerate(_mutations(p.read_bytes())):
            got = ours(data, p.name)
            assert got == reference(data, p.name), (p, k)
            if got[0] == "err":
                assert got[1].startswith(p.name)
