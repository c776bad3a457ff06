"""The Ascend stack of the demo host: an Atlas 800T A2 with 8 x 910B4 (32 GB HBM, seed 000).

What is broken, and why it is plausible:
- CANN 8.3.RC2 toolkit in the classic layout (``ascend-toolkit/latest`` -> ``8.3.RC2``) under
  torch_npu 2.10.0.post4, which is built for CANN 9.1.0 (strict pairing, seed 000).
- A new driver 24.1.rc3 was installed over 23.0.3 (the seed's HDK) without a reboot:
  version.info says 24.1.rc3, npu-smi still reports 23.0.3 (seed 000: 驱动安装后必须重启); and
  24.1.rc3's ``compatible_version`` does not list the toolkit's V100R001C23 (seed 003's
  driver/CANN/torch triple).
- NPU 3 at 86 °C (a failed fan, seed 000 §4.3), NPU 5 health Warning, NPU 7 holds 2100 MB for
  pid 3121, which has exited (a leaked device context).
- ``import torch_npu`` fails on libhccl.so: set_env.sh was never sourced for the service and
  ascend.conf is unreadable (see parts/base.py); the traceback is the real one
  (facts/observed-wheels.md) with this host's paths.
Formats: facts/ascend-stack.md §2.3 (version files), §3.1/§3.2 (npu-smi).
"""

from __future__ import annotations

from ...bundle import BundleWriter

ASCEND = "/usr/local/Ascend"
TK_VER = "8.3.RC2"
TK = f"{ASCEND}/ascend-toolkit/{TK_VER}"
SITE = "/usr/local/lib/python3.11/site-packages"
NPUS = 8
HOT_NPU, WARN_NPU, LEAK_NPU = 3, 5, 7
WORKER_PID0 = 4731  # VLLMWorker_TP<i> processes (parts/service.py: children of EngineCore 4720)
LEAK_PID = 3121
# interpreters the import probe may pick: python3 (no server), or the server's exe / argv[0]
INTERPRETERS = ("python3", "/usr/local/bin/python3", "/usr/local/bin/python3.11")

TOOLKIT_INFO = f"""package_name=Ascend-cann-toolkit
version={TK_VER}
innerversion=V100R001C23SPC002B210
compatible_version=[V100R001C15],[V100R001C18],[V100R001C19],[V100R001C20],[V100R001C21],[V100R001C23]
arch=x86_64
os=linux
path={TK}/x86_64-linux
"""

VERSION_CFG = "# version: 1.0\n" + "".join(
    f"{c}_{k}_version=[7.8.0.2.210:{TK_VER}]\n"
    for k in ("running", "upgrade", "installed")
    for c in ("runtime", "compiler", "hccl", "opp", "toolkit", "aoe", "ncs"))

DRIVER_INFO = """Version=24.1.rc3
ascendhal_version=7.35.23
aicpu_version=1.0
tdt_version=1.0
log_version=1.0
prof_version=2.0
dvppkernels_version=1.1
tsfw_version=1.0
Innerversion=V100R001C19SPC005B220
compatible_version=[V100R001C15],[V100R001C17],[V100R001C18],[V100R001C19]
compatible_version_fw=[7.0.0,7.5.99]
"""

FIRMWARE_INFO = """Version=7.5.0.1.129
firmware_version=1.0
package_version=24.1.rc3
compatible_version_drv=[24.1.rc3,24.1.rc3.]
"""

BUILD_INFO = "# Auto-generated file\n__device_type__ = 'A2'\n"

SEP = "+===========================+===============+====================================================+"


def npu_smi_info() -> str:
    temps = [47, 49, 46, 86, 48, 51, 45, 44]
    lines = [
        "+------------------------------------------------------------------------------------------------+",
        "| npu-smi 23.0.3                   Version: 23.0.3                                               |",
        "+---------------------------+---------------+----------------------------------------------------+",
        "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|",
        "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |",
        SEP,
    ]
    buses = ["C1", "C2", "81", "82", "01", "02", "41", "42"]
    for i in range(NPUS):
        health = "Warning" if i == WARN_NPU else "OK"
        hbm = 3100 if i == LEAK_NPU else 27420
        if i == LEAK_NPU:
            hbm += 2100
        lines.append(f"| {i:<5} {'910B4':<19} | {health:<13} | {88.0 + i:<11.1f} {temps[i]:<17} "
                     f"{'0    / 0':<21}|")
        lines.append(f"| {0:<25} | 0000:{buses[i]}:00.0  | {0:<11} {'0    / 0':<17} "
                     f"{f'{hbm} / 32768':<21}|")
        lines.append(SEP)
    lines += [
        "+---------------------------+---------------+----------------------------------------------------+",
        "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |",
        SEP,
    ]
    for i in range(NPUS):
        if i == LEAK_NPU:
            lines.append(f"| {i:<7} {0:<17} | {LEAK_PID:<13} | {'python3':<24} | {2100:<23} |")
        else:
            lines.append(f"| {i:<7} {0:<17} | {WORKER_PID0 + i:<13} | {'VLLMWorker_TP' + str(i):<24} "
                         f"| {24320:<23} |")
        lines.append(SEP)
    return "\n".join(lines) + "\n"


