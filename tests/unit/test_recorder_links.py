"""Issue 34, LOW: the block-audit plugin's file (doctor/vllm_plugin/recorder.py) in a
directory another account can write. The engine may run as root: a link planted at FILE or
FILE.N must never make it append to, rename over or truncate the link's target."""

from __future__ import annotations

import os

import pytest

from ascend_doctor.vllm_plugin.recorder import AuditFile


@pytest.fixture
def victim(tmp_path):
    v = tmp_path / "victim"
    v.write_bytes(b"precious\n")
    return v


def test_a_link_at_the_file_is_not_followed(tmp_path, victim):
    d = tmp_path / "audit"
    d.mkdir()
    (d / "audit.jsonl").symlink_to(victim)
    out = AuditFile(str(d / "audit.jsonl"), 4096, 2)
    with pytest.raises(OSError):
        out.write(b'{"t":"hdr"}\n')
    out.close()
    assert victim.read_bytes() == b"precious\n"


def test_a_hard_link_at_the_file_is_refused(tmp_path, victim):
    d = tmp_path / "audit"
    d.mkdir()
    os.link(victim, d / "audit.jsonl")
    out = AuditFile(str(d / "audit.jsonl"), 4096, 0)
    with pytest.raises(OSError, match="one link"):
        out.write(b"x\n")
    assert victim.read_bytes() == b"precious\n"


def test_rotation_renames_links_never_writes_through_them(tmp_path, victim):
    d = tmp_path / "audit"
    d.mkdir()
    path = d / "audit.jsonl"
    out = AuditFile(str(path), 4096, 2)
    out.write(b"a" * 100 + b"\n")
    (d / "audit.jsonl.1").symlink_to(victim)  # planted while the engine runs
    out.rotate()
    out.write(b"b\n")
    out.close()
    assert victim.read_bytes() == b"precious\n"
    assert (d / "audit.jsonl.2").is_symlink()  # the link itself moved on
    assert (d / "audit.jsonl.1").read_bytes() == b"a" * 100 + b"\n"
    assert path.read_bytes() == b"b\n"


def test_truncation_is_of_the_open_file_not_a_swapped_name(tmp_path, victim):
    d = tmp_path / "audit"
    d.mkdir()
    path = d / "audit.jsonl"
    out = AuditFile(str(path), 4096, 0)
    out.write(b"a" * 100 + b"\n")
    os.rename(path, d / "moved")  # the name now points at the victim
    path.symlink_to(victim)
    out.rotate()
    out.write(b"c\n")
    out.close()
    assert victim.read_bytes() == b"precious\n"
    assert (d / "moved").read_bytes() == b"c\n"
