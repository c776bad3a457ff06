"""The C DNS scanner (doctor/_dnsscan.c) against the Python path it replaces.

For every classic pcap the two must agree on the whole DnsTraffic (compared as the repr of
dataclasses.asdict, so dict orders and -0.0 count) and on the Analyser state behind it
(clients, names, qtypes and targets in insertion order, latency samples in reservoir order,
addr_names, counters, the LCG), or the scanner must refuse (NativeFallback) and the caller
reads with Python. Inputs: the bench capture, scapy captures, the fast-path tests' odd and
broken captures on every link type, both byte orders and nanosecond pcaps, the table
bounds (clients, names, samples, pending, addresses, targets), DNS corner cases, every
truncation of a small capture, corrupt record headers, reads of 1 byte and up, streams
without readinto or seek, and hypothesis mutations (flips, cuts, insertions).
"""

from __future__ import annotations

import dataclasses
import io
import os
import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ascend_doctor.probes import dnsstats, dnswire, pcapread
from ascend_doctor.probes.dnsstats import (Analyser, NativeFallback, analyse_capture,
                                           _scan_native)
from ascend_doctor.probes.pcapread import CaptureError, CaptureStats, iter_packets

from .test_dns_fastpath import (CLIENTS, NAMES, RESOLVER, SERVICE, dns, eth, ip4, ip6,
                                mixed_frames, pcap, tcp, udp)

native = pytest.importorskip("ascend_doctor._dnsscan", reason="the C scanner was not built")

PORTS = frozenset({8000})


# -- the two paths ------------------------------------------------------------------------
def py_state(data: bytes, ports=PORTS):
    stats, an, err = CaptureStats(), Analyser(), None
    try:
        for p in iter_packets(io.BytesIO(data), ports, stats):
            an.add(p)
    except CaptureError as exc:
        err = exc
    return an, stats, err


def state(an: Analyser, stats: CaptureStats, err) -> dict:
    """Everything the Analyser keeps that result() (or a later one) could read."""
    clients = []
    for addr, c in an.clients.items():
        slots = {k: getattr(c, k) for k in c.__slots__ if k not in ("names", "qtypes", "lat",
                                                                   "targets")}
        names = [(n, (v.queries, v.nx, v.servfail, v.answered, v.last, v.last_a, v.last_aaaa))
                 for n, v in c.names.items()]
        clients.append((addr, slots, names, list(c.qtypes.items()), list(c.lat),
                        list(c.targets.items())))
    return {"clients": clients,
            "addr_names": [(a, sorted(s)) for a, s in an.addr_names.items()],
            "counters": (an.dns_messages, an.malformed, an.syns, an.dropped_clients, an.first,
                         an.last, an._rng),
            "stats": (stats.records, stats.kept, stats.bytes, stats.format,
                      sorted(stats.linktypes), sorted(stats.skipped_linktypes)),
            "error": None if err is None else (err.offset, err.reason)}


def traffic_repr(t) -> str:
    return repr(dataclasses.asdict(t))


def python_traffic(stream_data: bytes, ports=PORTS, fast=True, monkeypatch=None):
    os.environ["ASCEND_DOCTOR_PCAP_ENGINE"] = "python"
    try:
        return _outcome(lambda: analyse_capture(io.BytesIO(stream_data), "x", ports, fast=fast))
    finally:
        del os.environ["ASCEND_DOCTOR_PCAP_ENGINE"]


def _outcome(f):
    try:
        return traffic_repr(f())
    except CaptureError as exc:
        return ("CaptureError", exc.offset, exc.reason, str(exc))


class Chunky(io.RawIOBase):
    """A seekable stream that hands out at most ``size`` bytes per read."""

    def __init__(self, data: bytes, size: int, readinto: bool = True) -> None:
        self.inner = io.BytesIO(data)
        self.size = size
        if not readinto:
            self.readinto = None  # type: ignore[assignment]

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = 0) -> int:
        return self.inner.seek(pos, whence)

    def tell(self) -> int:
        return self.inner.tell()

    def readinto(self, b) -> int:  # type: ignore[override]
        chunk = self.inner.read(min(len(b), self.size))
        b[:len(chunk)] = chunk
        return len(chunk)

    def read(self, n: int = -1) -> bytes:
        return self.inner.read(min(n, self.size) if n >= 0 else self.size)


