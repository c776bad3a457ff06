"""On a venv holding the real torch_npu 2.14.0 and vllm_ascend 0.23.0
wheels (beside torch 2.13.0 CPU) and no CANN, one `ascend-doctor check --json` names the
missing Ascend libraries per ELF, the broken pins and the import error."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def torch_npu_venv():
    from tests.torchenv import build
    return build()


@pytest.mark.slow
def test_one_run_names_libraries_pins_and_import_error(torch_npu_venv, cli):
    python, kind = torch_npu_venv
    if kind != "torch+torch_npu":
        pytest.skip(f"torch could not be installed in the test venv ({kind})")
    r = cli("check", "--json", "--python", str(python),
            "--only", "libacl.resolve,versions.pins,torch_npu.import", timeout=600)
    assert r.returncode == 1, r.stderr
    checks = {c["id"]: c for c in json.loads(r.stdout)["checks"]}

    missing = {f["evidence"]["library"]: f["evidence"]["needed_by"]
               for f in checks["libacl.resolve"]["findings"] if f["status"] == "fail"}
    assert {"libascendcl.so", "libhccl.so"} <= set(missing)
    assert any(p.endswith("torch_npu/lib/libtorch_npu.so") for p in missing["libhccl.so"])
    assert any("vllm_ascend_C" in p for p in missing["libascendcl.so"])

    pins = [f["message"] for f in checks["versions.pins"]["findings"] if f["status"] == "fail"]
    # torch's local version label (+cpu) is reported as installed
    assert "torch_npu 2.14.0 requires torch==2.14.0.*; found 2.13.0+cpu" in pins
    assert "vllm_ascend 0.23.0 requires torch==2.10.0; found 2.13.0+cpu" in pins
    assert any("torch-npu==2.10.0.post4; found 2.14.0" in m for m in pins)

    (imp,) = checks["torch_npu.import"]["findings"]
    assert imp["status"] == "fail"
    assert imp["message"].endswith(
        "ImportError: libhccl.so: cannot open shared object file: No such file or directory")
