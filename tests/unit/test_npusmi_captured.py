"""npu-smi parsers on real outputs, each cited in its file's header
(tests/fixtures/npusmi/captured/): the A2 table of MindCluster's fault-diagnosis guide, A3
tables (two dies per card) pasted in vllm-ascend and UCM issues, the wider 26.0 layout, a
310P Duo host, and the ``-m``/``-t ecc|board|usages|health`` views of a 910A collection.
Then every way a sub-command can go wrong (missing, failing, hanging, another language)
through a sysroot whose npu-smi is a shell script: a named skip, warn or error, never a pass
that hides it."""

from __future__ import annotations

import pytest

from ascend_doctor.engine import RunConfig, run
from ascend_doctor.errors import ParseError
from ascend_doctor.model import Status
from ascend_doctor.probes.npusmi import (parse_board, parse_health, parse_npu_smi_info,
                                         parse_usages)
from ascend_doctor.probes.npusmi_detail import parse_ecc, parse_npu_smi_map
from tests.fixtures.capture import all_captures, read_capture
from tests.fixtures.npusmi import (A2, BOARD_CARD, BOARD_CHIP, BOARD_INVALID, ECC_CARD,
                                   HEALTH_ALARM, HEALTH_OK, INFO_310P, INFO_A2_DOC, INFO_A3_2082,
                                   INFO_A3_748, INFO_A3_WIDE, MAP_910A, USAGES, smi_stub)


@pytest.mark.parametrize("folder,path", all_captures(), ids=lambda x: getattr(x, "name", x))
def test_every_capture_cites_a_public_source(folder, path):
    cap = read_capture(folder, path.name)
    assert cap.source.startswith("https://"), path
    assert cap.what and cap.text.strip()
    assert ("rendered" in path.name) == ("rendered from" in cap.what), path


def _rows(text):
    return [(c.npu, c.chip, c.phy_id, c.health, c.power_w, c.temp_c, c.bus_id,
             c.device_used_total) for c in parse_npu_smi_info(text).chips]


def test_a2_table_of_the_guide():
    info = parse_npu_smi_info(INFO_A2_DOC)
    assert (info.tool_version, info.driver_version) == ("24.1.rc1", "24.1.rc1")
    assert _rows(INFO_A2_DOC) == [(7, 0, None, "OK", 67.0, 44, "0000:3D:00.0", (0, 32768))]
    (c,) = info.chips
    assert (c.mem_used_mb, c.mem_total_mb) == (2505, 15567)  # DDR next to the HBM column
    assert info.processes == () and info.idle_npus == (0, 7) and info.has_process_section


def test_a3_tables_two_dies_per_card_the_second_without_power():
    assert _rows(INFO_A3_2082) == [
        (0, 0, 0, "OK", 178.4, 36, "0000:9D:00.0", (3412, 65536)),
        (0, 1, 1, "OK", None, 36, "0000:9F:00.0", (3196, 65536)),
        (1, 0, 2, "OK", 188.5, 36, "0000:99:00.0", (3414, 65536)),
        (1, 1, 3, "OK", None, 36, "0000:9B:00.0", (3193, 65536))]
    info = parse_npu_smi_info(INFO_A3_748)
    assert info.tool_version == "25.2.1" and info.npu_ids == [0, 1]
    assert [(c.npu, c.chip, c.phy_id) for c in info.chips] == [(0, 0, 0), (0, 1, 1), (1, 0, 2)]


def test_the_wider_26_0_layout_and_its_container_pid_column():
    info = parse_npu_smi_info(INFO_A3_WIDE)
    assert info.tool_version == "26.0.rc2"
    assert _rows(INFO_A3_WIDE)[-1] == (7, 1, 15, "OK", None, 35, "0000:83:00.0", (31877, 65536))
    (p,) = info.processes
    assert (p.npu, p.chip, p.pid, p.name, p.mem_mb) == (0, 0, 632268, "python3.1", 197)
    assert info.idle_npus == (1,)


def test_310p_duo_two_chips_no_hbm_column_power_na():
    assert _rows(INFO_310P) == [(1, 0, 0, "OK", None, 59, "0000:01:00.0", (1397, 44280)),
                                (1, 1, 1, "OK", None, 58, "0000:01:00.0", (1520, 43693))]


def test_map_of_a_910a_host_without_mcu_rows():
    rows = parse_npu_smi_map(MAP_910A).rows
    assert [(r.npu, r.chip, r.logic_id, r.name) for r in rows] == [
        (i, 0, i, "Ascend 910A") for i in range(8)]


def test_card_level_ecc_view_of_the_guide():
    c = parse_ecc(ECC_CARD, 1, 0)
    assert c.get("HBM", "double", "count") == 0 and c.get("DDR", "single", "isolated") == 0
    assert len(c.counters) == 12 and not c.any_nonzero