def health(i: int) -> str:
    """``npu-smi info -t health -i N -c 0`` in its per-chip layout (captured in
    tests/fixtures/npusmi/captured/health-ok-faultdiag.txt); NPU 5 in Warning, no code."""
    h = "Warning" if i == WARN_NPU else "OK"
    return (f"\t{'Health Status':<30} : {h}\n"
            f"\t{'Error Code':<30} : NA\n"
            f"\t{'Error Information':<30} : NA\n")


def board(i: int) -> str:
    """``npu-smi info -t board -i N`` (card level, as in tests/fixtures/npusmi/captured/
    board-card-910a.txt): the running driver 23.0.3 and the installed firmware."""
    buses = ["C1", "C2", "81", "82", "01", "02", "41", "42"]
    rows = [("NPU ID", str(i)), ("Software Version", "23.0.3"),
            ("Firmware Version", "7.5.0.1.129"), ("Compatibility", "OK"), ("Board ID", "0x22"),
            ("PCB ID", "A"), ("BOM ID", "1"), ("PCIe Bus Info", f"0000:{buses[i]}:00.0"),
            ("Slot ID", str(i)), ("Class ID", "NA"), ("PCI Vendor ID", "0x19E5"),
            ("PCI Device ID", "0xD802"), ("Subsystem Vendor ID", "0x0200"),
            ("Subsystem Device ID", "0x0100"), ("Chip Count", "1")]
    return "".join(f"\t{k:<30} : {v}\n" for k, v in rows)


IMPORT_TRACEBACK = f"""Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "{SITE}/torch_npu/__init__.py", line 38, in <module>
    import torch_npu.utils.patch_getenv
  File "{SITE}/torch_npu/utils/__init__.py", line 4, in <module>
    from torch_npu.npu.utils import get_cann_version
  File "{SITE}/torch_npu/npu/__init__.py", line 164, in <module>
    from .utils import (obfuscation_initialize, obfuscation_calculate, obfuscation_finalize,
  File "{SITE}/torch_npu/npu/utils.py", line 8, in <module>
    import torch_npu._C
ImportError: libhccl.so: cannot open shared object file: No such file or directory
"""


def build(w: BundleWriter) -> None:
    # CANN toolkit, classic layout with the `latest` link
    w.file(f"{TK}/x86_64-linux/ascend_toolkit_install.info", TOOLKIT_INFO)
    w.file(f"{TK}/version.cfg", VERSION_CFG)
    w.dir(f"{TK}/lib64")
    w.dir(f"{TK}/runtime")
    w.dir(f"{TK}/compiler")
    w.symlink(f"{ASCEND}/ascend-toolkit/latest", TK_VER)
    w.file(f"{ASCEND}/ascend-toolkit/set_env.sh",
           f"export ASCEND_TOOLKIT_HOME={ASCEND}/ascend-toolkit/latest\n"
           "export ASCEND_HOME_PATH=${ASCEND_TOOLKIT_HOME}\n")
    # driver installed, not active; firmware
    w.file(f"{ASCEND}/driver/version.info", DRIVER_INFO)
    w.dir(f"{ASCEND}/driver/lib64/driver")
    w.file(f"{ASCEND}/firmware/version.info", FIRMWARE_INFO)
    w.file("/etc/ascend_install.info",
           f"Driver_Install_Type=full\nDriver_Install_Path_Param={ASCEND}\n")
    # npu-smi and its key/value sub-commands
    w.command(["npu-smi", "info"], npu_smi_info())
    for i in range(NPUS):
        w.command(["npu-smi", "info", "-t", "health", "-i", str(i), "-c", "0"], health(i))
    for i in range(NPUS):
        w.command(["npu-smi", "info", "-t", "board", "-i", str(i)], board(i))
    # the vLLM workers themselves are declared by parts/service.py (pids 4731..4738)
    # device nodes: root:HwHiAiUser (gid 1000), 0660
    for i in range(NPUS):
        w.device(f"/dev/davinci{i}", mode=0o660, gid=1000)
    for name in ("davinci_manager", "devmm_svm", "hisi_hdc"):
        w.device(f"/dev/{name}", mode=0o660, gid=1000)
    w.file("/proc/1/cgroup", "0::/init.scope\n")
    # what vllm_ascend was built for, at the package location of parts/base.py
    w.file(f"{SITE}/vllm_ascend/_build_info.py", BUILD_INFO)
    for python in INTERPRETERS:
        w.command([python, "-c", "import torch_npu"], b"", rc=1, stderr=IMPORT_TRACEBACK,
                  duration=2.4)
