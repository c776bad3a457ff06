"""The raw-record pre-filter and the parsed-message cache give the same results as the
full path (``fast=False``) on mixed, odd and broken captures (issue 16 goal 4)."""

from __future__ import annotations

import io
import random
import struct

import pytest

from ascend_doctor.probes import pcapread
from ascend_doctor.probes.dnsstats import analyse_capture
from ascend_doctor.probes.pcapread import CaptureError, CaptureStats, iter_packets

CLIENTS = [bytes([10, 0, 1, i]) for i in range(1, 9)]
RESOLVER, SERVICE = bytes([10, 0, 0, 53]), bytes([192, 168, 1, 100])
C6, R6 = bytes(15) + b"\x05", bytes(15) + b"\x35"
NAMES = [b"api.deepseek.example.com", b"api.deepseek.example.com.svc.cluster.local",
         b"metrics.example.org"]


def _name(n: bytes) -> bytes:
    return b"".join(bytes([len(p)]) + p for p in n.split(b".")) + b"\0"


def dns(qid: int, name: bytes, resp: bool = False, rcode: int = 0, qtype: int = 1) -> bytes:
    flags = (0x8180 | rcode) if resp else 0x0100
    an = 1 if resp and rcode == 0 else 0
    msg = struct.pack(">HHHHHH", qid, flags, 1, an, 0, 0) + _name(name) + struct.pack(">HH", qtype, 1)
    if an:
        msg += b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + SERVICE
    return msg


def udp(sp: int, dp: int, payload: bytes) -> bytes:
    return struct.pack(">HHHH", sp, dp, 8 + len(payload), 0) + payload


def tcp(sp: int, dp: int, flags: int, payload: bytes = b"") -> bytes:
    return struct.pack(">HHIIBBHHH", sp, dp, 1, 1, 0x50, flags, 65535, 0, 0) + payload


def ip4(src: bytes, dst: bytes, proto: int, l4: bytes, frag: int = 0x4000,
        options: bytes = b"") -> bytes:
    ihl = 5 + len(options) // 4
    return struct.pack(">BBHHHBBH4s4s", 0x40 | ihl, 0, ihl * 4 + len(l4), 7, frag, 64, proto, 0,
                       src, dst) + options + l4


def ip6(src: bytes, dst: bytes, nh: int, l4: bytes, ext: bool = False) -> bytes:
    if ext:  # a hop-by-hop header in front
        l4 = bytes([nh, 0]) + b"\x01\x04\0\0\0\0" + l4
        nh = 0
    return struct.pack(">IHBB16s16s", 0x60000000, len(l4), nh, 64, src, dst) + l4


def eth(l3: bytes, et: int = 0x0800, vlan: bool = False) -> bytes:
    head = b"\x02\0\0\0\0\x02\x02\0\0\0\0\x01"
    if vlan:
        head += struct.pack(">HH", 0x8100, 42)
    return head + struct.pack(">H", et) + l3


