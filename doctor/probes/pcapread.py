"""A streaming pcap / pcapng reader that keeps only DNS and TCP SYN packets.

Why not scapy: dissecting a million packets with scapy takes minutes; this reader looks at
raw header bytes (link layer, IPv4/IPv6, UDP/TCP ports, TCP flags) and hands on only the
few packets the DNS analysis needs, in bounded memory (one read buffer, no packet list).

``iter_packets(stream)`` is a pure function over a binary stream: it yields ``Packet``
tuples and, on a truncated or corrupt file, raises ``CaptureError`` carrying the byte
offset where reading stopped (everything yielded before stays valid).
"""

from __future__ import annotations

import struct
from typing import BinaryIO, Callable, Iterator, NamedTuple

from ..i18n import T

CHUNK = 1 << 20
MAX_CAPLEN = 1 << 18  # 256 KiB: larger record lengths mean a corrupt file

# link types (https://www.tcpdump.org/linktypes.html)
LT_NULL, LT_ETHERNET, LT_RAW, LT_LOOP, LT_SLL, LT_IPV4, LT_IPV6, LT_SLL2 = 0, 1, 101, 108, 113, 228, 229, 276
LT_RAW_ALIASES = (12, 14)  # DLT_RAW on some BSDs
SUPPORTED_LINKTYPES = {LT_NULL, LT_ETHERNET, LT_RAW, LT_LOOP, LT_SLL, LT_IPV4, LT_IPV6, LT_SLL2,
                       *LT_RAW_ALIASES}

KIND_DNS_UDP, KIND_DNS_TCP, KIND_SYN = 0, 1, 2

_u16 = struct.Struct(">H").unpack_from
_u32be = struct.Struct(">I").unpack_from


class CaptureError(Exception):
    """The capture could not be read to its end: ``offset`` says where, ``reason`` why."""

    def __init__(self, offset: int, reason: str, packets: int = 0) -> None:
        super().__init__(f"at byte {offset}: {reason}")
        self.offset = offset
        self.reason = reason
        self.packets = packets


# The record-level errors of a classic pcap, by kind: the C scanner (doctor/_dnsscan.c)
# reports these kinds with the same numbers, and both become the same CaptureError here.
TRUNCATED_HEADER, CORRUPT_HEADER, TRUNCATED_RECORD = 1, 2, 3


def record_error(kind: int, offset: int, n: int, caplen: int = 0, other: int = 0) -> CaptureError:
    """The CaptureError of a bad record after ``n`` packets; ``other`` is the length limit
    (CORRUPT_HEADER) or the bytes present (TRUNCATED_RECORD)."""
    if kind == TRUNCATED_HEADER:
        return CaptureError(offset, T("truncated record header after {n} packets", n=n))
    if kind == CORRUPT_HEADER:
        return CaptureError(offset, T("corrupt record header (captured length {caplen} > "
                                      "{limit}) after {n} packets", caplen=caplen, limit=other,
                                      n=n))
    return CaptureError(offset, T("truncated packet record ({caplen} bytes announced, {left} "
                                  "present) after {n} packets", caplen=caplen, left=other, n=n))


class Packet(NamedTuple):
    ts: float
    kind: int  # KIND_DNS_UDP | KIND_DNS_TCP | KIND_SYN
    src: bytes  # raw 4- or 16-byte address
    dst: bytes
    sport: int
    dport: int
    payload: bytes  # the DNS message (UDP payload or TCP segment data); b"" for SYNs


class CaptureStats:
    """What the reader went through (for "read N packets, M bytes" in findings)."""

    __slots__ = ("records", "bytes", "kept", "format", "linktypes", "skipped_linktypes")

    def __init__(self) -> None:
        self.records = 0
        self.bytes = 0
        self.kept = 0
        self.format = ""
        self.linktypes: set[int] = set()
        self.skipped_linktypes: set[int] = set()


class _Buf:
    """A sliding read buffer over a stream, tracking the absolute offset."""

    __slots__ = ("stream", "data", "pos", "base", "eof")

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.data = b""
        self.pos = 0
        self.base = 0  # absolute offset of data[0]
        self.eof = False

    def need(self, n: int) -> bool:
        """Make n bytes available at pos; False at end of stream."""
        if len(self.data) - self.pos >= n:
            return True
        while not self.eof and len(self.data) - self.pos < n:
            chunk = self.stream.read(max(CHUNK, n))
            if not chunk:
                self.eof = True
                break
            self.base += self.pos
            self.data = self.data[self.pos:] + chunk
            self.pos = 0
        return len(self.data) - self.pos >= n

    @property
    def offset(self) -> int:
        return self.base + self.pos

    def left(self) -> int:
        return len(self.data) - self.pos