def test_health_alarm_with_three_codes_and_continuation_lines():
    h = parse_health(HEALTH_ALARM)
    assert h.status == "Alarm" and h.codes == ("A4025021", "8C03A000", "8C084E00")
    assert h.infos[0] == "ascend_monitor adda heart beat lost error"
    assert h.infos[2].startswith("node type=adda, sensor type=Heartbeat Sensor")
    ok = parse_health(HEALTH_OK)
    assert (ok.status, ok.codes, ok.infos) == ("OK", (), ())


def test_board_views_and_usages():
    b = parse_board(BOARD_CARD, 0)
    assert (b.software_version, b.firmware_version, b.compatibility, b.bus, b.chip_count) == (
        "23.0.5", "7.1.0.7.220", "OK", "0000:61:00.0", 1)
    chip = parse_board(BOARD_CHIP, 0)
    assert chip.chip_name == "910A" and chip.firmware_version == "7.1.0.7.220"
    assert chip.software_version is None
    u = parse_usages(USAGES)
    assert u.get("HBM Capacity(MB)") == 31129 and u.get("DDR Usage Rate(%)") == 6
    assert u.get("NPU ID") is None


@pytest.mark.parametrize("parse,text", [
    (parse_board, BOARD_INVALID), (parse_health, BOARD_INVALID), (parse_usages, BOARD_INVALID),
    (parse_health, "\t健康状态                       : 正常\n\t错误码                         : NA\n"),
    (parse_board, "\t固件版本                       : 7.1.0.7.220\n"),
    (parse_health, "\tHealth Status                  : \n"), (parse_usages, HEALTH_OK)])
def test_usage_errors_and_other_languages_are_named_parse_errors(parse, text):
    with pytest.raises(ParseError) as e:
        parse(text, 0) if parse is parse_board else parse(text)
    assert e.value.reason


# -- whole runs: every failure mode is named --------------------------------------------
def _run(root, only=("npu.smi", "npu.health")):
    rep = run(root.host(), config=RunConfig(only=only))
    return {x.check_id: x for x in rep.results}


def test_a3_node_asks_health_per_die_and_board_per_card(sysroot):
    log = sysroot.path("/opt/out/calls.log")
    smi_stub(sysroot, INFO_A3_2082)
    real = sysroot.path("/usr/local/bin/npu-smi")
    body = real.read_text()
    real.write_text(body.replace('case "$*"', f'echo "$*" >> {log}\ncase "$*"', 1))
    res = _run(sysroot)
    calls = log.read_text().splitlines()
    assert [c for c in calls if "health" in c] == [
        f"info -t health -i {n} -c {c}" for n in (0, 1) for c in (0, 1)]
    assert [c for c in calls if "board" in c] == ["info -t board -i 0", "info -t board -i 1"]
    assert res["npu.health"].status == Status.PASS and res["npu.smi"].status == Status.PASS
    ev = [f for f in res["npu.smi"].findings if f.status == Status.PASS][0].evidence
    assert ev["boards"][1]["firmware"] == "7.1.0.7.220" and len(ev["chips"]) == 4


def test_one_die_in_alarm_is_named_with_its_codes(sysroot):
    ok = sysroot.path("/opt/out")
    sysroot.write("/opt/out/alarm.txt", HEALTH_ALARM)
    smi_stub(sysroot, INFO_A3_2082,
             extra=f'  "info -t health -i 1 -c 1") cat {ok}/alarm.txt;;\n')
    # the specific arm must win over the generic one: put it first
    script = sysroot.path("/usr/local/bin/npu-smi")
    lines = script.read_text().splitlines(keepends=True)
    arm = [ln for ln in lines if '"info -t health -i 1 -c 1"' in ln]
    rest = [ln for ln in lines if ln not in arm]
    script.write_text("".join(rest[:2] + arm + rest[2:]))
    res = _run(sysroot, ("npu.health", "npu.smi"))
    (f,) = [f for f in res["npu.health"].findings if f.status != Status.PASS]
    assert f.status == Status.FAIL and f.subject == "NPU 1 chip 1"
    assert "A4025021, 8C03A000, 8C084E00" in f.message
    row = [r for r in [g for g in res["npu.smi"].findings if g.status == Status.PASS][0]
           .evidence["chips"] if (r["npu"], r["chip"]) == (1, 1)][0]
    assert row["health_detail"] == "Alarm" and "health" in row["bad"]


@pytest.mark.parametrize("answer,needle", [
    ('echo "Invalid card id."; echo "Error parameter of -i"; exit 2', "exited 2"),
    ('printf "\\t健康状态                       : 正常\\n"', "English key"),
    ('exit 0', "no `Key : value` line")])