def mixed_frames(rng: random.Random, count: int) -> list[bytes]:
    """Load-client traffic with every odd case the filter must get right mixed in."""
    out: list[bytes] = []
    for i in range(count):
        c = rng.choice(CLIENTS)
        name = rng.choice(NAMES)
        sp, qid = 20000 + i % 30000, rng.randrange(65536)
        r = rng.random()
        rc = rng.choice((0, 0, 0, 3, 2))
        if r < 0.25:  # query + answer (same bytes but the id: the cache's case)
            out.append(eth(ip4(c, RESOLVER, 17, udp(sp, 53, dns(qid, name)))))
            if rng.random() < 0.9:
                out.append(eth(ip4(RESOLVER, c, 17, udp(53, sp, dns(qid, name, True, rc)))))
        elif r < 0.30:  # VLAN-tagged DNS
            out.append(eth(ip4(c, RESOLVER, 17, udp(sp, 53, dns(qid, name))), 0x8100, vlan=True))
            out.append(eth(ip4(RESOLVER, c, 17, udp(53, sp, dns(qid, name, True))), vlan=True))
        elif r < 0.35:  # IPv6 DNS, with and without an extension header
            ext = rng.random() < 0.5
            out.append(eth(ip6(C6, R6, 17, udp(sp, 53, dns(qid, name, qtype=28)), ext), 0x86DD))
            out.append(eth(ip6(R6, C6, 17, udp(53, sp, dns(qid, name, True, qtype=28)), ext),
                           0x86DD))
        elif r < 0.40:  # DNS over TCP and SYNs to the service, other ports, IPv6 SYNs
            msg = dns(qid, name)
            out.append(eth(ip4(c, RESOLVER, 6, tcp(sp, 53, 0x18, struct.pack(">H", len(msg)) + msg))))
            out.append(eth(ip4(c, SERVICE, 6, tcp(sp, rng.choice((8000, 8001, 443)), 0x02))))
            out.append(eth(ip6(C6, R6, 6, tcp(sp, 8000, 0x02)), 0x86DD))
            out.append(eth(ip4(SERVICE, c, 6, tcp(8000, sp, 0x12))))  # SYN-ACK: not kept
        elif r < 0.45:  # IPv4 options, fragments (first and later), non-53 DNS (mDNS)
            out.append(eth(ip4(c, RESOLVER, 17, udp(sp, 53, dns(qid, name)), options=b"\x01" * 4)))
            out.append(eth(ip4(c, RESOLVER, 17, udp(sp, 53, dns(qid, name)), frag=0x2000)))
            out.append(eth(ip4(c, RESOLVER, 17, udp(sp, 53, dns(qid, name)), frag=0x0010)))
            out.append(eth(ip4(c, RESOLVER, 17, udp(5353, 5353, dns(0, name)))))
        elif r < 0.50:  # not IP, not UDP/TCP, too short, garbage, malformed DNS on port 53
            out.append(eth(b"\0\x01\x08\x00\x06\x04" + bytes(22), 0x0806))  # ARP
            out.append(eth(ip4(c, RESOLVER, 1, b"\x08\0" + bytes(30))))  # ICMP
            out.append(eth(ip4(c, RESOLVER, 17, b"\0\x35")))  # UDP header cut
            out.append(bytes(rng.randrange(256) for _ in range(rng.randrange(0, 80))))
            out.append(eth(ip4(c, RESOLVER, 17, udp(sp, 53, bytes(rng.randrange(256)
                                                                  for _ in range(20))))))
            big = dns(qid, name) + bytes(600)  # over the cache's size limit
            out.append(eth(ip4(c, RESOLVER, 17, udp(sp, 53, big))))
        elif r < 0.55:  # Ethernet padding after a short IP packet; IP total lengths that lie
            f = eth(ip4(c, SERVICE, 6, tcp(sp, 8000, 0x02)))
            out.append(f + bytes(8))  # padded to 62 bytes: the padding is no TCP data
            q = ip4(c, RESOLVER, 17, udp(sp, 53, dns(qid, name)))
            out.append(eth(q) + b"\xee" * 10)  # padding must not reach the DNS payload
            for total in (0, 19, 20, 27, 28, 30, 39, 40, 2000):
                lie = bytearray(q if rng.random() < 0.5 else ip4(c, SERVICE, 6, tcp(sp, 8000, 2)))
                struct.pack_into(">H", lie, 2, total)
                out.append(eth(bytes(lie)))
        else:  # the bulk: a request on a kept-alive connection
            out.append(eth(ip4(c, SERVICE, 6, tcp(sp, 8000, 0x18, b"POST / HTTP/1.1\r\n" * 4))))
            out.append(eth(ip4(SERVICE, c, 6, tcp(8000, sp, 0x10))))
    return out