# -- the packet filter: raw header bytes only ------------------------------------------------
def make_filter(service_ports: frozenset[int]) -> Callable[[bytes, int, int, float], Packet | None]:
    """A function (frame, start offset, link type, ts) -> Packet for DNS and SYNs, else None.

    SYNs are kept when they go to one of ``service_ports`` (empty: any port), so the
    analysis can tell new connections from reused ones.
    """
    any_port = not service_ports

    def l3(frame: bytes, off: int, ethertype: int, ts: float) -> Packet | None:
        n = len(frame)
        if ethertype == 0x0800:
            if n < off + 20:
                return None
            vihl = frame[off]
            if vihl >> 4 != 4:
                return None
            ihl = (vihl & 15) * 4
            if ihl < 20 or frame[off + 6] & 0x1F or frame[off + 7]:  # a non-first fragment
                return None
            proto = frame[off + 9]
            src = frame[off + 12:off + 16]
            dst = frame[off + 16:off + 20]
            total = _u16(frame, off + 2)[0]
            end = min(n, off + total) if total >= ihl else n
            off += ihl
        elif ethertype == 0x86DD:
            if n < off + 40:
                return None
            proto = frame[off + 6]
            src = frame[off + 8:off + 24]
            dst = frame[off + 24:off + 40]
            end = min(n, off + 40 + _u16(frame, off + 4)[0])
            off += 40
            hops = 0
            while proto in (0, 43, 60) and hops < 4 and n >= off + 8:  # hop-by-hop, routing, dest opts
                proto, hlen = frame[off], (frame[off + 1] + 1) * 8
                off += hlen
                hops += 1
        else:
            return None
        if proto == 17:
            if end < off + 8:
                return None
            sport, dport = _u16(frame, off)[0], _u16(frame, off + 2)[0]
            if sport == 53 or dport == 53:
                return Packet(ts, KIND_DNS_UDP, src, dst, sport, dport, frame[off + 8:end])
            return None
        if proto == 6:
            if end < off + 20:
                return None
            sport, dport = _u16(frame, off)[0], _u16(frame, off + 2)[0]
            flags = frame[off + 13]
            if sport == 53 or dport == 53:
                doff = (frame[off + 12] >> 4) * 4
                data = frame[off + doff:end]
                if len(data) > 2:
                    return Packet(ts, KIND_DNS_TCP, src, dst, sport, dport, data)
                return None
            if flags & 0x12 == 0x02 and (any_port or dport in service_ports):
                return Packet(ts, KIND_SYN, src, dst, sport, dport, b"")
        return None

    def dispatch(frame: bytes, off: int, linktype: int, ts: float) -> Packet | None:
        n = len(frame)
        if linktype == LT_ETHERNET:
            if n < 14:
                return None
            et = _u16(frame, 12)[0]
            off = 14
            while et in (0x8100, 0x88A8) and n >= off + 4:  # VLAN tags
                et = _u16(frame, off + 2)[0]
                off += 4
            return l3(frame, off, et, ts)
        if linktype == LT_SLL:
            return l3(frame, 16, _u16(frame, 14)[0], ts) if n >= 16 else None
        if linktype == LT_SLL2:
            return l3(frame, 20, _u16(frame, 0)[0], ts) if n >= 20 else None
        if linktype in (LT_NULL, LT_LOOP):
            if n < 4:
                return None
            af = _u32be(frame, 0)[0] if linktype == LT_LOOP else int.from_bytes(frame[:4], "little")
            if af > 0xFFFF:  # written big-endian on a little-endian reader
                af = int.from_bytes(frame[:4], "big")
            if af == 2:
                return l3(frame, 4, 0x0800, ts)
            if af in (10, 24, 28, 30):
                return l3(frame, 4, 0x86DD, ts)
            return None
        if linktype in (LT_RAW, LT_IPV4, LT_IPV6, *LT_RAW_ALIASES):
            if n < 1:
                return None
            v = frame[0] >> 4
            return l3(frame, 0, 0x0800 if v == 4 else 0x86DD if v == 6 else 0, ts)
        return None

    return dispatch


# -- file formats ---------------------------------------------------------------------------
PCAP_MAGICS = {b"\xd4\xc3\xb2\xa1": ("<", 1e-6), b"\xa1\xb2\xc3\xd4": (">", 1e-6),
               b"\x4d\x3c\xb2\xa1": ("<", 1e-9), b"\xa1\xb2\x3c\x4d": (">", 1e-9)}
