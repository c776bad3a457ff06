"""DNS behaviour of load clients, computed in one pass over a capture.

Seed 000_93c34712512482cd.txt: jmeter resolved the service name before every request
(100 queries/s; resolver latency 1 → 200 ms). ``analyse`` turns the packets of
``pcapread.iter_packets`` into per-client numbers: queries per second, names, how many new
TCP connections followed a lookup of the name that resolves to their address, latency by
(5-tuple, id), NXDOMAIN/SERVFAIL/unanswered, A+AAAA pairs and search-list expansion. All
state is bounded (names, clients, pending queries, latency samples).

A pcap or pcapng on a seekable stream is read by the optional C scanner (doctor/_dnsscan.c)
when it was built: the same loop and state machine in one pass, its final tables rebuilt
into an Analyser here so that ``result`` is the one below (tests/unit/test_dnsscan.py).
"""

from __future__ import annotations

import ipaddress
import os
from typing import Any, BinaryIO, Iterable

from ..i18n import T
from ..native import NativeFallback, load, read_into
from dataclasses import dataclass, field
from .dnswire import QTYPES, DnsFormatError, DnsMessage, parse_dns, parse_dns_tcp
from .pcapread import (CHUNK, KIND_DNS_TCP, KIND_SYN, MAX_CAPLEN, CaptureError, CaptureStats,
                       Packet, iter_packets, record_error)

WINDOW_S = 1.0  # a SYN within this long after a lookup of its name counts as "resolved per request"
TIMEOUT_S = 5.0  # a query unanswered this long is "unanswered"
PAIR_S = 0.5  # A and AAAA of one name this close together are one lookup
MAX_NAMES = 1000  # per client
MAX_CLIENTS = 4096
MAX_PENDING = 200_000
MAX_SAMPLES = 20_000  # latency samples kept per client (reservoir)
MAX_ADDR_NAMES = 20_000
CACHE_ENTRIES = 4096  # parsed-message cache: at most 4096 x 512 bytes of keys
CACHE_MSG_BYTES = 512


def addr_text(raw: bytes) -> str:
    try:
        return str(ipaddress.ip_address(raw))
    except ValueError:
        return raw.hex()


@dataclass(frozen=True, eq=False)
class Expansion:
    """One name tried under several search suffixes (resolv.conf ndots/search)."""

    base: str  # the name that finally resolved (or the most asked one)
    variants: tuple[str, ...]  # the other names tried, NXDOMAIN
    queries: int  # all queries of the group
    factor: float  # queries of the group per query of the base name


@dataclass(frozen=True)
class ClientDns:
    """One client's DNS traffic in a capture: volume, names, answers, latency, connects."""

    address: str
    queries: int
    qps: float
    peak_qps: int
    distinct_names: int
    top_names: tuple[tuple[str, int], ...]
    qtypes: dict[str, int]
    answered: int
    nxdomain: int
    servfail: int
    other_errors: int
    unanswered: int
    latency_ms: dict[str, float]  # p50, p95, p99, max (answered queries only)
    aaaa_pairs: int  # lookups sent as an A + AAAA pair
    syns: int  # new TCP connections to the service
    syns_after_lookup: int  # ... that followed a lookup of their name within WINDOW_S
    targets: tuple[tuple[str, int, int], ...]  # (address, port, SYNs)
    target_names: tuple[tuple[str, int], ...]  # names that resolved to the targets, with query counts
    expansions: tuple[Expansion, ...] = ()

    @property
    def per_request_fraction(self) -> float | None:
        return self.syns_after_lookup / self.syns if self.syns else None


@dataclass(frozen=True)
class DnsTraffic:
    """The DNS picture of one capture (file or live)."""

    source: str
    format: str
    records: int  # packets read
    bytes_read: int
    dns_messages: int
    malformed: int
    syns: int
    duration_s: float
    service_ports: tuple[int, ...]
    clients: tuple[ClientDns, ...] = field(default_factory=tuple)
    resolved: dict[str, tuple[str, ...]] = field(default_factory=dict)  # name -> addresses seen
    error: str | None = None  # why reading stopped early (truncated/corrupt), with the offset
    error_offset: int | None = None

    def client(self, address: str) -> ClientDns | None:
        return next((c for c in self.clients if c.address == address), None)


