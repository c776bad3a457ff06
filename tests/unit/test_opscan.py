"""The C op_summary scanner (doctor/_opscan.c) against the Python path it replaces.

For every input the two must agree on everything ``parse_op_rows`` produces -- the row
count, the bad-row problem line, the keys in first-seen order and the float sums bit for
bit -- or the scanner must refuse (NativeFallback) and the caller reads with Python. The
inputs: the real op_summary and kernel_details headers (profgen), every way a record can be
cut by a read, csv's corner cases (quotes, doubled quotes, text after a closing quote, CR,
CRLF, empty lines, BOM, invalid UTF-8, NUL), and hypothesis mutations of real exports.
"""

from __future__ import annotations

import csv
import io

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ascend_doctor.host import LiveHost
from ascend_doctor.options import RunOptions
from ascend_doctor.probes import msprof
from ascend_doctor.probes.msprof import (CsvFormatError, NativeFallback, ProfileAcc,
                                         gather_profile, parse_op_bytes, parse_op_rows,
                                         text_lines)

from .profgen import (KERNEL_HEADER, OP_SUMMARY_HEADER, csv_text, op_row, op_summary_rows,
                      write_msprof, write_torch_npu)

native = pytest.importorskip("ascend_doctor._opscan", reason="the C scanner was not built")


def python_path(data: bytes):
    acc = ProfileAcc()
    try:
        return parse_op_rows(text_lines(io.BytesIO(data)), acc), acc
    except (CsvFormatError, csv.Error) as exc:
        return type(exc).__name__ + ": " + str(exc), None


def c_path(data: bytes, reader=io.BytesIO):
    acc = ProfileAcc()
    try:
        return parse_op_bytes(reader(data), acc), acc
    except (CsvFormatError, csv.Error) as exc:
        return type(exc).__name__ + ": " + str(exc), None


def same(data: bytes, reader=io.BytesIO) -> bool:
    """True when both paths agree; False when the scanner refused (NativeFallback)."""
    try:
        got = c_path(data, reader)
    except NativeFallback:
        return False
    want = python_path(data)
    assert got[0] == want[0]
    if want[1] is not None:
        a, b = got[1], want[1]
        assert a.problems == b.problems and a.rows == b.rows
        assert a._stream_memcpy == b._stream_memcpy and a._hccl_streams == b._hccl_streams
        assert list(a.devices) == list(b.devices)  # first-seen order too
        for d in a.devices:  # dataclass equality: every float compared exactly
            assert a.devices[d] == b.devices[d], d
        assert a == b
    return True


def op_summary(rows=None, bom=False) -> bytes:
    rows = op_summary_rows(3, memcpy_us=5.0, hccl_memcpy_us=7.5) if rows is None else rows
    return csv_text(OP_SUMMARY_HEADER, rows, bom=bom).encode()


def test_real_headers_agree():
    assert same(op_summary())
    assert same(op_summary(bom=True))
    kernel = [[s, 0, f"aclnnMatmul_{k}", "MatMul", "AI_CORE", 1.0 + k, 30.5 + k, 0.1, 20,
               '"8,4096"', "BF16", "ND", '"8,4096"', "BF16", "ND"] for s in range(3) for k in range(4)]
    kernel.append([1, 0, "MEMCPY_ASYNC", "MEMCPY_ASYNC", "MEMCPY_ASYNC", 9.0, 3.25, 0, 0,
                   "", "", "", "", "", ""])
    assert same(csv_text(KERNEL_HEADER, kernel).encode())


