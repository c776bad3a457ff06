"""A sysroot's machine is the root's own (its shell's ELF header), not the doctor's: an arm64
tree inspected from x86_64 is an aarch64 host, so its aarch64 wheels are resolved, not set
aside as another machine's. Runs everywhere (no qemu): the ELF headers are built here."""

from __future__ import annotations

import platform
import struct

from ascend_doctor.host import LiveHost
from ascend_doctor.host.live import elf_machine_name


def elf_header(machine: int, data: int = 1, cls: int = 2) -> bytes:
    """The first 64 bytes of an ELF executable (ET_EXEC) for ``machine``."""
    order = "<" if data == 1 else ">"
    ident = b"\x7fELF" + bytes([cls, data, 1, 0]) + b"\0" * 8
    return ident + struct.pack(order + "HHI", 2, machine, 1) + b"\0" * 40


def test_machine_names_from_elf_headers():
    assert elf_machine_name(elf_header(183)) == "aarch64"
    assert elf_machine_name(elf_header(62)) == "x86_64"
    assert elf_machine_name(elf_header(22, data=2)) == "s390x"  # big-endian e_machine
    assert elf_machine_name(elf_header(21)) == "ppc64le"
    assert elf_machine_name(elf_header(21, data=2)) == "ppc64"
    assert elf_machine_name(elf_header(9999)) is None
    assert elf_machine_name(b"#!/bin/sh\n" + b"\0" * 60) is None
    assert elf_machine_name(b"\x7fELF") is None


def test_sysroot_arch_comes_from_its_shell(tmp_path):
    (tmp_path / "usr/bin").mkdir(parents=True)
    (tmp_path / "usr/bin/sh").write_bytes(elf_header(183) + b"\0" * 512)
    (tmp_path / "bin").symlink_to("usr/bin")  # merged /usr: /bin/sh resolves inside the root
    assert LiveHost(str(tmp_path), env={}).info().arch == "aarch64"


def test_sysroot_without_elf_keeps_the_doctors_machine(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin/sh").write_text("#!/bin/busybox sh\n")
    assert LiveHost(str(tmp_path), env={}).info().arch == platform.machine()