class _Name:
    __slots__ = ("queries", "nx", "servfail", "answered", "last", "last_a", "last_aaaa")

    def __init__(self) -> None:
        self.queries = self.nx = self.servfail = self.answered = 0
        self.last = self.last_a = self.last_aaaa = -1e18


class _Client:
    __slots__ = ("queries", "names", "overflow", "qtypes", "answered", "nx", "servfail", "other",
                 "unanswered", "lat", "seen_lat", "pairs", "last_any", "syns", "syns_after",
                 "sec", "sec_count", "peak", "targets")

    def __init__(self) -> None:
        self.queries = self.overflow = self.answered = self.nx = self.servfail = 0
        self.other = self.unanswered = self.seen_lat = self.pairs = 0
        self.syns = self.syns_after = self.sec_count = self.peak = 0
        self.names: dict[str, _Name] = {}
        self.qtypes: dict[int, int] = {}
        self.lat: list[float] = []
        self.last_any = -1e18
        self.sec = -1
        self.targets: dict[tuple[bytes, int], int] = {}


class Analyser:
    """Feed packets in file order with ``add``; ``result`` builds the fact."""

    def __init__(self, cache: bool = True) -> None:
        # parsed UDP messages by their bytes after the id (None: parse every message)
        self.cache: dict[bytes, DnsMessage] | None = {} if cache else None
        self.clients: dict[bytes, _Client] = {}
        self.pending: dict[tuple, tuple[float, _Client, _Name]] = {}
        self.addr_names: dict[bytes, set[str]] = {}
        self.dns_messages = self.malformed = self.syns = self.dropped_clients = 0
        self.first = self.last = None
        self.next_sweep = -1e18
        self._rng = 12345

    def _client(self, addr: bytes) -> _Client | None:
        c = self.clients.get(addr)
        if c is None:
            if len(self.clients) >= MAX_CLIENTS:
                self.dropped_clients += 1
                return None
            c = self.clients[addr] = _Client()
        return c

    def add(self, p: Packet) -> None:
        ts = p.ts
        if self.first is None:
            self.first = ts
        self.last = ts
        if p.kind == KIND_SYN:
            self._syn(p)
            return
        payload = p.payload
        try:
            if p.kind == KIND_DNS_TCP or self.cache is None or len(payload) > CACHE_MSG_BYTES:
                m = parse_dns_tcp(payload) if p.kind == KIND_DNS_TCP else parse_dns(payload)
                mid = m.id
            else:
                # a load client sends the same query (and gets the same answer) but for
                # the id: parse each distinct message once, take the id from its bytes
                key = payload[2:]
                m = self.cache.get(key)
                if m is None:
                    m = parse_dns(payload)
                    if len(self.cache) >= CACHE_ENTRIES:
                        self.cache.clear()
                    self.cache[key] = m
                mid = (payload[0] << 8) | payload[1]
        except DnsFormatError:
            self.malformed += 1
            return
        self.dns_messages += 1
        if ts >= self.next_sweep:
            self._sweep(ts)
        if not m.is_response:
            if p.dport != 53:
                return
            c = self._client(p.src)
            if c is None:
                return
            self._query(c, p, m.qname, m.qtype, mid, ts)
        else:
            if p.sport != 53:
                return
            key = (p.dst, p.dport, p.src, p.kind, mid)
            hit = self.pending.pop(key, None)
            if hit is None:
                return  # the query came before the capture started
            qts, c, nm = hit
            self._response(c, nm, m.rcode, ts - qts)
            if m.answers and m.qname:
                for a in m.answers:
                    s = self.addr_names.get(a)
                    if s is None:
                        if len(self.addr_names) >= MAX_ADDR_NAMES:
                            continue
                        s = self.addr_names[a] = set()
                    if len(s) < 16:
                        s.add(m.qname)

    def _query(self, c: _Client, p: Packet, qname: str, qtype: int, mid: int, ts: float) -> None:
        c.queries += 1
        c.qtypes[qtype] = c.qtypes.get(qtype, 0) + 1
        sec = int(ts)
        if sec != c.sec:
            c.sec, c.sec_count = sec, 0
        c.sec_count += 1
        if c.sec_count > c.peak:
            c.peak = c.sec_count
        nm = c.names.get(qname)
        if nm is None:
            if len(c.names) >= MAX_NAMES:
                c.overflow += 1
                nm = _Name()  # counted, not kept
            else:
                nm = c.names[qname] = _Name()
        nm.queries += 1
        if qtype == 1:
            if ts - nm.last_aaaa <= PAIR_S:
                c.pairs += 1
                nm.last_aaaa = -1e18
            else:
                nm.last_a = ts
        elif qtype == 28:
            if ts - nm.last_a <= PAIR_S:
                c.pairs += 1
                nm.last_a = -1e18
            else:
                nm.last_aaaa = ts
        nm.last = ts
        c.last_any = ts
        if len(self.pending) < MAX_PENDING:
            self.pending[(p.src, p.sport, p.dst, p.kind, mid)] = (ts, c, nm)
        else:
            c.unanswered += 1

    def _response(self, c: _Client, nm: _Name, rcode: int, latency: float) -> None:
        if rcode == 0:
            c.answered += 1
            nm.answered += 1
        elif rcode == 3:
            c.nx += 1
            nm.nx += 1
        elif rcode == 2:
            c.servfail += 1
            nm.servfail += 1
        else:
            c.other += 1
        ms = max(latency, 0.0) * 1000.0
        c.seen_lat += 1
        if len(c.lat) < MAX_SAMPLES:
            c.lat.append(ms)
        else:  # reservoir sampling with a fixed LCG: deterministic results
            self._rng = (self._rng * 1103515245 + 12345) & 0x7FFFFFFF
            j = self._rng % c.seen_lat
            if j < MAX_SAMPLES:
                c.lat[j] = ms

    def _sweep(self, now: float) -> None:
        cutoff = now - TIMEOUT_S
        expired = []
        for k, v in self.pending.items():
            if v[0] >= cutoff:
                break
            expired.append(k)
        for k in expired:
            _, c, _ = self.pending.pop(k)
            c.unanswered += 1
        self.next_sweep = now + 1.0

    def _syn(self, p: Packet) -> None:
        c = self._client(p.src)
        if c is None:
            return
        self.syns += 1
        c.syns += 1
        tk = (p.dst, p.dport)
        if tk in c.targets or len(c.targets) < 64:
            c.targets[tk] = c.targets.get(tk, 0) + 1
        names = self.addr_names.get(p.dst)
        since = p.ts - WINDOW_S
        if names:
            hit = any((nm := c.names.get(n)) is not None and nm.last >= since for n in names)
        else:
            hit = c.last_any >= since
        if hit:
            c.syns_after += 1

    # -- the fact ---------------------------------------------------------------------
    def result(self, source: str, stats: CaptureStats, ports: Iterable[int],
               error: CaptureError | None = None) -> DnsTraffic:
        if self.last is not None:
            self._sweep(self.last)  # queries younger than TIMEOUT_S at the end are in flight
        span = (self.last - self.first) if self.first is not None else 0.0
        clients = []
        for addr, c in self.clients.items():
            clients.append(self._client_fact(addr, c, span))
        clients.sort(key=lambda x: (-x.queries, -x.syns, x.address))
        resolved = {}
        for a, names in self.addr_names.items():
            for n in names:
                resolved.setdefault(n, []).append(addr_text(a))
        return DnsTraffic(source, stats.format, stats.records, stats.bytes, self.dns_messages,
                          self.malformed, self.syns, round(span, 3), tuple(sorted(ports)),
                          tuple(clients), {k: tuple(sorted(v)[:8]) for k, v in sorted(resolved.items())[:200]},
                          T("{reason} (at byte {offset})", reason=error.reason, offset=error.offset)
                          if error else None,
                          error.offset if error else None)

    def _client_fact(self, addr: bytes, c: _Client, span: float) -> ClientDns:
        lat = sorted(c.lat)

        def pct(q: float) -> float:
            return round(lat[min(len(lat) - 1, int(q * len(lat)))], 3) if lat else 0.0

        latency = {"p50": pct(0.5), "p95": pct(0.95), "p99": pct(0.99),
                   "max": round(lat[-1], 3) if lat else 0.0, "samples": len(lat)}
        top = sorted(c.names.items(), key=lambda kv: (-kv[1].queries, kv[0]))
        targets = sorted(c.targets.items(), key=lambda kv: -kv[1])
        tnames: dict[str, int] = {}
        for (a, _port), _n in targets[:4]:
            for n in sorted(self.addr_names.get(a, ())):
                if n in c.names:
                    tnames[n] = c.names[n].queries
        return ClientDns(
            address=addr_text(addr), queries=c.queries,
            qps=round(c.queries / span, 2) if span > 0 else float(c.queries),
            peak_qps=c.peak, distinct_names=len(c.names) + (1 if c.overflow else 0),
            top_names=tuple((n, v.queries) for n, v in top[:10]),
            qtypes={QTYPES.get(k, str(k)): v for k, v in sorted(c.qtypes.items())},
            answered=c.answered, nxdomain=c.nx, servfail=c.servfail, other_errors=c.other,
            unanswered=c.unanswered, latency_ms=latency, aaaa_pairs=c.pairs, syns=c.syns,
            syns_after_lookup=c.syns_after,
            targets=tuple((addr_text(a), port, n) for (a, port), n in targets[:8]),
            target_names=tuple(sorted(tnames.items(), key=lambda kv: -kv[1])),
            expansions=find_expansions(c.names))


