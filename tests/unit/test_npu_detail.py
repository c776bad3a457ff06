"""``npu-smi info -m`` (A2, A3 two dies per card, 310P Duo), ``npu-smi info -t ecc`` and the
rules over them: documented alarm codes named with their meaning, uncorrectable and rising
ECC counts, the per-NPU table's new cells and marks, and every failure mode of the
sub-commands (missing, failing, hanging, another language) as a named skip or error."""

from __future__ import annotations

import pytest

from ascend_doctor.checks.npu import chip_table, ecc, health
from ascend_doctor.engine import RunConfig, run
from ascend_doctor.errors import ParseError
from ascend_doctor.model import Status
from ascend_doctor.probes.kbfact import gather_knowledge
from ascend_doctor.probes.npusmi import parse_npu_smi_info
from ascend_doctor.probes.npusmi_detail import (EccSample, NpuDetail, parse_ecc,
                                                parse_npu_smi_map)
from tests.fixtures.npusmi import (A2, A3, ECC_A2, HEALTH_CHIP, MAP_310P, MAP_A2, MAP_A3,
                                   ecc_with, smi_stub)

KNOW = gather_knowledge()


def test_map_layouts():
    a2 = parse_npu_smi_map(MAP_A2)
    assert [(r.npu, r.chip, r.logic_id, r.name) for r in a2.rows] == [
        (0, 0, 0, "Ascend 910B3"), (0, 1, None, "Mcu"), (1, 0, 1, "Ascend 910B3"),
        (1, 1, None, "Mcu")]
    a3 = parse_npu_smi_map(MAP_A3)
    assert [(r.npu, r.chip, r.logic_id, r.phy_id) for r in a3.rows if r.logic_id is not None] \
        == [(0, 0, 0, 0), (0, 1, 1, 1), (1, 0, 2, 2), (1, 1, 3, 3)]
    assert a3.logic_of(1, 1) == 3 and a3.logic_of(0, 2) is None
    p = parse_npu_smi_map(MAP_310P)
    assert [(r.chip, r.logic_id) for r in p.rows] == [(0, 0), (1, 1), (2, None)]


def test_map_in_another_language_is_a_parse_error():
    with pytest.raises(ParseError):
        parse_npu_smi_map("        NPU编号      芯片编号      芯片逻辑编号\n        0   0   0\n")


def test_ecc_counters():
    c = parse_ecc(ECC_A2, 0, 0)
    assert c.counters[("HBM", "single", "count")] == 0 and ("DDR", "single", "count") not in c.counters
    assert not c.any_nonzero
    bad = parse_ecc(ecc_with(single=12, double=2, isolated=1), 3, 1)
    assert (bad.npu, bad.chip, bad.single, bad.double) == (3, 1, 12, 4)
    assert bad.get("HBM", "double", "isolated") == 1
    with pytest.raises(ParseError):
        parse_ecc("        Health Status : OK\n", 0, 0)


def _detail(first: dict, second: dict | None = None) -> NpuDetail:
    def s(text):
        return EccSample(("npu-smi",), parse_ecc(text, 0, 0))
    return NpuDetail(parse_npu_smi_map(MAP_A2), None,
                     {k: EccSample(("npu-smi", "info", "-t", "ecc", "-i", str(k[0]), "-c",
                                    str(k[1])), parse_ecc(v, *k)) for k, v in first.items()},
                     {k: EccSample(("npu-smi",), parse_ecc(v, *k)) for k, v in (second or {}).items()},
                     2.0)


def test_ecc_rules():
    (p,) = ecc(_detail({(0, 0): ECC_A2, (1, 0): ECC_A2}))
    assert p.status == Status.PASS and "2 chip(s)" in p.message
    fs = list(ecc(_detail({(0, 0): ECC_A2, (1, 0): ecc_with(double=1, isolated=1)})))
    (f,) = [f for f in fs if f.status != Status.PASS]
    assert f.status == Status.FAIL and f.subject == "NPU 1 chip 0" and "HBM" in f.message
    assert f.cause == "npu.ecc:1/0" and "ASC-HW-003" in f.kb
    rising = _detail({(0, 0): ecc_with(single=5)}, {(0, 0): ecc_with(single=9)})
    (w,) = list(ecc(rising))
    assert w.status == Status.WARN and "from 5 to 9" in w.message
    steady = _detail({(0, 0): ecc_with(single=5)}, {(0, 0): ecc_with(single=5)})
    fs = list(ecc(steady))
    assert [f.status for f in fs] == [Status.INFO, Status.PASS]


