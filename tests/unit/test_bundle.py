"""Bundles: collect on a host, replay offline with the same findings; corrupt ones refuse."""

from __future__ import annotations

import gzip
import io
import tarfile

import pytest

from ascend_doctor.bundle import BundleData, BundleHost, RecordingHost
from ascend_doctor.engine import run
from ascend_doctor.errors import BundleError
from ascend_doctor.options import RunOptions
from ascend_doctor.redact import REDACTED

from .test_ldconf import broken_ldconf


def _comparable(report):
    return [(r.check_id, r.status, [(f.status, f.message, dict(f.evidence)) for f in r.findings])
            for r in report.results]


def test_collect_then_replay_gives_the_same_findings(sysroot, tmp_path):
    broken_ldconf(sysroot)
    live = run(sysroot.host(), RunOptions(), config=None)
    rec = RecordingHost(sysroot.host())
    recorded = run(rec, RunOptions())
    data = rec.finish("sysroot", RunOptions().public())
    path = tmp_path / "b.tar.gz"
    data.write(str(path))
    replay = run(BundleHost.open(str(path)), RunOptions())
    assert _comparable(live) == _comparable(recorded) == _comparable(replay)
    assert any(r.status.value == "fail" for r in replay.results)


def test_truncated_and_corrupt_bundles_are_named(tmp_path):
    from ascend_doctor.demo import demo_bundle_bytes
    raw = demo_bundle_bytes()
    (tmp_path / "trunc.tar.gz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(BundleError, match="trunc.tar.gz"):
        BundleHost.open(str(tmp_path / "trunc.tar.gz"))
    (tmp_path / "junk.tar.gz").write_bytes(b"PK\x03\x04 definitely not a tar")
    with pytest.raises(BundleError, match="not a readable bundle"):
        BundleHost.open(str(tmp_path / "junk.tar.gz"))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("hello.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    (tmp_path / "other.tar.gz").write_bytes(buf.getvalue())
    with pytest.raises(BundleError, match="not an ascend-doctor bundle"):
        BundleHost.open(str(tmp_path / "other.tar.gz"))


def test_a_bundle_missing_a_blob_is_truncated(tmp_path):
    from ascend_doctor.demo import demo_bundle_data
    data = demo_bundle_data()
    data.blobs.pop(next(iter(data.blobs)))
    with pytest.raises(BundleError, match="truncated"):
        BundleData.load(data.to_bytes())


def test_recording_redacts_secrets(sysroot):
    sysroot.write("/etc/systemd/system/vllm.service.d/env.conf",
                  "[Service]\nEnvironment=HF_TOKEN=hf_abcdefghijklmnop\nEnvironment=OMP_NUM_THREADS=1\n")
    sysroot.write("/proc/99/environ", b"HF_TOKEN=hf_abcdefghijklmnop\0PATH=/usr/bin\0")
    sysroot.write("/proc/99/cmdline", b"vllm\0serve\0m\0--api-key\0sk-live-123456\0")
    rec = RecordingHost(sysroot.host())
    rec.read_bytes("/etc/systemd/system/vllm.service.d/env.conf")
    rec.proc_read(99, "environ")
    rec.proc_read(99, "cmdline")
    blob = rec.finish("sysroot", {}).to_bytes()
    plain = gzip.decompress(blob)
    assert b"hf_abcdefghijklmnop" not in plain and b"sk-live-123456" not in plain
    assert REDACTED.encode() in plain and b"OMP_NUM_THREADS=1" in plain


def test_demo_bundle_is_the_build_output():
    """The shipped scenario is generated, never hand-edited: rebuilding gives the same bytes."""
    from ascend_doctor.demo import demo_bundle_bytes
    from ascend_doctor.demo.build import build
    assert build() == demo_bundle_bytes(), "run `python -m ascend_doctor.demo.build` and commit"


def test_streams_record_only_the_ranges_read(sysroot, tmp_path):
    """A parser that seeks (ELF) gets the same bytes back from the bundle, and no more."""
    big = bytes(range(256)) * 4096 * 8  # 8 MiB
    sysroot.write("/opt/lib/libbig.so", big)
    rec = RecordingHost(sysroot.host())
    with rec.open_stream("/opt/lib/libbig.so") as fh:
        head = fh.read(64)
        fh.seek(len(big) - 4096)
        tail = fh.read(100)
    data = BundleData.load(rec.finish("sysroot", {}).to_bytes())
    assert sum(len(b) for b in data.blobs.values()) < 64 * 1024  # buffered read-ahead only
    replay = BundleHost(data)
    fh = replay.open_stream("/opt/lib/libbig.so")
    assert fh.read(64) == head
    fh.seek(-4096, 2)
    assert fh.read(100) == tail
    fh.seek(1_000_000)
    with pytest.raises(Exception, match="not collected"):
        fh.read(10)


def test_streamed_logs_replay_line_by_line(sysroot):
    lines = [f"INFO 12-02 03:1{i % 10}:00 line {i}\n" for i in range(20000)]
    sysroot.write("/var/log/vllm/server.log", "".join(lines))
    rec = RecordingHost(sysroot.host())
    with rec.open_stream("/var/log/vllm/server.log") as fh:
        first = [l.decode() for l in fh]
    replay = BundleHost(BundleData.load(rec.finish("sysroot", {}).to_bytes()))
    with replay.open_stream("/var/log/vllm/server.log") as fh:
        assert [l.decode() for l in fh] == first == lines
