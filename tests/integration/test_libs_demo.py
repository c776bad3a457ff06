"""The demo scenario carries the library findings: libascendcl.so / libhccl.so unresolved in
the service's environment, the unreached mode-600 ascend.conf — and stays fast."""

from __future__ import annotations

import json
import time


def test_demo_shows_unresolved_ascend_libraries(cli):
    t = time.monotonic()
    r = cli("demo", "--json", "--only", "libs")
    elapsed = time.monotonic() - t
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    checks = {c["id"]: c for c in doc["checks"]}
    fails = [f for f in checks["libacl.resolve"]["findings"] if f["status"] == "fail"]
    libs = {f["evidence"]["library"]: f for f in fails}
    assert {"libascendcl.so", "libhccl.so"} <= set(libs)
    hccl = libs["libhccl.so"]
    assert any(n.endswith("torch_npu/lib/libtorch_npu.so") for n in hccl["evidence"]["needed_by"])
    assert "/usr/local/Ascend/ascend-toolkit/" in hccl["message"]  # where the file really is
    # its directory is named only in the unreached, mode-600 ascend.conf: the conf is the fix
    assert hccl["fix"]["id"] == "ldconf.ascend-conf"
    assert "/etc/ld.so.conf.d/ascend.conf (as /usr/local/Ascend/ascend-toolkit/latest/lib64)" \
        in hccl["message"]
    # torch is installed on the demo host: its libraries are pre-loaded, never blamed
    assert "libtorch.so" not in libs and "libc10.so" not in libs
    assert checks["ldconf.reached"]["status"] == "fail"
    assert any("0600" in f["message"] for f in checks["ldconf.perms"]["findings"])
    assert doc["duration_s"] < 1.0 and elapsed < 10
