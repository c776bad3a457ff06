"""The pcap/pcapng reader and the DNS analysis on captures written by scapy, and the rules."""

from __future__ import annotations

import io
import struct

import pytest
from scapy.all import DNS, DNSQR, IP, TCP, UDP, Dot1Q, Ether, IPv6, Loopback, wrpcap
from scapy.layers.l2 import CookedLinux

from ascend_doctor.checks import dns as rules
from ascend_doctor.errors import ParseError
from ascend_doctor.host import LiveHost
from ascend_doctor.model import Status
from ascend_doctor.options import RunOptions
from ascend_doctor.probes.dns import gather_dns_traffic
from ascend_doctor.probes.dnsstats import analyse_capture
from ascend_doctor.probes.pcapread import CaptureError, iter_packets

from .capgen import (CLIENT, NAME, SERVICE, cached, ndots_expansion, nxdomain_storm,
                     per_request, query, syn, write)


def traffic(tmp_path, pkts, ng=False, name="c.pcap", **kw):
    path = write(tmp_path / name, pkts, ng)
    return gather_dns_traffic(LiveHost(), RunOptions(pcap=str(path), **kw))


@pytest.mark.parametrize("ng", [False, True], ids=["pcap", "pcapng"])
def test_per_request_lookups_fail_with_the_pin_fix(tmp_path, ng):
    t = traffic(tmp_path, per_request(100, rate=100.0), ng)
    (c,) = t.clients
    assert (c.address, c.queries, c.syns, c.syns_after_lookup) == (CLIENT, 100, 100, 100)
    assert 95 <= c.qps <= 105 and c.top_names[0] == (NAME, 100)
    assert t.resolved[NAME] == (SERVICE,)
    (f,) = rules.per_request(t)
    assert f.status == Status.FAIL and "100 of 100 new connections (100%)" in f.message
    assert f.fix.id == "dns.hosts-pin" and f.fix.params == {"hostname": NAME, "address": SERVICE}
    assert "ASC-NET-001" in f.kb


def test_cached_lookups_pass(tmp_path):
    t = traffic(tmp_path, cached(100))
    (c,) = t.clients
    assert c.syns == 100 and c.syns_after_lookup < 40
    (f,) = rules.per_request(t)
    assert f.status == Status.PASS


def test_slow_resolver_latency_is_measured_by_id_and_tuple(tmp_path):
    fast = traffic(tmp_path, per_request(50, latency=0.001), name="f.pcap")
    slow = traffic(tmp_path, per_request(50, latency=0.2), name="s.pcap")
    assert fast.clients[0].latency_ms["p99"] == pytest.approx(1.0, abs=0.05)
    assert slow.clients[0].latency_ms["p50"] == pytest.approx(200.0, abs=0.05)
    assert [f.status for f in rules.latency(fast)] == [Status.PASS]
    (f,) = rules.latency(slow)
    assert f.status == Status.FAIL and "p99 200 ms" in f.message


def test_unanswered_queries_are_counted(tmp_path):
    pkts = [query(1000.0 + i * 0.1, i, sport=33000 + i) for i in range(100)]
    pkts.append(syn(1020.0, 50000))  # time moves on: all queries are older than 5 s
    t = traffic(tmp_path, pkts)
    assert t.clients[0].unanswered == 100
    (f,) = rules.latency(t)
    assert f.status == Status.FAIL and "100 of 100 queries unanswered" in f.message


def test_nxdomain_storm(tmp_path):
    t = traffic(tmp_path, nxdomain_storm(200))
    assert t.clients[0].nxdomain == 200
    (f,) = rules.errors(t)
    assert f.status == Status.FAIL and "200 NXDOMAIN (100%" in f.message
    assert [x.status for x in rules.errors(traffic(tmp_path, per_request(50), name="ok.pcap"))] \
        == [Status.PASS]


def test_ndots_expansion_and_a_aaaa_pairs(tmp_path):
    t = traffic(tmp_path, ndots_expansion(30))
    (e,) = t.clients[0].expansions
    assert e.base == NAME and e.factor == 4.0 and len(e.variants) == 3
    (f,) = rules.search_expansion(t, None)
    assert f.status == Status.WARN and "4× the lookups" in f.message
    p = traffic(tmp_path, per_request(40, aaaa=True), name="aaaa.pcap")
    assert p.clients[0].aaaa_pairs == 40 and p.clients[0].qtypes == {"A": 40, "AAAA": 40}
    assert [f.status for f in rules.search_expansion(p, None)] == [Status.PASS]


def _dns_pkt(frame, v6=False):
    ipl = IPv6(src="fd00::5", dst="fd00::53") if v6 else IP(src=CLIENT, dst="10.0.0.53")
    p = ipl / UDP(sport=40000, dport=53) / DNS(id=7, qd=DNSQR(qname=NAME))
    return frame / p if frame is not None else p


@pytest.mark.parametrize("make,linktype", [
    (lambda: _dns_pkt(Ether() / Dot1Q(vlan=10)), None),
    (lambda: _dns_pkt(CookedLinux(proto=0x0800)), None),
    (lambda: _dns_pkt(Loopback(type=2)), None),
    (lambda: _dns_pkt(None), 101),
    (lambda: _dns_pkt(Ether(), v6=True), None),
], ids=["vlan", "sll", "loopback", "raw", "ipv6"])
def test_link_types(tmp_path, make, linktype):
    path = tmp_path / "l.pcap"
    wrpcap(str(path), [make()], linktype=linktype)
    pkts = list(iter_packets(open(path, "rb")))
    assert len(pkts) == 1 and pkts[0].dport == 53