def test_ecc_unsupported_everywhere_is_a_skip_not_a_pass():
    d = NpuDetail(None, "exit 2", {(0, 0): EccSample(("npu-smi",), failure="exited 2: This "
                                                     "device does not support querying ecc")})
    (f,) = ecc(d)
    assert f.status == Status.SKIP and "does not support" in f.message


def test_alarm_code_is_named_with_its_meaning():
    from ascend_doctor.host import CommandResult
    from ascend_doctor.probes.npusmi import NpuSmi, SubCommand, parse_health
    info = parse_npu_smi_info(A2)
    sub = SubCommand(("npu-smi", "info", "-t", "health", "-i", "1", "-c", "0"), parse_health(
        HEALTH_CHIP.replace("80E21007", "0x80E01809")))
    smi = NpuSmi(("npu-smi", "info"), CommandResult(("npu-smi", "info"), 0, b"", b"", 0.1),
                 info, None, {(1, 0): sub})
    (f,) = [f for f in health(smi, KNOW) if f.status != Status.PASS]
    assert f.status == Status.WARN and "0x80E01809" in f.message
    assert "multi-bit ECC errors during the HBM patrol" in f.message
    assert f.kb[0] == "ASC-HW-001" and "ASC-NPU-001" in f.kb
    # an undocumented code still names npu-smi's own Error Information
    sub2 = SubCommand(sub.argv, parse_health(HEALTH_CHIP.replace("80E21007", "81234567")))
    smi2 = NpuSmi(smi.argv, smi.result, info, None, {(1, 0): sub2})
    (g,) = [f for f in health(smi2, KNOW) if f.status != Status.PASS]
    assert "dmp_daemon node status detection abnormal" in g.message
    assert list(g.kb) == ["ASC-NPU-001"]


def test_chip_table_has_logic_ids_ecc_and_marks():
    info = parse_npu_smi_info(A3)
    d = NpuDetail(parse_npu_smi_map(MAP_A3), None,
                  {(0, 1): EccSample(("x",), parse_ecc(ecc_with(double=2), 0, 1))})
    rows = chip_table(info, d)
    r = {(x["npu"], x["chip"]): x for x in rows}
    assert r[(1, 1)]["logic_id"] == 3 and r[(0, 1)]["ecc_double"] == 4
    assert r[(0, 1)]["bad"] == ["ecc"] and r[(0, 0)]["bad"] == [] and r[(0, 0)]["ecc_double"] is None


def ecc_script(root, texts: list[str], table: str = A2, map_text: str = MAP_A2):
    """npu-smi whose successive `-t ecc` answers are ``texts`` (the last one repeats)."""
    for i, t in enumerate(texts):
        root.write(f"/opt/out/ecc{i}.txt", t)
    root.write("/opt/out/table.txt", table)
    root.write("/opt/out/map.txt", map_text)
    real = root.path("/opt/out")
    last = len(texts) - 1
    smi_stub(root, table, extra=(
        f'  "info -m") cat {real}/map.txt;;\n'
        f'  "info -t ecc -i "*) n=$(cat {real}/n 2>/dev/null || echo 0); '
        f'cat {real}/ecc$(( n > {last} ? {last} : n )).txt; echo $((n+1)) > {real}/n;;\n'))


def _smi_pass(res):
    (f,) = [f for f in res["npu.smi"].findings if f.status == Status.PASS]
    return f


def _run(root, only=("npu.ecc", "npu.smi")):
    r = run(root.host(), config=RunConfig(only=only))
    return {x.check_id: x for x in r.results}