def find_expansions(names: dict[str, _Name]) -> tuple[Expansion, ...]:
    """Names sharing a first label, some NXDOMAIN: one lookup tried under search suffixes."""
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(n.split(".", 1)[0], []).append(n)
    out = []
    for members in groups.values():
        if len(members) < 2:
            continue
        failed = [n for n in members if names[n].nx and not names[n].answered]
        if not failed:
            continue
        ok = [n for n in members if names[n].answered]
        base = max(ok or members, key=lambda n: (names[n].queries, -len(n)))
        variants = tuple(sorted(n for n in members if n != base))
        total = sum(names[n].queries for n in members)
        factor = total / max(1, names[base].queries)
        if factor >= 1.5:
            out.append(Expansion(base, variants[:8], total, round(factor, 2)))
    out.sort(key=lambda e: -e.queries)
    return tuple(out[:10])


def analyse_capture(stream: BinaryIO, source: str, service_ports: Iterable[int] = (),
                    fast: bool = True) -> DnsTraffic:
    """Read a whole capture (pcap/pcapng) and analyse it; a cut-off file keeps what was read.

    Raises ``CaptureError`` only when nothing could be read (not a capture at all).
    ``fast=False`` turns off the raw-record pre-filter and the parsed-message cache (the
    reference path the tests compare against; the results are the same). With ``fast``,
    a pcap or pcapng on a seekable stream goes through the C scanner (doctor/_dnsscan.c)
    when it is built, with the same results; what it refuses is re-read from the start.
    """
    ports = frozenset(service_ports)
    mod = _native() if fast else None
    start = _start(stream) if mod is not None else None
    if start is not None:
        try:
            return _analyse_native(mod, stream, source, ports)
        except NativeFallback:
            stream.seek(start)
    stats = CaptureStats()
    an = Analyser(cache=fast)
    try:
        for p in iter_packets(stream, ports, stats, fast=fast):
            an.add(p)
    except CaptureError as exc:
        if not stats.format:
            raise  # not a capture at all
        return _result(an, stats, exc, source, ports)
    return _result(an, stats, None, source, ports)


