"""Build the demo scenario bundle from its parts (``doctor/demo/parts/*.py``).

Each part holds one concern of the broken host (ld.so.conf, packages, npu-smi, the
service, captures, profiles, audit logs) and writes real formats through a BundleWriter.
Run ``python -m ascend_doctor.demo.build`` after changing a part; the test suite fails when the
shipped bundle differs from a fresh build.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys

from ..bundle import BundleWriter
from ..model import HostInfo

HOST = HostInfo(hostname="atlas800t-a2-07", kernel="5.15.0-105-generic", arch="x86_64",
                os="Ubuntu 22.04.4 LTS")


def build() -> bytes:
    w = BundleWriter(HOST, context="demo", created="2026-11-20T03:12:00Z")
    from . import parts

    inputs: dict[str, str] = {}
    for info in sorted(pkgutil.iter_modules(parts.__path__), key=lambda i: i.name):
        mod = importlib.import_module(f"{parts.__name__}.{info.name}")
        mod.build(w)
        inputs.update(getattr(mod, "DEMO_INPUTS", {}))  # e.g. pcap, profile_dir, block_audit
    # the inputs twice: "demo_inputs" for `demo`, and as collection options (the names of
    # doctor/replay.py) so `demo --export F && check --bundle F` replays them as `demo` does
    return w.finish(options={"scenario": "8x910B DeepSeek serving host, seed 000_93c34712512482cd.txt",
                             "demo_inputs": dict(sorted(inputs.items())),
                             **dict(sorted(inputs.items()))}).to_bytes()


def target() -> str:
    return os.path.join(os.path.dirname(__file__), "scenario.tar.gz")


def main() -> int:
    data = build()
    with open(target(), "wb") as fh:
        fh.write(data)
    print(f"wrote {target()} ({len(data)} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
