"""Property tests: random and mutated real inputs give a value or a named error, nothing else."""

from __future__ import annotations

import csv
import functools
import io

from hypothesis import given, strategies as st
from scapy.all import wrpcap, wrpcapng

from ascend_doctor.probes.dnsstats import analyse_capture
from ascend_doctor.probes.dnswire import DnsFormatError, parse_dns, parse_dns_tcp
from ascend_doctor.probes.msprof import (CsvFormatError, ProfileAcc, parse_api_statistic, parse_op_rows,
                                  scan_timeline)
from ascend_doctor.probes.pcapread import CaptureError

from .capgen import ndots_expansion, per_request
from .profgen import API_HEADER, OP_SUMMARY_HEADER, csv_text, op_summary_rows, timeline


@functools.lru_cache(maxsize=None)
def real_capture(ng: bool) -> bytes:
    import os
    import tempfile
    fd, path = tempfile.mkstemp(suffix=".pcap")
    os.close(fd)
    try:
        (wrpcapng if ng else wrpcap)(path, per_request(8, aaaa=True) + ndots_expansion(2))
        with open(path, "rb") as fh:
            return fh.read()
    finally:
        os.unlink(path)


def mutate(data: bytes, edits: list[tuple[int, int]], cut: int | None) -> bytes:
    b = bytearray(data)
    for pos, val in edits:
        if b:
            b[pos % len(b)] = val
    return bytes(b[:cut] if cut is not None else b)


edits = st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=8)


@given(st.booleans(), edits, st.one_of(st.none(), st.integers(0, 4000)))
def test_capture_reader_mutated(ng, e, cut):
    data = mutate(real_capture(ng), e, cut)
    try:
        t = analyse_capture(io.BytesIO(data), "f.pcap", (8000,))
    except CaptureError as exc:
        assert exc.offset >= 0 and exc.reason
        return
    assert t.records >= 0 and t.bytes_read <= len(data)


@given(st.binary(max_size=600))
def test_capture_reader_random(data):
    for head in (b"", b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00" + b"\0" * 8 + b"\xff\xff\0\0\x01\0\0\0",
                 b"\x0a\x0d\x0d\x0a"):
        try:
            analyse_capture(io.BytesIO(head + data), "f", ())
        except CaptureError:
            pass


def _dns_payloads():
    from scapy.all import DNS, DNSQR, DNSRR
    return [bytes(DNS(id=1, qd=DNSQR(qname="api.deepseek.example.com"))),
            bytes(DNS(id=2, qr=1, qd=DNSQR(qname="a.b"), an=DNSRR(rrname="a.b", rdata="10.0.0.1")
                      / DNSRR(rrname="a.b", type="AAAA", rdata="2001:db8::1")))]


@given(st.integers(0, 1), edits, st.one_of(st.none(), st.integers(0, 120)), st.binary(max_size=40))
def test_dns_parser(which, e, cut, tail):
    msg = mutate(_dns_payloads()[which], e, cut) + (tail if cut is None else b"")
    for fn, arg in ((parse_dns, msg), (parse_dns_tcp, len(msg).to_bytes(2, "big") + msg)):
        try:
            m = fn(arg)
        except DnsFormatError:
            continue
        assert isinstance(m.qname, str) and 0 <= m.rcode <= 15


@functools.lru_cache(maxsize=None)
def real_csvs() -> tuple[str, str]:
    api = [["host", "acl", "aclrtMemcpyAsync", 1.5, 3, 0.5, 0.1, 1.0, 0.01]]
    return csv_text(OP_SUMMARY_HEADER, op_summary_rows(2, memcpy_us=5.0)), csv_text(API_HEADER, api)


@given(st.integers(0, 1), st.lists(st.tuples(st.integers(0, 1 << 16), st.sampled_from(
    list(',"\n\r\ufeffx0.N/A;') + ["", "\x00"])), max_size=8), st.one_of(st.none(), st.integers(0, 3000)))
def test_msprof_csv_parsers(which, e, cut):
    text = real_csvs()[which]
    chars = list(text)
    for pos, val in e:
        chars[pos % len(chars)] = val
    text = "".join(chars)[:cut]
    parser = (parse_op_rows, parse_api_statistic)[which]
    try:
        parser(io.StringIO(text, newline=""), ProfileAcc())
    except (CsvFormatError, csv.Error):
        pass


@given(st.binary(max_size=3000), st.integers(1, 500))
def test_timeline_scan(extra, size):
    text = timeline([("host to device", 4096, 3)]).encode() + extra
    chunks = [text[i:i + size] for i in range(0, len(text), size)] + [b""]
    assert scan_timeline(chunks, ProfileAcc()) >= 3
