"""DNS behaviour of load clients (from a capture) and the resolver side of the host.

Seed 000_93c34712512482cd.txt §5.2: jmeter resolved api.deepseek.example.com before every
request (100 queries/s), the resolver's latency went from 1 to 200 ms and QPS swung
76 → 42 → 68; pinning the name in /etc/hosts (or keep-alive) fixed it.
"""

from __future__ import annotations

from typing import Iterator

from ascend_doctor.model import Category, Finding
from ascend_doctor.options import RunOptions
from ascend_doctor.probes.dns import ResolverConfig, is_address
from ascend_doctor.probes.dnsstats import ClientDns, DnsTraffic
from ascend_doctor.registry import check

CAPTURE_TIMEOUT = 900.0  # the capture itself bounds these checks (--sniff SECONDS)
PER_REQUEST = 0.8  # fraction of new connections preceded by a lookup
MIN_SYNS = 10
LAT_WARN_MS, LAT_FAIL_MS = 50.0, 200.0
NX_STORM_FRACTION, NX_STORM_MIN = 0.3, 50


def _partial(t: DnsTraffic) -> str:
    return f" (from the first {t.bytes_read} bytes only: {t.error})" if t.error else ""


@check("dns.capture", title="The capture of the load clients' traffic is readable",
       category=Category.NETWORK, tags=("dns", "net", "capture"), timeout=CAPTURE_TIMEOUT)
def capture_read(t: DnsTraffic) -> Iterator[Finding]:
    ev = {"source": t.source, "format": t.format, "packets": t.records, "bytes": t.bytes_read,
          "dns_messages": t.dns_messages, "malformed_dns": t.malformed, "syns": t.syns,
          "duration_s": t.duration_s, "clients": len(t.clients)}
    if t.error:
        yield Finding.error(f"cannot parse {t.source}: {t.error}; the other DNS checks use the "
                            f"{t.records} packets ({t.bytes_read} bytes) read before it",
                            subject=t.source, evidence={**ev, "offset": t.error_offset})
        return
    if t.dns_messages == 0 and t.syns == 0:
        yield Finding.warn(f"{t.source}: {t.records} packets, none of them DNS (port 53) or a "
                           f"new connection to port {', '.join(map(str, t.service_ports))}: "
                           "capture on the load-client host, on the right interface",
                           subject=t.source, evidence=ev)
        return
    yield Finding.passed(f"{t.source}: {t.records} packets over {t.duration_s:g} s, "
                         f"{t.dns_messages} DNS messages from {len(t.clients)} clients, "
                         f"{t.syns} new connections to the service", subject=t.source,
                         evidence=ev)


def _service_name(c: ClientDns, t: DnsTraffic) -> str | None:
    if c.target_names:
        return c.target_names[0][0]
    return c.top_names[0][0] if c.top_names else None


def per_request_key(client: str) -> str:
    """Cause key "this load client resolves the service name before every connection"."""
    return f"dns.per-request:{client}"


@check("dns.per-request", title="Load clients do not resolve the service name per request",
       category=Category.NETWORK, tags=("dns", "net", "loadgen"), timeout=CAPTURE_TIMEOUT)
