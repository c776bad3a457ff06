"""The C DNS scanner under AddressSanitizer and UndefinedBehaviorSanitizer: doctor/_dnsscan.c
is compiled with both into a tmp dir and tests/unit/test_dnsscan.py (classic pcap and
pcapng: real-tool and generated captures, every truncation, corrupt blocks, table bounds,
hypothesis mutations) runs against that build in a child process. Any report fails."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "doctor" / "_dnsscan.c"

CHILD = """
import importlib.machinery, importlib.util, sys
spec = importlib.util.spec_from_file_location(
    "ascend_doctor._dnsscan", sys.argv[1],
    loader=importlib.machinery.ExtensionFileLoader("ascend_doctor._dnsscan", sys.argv[1]))
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
sys.modules["ascend_doctor._dnsscan"] = mod
import ascend_doctor
ascend_doctor._dnsscan = mod
import ascend_doctor.native as native
assert native.load("_dnsscan", "ASCEND_DOCTOR_PCAP_ENGINE") is mod
print("sanitized scanner:", mod.__file__, flush=True)
import pytest
sys.exit(pytest.main(["-x", "-p", "no:cacheprovider", sys.argv[2]]))
"""


def _runtime(gcc: str) -> str | None:
    out = subprocess.run([gcc, "-print-file-name=libasan.so"], capture_output=True,
                         text=True).stdout.strip()
    return out if os.path.isabs(out) and os.path.exists(out) else None


@pytest.mark.slow  # about a minute of CPU: the whole differential suite, instrumented
def test_the_scanner_suite_under_asan_and_ubsan(tmp_path):
    gcc = shutil.which("gcc")
    if gcc is None or _runtime(gcc) is None:
        pytest.skip("gcc with libasan is needed (installed by .ci/run)")
    so = tmp_path / ("_dnsscan" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-g", "-fno-omit-frame-pointer",
                    "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
                    "-ffp-contract=off", f"-I{sysconfig.get_paths()['include']}",
                    str(SOURCE), "-o", str(so)], check=True, capture_output=True, timeout=300)
    env = {**os.environ, "LD_PRELOAD": _runtime(gcc),
           "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1",
           "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}
    env.pop("ASCEND_DOCTOR_PCAP_ENGINE", None)
    r = subprocess.run([sys.executable, "-c", CHILD, str(so),
                        str(ROOT / "tests" / "unit" / "test_dnsscan.py")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=1500)
    report = r.stdout[-3000:] + r.stderr[-3000:]
    assert r.returncode == 0, report
    assert "ERROR: AddressSanitizer" not in r.stderr and "runtime error" not in r.stderr, report
    assert f"sanitized scanner: {so}" in r.stdout and " passed" in r.stdout, report