# -- the optional C path (doctor/_dnsscan.c) --------------------------------------------------
def _native() -> Any:
    """The C scanner (doctor/_dnsscan.c) when it was built and not ruled out, else None."""
    return load("_dnsscan", "ASCEND_DOCTOR_PCAP_ENGINE")


def _start(stream: BinaryIO) -> int | None:
    """Where the stream is when it can be read again from there, else None: the C path
    re-reads from the start what it refuses, so pipes take the Python path."""
    try:
        return stream.tell() if stream.seekable() else None
    except (AttributeError, OSError, ValueError):
        return None


def _port_bits(ports: frozenset) -> bytes:
    """Bit p set when ``p in ports`` (as make_filter tests it: 8000.0 and True match too)."""
    bits = bytearray(8192)
    if all(type(p) is int for p in ports):
        candidates: Iterable[int] = (p for p in ports if 0 <= p < 65536)
    else:
        candidates = (p for p in range(65536) if p in ports)
    for p in candidates:
        bits[p >> 3] |= 1 << (p & 7)
    return bytes(bits)


def _analyse_native(mod: Any, stream: BinaryIO, source: str, ports: frozenset) -> DnsTraffic:
    """analyse_capture by the C scanner (raises NativeFallback for what it refuses)."""
    return _result(*_scan_native(mod, stream, ports), source, ports)