@pytest.mark.parametrize("case", [
    b"",  # empty file: the same format error
    b"\xef\xbb\xbf",  # a BOM and nothing else
    b"\n",  # a header of no field
    b"Device_id,OP Type\r\n0,Add\r\n",  # no duration column
    b"Device_id,Op Name,OP Type,Task Duration(us)\n0,a,Add,1.5\n0,a,Add",  # cut in the last row
    b"Device_id,Op Name,OP Type,Task Duration(us)\n0,a,Add,1.5,extra\n\n\r\n0,b,Add,2\r",
    b"Device_id,Op Name,OP Type,Task Duration(us)\r0,a,Add,1.5\r\r\n0,\"x,y\",Add,2",
    b'Device_id,Op Name,OP Type,Task Duration(us)\n0,"a""b",Add,1\n0,"a"b,Add,2\n0,a"b",Add,3\n',
    b'Device_id,Op Name,OP Type,Task Duration(us)\n0,x,"A""d",1\n0,x,"A"dd,2\n0,x,"""",3\n0,x,"",4\n',
    b'Device_id,Op Name,OP Type,Task Duration(us)\n0,"multi\nline\r\nname",Add,1\n0,"open',
    b"Device_id,Op Name,OP Type,Task Duration(us)\n0,a,Add,N/A\n0,a,Add,\n0,a,Add,x\n0,a,Add, 1_0 \n",
    b"Device_id,Op Name,OP Type,Task Duration(us)\n0,a,Add,1e999\n0,a,Add,-0\n0,a,Add,inf\n0,a,Add,.5\n",
    b"\xef\xbb\xbf\"Device_id\",\"Op Name\",\"OP Type\",\"Task Duration(us)\"\n0,M,MEMCPY_ASYNC,4\n",
    b"Device_id,Op Name,OP Type,Task Type,Stream ID,Task Duration(us),Step Id\n"
    b"0,MEMCPY_ASYNC,MEMCPY_ASYNC,MEMCPY_ASYNC,3,5,1\n1,hcom_x,HcomAllReduce,AI_CPU,7,2,1\n"
    b"1,MEMCPY_ASYNC,MEMCPY_ASYNC,MEMCPY_ASYNC,7,4,2\n,,,,,,\n",
])
def test_corner_cases_agree(case):
    assert same(case)


@pytest.mark.parametrize("block", [1, 2, 3, 5, 7, 64])
def test_every_cut_of_a_read_agrees(monkeypatch, block):
    """A record, a CRLF or a quoted field cut by the read: the carried bytes are reread."""
    monkeypatch.setattr(msprof, "OP_BLOCK", block)
    data = op_summary(bom=True) + b'0,1,2,3,"a\r\nb",MEMCPY_ASYNC,x,y,1,2.5\r\n0,1\r'
    assert same(data)
    assert same(data.replace(b"\r\n", b"\r"))
    assert same(data.replace(b"\r\n", b"\n"))


def test_a_stream_without_readinto_agrees():
    class ReadOnly:  # what a wrapped or decompressing stream may offer
        def __init__(self, data):
            self.b = io.BytesIO(data)

        def read(self, n=-1):
            return self.b.read(n)

    assert same(op_summary(), ReadOnly)


def test_what_it_does_not_emulate_is_refused(monkeypatch):
    with pytest.raises(NativeFallback):  # NUL: an error before Python 3.11
        c_path(op_summary() + b"0,\x00\n")
    limit = csv.field_size_limit()
    long_field = op_summary() + b"0,1,2,3," + b"x" * (limit + 1) + b",Add,AI_CORE,1,2,3\n"
    with pytest.raises(NativeFallback):
        c_path(long_field)
    assert same(op_summary() + b"0,1,2,3," + b"x" * limit + b",Add,AI_CORE,1,2,3\n")
    monkeypatch.setattr(msprof, "OP_BLOCK", 1024)
    monkeypatch.setattr(msprof, "OP_CARRY", 4096)
    with pytest.raises(NativeFallback):  # one record longer than the carry bound
        c_path(op_summary() + b"0," * 5000 + b"\n")


def test_gather_profile_reads_refused_input_with_python(tmp_path, monkeypatch):
    """Both ways through gather_profile, and a refused file, give the same Profile."""
    write_msprof(tmp_path / "a", memcpy_us=40.0)
    write_torch_npu(tmp_path / "b", memcpy_us=3.0)
    (f,) = (tmp_path / "a").rglob("op_summary_*.csv")
    with f.open("ab") as fh:
        fh.write(b"0,\x00,1\r\n")  # forces the fallback for this file
    opts = [RunOptions(profile_dir=str(tmp_path / d)) for d in ("a", "b")]
    fast = [gather_profile(LiveHost(), o) for o in opts]
    monkeypatch.setenv("ASCEND_DOCTOR_CSV_ENGINE", "python")
    assert msprof._native() is None
    assert [gather_profile(LiveHost(), o) for o in opts] == fast


