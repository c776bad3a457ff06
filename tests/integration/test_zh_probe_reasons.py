"""Issue 14 item 6: a probe's skip reason, a refused fleet bundle and a bundle path that does
not exist read in Chinese with ``--lang zh`` (through the console script, on a real sysroot
and real tar files); the English stays as it was.

These need the zh catalog entries of the new msgids (zh-h14d.json until they are merged into
the .po)."""

from __future__ import annotations

import gzip

import pytest

from tests.conftest import Sysroot, run_cli
from tests.integration.test_zh_report import english_runs, owners, untranslated

# checks whose skip text is built only from probe templates (no text from elsewhere)
PROBE_SKIPS = ("dns.capture", "msprof.export", "libacl.maps", "leak.npu-memory",
               "block_tables.invariants")


@pytest.fixture(scope="module")
def driver_only(tmp_path_factory) -> Sysroot:
    """A host with an Ascend driver and nothing else: no service, no capture, no profile."""
    s = Sysroot(tmp_path_factory.mktemp("zhroot"))
    s.write("/usr/local/Ascend/driver/version.info",
            "Version=24.1.rc3\nInnerversion=V100R001C23SPC001B100\n")
    s.write("/etc/ld.so.conf", "/usr/lib\n")
    return s


def test_probe_skip_reasons_in_english_are_unchanged(driver_only):
    r = run_cli("check", "--root", str(driver_only), "-v", "--lang", "en")
    out = " ".join(r.stdout.split())
    assert "msprof.export: missing source: --profile (no profiler output given (pass --profile " \
           "DIR))" in out, r.stdout[-3000:]
    assert "dns.capture: missing source: --pcap / --sniff (no capture given (pass --pcap FILE " \
           "or --sniff SECONDS))" in out


def test_probe_skip_reasons_in_zh_have_no_english_sentence(driver_only):
    r = run_cli("check", "--root", str(driver_only), "-v", "--lang", "zh")
    lines = r.stdout.splitlines()
    mine = [ln for ln, o in zip(lines, owners(lines)) if o in PROBE_SKIPS]
    assert len(mine) >= len(PROBE_SKIPS), r.stdout[-3000:]
    assert untranslated("\n".join(mine)) == []
    assert "未给出性能分析输出" in r.stdout


def test_fleet_refusal_and_missing_path_in_zh(tmp_path):
    junk = tmp_path / "node-99.tar.gz"
    junk.write_bytes(gzip.compress(b"not a tar at all\n" * 10))
    r = run_cli("fleet", str(junk), env={"ASCEND_DOCTOR_LANG": "zh"})
    refused = [ln for ln in r.stdout.splitlines() if "node-99.tar.gz" in ln]
    assert refused and all(english_runs(ln) == [] for ln in refused), r.stdout
    assert "不是可读的诊断包" in r.stdout
    gone = tmp_path / "nope.tar.gz"
    r = run_cli("fleet", str(gone), env={"ASCEND_DOCTOR_LANG": "zh"})
    assert r.returncode == 2 and str(gone) in r.stderr
    assert english_runs(r.stderr) == [] and "没有这个诊断包文件或目录" in r.stderr
    en = run_cli("fleet", str(gone), env={"ASCEND_DOCTOR_LANG": "en"})
    assert f"{gone}: no such bundle file or directory" in en.stderr