PCAPNG_SHB = b"\x0a\x0d\x0d\x0a"


def iter_packets(stream: BinaryIO, service_ports: frozenset[int] = frozenset(),
                 stats: CaptureStats | None = None, fast: bool = True) -> Iterator[Packet]:
    """Yield the DNS packets and SYNs of a pcap or pcapng stream, in file order.

    ``fast`` (the default) lets the pcap loop drop records that cannot be DNS or a kept
    SYN with a few byte compares on the read buffer; ``fast=False`` runs every record
    through the full filter (kept so tests can compare the two on the same input).
    """
    stats = stats if stats is not None else CaptureStats()
    buf = _Buf(stream)
    if not buf.need(4):
        raise CaptureError(0, T("empty file") if buf.left() == 0 else
                           T("shorter than a capture header"))
    magic = buf.data[buf.pos:buf.pos + 4]
    keep = make_filter(frozenset(service_ports))
    if magic in PCAP_MAGICS:
        stats.format = "pcap"
        yield from _pcap(buf, magic, keep, stats, frozenset(service_ports) if fast else None)
    elif magic == PCAPNG_SHB:
        stats.format = "pcapng"
        yield from _pcapng(buf, keep, stats)
    else:
        raise CaptureError(0, T("not a pcap or pcapng file (magic {magic})", magic=magic.hex()))


# Where the fast pre-filter finds the network header: link type -> (offset of the
# ethertype, offset of the IP header); ethertype offset -1 means "IP version nibble".
_FAST_L3 = {LT_ETHERNET: (12, 14), LT_SLL: (14, 16), LT_SLL2: (0, 20), LT_RAW: (-1, 0),
            LT_IPV4: (-1, 0), LT_IPV6: (-1, 0), **{lt: (-1, 0) for lt in LT_RAW_ALIASES}}