def row(dev: str, name: str, task: str, dur: str) -> list:
    """An op_summary row whose duration is any text (profgen's op_row takes numbers)."""
    r = op_row(dev, 2, name, name if task == "MEMCPY_ASYNC" else "Op", task, 1.0, 1.0)
    r[9] = dur
    return r


rows_st = st.lists(st.tuples(
    st.sampled_from(["0", "1", "7", "", " 0"]),
    st.sampled_from(["MatMulV2", "MEMCPY_ASYNC", "hcom_allReduce", "a,b", 'q"t', "\u4e2d"]),
    st.sampled_from(["AI_CORE", "MEMCPY_ASYNC", "AI_CPU", "HCCL", ""]),
    st.sampled_from(["12.5", "0.1", "1e3", "N/A", "", "x", "3.", "-2", "7_0"])), max_size=12)


# at least 300 examples; ASCEND_DOCTOR_FUZZ=long (tests/conftest.py) raises it
@settings(max_examples=max(300, settings.default.max_examples), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows_st, st.lists(st.tuples(st.integers(0, 1 << 16), st.sampled_from(
    [b",", b'"', b"\n", b"\r", b"\r\n", b"", b"x", b"\xff", b"\xe4\xb8", b"\xef\xbb\xbf", b"0"])),
    max_size=6), st.one_of(st.none(), st.integers(0, 4000)), st.sampled_from([3, 17, 4 << 20]))
def test_mutated_exports_agree(rows, edits, cut, block):
    msprof.OP_BLOCK, saved = block, msprof.OP_BLOCK
    try:
        data = bytearray(op_summary([row(d, n, t, u) for d, n, t, u in rows] or None))
        for pos, val in edits:
            p = pos % (len(data) + 1)
            data[p:p + 1] = val
        same(bytes(data)[:cut])
    finally:
        msprof.OP_BLOCK = saved


def _rows(*names: bytes) -> bytes:
    head = ",".join(OP_SUMMARY_HEADER).encode() + b"\r\n"
    out = [head]
    for i, name in enumerate(names):
        r = op_row(0, 2, "X", "MatMulV2", "AI_CORE", 1000 + i, 10.0)
        cells = [str(v).encode() for v in r]
        cells[4] = name  # Op Name
        cells[5] = name  # OP Type: the key's name
        out.append(b",".join(cells) + b"\r\n")
    return b"".join(out)


@pytest.mark.parametrize("data", [
    # two rows whose different invalid bytes both decode to U+FFFD: one key for Python
    _rows(b"Mat\xffMul", b"Mat\xfeMul"),
    # a UTF-8 sequence split by a quote: invalid in the stream, whole once unescaped
    _rows(b'"\xe4"\xb8\xad', b"Add"),
    # a file that is only a cut BOM
    b"\xef\xbb",
    b"\xef",
    # invalid bytes of every kind (cut, surrogate) in a row
    b"Device_id,Op Name,OP Type,Task Duration(us)\n0,\xff\xfe,Add,1\n\xe4\xb8,\xe4\xb8\xad,\xed\xa0\x80,2\n",
    # and the same shapes in the header
    _rows(b"Add").replace(b"Device_id", b"Device_id\xff", 1),
], ids=["two-invalid-names", "split-by-quote", "cut-bom-2", "cut-bom-1", "mixed", "header"])
def test_invalid_utf8_shapes_agree(data):
    """Issue 34: the three shapes where the scanner and the Python path disagreed. The
    scanner now leaves every record with invalid UTF-8 to the Python path (what
    gather_profile does on NativeFallback), so both give the same Profile."""
    assert not same(data)  # refused by the scanner: read by Python
    with pytest.raises(NativeFallback):
        c_path(data)


def test_valid_non_ascii_still_takes_the_scanner():
    assert same(_rows("矩阵乘".encode(), "Add".encode(), "😀".encode()))