def agree(data: bytes, ports=PORTS, reader=io.BytesIO, full: bool = False) -> bool:
    """Assert C == Python on ``data``; False when the scanner refused (fell back)."""
    try:
        an, stats, err = _scan_native(native, reader(data), ports)
    except NativeFallback:
        got = None
    else:
        c_res = _outcome(lambda: dnsstats._analyse_native(native, reader(data), "x", ports))
        py = py_state(data, ports)
        c_res_state = state(an, stats, err)
        an.result("x", stats, ports, err)  # result sweeps: both states after it
        py[0].result("x", *py[1:2], ports, py[2])
        assert state(an, stats, err) == state(*py), "analyser state differs"
        assert c_res_state["stats"] == state(*py)["stats"]
        got = c_res
    if got is not None:  # one feed over exactly the file's bytes: an over-read at its end
        sc = native.Scanner(dnsstats._port_bits(ports), not ports, os.urandom(16))  # hits
        assert sc.feed(data, len(data), True) == -1  # ASan's redzone in sanitizer runs
        assert _outcome(lambda: dnsstats._traffic_of(sc, "x", ports)) == got
    want = python_traffic(data, ports)
    wired = _outcome(lambda: analyse_capture(reader(data), "x", ports))
    assert wired == want  # the product path, fallback or not
    if got is not None:
        assert got == want
    if full:
        assert want == python_traffic(data, ports, fast=False)
    return got is not None


# -- capture builders -----------------------------------------------------------------------
MAGICS = {"le": (b"\xd4\xc3\xb2\xa1", "<", 1_000_000), "be": (b"\xa1\xb2\xc3\xd4", ">", 1_000_000),
          "le-ns": (b"\x4d\x3c\xb2\xa1", "<", 10**9), "be-ns": (b"\xa1\xb2\x3c\x4d", ">", 10**9)}


def write_pcap(frames, linktype=1, magic="le", t0=1_767_225_600, step=None) -> bytes:
    """frames: bytes or (seconds, fraction, bytes)."""
    m, e, per = MAGICS[magic]
    out = bytearray(m + struct.pack(e + "HHiIII", 2, 4, 0, 0, 65535, linktype))
    for i, f in enumerate(frames):
        if isinstance(f, tuple):
            sec, frac, f = f
        else:
            sec, frac = t0 + i // 100, (i % 100) * (per // 100)
        out += struct.pack(e + "IIII", sec, frac, len(f), len(f)) + f
    return bytes(out)


def q(c, qid, name, sp=40000, qtype=1, res=RESOLVER):
    return eth(ip4(c, res, 17, udp(sp, 53, dns(qid, name, qtype=qtype))))


def a(c, qid, name, sp=40000, rcode=0, qtype=1, res=RESOLVER):
    return eth(ip4(res, c, 17, udp(53, sp, dns(qid, name, True, rcode, qtype))))


def s(c, sp, dst=SERVICE, dport=8000):
    return eth(ip4(c, dst, 6, tcp(sp, dport, 0x02)))


def timed(frames, dt=0.01, t0=1_767_225_600.0):
    out = []
    for i, f in enumerate(frames):
        t = t0 + i * dt
        out.append((int(t), int(round((t - int(t)) * 1e6)) % 1_000_000, f))
    return out


# -- tests ---------------------------------------------------------------------------------------
def test_limits_are_the_python_ones():
    assert native.LIMITS == (pcapread.MAX_CAPLEN, dnswire.MAX_ANSWERS, dnsstats.MAX_NAMES,
                             dnsstats.MAX_CLIENTS, dnsstats.MAX_PENDING, dnsstats.MAX_SAMPLES,
                             dnsstats.MAX_ADDR_NAMES, 16, 64, dnsstats.WINDOW_S,
                             dnsstats.TIMEOUT_S, dnsstats.PAIR_S)


def test_bench_capture(tmp_path):
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    import bench_dns

    path = tmp_path / "b.pcap"
    bench_dns.write_capture(str(path), 10_000)
    data = path.read_bytes()
    assert agree(data, full=True)
    with open(path, "rb") as fh:  # a real file, as the bench reads it
        assert traffic_repr(analyse_capture(fh, "x", (8000,))) == python_traffic(data)
    t = analyse_capture(io.BytesIO(data), "x", (8000,))
    assert t.records == 10_000 and t.clients[0].per_request_fraction == 1.0


def test_scapy_captures(tmp_path):
    from .capgen import cached, ndots_expansion, nxdomain_storm, per_request, write
    from scapy.layers.l2 import CookedLinux

    for i, pk in enumerate((per_request(60), per_request(40, aaaa=True), cached(50),
                            nxdomain_storm(80), ndots_expansion(20),
                            per_request(30, frame=CookedLinux))):
        data = write(tmp_path / f"{i}.pcap", pk).read_bytes()
        assert agree(data, full=True)
        ng = write(tmp_path / f"{i}.pcapng", pk, ng=True).read_bytes()
        assert agree(ng, full=True)  # pcapng: the scanner too, the same result
    t = analyse_capture(io.BytesIO(write(tmp_path / "e.pcap", ndots_expansion(20)).read_bytes()),
                        "x", (8000,))
    assert t.clients[0].expansions and t.clients[0].nxdomain


def test_mixed_odd_and_broken_traffic():
    for seed, ports in ((5, PORTS), (6, frozenset()), (7, frozenset({443})),
                        (8, frozenset({8000.0, 1 << 20}))):
        data = pcap(mixed_frames(random.Random(seed), 1500))
        assert agree(data, ports, full=seed == 5)


