"""DNS facts: the capture analysis (``DnsTraffic``) and the resolver side of the host
(``ResolverConfig``: /etc/hosts, /etc/resolv.conf, local caches, load clients, TCP port
sysctls and TIME_WAIT sockets toward the service).

Seed 000_93c34712512482cd.txt: load clients resolved the service name on every request,
and TIME_WAIT piled up (port range and tcp_fin_timeout were tuned in the seed).
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
from urllib.parse import urlsplit

from ..errors import ParseError, SourceError, SourceMissing, describe
from ..i18n import T
from ..host import Host, ProcInfo
from ..inputs import input_error, user_files
from ..safeopen import Guard
from ..options import RunOptions
from dataclasses import dataclass, field
from ..registry import provider
from .dnsstats import DnsTraffic, analyse_capture
from .pcapread import CaptureError


def service_target(url: str) -> tuple[str, int]:
    """(host, port) of the service URL (port defaults per scheme)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = 443 if parts.scheme == "https" else 80 if parts.hostname else 8000
    return (parts.hostname or "127.0.0.1", port)


def is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def capture_filter(port: int) -> str:
    return f"port 53 or tcp port {port}"


@provider
def gather_dns_traffic(host: Host, options: RunOptions) -> DnsTraffic:
    """Analyse --pcap FILE, else a live capture of --sniff SECONDS on --iface."""
    _, port = service_target(options.service_url)
    if options.pcap:
        source = options.pcap
        try:
            # opened once, links not trusted, refused unless whoever can change its path
            # could read it (doctor/safeopen.py)
            stream = user_files(host).open_stream(options.pcap, guard=Guard())
        except (SourceMissing, SourceError) as exc:
            raise input_error("--pcap", options.pcap, exc) from None
    elif options.sniff_seconds:
        iface = options.iface or "any"
        source = T("live capture on {iface} for {s:g} s ({filter})", iface=iface,
                   s=float(options.sniff_seconds), filter=capture_filter(port))
        stream = host.capture(iface, capture_filter(port), float(options.sniff_seconds))
    else:
        raise SourceMissing("--pcap / --sniff", T("no capture given (pass --pcap FILE or "
                                                  "--sniff SECONDS)"))
    try:
        with stream:
            return analyse_capture(stream, source, (port,))
    except CaptureError as exc:
        raise ParseError(source, T("{reason} (at byte {offset})", reason=exc.reason,
                                   offset=exc.offset)) from None
    except OSError as exc:
        raise SourceError(source, T("read failed: {why}", why=exc.strerror or str(exc))) from None


# -- the resolver side -----------------------------------------------------------------------
LOCAL_CACHES = {"nscd": "nscd", "systemd-resolve": "systemd-resolved",
                "systemd-resolved": "systemd-resolved", "dnsmasq": "dnsmasq",
                "unbound": "unbound", "named": "bind"}
LOAD_TOOLS = ("jmeter", "locust", "k6", "wrk", "wrk2", "ab", "vegeta", "hey", "oha", "siege",
              "ghz")
PY_LOAD_HINTS = ("locust", "benchmark_serving", "bench", "loadtest", "load_test", "stress",
                 "evalscope", "llmperf")


@dataclass(frozen=True, eq=False)
class ResolvConf:
    """/etc/resolv.conf as the resolver reads it."""

    nameservers: tuple[str, ...] = ()
    search: tuple[str, ...] = ()
    ndots: int = 1
    timeout: int = 5
    attempts: int = 2
    options: tuple[str, ...] = ()


def parse_resolv_conf(text: str) -> ResolvConf:
    """resolv.conf(5): the last search/domain line wins; options accumulate."""
    ns: list[str] = []
    search: tuple[str, ...] = ()
    opts: list[str] = []
    ndots, timeout, attempts = 1, 5, 2
    for line in text.splitlines():
        line = line.split("#", 1)[0].split(";", 1)[0].strip()
        if not line:
            continue
        f = line.split()
        key, rest = f[0], f[1:]
        if key == "nameserver" and rest:
            ns.append(rest[0])
        elif key in ("search", "domain"):
            search = tuple(rest)
        elif key == "options":
            for o in rest:
                opts.append(o)
                name, _, val = o.partition(":")
                if val.isdigit():
                    if name == "ndots":
                        ndots = min(int(val), 15)
                    elif name == "timeout":
                        timeout = min(int(val), 30)
                    elif name == "attempts":
                        attempts = min(int(val), 5)
    return ResolvConf(tuple(ns), search, ndots, timeout, attempts, tuple(opts))


