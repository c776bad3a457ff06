"""The exporter carries ECC counters and RoCE port state, parsed back from the exposition;
an uncorrectable ECC error or a DOWN port makes the HA probe report degraded."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from ascend_doctor.exporter import Snapshot, exposition, health
from ascend_doctor.probes.hccn import HccnDevice, HccnState, ToolAnswer
from ascend_doctor.probes.npusmi_detail import EccSample, NpuDetail, parse_ecc
from tests.fixtures.npusmi import ecc_with


def _port(dev, link="UP", net="Success"):
    ok = lambda v: ToolAnswer(("hccn_tool",), v)  # noqa: E731
    return HccnDevice(dev, ok(link), ok(net), ok(("10.0.0.1", "255.255.255.0")), ok("10.0.0.1"),
                      ok({"present": "present"}), ok((3,)))


def _snap(double=0, second_single=None, link="UP"):
    first = {(0, 0): EccSample(("x",), parse_ecc(ecc_with(single=2, double=double), 0, 0))}
    second = {} if second_single is None else {
        (0, 0): EccSample(("x",), parse_ecc(ecc_with(single=second_single, double=double), 0, 0))}
    return Snapshot(None, None, 0.0, None, "", npu_detail=NpuDetail(None, None, first, second),
                    hccn=HccnState(None, None, "hccn_tool", (_port(0), _port(1, link, "Fault"
                                                                              if link != "UP"
                                                                              else "Success"))))


def _samples(snap):
    out = {}
    for fam in text_string_to_metric_families(exposition(snap).decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_ecc_and_roce_series():
    got = _samples(_snap(second_single=5, link="DOWN"))
    key = ("ascend_doctor_npu_ecc_errors", (("bits", "single"), ("chip", "0"), ("npu", "0")))
    assert got[key] == 5.0, "the second sample of the run wins"
    assert got[("ascend_doctor_npu_ecc_isolated_pages", (("chip", "0"), ("npu", "0")))] == 0.0
    assert got[("ascend_doctor_npu_roce_link_up", (("device", "0"),))] == 1.0
    assert got[("ascend_doctor_npu_roce_link_up", (("device", "1"),))] == 0.0
    assert got[("ascend_doctor_npu_roce_net_healthy", (("device", "1"),))] == 0.0


def test_health_names_uncorrectable_ecc_and_down_ports():
    ok, reasons = health(_snap(double=1, link="DOWN"))
    assert not ok
    assert "npu 0 chip 0: 2 uncorrectable ECC errors" in reasons
    assert "npu device 1: RoCE link DOWN" in reasons