def _link(frames, linktype):
    frames = [f for f in frames if len(f) >= 14 and f[12:14] in (b"\x08\x00", b"\x86\xdd",
                                                                  b"\x08\x06")]
    if linktype == 113:
        return [b"\0\0\0\x01\0\x06" + f[6:12] + b"\0\0" + f[12:14] + f[14:] for f in frames]
    if linktype == 276:
        return [f[12:14] + b"\0\0" + struct.pack(">IHBB8s", 1, 1, 4, 6, b"\0" * 8) + f[14:]
                for f in frames]
    if linktype in (0, 108):
        out = []
        for i, f in enumerate(frames):
            af = 2 if f[12:14] == b"\x08\x00" else (10, 24, 28, 30)[i % 4] if f[12:14] == \
                b"\x86\xdd" else 7
            head = struct.pack(">I" if linktype == 108 or i % 3 == 0 else "<I", af)
            out.append(head + f[14:])
        return out
    return [f[14:] for f in frames]  # raw IP


@pytest.mark.parametrize("linktype", [1, 113, 276, 0, 108, 101, 228, 229, 12, 14])
def test_every_link_type(linktype):
    frames = mixed_frames(random.Random(linktype), 600)
    if linktype != 1:
        frames = _link(frames, linktype)
    assert agree(write_pcap(frames, linktype), full=True)


def test_unsupported_link_type_and_bad_headers_fall_back():
    frames = mixed_frames(random.Random(3), 50)
    for data in (write_pcap(frames, 147), b"", b"\xd4\xc3", b"\xd4\xc3\xb2\xa1" + bytes(10),
                 b"GET / HTTP/1.1\r\n" * 3, pcap(frames)[:24]):
        assert not agree(data) or data == pcap(frames)[:24]


@pytest.mark.parametrize("magic", list(MAGICS))
def test_byte_orders_and_nanoseconds(magic):
    frames = mixed_frames(random.Random(11), 800)
    assert agree(write_pcap(frames, 1, magic), full=True)
    _, _, per = MAGICS[magic]
    odd = [(1_767_225_600 + i, (i * 7919) % per, f) for i, f in enumerate(frames[:300])]
    odd += [(0xFFFFFFFF, per - 1, q(CLIENTS[0], 1, NAMES[0])),
            (0xFFFFFFFF, 0xFFFFFFFF, a(CLIENTS[0], 1, NAMES[0])), (0, 0, q(CLIENTS[1], 2, b"x"))]
    assert agree(write_pcap(odd, 1, magic))


