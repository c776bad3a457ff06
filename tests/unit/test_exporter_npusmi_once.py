"""The exporter runs npu-smi once per interval: the NPU series and the npu checks share one
collection. A stub npu-smi (a captured A2 table, vllm-ascend #152) logs every invocation."""

from __future__ import annotations

from collections import Counter

from prometheus_client.parser import text_string_to_metric_families

from ascend_doctor.cli import build_options
from ascend_doctor.cli_exporter import FAULT_SAMPLING_CHECKS, NPU_CAPTURE_CHECK, run_once
from ascend_doctor.exporter import exposition
from tests.fixtures.npusmi import A2, HEALTH_OK


def _stub(sysroot) -> str:
    sysroot.write("/opt/out/table.txt", A2)
    sysroot.write("/opt/out/health.txt", HEALTH_OK)
    real = sysroot.path("/opt/out")
    log = real / "calls.log"
    sysroot.script("/usr/local/bin/npu-smi",
                   f'echo "$*" >> {log}\n'
                   f'case "$*" in\n  "info") cat {real}/table.txt;;\n'
                   f'  "info -t health -i "*) cat {real}/health.txt;;\n'
                   '  "info -t board -i "*) printf "        Chip Name                      : 910B1\\n";;\n'
                   '  *) echo "unknown"; exit 2;;\nesac\n')
    return str(log)


def test_one_npu_smi_collection_per_run(sysroot) -> None:
    log = _stub(sysroot)
    options = build_options({"service_url": "http://127.0.0.1:9"})
    for n in (1, 2):
        snap = run_once(sysroot.host, options, FAULT_SAMPLING_CHECKS, 10.0, None, None)
        assert snap.report is not None, snap.error
        calls = Counter(open(log).read().splitlines())
        # two NPUs in the table: info once, health per chip once, board per card once, the
        # card map once and ECC per chip once (all zero here: no second sample) — per run
        assert calls == Counter({"info": n, "info -t health -i 0 -c 0": n,
                                 "info -t health -i 1 -c 0": n, "info -t board -i 0": n,
                                 "info -t board -i 1": n,
                                 "info -m": n, "info -t ecc -i 0 -c 0": n,
                                 "info -t ecc -i 1 -c 0": n}), calls
    ids = {r.check_id for r in snap.report.results}
    assert NPU_CAPTURE_CHECK not in ids and "npu.smi" in ids
    assert snap.npusmi is not None and len(snap.npusmi.info.chips) == 2
    fams = {f.name: f for f in text_string_to_metric_families(exposition(snap).decode())}
    temps = {(s.labels["npu"], s.value) for s in fams["ascend_doctor_npu_temperature_celsius"].samples}
    assert temps == {("0", 49.0), ("1", 51.0)}
    assert not any(s.labels.get("check") == NPU_CAPTURE_CHECK
                   for s in fams["ascend_doctor_check_status"].samples)