def parse_hosts(text: str) -> dict[str, str]:
    """/etc/hosts: name (lower-case) -> the first address that maps it."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        f = line.split("#", 1)[0].split()
        if len(f) < 2 or not is_address(f[0]):
            continue
        for name in f[1:]:
            out.setdefault(name.lower().rstrip("."), f[0])
    return out


def load_client_kind(p: ProcInfo) -> str | None:
    """The load tool a process is, from its name and command line (None: not one)."""
    argv = p.cmdline
    base = posixpath.basename(argv[0]) if argv else p.name
    if base in LOAD_TOOLS or p.name in LOAD_TOOLS:
        return base if base in LOAD_TOOLS else p.name
    joined = " ".join(argv)
    if ("java" in base and ("ApacheJMeter" in joined or "jmeter" in joined.lower())):
        return "jmeter"
    if base.startswith("python") or p.name.startswith("python"):
        low = joined.lower()
        if re.search(r"\bvllm\s+bench\b", low):
            return "vllm bench"
        for hint in PY_LOAD_HINTS:
            if hint in low:
                return f"python ({hint})"
    return None


@dataclass(frozen=True, eq=False)
class LoadClient:
    """A load generator process found on the host (its DNS lookups are the client side)."""

    pid: int
    kind: str
    cmdline: str


@dataclass(frozen=True, eq=False)
class ResolverConfig:
    """What decides how often and how slowly this host resolves the service name."""

    service_host: str
    service_port: int
    hosts: dict[str, str] = field(default_factory=dict)
    hosts_error: str | None = None
    resolv: ResolvConf | None = None
    resolv_error: str | None = None
    caches: tuple[str, ...] = ()  # local caching resolvers running
    load_clients: tuple[LoadClient, ...] = ()
    processes_error: str | None = None
    port_range: tuple[int, int] | None = None
    fin_timeout: int | None = None
    tw_reuse: int | None = None
    time_wait_to_service: int | None = None  # None: the socket table was unreadable
    time_wait_total: int | None = None
    connections_error: str | None = None

    @property
    def port_range_width(self) -> int | None:
        return self.port_range[1] - self.port_range[0] + 1 if self.port_range else None


def _read_int_file(host: Host, path: str) -> tuple[int, ...] | None:
    try:
        text = host.read_text(path, 4096)
    except (SourceMissing, SourceError):
        return None
    try:
        return tuple(int(x) for x in text.split())
    except ValueError:
        return None


@provider
def gather_resolver_config(host: Host, options: RunOptions) -> ResolverConfig:
    shost, sport = service_target(options.service_url)
    hosts, hosts_err = {}, None
    try:
        hosts = parse_hosts(host.read_text("/etc/hosts", 4 * 1024 * 1024))
    except SourceMissing:
        hosts_err = T("/etc/hosts does not exist")
    except SourceError as exc:
        hosts_err = describe(exc)
    resolv, resolv_err = None, None
    try:
        resolv = parse_resolv_conf(host.read_text("/etc/resolv.conf", 1024 * 1024))
    except (SourceMissing, SourceError) as exc:
        resolv_err = describe(exc)
    caches: set[str] = set()
    clients: list[LoadClient] = []
    perr = None
    try:
        for p in host.processes():
            names = {p.name, posixpath.basename(p.cmdline[0]) if p.cmdline else ""}
            for n in names:
                if n in LOCAL_CACHES:
                    caches.add(LOCAL_CACHES[n])
            kind = load_client_kind(p)
            if kind and len(clients) < 64:
                clients.append(LoadClient(p.pid, kind, " ".join(p.cmdline)[:200]))
    except (SourceMissing, SourceError) as exc:
        perr = describe(exc)
    pr = _read_int_file(host, "/proc/sys/net/ipv4/ip_local_port_range")
    fin = _read_int_file(host, "/proc/sys/net/ipv4/tcp_fin_timeout")
    reuse = _read_int_file(host, "/proc/sys/net/ipv4/tcp_tw_reuse")
    tw_service = tw_total = None
    cerr = None
    try:
        conns = host.connections()
        tw = [c for c in conns if c.type == "tcp" and c.status == "TIME_WAIT"]
        tw_total = len(tw)
        # client side only: a server's TIME_WAIT on its listening port holds no ephemeral port
        tw_service = sum(1 for c in tw if c.raddr and c.raddr[1] == sport)
    except (SourceMissing, SourceError) as exc:
        cerr = describe(exc)
    return ResolverConfig(
        shost, sport, hosts, hosts_err, resolv, resolv_err, tuple(sorted(caches)),
        tuple(clients), perr, (pr[0], pr[1]) if pr and len(pr) == 2 else None,
        fin[0] if fin else None, reuse[0] if reuse else None, tw_service, tw_total, cerr)