def per_request(t: DnsTraffic) -> Iterator[Finding]:
    bad = False
    for c in t.clients:
        frac = c.per_request_fraction
        if frac is None or c.syns < MIN_SYNS:
            continue
        name = _service_name(c, t)
        target = c.targets[0] if c.targets else None
        ev = {"client": c.address, "queries": c.queries, "qps": c.qps, "peak_qps": c.peak_qps,
              "new_connections": c.syns, "after_lookup": c.syns_after_lookup,
              "fraction": round(frac, 3), "names": dict(c.top_names[:5]),
              "a_aaaa_pairs": c.aaaa_pairs, "targets": [list(x) for x in c.targets[:4]],
              "window_s": 1.0}
        if frac >= PER_REQUEST:
            bad = True
            addr = target[0] if target else ""
            yield Finding.fail(
                f"client {c.address} resolved {name or 'the service name'} before "
                f"{c.syns_after_lookup} of {c.syns} new connections ({frac:.0%}) to "
                f"{addr}:{target[1] if target else '?'}: {c.qps:g} DNS queries/s "
                f"(peak {c.peak_qps}/s){_partial(t)}",
                subject=c.address, evidence=ev, kb="ASC-NET-001", fix="dns.hosts-pin",
                fix_params={"hostname": name or "", "address": addr},
                cause=per_request_key(c.address))
        else:
            yield Finding.passed(
                f"client {c.address}: {c.syns_after_lookup} of {c.syns} new connections "
                f"followed a lookup ({frac:.0%}); {c.qps:g} queries/s", subject=c.address,
                evidence=ev)
    for c in t.clients:
        if (c.per_request_fraction is None or c.syns < MIN_SYNS) and c.qps >= 20:
            bad = True
            yield Finding.warn(
                f"client {c.address} sends {c.qps:g} DNS queries/s (peak {c.peak_qps}/s) for "
                f"{c.distinct_names} names, but the capture shows no connections to port "
                f"{', '.join(map(str, t.service_ports))} to relate them to{_partial(t)}",
                subject=c.address, evidence={"client": c.address, "qps": c.qps,
                                             "names": dict(c.top_names[:5])}, kb="ASC-NET-001")
    if not bad and not any(c.syns >= MIN_SYNS for c in t.clients):
        yield Finding.info(f"fewer than {MIN_SYNS} new connections per client in "
                           f"{t.source}: nothing to relate lookups to{_partial(t)}",
                           evidence={"syns": t.syns, "dns_messages": t.dns_messages})


@check("dns.latency", title="DNS answers come fast and every query is answered",
       category=Category.NETWORK, tags=("dns", "net"), timeout=CAPTURE_TIMEOUT)
def latency(t: DnsTraffic) -> Iterator[Finding]:
    seen = False
    for c in t.clients:
        if not c.queries:
            continue
        seen = True
        lat = c.latency_ms
        unans = c.unanswered / c.queries
        ev = {"client": c.address, "queries": c.queries, "latency_ms": lat,
              "unanswered": c.unanswered, "answered": c.answered + c.nxdomain + c.servfail}
        msg = (f"client {c.address}: DNS latency p50 {lat['p50']:g} ms, p99 {lat['p99']:g} ms "
               f"(max {lat['max']:g}) over {lat['samples']} answers; {c.unanswered} of "
               f"{c.queries} queries unanswered ({unans:.1%}){_partial(t)}")
        # a client resolving before every connection loads the resolver (the seed's 1 → 200 ms)
        floods = (c.per_request_fraction or 0) >= PER_REQUEST and c.syns >= MIN_SYNS
        if lat["p99"] >= LAT_FAIL_MS or unans >= 0.05:
            yield Finding.fail(msg, subject=c.address, evidence=ev, kb="ASC-NET-001",
                               explained_by=per_request_key(c.address) if floods else ())
        elif lat["p99"] >= LAT_WARN_MS or unans >= 0.01:
            yield Finding.warn(msg, subject=c.address, evidence=ev, kb="ASC-NET-001")
        else:
            yield Finding.passed(msg, subject=c.address, evidence=ev)
    if not seen:
        yield Finding.info("the capture holds no DNS queries", evidence={"source": t.source})


@check("dns.errors", title="No NXDOMAIN or SERVFAIL storms",
       category=Category.NETWORK, tags=("dns", "net"), timeout=CAPTURE_TIMEOUT)
