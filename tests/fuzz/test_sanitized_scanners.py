"""The two C scanners (doctor/_opscan.c, doctor/_dnsscan.c) under AddressSanitizer and
UBSan, in CI: each is rebuilt with ``-fsanitize=address,undefined`` and the differential
suites (tests/unit/test_opscan.py, test_dnsscan.py: corner cases, every cut of a read,
hypothesis mutations of real exports and captures, the invalid-UTF-8 shapes of issue 34)
run against the sanitized build in a child interpreter with libasan preloaded. Any report
(heap overflow, use after free, signed overflow, misaligned load...) fails the test.

ASCEND_DOCTOR_FUZZ=long runs the long profile here too (bench/fuzz_long.sh)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCANNERS = ("_opscan", "_dnsscan")

DRIVER = r"""
import importlib.util, sys
for name, path in zip(sys.argv[1::2], sys.argv[2::2]):
    if name == "--":
        break
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules["ascend_doctor." + name] = mod  # what native.load imports
import pytest
args = sys.argv[sys.argv.index("--") + 1:]
rc = pytest.main(args)
for name in sys.argv[1::2]:  # the suites ran against the sanitized builds, not the shipped ones
    if name == "--":
        break
    print("sanitized:", sys.modules["ascend_doctor." + name].__file__)
sys.exit(rc)
"""


def _runtime(name: str) -> str | None:
    gcc = shutil.which("gcc")
    if gcc is None:
        return None
    out = subprocess.run([gcc, f"-print-file-name={name}"], capture_output=True, text=True)
    path = out.stdout.strip()
    return path if os.path.isabs(path) and os.path.exists(path) else None


def test_c_scanners_under_asan_and_ubsan(tmp_path):
    libasan = _runtime("libasan.so")
    if libasan is None or _runtime("libubsan.so") is None:
        pytest.skip("gcc with libasan/libubsan is needed for the sanitizer run")
    inc = sysconfig.get_paths()["include"]
    built = []
    for name in SCANNERS:
        so = tmp_path / f"{name}.so"
        r = subprocess.run(["gcc", "-shared", "-fPIC", "-g", "-O1", "-fno-omit-frame-pointer",
                            "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                            "-ffp-contract=off", f"-I{inc}", str(REPO / "doctor" / f"{name}.c"),
                            "-o", str(so)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        built += [name, str(so)]
    env = {**os.environ, "LD_PRELOAD": libasan,
           "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:halt_on_error=1:exitcode=86",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=87"}
    r = subprocess.run([sys.executable, "-c", DRIVER, *built, "--", "-q", "-x",
                        "-p", "no:cacheprovider", "-o", "addopts=",
                        "tests/unit/test_opscan.py", "tests/unit/test_dnsscan.py"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    report = r.stdout[-4000:] + r.stderr[-4000:]
    assert "AddressSanitizer" not in r.stderr and "runtime error:" not in r.stderr, report
    assert r.returncode == 0, report
    assert " passed" in r.stdout, report
    for name in SCANNERS:
        assert f"sanitized: {tmp_path / name}.so" in r.stdout, report
