"""BundleData.load's caps, with the limits lowered so the test stays small: total inflated
size (incompressible data, so the ratio cap does not fire first) and a plain, uncompressed
tar is bounded too."""

from __future__ import annotations

import gzip
import io
import os
import tarfile

import pytest

from ascend_doctor import bundle
import ascend_doctor.bundle.read  # the caps live in the reader (doctor/bundle/read.py)
from ascend_doctor.bundle import BundleData
from ascend_doctor.errors import BundleError


def _tar(n_members: int, size: int) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for i in range(n_members):
            info = tarfile.TarInfo(f"blobs/{i:064x}")
            info.size = size
            tar.addfile(info, io.BytesIO(os.urandom(size)))
    return raw.getvalue()


@pytest.mark.parametrize("compress", [True, False])
def test_total_inflated_cap(monkeypatch, compress):
    monkeypatch.setattr(bundle.read, "MAX_INFLATED", 4 * 1024 * 1024)
    data = _tar(6, 1024 * 1024)
    with pytest.raises(BundleError, match="inflates past 4 MiB"):
        BundleData.load(gzip.compress(data) if compress else data)


def test_index_member_cap(monkeypatch):
    monkeypatch.setattr(bundle.read, "MAX_INDEX", 1000)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        body = b"{" + b'"a":1,' * 300 + b'"b":2}'
        info = tarfile.TarInfo("index.json")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    with pytest.raises(BundleError, match=r"'index.json' is \d+ bytes \(limit 1000\)"):
        BundleData.load(gzip.compress(raw.getvalue()))
