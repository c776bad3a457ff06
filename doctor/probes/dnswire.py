"""A minimal DNS message parser: header, first question, A/AAAA answers.

Only what the load-client analysis needs, so it stays fast on a million packets. Names
follow compression pointers (bounded hops); a malformed message raises ``DnsFormatError``.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

_hdr = struct.Struct(">HHHHHH").unpack_from
_rr = struct.Struct(">HHIH").unpack_from
_u16 = struct.Struct(">H").unpack_from

RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}
QTYPES = {1: "A", 28: "AAAA", 5: "CNAME", 12: "PTR", 15: "MX", 16: "TXT", 33: "SRV", 65: "HTTPS",
          2: "NS", 6: "SOA", 255: "ANY"}
MAX_ANSWERS = 32


class DnsFormatError(ValueError):
    """The bytes are not a well-formed DNS message."""


class DnsMessage(NamedTuple):
    id: int
    is_response: bool
    rcode: int
    qname: str  # lower-case, no trailing dot; "" when the message has no question
    qtype: int
    answers: tuple[bytes, ...]  # raw A (4-byte) / AAAA (16-byte) rdata
    truncated: bool  # the TC bit


def read_name(msg: bytes, off: int) -> tuple[str, int]:
    """(name, offset after the name in the message) following compression pointers."""
    labels: list[str] = []
    end = -1
    hops = 0
    n = len(msg)
    total = 0
    while True:
        if off >= n:
            raise DnsFormatError("name runs past the end of the message")
        ln = msg[off]
        if ln == 0:
            off += 1
            break
        if ln & 0xC0 == 0xC0:
            if off + 1 >= n:
                raise DnsFormatError("truncated compression pointer")
            if end < 0:
                end = off + 2
            hops += 1
            if hops > 16:
                raise DnsFormatError("compression pointer loop")
            off = ((ln & 0x3F) << 8) | msg[off + 1]
            continue
        if ln & 0xC0:
            raise DnsFormatError(f"bad label type 0x{ln:02x}")
        if off + 1 + ln > n:
            raise DnsFormatError("label runs past the end of the message")
        labels.append(msg[off + 1:off + 1 + ln].decode("ascii", "replace").lower())
        total += ln + 1
        if total > 255:
            raise DnsFormatError("name longer than 255 bytes")
        off += 1 + ln
    return ".".join(labels), (end if end >= 0 else off)


def parse_dns(msg: bytes) -> DnsMessage:
    """Parse a DNS message (UDP payload, or a TCP one without its length prefix)."""
    if len(msg) < 12:
        raise DnsFormatError(f"message of {len(msg)} bytes is shorter than a DNS header")
    mid, flags, qd, an, _ns, _ar = _hdr(msg, 0)
    if flags & 0x7800:  # opcode other than QUERY: not a lookup
        raise DnsFormatError(f"opcode {(flags >> 11) & 15} is not a query")
    qname, qtype = "", 0
    off = 12
    if qd:
        if qd > 4:
            raise DnsFormatError(f"{qd} questions")
        qname, off = read_name(msg, off)
        if off + 4 > len(msg):
            raise DnsFormatError("truncated question")
        qtype = _u16(msg, off)[0]
        off += 4
        for _ in range(qd - 1):
            _, off = read_name(msg, off)
            off += 4
    answers: list[bytes] = []
    is_resp = bool(flags & 0x8000)
    if is_resp and an:
        for _ in range(min(an, MAX_ANSWERS)):
            _, off = read_name(msg, off)
            if off + 10 > len(msg):
                break  # answers cut by a snap length: keep what the header says
            rtype, _cls, _ttl, rdlen = _rr(msg, off)
            off += 10
            if off + rdlen > len(msg):
                break
            if (rtype == 1 and rdlen == 4) or (rtype == 28 and rdlen == 16):
                answers.append(msg[off:off + rdlen])
            off += rdlen
    return DnsMessage(mid, is_resp, flags & 0xF, qname, qtype, tuple(answers),
                      bool(flags & 0x0200))


def parse_dns_tcp(segment: bytes) -> DnsMessage:
    """The first DNS message of a TCP segment (2-byte length prefix)."""
    if len(segment) < 2:
        raise DnsFormatError("TCP segment shorter than its length prefix")
    ln = _u16(segment, 0)[0]
    body = segment[2:2 + ln]
    if len(body) < ln:
        raise DnsFormatError("DNS message continues in another TCP segment")
    return parse_dns(body)
