"""Property tests for the hardware parsers: random and mutated real inputs (the fixtures of
tests/fixtures/npusmi and tests/fixtures/hccn, sysfs link files) give a value or a named
ParseError, never another exception."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ascend_doctor.errors import ParseError
from ascend_doctor.probes import hccn as hccn_probe
from ascend_doctor.probes.hccn import (parse_dscp, parse_gateway, parse_hccn_conf, parse_ip,
                                       parse_link, parse_net_health, parse_optical, parse_pfc)
from ascend_doctor.probes.npusmi import (parse_board, parse_health, parse_npu_smi_info,
                                         parse_usages)
from ascend_doctor.probes.npusmi_detail import parse_ecc, parse_npu_smi_map
from ascend_doctor.probes.pcie import parse_pci_link, parse_speed
from tests.fixtures import hccn as H
from tests.fixtures.capture import all_captures, read_capture
from tests.fixtures.npusmi import ECC_A2, MAP_310P, MAP_A2, MAP_A3, ecc_with

SAMPLES = [MAP_A2, MAP_A3, MAP_310P, ECC_A2, ecc_with(3, 1, 1), H.LINK_UP, H.LINK_DOWN,
           H.HEALTH_OK, H.HEALTH_FAULT, H.IP, H.GATEWAY, H.OPTICAL, H.OPTICAL_ABSENT, H.PFC,
           H.CONF_A2, "16.0 GT/s PCIe\n", "8\n"] + [
    read_capture(folder, path.name).text for folder, path in all_captures()]
NAMED = [parse_npu_smi_map, parse_link, parse_net_health, parse_ip, parse_gateway, parse_optical,
         parse_pfc, lambda t, s: parse_ecc(t, 0, 0, s), parse_dscp, hccn_probe.parse_speed,
         parse_health, parse_usages, lambda t, s: parse_board(t, 0, s), parse_npu_smi_info]


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(SAMPLES))
    ops = draw(st.lists(st.tuples(st.integers(0, max(len(text) - 1, 0)), st.integers(0, 40),
                                  st.text(max_size=12)), max_size=6))
    for pos, cut, ins in ops:
        text = text[:pos] + ins + text[pos + cut:]
    return text


@given(st.one_of(mutated(), st.text(max_size=400)))
def test_parsers_are_total(text):
    for parser in NAMED:
        try:
            parser(text, "fuzz")
        except ParseError as exc:
            assert exc.source == "fuzz" and exc.reason
    conf = parse_hccn_conf(text)  # never raises: bad lines are kept as data
    assert all(isinstance(d, int) for d in conf.devices)
    speed = parse_speed(text)
    assert speed is None or speed >= 0
    try:
        parse_pci_link("0000:c1:00.0", "0xd802", {"current_link_width": text,
                                                   "current_link_speed": text})
    except ParseError as exc:
        assert exc.reason


def test_a_map_whose_header_is_mangled_gives_no_row_from_misaligned_columns():
    """Found by the fuzzer on CI: a header with an extra column made a row's "Chip ID" a '-'."""
    text = ("\tNPU ID  0          Chip ID      Chip Logic ID   Chip Phy-ID   Chip Name\n"
            "\t0       2          -            -               0             Mcu\n"
            "\t0       0          0            0               0             Ascend910\n")
    m = parse_npu_smi_map(text, "fuzz")
    assert [(r.npu, r.chip) for r in m.rows] == [(0, 0)]
