"""The decisive line of a wrapper is the CANN line that says what failed, not the code's
header line ("EE9999: Inner Error!") printed before it (knowledge/events.py)."""

from __future__ import annotations

from ascend_doctor.knowledge import events


def _cause(text: str) -> str:
    lines = list(enumerate(text.strip("\n").splitlines(), 1))
    evs = events.events(lines)
    wrapped = [ev for ev in evs if events.WRAPPER.search(ev.lines[0].body)]
    assert wrapped, evs
    return wrapped[0].cause.body


def test_a_wrapper_defers_past_the_header_to_the_detail_of_the_same_code():
    log = """
[rank3]: RuntimeError: initialize:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:96 HCCL function error: HcclCommInitRootInfo(numRanks, &rootInfo, rank, &comm), error code is 4
[rank3]: [ERROR] 2025-06-01-09:12:44 (PID:77, Device:3, RankID:3) ERR02200 DIST call hccl api failed.
[rank3]: EI9999: Inner Error!
[rank3]: EI9999: [PID: 77] 2025-06-01-09:12:44.101.002 rank table file is invalid: device ip of rank 3 not found[FUNC:CheckRankTable][FILE:topoinfo_ranktableParser.cc][LINE:412]
"""
    assert "rank table file is invalid" in _cause(log)


def test_a_header_without_a_detail_line_stays_the_cause():
    log = """
RuntimeError: NPU function error: call aclnnMatmul failed, error code is 561103
EZ9999: Inner Error!
[INFO] 2025-06-01-09:12:44 something else
"""
    assert _cause(log).startswith("EZ9999: Inner Error")


def test_a_line_with_its_own_detail_is_not_a_header():
    log = """
RuntimeError: NPU function error: call aclnnFlashAttentionScore failed, error code is 561103
EZ9999: Inner Error! numHeads / numKvHeads = 8, MLA only support {32, 64, 128}
EZ9999: [PID: 1] unrelated follow-up
"""
    assert "MLA only support" in _cause(log)