def errors(t: DnsTraffic) -> Iterator[Finding]:
    for c in t.clients:
        answered = c.answered + c.nxdomain + c.servfail + c.other_errors
        if not answered:
            continue
        nxf, sff = c.nxdomain / answered, c.servfail / answered
        nx_rate = c.nxdomain / t.duration_s if t.duration_s > 0 else float(c.nxdomain)
        ev = {"client": c.address, "answers": answered, "nxdomain": c.nxdomain,
              "servfail": c.servfail, "nxdomain_per_s": round(nx_rate, 2),
              "names": dict(c.top_names[:5])}
        msg = (f"client {c.address}: {c.nxdomain} NXDOMAIN ({nxf:.0%}, {nx_rate:.1f}/s) and "
               f"{c.servfail} SERVFAIL ({sff:.1%}) in {answered} answers{_partial(t)}")
        if (nxf >= NX_STORM_FRACTION and c.nxdomain >= NX_STORM_MIN) or sff >= 0.05:
            yield Finding.fail(msg, subject=c.address, evidence=ev, kb="ASC-NET-003")
        elif nxf >= 0.1 or sff >= 0.01:
            yield Finding.warn(msg, subject=c.address, evidence=ev, kb="ASC-NET-003")
        else:
            yield Finding.passed(msg, subject=c.address, evidence=ev)


@check("dns.search-expansion", title="Search-list expansion (ndots) does not multiply lookups",
       category=Category.NETWORK, tags=("dns", "net"), timeout=CAPTURE_TIMEOUT)
def search_expansion(t: DnsTraffic, resolver: ResolverConfig | None) -> Iterator[Finding]:
    found = False
    for c in t.clients:
        for e in c.expansions:
            found = True
            rc = resolver.resolv if resolver else None
            conf = (f"; this host's resolv.conf has ndots:{rc.ndots} search "
                    f"{' '.join(rc.search) or '(none)'}" if rc else "")
            pair = " (each as an A+AAAA pair)" if c.aaaa_pairs else ""
            yield Finding.warn(
                f"client {c.address}: {e.base} was tried as {len(e.variants)} other names "
                f"({', '.join(e.variants[:3])}{'…' if len(e.variants) > 3 else ''}){pair}: "
                f"{e.queries} queries, {e.factor:g}× the lookups needed{conf}{_partial(t)}",
                subject=c.address, kb="ASC-NET-002",
                evidence={"client": c.address, "base": e.base, "variants": list(e.variants),
                          "queries": e.queries, "factor": e.factor,
                          "a_aaaa_pairs": c.aaaa_pairs})
    if not found:
        yield Finding.passed(f"no name was tried under several search suffixes in {t.source}",
                             evidence={"clients": len(t.clients)})


# -- the host side ---------------------------------------------------------------------------
def _target_name(r: ResolverConfig, t: DnsTraffic | None) -> tuple[str | None, str]:
    """The service's hostname (service URL, else the name clients resolved) and where from."""
    if not is_address(r.service_host) and r.service_host != "localhost":
        return r.service_host, "the service URL"
    if t is not None:
        for c in t.clients:
            if c.target_names:
                return c.target_names[0][0], f"the capture (client {c.address})"
    return None, ""


@check("dns.hosts-pin", title="The service name is pinned in /etc/hosts on load clients",
       category=Category.NETWORK, tags=("dns", "net", "loadgen"), timeout=CAPTURE_TIMEOUT)