def pcap(frames: list[bytes], linktype: int = 1, strip: int = 0) -> bytes:
    """A classic pcap; ``strip`` bytes of each Ethernet frame are cut for other link types."""
    out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype))
    for i, f in enumerate(frames):
        f = f[strip:]
        out += struct.pack("<IIII", 1_767_225_600 + i // 100, (i % 100) * 10_000, len(f), len(f))
        out += f
    return bytes(out)


def both(data: bytes, ports=frozenset({8000})):
    """(packets, stats, error) of the fast and the full path over the same bytes."""
    res = []
    for fast in (True, False):
        st, pk, err = CaptureStats(), [], None
        try:
            for p in iter_packets(io.BytesIO(data), ports, st, fast=fast):
                pk.append(p)
        except CaptureError as exc:
            err = (exc.offset, exc.reason)
        res.append((pk, (st.records, st.kept, st.bytes, st.format), err))
    return res


def test_fast_path_yields_the_same_packets_on_mixed_traffic():
    frames = mixed_frames(random.Random(16), 3000)
    data = pcap(frames)
    fast, full = both(data)
    assert fast == full
    pk, (records, kept, nbytes, _), err = fast
    assert err is None and records == len(frames) and nbytes == len(data)
    kinds = {p.kind for p in pk}
    assert kinds == {0, 1, 2} and kept == len(pk) > 500
    assert any(len(p.src) == 16 for p in pk)  # IPv6 kept
    for ports in (frozenset(), frozenset({443})):
        assert both(data, ports)[0] == both(data, ports)[1]


@pytest.mark.parametrize("linktype,strip", [(113, 0), (276, 0), (101, 14), (228, 14)],
                         ids=["sll", "sll2", "raw", "ipv4"])
def test_other_link_types_agree(linktype, strip):
    rng = random.Random(linktype)
    frames = [f for f in mixed_frames(rng, 800) if len(f) >= 14 and f[12:14] in
              (b"\x08\x00", b"\x86\xdd", b"\x08\x06")]
    if linktype == 113:  # Linux cooked: 16-byte header, ethertype at 14
        frames = [b"\0\0\0\x01\0\x06" + f[6:12] + b"\0\0" + f[12:14] + f[14:] for f in frames]
    elif linktype == 276:  # SLL2: ethertype first, 20-byte header
        frames = [f[12:14] + b"\0\0" + struct.pack(">IHBB8s", 1, 1, 4, 6, b"\0" * 8) + f[14:]
                  for f in frames]
    elif linktype == 228:
        frames = [f for f in frames if f[12:14] == b"\x08\x00"]
    fast, full = both(pcap(frames, linktype, strip))
    assert fast == full and len(fast[0]) > 100


def test_truncated_and_corrupt_files_fail_the_same_way():
    frames = mixed_frames(random.Random(7), 400)
    data = pcap(frames)
    for cut in (len(data) - 5, len(data) - len(frames[-1]) - 9, len(data) // 2 + 3):
        fast, full = both(data[:cut])
        assert fast == full and fast[2] is not None and "truncated" in fast[2][1]
    # a record header announcing more than its original length, in the middle
    mid = bytearray(data)
    off = 24 + sum(16 + len(f) for f in frames[:200])
    struct.pack_into("<I", mid, off + 8, 70000)
    fast, full = both(bytes(mid))
    assert fast == full and "corrupt record header" in fast[2][1] and fast[1][0] == 200


def test_analysis_is_identical_with_and_without_the_fast_path():
    frames = mixed_frames(random.Random(5), 4000)
    data = pcap(frames)
    fast = analyse_capture(io.BytesIO(data), "x", (8000,), fast=True)
    full = analyse_capture(io.BytesIO(data), "x", (8000,), fast=False)
    assert fast == full
    assert fast.dns_messages > 1000 and fast.malformed > 50 and fast.syns > 50
    assert sum(c.nxdomain for c in fast.clients) > 10
    cut = analyse_capture(io.BytesIO(data[:-3]), "x", (8000,))
    assert cut == analyse_capture(io.BytesIO(data[:-3]), "x", (8000,), fast=False)
    assert cut.error and "truncated" in cut.error


def test_pre_filter_drops_non_dns_records_without_calling_the_filter(monkeypatch):
    """The point of the change: the per-packet function runs only on candidates."""
    calls = []
    real = pcapread.make_filter

    def counting(ports):
        keep = real(ports)

        def wrapped(*a):
            calls.append(1)
            return keep(*a)
        return wrapped

    monkeypatch.setattr(pcapread, "make_filter", counting)
    c = CLIENTS[0]
    msg = dns(1, NAMES[0])
    bulk = [eth(ip4(c, SERVICE, 6, tcp(40000, 8000, 0x18, b"x" * 100)))] * 1000
    bulk += [eth(ip4(c, RESOLVER, 17, udp(40000, 53, msg)))]  # built inline
    bulk += [eth(ip4(c, SERVICE, 6, tcp(40001, 8000, 0x02)))]  # built inline
    bulk += [eth(ip4(c, RESOLVER, 6, tcp(40002, 53, 0x18, struct.pack(">H", len(msg)) + msg)))]
    bulk += [eth(b"\0" * 28, 0x0806)] * 100
    pk = list(iter_packets(io.BytesIO(pcap(bulk)), frozenset({8000})))
    assert [p.kind for p in pk] == [0, 2, 1] and len(calls) == 1  # only DNS over TCP
    calls.clear()
    assert len(list(iter_packets(io.BytesIO(pcap(bulk)), frozenset({8000}), fast=False))) == 3
    assert len(calls) == len(bulk)
