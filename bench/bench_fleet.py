"""`ascend-doctor fleet DIR` over N bundles against what a user would otherwise run: N times
`ascend-doctor check --bundle B --json` (a shell loop; one fresh process per bundle).

The bundles are the demo scenario with variations (``make_variants``): every node its own
hostname, every 10th (from the 4th) an ld.so.conf that puts the Ascend directories first,
every 10th (from the 8th) another driver version. The peer is measured on ``PEER_SAMPLE``
bundles and scaled to N (its cost is per bundle); ours runs all N in one process, so its RSS
shows whether memory stays bounded as N grows.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import doctor_exe, measure, measure_once, row  # noqa: E402

PEER_SAMPLE = 5
LDCONF_FIXED = (b"/usr/local/Ascend/driver/lib64\n/usr/local/Ascend/ascend-toolkit/latest/lib64\n"
                b"include /etc/ld.so.conf.d/*.conf\n")
DRIVER_OTHER = b"23.0.3"


def _put_file(data, path: str, content: bytes) -> None:
    data.index.setdefault("read", {})[path] = [{"blob": data.blob(content)}]


def make_variants(outdir: str, n: int) -> list[str]:
    """Write n bundles (node-000.tar.gz …) derived from the demo; returns their paths."""
    from ascend_doctor.bundle import BundleData
    from ascend_doctor.demo import demo_bundle_bytes

    base = demo_bundle_bytes()
    paths = []
    driver_path = "/usr/local/Ascend/driver/version.info"
    for i in range(n):
        data = BundleData.load(base)
        name = f"node-{i:03d}"
        host = dict(data.index["info"][""][0], hostname=name)
        data.index["info"][""] = [host]
        data.manifest["host"] = dict(data.manifest.get("host", {}), hostname=name)
        if i % 10 == 3:
            _put_file(data, "/etc/ld.so.conf", LDCONF_FIXED)
        if i % 10 == 7:
            old = data.blobs[data.index["read"][driver_path][0]["blob"]]
            lines = [b"Version=" + DRIVER_OTHER if ln.startswith(b"Version=") else ln
                     for ln in old.split(b"\n")]
            _put_file(data, driver_path, b"\n".join(lines))
        p = os.path.join(outdir, f"{name}.tar.gz")
        data.write(p)
        paths.append(p)
    return paths


def run(quick: bool = False) -> list[dict]:
    """Rows for 10 and 50 bundles (quick) or 10, 100 and 1 000: one run each (the 1 000 take
    minutes on two cores), the bundles freshly written so the page cache is warm."""
    sizes = (10, 50) if quick else (10, 100, 1000)
    exe = doctor_exe()
    env = {**os.environ, "CI": "true", "NO_COLOR": "1"}
    rows = []
    with tempfile.TemporaryDirectory() as d:
        paths = make_variants(d, max(sizes))
        one = measure([exe, "check", "--bundle", paths[0], "--json"], PEER_SAMPLE, env=env,
                      ok_codes=(0, 1))
        for n in sizes:
            sub = os.path.join(d, f"n{n}")
            os.mkdir(sub)
            for p in paths[:n]:
                os.symlink(p, os.path.join(sub, os.path.basename(p)))
            dt, mb, rc = measure_once([exe, "fleet", sub, "--json"], env=env)
            if rc != 1:  # the variants differ: odd nodes, exit 1
                raise RuntimeError(f"fleet over {n} bundles exited {rc}")
            rows.append(row(f"fleet DIR of {n} demo-variant bundles", (dt, mb),
                            f"{n} x check --bundle --json", (one[0] * n, one[1]),
                            f"one run; peer: median of {PEER_SAMPLE} single runs x {n}, "
                            "its RSS that of one run"))
    return rows


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=1))
