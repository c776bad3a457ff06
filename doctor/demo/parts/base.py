"""The host itself: OS files, ld.so.conf as the seed found it, the Python packages.

Seed 000_93c34712512482cd.txt: /etc/ld.so.conf.d/ascend.conf had the toolkit before
driver/lib64, mode 600, and /etc/ld.so.conf did not include the conf directory; pip had
upgraded torch under vllm-ascend.
"""

from __future__ import annotations

import json

from ...bundle import BundleWriter
from ...probes.packages import _SCRIPT

TOOLKIT = "/usr/local/Ascend/ascend-toolkit/latest"
SITE = "/usr/local/lib/python3.11/site-packages"

OS_RELEASE = """PRETTY_NAME="Ubuntu 22.04.4 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.4 LTS (Jammy Jellyfish)"
VERSION_CODENAME=jammy
ID=ubuntu
ID_LIKE=debian
"""

# Real Requires-Dist lines of vllm-ascend 0.23.0 and torch_npu 2.10.0.post4 (facts/observed-wheels.md)
VLLM_ASCEND_REQUIRES = [
    "torch==2.10.0", "torch-npu==2.10.0.post4", "torchvision==0.25.0", "torchaudio==2.10.0",
    "triton-ascend==3.2.2", "transformers==5.5.4", "arctic-inference==0.1.1",
    "fastapi<0.124.0", "numpy", "packaging", "pybind11", "pyyaml", "scipy", "setuptools>=64",
]


LSCPU = """Architecture:                       x86_64
CPU op-mode(s):                     32-bit, 64-bit
Address sizes:                      46 bits physical, 57 bits virtual
Byte Order:                         Little Endian
CPU(s):                             192
On-line CPU(s) list:                0-191
Vendor ID:                          GenuineIntel
Model name:                         Intel(R) Xeon(R) Platinum 8480+
CPU family:                         6
Model:                              143
Thread(s) per core:                 2
Core(s) per socket:                 48
Socket(s):                          2
NUMA node(s):                       2
NUMA node0 CPU(s):                  0-47,96-143
NUMA node1 CPU(s):                  48-95,144-191
"""


def packages_json() -> str:
    def pkg(name, version, requires=(), eps=(), files=()):
        return {"name": name, "version": version, "requires": list(requires),
                "requires_python": ">=3.10", "entry_points": [list(e) for e in eps],
                "location": SITE, "files": list(files)}

    pkgs = {
        "vllm": pkg("vllm", "0.23.0", ["torch==2.10.0", "transformers>=4.56.0"],
                    [("console_scripts", "vllm", "vllm.entrypoints.cli.main:main")]),
        "vllm-ascend": pkg("vllm_ascend", "0.23.0", VLLM_ASCEND_REQUIRES,
                           [("vllm.platform_plugins", "ascend", "vllm_ascend:register"),
                            ("vllm.general_plugins", "ascend_model", "vllm_ascend:register_model")],
                           ["vllm_ascend/vllm_ascend_C.cpython-311-x86_64-linux-gnu.so",
                            "vllm_ascend/libvllm_ascend_kernels.so"]),
        "torch": pkg("torch", "2.13.0", ["filelock", "typing-extensions>=4.10.0", "sympy>=1.13.3"]),
        "torch-npu": pkg("torch_npu", "2.10.0.post4", ["torch==2.10.0.*", "numpy", "pyyaml"],
                         [("torch.backends", "torch_npu", "torch_npu:_autoload")],
                         ["torch_npu/lib/libtorch_npu.so",
                          "torch_npu/_C.cpython-311-x86_64-linux-gnu.so"]),
        "torchvision": pkg("torchvision", "0.25.0", ["torch==2.10.0"]),
        "torchaudio": pkg("torchaudio", "2.10.0", ["torch==2.10.0"]),
        "triton-ascend": pkg("triton-ascend", "3.2.2"),
        "transformers": pkg("transformers", "5.5.4"),
        "numpy": pkg("numpy", "2.2.6"),
    }
    return json.dumps({"python": "3.11.7", "executable": "/usr/local/bin/python3",
                       "implementation": "CPython", "packages": pkgs})


def dist_infos(w: BundleWriter) -> None:
    """The same packages as installed files: what the server's interpreter imports from."""
    for p in json.loads(packages_json())["packages"].values():
        info = f"{SITE}/{p['name'].replace('-', '_')}-{p['version']}.dist-info"
        meta = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
                f"Requires-Python: {p['requires_python']}"]
        meta += [f"Requires-Dist: {r}" for r in p["requires"]]
        w.file(f"{info}/METADATA", "\n".join(meta) + "\n")
        groups: dict[str, list[str]] = {}
        for group, name, value in p["entry_points"]:
            groups.setdefault(group, []).append(f"{name} = {value}")
        if groups:
            w.file(f"{info}/entry_points.txt",
                   "".join(f"[{g}]\n" + "\n".join(v) + "\n\n" for g, v in groups.items()))
        w.file(f"{info}/RECORD", "".join(f"{f},sha256=,\n" for f in p["files"]))


def build(w: BundleWriter) -> None:
    w.file("/etc/os-release", OS_RELEASE)
    w.file("/etc/hostname", "atlas800t-a2-07\n")
    w.file("/proc/sys/kernel/osrelease", "5.15.0-105-generic\n")
    # /etc/ld.so.conf lost its include line: nothing under ld.so.conf.d is read.
    w.file("/etc/ld.so.conf", "/usr/local/lib\n/usr/lib/x86_64-linux-gnu\n")
    w.file("/etc/ld.so.conf.d/libc.conf", "# libc default configuration\n/usr/local/lib\n")
    w.file("/etc/ld.so.conf.d/x86_64-linux-gnu.conf",
           "# Multiarch support\n/usr/local/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu\n"
           "/usr/lib/x86_64-linux-gnu\n")
    # ascend.conf: toolkit before driver, and mode 600 (seed: ldconfig skipped it)
    w.file("/etc/ld.so.conf.d/ascend.conf",
           f"{TOOLKIT}/lib64\n{TOOLKIT}/lib64/plugin/opskernel\n"
           "/usr/local/Ascend/driver/lib64\n/usr/local/Ascend/driver/lib64/common\n"
           "/usr/local/Ascend/driver/lib64/driver\n", mode=0o600)
    w.command(["python3", "-c", _SCRIPT], packages_json())
    dist_infos(w)
    # what collect_env asks for, in the tools' real output formats
    w.command(["gcc", "--version"], "gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0\n"
              "Copyright (C) 2021 Free Software Foundation, Inc.\n")
    w.command(["ldd", "--version"], "ldd (Ubuntu GLIBC 2.35-0ubuntu3.8) 2.35\n"
              "Copyright (C) 2022 Free Software Foundation, Inc.\n")
    w.command(["cmake", "--version"], "cmake version 3.22.1\n\nCMake suite maintained and "
              "supported by Kitware (kitware.com/cmake).\n")
    w.command(["lscpu"], LSCPU)