def _pcap(buf: _Buf, magic: bytes, keep, stats: CaptureStats,
          fast_ports: frozenset[int] | None = None) -> Iterator[Packet]:
    """The records of a classic pcap file.

    With ``fast_ports`` (the service ports; empty: any), a record is dropped on the raw
    buffer, before any slice or call, when its bytes prove ``keep`` would return None:
    a non-IP ethertype, an IP protocol other than UDP/TCP, UDP without port 53, or TCP
    without port 53 that is no SYN to a service port. Anything else (VLAN tags, IPv4
    options, fragments, IPv6 extension headers, short frames, port 53) goes through
    ``keep`` unchanged, so the packets yielded are the same as without the pre-filter.
    """
    endian, unit = PCAP_MAGICS[magic]
    if not buf.need(24):
        raise CaptureError(buf.offset, T("truncated global header"))
    _, vmaj, _, _, _, snaplen, network = struct.unpack_from(endian + "IHHiIII", buf.data, buf.pos)
    linktype = network & 0x0FFFFFFF
    stats.linktypes.add(linktype)
    if linktype not in SUPPORTED_LINKTYPES:
        raise CaptureError(20, T("unsupported link type {type}", type=linktype))
    buf.pos += 24
    limit = MAX_CAPLEN
    rec = struct.Struct(endian + "II").unpack_from  # seconds, fraction
    lens = struct.Struct(endian + "II").unpack_from  # captured, original length
    n = 0
    kept = 0
    fast = fast_ports is not None and linktype in _FAST_L3
    etpos, l3off = _FAST_L3.get(linktype, (0, 0))
    any_port = not fast_ports
    svc = fast_ports or frozenset()
    # ethertype, IPv4 version/IHL, total length, fragment field, protocol, ports, TCP flags
    hot = (struct.Struct(f">{etpos}xH{l3off - etpos - 2}xBxH2xHxB10xHH9xB").unpack_from
           if fast and etpos >= 0 else None)
    data, pos = buf.data, buf.pos  # pos stays local; buf.pos is synced around need()
    try:
        while True:
            if len(data) - pos < 16:
                buf.pos = pos
                ok = buf.need(16)
                data, pos = buf.data, buf.pos
                if not ok:
                    if buf.left():
                        raise record_error(TRUNCATED_HEADER, buf.offset, n)
                    return
            caplen, origlen = lens(data, pos + 8)
            if caplen > limit or caplen > origlen:
                buf.pos = pos
                raise record_error(CORRUPT_HEADER, buf.offset, n, caplen, min(limit, origlen))
            end = pos + 16 + caplen
            if end > len(data):
                buf.pos = pos
                ok = buf.need(16 + caplen)
                data, pos = buf.data, buf.pos
                if not ok:
                    raise record_error(TRUNCATED_RECORD, buf.offset, n, caplen, buf.left() - 16)
                end = pos + 16 + caplen
            if fast:
                o = pos + 16 + l3off
                if hot is not None and o + 34 <= end:
                    # the common case in one unpack: IPv4 without options, UDP/TCP ports
                    et, vihl, total, frag, proto, sp, dp, flags = hot(data, pos + 16)
                    if et == 0x0800 and vihl == 0x45 and not frag & 0x1FFF:
                        if proto != 17 and proto != 6 or (sp != 53 and dp != 53 and (
                                proto == 17 or flags & 0x12 != 0x02
                                or not (any_port or dp in svc))):
                            pos = end
                            n += 1
                            continue
                        # UDP DNS and SYNs built here as keep()'s l3 would build them
                        ipend = (end if end < o + total else o + total) if total >= 20 else end
                        if proto == 17:
                            sec, frac = rec(data, pos)
                            pos = end
                            n += 1
                            if ipend >= o + 28:
                                kept += 1
                                yield Packet(sec + frac * unit, KIND_DNS_UDP, data[o + 12:o + 16],
                                             data[o + 16:o + 20], sp, dp, data[o + 28:ipend])
                            continue
                        if sp != 53 and dp != 53:  # a SYN to a service port
                            sec, frac = rec(data, pos)
                            pos = end
                            n += 1
                            if ipend >= o + 40:
                                kept += 1
                                yield Packet(sec + frac * unit, KIND_SYN, data[o + 12:o + 16],
                                             data[o + 16:o + 20], sp, dp, b"")
                            continue
                        o = -1  # DNS over TCP: straight to the full path
                if 0 <= o and o + 20 <= end:  # shorter frames take the full path
                    if etpos < 0:
                        v = data[o] >> 4
                        et = 0x0800 if v == 4 else 0x86DD if v == 6 else 0
                    else:
                        et = (data[pos + 16 + etpos] << 8) | data[pos + 17 + etpos]
                    if et == 0x0800:
                        if data[o] == 0x45 and not (data[o + 6] & 0x1F or data[o + 7]):
                            proto, l4 = data[o + 9], o + 20
                        else:
                            proto = l4 = -1  # options or a fragment: full path
                    elif et == 0x86DD:
                        proto, l4 = data[o + 6], o + 40
                        if proto in (0, 43, 60):
                            proto = -1  # extension headers: full path
                    elif et in (0x8100, 0x88A8):
                        proto = -1  # VLAN: full path
                    else:
                        pos = end
                        n += 1
                        continue  # not IP: keep() returns None
                    if proto == 17:
                        if l4 + 4 <= end:
                            if (data[l4] != 0 or data[l4 + 1] != 53) and (
                                    data[l4 + 2] != 0 or data[l4 + 3] != 53):
                                pos = end
                                n += 1
                                continue
                    elif proto == 6:
                        if l4 + 14 <= end:
                            if ((data[l4] != 0 or data[l4 + 1] != 53)
                                    and (data[l4 + 2] != 0 or data[l4 + 3] != 53)
                                    and (data[l4 + 13] & 0x12 != 0x02 or not (
                                        any_port or ((data[l4 + 2] << 8) | data[l4 + 3]) in svc))):
                                pos = end
                                n += 1
                                continue
                    elif proto >= 0:
                        pos = end
                        n += 1
                        continue  # ICMP, SCTP, ...: keep() returns None
            frame = data[pos + 16:end]
            sec, frac = rec(data, pos)
            pos = end
            n += 1
            p = keep(frame, 0, linktype, sec + frac * unit)
            if p is not None:
                kept += 1
                yield p
    finally:
        buf.pos = pos
        stats.records += n
        stats.kept += kept
        stats.bytes = buf.offset


