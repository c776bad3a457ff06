"""Property tests: random and mutated real inputs give a value or a named ParseError."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ascend_doctor.errors import ParseError
from ascend_doctor.probes.buildinfo import parse_build_info
from ascend_doctor.probes.cann import (parse_driver_version_info, parse_firmware_version_info,
                                parse_nnal_version_info, parse_toolkit_install_info,
                                parse_version_cfg)
from ascend_doctor.probes.devices import parse_status_ids
from ascend_doctor.probes.npusmi import parse_npu_smi_info, parse_npu_smi_kv
from tests.fixtures.npusmi import A2, A3, COMMON, HEALTH_OK, P310B, P310P
from tests.fixtures.ascend import DRIVER, FIRMWARE, TOOLKIT_832, VERSION_CFG

SAMPLES = [A2, A3, P310P, P310B, HEALTH_OK, COMMON, DRIVER, FIRMWARE, TOOLKIT_832, VERSION_CFG]
PARSERS = [parse_npu_smi_info, parse_npu_smi_kv, parse_toolkit_install_info, parse_version_cfg,
           parse_driver_version_info, parse_firmware_version_info, parse_nnal_version_info,
           parse_build_info]


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(SAMPLES))
    ops = draw(st.lists(st.tuples(st.integers(0, max(len(text) - 1, 0)), st.integers(0, 40),
                                  st.text(max_size=12)), max_size=6))
    for pos, cut, ins in ops:
        text = text[:pos] + ins + text[pos + cut:]
    if draw(st.booleans()):
        text = text[:draw(st.integers(0, len(text)))]  # truncated
    return text


def _call(parser, text):
    try:
        return parser(text, "fuzz")
    except ParseError as exc:
        assert exc.source == "fuzz" and exc.reason
        return None


@given(mutated())
def test_mutated_real_inputs(text):
    for parser in PARSERS:
        _call(parser, text)
    parse_status_ids(text)


@given(st.text())
def test_random_text(text):
    for parser in PARSERS:
        _call(parser, text)


@given(st.lists(st.sampled_from(A2.splitlines() + A3.splitlines() + P310P.splitlines()),
                max_size=40))
def test_shuffled_table_lines(lines):
    info = _call(parse_npu_smi_info, "\n".join(lines))
    if info is not None:
        for c in info.chips:
            assert c.hbm_used_mb is None or c.hbm_used_mb >= 0