def test_health_query_failing_or_foreign_is_a_named_warn_not_a_pass(sysroot, answer, needle):
    smi_stub(sysroot, A2)
    script = sysroot.path("/usr/local/bin/npu-smi")
    script.write_text(script.read_text().replace(
        f'cat {sysroot.path("/opt/out")}/health.txt', answer))
    res = _run(sysroot, ("npu.health",))
    warns = [f for f in res["npu.health"].findings if f.status == Status.WARN]
    assert len(warns) == 2 and all(needle in w.message for w in warns), warns
    assert "-t health -i 0 -c 0" in warns[0].message


def test_board_failing_is_named_and_firmware_drift_warns(sysroot):
    smi_stub(sysroot, A2, board=BOARD_INVALID)
    script = sysroot.path("/usr/local/bin/npu-smi")
    script.write_text(script.read_text().replace(
        f'cat {sysroot.path("/opt/out")}/board.txt', f'cat {sysroot.path("/opt/out")}/board.txt'
        '; exit 2'))
    fs = _run(sysroot, ("npu.smi",))["npu.smi"].findings
    assert [f.status for f in fs] == [Status.WARN, Status.WARN, Status.PASS]
    assert "-t board -i 0" in fs[0].message and "exited 2" in fs[0].message
    # card 1 on other firmware than card 0; card 1 also reported incompatible
    sysroot.write("/opt/out/board1.txt", BOARD_CARD.replace("7.1.0.7.220", "7.1.0.11.220")
                  .replace("Compatibility                  : OK",
                           "Compatibility                  : Not Compatible"))
    smi_stub(sysroot, A2, extra=f'  "info -t board -i 1") cat {sysroot.path("/opt/out")}/board1.txt;;\n')
    lines = script.read_text().splitlines(keepends=True)
    arm = [ln for ln in lines if '"info -t board -i 1"' in ln]
    rest = [ln for ln in lines if ln not in arm]
    script.write_text("".join(rest[:2] + arm + rest[2:]))
    fs = _run(sysroot, ("npu.smi",))["npu.smi"].findings
    assert [f.status for f in fs] == [Status.FAIL, Status.WARN, Status.PASS]
    assert "Not Compatible" in fs[0].message and fs[0].kb == ("ASC-HW-008",)
    assert "NPU 1 7.1.0.11.220" in fs[1].message and fs[1].subject == "NPU 1"


def test_health_query_hanging_is_an_error_and_stops_the_queries(sysroot, monkeypatch):
    import ascend_doctor.probes.npusmi as smi_mod
    monkeypatch.setattr(smi_mod, "SMI_TIMEOUT_S", 1.0)
    smi_stub(sysroot, A2)
    script = sysroot.path("/usr/local/bin/npu-smi")
    script.write_text(script.read_text().replace(
        f'cat {sysroot.path("/opt/out")}/health.txt', "exec sleep 100"))
    res = _run(sysroot, ("npu.smi",))
    fs = res["npu.smi"].findings
    assert fs[0].status == Status.ERROR and "-t health -i 0 -c 0" in fs[0].message


def test_a_table_in_another_language_is_an_error_not_a_verdict(sysroot):
    zh = (INFO_A2_DOC.replace("Version:", "版本:").replace("| OK ", "| 正常 ")
          .replace("Health", "健康状态"))
    with pytest.raises(ParseError) as e:
        parse_npu_smi_info(zh)
    assert "正常" in str(e.value.reason)
    smi_stub(sysroot, zh)
    res = _run(sysroot, ("npu.smi", "npu.health", "npu.temperature"))
    assert res["npu.smi"].status == Status.ERROR
    assert "正常" in res["npu.smi"].findings[0].message
    assert res["npu.health"].status == Status.SKIP and res["npu.temperature"].status == Status.SKIP


def test_missing_npu_smi_skips_every_npu_check_naming_it(sysroot):
    res = _run(sysroot, ("npu.smi", "npu.health", "npu.ecc"))
    assert {r.status for r in res.values()} == {Status.SKIP}
    assert all("npu-smi" in r.findings[0].message for r in res.values())


def test_a3_map_in_npu_smi_s_own_layout_two_dies_and_an_mcu_per_card():
    m = parse_npu_smi_map(read_capture("npusmi", "map-a3-rendered.txt").text)
    assert [(r.npu, r.chip, r.logic_id, r.phy_id, r.name) for r in m.rows] == [
        (0, 0, 0, 0, "Ascend910"), (0, 1, 1, 1, "Ascend910"), (0, 2, None, None, "Mcu"),
        (1, 0, 2, 2, "Ascend910"), (1, 1, 3, 3, "Ascend910"), (1, 2, None, None, "Mcu")]
    assert m.logic_of(1, 1) == 3