def _traffic_of(scan: Any, source: str, ports: frozenset) -> DnsTraffic:
    """The DnsTraffic of a finished scanner (tests feed one directly)."""
    return _result(*_state_of(scan), source, ports)


def _result(an: Analyser, stats: CaptureStats, error: CaptureError | None, source: str,
            ports: frozenset) -> DnsTraffic:
    """``result``, or the CaptureError when it stopped the capture before any record (a
    header that is all there is: nothing was read); both paths end here."""
    if error is not None and stats.records == 0 and error.offset <= 24:
        raise error
    return an.result(source, stats, ports, error)


def _scan_native(mod: Any, stream: BinaryIO,
                 ports: frozenset) -> tuple[Analyser, CaptureStats, CaptureError | None]:
    """The Analyser, stats and CaptureError the Python loop would leave, by the C scanner.

    Chunks are read into one reused buffer (a record is at most 16 + MAX_CAPLEN bytes, so
    the kept tail plus a CHUNK always fit) -- not mmap: as fast to within ~13 ms on 132 MiB,
    but a capture file truncated while mapped (tcpdump -C/-W rotation) would SIGBUS the
    process, and the mapping's pages would count in RSS. Raises NativeFallback, before any
    record is used, for input the scanner leaves to the Python path."""
    scan = mod.Scanner(_port_bits(ports), not ports, os.urandom(16))
    buf = bytearray(CHUNK + 16 + MAX_CAPLEN)
    have = 0
    try:
        while True:
            # CHUNK per read, as the Python path's first read: a refused file has had the
            # same bytes read (a recorded bundle holds no more of it)
            got = read_into(stream, buf, have, CHUNK)
            have += got
            used = scan.feed(buf, have, got == 0)
            if used < 0:
                break
            if used:
                buf[:have - used] = buf[used:have]  # the cut record, to the front
                have -= used
    except mod.Fallback:
        raise NativeFallback() from None
    return _state_of(scan)


def _state_of(scan: Any) -> tuple[Analyser, CaptureStats, CaptureError | None]:
    """The Analyser, stats and CaptureError of a finished scanner."""
    st = scan.result()
    stats = CaptureStats()
    stats.format = st["format"]
    stats.records, stats.kept, stats.bytes = st["records"], st["kept"], st["bytes"]
    stats.linktypes.update(st["linktypes"])
    error = None
    if st["error"] is not None:  # (kind, offset, caplen, limit or bytes present)
        kind, offset, caplen, other = st["error"]
        error = record_error(kind, offset, stats.records, caplen, other)
    return _analyser_from(st), stats, error


def _analyser_from(st: dict) -> Analyser:
    """An Analyser holding the scanner's final state, in the scanner's insertion orders.

    The scanner already ran the final sweep of ``result``, so ``pending`` is empty and the
    sweep ``result`` runs again changes nothing."""
    an = Analyser(cache=False)
    an.first, an.last = st["first"], st["last"]
    an.dns_messages, an.malformed, an.syns = st["dns_messages"], st["malformed"], st["syns"]
    an.dropped_clients, an._rng, an.next_sweep = st["dropped_clients"], st["rng"], st["next_sweep"]
    for addr, counters, qtypes, lat, targets, names in st["clients"]:
        c = _Client()
        for k, v in counters.items():
            setattr(c, k, v)
        c.qtypes = dict(qtypes)
        c.lat = lat
        c.targets = {(a, port): n for a, port, n in targets}
        for name, queries, nx, servfail, answered, last, last_a, last_aaaa in names:
            nm = c.names[name] = _Name()
            nm.queries, nm.nx, nm.servfail, nm.answered = queries, nx, servfail, answered
            nm.last, nm.last_a, nm.last_aaaa = last, last_a, last_aaaa
        an.clients[addr] = c
    an.addr_names = {a: set(names) for a, names in st["addr_names"]}
    return an
