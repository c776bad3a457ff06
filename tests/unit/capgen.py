"""Captures written by scapy: load clients that resolve per request, cache, fail, expand."""

from __future__ import annotations

from scapy.all import DNS, DNSQR, DNSRR, IP, TCP, UDP, Ether, IPv6, wrpcap, wrpcapng  # noqa: F401
from scapy.layers.l2 import CookedLinux

CLIENT, RESOLVER, SERVICE = "10.0.0.5", "10.0.0.53", "192.168.1.100"
NAME = "api.deepseek.example.com"


def query(t, qid, name=NAME, qtype="A", client=CLIENT, sport=40000, frame=Ether):
    p = frame() / IP(src=client, dst=RESOLVER) / UDP(sport=sport, dport=53) / DNS(
        id=qid, rd=1, qd=DNSQR(qname=name, qtype=qtype))
    p.time = t
    return p


def answer(t, qid, name=NAME, qtype="A", rcode=0, addr=SERVICE, client=CLIENT, sport=40000,
           frame=Ether):
    an = []
    if rcode == 0:
        an = DNSRR(rrname=name, type=qtype, rdata=addr if qtype == "A" else "2001:db8::64")
    p = frame() / IP(src=RESOLVER, dst=client) / UDP(sport=53, dport=sport) / DNS(
        id=qid, qr=1, rd=1, ra=1, rcode=rcode, qd=DNSQR(qname=name, qtype=qtype), an=an)
    p.time = t
    return p


def syn(t, sport, client=CLIENT, dst=SERVICE, dport=8000, frame=Ether):
    p = frame() / IP(src=client, dst=dst) / TCP(sport=sport, dport=dport, flags="S", seq=1000)
    p.time = t
    return p


def per_request(n=100, latency=0.002, rate=100.0, aaaa=False, frame=Ether):
    """jmeter without keep-alive: lookup, answer, then a new connection, per request."""
    pkts, t = [], 1_767_225_600.0
    for i in range(n):
        sp = 30000 + i
        pkts += [query(t, i, sport=sp, frame=frame), answer(t + latency, i, sport=sp, frame=frame)]
        if aaaa:
            pkts += [query(t + 0.0001, 10000 + i, qtype="AAAA", sport=sp, frame=frame),
                     answer(t + latency + 0.0001, 10000 + i, qtype="AAAA", sport=sp, frame=frame)]
        pkts.append(syn(t + latency + 0.0005, 50000 + i, frame=frame))
        t += 1.0 / rate
    return pkts


def cached(n=100, rate=100.0):
    """One lookup, then n connections over a second and more: the name is cached."""
    pkts, t = [query(1_767_225_600.0, 1), answer(1_767_225_600.001, 1)], 1_767_225_600.01
    for i in range(n):
        pkts.append(syn(t, 50000 + i))
        t += 1.0 / rate * 3
    return pkts


def nxdomain_storm(n=200, rate=100.0):
    pkts, t = [], 1_767_225_600.0
    for i in range(n):
        name = "api.deepseek.exmaple.com"
        pkts += [query(t, i, name=name, sport=31000 + i),
                 answer(t + 0.003, i, name=name, rcode=3, sport=31000 + i)]
        t += 1.0 / rate
    return pkts


def ndots_expansion(n=30, search=("default.svc.cluster.local", "svc.cluster.local",
                                  "cluster.local")):
    """ndots:5: every lookup of the 3-dot name is tried under each search suffix first."""
    pkts, t, qid = [], 1_767_225_600.0, 0
    for i in range(n):
        for s in search:
            qid += 1
            pkts += [query(t, qid, name=f"{NAME}.{s}", sport=32000 + qid),
                     answer(t + 0.001, qid, name=f"{NAME}.{s}", rcode=3, sport=32000 + qid)]
            t += 0.002
        qid += 1
        pkts += [query(t, qid, sport=32000 + qid), answer(t + 0.001, qid, sport=32000 + qid),
                 syn(t + 0.002, 50000 + i)]
        t += 0.2
    return pkts


def write(path, pkts, ng=False):
    (wrpcapng if ng else wrpcap)(str(path), pkts)
    return path
