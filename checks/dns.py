"""DNS behaviour of load clients (from a capture) and the resolver side of the host.

Seed 000_93c34712512482cd.txt §5.2: jmeter resolved api.deepseek.example.com before every
request (100 queries/s), the resolver's latency went from 1 to 200 ms and QPS swung
76 → 42 → 68; pinning the name in /etc/hosts (or keep-alive) fixed it.
"""

from __future__ import annotations

from typing import Iterator

from ascend_doctor.i18n import T, join
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
    return (T(" (from the first {n} bytes only: {error})", n=t.bytes_read, error=t.error)
            if t.error else "")


@check("dns.capture", title="The capture of the load clients' traffic is readable",
       category=Category.NETWORK, tags=("dns", "net", "capture"), timeout=CAPTURE_TIMEOUT)
def capture_read(t: DnsTraffic) -> Iterator[Finding]:
    ev = {"source": t.source, "format": t.format, "packets": t.records, "bytes": t.bytes_read,
          "dns_messages": t.dns_messages, "malformed_dns": t.malformed, "syns": t.syns,
          "duration_s": t.duration_s, "clients": len(t.clients)}
    if t.error:
        yield Finding.error(T("cannot parse {source}: {error}; the other DNS checks use the "
                              "{n} packets ({bytes} bytes) read before it", source=t.source,
                              error=t.error, n=t.records, bytes=t.bytes_read),
                            subject=t.source, evidence={**ev, "offset": t.error_offset})
        return
    if t.dns_messages == 0 and t.syns == 0:
        yield Finding.warn(T("{source}: {n} packets, none of them DNS (port 53) or a new "
                             "connection to port {ports}: capture on the load-client host, on "
                             "the right interface", source=t.source, n=t.records,
                             ports=", ".join(map(str, t.service_ports))),
                           subject=t.source, evidence=ev)
        return
    yield Finding.passed(T("{source}: {n} packets over {seconds} s, {dns} DNS messages from "
                           "{clients} clients, {syns} new connections to the service",
                           source=t.source, n=t.records, seconds=f"{t.duration_s:g}",
                           dns=t.dns_messages, clients=len(t.clients), syns=t.syns),
                         subject=t.source,
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
                T("client {client} resolved {name} before {after} of {syns} new connections "
                  "({share}) to {addr}:{port}: {qps} DNS queries/s (peak {peak}/s){partial}",
                  client=c.address, name=name or T("the service name"),
                  after=c.syns_after_lookup, syns=c.syns, share=f"{frac:.0%}", addr=addr,
                  port=target[1] if target else "?", qps=f"{c.qps:g}", peak=c.peak_qps,
                  partial=_partial(t)),
                subject=c.address, evidence=ev, kb="ASC-NET-001", fix="dns.hosts-pin",
                fix_params={"hostname": name or "", "address": addr},
                cause=per_request_key(c.address))
        else:
            yield Finding.passed(
                T("client {client}: {after} of {syns} new connections followed a lookup "
                  "({share}); {qps} queries/s", client=c.address, after=c.syns_after_lookup,
                  syns=c.syns, share=f"{frac:.0%}", qps=f"{c.qps:g}"), subject=c.address,
                evidence=ev)
    for c in t.clients:
        if (c.per_request_fraction is None or c.syns < MIN_SYNS) and c.qps >= 20:
            bad = True
            yield Finding.warn(
                T("client {client} sends {qps} DNS queries/s (peak {peak}/s) for {names} names, "
                  "but the capture shows no connections to port {ports} to relate them "
                  "to{partial}", client=c.address, qps=f"{c.qps:g}", peak=c.peak_qps,
                  names=c.distinct_names, ports=", ".join(map(str, t.service_ports)),
                  partial=_partial(t)),
                subject=c.address, evidence={"client": c.address, "qps": c.qps,
                                             "names": dict(c.top_names[:5])}, kb="ASC-NET-001")
    if not bad and not any(c.syns >= MIN_SYNS for c in t.clients):
        yield Finding.info(T("fewer than {n} new connections per client in {source}: nothing "
                             "to relate lookups to{partial}", n=MIN_SYNS, source=t.source,
                             partial=_partial(t)),
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
        msg = T("client {client}: DNS latency p50 {p50} ms, p99 {p99} ms (max {max}) over "
                "{samples} answers; {unanswered} of {queries} queries unanswered "
                "({share}){partial}", client=c.address, p50=f"{lat['p50']:g}",
                p99=f"{lat['p99']:g}", max=f"{lat['max']:g}", samples=lat["samples"],
                unanswered=c.unanswered, queries=c.queries, share=f"{unans:.1%}",
                partial=_partial(t))
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
        yield Finding.info(T("the capture holds no DNS queries"), evidence={"source": t.source})


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
        msg = T("client {client}: {nx} NXDOMAIN ({nxf}, {rate}/s) and {sf} SERVFAIL ({sff}) in "
                "{answered} answers{partial}", client=c.address, nx=c.nxdomain,
                nxf=f"{nxf:.0%}", rate=f"{nx_rate:.1f}", sf=c.servfail, sff=f"{sff:.1%}",
                answered=answered, partial=_partial(t))
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
            conf = (T("; this host's resolv.conf has ndots:{ndots} search {search}",
                      ndots=rc.ndots, search=" ".join(rc.search) or T("(none)")) if rc else "")
            pair = T(" (each as an A+AAAA pair)") if c.aaaa_pairs else ""
            yield Finding.warn(
                T("client {client}: {base} was tried as {n} other names ({variants}){pair}: "
                  "{queries} queries, {factor}× the lookups needed{conf}{partial}",
                  client=c.address, base=e.base, n=len(e.variants),
                  variants=", ".join(e.variants[:3]) + ("…" if len(e.variants) > 3 else ""),
                  pair=pair, queries=e.queries, factor=f"{e.factor:g}", conf=conf,
                  partial=_partial(t)),
                subject=c.address, kb="ASC-NET-002",
                evidence={"client": c.address, "base": e.base, "variants": list(e.variants),
                          "queries": e.queries, "factor": e.factor,
                          "a_aaaa_pairs": c.aaaa_pairs})
    if not found:
        yield Finding.passed(T("no name was tried under several search suffixes in {source}",
                               source=t.source),
                             evidence={"clients": len(t.clients)})


# -- the host side ---------------------------------------------------------------------------
def _target_name(r: ResolverConfig, t: DnsTraffic | None) -> tuple[str | None, str]:
    """The service's hostname (service URL, else the name clients resolved) and where from."""
    if not is_address(r.service_host) and r.service_host != "localhost":
        return r.service_host, T("the service URL")
    if t is not None:
        for c in t.clients:
            if c.target_names:
                return c.target_names[0][0], T("the capture (client {client})", client=c.address)
    return None, ""


@check("dns.hosts-pin", title="The service name is pinned in /etc/hosts on load clients",
       category=Category.NETWORK, tags=("dns", "net", "loadgen"), timeout=CAPTURE_TIMEOUT)
def hosts_pin(r: ResolverConfig, t: DnsTraffic | None, options: RunOptions) -> Iterator[Finding]:
    name, origin = _target_name(r, t)
    if name is None:
        yield Finding.passed(T("the service is addressed as {host}: no name to resolve",
                               host=r.service_host),
                             evidence={"service_host": r.service_host})
        return
    if r.hosts_error and not r.hosts:
        yield Finding.warn(T("{error}: {name} (from {origin}) is resolved through DNS",
                             error=r.hosts_error, name=name, origin=origin),
                           subject="/etc/hosts", evidence={"hostname": name})
        return
    if name in r.hosts:
        yield Finding.passed(T("{name} (from {origin}) is pinned to {address} in /etc/hosts",
                               name=name, origin=origin, address=r.hosts[name]),
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
            T("{name} is not in /etc/hosts and client {client} resolves it before {share} of "
              "its connections: pin it to {address}", name=name, client=per_req.address,
              share=f"{per_req.per_request_fraction:.0%}", address=address),
            subject="/etc/hosts", evidence=ev, kb="ASC-NET-001", fix="dns.hosts-pin",
            fix_params={"hostname": name, "address": address},
            cause=per_request_key(per_req.address))
        return
    extra = (T("; load clients here: {clients}", clients=", ".join(ev["load_clients"][:4]))
             if r.load_clients else "")
    if r.load_clients:
        yield Finding.warn(T("{name} (from {origin}) is not pinned in /etc/hosts: every lookup "
                             "of a load client goes to the resolver{extra}", name=name,
                             origin=origin, extra=extra), subject="/etc/hosts",
                           evidence=ev, kb="ASC-NET-001", fix="dns.hosts-pin",
                           fix_params={"hostname": name, "address": address})
    else:
        yield Finding.info(T("{name} (from {origin}) is not pinned in /etc/hosts (no load "
                             "client runs here)", name=name, origin=origin),
                           subject="/etc/hosts", evidence=ev, kb="ASC-NET-001")


@check("dns.resolver", title="resolv.conf and a local cache keep lookups cheap",
       category=Category.NETWORK, tags=("dns", "net"))
def resolver(r: ResolverConfig) -> Iterator[Finding]:
    if r.resolv is None:
        yield Finding.skip(T("missing source: /etc/resolv.conf ({reason})",
                             reason=r.resolv_error),
                           evidence={"reason": r.resolv_error})
        return
    rc = r.resolv
    ev = {"nameservers": list(rc.nameservers), "search": list(rc.search), "ndots": rc.ndots,
          "timeout": rc.timeout, "attempts": rc.attempts, "local_caches": list(r.caches),
          "load_clients": [f"{c.kind} (pid {c.pid})" for c in r.load_clients]}
    problems = 0
    if rc.ndots > 1 and rc.search:
        problems += 1
        yield Finding.warn(T("/etc/resolv.conf: options ndots:{ndots} with {n} search "
                             "domains: a name with fewer than {ndots} dots is tried under each "
                             "suffix first (up to {queries} queries, ×2 with A+AAAA)",
                             ndots=rc.ndots, n=len(rc.search), queries=len(rc.search) + 1),
                           subject="/etc/resolv.conf", evidence=ev,
                           kb="ASC-NET-002")
    worst_wait = rc.timeout * rc.attempts * max(1, len(rc.nameservers))
    if worst_wait >= 15:
        problems += 1
        yield Finding.warn(T("/etc/resolv.conf: timeout:{timeout} attempts:{attempts} over {n} "
                             "nameservers: a lost answer stalls a request up to {wait} s",
                             timeout=rc.timeout, attempts=rc.attempts, n=len(rc.nameservers),
                             wait=worst_wait), subject="/etc/resolv.conf", evidence=ev,
                           kb="ASC-NET-001")
    local_ns = any(ns.startswith("127.") or ns == "::1" for ns in rc.nameservers)
    if not r.caches and not local_ns and r.load_clients:
        problems += 1
        yield Finding.warn(T("{n} load clients run here ({kinds}) and no local DNS cache (nscd, "
                             "systemd-resolved, dnsmasq): every lookup goes to {servers}",
                             n=len(r.load_clients),
                             kinds=", ".join(c.kind for c in r.load_clients[:4]),
                             servers=", ".join(rc.nameservers) or T("the resolver")), evidence=ev,
                           kb="ASC-NET-001")
    if not problems:
        cache = ", ".join(r.caches) or (T("a local nameserver") if local_ns
                                        else T("no local cache"))
        yield Finding.passed(T("resolv.conf ndots:{ndots} timeout:{timeout} attempts:{attempts}; "
                               "{cache}", ndots=rc.ndots, timeout=rc.timeout,
                               attempts=rc.attempts, cache=cache), evidence=ev)


def _ports_desc(r: ResolverConfig, tw: int | None, width: int | None) -> str:
    """What was read, in words: an unreadable value says so instead of printing None."""
    ports = (T("ip_local_port_range {low}-{high} ({n} ports)", low=r.port_range[0],
               high=r.port_range[1], n=width)
             if r.port_range else T("ip_local_port_range unreadable"))
    if tw is not None:
        waits = (T("{n} TIME_WAIT sockets toward port {port} ({total} in all)", n=tw,
                   port=r.service_port, total=r.time_wait_total)
                 if r.time_wait_total is not None else
                 T("{n} TIME_WAIT sockets toward port {port}", n=tw, port=r.service_port))
    else:
        waits = (T("TIME_WAIT sockets not counted (socket table unreadable: {reason})",
                   reason=r.connections_error) if r.connections_error else
                 T("TIME_WAIT sockets not counted (socket table unreadable)"))
    tcp = ", ".join(f"{k} {v}" for k, v in (("tcp_fin_timeout", r.fin_timeout),
                                             ("tcp_tw_reuse", r.tw_reuse)) if v is not None)
    return join("; ", (waits, ports)) if not tcp else join(", ", (join("; ", (waits, ports)), tcp))


@check("net.tcp-ports", title="Ephemeral ports are not exhausted by TIME_WAIT",
       category=Category.NETWORK, tags=("net", "loadgen"))
def tcp_ports(r: ResolverConfig) -> Iterator[Finding]:
    width = r.port_range_width
    if width is None and r.time_wait_total is None:
        yield Finding.skip(T("missing source: /proc/sys/net/ipv4/ip_local_port_range and the "
                             "socket table ({reason})", reason=r.connections_error))
        return
    tw = r.time_wait_to_service
    ev = {"port_range": list(r.port_range) if r.port_range else None, "width": width,
          "tcp_fin_timeout": r.fin_timeout, "tcp_tw_reuse": r.tw_reuse,
          "time_wait_to_service": tw, "time_wait_total": r.time_wait_total,
          "service_port": r.service_port}
    params = {"ip_local_port_range": "1024 65535", "tcp_fin_timeout": 30, "tcp_tw_reuse": 1}
    desc = _ports_desc(r, tw, width)
    if width and tw is not None and tw >= 0.5 * width:
        yield Finding.fail(T("{desc}: half the ephemeral ports are held in TIME_WAIT, new "
                             "connections will fail with EADDRNOTAVAIL", desc=desc), evidence=ev,
                           kb="ASC-NET-004", fix="sysctl.tcp-ports", fix_params=params)
    elif width and tw is not None and (tw >= 0.1 * width or (tw >= 1000 and width < 30000)):
        yield Finding.warn(T("{desc}: a load test that opens a connection per request will run "
                             "out of ports", desc=desc),
                           evidence=ev, kb="ASC-NET-004", fix="sysctl.tcp-ports",
                           fix_params=params)
    elif width and width < 10000 and r.load_clients:
        yield Finding.warn(T("{desc}: only {n} ephemeral ports with load clients running",
                             desc=desc, n=width),
                           evidence=ev, kb="ASC-NET-004", fix="sysctl.tcp-ports",
                           fix_params=params)
    else:
        yield Finding.passed(desc, evidence=ev)


@check("dns.load-clients", title="Load-client processes on this host",
       category=Category.NETWORK, tags=("dns", "net", "loadgen"))
def load_clients(r: ResolverConfig) -> Iterator[Finding]:
    if r.processes_error:
        yield Finding.skip(T("missing source: process table ({reason})",
                             reason=r.processes_error))
        return
    if not r.load_clients:
        yield Finding.passed(T("no load-client process (jmeter, locust, k6, wrk, ab, vegeta, "
                               "python benchmarks) runs here"), evidence={"load_clients": []})
        return
    yield Finding.info(T("{n} load-client processes: {clients}", n=len(r.load_clients),
                         clients=", ".join(f"{c.kind} (pid {c.pid})"
                                           for c in r.load_clients[:6])),
        evidence={"load_clients": [{"pid": c.pid, "kind": c.kind, "cmdline": c.cmdline}
                                   for c in r.load_clients]})