def hosts_pin(r: ResolverConfig, t: DnsTraffic | None, options: RunOptions) -> Iterator[Finding]:
    name, origin = _target_name(r, t)
    if name is None:
        yield Finding.passed(f"the service is addressed as {r.service_host}: no name to resolve",
                             evidence={"service_host": r.service_host})
        return
    if r.hosts_error and not r.hosts:
        yield Finding.warn(f"{r.hosts_error}: {name} (from {origin}) is resolved through DNS",
                           subject="/etc/hosts", evidence={"hostname": name})
        return
    if name in r.hosts:
        yield Finding.passed(f"{name} (from {origin}) is pinned to {r.hosts[name]} in /etc/hosts",
                             subject="/etc/hosts", evidence={"hostname": name,
                                                            "address": r.hosts[name]})
        return
    address = ""
    per_req = None
    if t is not None:
        addrs = t.resolved.get(name, ())
        for c in t.clients:
            if c.target_names and c.target_names[0][0] == name and c.targets:
                address = c.targets[0][0]
                per_req = c
                break
        address = address or (addrs[0] if addrs else "")
    ev = {"hostname": name, "address": address, "origin": origin,
          "load_clients": [f"{c.kind} (pid {c.pid})" for c in r.load_clients]}
    if per_req is not None and (per_req.per_request_fraction or 0) >= PER_REQUEST:
        yield Finding.fail(
            f"{name} is not in /etc/hosts and client {per_req.address} resolves it before "
            f"{per_req.per_request_fraction:.0%} of its connections: pin it to {address}",
            subject="/etc/hosts", evidence=ev, kb="ASC-NET-001", fix="dns.hosts-pin",
            fix_params={"hostname": name, "address": address},
            cause=per_request_key(per_req.address))
        return
    extra = (f"; load clients here: {', '.join(ev['load_clients'][:4])}" if r.load_clients else "")
    if r.load_clients:
        yield Finding.warn(f"{name} (from {origin}) is not pinned in /etc/hosts: every lookup "
                           f"of a load client goes to the resolver{extra}", subject="/etc/hosts",
                           evidence=ev, kb="ASC-NET-001", fix="dns.hosts-pin",
                           fix_params={"hostname": name, "address": address})
    else:
        yield Finding.info(f"{name} (from {origin}) is not pinned in /etc/hosts (no load client "
                           "runs here)", subject="/etc/hosts", evidence=ev, kb="ASC-NET-001")


@check("dns.resolver", title="resolv.conf and a local cache keep lookups cheap",
       category=Category.NETWORK, tags=("dns", "net"))
def resolver(r: ResolverConfig) -> Iterator[Finding]:
    if r.resolv is None:
        yield Finding.skip(f"missing source: /etc/resolv.conf ({r.resolv_error})",
                           evidence={"reason": r.resolv_error})
        return
    rc = r.resolv
    ev = {"nameservers": list(rc.nameservers), "search": list(rc.search), "ndots": rc.ndots,
          "timeout": rc.timeout, "attempts": rc.attempts, "local_caches": list(r.caches),
          "load_clients": [f"{c.kind} (pid {c.pid})" for c in r.load_clients]}
    problems = 0
    if rc.ndots > 1 and rc.search:
        problems += 1
        yield Finding.warn(f"/etc/resolv.conf: options ndots:{rc.ndots} with {len(rc.search)} "
                           f"search domains: a name with fewer than {rc.ndots} dots is tried "
                           f"under each suffix first (up to {len(rc.search) + 1} queries, "
                           "×2 with A+AAAA)", subject="/etc/resolv.conf", evidence=ev,
                           kb="ASC-NET-002")
    worst_wait = rc.timeout * rc.attempts * max(1, len(rc.nameservers))
    if worst_wait >= 15:
        problems += 1
        yield Finding.warn(f"/etc/resolv.conf: timeout:{rc.timeout} attempts:{rc.attempts} over "
                           f"{len(rc.nameservers)} nameservers: a lost answer stalls a request up "
                           f"to {worst_wait} s", subject="/etc/resolv.conf", evidence=ev,
                           kb="ASC-NET-001")
    local_ns = any(ns.startswith("127.") or ns == "::1" for ns in rc.nameservers)
    if not r.caches and not local_ns and r.load_clients:
        problems += 1
        yield Finding.warn(f"{len(r.load_clients)} load clients run here "
                           f"({', '.join(c.kind for c in r.load_clients[:4])}) and no local DNS "
                           f"cache (nscd, systemd-resolved, dnsmasq): every lookup goes to "
                           f"{', '.join(rc.nameservers) or 'the resolver'}", evidence=ev,
                           kb="ASC-NET-001")
    if not problems:
        cache = ", ".join(r.caches) or ("a local nameserver" if local_ns else "no local cache")
        yield Finding.passed(f"resolv.conf ndots:{rc.ndots} timeout:{rc.timeout} "
                             f"attempts:{rc.attempts}; {cache}", evidence=ev)