def test_rcodes_unanswered_pairs_and_expansions():
    c = CLIENTS[0]
    fr = []
    for i in range(300):
        name = NAMES[i % 3]
        fr.append(q(c, i, name, 30000 + i))
        if i % 7:
            fr.append(a(c, i, name, 30000 + i, rcode=(0, 3, 2, 5, 1)[i % 5]))
        fr.append(q(c, 5000 + i, name, 30000 + i, qtype=28))  # A + AAAA pairs
        fr.append(a(c, 5000 + i, name, 30000 + i, qtype=28))
        fr.append(s(c, 50000 + i))
    for base in (b"api.example.com", b"db"):  # search-list expansions
        for i, sfx in enumerate((b".default.svc.cluster.local", b".svc.cluster.local", b"")):
            fr.append(q(CLIENTS[1], 9000 + i, base + sfx, 33000 + i))
            fr.append(a(CLIENTS[1], 9000 + i, base + sfx, 33000 + i, rcode=3 if sfx else 0))
    data = write_pcap(timed(fr, 0.01))
    assert agree(data, full=True)
    t = analyse_capture(io.BytesIO(data), "x", (8000,))
    by = {cl.address: cl for cl in t.clients}
    c0 = by["10.0.1.1"]
    assert c0.nxdomain and c0.servfail and c0.other_errors and c0.unanswered and c0.aaaa_pairs
    assert by["10.0.1.2"].expansions
    # slow answers and the 5 s timeout around the sweeps
    fr = [(1000 + i // 3, (i * 300_001) % 1_000_000, q(c, i, NAMES[0], 20000 + i % 5))
          for i in range(200)]
    fr += [(1004 + i // 5, 0, a(c, i, NAMES[0], 20000 + i % 5)) for i in range(0, 200, 3)]
    assert agree(write_pcap(fr))


def test_more_clients_than_max_clients():
    fr = []
    for i in range(dnsstats.MAX_CLIENTS + 60):
        cl = struct.pack(">I", 0x0A000000 + i)
        fr += [q(cl, i, NAMES[i % 3], 40000), a(cl, i, NAMES[i % 3], 40000), s(cl, 50000)]
    assert agree(write_pcap(fr))


def test_more_names_than_max_names_and_addresses():
    c = CLIENTS[0]
    fr = []
    for i in range(dnsstats.MAX_NAMES + 200):
        name = b"n%d.example.com" % (i % (dnsstats.MAX_NAMES + 150))
        fr.append(q(c, i & 0xFFFF, name, 20000 + i, qtype=(1, 28)[i % 2]))
        fr.append(a(c, i & 0xFFFF, name, 20000 + i))
        fr.append(s(c, 40000 + i, dst=struct.pack(">I", 0xC0A80000 + i % 70), dport=8000))
    # over-full addr_names entries: 20 names answered with the same address
    for i in range(20):
        fr.append(q(CLIENTS[2], i, b"x%d.example" % i, 1000 + i))
        fr.append(a(CLIENTS[2], i, b"x%d.example" % i, 1000 + i))
    assert agree(write_pcap(timed(fr, 0.0004)))


def _answer_to(c, qid, name, sp, addrs):
    """A response with several A answers (raw message, not dns())."""
    msg = struct.pack(">HHHHHH", qid, 0x8180, 1, len(addrs), 0, 0) + _name(name) + b"\0\x01\0\x01"
    for ad in addrs:
        msg += b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + ad
    return eth(ip4(RESOLVER, c, 17, udp(53, sp, msg)))


def _name(n: bytes) -> bytes:
    return b"".join(bytes([len(p)]) + p for p in n.split(b".")) + b"\0"


def test_more_addresses_than_max_addr_names():
    c = CLIENTS[0]
    fr = []
    k = 0
    for i in range(dnsstats.MAX_ADDR_NAMES // 30 + 20):
        addrs = [struct.pack(">I", 0x0B000000 + k + j) for j in range(30)]
        k += 30
        fr += [q(c, i, NAMES[i % 3], 2000 + i), _answer_to(c, i, NAMES[i % 3], 2000 + i, addrs)]
        fr.append(s(c, 3000 + i, dst=addrs[0]))
    assert agree(write_pcap(timed(fr, 0.001)))


def test_more_samples_than_max_samples_reservoir():
    fr = []
    n = 2 * dnsstats.MAX_SAMPLES + 6000
    for i in range(n):
        cl = CLIENTS[i % 2]  # two clients: the LCG is shared in event order
        fr.append((1000 + i // 1000, (i % 1000) * 1000, q(cl, i & 0xFFFF, NAMES[0], 10000 + i % 50000)))
        fr.append((1000 + i // 1000, (i % 1000) * 1000 + (i * 37) % 900,
                   a(cl, i & 0xFFFF, NAMES[0], 10000 + i % 50000)))
    an, stats, err = _scan_native(native, io.BytesIO(write_pcap(fr)), PORTS)
    assert any(c.seen_lat > dnsstats.MAX_SAMPLES for c in an.clients.values())
    assert agree(write_pcap(fr))


def test_more_pending_than_max_pending():
    c = CLIENTS[0]
    n = dnsstats.MAX_PENDING + 500
    fr = [(1000, i, q(c, i & 0xFFFF, NAMES[0], 1024 + i // 65536)) for i in range(n)]
    answered = [*range(0, n, 997), *range(dnsstats.MAX_PENDING - 2, dnsstats.MAX_PENDING + 3)]
    fr += [(1001, i, a(c, i & 0xFFFF, NAMES[0], 1024 + i // 65536)) for i in answered]
    fr += [(1010, 0, q(c, 1, NAMES[1], 9))]  # the sweep
    assert agree(write_pcap(fr))


def test_dns_corner_cases():
    c = CLIENTS[0]

    def msg(body_after_header: bytes, flags=0x0100, qd=1, an=0, qid=7) -> bytes:
        return struct.pack(">HHHHHH", qid, flags, qd, an, 0, 0) + body_after_header

    q1 = _name(b"api.example.com") + b"\0\x01\0\x01"
    weird = [
        msg(_name(b"API.Example.COM") + b"\0\x01\0\x01"),  # lowered: the same name
        msg(b"\x03a\x80b\x03com\0\0\x01\0\x01"), msg(b"\x03a\xffb\x03com\0\0\x01\0\x01"),
        msg(b"\x03a.b\x03com\0\0\x01\0\x01"), msg(b"\x01a\x01b\x03com\0\0\x01\0\x01"),
        msg(b"\x03a\0b\0\0\x01\0\x01"), msg(b"\x03\xc3\xa9x\0\0\x01\0\x01"),
        msg(b"\xc0\x0c\0\x01\0\x01"),  # pointer loop
        msg(b"\xc0\x0e\x01a\xc0\x0c\0\x01\0\x01"),
        msg(b"\x3f" + b"a" * 63 + b"\x3f" + b"b" * 63 + b"\x3f" + b"c" * 63 + b"\x3e" + b"d" * 62
            + b"\0\0\x01\0\x01"),  # 255 bytes
        msg(b"\x3f" + b"a" * 63 + b"\x3f" + b"b" * 63 + b"\x3f" + b"c" * 63 + b"\x3f" + b"d" * 63
            + b"\0\0\x01\0\x01"),  # 256: too long
        msg(b"\x41a\0\0\x01\0\x01"), msg(b"\x81a\0\0\x01\0\x01"), msg(q1[:-2]),
        msg(q1, qd=0), msg(b"", qd=0), msg(q1 * 5, qd=5), msg(q1 * 4, qd=4), msg(q1 + b"\x01", qd=2),
        msg(q1, flags=0x0900), msg(q1, flags=0x2100), msg(b"\0\0\x01\0\x01"),
        msg(b"\0" * 3),
    ]
    fr = []
    for i, m in enumerate(weird):
        fr.append(eth(ip4(c, RESOLVER, 17, udp(1000 + i, 53, m))))
        body = q1 + b"\xc0\x0c\0\x01\0\x01\0\0\0\x3c\0\x04" + SERVICE
        body6 = b"\xc0\x0c\0\x1c\0\x01\0\0\0\x3c\0\x10" + bytes(range(16))
        for resp in (msg(m[12:] + b"\xc0\x0c\0\x01\0\x01\0\0\0\x3c\0\x04" + SERVICE + body6,
                         0x8180 | (i % 4), an=2),
                     msg(m[12:], 0x8183, an=40), msg(body, 0x8180, an=1)[:-2]):
            fr.append(eth(ip4(RESOLVER, c, 17, udp(53, 1000 + i, resp))))
        fr.append(s(c, 2000 + i))
    many = msg(q1 + (b"\xc0\x0c\0\x01\0\x01\0\0\0\x3c\0\x04" + bytes([1, 2, 3, 4])) * 40,
               0x8180, an=40)
    fr += [eth(ip4(c, RESOLVER, 17, udp(999, 53, msg(q1)))),
           eth(ip4(RESOLVER, c, 17, udp(53, 999, many)))]
    for i, body in enumerate((msg(q1), msg(q1)[:-1])):  # TCP: whole, cut, length lies
        for ln in (len(body), len(body) + 1, 0, 3):
            fr.append(eth(ip4(c, RESOLVER, 6, tcp(3000 + i, 53, 0x18, struct.pack(">H", ln) + body))))
            fr.append(eth(ip4(RESOLVER, c, 6, tcp(53, 3000 + i, 0x18, struct.pack(">H", ln) + msg(
                q1 + b"\xc0\x0c\0\x01\0\x01\0\0\0\x3c\0\x04" + SERVICE, 0x8180, an=1)))))
    data = write_pcap(timed(fr, 0.0001))
    assert agree(data, full=True)
    t = analyse_capture(io.BytesIO(data), "x", (8000,))
    names = dict(t.clients[0].top_names)
    assert names["api.example.com"] > 1 and "a\ufffdb.com" in names


def test_every_truncation_of_a_small_capture():
    rng = random.Random(2)
    frames = mixed_frames(rng, 25)[:40]
    data = write_pcap(frames)
    refused = 0
    for cut in range(len(data) + 1):
        refused += not agree(data[:cut])
    assert refused == 24  # only cuts inside the global header go to Python


def test_corrupt_record_headers():
    frames = mixed_frames(random.Random(9), 300)
    data = write_pcap(frames)
    offs = [24]
    for f in frames[:-1]:
        offs.append(offs[-1] + 16 + len(f))
    for k in (0, 1, 150, len(frames) - 1):
        for caplen, orig in ((70000, 60000), (1 << 18, 1 << 18), ((1 << 18) + 1, 1 << 20),
                             (0xFFFFFFFF, 0xFFFFFFFF), (0, 0), (5, 4)):
            bad = bytearray(data)
            struct.pack_into("<II", bad, offs[k] + 8, caplen, orig)
            assert agree(bytes(bad))
    be = write_pcap(frames, magic="be")
    bad = bytearray(be)
    struct.pack_into(">I", bad, offs[3] + 8, 1 << 19)
    assert agree(bytes(bad))


@pytest.mark.parametrize("size", [1, 2, 3, 7, 15, 16, 17, 1000, 1 << 16])
def test_read_sizes(size):
    frames = mixed_frames(random.Random(size), 120 if size < 16 else 600)
    data = write_pcap(frames)
    # records of MAX_CAPLEN bytes (IP total length 0: the frame's end is the packet's)
    head = eth(struct.pack(">BBHHHBBH4s4s", 0x45, 0, 0, 0, 0, 64, 17, 0, CLIENTS[0], RESOLVER)
               + struct.pack(">HHHH", 1, 53, 0, 0) + dns(1, NAMES[0]))
    big = write_pcap([head + bytes(pcapread.MAX_CAPLEN - len(head))] * 5 + [head + bytes(9)])
    for d in (data, data[:-5]) + ((big, big[:-100]) if size >= 7 else (big[:3 * len(big) // 5],)):
        assert agree(d, reader=lambda b: Chunky(b, size))
        assert agree(d, reader=lambda b: Chunky(b, size, readinto=False))


def test_non_seekable_stream_uses_python(monkeypatch):
    class Pipe(io.RawIOBase):
        def __init__(self, data):
            self.inner = io.BytesIO(data)

        def readable(self):
            return True

        def readinto(self, b):
            chunk = self.inner.read(len(b))
            b[:len(chunk)] = chunk
            return len(chunk)

    data = pcap(mixed_frames(random.Random(4), 500))
    called = []
    monkeypatch.setattr(dnsstats, "_analyse_native", lambda *a: called.append(1))
    t = analyse_capture(io.BufferedReader(Pipe(data)), "x", (8000,))
    assert traffic_repr(t) == python_traffic(data) and not called


def test_stream_not_at_its_start():
    data = pcap(mixed_frames(random.Random(12), 300))
    for junk in (b"", b"JUNK" * 3):
        st = io.BytesIO(junk + data)
        st.seek(len(junk))
        assert traffic_repr(analyse_capture(st, "x", (8000,))) == python_traffic(data)
    st = io.BytesIO(b"JUNK" + b"\x0a\x0d\x0d\x0a" + bytes(40))  # refused: re-read from 4
    st.seek(4)
    assert _outcome(lambda: analyse_capture(st, "x", (8000,))) == \
        python_traffic(b"\x0a\x0d\x0d\x0a" + bytes(40))


def test_engine_switch(monkeypatch):
    monkeypatch.setenv("ASCEND_DOCTOR_PCAP_ENGINE", "python")
    assert dnsstats._native() is None
    monkeypatch.delenv("ASCEND_DOCTOR_PCAP_ENGINE")
    assert dnsstats._native() is native


def test_scanner_misuse_is_an_error_not_a_crash():
    sc = native.Scanner.__new__(native.Scanner)
    with pytest.raises(RuntimeError):
        sc.feed(b"", 0, True)
    with pytest.raises(RuntimeError):
        sc.result()
    sc = native.Scanner(bytes(8192), True, bytes(16))
    with pytest.raises(ValueError):
        sc.feed(b"abc", 4, False)
    with pytest.raises(ValueError):
        native.Scanner(b"", True, bytes(16))
    sc.feed(write_pcap([]), 24, True)
    assert sc.result()["records"] == 0
    with pytest.raises(RuntimeError):
        sc.feed(b"", 0, True)


# -- hypothesis mutations of real-looking captures -----------------------------------------
def _seeds() -> list[bytes]:
    rng = random.Random(77)
    c = CLIENTS[0]
    tx = []
    for i in range(12):
        tx += [q(c, i, NAMES[i % 3], 4000 + i, qtype=(1, 28)[i % 2]),
               a(c, i, NAMES[i % 3], 4000 + i, rcode=(0, 0, 3, 2)[i % 4]), s(c, 6000 + i)]
    tx.append(eth(ip6(bytes(15) + b"\5", bytes(15) + b"\x35", 17, udp(7, 53, dns(9, NAMES[1])),
                      True), 0x86DD))
    return [write_pcap(mixed_frames(rng, 30)), write_pcap(timed(tx, 0.2)),
            write_pcap(tx, magic="be-ns"), write_pcap(_link(mixed_frames(rng, 30), 113), 113)]


SEEDS = _seeds()
mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 1 << 16), st.integers(1, 255)),
    st.tuples(st.just("cut"), st.integers(0, 1 << 16), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 1 << 16), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("delete"), st.integers(0, 1 << 16), st.integers(1, 8)),
)


def mutate(data: bytes, muts) -> bytes:
    b = bytearray(data)
    for kind, pos, arg in muts:
        pos = pos % (len(b) + 1)
        if kind == "flip" and pos < len(b):
            b[pos] ^= arg
        elif kind == "cut":
            del b[max(pos, 24):]
        elif kind == "insert":
            b[pos:pos] = arg
        elif kind == "delete":
            del b[pos:pos + arg]
    return bytes(b)


@settings(max_examples=max(int(os.environ.get("DNSSCAN_EXAMPLES", "0")), 400,
                           settings.default.max_examples),
          deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(SEEDS))), st.lists(mutation, min_size=1, max_size=6),
       st.sampled_from([frozenset({8000}), frozenset()]))
def test_hypothesis_mutations(seed, muts, ports):
    agree(mutate(SEEDS[seed], muts), ports)


@settings(max_examples=max(int(os.environ.get("DNSSCAN_EXAMPLES", "0")), 300,
                           settings.default.max_examples),
          deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(min_size=0, max_size=90), min_size=1, max_size=12),
       st.lists(st.integers(0, 65535), max_size=4),
       st.sampled_from([1, 101, 113, 0]))
def test_hypothesis_dns_payloads(payloads, ids, linktype):
    """Arbitrary DNS payloads (and the answers that match them) on port 53."""
    c = CLIENTS[1]
    fr = []
    for i, p in enumerate(payloads):
        qid = struct.pack(">H", ids[i % len(ids)]) if ids else b""
        fr.append(eth(ip4(c, RESOLVER, 17, udp(5000 + i % 3, 53, qid + p[len(qid):]))))
        fr.append(eth(ip4(RESOLVER, c, 17, udp(53, 5000 + i % 3, qid + p[len(qid):]))))
        fr.append(eth(ip4(c, RESOLVER, 6, tcp(5000, 53, 0x18, struct.pack(">H", len(p)) + p))))
        fr.append(s(c, 100 + i, dst=p[-4:].rjust(4, b"\0")))
    if linktype != 1:
        fr = _link(fr, linktype)
    agree(write_pcap(timed(fr, 0.3), linktype))


def test_sweep_boundaries_and_retransmits():
    """Whole-second timestamps so that ``ts >= now - TIMEOUT_S`` meets equality, and a query
    sent again with the same key while pending: a dict update keeps its place, so the sweep
    stops at it (the entry behind it is not swept yet)."""
    c, c2 = CLIENTS[0], CLIENTS[1]
    fr = [(1000, 0, q(c, 1, NAMES[0], 111)),  # K
          (1001, 0, q(c, 2, NAMES[0], 222)),  # L
          (1003, 0, q(c, 1, NAMES[0], 111)),  # K again: stays first, ts 1003
          (1005, 0, q(c2, 9, NAMES[1], 9)),  # sweep at 1005: cutoff 1000.0
          (1005, 500_000, q(c, 20, NAMES[1], 333)),  # X
          (1006, 500_000, q(c2, 10, NAMES[1], 10)),  # sweep: cutoff 1001.5, K (1003) first
          (1007, 0, a(c, 2, NAMES[0], 222)),  # L still pending: answered
          (1008, 0, a(c, 1, NAMES[0], 111)),
          (1010, 0, q(c2, 11, NAMES[1], 11)),  # sweep: X stays; the next at 1011.0
          (1011, 0, a(c, 20, NAMES[1], 333)),  # ts == next_sweep: sweeps X before the match
          (1015, 0, q(c, 12, NAMES[2], 12)),
          (1020, 0, q(c, 13, NAMES[2], 13))]  # the final sweep: 1015 == 1020 - 5 stays
    data = write_pcap(fr)
    assert agree(data, full=True)
    t = analyse_capture(io.BytesIO(data), "x", (8000,))
    assert t.client("10.0.1.1").answered == 2 and t.client("10.0.1.1").unanswered == 1


def test_name_spelling_and_pointer_hops():
    """Upper case A-Z (Z too), bytes >= 0x80, and 15/16/17 compression hops."""
    c = CLIENTS[0]
    fr = []
    names = [b"AZ.Example.ORG", b"az.example.org", b"Zz.\x80\xff.Q", b"zz.\xc3\xa9.q", b"@[`{.x"]
    for i, n in enumerate(names):
        fr += [q(c, i, n, 100 + i), a(c, i, n, 100 + i)]
    for hops in (15, 16, 17):
        # the question's name is a pointer to the last of a chain of pointers after the
        # question, each to the one before, the first to "abc": 'hops' hops in all
        chain = b"\x03abc\0"
        ptrs = [18]
        for _ in range(hops - 1):
            ptrs.append(18 + len(chain))
            chain += struct.pack(">H", 0xC000 | ptrs[-2])
        for flags, an in ((0x0100, 0), (0x8180, 0)):
            msg = (struct.pack(">HHHHHH", 50 + hops, flags, 1, an, 0, 0)
                   + struct.pack(">H", 0xC000 | ptrs[-1]) + b"\0\x01\0\x01" + chain)
            fr.append(eth(ip4(*((c, RESOLVER) if flags == 0x0100 else (RESOLVER, c)), 17,
                              udp(*((300 + hops, 53) if flags == 0x0100 else (53, 300 + hops)),
                                  msg))))
    data = write_pcap(timed(fr, 0.01))
    assert agree(data, full=True)
    t = analyse_capture(io.BytesIO(data), "x", (8000,))
    top = dict(t.clients[0].top_names)
    assert top["az.example.org"] == 2 and top["zz.\ufffd\ufffd.q"] == 2 and "@[`{.x" in top
    assert 0 < t.malformed


def test_a_refused_file_is_read_no_further_than_python_reads_it(monkeypatch):
    """A recorded bundle keeps what a probe read: the scanner's look at a file it then
    refuses must not read past the Python path's first read."""
    class Counting(io.BytesIO):
        furthest = 0

        def readinto(self, b):  # type: ignore[override]
            n = super().readinto(b)
            Counting.furthest = max(Counting.furthest, self.tell())
            return n

        def read(self, n=-1):  # type: ignore[override]
            out = super().read(n)
            Counting.furthest = max(Counting.furthest, self.tell())
            return out

    junk = b"\x0a\x0d\x0d\x0a" + bytes(3 << 20)  # pcapng magic, then a corrupt block
    seen = {}
    for engine in ("python", "c"):
        if engine == "python":
            monkeypatch.setenv("ASCEND_DOCTOR_PCAP_ENGINE", "python")
        else:
            monkeypatch.delenv("ASCEND_DOCTOR_PCAP_ENGINE")
        Counting.furthest = 0
        seen[engine] = _outcome(lambda: analyse_capture(Counting(junk), "x", (8000,)))
        seen[engine + " read"] = Counting.furthest
    assert seen["python"] == seen["c"] and seen["python read"] == seen["c read"] < len(junk)


# -- pcapng (what Wireshark, tshark and dumpcap save) ----------------------------------------
def _block(btype: int, body: bytes, e: str = "<") -> bytes:
    body += b"\0" * (-len(body) % 4)
    n = len(body) + 12
    return struct.pack(e + "II", btype, n) + body + struct.pack(e + "I", n)


def _shb(e: str = "<") -> bytes:
    return _block(0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1), e)


def _idb(linktype: int, tsresol: int | None = None, snap: int = 0, e: str = "<") -> bytes:
    opts = b""
    if tsresol is not None:  # if_tsresol, then opt_endofopt
        opts = struct.pack(e + "HH", 9, 1) + bytes([tsresol]) + b"\0\0\0" + bytes(4)
    return _block(1, struct.pack(e + "HHI", linktype, 0, snap) + opts, e)


def _epb(ifid: int, ticks: int, frame: bytes, e: str = "<") -> bytes:
    return _block(6, struct.pack(e + "IIIII", ifid, ticks >> 32, ticks & 0xFFFFFFFF,
                                 len(frame), len(frame)) + frame, e)


def write_pcapng(frames, linktype=1, e="<", tsresol=None, t0=1_767_225_600) -> bytes:
    """One section, one interface, an enhanced packet block per frame (microsecond ticks
    unless ``tsresol``), with a name-resolution and a statistics block in between."""
    per = {None: 10**6, 9: 10**9, 3: 10**3, 0x80 | 20: 1 << 20}[tsresol]
    out = bytearray(_shb(e) + _idb(linktype, tsresol, e=e))
    for i, f in enumerate(frames):
        out += _epb(0, int((t0 + i * 0.0037) * per), f, e)
        if i == len(frames) // 2:
            out += _block(4, bytes(4), e) + _block(5, bytes(12), e)  # NRB, ISB: skipped
    return bytes(out)


@pytest.mark.parametrize("linktype", [1, 113, 276, 101])
@pytest.mark.parametrize("e", ["<", ">"], ids=["le", "be"])
def test_pcapng_every_byte_order_and_cooked_links(linktype, e):
    frames = mixed_frames(random.Random(linktype + ord(e)), 600)
    if linktype != 1:
        frames = _link(frames, linktype)
    assert agree(write_pcapng(frames, linktype, e), full=True)


@pytest.mark.parametrize("tsresol", [None, 9, 3, 0x80 | 20])
def test_pcapng_timestamp_resolutions(tsresol):
    frames = mixed_frames(random.Random(31), 300)
    assert agree(write_pcapng(frames, 1, tsresol=tsresol), full=True)


def test_pcapng_interfaces_sections_and_packet_block_kinds():
    """Two interfaces of different link types, a second section (interface numbers restart,
    other byte order), simple and obsolete packet blocks, a snap length that cuts."""
    rng = random.Random(12)
    eth, sll = mixed_frames(rng, 200), _link(mixed_frames(rng, 200), 113)
    out = bytearray(_shb() + _idb(1) + _idb(113, 9))
    for i, (a, b) in enumerate(zip(eth, sll)):
        out += _epb(0, 1_767_225_600_000_000 + i * 3100, a) + _epb(1, 1_767_225_600 * 10**9 + i, b)
    out += _shb(">") + _idb(276, snap=60, e=">")
    for f in _link(mixed_frames(rng, 100), 276):
        out += _block(3, struct.pack(">I", len(f)) + f, ">")  # simple packet block
    out += _block(2, struct.pack(">HHIIII", 0, 0, 1, 2, 4, 4) + b"\x86\xdd\0\0", ">")
    assert agree(bytes(out), full=True)


def test_pcapng_every_truncation_and_corrupt_blocks():
    frames = mixed_frames(random.Random(4), 25)[:12]
    data = write_pcapng(frames)
    ends, at = set(), 0
    while at < len(data):  # every block's end
        at += struct.unpack_from("<I", data, at + 4)[0]
        ends.add(at)
    taken = {cut for cut in range(len(data) + 1) if agree(data[:cut])}
    assert taken == ends  # a cut on a block boundary stays in C; any other goes to Python
    for at, val in ((4, b"\xff\xff\xff\x7f"), (4, b"\x0d\0\0\0"), (40, b"\x07\0\0\0"),
                    (len(data) - 4, b"\0\0\0\0")):  # lengths, an interface id, a trailer
        bad = bytearray(data)
        bad[at:at + 4] = val
        agree(bytes(bad))
    assert not agree(_shb() + _idb(147) + _epb(0, 1, frames[0]))  # unsupported: Python


@settings(max_examples=max(int(os.environ.get("DNSSCAN_EXAMPLES", "0")), 300,
                           settings.default.max_examples),
          deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutation, min_size=1, max_size=6), st.sampled_from(["<", ">"]))
def test_pcapng_hypothesis_mutations(muts, e):
    frames = mixed_frames(random.Random(7), 60)
    agree(mutate(write_pcapng(frames, 1, e), muts))