def test_sll2_and_nanosecond_pcap_written_by_hand():
    """SLL2 (276) with a nanosecond-resolution header: formats scapy does not write."""
    ip = bytes(IP(src=CLIENT, dst="10.0.0.53") / UDP(sport=40000, dport=53) / DNS(
        id=3, qd=DNSQR(qname=NAME)))
    sll2 = struct.pack(">HHIHBB8s", 0x0800, 0, 1, 1, 4, 6, b"\0" * 8) + ip
    raw = struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 276)
    raw += struct.pack("<IIII", 100, 500_000_000, len(sll2), len(sll2)) + sll2
    (p,) = list(iter_packets(io.BytesIO(raw)))
    assert p.ts == pytest.approx(100.5) and p.dport == 53


def test_truncated_file_keeps_what_was_read(tmp_path):
    path = write(tmp_path / "full.pcap", per_request(100))
    data = path.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[:len(data) // 2 + 7])
    t = gather_dns_traffic(LiveHost(), RunOptions(pcap=str(cut)))
    assert t.error and "truncated" in t.error and t.error_offset and t.error_offset < len(data) // 2 + 7
    assert 40 <= t.clients[0].queries <= 55
    (f,) = rules.capture_read(t)
    assert f.status == Status.ERROR and str(cut) in f.message and "at byte" in f.message
    (g,) = rules.per_request(t)
    assert g.status == Status.FAIL and "first" in g.message  # findings from the part read


def test_corrupt_record_length_names_the_offset(tmp_path):
    path = write(tmp_path / "a.pcap", per_request(10))
    data = bytearray(path.read_bytes())
    first_len = struct.unpack_from("<I", data, 24 + 8)[0]
    second = 24 + 16 + first_len
    struct.pack_into("<II", data, second + 8, 0x7FFFFFFF, 0x7FFFFFFF)
    path.write_bytes(bytes(data))
    t = gather_dns_traffic(LiveHost(), RunOptions(pcap=str(path)))
    assert t.records == 1 and f"at byte {second}" in t.error and "corrupt" in t.error


@pytest.mark.parametrize("content,reason", [(b"", "empty file"), (b"GIF89a" + b"\0" * 40, "not a pcap"),
                                            (b"\xd4\xc3\xb2\xa1\x02\x00", "truncated global header")])
def test_not_a_capture_is_a_parse_error_naming_the_file(tmp_path, content, reason):
    path = tmp_path / "bad.pcap"
    path.write_bytes(content)
    with pytest.raises(ParseError) as ei:
        gather_dns_traffic(LiveHost(), RunOptions(pcap=str(path)))
    assert ei.value.source == str(path) and reason in ei.value.reason


def test_corrupt_pcapng_block(tmp_path):
    path = write(tmp_path / "a.pcapng", per_request(20), ng=True)
    data = bytearray(path.read_bytes())
    data[-4:] = b"\x01\x02\x03\x04"  # trailer length of the last block no longer matches
    t = analyse_capture(io.BytesIO(bytes(data)), "a.pcapng", (8000,))
    assert "length mismatch" in t.error and t.records == 59


def test_non_dns_traffic_and_other_ports_are_ignored(tmp_path):
    pkts = [Ether() / IP(src=CLIENT, dst=SERVICE) / TCP(sport=5000, dport=22, flags="S"),
            Ether() / IP(src=CLIENT, dst=SERVICE) / UDP(sport=5000, dport=123) / b"ntp",
            Ether() / IP(src=CLIENT, dst=SERVICE) / TCP(sport=5001, dport=8000, flags="SA")]
    t = traffic(tmp_path, pkts)
    assert t.records == 3 and t.syns == 0 and t.dns_messages == 0
    (f,) = rules.capture_read(t)
    assert f.status == Status.WARN


def test_stream_is_read_in_bounded_chunks(tmp_path):
    class Counting(io.BytesIO):
        biggest = 0

        def read(self, n=-1):
            assert n != -1, "never read a whole capture"
            Counting.biggest = max(Counting.biggest, n)
            return super().read(n)

    path = write(tmp_path / "c.pcap", per_request(30))
    assert len(list(iter_packets(Counting(path.read_bytes())))) == 90
    assert Counting.biggest <= 1 << 20


def test_capture_error_carries_packet_count():
    with pytest.raises(CaptureError) as ei:
        list(iter_packets(io.BytesIO(b"\x0a\x0d\x0d\x0a\x10\x00\x00\x00")))
    assert ei.value.offset == 0


def test_capture_is_recorded_and_replayed_by_bundles(tmp_path):
    """collect --sniff records the capture; check --bundle replays it through Host.capture."""
    from ascend_doctor.bundle import BundleData, BundleHost, RecordingHost

    pcap = write(tmp_path / "live.pcap", per_request(30))

    class FakeLive(LiveHost):
        def capture(self, iface, bpf, seconds):
            assert (iface, bpf) == ("eth0", "port 53 or tcp port 8000")
            return open(pcap, "rb")

    opts = RunOptions(sniff_seconds=2.0, iface="eth0")
    rec = RecordingHost(FakeLive())
    live = gather_dns_traffic(rec, opts)
    data = BundleData.load(rec.finish("live", {}).to_bytes())
    replay = gather_dns_traffic(BundleHost(data), opts)
    assert replay.clients == live.clients and replay.clients[0].syns == 30
    assert "live capture on eth0 for 2 s" in replay.source


def test_sysroot_cannot_sniff(sysroot):
    from ascend_doctor.errors import SourceMissing
    with pytest.raises(SourceMissing):
        gather_dns_traffic(sysroot.host(), RunOptions(sniff_seconds=1.0))