def test_ecc_rising_between_two_samples_in_one_run(sysroot):
    # A2 table: two NPUs; samples: npu0 #1, npu1 #1 (nonzero), then both again
    ecc_script(sysroot, [ecc_with(single=3), ecc_with(single=3), ecc_with(single=3),
                         ecc_with(single=7)])
    res = _run(sysroot)
    ws = [f for f in res["npu.ecc"].findings if f.status == Status.WARN]
    assert len(ws) == 1 and ws[0].subject == "NPU 1 chip 0" and "from 3 to 7" in ws[0].message
    rows = _smi_pass(res).evidence["chips"]
    assert rows[1]["bad"] == ["ecc"] and rows[0]["logic_id"] == 0 and rows[1]["logic_id"] == 1
    assert _smi_pass(res).evidence["map_error"] is None


def test_map_failure_is_named_not_silent(sysroot):
    ecc_script(sysroot, [ECC_A2], map_text="        NPU编号   芯片编号\n")
    f = _smi_pass(_run(sysroot, ("npu.smi",)))
    assert "Chip Logic ID" in f.evidence["map_error"]
    assert all(r["logic_id"] is None for r in f.evidence["chips"])


def test_ecc_sub_command_failing_or_foreign_is_named(sysroot):
    sysroot.write("/opt/out/table.txt", A2)
    real = sysroot.path("/opt/out")
    sysroot.script("/usr/local/bin/npu-smi",
                   f'case "$*" in\n  "info") cat {real}/table.txt;;\n'
                   '  "info -t ecc -i 0 -c 0") echo "        HBM单比特错误数 : 0";;\n'
                   '  *) echo "Usage: npu-smi info"; exit 3;;\nesac\n')
    res = _run(sysroot, ("npu.ecc",))
    fs = res["npu.ecc"].findings
    (f,) = fs  # neither chip answered in the expected language/format: a named skip
    assert f.status == Status.SKIP and "-i 0 -c 0" in f.message and "English key" in f.message
    # one chip answers, the other fails: the failure is a warn naming its command
    sysroot.write("/opt/out/ecc.txt", ECC_A2)
    sysroot.script("/usr/local/bin/npu-smi",
                   f'case "$*" in\n  "info") cat {real}/table.txt;;\n'
                   f'  "info -t ecc -i 0 -c 0") cat {real}/ecc.txt;;\n'
                   '  *) echo "Usage: npu-smi info"; exit 3;;\nesac\n')
    fs = _run(sysroot, ("npu.ecc",))["npu.ecc"].findings
    assert [f.status for f in fs] == [Status.WARN, Status.PASS]
    assert "-i 1 -c 0" in fs[0].subject and "exited 3" in fs[0].message


def test_ecc_hang_is_an_error(sysroot, monkeypatch):
    import ascend_doctor.probes.npusmi_detail as det
    monkeypatch.setattr(det, "SMI_TIMEOUT_S", 1.0)
    sysroot.write("/opt/out/table.txt", A2)
    real = sysroot.path("/opt/out")
    sysroot.script("/usr/local/bin/npu-smi",
                   f'case "$*" in\n  "info") cat {real}/table.txt;;\n'
                   '  "info -t ecc -i "*) exec sleep 100;;\n'
                   '  *) echo "unknown"; exit 2;;\nesac\n')
    res = _run(sysroot, ("npu.ecc",))
    assert [f.status for f in res["npu.ecc"].findings] == [Status.ERROR]


def test_the_report_table_marks_the_chip_whose_ecc_is_bad(sysroot):
    import io

    from ascend_doctor.report.text import render
    ecc_script(sysroot, [ECC_A2, ecc_with(double=2, isolated=1)])
    rep = run(sysroot.host(), config=RunConfig(only=("npu.smi", "npu.ecc")))
    buf = io.StringIO()
    render(rep, buf, lang="en")
    lines = buf.getvalue().splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.split()[:2] == ["NPU", "chip"])
    npu0, npu1 = lines[header + 1], lines[header + 2]
    assert "ECC" not in npu0
    # the glyph of the failing npu.ecc finding (ASCII on a non-UTF-8 stream) on the cell and row
    assert "MB (32 %) ECC [x]" in npu1 and npu1.split()[0] == "[x]"
