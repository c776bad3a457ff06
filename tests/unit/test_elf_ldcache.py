"""ELF and ld.so.cache parsers on real inputs (gcc output, ldconfig -r caches, this host's
cache) and hypothesis fuzzing of both (a value or a named ParseError, never a crash)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from ascend_doctor.demo.elfgen import shared_object
from ascend_doctor.errors import ParseError
from ascend_doctor.probes.elf import parse_elf
from ascend_doctor.probes.ldcache import build_ldcache, parse_ldcache
from tests.libfixtures import gcc


def test_elf_fields_from_gcc(tmp_path):
    dep = gcc(tmp_path / "libdep.so", "-Wl,-soname,libdep.so.1")
    lib = gcc(tmp_path / "libtop.so", "-Wl,-soname,libtop.so.2", f"-L{tmp_path}", "-ldep",
              "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/lib:/opt/x")
    info = parse_elf(lib.read_bytes(), str(lib))
    assert info.elfclass == 64 and info.machine == "EM_X86_64" and info.etype == "ET_DYN"
    assert "libdep.so.1" in info.needed and info.soname == "libtop.so.2"
    assert info.runpath == ("$ORIGIN/lib", "/opt/x") and info.has_runpath and info.rpath == ()
    old = gcc(tmp_path / "libold.so", "-Wl,--disable-new-dtags", "-Wl,-rpath,/opt/r")
    with open(old, "rb") as fh:  # from a stream too
        o = parse_elf(fh, str(old))
    assert o.rpath == ("/opt/r",) and not o.has_runpath
    assert parse_elf(dep.read_bytes(), "d").soname == "libdep.so.1"


def test_wrong_class_and_corrupt(tmp_path):
    try:
        lib32 = gcc(tmp_path / "lib32.so", "-m32", "-nostdlib")
        assert parse_elf(lib32.read_bytes(), "x").elfclass == 32
    except subprocess.CalledProcessError:
        pytest.skip("gcc -m32 unavailable")
    data = gcc(tmp_path / "libc1.so").read_bytes()
    with pytest.raises(ParseError, match="libcut.so"):
        parse_elf(data[:300], "libcut.so")
    with pytest.raises(ParseError, match="invalid ELF header"):
        parse_elf(b"/* GNU ld script */\nGROUP ( libc.so.6 )\n", "libc.so")
    with pytest.raises(ParseError, match="too short"):
        parse_elf(b"\x7fELF", "tiny.so")


def test_generated_elf_is_read_by_readelf_and_us(tmp_path):
    b = shared_object(("libascendcl.so",), "libx.so", runpath="$ORIGIN")
    p = tmp_path / "libx.so"
    p.write_bytes(b)
    info = parse_elf(b, "libx.so")
    assert info.needed == ("libascendcl.so",) and info.runpath == ("$ORIGIN",)
    if shutil.which("readelf"):
        out = subprocess.run(["readelf", "-d", str(p)], capture_output=True, text=True).stdout
        assert "libascendcl.so" in out and "RUNPATH" in out


def _ldconfig_cache(root: Path, fmt: str | None) -> bytes:
    if shutil.which("ldconfig") is None:
        pytest.skip("ldconfig not installed")
    lib = root / "opt/a/libfoo.so.1"
    if not lib.exists():
        gcc(lib, "-Wl,-soname,libfoo.so.1")
        gcc(root / "opt/a/libbar.so.3", "-Wl,-soname,libbar.so.3")
        (root / "etc").mkdir(exist_ok=True)
        (root / "etc/ld.so.conf").write_text("/opt/a\n")
    argv = ["ldconfig", "-r", str(root)] + (["-c", fmt] if fmt else [])
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"{' '.join(argv)}: {r.stderr}")
    return (root / "etc/ld.so.cache").read_bytes()


@pytest.mark.parametrize("fmt,expect", [(None, "new"), ("new", "new"), ("old", "old"),
                                        ("compat", "compat")])
def test_real_ldconfig_caches(tmp_path, fmt, expect):
    data = _ldconfig_cache(tmp_path, fmt)
    c = parse_ldcache(data)
    assert c.format == expect
    assert c.lookup("libfoo.so.1", 0x0303).path == "/opt/a/libfoo.so.1"
    assert {e.name for e in c.entries} == {"libfoo.so.1", "libbar.so.3"}
    if expect != "old":
        assert c.generator and "ldconfig" in c.generator


def test_truncated_cache_is_named(tmp_path):
    data = _ldconfig_cache(tmp_path, None)
    for cut in (10, 30, 60, len(data) - 120):
        with pytest.raises(ParseError):
            parse_ldcache(data[:cut], "/etc/ld.so.cache")
    with pytest.raises(ParseError, match="not an ld.so.cache"):
        parse_ldcache(b"garbage" * 5)


def test_this_machines_cache_agrees_with_ldconfig_p():
    if not os.path.exists("/etc/ld.so.cache") or shutil.which("ldconfig") is None:
        pytest.skip("no ld.so.cache here")
    c = parse_ldcache(Path("/etc/ld.so.cache").read_bytes())
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    listed = [ln.strip() for ln in out.splitlines()[1:] if "=>" in ln]
    assert len(c.entries) == len(listed) > 10
    first = listed[0]
    assert first.split()[0] == c.entries[0].name and first.endswith(c.entries[0].path)


def test_writer_round_trip_and_ldconfig_reads_it(tmp_path):
    rows = [("libz.so.1", "/lib/x86_64-linux-gnu/libz.so.1", 0x0303),
            ("libascendcl.so", "/usr/local/Ascend/driver/lib64/libascendcl.so", 0x0303)]
    data = build_ldcache(rows, "test gen")
    c = parse_ldcache(data)
    assert [(e.name, e.path, e.flags) for e in c.entries] == rows and c.generator == "test gen"
    if shutil.which("ldconfig"):
        (tmp_path / "etc").mkdir()
        (tmp_path / "etc/ld.so.cache").write_bytes(data)
        out = subprocess.run(["ldconfig", "-r", str(tmp_path), "-p"], capture_output=True,
                             text=True).stdout
        assert "libascendcl.so (libc6,x86-64) => /usr/local/Ascend" in out


_ELF_SEED = shared_object(("libascendcl.so", "libc.so.6"), "libs.so", rpath="$ORIGIN")
_CACHE_SEED = build_ldcache([("libc.so.6", "/lib/libc.so.6", 0x0303),
                             ("libm.so.6", "/lib/libm.so.6", 0x0303)])


@st.composite
def mutated(draw, seed: bytes):
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 8))):
        i = draw(st.integers(0, len(data) - 1))
        data[i] = draw(st.integers(0, 255))
    cut = draw(st.integers(0, len(data)))
    return bytes(data[:cut]) if draw(st.booleans()) else bytes(data)


@given(st.one_of(mutated(_ELF_SEED), st.binary(max_size=300)))
def test_fuzz_elf(data):
    try:
        parse_elf(data, "fuzz.so")
    except ParseError as exc:
        assert "fuzz.so" in str(exc)


@given(st.one_of(mutated(_CACHE_SEED), st.binary(max_size=300)))
def test_fuzz_ldcache(data):
    try:
        parse_ldcache(data, "/etc/ld.so.cache")
    except ParseError as exc:
        assert "ld.so.cache" in str(exc)


@given(st.text(max_size=400))
def test_fuzz_maps(text):
    from ascend_doctor.probes.ascendfiles import parse_maps
    assert all(p.startswith("/") for p in parse_maps(text))