def _ports_desc(r: ResolverConfig, tw: int | None, width: int | None) -> str:
    """What was read, in words: an unreadable value says so instead of printing None."""
    ports = (f"ip_local_port_range {r.port_range[0]}-{r.port_range[1]} ({width} ports)"
             if r.port_range else "ip_local_port_range unreadable")
    if tw is not None:
        waits = f"{tw} TIME_WAIT sockets toward port {r.service_port}" + (
            f" ({r.time_wait_total} in all)" if r.time_wait_total is not None else "")
    else:
        waits = ("TIME_WAIT sockets not counted (socket table unreadable"
                 + (f": {r.connections_error})" if r.connections_error else ")"))
    tcp = ", ".join(f"{k} {v}" for k, v in (("tcp_fin_timeout", r.fin_timeout),
                                             ("tcp_tw_reuse", r.tw_reuse)) if v is not None)
    return f"{waits}; {ports}" + (f", {tcp}" if tcp else "")


@check("net.tcp-ports", title="Ephemeral ports are not exhausted by TIME_WAIT",
       category=Category.NETWORK, tags=("net", "loadgen"))
def tcp_ports(r: ResolverConfig) -> Iterator[Finding]:
    width = r.port_range_width
    if width is None and r.time_wait_total is None:
        yield Finding.skip("missing source: /proc/sys/net/ipv4/ip_local_port_range and the "
                           f"socket table ({r.connections_error})")
        return
    tw = r.time_wait_to_service
    ev = {"port_range": list(r.port_range) if r.port_range else None, "width": width,
          "tcp_fin_timeout": r.fin_timeout, "tcp_tw_reuse": r.tw_reuse,
          "time_wait_to_service": tw, "time_wait_total": r.time_wait_total,
          "service_port": r.service_port}
    params = {"ip_local_port_range": "1024 65535", "tcp_fin_timeout": 30, "tcp_tw_reuse": 1}
    desc = _ports_desc(r, tw, width)
    if width and tw is not None and tw >= 0.5 * width:
        yield Finding.fail(f"{desc}: half the ephemeral ports are held in TIME_WAIT, new "
                           "connections will fail with EADDRNOTAVAIL", evidence=ev,
                           kb="ASC-NET-004", fix="sysctl.tcp-ports", fix_params=params)
    elif width and tw is not None and (tw >= 0.1 * width or (tw >= 1000 and width < 30000)):
        yield Finding.warn(f"{desc}: a load test that opens a connection per request will run "
                           "out of ports", evidence=ev, kb="ASC-NET-004", fix="sysctl.tcp-ports",
                           fix_params=params)
    elif width and width < 10000 and r.load_clients:
        yield Finding.warn(f"{desc}: only {width} ephemeral ports with load clients running",
                           evidence=ev, kb="ASC-NET-004", fix="sysctl.tcp-ports",
                           fix_params=params)
    else:
        yield Finding.passed(desc, evidence=ev)


@check("dns.load-clients", title="Load-client processes on this host",
       category=Category.NETWORK, tags=("dns", "net", "loadgen"))
def load_clients(r: ResolverConfig) -> Iterator[Finding]:
    if r.processes_error:
        yield Finding.skip(f"missing source: process table ({r.processes_error})")
        return
    if not r.load_clients:
        yield Finding.passed("no load-client process (jmeter, locust, k6, wrk, ab, vegeta, "
                             "python benchmarks) runs here", evidence={"load_clients": []})
        return
    yield Finding.info(f"{len(r.load_clients)} load-client processes: " + ", ".join(
        f"{c.kind} (pid {c.pid})" for c in r.load_clients[:6]),
        evidence={"load_clients": [{"pid": c.pid, "kind": c.kind, "cmdline": c.cmdline}
                                   for c in r.load_clients]})