def _pcapng(buf: _Buf, keep, stats: CaptureStats) -> Iterator[Packet]:
    endian = "<"
    ifaces: list[tuple[int, float, int]] = []  # (linktype, ts unit, snaplen)
    n = kept = 0
    try:
        while True:
            if not buf.need(12):
                if buf.left():
                    raise CaptureError(buf.offset, T("truncated block header after {n} packets",
                                                         n=n))
                return
            data, pos = buf.data, buf.pos
            btype_raw = data[pos:pos + 4]
            if btype_raw == PCAPNG_SHB:
                bom = data[pos + 8:pos + 12]
                if bom == b"\x4d\x3c\x2b\x1a":
                    endian = "<"
                elif bom == b"\x1a\x2b\x3c\x4d":
                    endian = ">"
                else:
                    raise CaptureError(buf.offset + 8, T("bad pcapng byte-order magic"))
                ifaces = []  # a new section restarts interface numbering
            btype, blen = struct.unpack_from(endian + "II", data, pos)
            if blen < 12 or blen % 4 or blen > MAX_CAPLEN + 4096:
                raise CaptureError(buf.offset, T("corrupt block length {blen} after {n} packets",
                                                     blen=blen, n=n))
            if not buf.need(blen):
                raise CaptureError(buf.offset, T("truncated block ({blen} bytes announced, {left} "
                                                     "present) after {n} packets", blen=blen,
                                                     left=buf.left(), n=n))
            data, pos = buf.data, buf.pos
            body = data[pos + 8:pos + blen - 4]
            trailer = struct.unpack_from(endian + "I", data, pos + blen - 4)[0]
            if trailer != blen:
                raise CaptureError(buf.offset, T("block length mismatch ({blen} vs trailer {trailer}) "
                                                     "after {n} packets", blen=blen,
                                                     trailer=trailer, n=n))
            off = buf.offset
            buf.pos = pos + blen
            if btype == 6:  # enhanced packet block
                if len(body) < 20:
                    raise CaptureError(off, T("enhanced packet block too short"))
                ifid, tsh, tsl, caplen, _orig = struct.unpack_from(endian + "IIIII", body, 0)
                if caplen > len(body) - 20:
                    raise CaptureError(off, T("packet longer ({caplen}) than its block",
                                                          caplen=caplen))
                if ifid >= len(ifaces):
                    raise CaptureError(off, T("packet on undeclared interface {ifid}",
                                                          ifid=ifid))
                lt, unit, _ = ifaces[ifid]
                n += 1
                if lt in SUPPORTED_LINKTYPES:
                    p = keep(body[20:20 + caplen], 0, lt, ((tsh << 32) | tsl) * unit)
                    if p is not None:
                        kept += 1
                        yield p
                else:
                    stats.skipped_linktypes.add(lt)
            elif btype == 3:  # simple packet block: interface 0, no timestamp
                if not ifaces:
                    raise CaptureError(off, T("simple packet block before any interface"))
                lt, _, snap = ifaces[0]
                orig = struct.unpack_from(endian + "I", body, 0)[0]
                caplen = min(orig, snap or orig, len(body) - 4)
                n += 1
                if lt in SUPPORTED_LINKTYPES:
                    p = keep(body[4:4 + caplen], 0, lt, 0.0)
                    if p is not None:
                        kept += 1
                        yield p
            elif btype == 2:  # obsolete packet block
                if len(body) < 20:
                    raise CaptureError(off, T("packet block too short"))
                ifid, _drops, tsh, tsl, caplen, _orig = struct.unpack_from(endian + "HHIIII", body, 0)
                if ifid >= len(ifaces) or caplen > len(body) - 20:
                    raise CaptureError(off, T("corrupt packet block"))
                lt, unit, _ = ifaces[ifid]
                n += 1
                p = keep(body[20:20 + caplen], 0, lt, ((tsh << 32) | tsl) * unit)
                if p is not None:
                    kept += 1
                    yield p
            elif btype == 1:  # interface description block
                if len(body) < 8:
                    raise CaptureError(off, T("interface description block too short"))
                lt, _res, snap = struct.unpack_from(endian + "HHI", body, 0)
                ifaces.append((lt, _tsresol(body[8:], endian), snap))
                stats.linktypes.add(lt)
            # other blocks (name resolution, statistics, custom) are skipped
    finally:
        stats.records += n
        stats.kept += kept
        stats.bytes = buf.offset


def _tsresol(opts: bytes, endian: str) -> float:
    """The if_tsresol option (code 9) of an IDB: 10^-v, or 2^-v when the high bit is set."""
    i = 0
    while i + 4 <= len(opts):
        code, length = struct.unpack_from(endian + "HH", opts, i)
        if code == 0:
            break
        if code == 9 and length >= 1 and i + 5 <= len(opts):
            v = opts[i + 4]
            return 2.0 ** -(v & 0x7F) if v & 0x80 else 10.0 ** -v
        i += 4 + ((length + 3) & ~3)
    return 1e-6
